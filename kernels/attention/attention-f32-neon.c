/* NEON attention: the scalar reference's operations (attention-common.h)
 * as two 4-lane halves (lanes 0-3 and 4-7). Selects are compare + bit
 * select: NEON's fmax/fmin treat NaN unlike the reference. */
#include "kernels/kernels.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "kernels/attention/attention-common.h"

static inline float tree8(float32x4_t lo, float32x4_t hi)
{
    float32x4_t s = vaddq_f32(lo, hi);                          /* j + (j+4) */
    float32x2_t d = vadd_f32(vget_low_f32(s), vget_high_f32(s)); /* (0+4)+(2+6), (1+5)+(3+7) */
    return vget_lane_f32(d, 0) + vget_lane_f32(d, 1);
}

static inline float dot(const float *a, const float *b, size_t n)
{
    float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        lo = vfmaq_f32(lo, vld1q_f32(a + i), vld1q_f32(b + i));
        hi = vfmaq_f32(hi, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    if (i < n) {
        float ta[8] = {0}, tb[8] = {0};
        memcpy(ta, a + i, (n - i) * 4);
        memcpy(tb, b + i, (n - i) * 4);
        lo = vfmaq_f32(lo, vld1q_f32(ta), vld1q_f32(tb));
        hi = vfmaq_f32(hi, vld1q_f32(ta + 4), vld1q_f32(tb + 4));
    }
    return tree8(lo, hi);
}

static inline float32x4_t exp4(float32x4_t x)
{
    const float32x4_t lo = vdupq_n_f32(NIB_ATT_EXP_MIN), zero = vdupq_n_f32(0.0f);
    const float32x4_t round = vdupq_n_f32(NIB_ATT_ROUND);
    float32x4_t xc = vbslq_f32(vcgtq_f32(x, lo), x, lo);
    xc = vbslq_f32(vcltq_f32(xc, zero), xc, zero);
    float32x4_t n = vsubq_f32(vaddq_f32(vmulq_f32(xc, vdupq_n_f32(NIB_ATT_LOG2E)), round), round);
    float32x4_t r = vfmaq_f32(xc, n, vdupq_n_f32(-NIB_ATT_LN2_HI));
    r = vfmaq_f32(r, n, vdupq_n_f32(-NIB_ATT_LN2_LO));
    float32x4_t p = vdupq_n_f32(nib_att_exp_c[0]);
    for (int i = 1; i < 8; i++)
        p = vfmaq_f32(vdupq_n_f32(nib_att_exp_c[i]), p, r);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vbslq_f32(vcgeq_f32(x, lo), y, zero);
}

void nib_attention_f32_neon(const float *q, const float *kc, const float *vc, float *out,
                            float *att, size_t h_begin, size_t h_end, size_t head_dim,
                            size_t group, size_t row_stride, size_t pos, size_t ctx, float scale)
{
    const size_t n = pos + 1;
    for (size_t h = h_begin; h < h_end; h++) {
        const float *qh = q + h * head_dim;
        size_t kv_off = (h / group) * head_dim;
        float *a = att + h * ctx;
        float max = -INFINITY;
        for (size_t t = 0; t < n; t++) {
            a[t] = dot(qh, kc + t * row_stride + kv_off, head_dim) * scale;
            max = a[t] > max ? a[t] : max;
        }
        float32x4_t vm = vdupq_n_f32(max), slo = vdupq_n_f32(0.0f), shi = slo;
        size_t t = 0;
        for (; t + 8 <= n; t += 8) {
            float32x4_t e0 = exp4(vsubq_f32(vld1q_f32(a + t), vm));
            float32x4_t e1 = exp4(vsubq_f32(vld1q_f32(a + t + 4), vm));
            vst1q_f32(a + t, e0);
            vst1q_f32(a + t + 4, e1);
            slo = vaddq_f32(slo, e0);
            shi = vaddq_f32(shi, e1);
        }
        float lanes[8];
        vst1q_f32(lanes, slo);
        vst1q_f32(lanes + 4, shi);
        for (; t < n; t++) {
            a[t] = nib_att_exp(a[t] - max);
            lanes[t % 8] += a[t];
        }
        const float sum = nib_att_tree8(lanes);
        for (t = 0; t < n; t++)
            a[t] = a[t] / sum;
        float *o = out + h * head_dim;
        size_t i = 0;
        for (; i + 16 <= head_dim; i += 16) {
            float32x4_t o0 = vdupq_n_f32(0.0f), o1 = o0, o2 = o0, o3 = o0;
            for (t = 0; t < n; t++) {
                const float *v = vc + t * row_stride + kv_off + i;
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
        for (; i < head_dim; i++) {
            float acc = 0.0f;
            for (t = 0; t < n; t++)
                acc = fmaf(a[t], vc[t * row_stride + kv_off + i], acc);
            o[i] = acc;
        }
    }
}
#else
typedef int nib_attention_neon_unused;
#endif
