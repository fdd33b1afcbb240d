/* GGUF (v2/v3) reader: parses a whole file held in memory and validates
 * every count, length, offset and size before anything is used. Nothing in
 * the file is trusted. All strings and tensor data point into the caller's
 * buffer, which must outlive the gguf_file. */
#ifndef NIB_GGUF_H
#define NIB_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "tools/compiler/ggml_dequant.h" /* enum ggml_type, the type table */

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_DIMS 4

enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

struct gguf_str {
    uint64_t len;
    const char *ptr; /* not NUL-terminated */
};

struct gguf_kv {
    struct gguf_str key;
    uint32_t type;      /* enum gguf_type */
    uint32_t arr_type;  /* element type when type == ARRAY */
    uint64_t arr_n;     /* element count when type == ARRAY */
    const uint8_t *val; /* first byte of the value (or first array element) */
};

struct gguf_tensor {
    struct gguf_str name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the fastest-varying (input) dim; unused = 1 */
    uint32_t type;              /* enum ggml_type */
    uint64_t offset;            /* relative to the data section */
    uint64_t n_elems;
    uint64_t nbytes;
    const uint8_t *data; /* validated: data + nbytes lies inside the file */
};

struct gguf_file {
    const uint8_t *buf;
    size_t size;
    uint32_t version;
    uint64_t n_kv;
    uint64_t n_tensors;
    uint64_t alignment;
    struct gguf_kv *kv;          /* n_kv entries (malloc'd) */
    struct gguf_tensor *tensors; /* n_tensors entries (malloc'd) */
    const uint8_t *data;         /* start of the tensor data section */
};

/* Parse and validate. Returns 0, or -1 with a message naming the problem
 * (and the byte offset where it was found) in err. On failure nothing
 * needs freeing; on success call gguf_close. */
int gguf_open(struct gguf_file *f, const uint8_t *buf, size_t size, char *err, size_t errlen);
void gguf_close(struct gguf_file *f);

/* Bytes a tensor of this type and element count takes; 0 if the type is
 * unknown or n is not a whole number of blocks. */
uint64_t ggml_type_nbytes(uint32_t type, uint64_t n_elems);
const char *ggml_type_name(uint32_t type);
const char *gguf_type_name(uint32_t type);

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name);

/* Typed getters: 0 found and converted, -1 missing, -2 present but of a
 * type that does not convert (or out of range for the target). Any
 * integer type converts to u32 when it fits; f32/f64 convert to float. */
int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out);
int gguf_get_f32(const struct gguf_file *f, const char *key, float *out);
int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out);
int gguf_get_bool(const struct gguf_file *f, const char *key, int *out);

/* Element i of a validated array of f32 / of 32-bit integers (i32 or u32).
 * The caller has checked kv->arr_type and that i < kv->arr_n. */
float gguf_arr_f32(const struct gguf_kv *kv, uint64_t i);
int32_t gguf_arr_i32(const struct gguf_kv *kv, uint64_t i);

/* Exact conversions of IEEE half and bfloat16 bit patterns. */
float gguf_f16_to_f32(uint16_t h);
float gguf_bf16_to_f32(uint16_t h);

/* Walk a validated array of strings: *p starts at kv->val; each call
 * returns the next string and advances *p. */
struct gguf_str gguf_next_str(const uint8_t **p);

int gguf_str_eq(struct gguf_str s, const char *c);

/* A file string made safe to print: at most 64 bytes (then "..."), control
 * and non-ASCII bytes shown as '?', since names come from an untrusted file. */
const char *gguf_str_show(struct gguf_str s, char out[72]);

/* Bytes of one scalar of a metadata type; 0 for string, array and unknown. */
uint64_t gguf_scalar_size(uint32_t type);

#endif
