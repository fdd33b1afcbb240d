/* NEON resize: the reference's operations with one channel per lane (two
 * 4-lane halves per block of 8); a last partial block through padded
 * copies. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <arm_neon.h>

#include "kernels/resize/resize-walk.h"

static inline void blend_neon(float *yp, const float *const src[4], const float w[4], uint32_t c)
{
    const float32x4_t wv[4] = {vdupq_n_f32(w[0]), vdupq_n_f32(w[1]), vdupq_n_f32(w[2]),
                               vdupq_n_f32(w[3])};
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
        float32x4_t lo = vmulq_f32(vld1q_f32(p[0]), wv[0]);
        float32x4_t hi = vmulq_f32(vld1q_f32(p[0] + 4), wv[0]);
        for (int i = 1; i < 4; i++) {
            lo = vfmaq_f32(lo, vld1q_f32(p[i]), wv[i]);
            hi = vfmaq_f32(hi, vld1q_f32(p[i] + 4), wv[i]);
        }
        float o[8];
        vst1q_f32(o, lo);
        vst1q_f32(o + 4, hi);
        memcpy(yp + c0, o, n * sizeof(float));
    }
}

NIB_RESIZE_F32_DECL(nib_resize_f32_neon)
{
    nib_resize_walk(r, x, y, oh_begin, oh_end, blend_neon);
}
#else
typedef int nib_resize_f32_neon_unused;
#endif
