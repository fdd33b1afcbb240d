/* The vision kernels' epilogues (common/conv-epi.h) 8 channels at a time
 * for the AVX2 variants: each lane runs the scalar operations for its
 * channel in the same order. The selects are maxps/minps with the operand
 * order that gives the scalar select's result for NaN and signed zeros
 * (maxps(a, b) is a > b ? a : b, minps(a, b) is a < b ? a : b). */
#ifndef NIB_CONV_EPI_AVX2_H
#define NIB_CONV_EPI_AVX2_H

#include <immintrin.h>

#include "kernels/common/conv-epi.h"

/* nib_requant_s8 per lane, 8 int8 to y. */
static inline void nib_requant8_avx2(__m256 v, __m256 inv, int8_t *y)
{
    const __m256 round = _mm256_set1_ps(12582912.0f);
    __m256 r = _mm256_sub_ps(_mm256_fmadd_ps(v, inv, round), round);
    r = _mm256_max_ps(_mm256_set1_ps(-127.0f), r);         /* r < -127 ? -127 : r (NaN kept) */
    r = _mm256_min_ps(_mm256_set1_ps(127.0f), r);          /* r > 127 ? 127 : r (NaN kept) */
    r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN: 0 */
    __m256i i = _mm256_cvtps_epi32(r);                     /* whole numbers: exact */
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    __m128i b = _mm_packs_epi16(w, w);
    _mm_storel_epi64((__m128i *)(void *)y, b);
}

/* nib_act_f32 per lane. */
static inline __m256 nib_act8_avx2(__m256 v, uint32_t act, __m256 p0, __m256 p1)
{
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    __m256 t;
    switch (act) {
    case NIB_ACT_RELU: return _mm256_max_ps(v, zero); /* v > 0 ? v : 0 */
    case NIB_ACT_CLIP:
        /* v < p0 ? p0 : v, then v > p1 ? p1 : v */
        return _mm256_min_ps(p1, _mm256_max_ps(p0, v));
    case NIB_ACT_HSIGMOID:
    case NIB_ACT_HSWISH:
        t = _mm256_max_ps(_mm256_fmadd_ps(p0, v, p1), zero); /* NaN: 0 */
        t = _mm256_min_ps(t, one);                           /* t < 1 ? t : 1 */
        return act == NIB_ACT_HSWISH ? _mm256_mul_ps(v, t) : t;
    default: return v;
    }
}

/* nib_conv_epi_f32 for the 8 channels c0.. of one pixel: acc the sums,
 * res the residual at the same place (or NULL); returns the outputs. */
static inline __m256 nib_conv_epi8_f32_avx2(const struct nib_conv_epi *e, __m256 acc,
                                            const float *res, uint32_t c0)
{
    if (e->bias)
        acc = _mm256_add_ps(acc, _mm256_loadu_ps(e->bias + c0));
    if (res && e->res_first)
        acc = _mm256_add_ps(acc, _mm256_loadu_ps(res));
    acc = nib_act8_avx2(acc, e->act, _mm256_set1_ps(e->p0), _mm256_set1_ps(e->p1));
    if (res && !e->res_first)
        acc = _mm256_add_ps(acc, _mm256_loadu_ps(res));
    return acc;
}

#endif
