/* Max and average pooling, the reference (kernels/conv.h): per output pixel
 * and channel, over the taps inside the input in the order (ky, kx). */
#include <math.h>

#include "kernels/common/conv-epi.h"

NIB_POOL_F32_DECL(nib_pool_f32_scalar)
{
    assert(nib_conv_shape_ok(s) && s->c_in == s->c_out && mode <= NIB_POOL_AVG_INCLUDE_PAD);
    assert(x && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t c = s->c_out;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            float *yp = y + ((size_t)oy * s->ow + ox) * c;
            for (uint32_t ch = 0; ch < c; ch++)
                yp[ch] = mode == NIB_POOL_MAX ? -INFINITY : 0.0f;
            uint32_t count = 0;
            for (uint32_t ky = 0; ky < s->kh; ky++) {
                uint32_t iy;
                if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                    continue;
                for (uint32_t kx = 0; kx < s->kw; kx++) {
                    uint32_t ix;
                    if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                        continue;
                    const float *xp = x + ((size_t)iy * s->w + ix) * c;
                    count++;
                    for (uint32_t ch = 0; ch < c; ch++)
                        yp[ch] = mode == NIB_POOL_MAX ? (xp[ch] > yp[ch] ? xp[ch] : yp[ch])
                                                      : yp[ch] + xp[ch];
                }
            }
            if (mode == NIB_POOL_MAX)
                continue;
            float d = mode == NIB_POOL_AVG_INCLUDE_PAD ? (float)(s->kh * s->kw) : (float)count;
            for (uint32_t ch = 0; ch < c; ch++)
                yp[ch] = yp[ch] / d;
        }
}
