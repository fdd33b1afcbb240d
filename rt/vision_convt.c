/* Transposed convolution (a vconv of mode 1) as a gather: output (oy, ox,
 * m) sums x[iy][ix][ic] * W[ic][m % ocg][ky][kx] over the taps with oy =
 * iy * stride - pad + ky * dil (and the same along x), in the order ic,
 * ky, kx, one fma each from 0, then the bias. The weights are packed with
 * the output channels of a group fastest, wp[(ic * taps + ky * kw + kx) *
 * ocg8 + m % ocg] (ocg8 = ocg rounded up to 8, zeros past ocg), so eight
 * output channels run side by side, each its own chain in that order.
 *
 * Each output value is one fixed chain whoever computes it and however
 * pixels are grouped: the grouping below only runs several chains at
 * once (a chain of fmas is bound by the fma's latency; eight independent
 * ones keep the unit busy), so the bits do not depend on it. */
#include "rt/vision_convt.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#define CONVT_MAX_TAPS 256 /* taps reaching one output, gathered once */
#define CONVT_PX 8         /* pixels of a row run side by side */
#define CONVT_PX_TAPS 16   /* ... when each has at most this many taps */

/* The input index tap k of output o reads along one axis (o = i * stride
 * - pad + k * dil), in *i, or 0 when no input sits there. */
static int convt_in(int64_t o, int64_t k, uint32_t pad, uint32_t dil, uint32_t stride, uint32_t in,
                    int64_t *i)
{
    const int64_t n = o + pad - k * dil;
    if (n < 0 || n % stride)
        return 0;
    *i = n / stride;
    return *i < in;
}

/* The taps of one output row oy along y: their input rows and kernel
 * rows, in ky order; how many. */
static int convt_row_taps(const struct nib_vconv_params *p, int64_t oy, int64_t *iys, int64_t *kys)
{
    int n = 0;
    for (int64_t ky = 0; ky < p->kh; ky++)
        if (convt_in(oy, ky, p->pad_top, p->dil_h, p->stride_h, p->h, &iys[n]))
            kys[n++] = ky;
    return n;
}

/* One output pixel's taps (row taps iys/kys, ny of them; -1: more than
 * CONVT_MAX_TAPS), or -1 when more than max reach it: per tap, in (ky, kx)
 * order, the input pixel's offset and the weight row's. */
static int convt_taps(const struct nib_vconv_params *p, const int64_t *iys, const int64_t *kys,
                      int ny, int64_t ox, int64_t *xo, int64_t *wo, int max)
{
    const int64_t ocg8 = (p->c_out / p->groups + 7) / 8 * 8;
    int n = 0;
    int64_t ix;
    if (ny < 0)
        return -1;
    for (int a = 0; a < ny; a++)
        for (int64_t kx = 0; kx < p->kw; kx++) {
            if (!convt_in(ox, kx, p->pad_left, p->dil_w, p->stride_w, p->w, &ix))
                continue;
            if (n == max)
                return -1;
            xo[n] = (iys[a] * p->w + ix) * p->c_in;
            wo[n++] = (kys[a] * p->kw + kx) * ocg8;
        }
    return n;
}

/* Output channel m of pixel (oy, ox) one tap at a time: the pixels with
 * more taps than CONVT_MAX_TAPS. */
static float convt_one(const struct nib_vconv_params *p, const float *x, const float *w, int64_t oy,
                       int64_t ox, int64_t m)
{
    const int64_t icg = p->c_in / p->groups, ocg = p->c_out / p->groups, g = m / ocg;
    const int64_t ocg8 = (ocg + 7) / 8 * 8, taps = (int64_t)p->kh * p->kw;
    float acc = 0.0f;
    int64_t iy, ix;
    for (int64_t ic = g * icg; ic < (g + 1) * icg; ic++)
        for (int64_t ky = 0; ky < p->kh; ky++) {
            if (!convt_in(oy, ky, p->pad_top, p->dil_h, p->stride_h, p->h, &iy))
                continue;
            for (int64_t kx = 0; kx < p->kw; kx++)
                if (convt_in(ox, kx, p->pad_left, p->dil_w, p->stride_w, p->w, &ix))
                    acc = __builtin_fmaf(x[(iy * p->w + ix) * p->c_in + ic],
                                         w[(ic * taps + ky * p->kw + kx) * ocg8 + m % ocg], acc);
        }
    return acc;
}

