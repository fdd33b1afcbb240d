/* f32 convolution, the reference (kernels/conv.h): per output pixel and
 * block of 8 output channels, acc = fma(x, w, acc) over the taps inside the
 * input in the order (ky, kx, ic); then the shared epilogue. */
#include <math.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

NIB_CONV_F32_DECL(nib_conv_f32_scalar)
{
    assert(nib_conv_shape_ok(s) && x && wp && e && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t icg = s->c_in / s->groups, ocg = s->c_out / s->groups, nb = (ocg + 7) / 8;
    size_t taps = (size_t)s->kh * s->kw * icg;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            float *yp = y + p * s->c_out;
            for (uint32_t g = 0; g < s->groups; g++)
                for (uint32_t b = 0; b < nb; b++) {
                    const float *blk = wp + ((size_t)g * nb + b) * taps * 8;
                    float acc[8] = {0};
                    for (uint32_t ky = 0; ky < s->kh; ky++) {
                        uint32_t iy;
                        if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                            continue;
                        for (uint32_t kx = 0; kx < s->kw; kx++) {
                            uint32_t ix;
                            if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                                continue;
                            const float *xp = x + ((size_t)iy * s->w + ix) * s->c_in + g * icg;
                            const float *wt = blk + ((size_t)ky * s->kw + kx) * icg * 8;
                            for (uint32_t ic = 0; ic < icg; ic++)
                                for (uint32_t j = 0; j < 8; j++)
                                    acc[j] = fmaf(xp[ic], wt[ic * 8 + j], acc[j]);
                        }
                    }
                    uint32_t n = ocg - b * 8 < 8 ? ocg - b * 8 : 8;
                    memcpy(yp + (size_t)g * ocg + b * 8, acc, n * sizeof(float));
                }
            nib_conv_epi_f32(e, yp, e->res ? e->res + p * s->c_out : NULL, 0, s->c_out);
        }
}
