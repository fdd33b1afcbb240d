/* ONNX Resize on NHWC f32, the reference (kernels/conv.h): nearest copies
 * the source pixel; linear takes the four neighbours with weights formed
 * once per output pixel (nib_resize_axis, shared) and sums them as
 * a*w00, then fma by w01, w10, w11. */
#include <math.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

NIB_RESIZE_F32_DECL(nib_resize_f32_scalar)
{
    assert(nib_resize_ok(r) && x && y && oh_begin <= oh_end && oh_end <= r->oh);
    uint32_t c = r->c;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++) {
        struct nib_resize_tap ty;
        nib_resize_axis(r, 1, oy, &ty);
        for (uint32_t ox = 0; ox < r->ow; ox++) {
            struct nib_resize_tap tx;
            nib_resize_axis(r, 0, ox, &tx);
            float *yp = y + ((size_t)oy * r->ow + ox) * c;
            const float *a = x + ((size_t)ty.i0 * r->w + tx.i0) * c;
            if (!r->linear) {
                memcpy(yp, a, c * sizeof(float));
                continue;
            }
            const float *b = x + ((size_t)ty.i0 * r->w + tx.i1) * c;
            const float *cc = x + ((size_t)ty.i1 * r->w + tx.i0) * c;
            const float *d = x + ((size_t)ty.i1 * r->w + tx.i1) * c;
            float y0 = 1.0f - ty.f, x0 = 1.0f - tx.f;
            float w00 = y0 * x0, w01 = y0 * tx.f, w10 = ty.f * x0, w11 = ty.f * tx.f;
            for (uint32_t ch = 0; ch < c; ch++) {
                float v = a[ch] * w00;
                v = fmaf(b[ch], w01, v);
                v = fmaf(cc[ch], w10, v);
                yp[ch] = fmaf(d[ch], w11, v);
            }
        }
    }
}
