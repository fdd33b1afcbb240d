/* ONNX Resize on NHWC f32, the reference (kernels/conv.h): nearest copies
 * the source pixel; linear takes the four neighbours with weights formed
 * once per output pixel (resize-walk.h) and sums them as a*w00, then fma
 * by w01, w10, w11. */
#include <math.h>

#include "kernels/resize/resize-walk.h"

static inline void blend_scalar(float *yp, const float *const src[4], const float w[4], uint32_t c)
{
    for (uint32_t ch = 0; ch < c; ch++) {
        float v = src[0][ch] * w[0];
        v = fmaf(src[1][ch], w[1], v);
        v = fmaf(src[2][ch], w[2], v);
        yp[ch] = fmaf(src[3][ch], w[3], v);
    }
}

NIB_RESIZE_F32_DECL(nib_resize_f32_scalar)
{
    nib_resize_walk(r, x, y, oh_begin, oh_end, blend_scalar);
}
