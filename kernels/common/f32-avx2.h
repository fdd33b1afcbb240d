/* AVX2 forms of kernels/common/f32-math.h: the same operations, 8 lanes at
 * a time (include only from AVX2 kernel files). */
#ifndef NIB_F32_AVX2_H
#define NIB_F32_AVX2_H

#include <immintrin.h>

#include "kernels/common/f32-math.h"

/* nib_tree8 of the 8 lanes of v. */
static inline float nib_tree8_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* j + (j+4) */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s)); /* (0+4)+(2+6), (1+5)+(3+7) */
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* All-ones in the first n (< 8) 32-bit lanes: maskload reads no further. */
static inline __m256i nib_tail_mask_avx2(size_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

/* nib_dot_lanes + nib_tree8. */
static inline float nib_dot_avx2(const float *a, const float *b, size_t n)
{
    __m256 acc = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    if (i < n) {
        __m256i m = nib_tail_mask_avx2(n - i);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc);
    }
    return nib_tree8_avx2(acc);
}

/* nib_expf of 8 lanes. */
static inline __m256 nib_exp8_avx2(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(NIB_EXP_MIN), round = _mm256_set1_ps(NIB_EXP_ROUND);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(NIB_EXP_MAX));
    __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(NIB_EXP_LOG2E)), round),
                             round);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NIB_EXP_LN2_HI), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NIB_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(nib_exp_c[0]);
    for (int i = 1; i < 8; i++)
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(nib_exp_c[i]));
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GE_OQ));
}

/* nib_tanhf of 8 lanes: both branches, then a select (NaN: the polynomial). */
static inline __m256 nib_tanh8_avx2(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    __m256 a = _mm256_andnot_ps(sign, x);
    __m256 e = nib_exp8_avx2(_mm256_add_ps(a, a));
    __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    __m256 z = _mm256_mul_ps(a, a), p = _mm256_set1_ps(nib_tanh_c[0]);
    for (int i = 1; i < 6; i++)
        p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(nib_tanh_c[i]));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(a, z), p, a);
    __m256 r =
        _mm256_blendv_ps(small, big, _mm256_cmp_ps(a, _mm256_set1_ps(NIB_TANH_SMALL), _CMP_GE_OQ));
    return _mm256_or_ps(r, _mm256_and_ps(x, sign));
}

/* nib_softcapf of 8 lanes (c > 0). */
static inline __m256 nib_softcap8_avx2(__m256 s, __m256 c)
{
    return _mm256_mul_ps(c, nib_tanh8_avx2(_mm256_div_ps(s, c)));
}

/* nib_gelu_mul1 of 8 lanes. */
static inline __m256 nib_gelu_mul8_avx2(__m256 a, __m256 b)
{
    __m256 v = _mm256_mul_ps(a, _mm256_fmadd_ps(_mm256_mul_ps(a, a), _mm256_set1_ps(NIB_GELU_K1),
                                                _mm256_set1_ps(NIB_GELU_K0)));
    __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), nib_exp8_avx2(v));
    return _mm256_mul_ps(_mm256_div_ps(a, d), b);
}

#endif
