/* AVX2 depthwise f32 convolution: one channel per lane, the reference's
 * taps in its order. The taps inside the input are listed once per output
 * pixel, then up to 4 blocks of 8 channels of up to 4 pixels run side by
 * side (independent fma chains, each still its lane's sequence) with the
 * epilogue applied in registers; a last partial block is read and written
 * with masks and gets the scalar epilogue. Pixels whose window lies inside
 * the input share one list of tap offsets, made once per call.
 *
 * Why 4 pixels: an fma waits about 4 cycles for the one before it in its
 * chain, so 8 chains are needed to issue 2 per cycle. Narrow layers (16 or
 * 24 channels: 2 or 3 blocks) get them only from 4 pixels, which also
 * share each weight load. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include "kernels/common/conv-epi-avx2.h"
#include "kernels/common/f32-avx2.h"

#define DW_MAX_TAPS 64 /* windows up to 8x8 list their taps; larger ones walk them */

/* NB (1..4, constant) full blocks of channels c0.. of P (1, 2 or 4,
 * constant; 4 only with NB <= 3, which fits the 16 registers) pixels
 * over the n listed taps (input offsets xo from x, the next pixel's
 * xstep floats further; weight rows wo), epilogue, store (the next
 * pixel's outputs and residual c_out further). */
static inline __attribute__((always_inline)) void
dw_blocks(const float *x, size_t xstep, const float *wp, const struct nib_conv_epi *e, float *yp,
          const float *res, uint32_t c_out, const size_t *xo, const size_t *wo, uint32_t n,
          uint32_t c0, const int P, const int NB)
{
    __m256 acc[4][4];
#pragma GCC unroll 4
    for (int q = 0; q < P; q++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++)
            acc[q][b] = _mm256_setzero_ps();
    for (uint32_t i = 0; i < n; i++) {
        const float *xp = x + xo[i] + c0, *wt = wp + wo[i] + c0;
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            __m256 w = _mm256_loadu_ps(wt + 8 * b);
#pragma GCC unroll 4
            for (int q = 0; q < P; q++)
                acc[q][b] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + q * xstep + 8 * b), w, acc[q][b]);
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < P; q++)
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            const float *r = res ? res + (size_t)q * c_out + c0 + 8 * b : NULL;
            _mm256_storeu_ps(yp + (size_t)q * c_out + c0 + 8 * b,
                             nib_conv_epi8_f32_avx2(e, acc[q][b], r, c0 + 8 * (uint32_t)b));
        }
}

/* The full blocks of channels of P pixels (see dw_blocks); 4 pixels take
 * blocks of 32 channels as two pairs. */
static inline __attribute__((always_inline)) void
dw_full(const float *x, size_t xstep, const float *wp, const struct nib_conv_epi *e, float *yp,
        const float *res, uint32_t c_out, const size_t *xo, const size_t *wo, uint32_t n,
        uint32_t c8, const int P)
{
    uint32_t c0 = 0;
    for (; c0 + 32 <= c8; c0 += 32) {
        if (P < 4) {
            dw_blocks(x, xstep, wp, e, yp, res, c_out, xo, wo, n, c0, P, 4);
            continue;
        }
        dw_blocks(x, xstep, wp, e, yp, res, c_out, xo, wo, n, c0, 2, 4);
        dw_blocks(x + 2 * xstep, xstep, wp, e, yp + 2 * (size_t)c_out,
                  res ? res + 2 * (size_t)c_out : NULL, c_out, xo, wo, n, c0, 2, 4);
    }
    switch ((c8 - c0) / 8) {
    case 3: dw_blocks(x, xstep, wp, e, yp, res, c_out, xo, wo, n, c0, P, 3); break;
    case 2: dw_blocks(x, xstep, wp, e, yp, res, c_out, xo, wo, n, c0, P, 2); break;
    case 1: dw_blocks(x, xstep, wp, e, yp, res, c_out, xo, wo, n, c0, P, 1); break;
    default: break;
    }
}

/* The last partial block of channels of one pixel: masks, scalar epilogue. */
static void dw_tail(const float *x, const float *wp, const struct nib_conv_epi *e, float *yp,
                    const float *res, const size_t *xo, const size_t *wo, uint32_t n, uint32_t c0,
                    uint32_t c)
{
    __m256i mask = nib_tail_mask_avx2(c - c0);
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t i = 0; i < n; i++)
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(x + xo[i] + c0, mask),
                              _mm256_loadu_ps(wp + wo[i] + c0), acc);
    _mm256_maskstore_ps(yp + c0, mask, acc);
    nib_conv_epi_f32(e, yp + c0, res ? res + c0 : NULL, c0, c - c0);
}

