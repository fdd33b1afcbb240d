/* Depthwise int8 convolution, the reference (kernels/conv.h): per output
 * pixel and channel, the exact int32 sum of w * x over the taps inside the
 * input, then the shared float epilogue (nib_dwconv_s8_epi). */
#include "kernels/common/conv-epi.h"

NIB_DWCONV_S8_DECL(nib_dwconv_s8_q8cs8_scalar)
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
                int32_t isum[64] = {0};
                for (uint32_t ky = 0; ky < s->kh; ky++) {
                    uint32_t iy;
                    if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                        continue;
                    for (uint32_t kx = 0; kx < s->kw; kx++) {
                        uint32_t ix;
                        if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                            continue;
                        const int8_t *xp = x + ((size_t)iy * s->w + ix) * c + c0;
                        const int8_t *wt = wq + ((size_t)ky * s->kw + kx) * cp + c0;
                        for (uint32_t j = 0; j < n; j++)
                            isum[j] += (int32_t)xp[j] * wt[j];
                    }
                }
                nib_dwconv_s8_epi(e, isum, w_scale, x_scale, p, c, c0, n);
            }
        }
}
