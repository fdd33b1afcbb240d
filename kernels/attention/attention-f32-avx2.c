/* AVX2 attention: the scalar reference's operations, eight lanes at a
 * time (kernels/common/f32-avx2.h). */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <math.h>

#include "kernels/common/f32-avx2.h"

NIB_ATTENTION_DECL(nib_attention_f32_avx2)
{
    nib_pre_attention(q, kc, vc, out, att, h_begin, h_end, head_dim, group, row_stride, t0, pos,
                      ctx, softcap);
    const size_t n = pos - t0 + 1;
    const float *k0 = kc + t0 * row_stride, *v0 = vc + t0 * row_stride;
    for (size_t h = h_begin; h < h_end; h++) {
        const float *qh = q + h * head_dim;
        size_t kv_off = (h / group) * head_dim;
        float *a = att + h * ctx;
        __m256 vmax = _mm256_set1_ps(-INFINITY);
        size_t t = 0;
        for (; t < n; t++)
            a[t] = nib_dot_avx2(qh, k0 + t * row_stride + kv_off, head_dim) * scale;
        if (softcap > 0.0f) {
            const __m256 vc8 = _mm256_set1_ps(softcap);
            for (t = 0; t + 8 <= n; t += 8)
                _mm256_storeu_ps(a + t, nib_softcap8_avx2(_mm256_loadu_ps(a + t), vc8));
            for (; t < n; t++)
                a[t] = nib_softcapf(a[t], softcap);
        }
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
            __m256 e = nib_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(a + t), vm));
            _mm256_storeu_ps(a + t, e);
            vsum = _mm256_add_ps(vsum, e);
        }
        _mm256_storeu_ps(lanes, vsum);
        /* Weights first (one division each), then out in chunks of 32
         * dims held in registers across all positions. */
        nib_softmax_finish(a, t, n, max, lanes);
        float *o = out + h * head_dim;
        size_t i = 0;
        for (; i + 32 <= head_dim; i += 32) {
            __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
            for (t = 0; t < n; t++) {
                const float *v = v0 + t * row_stride + kv_off + i;
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
                                     _mm256_loadu_ps(v0 + t * row_stride + kv_off + i), o0);
            _mm256_storeu_ps(o + i, o0);
        }
        nib_att_out_dims(a, v0 + kv_off, row_stride, o, i, head_dim, n);
    }
}
#else
typedef int nib_attention_f32_avx2_unused;
#endif