/* Output channels [mb, mb + nm) of group g at one pixel whose n taps are
 * (xo, wo), n >= 0 (all chains of eight channels at once). */
static void convt_px(const struct nib_vconv_params *p, const float *x, const float *w,
                     const float *bias, int64_t g, int64_t mb, int64_t nm, const int64_t *xo,
                     const int64_t *wo, int n, float *yp)
{
    const int64_t icg = p->c_in / p->groups, ocg = p->c_out / p->groups;
    const int64_t ocg8 = (ocg + 7) / 8 * 8, taps = (int64_t)p->kh * p->kw;
    float acc[8] = {0};
    for (int64_t ic = g * icg; ic < (g + 1) * icg; ic++) {
        const float *wi = w + ic * taps * ocg8 + mb;
        for (int t = 0; t < n; t++) {
            const float xv = x[xo[t] + ic], *wt = wi + wo[t];
            for (int j = 0; j < 8; j++)
                acc[j] = __builtin_fmaf(xv, wt[j], acc[j]);
        }
    }
    for (int64_t j = 0; j < nm; j++) {
        const int64_t m = g * ocg + mb + j;
        yp[m] = bias ? acc[j] + bias[m] : acc[j];
    }
}

/* The same for CONVT_PX pixels of one row at once, each with n taps. */
static void convt_row_px(const struct nib_vconv_params *p, const float *x, const float *w,
                         const float *bias, int64_t g, int64_t mb, int64_t nm,
                         int64_t xo[][CONVT_PX_TAPS], int64_t wo[][CONVT_PX_TAPS], int n, float *yp)
{
    const int64_t icg = p->c_in / p->groups, ocg = p->c_out / p->groups;
    const int64_t ocg8 = (ocg + 7) / 8 * 8, taps = (int64_t)p->kh * p->kw;
    float acc[CONVT_PX][8] = {{0}};
    for (int64_t ic = g * icg; ic < (g + 1) * icg; ic++) {
        const float *wi = w + ic * taps * ocg8 + mb;
        for (int t = 0; t < n; t++)
#pragma GCC unroll 8
            for (int q = 0; q < CONVT_PX; q++) {
                const float xv = x[xo[q][t] + ic], *wt = wi + wo[q][t];
                for (int j = 0; j < 8; j++)
                    acc[q][j] = __builtin_fmaf(xv, wt[j], acc[q][j]);
            }
    }
    for (int q = 0; q < CONVT_PX; q++)
        for (int64_t j = 0; j < nm; j++) {
            const int64_t m = g * ocg + mb + j;
            yp[q * p->c_out + m] = bias ? acc[q][j] + bias[m] : acc[q][j];
        }
}

/* Output pixel (oy, ox), every channel: its taps (row taps iys/kys, ny)
 * gathered once when at most CONVT_MAX_TAPS reach it, else one channel at
 * a time. */
static void convt_pixel(const struct nib_vconv_params *p, const float *x, const float *w,
                        const float *bias, const int64_t *iys, const int64_t *kys, int ny,
                        int64_t oy, int64_t ox, float *y)
{
    const int64_t ocg = p->c_out / p->groups;
    int64_t xo[CONVT_MAX_TAPS], wo[CONVT_MAX_TAPS];
    float *yp = y + (oy * p->ow + ox) * p->c_out;
    const int n = convt_taps(p, iys, kys, ny, ox, xo, wo, CONVT_MAX_TAPS);
    for (int64_t g = 0; g < p->groups; g++)
        for (int64_t mb = 0; mb < ocg; mb += 8) {
            const int64_t nm = ocg - mb < 8 ? ocg - mb : 8;
            if (n >= 0) {
                convt_px(p, x, w, bias, g, mb, nm, xo, wo, n, yp);
                continue;
            }
            for (int64_t j = 0; j < nm; j++) {
                const int64_t m = g * ocg + mb + j;
                const float acc = convt_one(p, x, w, oy, ox, m);
                yp[m] = bias ? acc + bias[m] : acc;
            }
        }
}

/* Row oy of a transposed convolution with one output channel (a
 * probability map's head): seven of the eight lanes of convt_row_px
 * would idle, so here the lanes are CONVT_PX pixels stride_w apart,
 * which read the same weights at input pixels one apart (checked per
 * group: the same weight rows, input offsets c_in apart). Each pixel is
 * still its own chain in the order input channel, ky, kx. */
