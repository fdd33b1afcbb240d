/* NEON depthwise f32 convolution: one channel per lane (two 4-lane halves
 * per block of 8), the reference's taps in its order; a last partial block
 * goes through a zero-padded copy. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <arm_neon.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

NIB_DWCONV_F32_DECL(nib_dwconv_f32_neon)
{
    assert(nib_conv_shape_ok(s) && s->groups == s->c_in && s->c_in == s->c_out);
    assert(x && wp && e && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t c = s->c_out, cp = (c + 7) & ~7u;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            float *yp = y + p * c;
            for (uint32_t c0 = 0; c0 < c; c0 += 8) {
                uint32_t n = c - c0 < 8 ? c - c0 : 8;
                float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
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
                        const float *wt = wp + ((size_t)ky * s->kw + kx) * cp + c0;
                        lo = vfmaq_f32(lo, vld1q_f32(xp), vld1q_f32(wt));
                        hi = vfmaq_f32(hi, vld1q_f32(xp + 4), vld1q_f32(wt + 4));
                    }
                }
                float o[8];
                vst1q_f32(o, lo);
                vst1q_f32(o + 4, hi);
                memcpy(yp + c0, o, n * sizeof(float));
            }
            nib_conv_epi_f32(e, yp, e->res ? e->res + p * c : NULL, 0, c);
        }
}
#else
typedef int nib_dwconv_f32_neon_unused;
#endif
