/* NEON f32 convolution: the reference's operations with one output channel
 * per lane (8 at a time, as two 4-lane halves), so each lane repeats the scalar sequence. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <arm_neon.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

/* 4 horizontally adjacent output pixels whose windows lie inside the
 * input's width (so they skip the same taps: only rows can be outside),
 * one block of 8 output channels: 4 accumulator pairs share each weight
 * load. Each lane still runs the reference's sequence for its own output. */
static void conv4_interior(const struct nib_conv_shape *s, const float *x, const float *blk,
                           uint32_t oy, uint32_t ox, uint32_t g, uint32_t icg, float32x4_t lo[4],
                           float32x4_t hi[4])
{
    for (int i = 0; i < 4; i++)
        lo[i] = hi[i] = vdupq_n_f32(0.0f);
    size_t step = (size_t)s->stride_w * s->c_in;
    for (uint32_t ky = 0; ky < s->kh; ky++) {
        uint32_t iy;
        if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
            continue;
        for (uint32_t kx = 0; kx < s->kw; kx++) {
            uint32_t ix = ox * s->stride_w - s->pad_left + kx * s->dil_w;
            const float *xp = x + ((size_t)iy * s->w + ix) * s->c_in + g * icg;
            const float *wt = blk + ((size_t)ky * s->kw + kx) * icg * 8;
            for (uint32_t ic = 0; ic < icg; ic++) {
                float32x4_t wl = vld1q_f32(wt + ic * 8), wh = vld1q_f32(wt + ic * 8 + 4);
                for (int i = 0; i < 4; i++) {
                    float32x4_t xv = vdupq_n_f32(xp[ic + i * step]);
                    lo[i] = vfmaq_f32(lo[i], xv, wl);
                    hi[i] = vfmaq_f32(hi[i], xv, wh);
                }
            }
        }
    }
}

static void store8(float *dst, float32x4_t lo, float32x4_t hi, uint32_t n)
{
    if (n == 8) {
        vst1q_f32(dst, lo);
        vst1q_f32(dst + 4, hi);
    } else {
        float t[8];
        vst1q_f32(t, lo);
        vst1q_f32(t + 4, hi);
        memcpy(dst, t, n * sizeof(float));
    }
}

/* The first output column whose window starts inside the input, and one
 * past the last whose window ends inside it. */
static void interior_cols(const struct nib_conv_shape *s, uint32_t *lo, uint32_t *hi)
{
    uint32_t span = s->dil_w * (s->kw - 1) + 1;
    *lo = (s->pad_left + s->stride_w - 1) / s->stride_w;
    *hi = *lo;
    if ((uint64_t)s->w + s->pad_left >= span) {
        uint64_t last = ((uint64_t)s->w + s->pad_left - span) / s->stride_w + 1;
        *hi = last < s->ow ? (uint32_t)last : s->ow;
    }
    if (*hi < *lo)
        *hi = *lo;
}

NIB_CONV_F32_DECL(nib_conv_f32_neon)
{
    assert(nib_conv_shape_ok(s) && x && wp && e && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t icg = s->c_in / s->groups, ocg = s->c_out / s->groups, nb = (ocg + 7) / 8;
    size_t taps = (size_t)s->kh * s->kw * icg;
    uint32_t in_lo, in_hi;
    interior_cols(s, &in_lo, &in_hi);
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            if (ox >= in_lo && ox + 4 <= in_hi) {
                for (uint32_t g = 0; g < s->groups; g++)
                    for (uint32_t b = 0; b < nb; b++) {
                        float32x4_t lo[4], hi[4];
                        conv4_interior(s, x, wp + ((size_t)g * nb + b) * taps * 8, oy, ox, g, icg,
                                       lo, hi);
                        uint32_t n = ocg - b * 8 < 8 ? ocg - b * 8 : 8;
                        for (uint32_t i = 0; i < 4; i++)
                            store8(y + (p + i) * s->c_out + (size_t)g * ocg + b * 8, lo[i], hi[i],
                                   n);
                    }
                for (uint32_t i = 0; i < 4; i++)
                    nib_conv_epi_f32(e, y + (p + i) * s->c_out,
                                     e->res ? e->res + (p + i) * s->c_out : NULL, 0, s->c_out);
                ox += 3;
                continue;
            }
            float *yp = y + p * s->c_out;
            for (uint32_t g = 0; g < s->groups; g++)
                for (uint32_t b = 0; b < nb; b++) {
                    const float *blk = wp + ((size_t)g * nb + b) * taps * 8;
                    float32x4_t lo = vdupq_n_f32(0.0f), hi = lo;
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
                            for (uint32_t ic = 0; ic < icg; ic++) {
                                float32x4_t xv = vdupq_n_f32(xp[ic]);
                                lo = vfmaq_f32(lo, xv, vld1q_f32(wt + ic * 8));
                                hi = vfmaq_f32(hi, xv, vld1q_f32(wt + ic * 8 + 4));
                            }
                        }
                    }
                    uint32_t n = ocg - b * 8 < 8 ? ocg - b * 8 : 8;
                    store8(yp + (size_t)g * ocg + b * 8, lo, hi, n);
                }
            nib_conv_epi_f32(e, yp, e->res ? e->res + p * s->c_out : NULL, 0, s->c_out);
        }
}
#else
typedef int nib_conv_f32_neon_unused;
#endif
