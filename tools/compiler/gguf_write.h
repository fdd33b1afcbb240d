/* GGUF v3 writer: collects metadata and tensor descriptions, then streams
 * the file out. Tensor payloads are produced by a callback at write time so
 * multi-gigabyte models never sit in memory. */
#ifndef NIB_GGUF_WRITE_H
#define NIB_GGUF_WRITE_H

#include <stdint.h>
#include <stdio.h>

struct gguf_writer;

/* Fill buf (nbytes, a whole number of the tensor's blocks) with the tensor
 * payload starting at byte `at` of that tensor. Return 0, or -1 to abort. */
typedef int (*gguf_fill_fn)(void *ctx, uint64_t at, void *buf, uint64_t nbytes);

/* version 2 or 3 (same layout); alignment a power of two (GGUF default 32).
 * The add functions below report nothing: the first bad argument or failed
 * allocation is remembered and returned by gguf_writer_write. */
struct gguf_writer *gguf_writer_new(uint32_t version, uint32_t alignment);
void gguf_writer_free(struct gguf_writer *w);

void gguf_w_u32(struct gguf_writer *w, const char *key, uint32_t v);
void gguf_w_i32(struct gguf_writer *w, const char *key, int32_t v);
void gguf_w_f32(struct gguf_writer *w, const char *key, float v);
void gguf_w_bool(struct gguf_writer *w, const char *key, int v);
void gguf_w_str(struct gguf_writer *w, const char *key, const char *v);
/* The remaining scalar types, for completeness and round-trip tests. */
void gguf_w_u8(struct gguf_writer *w, const char *key, uint8_t v);
void gguf_w_i8(struct gguf_writer *w, const char *key, int8_t v);
void gguf_w_u16(struct gguf_writer *w, const char *key, uint16_t v);
void gguf_w_i16(struct gguf_writer *w, const char *key, int16_t v);
void gguf_w_u64(struct gguf_writer *w, const char *key, uint64_t v);
void gguf_w_i64(struct gguf_writer *w, const char *key, int64_t v);
void gguf_w_f64(struct gguf_writer *w, const char *key, double v);
/* Arrays; lens may be NULL for NUL-terminated strings. */
void gguf_w_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
                    const uint32_t *lens, uint64_t n);
void gguf_w_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n);
void gguf_w_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* Array of any fixed-size element type (enum gguf_type other than STRING and
 * ARRAY); v holds n elements in host layout (bool: one byte each). */
void gguf_w_arr(struct gguf_writer *w, const char *key, uint32_t elem_type, const void *v,
                uint64_t n);

/* ne[0] is the input (fastest) dimension. fill is called with ctx during
 * gguf_writer_write, in tensor order, in chunks. */
void gguf_w_tensor(struct gguf_writer *w, const char *name, uint32_t ggml_type, uint32_t n_dims,
                   const uint64_t *ne, gguf_fill_fn fill, void *ctx);

/* Tensor whose payload is already in memory (copied by pointer; must stay valid
 * until gguf_writer_write returns). */
void gguf_w_tensor_data(struct gguf_writer *w, const char *name, uint32_t ggml_type,
                        uint32_t n_dims, const uint64_t *ne, const void *data);

/* Write everything; 0 or -1 with a message in err. */
int gguf_writer_write(struct gguf_writer *w, FILE *out, char *err, size_t errlen);

#endif
