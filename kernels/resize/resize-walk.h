/* The walk every resize variant shares (include only from
 * kernels/resize/): each output pixel of rows [oh_begin, oh_end) takes
 * its taps from nib_resize_axis; nearest copies the source pixel, linear
 * calls the variant's blend with the four neighbours and their weights,
 * formed once per pixel in this order: (1-fy)(1-fx), (1-fy)fx, fy(1-fx),
 * fy fx. A blend computes, per channel, src[0]*w[0], then fma by
 * src[1]*w[1], src[2]*w[2], src[3]*w[3] (the reference's order). */
#ifndef NIB_RESIZE_WALK_H
#define NIB_RESIZE_WALK_H

#include <assert.h>
#include <string.h>

#include "kernels/conv.h"

typedef void nib_resize_blend_fn(float *yp, const float *const src[4], const float w[4],
                                 uint32_t c);

static inline __attribute__((always_inline)) void
nib_resize_walk(const struct nib_resize *r, const float *x, float *y, uint32_t oh_begin,
                uint32_t oh_end, nib_resize_blend_fn *blend)
{
    assert(nib_resize_ok(r) && x && y && oh_begin <= oh_end && oh_end <= r->oh);
    const uint32_t c = r->c;
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
            const float *const src[4] = {a, x + ((size_t)ty.i0 * r->w + tx.i1) * c,
                                         x + ((size_t)ty.i1 * r->w + tx.i0) * c,
                                         x + ((size_t)ty.i1 * r->w + tx.i1) * c};
            const float y0 = 1.0f - ty.f, x0 = 1.0f - tx.f;
            const float w[4] = {y0 * x0, y0 * tx.f, ty.f * x0, ty.f * tx.f};
            blend(yp, src, w, c);
        }
    }
}

#endif
