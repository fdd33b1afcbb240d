/* NEON forms of kernels/common/f32-math.h: the same operations as two
 * 4-lane halves (lanes 0-3 and 4-7). Selects are compare + bit select:
 * NEON's fmax/fmin treat NaN unlike the reference (include only from NEON
 * kernel files). */
#ifndef NIB_F32_NEON_H
#define NIB_F32_NEON_H

#include <arm_neon.h>

#include "kernels/common/f32-math.h"

/* nib_tree8 of lanes lo (0-3) and hi (4-7). */
static inline float nib_tree8_neon(float32x4_t lo, float32x4_t hi)
{
    float32x4_t s = vaddq_f32(lo, hi);                           /* j + (j+4) */
    float32x2_t d = vadd_f32(vget_low_f32(s), vget_high_f32(s)); /* (0+4)+(2+6), (1+5)+(3+7) */
    return vget_lane_f32(d, 0) + vget_lane_f32(d, 1);
}

/* nib_dot_lanes + nib_tree8. */
static inline float nib_dot_neon(const float *a, const float *b, size_t n)
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
    return nib_tree8_neon(lo, hi);
}

/* nib_expf of 4 lanes. */
static inline float32x4_t nib_exp4_neon(float32x4_t x)
{
    const float32x4_t lo = vdupq_n_f32(NIB_EXP_MIN), hi = vdupq_n_f32(NIB_EXP_MAX);
    const float32x4_t round = vdupq_n_f32(NIB_EXP_ROUND);
    float32x4_t xc = vbslq_f32(vcgtq_f32(x, lo), x, lo);
    xc = vbslq_f32(vcltq_f32(xc, hi), xc, hi);
    float32x4_t n = vsubq_f32(vaddq_f32(vmulq_f32(xc, vdupq_n_f32(NIB_EXP_LOG2E)), round), round);
    float32x4_t r = vfmaq_f32(xc, n, vdupq_n_f32(-NIB_EXP_LN2_HI));
    r = vfmaq_f32(r, n, vdupq_n_f32(-NIB_EXP_LN2_LO));
    float32x4_t p = vdupq_n_f32(nib_exp_c[0]);
    for (int i = 1; i < 8; i++)
        p = vfmaq_f32(vdupq_n_f32(nib_exp_c[i]), p, r);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    float32x4_t y = vmulq_f32(p, vreinterpretq_f32_s32(e));
    return vbslq_f32(vcgeq_f32(x, lo), y, vdupq_n_f32(0.0f));
}

/* nib_tanhf of 4 lanes: both branches, then a select (NaN: the polynomial). */
static inline float32x4_t nib_tanh4_neon(float32x4_t x)
{
    const float32x4_t one = vdupq_n_f32(1.0f);
    const uint32x4_t sign = vdupq_n_u32(0x80000000u);
    float32x4_t a = vabsq_f32(x);
    float32x4_t e = nib_exp4_neon(vaddq_f32(a, a));
    float32x4_t big = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    float32x4_t z = vmulq_f32(a, a), p = vdupq_n_f32(nib_tanh_c[0]);
    for (int i = 1; i < 6; i++)
        p = vfmaq_f32(vdupq_n_f32(nib_tanh_c[i]), p, z);
    float32x4_t small = vfmaq_f32(a, vmulq_f32(a, z), p);
    float32x4_t r = vbslq_f32(vcgeq_f32(a, vdupq_n_f32(NIB_TANH_SMALL)), big, small);
    return vreinterpretq_f32_u32(
        vorrq_u32(vreinterpretq_u32_f32(r), vandq_u32(vreinterpretq_u32_f32(x), sign)));
}

/* nib_softcapf of 4 lanes (c > 0). */
static inline float32x4_t nib_softcap4_neon(float32x4_t s, float32x4_t c)
{
    return vmulq_f32(c, nib_tanh4_neon(vdivq_f32(s, c)));
}

/* nib_gelu_mul1 of 4 lanes. */
static inline float32x4_t nib_gelu_mul4_neon(float32x4_t a, float32x4_t b)
{
    float32x4_t v = vmulq_f32(
        a, vfmaq_f32(vdupq_n_f32(NIB_GELU_K0), vmulq_f32(a, a), vdupq_n_f32(NIB_GELU_K1)));
    float32x4_t d = vaddq_f32(vdupq_n_f32(1.0f), nib_exp4_neon(v));
    return vmulq_f32(vdivq_f32(a, d), b);
}

#endif
