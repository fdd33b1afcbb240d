/* safetensors reader: parses a whole file held in memory (an 8-byte
 * little-endian header length, a JSON header, then the data section) and
 * validates everything before anything is used. Nothing in the file is
 * trusted:
 *   - the header length lies in [2, ST_MAX_HEADER] and inside the file;
 *   - the header is strict JSON (tools/util/json.h: duplicate keys are
 *     refused there, so no tensor name appears twice) holding one object;
 *     "__metadata__", when present, is an object of strings;
 *   - every other member is a tensor: an object of exactly "dtype",
 *     "shape" and "data_offsets"; dtype F32, F16 or BF16 (any other
 *     safetensors dtype is refused by name); shape of rank 1..4 with every
 *     dimension in [1, 2^32) and no overflow of the byte count;
 *     data_offsets [begin, end] with end - begin the tensor's byte count,
 *     end inside the data section, and no two tensors overlapping.
 * Holes between tensors and bytes after the last one are allowed.
 *
 * Each tensor is described by a struct gguf_tensor (tools/compiler/gguf.h),
 * the same descriptor GGUF tensors use: ne reversed from the row-major
 * shape (ne[0] = the last, fastest-varying dimension; unused dims 1), type
 * GGML_TYPE_F32 / F16 / BF16, data pointing into the caller's buffer (which
 * must outlive the st_file), offset relative to the data section. The data
 * need not be aligned: readers convert bytes (llama_weight_row_f32). */
#ifndef NIB_SAFETENSORS_H
#define NIB_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tools/compiler/gguf.h"

#define ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */
#define ST_MAX_NAME 512u           /* bytes of a tensor name */

struct json_doc;

struct st_file {
    const uint8_t *buf;
    size_t size;
    uint64_t header_len;
    const uint8_t *data; /* the data section: buf + 8 + header_len */
    uint64_t data_size;
    uint32_t n_tensors;
    struct gguf_tensor *tensors; /* n_tensors, in header order (malloc'd); names
                                  * point into the parsed header and are NUL-terminated */
    struct json_doc *doc;        /* the parsed header */
};

/* Parse and validate buf[0..size). 0, or -1 with a message naming the
 * problem (and the tensor) in err; on failure nothing needs freeing, on
 * success call st_close. */
int st_open(struct st_file *f, const uint8_t *buf, size_t size, char *err, size_t errlen);
void st_close(struct st_file *f);

/* The tensor called name, or NULL. */
const struct gguf_tensor *st_find(const struct st_file *f, const char *name);

/* The __metadata__ string value of key, or NULL. */
const char *st_metadata(const struct st_file *f, const char *key);

#endif
