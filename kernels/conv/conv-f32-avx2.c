/* AVX2 f32 convolution: the reference's operations with one output channel
 * per lane (8 at a time), so each lane repeats the scalar sequence; the
 * epilogue 8 channels per step (common/conv-epi-avx2.h). */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <immintrin.h>
#include <string.h>

#include "kernels/common/conv-epi-avx2.h"

/* 4 horizontally adjacent output pixels whose windows lie inside the
 * input's width (so they skip the same taps: only rows can be outside),
 * NB (1 or 2, constant) blocks of 8 output channels (weights blk, the next
 * block bstride floats further): 4 * NB independent accumulators share
 * each weight load. Each lane still runs the reference's sequence for its
 * own output. */
static inline __attribute__((always_inline)) void
conv4_interior(const struct nib_conv_shape *s, const float *x, const float *blk, size_t bstride,
               uint32_t oy, uint32_t ox, uint32_t g, uint32_t icg, const int NB, __m256 acc[2][4])
{
#pragma GCC unroll 2
    for (int b = 0; b < NB; b++)
        acc[b][0] = acc[b][1] = acc[b][2] = acc[b][3] = _mm256_setzero_ps();
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
                __m256 x0 = _mm256_set1_ps(xp[ic]), x1 = _mm256_set1_ps(xp[ic + step]);
                __m256 x2 = _mm256_set1_ps(xp[ic + 2 * step]),
                       x3 = _mm256_set1_ps(xp[ic + 3 * step]);
#pragma GCC unroll 2
                for (int b = 0; b < NB; b++) {
                    __m256 wv = _mm256_loadu_ps(wt + b * bstride + ic * 8);
                    acc[b][0] = _mm256_fmadd_ps(x0, wv, acc[b][0]);
                    acc[b][1] = _mm256_fmadd_ps(x1, wv, acc[b][1]);
                    acc[b][2] = _mm256_fmadd_ps(x2, wv, acc[b][2]);
                    acc[b][3] = _mm256_fmadd_ps(x3, wv, acc[b][3]);
                }
            }
        }
    }
}

/* One output pixel anywhere (taps outside the input skipped), NB (1..4,
 * constant) blocks of 8 output channels, the next block bstride floats
 * further: NB independent accumulators share each input load. */
static inline __attribute__((always_inline)) void
conv1(const struct nib_conv_shape *s, const float *x, const float *blk, size_t bstride, uint32_t oy,
      uint32_t ox, uint32_t g, uint32_t icg, const int NB, __m256 acc[4])
{
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++)
        acc[b] = _mm256_setzero_ps();
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
                __m256 xv = _mm256_set1_ps(xp[ic]);
#pragma GCC unroll 4
                for (int b = 0; b < NB; b++)
                    acc[b] =
                        _mm256_fmadd_ps(xv, _mm256_loadu_ps(wt + b * bstride + ic * 8), acc[b]);
            }
        }
    }
}

/* nib_conv_epi_f32 over one pixel's c_out outputs in place, 8 per step. */
static void epi_px(const struct nib_conv_epi *e, float *yp, const float *res, uint32_t c_out)
{
    uint32_t c = 0;
    for (; c + 8 <= c_out; c += 8)
        _mm256_storeu_ps(
            yp + c, nib_conv_epi8_f32_avx2(e, _mm256_loadu_ps(yp + c), res ? res + c : NULL, c));
    if (c < c_out)
        nib_conv_epi_f32(e, yp + c, res ? res + c : NULL, c, c_out - c);
}

static void store8(float *dst, __m256 v, uint32_t n)
{
    if (n == 8) {
        _mm256_storeu_ps(dst, v);
    } else {
        float t[8];
        _mm256_storeu_ps(t, v);
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

/* The sums of blocks [b, b + nbk) (nbk <= 4) of group g of output row oy,
 * stored unfinished: 4 pixels at a time where their windows lie inside the
 * input's width, one at a time elsewhere. */
static void conv_row_blocks(const struct nib_conv_shape *s, const float *x, const float *blk,
                            size_t bstride, uint32_t oy, uint32_t g, uint32_t b, uint32_t nbk,
                            uint32_t in_lo, uint32_t in_hi, float *y)
{
    uint32_t icg = s->c_in / s->groups, ocg = s->c_out / s->groups;
    for (uint32_t ox = 0; ox < s->ow; ox++) {
        size_t p = (size_t)oy * s->ow + ox;
        if (ox >= in_lo && ox + 4 <= in_hi) {
            for (uint32_t b2 = 0; b2 < nbk; b2 += 2) {
                __m256 acc[2][4];
                uint32_t two = b2 + 1 < nbk;
                if (two)
                    conv4_interior(s, x, blk + b2 * bstride, bstride, oy, ox, g, icg, 2, acc);
                else
                    conv4_interior(s, x, blk + b2 * bstride, bstride, oy, ox, g, icg, 1, acc);
                for (uint32_t bb = 0; bb <= two; bb++) {
                    uint32_t c0 = (b + b2 + bb) * 8, n = ocg - c0 < 8 ? ocg - c0 : 8;
                    for (uint32_t i = 0; i < 4; i++)
                        store8(y + (p + i) * s->c_out + (size_t)g * ocg + c0, acc[bb][i], n);
                }
            }
            ox += 3;
            continue;
        }
        __m256 acc[4];
        switch (nbk) {
        case 4: conv1(s, x, blk, bstride, oy, ox, g, icg, 4, acc); break;
        case 3: conv1(s, x, blk, bstride, oy, ox, g, icg, 3, acc); break;
        case 2: conv1(s, x, blk, bstride, oy, ox, g, icg, 2, acc); break;
        default: conv1(s, x, blk, bstride, oy, ox, g, icg, 1, acc); break;
        }
        for (uint32_t bb = 0; bb < nbk; bb++) {
            uint32_t c0 = (b + bb) * 8, n = ocg - c0 < 8 ? ocg - c0 : 8;
            store8(y + p * s->c_out + (size_t)g * ocg + c0, acc[bb], n);
        }
    }
}

/* Blocks of 4 x 8 output channels outermost, so that their weights stay in
 * cache while every pixel of the row range uses them; the epilogue once
 * all of a pixel's sums are stored. */
NIB_CONV_F32_DECL(nib_conv_f32_avx2)
{
    assert(nib_conv_shape_ok(s) && x && wp && e && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t ocg = s->c_out / s->groups, nb = (ocg + 7) / 8;
    size_t taps = (size_t)s->kh * s->kw * (s->c_in / s->groups);
    uint32_t in_lo, in_hi;
    interior_cols(s, &in_lo, &in_hi);
    for (uint32_t g = 0; g < s->groups; g++)
        for (uint32_t b = 0; b < nb; b += 4) {
            const float *blk = wp + ((size_t)g * nb + b) * taps * 8;
            uint32_t nbk = nb - b < 4 ? nb - b : 4;
            for (uint32_t oy = oh_begin; oy < oh_end; oy++)
                conv_row_blocks(s, x, blk, taps * 8, oy, g, b, nbk, in_lo, in_hi, y);
        }
    for (size_t p = (size_t)oh_begin * s->ow; p < (size_t)oh_end * s->ow; p++)
        epi_px(e, y + p * s->c_out, e->res ? e->res + p * s->c_out : NULL, s->c_out);
}
#else
typedef int nib_conv_f32_avx2_unused;
#endif
