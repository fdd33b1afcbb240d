/* NEON resize: the reference's operations with one channel per lane (two
 * 4-lane halves per block of 8); a last partial block through padded
 * copies. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <arm_neon.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

NIB_RESIZE_F32_DECL(nib_resize_f32_neon)
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
            const float *src[4] = {a, x + ((size_t)ty.i0 * r->w + tx.i1) * c,
                                   x + ((size_t)ty.i1 * r->w + tx.i0) * c,
                                   x + ((size_t)ty.i1 * r->w + tx.i1) * c};
            float y0 = 1.0f - ty.f, x0 = 1.0f - tx.f;
            float32x4_t w[4] = {vdupq_n_f32(y0 * x0), vdupq_n_f32(y0 * tx.f),
                                vdupq_n_f32(ty.f * x0), vdupq_n_f32(ty.f * tx.f)};
            for (uint32_t c0 = 0; c0 < c; c0 += 8) {
                uint32_t n = c - c0 < 8 ? c - c0 : 8;
                float t[4][8] = {{0}};
                const float *p[4];
                for (int i = 0; i < 4; i++) {
                    p[i] = src[i] + c0;
                    if (n < 8) {
                        memcpy(t[i], p[i], n * sizeof(float));
                        p[i] = t[i];
                    }
                }
                float32x4_t lo = vmulq_f32(vld1q_f32(p[0]), w[0]);
                float32x4_t hi = vmulq_f32(vld1q_f32(p[0] + 4), w[0]);
                for (int i = 1; i < 4; i++) {
                    lo = vfmaq_f32(lo, vld1q_f32(p[i]), w[i]);
                    hi = vfmaq_f32(hi, vld1q_f32(p[i] + 4), w[i]);
                }
                float o[8];
                vst1q_f32(o, lo);
                vst1q_f32(o + 4, hi);
                memcpy(yp + c0, o, n * sizeof(float));
            }
        }
    }
}
#else
typedef int nib_resize_f32_neon_unused;
#endif
