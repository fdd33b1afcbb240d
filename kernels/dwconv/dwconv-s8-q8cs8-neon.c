/* NEON depthwise int8 convolution: 8 channels per step, widening int8 x
 * int8 multiply-accumulates into two int32x4 (exact: the reference's
 * integers), a last partial block through a zero-padded copy; then the
 * shared epilogue. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <arm_neon.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

NIB_DWCONV_S8_DECL(nib_dwconv_s8_q8cs8_neon)
{
    assert(nib_conv_shape_ok(s) && s->groups == s->c_in && s->c_in == s->c_out);
    assert(x && wq && w_scale && e && (e->y_q || e->y_f32) && oh_begin <= oh_end &&
           oh_end <= s->oh);
    uint32_t c = s->c_out, cp = (c + 7) & ~7u;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            for (uint32_t c0 = 0; c0 < c; c0 += 64) {
                uint32_t n = c - c0 < 64 ? c - c0 : 64;
                int32_t isum[64];
                for (uint32_t b = 0; b < n; b += 8) {
                    uint32_t nb = n - b < 8 ? n - b : 8;
                    int32x4_t lo = vdupq_n_s32(0), hi = lo;
                    for (uint32_t ky = 0; ky < s->kh; ky++) {
                        uint32_t iy;
                        if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                            continue;
                        for (uint32_t kx = 0; kx < s->kw; kx++) {
                            uint32_t ix;
                            if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                                continue;
                            const int8_t *xp = x + ((size_t)iy * s->w + ix) * c + c0 + b;
                            int8_t t[8] = {0};
                            if (nb < 8) {
                                memcpy(t, xp, nb);
                                xp = t;
                            }
                            const int8_t *wt = wq + ((size_t)ky * s->kw + kx) * cp + c0 + b;
                            int16x8_t pr = vmull_s8(vld1_s8(xp), vld1_s8(wt));
                            lo = vaddw_s16(lo, vget_low_s16(pr));
                            hi = vaddw_s16(hi, vget_high_s16(pr));
                        }
                    }
                    int32_t o[8];
                    vst1q_s32(o, lo);
                    vst1q_s32(o + 4, hi);
                    memcpy(isum + b, o, nb * sizeof(int32_t));
                }
                nib_dwconv_s8_epi(e, isum, w_scale, x_scale, p, c, c0, n);
            }
        }
}
#else
typedef int nib_dwconv_s8_q8cs8_neon_unused;
#endif
