/* NEON max and average pooling: one channel per lane (two 4-lane halves
 * per block of 8), the reference's taps in its order; the max is the
 * reference's v > m ? v : m as a compare and select (NEON's fmax treats
 * NaN otherwise); a last partial block goes through a padded copy. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

static inline float32x4_t max4(float32x4_t v, float32x4_t m)
{
    return vbslq_f32(vcgtq_f32(v, m), v, m);
}

/* Global pooling (nib_pool_is_global): the image read once, front to back;
 * the last c % 4 channels one at a time with the same operations. */
static void pool_global_neon(const struct nib_conv_shape *s, uint32_t mode, const float *x,
                             float *y)
{
    const uint32_t c = s->c_out;
    const size_t n = (size_t)s->h * s->w;
    for (uint32_t ch = 0; ch < c; ch++)
        y[ch] = mode == NIB_POOL_MAX ? -INFINITY : 0.0f;
    for (size_t p = 0; p < n; p++) {
        const float *xp = x + p * c;
        uint32_t c0 = 0;
        for (; c0 + 4 <= c; c0 += 4) {
            float32x4_t v = vld1q_f32(xp + c0), acc = vld1q_f32(y + c0);
            vst1q_f32(y + c0, mode == NIB_POOL_MAX ? max4(v, acc) : vaddq_f32(acc, v));
        }
        for (; c0 < c; c0++)
            y[c0] = mode == NIB_POOL_MAX ? (xp[c0] > y[c0] ? xp[c0] : y[c0]) : y[c0] + xp[c0];
    }
    if (mode == NIB_POOL_MAX)
        return;
    const float d = (float)n; /* every tap is inside: count = kh * kw */
    uint32_t c0 = 0;
    for (; c0 + 4 <= c; c0 += 4)
        vst1q_f32(y + c0, vdivq_f32(vld1q_f32(y + c0), vdupq_n_f32(d)));
    for (; c0 < c; c0++)
        y[c0] = y[c0] / d;
}

NIB_POOL_F32_DECL(nib_pool_f32_neon)
{
    assert(nib_conv_shape_ok(s) && s->c_in == s->c_out && mode <= NIB_POOL_AVG_INCLUDE_PAD);
    assert(x && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t c = s->c_out;
    if (nib_pool_is_global(s)) {
        if (oh_begin < oh_end)
            pool_global_neon(s, mode, x, y);
        return;
    }
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            float *yp = y + ((size_t)oy * s->ow + ox) * c;
            for (uint32_t c0 = 0; c0 < c; c0 += 8) {
                uint32_t n = c - c0 < 8 ? c - c0 : 8;
                float32x4_t lo = vdupq_n_f32(mode == NIB_POOL_MAX ? -INFINITY : 0.0f), hi = lo;
                uint32_t count = 0;
                for (uint32_t ky = 0; ky < s->kh; ky++) {
                    uint32_t iy;
                    if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                        continue;
                    for (uint32_t kx = 0; kx < s->kw; kx++) {
                        uint32_t ix;
                        if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                            continue;
                        const float *xp = x + ((size_t)iy * s->w + ix) * c + c0;
                        float t[8] = {0};
                        if (n < 8) {
                            memcpy(t, xp, n * sizeof(float));
                            xp = t;
                        }
                        count++;
                        if (mode == NIB_POOL_MAX) {
                            lo = max4(vld1q_f32(xp), lo);
                            hi = max4(vld1q_f32(xp + 4), hi);
                        } else {
                            lo = vaddq_f32(lo, vld1q_f32(xp));
                            hi = vaddq_f32(hi, vld1q_f32(xp + 4));
                        }
                    }
                }
                if (mode != NIB_POOL_MAX) {
                    float d =
                        mode == NIB_POOL_AVG_INCLUDE_PAD ? (float)(s->kh * s->kw) : (float)count;
                    lo = vdivq_f32(lo, vdupq_n_f32(d));
                    hi = vdivq_f32(hi, vdupq_n_f32(d));
                }
                float o[8];
                vst1q_f32(o, lo);
                vst1q_f32(o + 4, hi);
                memcpy(yp + c0, o, n * sizeof(float));
            }
        }
}
#else
typedef int nib_pool_f32_neon_unused;
#endif
