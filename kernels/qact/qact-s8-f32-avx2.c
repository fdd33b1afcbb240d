/* AVX2 activation quantizer: the same operations as the scalar reference,
 * 32 inputs at a time (max of |x|, one fma per input, clamp, pack); a
 * block of 16 is one 32-input step whose upper half (zeros) is not stored. */
#include "kernels/common/isa.h"
#include "kernels/common/pre.h"
#include "kernels/qkernels.h"

#if NIB_HAVE_AVX2
#include "kernels/common/f32-avx2.h"

static float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static int32_t hsum8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static __m256i quant8(__m256 x, __m256 inv)
{
    const __m256 magic = _mm256_set1_ps(12582912.0f), lo = _mm256_set1_ps(-127.0f),
                 hi = _mm256_set1_ps(127.0f);
    __m256 v = _mm256_sub_ps(_mm256_fmadd_ps(x, inv, magic), magic);
    v = _mm256_max_ps(v, lo); /* NaN -> -127, as in the scalar code */
    v = _mm256_min_ps(v, hi);
    return _mm256_cvtps_epi32(v);
}

NIB_QACT_DECL(nib_qact_s8_f32_avx2)
{
    nib_pre_qact(a, row, x);
    int8_t *q = a->q + (size_t)row * a->k_pad;
    float *scale = a->scale + (size_t)row * a->n_blocks;
    int32_t *sum = a->sum + (size_t)row * a->n_blocks;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    float tmp[32];
    for (uint32_t b = 0; b < a->n_blocks; b++) {
        uint32_t k0 = b * a->block, k1 = k0 + a->block;
        uint32_t kr = k1 < a->k ? k1 : a->k;
        __m256 m = _mm256_setzero_ps();
        for (uint32_t i = k0; i < kr; i += 32) {
            const float *c = nib_f32_padded(x + i, kr - i, 32, tmp);
            for (int j = 0; j < 4; j++)
                m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(c + 8 * j), absmask), m);
        }
        float amax = hmax8(m);
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        __m256 vinv = _mm256_set1_ps(inv);
        __m256i s = _mm256_setzero_si256();
        uint32_t i = k0;
        for (; i < kr; i += 32) {
            const float *c = nib_f32_padded(x + i, kr - i, 32, tmp);
            __m256i q0 = quant8(_mm256_loadu_ps(c), vinv),
                    q1 = quant8(_mm256_loadu_ps(c + 8), vinv);
            __m256i q2 = quant8(_mm256_loadu_ps(c + 16), vinv),
                    q3 = quant8(_mm256_loadu_ps(c + 24), vinv);
            s = _mm256_add_epi32(
                s, _mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
            p = _mm256_permutevar8x32_epi32(p, perm);
            if (k1 - i >= 32)
                _mm256_storeu_si256((__m256i *)(void *)(q + i), p);
            else /* a block of 16: its 16 codes, never the next block's */
                _mm_storeu_si128((__m128i *)(void *)(q + i), _mm256_castsi256_si128(p));
        }
        for (; i < k1; i += 32) {
            if (k1 - i >= 32)
                _mm256_storeu_si256((__m256i *)(void *)(q + i), _mm256_setzero_si256());
            else
                _mm_storeu_si128((__m128i *)(void *)(q + i), _mm_setzero_si128());
        }
        scale[b] = amax / 127.0f;
        sum[b] = hsum8(s);
    }
}
#else
/* Not an AVX2 build: nib_qkernels_get(NIB_ISA_AVX2) returns NULL. */
typedef int nib_qact_s8_f32_avx2_unused;
#endif