/* The pixel's channels when its taps are not listed (very large windows). */
static void dw_pixel_walk(const struct nib_conv_shape *s, const float *x, const float *wp,
                          const struct nib_conv_epi *e, float *yp, const float *res, uint32_t oy,
                          uint32_t ox)
{
    uint32_t c = s->c_out, cp = (c + 7) & ~7u;
    for (uint32_t c0 = 0; c0 < c; c0 += 8) {
        __m256i mask = nib_tail_mask_avx2(c - c0 < 8 ? c - c0 : 8);
        int full = c - c0 >= 8;
        __m256 acc = _mm256_setzero_ps();
        for (uint32_t ky = 0; ky < s->kh; ky++) {
            uint32_t iy;
            if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                continue;
            for (uint32_t kx = 0; kx < s->kw; kx++) {
                uint32_t ix;
                if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                    continue;
                const float *xp = x + ((size_t)iy * s->w + ix) * c + c0;
                __m256 xv = full ? _mm256_loadu_ps(xp) : _mm256_maskload_ps(xp, mask);
                acc = _mm256_fmadd_ps(xv, _mm256_loadu_ps(wp + ((size_t)ky * s->kw + kx) * cp + c0),
                                      acc);
            }
        }
        if (full)
            _mm256_storeu_ps(yp + c0, acc);
        else
            _mm256_maskstore_ps(yp + c0, mask, acc);
    }
    nib_conv_epi_f32(e, yp, res, 0, c);
}

/* 1 when output o's whole window lies inside an input of length in. */
static inline int dw_inside(uint32_t o, uint32_t k, uint32_t stride, uint32_t pad, uint32_t dil,
                            uint32_t in)
{
    int64_t first = (int64_t)o * stride - pad;
    return first >= 0 && first + (int64_t)dil * (k - 1) < (int64_t)in;
}

/* How many pixels from ox, whose window lies inside the input, to run in
 * one step: 4 (when quad, that is when a block of 32 channels leaves 1 to
 * 3 blocks over, which 2 pixels would run on too few chains) or 2 when the
 * window of the run's last one does too (the pixels inside form one run,
 * so its ends decide), else 1. */
static uint32_t dw_inner_run(const struct nib_conv_shape *s, uint32_t ox, int quad)
{
    for (uint32_t r = quad ? 4 : 2; r > 1; r /= 2)
        if (ox + r - 1 < s->ow &&
            dw_inside(ox + r - 1, s->kw, s->stride_w, s->pad_left, s->dil_w, s->w))
            return r;
    return 1;
}

NIB_DWCONV_F32_DECL(nib_dwconv_f32_avx2)
{
    assert(nib_conv_shape_ok(s) && s->groups == s->c_in && s->c_in == s->c_out);
    assert(x && wp && e && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t c = s->c_out, cp = (c + 7) & ~7u, c8 = c & ~7u;
    int listed = (uint64_t)s->kh * s->kw <= DW_MAX_TAPS;
    /* windows wholly inside the input: every tap, at offsets from the
     * window's first input that are the same for every such pixel */
    size_t xo[DW_MAX_TAPS], wo[DW_MAX_TAPS], rel[DW_MAX_TAPS], wall[DW_MAX_TAPS];
    uint32_t n_all = 0;
    for (uint32_t ky = 0; listed && ky < s->kh; ky++)
        for (uint32_t kx = 0; kx < s->kw; kx++, n_all++) {
            rel[n_all] = ((size_t)ky * s->dil_h * s->w + (size_t)kx * s->dil_w) * c;
            wall[n_all] = ((size_t)ky * s->kw + kx) * cp;
        }
    for (uint32_t oy = oh_begin; oy < oh_end; oy++) {
        int in_y = dw_inside(oy, s->kh, s->stride_h, s->pad_top, s->dil_h, s->h);
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            float *yp = y + p * c;
            const float *res = e->res ? e->res + p * c : NULL;
            if (!listed) {
                dw_pixel_walk(s, x, wp, e, yp, res, oy, ox);
                continue;
            }
            const float *xw = x; /* the origin the tap offsets are from */
            const size_t *xt = xo, *wt = wo;
            uint32_t n = 0;
            if (in_y && dw_inside(ox, s->kw, s->stride_w, s->pad_left, s->dil_w, s->w)) {
                xw = x + (((size_t)oy * s->stride_h - s->pad_top) * s->w +
                          ((size_t)ox * s->stride_w - s->pad_left)) *
                             c;
                xt = rel, wt = wall, n = n_all;
            } else {
                for (uint32_t ky = 0; ky < s->kh; ky++) {
                    uint32_t iy;
                    if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                        continue;
                    for (uint32_t kx = 0; kx < s->kw; kx++) {
                        uint32_t ix;
                        if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                            continue;
                        xo[n] = ((size_t)iy * s->w + ix) * c;
                        wo[n++] = ((size_t)ky * s->kw + kx) * cp;
                    }
                }
            }
            size_t xs = (size_t)s->stride_w * c;
            uint32_t run = n == n_all && xt == rel ? dw_inner_run(s, ox, c8 % 32 != 0) : 1;
            if (run == 4)
                dw_full(xw, xs, wp, e, yp, res, c, xt, wt, n, c8, 4);
            else if (run == 2)
                dw_full(xw, xs, wp, e, yp, res, c, xt, wt, n, c8, 2);
            if (run > 1) {
                for (uint32_t q = 0; c8 < c && q < run; q++)
                    dw_tail(xw + q * xs, wp, e, yp + (size_t)q * c,
                            res ? res + (size_t)q * c : NULL, xt, wt, n, c8, c);
                ox += run - 1;
                continue;
            }
            dw_full(xw, 0, wp, e, yp, res, c, xt, wt, n, c8, 1);
            if (c8 < c)
                dw_tail(xw, wp, e, yp, res, xt, wt, n, c8, c);
        }
    }
}
#else
typedef int nib_dwconv_f32_avx2_unused;
#endif
