/* AVX2 attention: the scalar reference's operations (attention-common.h)
 * eight lanes at a time. */
#include "kernels/kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kernels/attention/attention-common.h"

static inline float tree8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* j + (j+4) */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                        /* (0+4)+(2+6), (1+5)+(3+7) */
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

static inline __m256i tail_mask(size_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

static inline float dot(const float *a, const float *b, size_t n)
{
    __m256 acc = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    if (i < n) {
        __m256i m = tail_mask(n - i);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc);
    }
    return tree8(acc);
}

static inline __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(NIB_ATT_EXP_MIN), round = _mm256_set1_ps(NIB_ATT_ROUND);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_setzero_ps());
    __m256 n = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(NIB_ATT_LOG2E)), round), round);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NIB_ATT_LN2_HI), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-NIB_ATT_LN2_LO), r);
    __m256 p = _mm256_set1_ps(nib_att_exp_c[0]);
    for (int i = 1; i < 8; i++)
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(nib_att_exp_c[i]));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GE_OQ));
}

void nib_attention_f32_avx2(const float *q, const float *kc, const float *vc, float *out,
                            float *att, size_t h_begin, size_t h_end, size_t head_dim,
                            size_t group, size_t row_stride, size_t pos, size_t ctx, float scale)
{
    const size_t n = pos + 1;
    for (size_t h = h_begin; h < h_end; h++) {
        const float *qh = q + h * head_dim;
        size_t kv_off = (h / group) * head_dim;
        float *a = att + h * ctx;
        __m256 vmax = _mm256_set1_ps(-INFINITY);
        size_t t = 0;
        for (; t < n; t++)
            a[t] = dot(qh, kc + t * row_stride + kv_off, head_dim) * scale;
        for (t = 0; t + 8 <= n; t += 8)
            vmax = _mm256_max_ps(_mm256_loadu_ps(a + t), vmax); /* NaN scores never win */
        float lanes[8], max;
        _mm256_storeu_ps(lanes, vmax);
        max = -INFINITY;
        for (int j = 0; j < 8; j++)
            max = lanes[j] > max ? lanes[j] : max;
        for (; t < n; t++)
            max = a[t] > max ? a[t] : max;
        __m256 vm = _mm256_set1_ps(max), vsum = _mm256_setzero_ps();
        for (t = 0; t + 8 <= n; t += 8) {
            __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(a + t), vm));
            _mm256_storeu_ps(a + t, e);
            vsum = _mm256_add_ps(vsum, e);
        }
        _mm256_storeu_ps(lanes, vsum);
        for (; t < n; t++) {
            a[t] = nib_att_exp(a[t] - max);
            lanes[t % 8] += a[t];
        }
        const float sum = nib_att_tree8(lanes);
        /* Weights first (one division each), then out in chunks of 32
         * dims held in registers across all positions. */
        for (t = 0; t < n; t++)
            a[t] = a[t] / sum;
        float *o = out + h * head_dim;
        size_t i = 0;
        for (; i + 32 <= head_dim; i += 32) {
            __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
            for (t = 0; t < n; t++) {
                const float *v = vc + t * row_stride + kv_off + i;
                __m256 w = _mm256_set1_ps(a[t]);
                o0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v), o0);
                o1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8), o1);
                o2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 16), o2);
                o3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 24), o3);
            }
            _mm256_storeu_ps(o + i, o0);
            _mm256_storeu_ps(o + i + 8, o1);
            _mm256_storeu_ps(o + i + 16, o2);
            _mm256_storeu_ps(o + i + 24, o3);
        }
        for (; i + 8 <= head_dim; i += 8) {
            __m256 o0 = _mm256_setzero_ps();
            for (t = 0; t < n; t++)
                o0 = _mm256_fmadd_ps(_mm256_set1_ps(a[t]),
                                     _mm256_loadu_ps(vc + t * row_stride + kv_off + i), o0);
            _mm256_storeu_ps(o + i, o0);
        }
        for (; i < head_dim; i++) {
            float acc = 0.0f;
            for (t = 0; t < n; t++)
                acc = fmaf(a[t], vc[t * row_stride + kv_off + i], acc);
            o[i] = acc;
        }
    }
}
#else
typedef int nib_attention_avx2_unused;
#endif
