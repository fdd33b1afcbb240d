/* NEON attention: the scalar reference's operations as two 4-lane halves
 * (kernels/common/f32-neon.h). */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <math.h>

#include "kernels/common/f32-neon.h"

NIB_ATTENTION_DECL(nib_attention_f32_neon)
{
    nib_pre_attention(q, kc, vc, out, att, h_begin, h_end, head_dim, group, row_stride, head_stride,
                      t0, pos, ctx, softcap);
    const size_t n = pos - t0 + 1;
    const float *k0 = kc + t0 * row_stride, *v0 = vc + t0 * row_stride;
    for (size_t h = h_begin; h < h_end; h++) {
        const float *qh = q + h * head_dim;
        size_t kv_off = (h / group) * head_stride;
        float *a = att + h * ctx;
        size_t t = 0;
        for (; t < n; t++)
            a[t] = nib_dot_neon(qh, k0 + t * row_stride + kv_off, head_dim) * scale;
        if (softcap > 0.0f) {
            const float32x4_t vc4 = vdupq_n_f32(softcap);
            for (t = 0; t + 4 <= n; t += 4)
                vst1q_f32(a + t, nib_softcap4_neon(vld1q_f32(a + t), vc4));
            for (; t < n; t++)
                a[t] = nib_softcapf(a[t], softcap);
        }
        float max = -INFINITY;
        for (t = 0; t < n; t++)
            max = a[t] > max ? a[t] : max;
        float32x4_t vm = vdupq_n_f32(max), slo = vdupq_n_f32(0.0f), shi = slo;
        for (t = 0; t + 8 <= n; t += 8) {
            float32x4_t e0 = nib_exp4_neon(vsubq_f32(vld1q_f32(a + t), vm));
            float32x4_t e1 = nib_exp4_neon(vsubq_f32(vld1q_f32(a + t + 4), vm));
            vst1q_f32(a + t, e0);
            vst1q_f32(a + t + 4, e1);
            slo = vaddq_f32(slo, e0);
            shi = vaddq_f32(shi, e1);
        }
        float lanes[8];
        vst1q_f32(lanes, slo);
        vst1q_f32(lanes + 4, shi);
        nib_softmax_finish(a, t, n, max, lanes);
        float *o = out + h * head_dim;
        size_t i = 0;
        for (; i + 16 <= head_dim; i += 16) {
            float32x4_t o0 = vdupq_n_f32(0.0f), o1 = o0, o2 = o0, o3 = o0;
            for (t = 0; t < n; t++) {
                const float *v = v0 + t * row_stride + kv_off + i;
                float32x4_t w = vdupq_n_f32(a[t]);
                o0 = vfmaq_f32(o0, w, vld1q_f32(v));
                o1 = vfmaq_f32(o1, w, vld1q_f32(v + 4));
                o2 = vfmaq_f32(o2, w, vld1q_f32(v + 8));
                o3 = vfmaq_f32(o3, w, vld1q_f32(v + 12));
            }
            vst1q_f32(o + i, o0);
            vst1q_f32(o + i + 4, o1);
            vst1q_f32(o + i + 8, o2);
            vst1q_f32(o + i + 12, o3);
        }
        nib_att_out_dims(a, v0 + kv_off, row_stride, o, i, head_dim, n);
    }
}
#else
typedef int nib_attention_f32_neon_unused;
#endif
