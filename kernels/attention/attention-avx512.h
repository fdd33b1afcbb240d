/* The 512-bit steps of the AVX2 attention (attention-f32-avx512.c): the
 * AVX2 kernel calls them where nib_avx512vnni_available(), for the
 * shapes they cover, and runs its own steps for the rest. Every
 * accumulator performs the scalar reference's operations in its order,
 * so the bits do not change. Include only from the x86 AVX2 build. */
#ifndef NIB_ATTENTION_AVX512_H
#define NIB_ATTENTION_AVX512_H

#include <stddef.h>

/* Head sizes the scores step takes: multiples of 8 up to this many
 * chunks of 8 (256 dims). */
#define NIB_ATTENTION_AVX512_MAX_CHUNKS 32

/* Raw scores (tree8 x scale) of the four query heads qh[0..4), head_dim
 * a multiple of 8 of at most 8 x NIB_ATTENTION_AVX512_MAX_CHUNKS, for
 * keys j, j + 1, ... in blocks of four while a whole block fits before
 * j_end; k is their KV head's first row, row_stride floats apart.
 * Returns the first key not done (j_end - (j_end - j) % 4). Two heads
 * are left to the AVX2 steps: one pair per register with eight keys,
 * eight K broadcasts per eight FMAs, measured slower. */
size_t nib_attention_scores4_avx512(const float *const *qh, const float *k, size_t row_stride,
                                    size_t head_dim, float scale, float *const *a, size_t j,
                                    size_t j_end);

/* Output dims [i, i + 64) of heads 1, 2 or 4 (o[0..heads)) over keys
 * [j, j_end): o_h[d] = fma over keys in order of w_h[t] * v[t][d], from +0
 * when first, else from what o_h holds. */
void nib_attention_out64_avx512(const float *const *w, const float *v, size_t row_stride,
                                float *const *o, size_t i, size_t j, size_t j_end, int first,
                                int heads);

/* The softmax of one head's scores a[0..n) without a soft-cap, as the
 * AVX2 kernel's softmax_head: max, exp(s - max), the sum in the
 * reference's 8 lanes, the weights term / sum; 16 lanes at a time. */
void nib_attention_softmax_avx512(float *a, size_t n);

#endif