static void convt_row_c1(const struct nib_vconv_params *p, const float *x, const float *w,
                         const float *bias, const int64_t *iys, const int64_t *kys, int ny,
                         int64_t oy, float *y)
{
    const int64_t sx = p->stride_w, taps = (int64_t)p->kh * p->kw, cin = p->c_in;
    const int64_t ocg8 = 8; /* the one channel's weights, padded to a block of 8 */
    int64_t pxo[CONVT_PX][CONVT_PX_TAPS], pwo[CONVT_PX][CONVT_PX_TAPS];
    for (int64_t r = 0; r < sx && r < p->ow; r++)
        for (int64_t ox = r; ox < p->ow;) {
            int n = -1;
            if (ox + (CONVT_PX - 1) * sx < p->ow)
                n = convt_taps(p, iys, kys, ny, ox, pxo[0], pwo[0], CONVT_PX_TAPS);
            for (int q = 1; q < CONVT_PX && n >= 0; q++) {
                if (convt_taps(p, iys, kys, ny, ox + q * sx, pxo[q], pwo[q], CONVT_PX_TAPS) != n)
                    n = -1;
                for (int t = 0; t < n; t++)
                    if (pwo[q][t] != pwo[0][t] || pxo[q][t] != pxo[0][t] + q * cin)
                        n = -1;
            }
            if (n < 0) {
                convt_pixel(p, x, w, bias, iys, kys, ny, oy, ox, y);
                ox += sx;
                continue;
            }
            float acc[CONVT_PX] = {0};
            for (int64_t ic = 0; ic < cin; ic++)
                for (int t = 0; t < n; t++) {
                    const float wv = w[ic * taps * ocg8 + pwo[0][t]], *xp = x + pxo[0][t] + ic;
                    for (int q = 0; q < CONVT_PX; q++)
                        acc[q] = __builtin_fmaf(xp[q * cin], wv, acc[q]);
                }
            float *yr = y + oy * p->ow + ox;
            for (int q = 0; q < CONVT_PX; q++)
                yr[q * sx] = bias ? acc[q] + bias[0] : acc[q];
            ox += CONVT_PX * sx;
        }
}

void nib_vision_convt(const struct nib_vconv_params *p, const float *x, const float *w,
                      const float *bias, float *y, uint32_t b, uint32_t e)
{
    const int64_t ocg = p->c_out / p->groups;
    int64_t pxo[CONVT_PX][CONVT_PX_TAPS], pwo[CONVT_PX][CONVT_PX_TAPS];
    int64_t iys[CONVT_MAX_TAPS], kys[CONVT_MAX_TAPS];
    for (int64_t oy = b; oy < e; oy++) {
        /* more than CONVT_MAX_TAPS rows of taps: every pixel has more
         * taps than that, or none (ny 0) */
        const int ny = p->kh > CONVT_MAX_TAPS ? -1 : convt_row_taps(p, oy, iys, kys);
        if (p->c_out == 1) {
            convt_row_c1(p, x, w, bias, iys, kys, ny, oy, y);
            continue;
        }
        for (int64_t ox = 0; ox < p->ow;) {
            int n = -1;
            if (p->ow - ox >= CONVT_PX) { /* CONVT_PX pixels with the same tap count */
                n = convt_taps(p, iys, kys, ny, ox, pxo[0], pwo[0], CONVT_PX_TAPS);
                for (int q = 1; q < CONVT_PX && n >= 0; q++)
                    if (convt_taps(p, iys, kys, ny, ox + q, pxo[q], pwo[q], CONVT_PX_TAPS) != n)
                        n = -1;
            }
            if (n < 0) {
                convt_pixel(p, x, w, bias, iys, kys, ny, oy, ox, y);
                ox++;
                continue;
            }
            float *yp = y + (oy * p->ow + ox) * p->c_out;
            for (int64_t g = 0; g < p->groups; g++)
                for (int64_t mb = 0; mb < ocg; mb += 8)
                    convt_row_px(p, x, w, bias, g, mb, ocg - mb < 8 ? ocg - mb : 8, pxo, pwo, n,
                                 yp);
            ox += CONVT_PX;
        }
    }
}
