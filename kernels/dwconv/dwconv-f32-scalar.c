/* Depthwise f32 convolution, the reference (kernels/conv.h): per output
 * pixel and channel, acc = fma(x, w, acc) over the taps inside the input in
 * the order (ky, kx); then the shared epilogue. */
#include <math.h>

#include "kernels/common/conv-epi.h"

NIB_DWCONV_F32_DECL(nib_dwconv_f32_scalar)
{
    assert(nib_conv_shape_ok(s) && s->groups == s->c_in && s->c_in == s->c_out);
    assert(x && wp && e && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t c = s->c_out, cp = (c + 7) & ~7u;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            float *yp = y + p * c;
            for (uint32_t ch = 0; ch < c; ch++)
                yp[ch] = 0.0f;
            for (uint32_t ky = 0; ky < s->kh; ky++) {
                uint32_t iy;
                if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                    continue;
                for (uint32_t kx = 0; kx < s->kw; kx++) {
                    uint32_t ix;
                    if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                        continue;
                    const float *xp = x + ((size_t)iy * s->w + ix) * c;
                    const float *wt = wp + ((size_t)ky * s->kw + kx) * cp;
                    for (uint32_t ch = 0; ch < c; ch++)
                        yp[ch] = fmaf(xp[ch], wt[ch], yp[ch]);
                }
            }
            nib_conv_epi_f32(e, yp, e->res ? e->res + p * c : NULL, 0, c);
        }
}
