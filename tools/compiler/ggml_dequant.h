/* ggml tensor types as GGUF stores them: the block geometry and name of
 * every type nibble reads, and row dequantization to f32 that gives the
 * same bits as ggml's reference dequantization (ggml-quants.c). */
#ifndef NIB_GGML_DEQUANT_H
#define NIB_GGML_DEQUANT_H

#include <stdint.h>

#include "kernels/f16.h"

/* The ggml tensor types nibble reads (GGUF tensor infos carry these
 * numbers; others are refused by name, tools/compiler/gguf.c). */
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_BF16 = 30,
};

/* One ggml type: `blck` elements are stored in `bytes` bytes. */
struct ggml_type_info {
    const char *name; /* as llama.cpp names it: "f32", "q4_K", "iq4_nl", ... */
    uint32_t blck;
    uint32_t bytes;
};

/* The entry for a type nibble reads, or NULL (an unknown or unsupported
 * type number). */
const struct ggml_type_info *ggml_type_info(uint32_t type);

/* The types nibble reads, for error messages: "f32, f16, bf16, q4_0, ...". */
const char *ggml_supported_types(void);

/* Dequantize n elements of `type` starting at p (the first byte of a
 * block) into out. n must be a whole number of blocks. Returns 0, or -1
 * for an unknown type or a partial block (nothing written). */
int ggml_dequant_row(uint32_t type, const uint8_t *p, uint64_t n, float *out);

/* ---- block fields, for exact repacks (tools/compiler/repack.c) ----
 * `blk` is the first byte of one block; e an element, s / j a sub-block.
 * Each scale and min is the exact f32 value ggml's dequantization uses. */
extern const int8_t ggml_iq4_values[16]; /* the IQ4_NL / IQ4_XS codebook */
void ggml_q2_k_sub(const uint8_t *blk, int s, float *scale, float *min); /* x = scale*q - min */
int ggml_q2_k_code(const uint8_t *blk, int e);                           /* 0..3 */
int ggml_q3_k_scale6(const uint8_t *blk, int s);                         /* 0..63 */
float ggml_q3_k_scale(const uint8_t *blk, int s);                        /* d * (sc - 32) */
int ggml_q3_k_code(const uint8_t *blk, int e); /* 0..7: x = scale * (code - 4) */
void ggml_k_scale_min6(const uint8_t *sc, int j, int *scale, int *min); /* Q4_K/Q5_K 6-bit */
void ggml_k_sub(const uint8_t *blk, int j, float *scale, float *min);   /* x = scale*q - min */
int ggml_q4_k_code(const uint8_t *blk, int e);                          /* 0..15 */
int ggml_q5_k_code(const uint8_t *blk, int e);                          /* 0..31 */
float ggml_q6_k_scale(const uint8_t *blk, int s);                       /* d * sc */
int ggml_q6_k_code(const uint8_t *blk, int e);      /* -32..31: x = scale * code */
float ggml_iq4_xs_scale(const uint8_t *blk, int j); /* d * (ls - 32) */
int ggml_iq4_xs_index(const uint8_t *blk, int e);   /* 0..15 into ggml_iq4_values */

/* The little-endian f16 at p, as a float (every block scale of ggml's
 * types; shared by the dequantizer and the exact repacks). */
static inline float ggml_f16_at(const uint8_t *p)
{
    return nib_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

#endif
