/* Transposed convolution (a vconv of mode 1) as a gather: output (oy, ox,
 * m) sums x[iy][ix][ic] * W[ic][m % ocg][ky][kx] over the taps with oy =
 * iy * stride - pad + ky * dil (and the same along x), in the order ic,
 * ky, kx, one fma each from 0, then the bias. The weights are packed with
 * the output channels of a group fastest, wp[(ic * taps + ky * kw + kx) *
 * ocg8 + m % ocg] (ocg8 = ocg rounded up to 8, zeros past ocg), so eight
 * output channels run side by side, each its own chain in that order.
 *
 * Pixels of a row stride_w apart read the same weight rows at input
 * pixels one apart (away from the edges), so they run as a group: four
 * pixels beside up to 24 channels, each weight row loaded once for all
 * four (convt_tile), or with one output channel 8 or 32 pixels in the
 * lanes (convt_c1_tile). A pixel that fits no group runs alone.
 *
 * Each output value is one fixed chain whoever computes it and however
 * pixels are grouped: the grouping only runs several chains at once (a
 * chain of fmas is bound by the fma's latency; independent ones keep the
 * unit busy), so the bits do not depend on it. The vectors are GCC
 * vector extensions; their fma is one instruction where the target has
 * FMA and __builtin_fmaf per lane elsewhere, the same rounding. */
#include "rt/vision_convt.h"

#include <string.h>
#if defined(__FMA__)
#include <immintrin.h>
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#define CONVT_MAX_TAPS 256 /* taps reaching one output, gathered once */
#define CONVT_TILE_PX 4    /* pixels of a group beside up to 24 channels */
#define CONVT_PX_TAPS 16   /* ... when each has at most this many taps */
#define CONVT_C1_CHAINS 4  /* chains of 8 pixels at once (one output channel) */
/* ... when each pixel has at most this many taps (else 8 pixels): the
 * turned inputs of every tap of every chain fit CONVT_PX_TAPS rows */
#define CONVT_C1_TAPS (CONVT_PX_TAPS / CONVT_C1_CHAINS)

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

/* Eight floats, one output channel (or pixel) per lane. */
typedef float v8f __attribute__((vector_size(32)));

static inline v8f v8f_load(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* c + a * b with one rounding per lane, as __builtin_fmaf. */
static inline v8f v8f_fma(v8f a, v8f b, v8f c)
{
#if defined(__FMA__)
    return (v8f)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    for (int j = 0; j < 8; j++)
        c[j] = __builtin_fmaf(a[j], b[j], c[j]);
    return c;
#endif
}

/* Eight rows of eight floats (row q at xp + q * ld) turned: r[i] lane q
 * is row q's float i. Three rounds of two-vector shuffles (the AVX
 * unpack, shuffle and lane-permute steps of an 8 x 8 transpose). */
static inline void v8f_transpose(const float *xp, int64_t ld, v8f r[8])
{
    v8f a[8], t[8], u[8];
    for (int q = 0; q < 8; q++)
        a[q] = v8f_load(xp + q * ld);
    for (int k = 0; k < 4; k++) { /* unpack low, high */
        t[2 * k] = __builtin_shufflevector(a[2 * k], a[2 * k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[2 * k + 1] = __builtin_shufflevector(a[2 * k], a[2 * k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int k = 0; k < 2; k++) { /* rows 4k..4k+3 of floats (0,4), (1,5), (2,6), (3,7) */
        u[4 * k] = __builtin_shufflevector(t[4 * k], t[4 * k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
        u[4 * k + 1] = __builtin_shufflevector(t[4 * k], t[4 * k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        u[4 * k + 2] =
            __builtin_shufflevector(t[4 * k + 1], t[4 * k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
        u[4 * k + 3] =
            __builtin_shufflevector(t[4 * k + 1], t[4 * k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (int i = 0; i < 4; i++) { /* the 128-bit halves */
        r[i] = __builtin_shufflevector(u[i], u[4 + i], 0, 1, 2, 3, 8, 9, 10, 11);
        r[4 + i] = __builtin_shufflevector(u[i], u[4 + i], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}

/* CONVT_TILE_PX pixels of a group (convt_group: pixel q's taps read the
 * weight rows wo[t] and the input offsets xo[t] + q * c_in) by nb blocks
 * of 8 output channels from mb of group g: per input channel and tap,
 * nb weight rows loaded once for every pixel. nb is a constant where it
 * is inlined, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
convt_tile(const struct nib_vconv_params *p, const float *x, const float *w, const float *bias,
           int64_t g, int64_t mb, const int64_t *xo, const int64_t *wo, int n, const int nb,
           float *yp)
{
    const int64_t icg = p->c_in / p->groups, ocg = p->c_out / p->groups, cin = p->c_in;
    const int64_t ocg8 = (ocg + 7) / 8 * 8, taps = (int64_t)p->kh * p->kw;
    const int64_t ystep = (int64_t)p->stride_w * p->c_out;
    v8f acc[CONVT_TILE_PX][3] = {{{0}}};
    for (int64_t ic = g * icg; ic < (g + 1) * icg; ic++) {
        const float *wi = w + ic * taps * ocg8 + mb;
        for (int t = 0; t < n; t++) {
            v8f wv[3];
            for (int k = 0; k < nb; k++)
                wv[k] = v8f_load(wi + wo[t] + 8 * k);
            const float *xp = x + xo[t] + ic;
#pragma GCC unroll 4
            for (int q = 0; q < CONVT_TILE_PX; q++) {
                const float xs = xp[q * cin];
                const v8f xv = {xs, xs, xs, xs, xs, xs, xs, xs};
                for (int k = 0; k < nb; k++)
                    acc[q][k] = v8f_fma(xv, wv[k], acc[q][k]);
            }
        }
    }
    for (int q = 0; q < CONVT_TILE_PX; q++)
        for (int k = 0; k < nb; k++) {
            const int64_t m0 = g * ocg + mb + 8 * k,
                          nm = ocg - mb - 8 * k < 8 ? ocg - mb - 8 * k : 8;
            float *yq = yp + q * ystep + m0;
            if (nm == 8 && bias) {
                const v8f r = acc[q][k] + v8f_load(bias + m0);
                memcpy(yq, &r, sizeof r);
            } else if (nm == 8) {
                memcpy(yq, &acc[q][k], sizeof acc[q][k]);
            } else {
                for (int64_t j = 0; j < nm; j++)
                    yq[j] = bias ? acc[q][k][j] + bias[m0 + j] : acc[q][k][j];
            }
        }
}

/* Every channel of a group of CONVT_TILE_PX pixels with n taps each, 24
 * channels at a time (convt_tile). Inlined, so a constant n keeps the
 * accumulators in registers across the input channels. */
static inline __attribute__((always_inline)) void convt_tiles(const struct nib_vconv_params *p,
                                                              const float *x, const float *w,
                                                              const float *bias, const int64_t *xo,
                                                              const int64_t *wo, int n, float *yp)
{
    const int64_t ocg = p->c_out / p->groups;
    for (int64_t g = 0; g < p->groups; g++) {
        int64_t mb = 0;
        for (; ocg - mb > 16; mb += 24)
            convt_tile(p, x, w, bias, g, mb, xo, wo, n, 3, yp);
        if (ocg - mb > 8)
            convt_tile(p, x, w, bias, g, mb, xo, wo, n, 2, yp);
        else if (ocg > mb)
            convt_tile(p, x, w, bias, g, mb, xo, wo, n, 1, yp);
    }
}

/* The npx pixels ox, ox + stride_w, ... of row oy as one group when
 * every one has the same n taps as the first, the same weight rows, and
 * input pixels one apart along x (offsets c_in apart): n, with the first
 * pixel's taps in xo/wo, or -1. Away from the edges every pixel of a
 * residue class of ox modulo stride_w qualifies.
 *
 * Checking the two ends is enough when npx - 1 <= w: along the group a
 * tap kx reads input pixel ix + q, inside for a run of q, so a tap both
 * ends have is inside for every q between; one neither end has would need
 * ix < 0 and ix + npx - 1 >= w. (Rows are the same for every pixel.) */
static int convt_group(const struct nib_vconv_params *p, const int64_t *iys, const int64_t *kys,
                       int ny, int64_t ox, int npx, int64_t *xo, int64_t *wo)
{
    int64_t qxo[CONVT_PX_TAPS], qwo[CONVT_PX_TAPS];
    if (ox + (int64_t)(npx - 1) * p->stride_w >= p->ow)
        return -1;
    const int n = convt_taps(p, iys, kys, ny, ox, xo, wo, CONVT_PX_TAPS);
    const int ends_only = npx - 1 <= (int64_t)p->w;
    for (int q = ends_only ? npx - 1 : 1; q < npx && n >= 0; q++) {
        if (convt_taps(p, iys, kys, ny, ox + q * p->stride_w, qxo, qwo, CONVT_PX_TAPS) != n)
            return -1;
        for (int t = 0; t < n; t++)
            if (qwo[t] != wo[t] || qxo[t] != xo[t] + q * (int64_t)p->c_in)
                return -1;
    }
    return n;
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

/* 8 * nv pixels of a group (convt_group) of a transposed convolution
 * with one output channel, with n taps each, nv chains of eight pixels
 * side by side (a chain of fmas is bound by the fma's latency). Per
 * block of eight input channels, each eight pixels' inputs are turned
 * (v8f_transpose) so that a lane is a pixel; the tail channels are read
 * lane by lane. nv is a constant where it is inlined. */
static inline __attribute__((always_inline)) void
convt_c1_tile(const struct nib_vconv_params *p, const float *x, const float *w, const float *bias,
              const int64_t *xo, const int64_t *wo, int n, const int nv, float *yr)
{
    const int64_t sx = p->stride_w, taps = (int64_t)p->kh * p->kw, cin = p->c_in;
    const int64_t ocg8 = 8; /* the one channel's weights, padded to a block of 8 */
    v8f acc[CONVT_C1_CHAINS] = {{0}};
    int64_t ic = 0;
    for (; ic + 8 <= cin; ic += 8) {
        v8f xt[CONVT_PX_TAPS][8]; /* tap t of chain v at t * nv + v: n * nv <= CONVT_PX_TAPS */
        for (int t = 0; t < n; t++) {
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                v8f_transpose(x + xo[t] + 8 * v * cin + ic, cin, xt[t * nv + v]);
        }
        /* unrolled, so that acc stays in registers: rolled, GCC kept it
         * in memory and each fma waited on the last one's store, the
         * most of the detector's head */
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            for (int t = 0; t < n; t++) {
                const float ws = w[(ic + i) * taps * ocg8 + wo[t]];
                const v8f wv = {ws, ws, ws, ws, ws, ws, ws, ws};
#pragma GCC unroll 4
                for (int v = 0; v < nv; v++)
                    acc[v] = v8f_fma(xt[t * nv + v][i], wv, acc[v]);
            }
    }
    for (; ic < cin; ic++)
        for (int t = 0; t < n; t++) {
            const float wv = w[ic * taps * ocg8 + wo[t]], *xp = x + xo[t] + ic;
            for (int v = 0; v < nv; v++)
                for (int q = 0; q < 8; q++)
                    acc[v][q] = __builtin_fmaf(xp[(8 * v + q) * cin], wv, acc[v][q]);
        }
    for (int v = 0; v < nv; v++)
        for (int q = 0; q < 8; q++)
            yr[(8 * v + q) * sx] = bias ? acc[v][q] + bias[0] : acc[v][q];
}

/* 1 when every output of a one-channel transposed convolution has one
 * tap: output (oy, ox) reads input (oy / stride_h, ox / 2) at kernel tap
 * (oy % stride_h, ox % 2). Kernel = stride, width 2, no pads, no
 * dilation, outputs exactly stride x inputs (a probability map's last
 * upsampling). */
static int convt_c1_k2(const struct nib_vconv_params *p)
{
    return p->c_out == 1 && p->groups == 1 && p->kw == 2 && p->stride_w == 2 &&
           p->kh == p->stride_h && p->pad_top == 0 && p->pad_left == 0 && p->dil_h == 1 &&
           p->dil_w == 1 && p->ow == 2 * (int64_t)p->w && p->oh == (int64_t)p->stride_h * p->h;
}

/* 8 * nv input pixels from xr of a convt_c1_k2 layer, kernel row ky: both
 * outputs of each (kx 0 and 1, two chains of 8 pixels per chain v) from
 * one turning of the inputs, which convt_c1_tile would turn once per
 * output. Each output is still the chain over input channels of its one
 * tap, then the bias; the two results of a pixel are interleaved into
 * the output row from yr. nv is a constant where it is inlined. */
static inline __attribute__((always_inline)) void convt_c1_k2_tile(const struct nib_vconv_params *p,
                                                                   const float *xr, const float *w,
                                                                   const float *bias, int64_t ky,
                                                                   const int nv, float *yr)
{
    const int64_t taps = (int64_t)p->kh * p->kw, cin = p->c_in, w0 = ky * p->kw * 8;
    v8f acc[2][CONVT_C1_CHAINS] = {{{0}}};
    int64_t ic = 0;
    for (; ic + 8 <= cin; ic += 8) {
        v8f xt[CONVT_C1_CHAINS][8];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            v8f_transpose(xr + 8 * v * cin + ic, cin, xt[v]);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            const float *wi = w + (ic + i) * taps * 8 + w0;
            const v8f w0v = {wi[0], wi[0], wi[0], wi[0], wi[0], wi[0], wi[0], wi[0]};
            const v8f w1v = {wi[8], wi[8], wi[8], wi[8], wi[8], wi[8], wi[8], wi[8]};
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) {
                acc[0][v] = v8f_fma(xt[v][i], w0v, acc[0][v]);
                acc[1][v] = v8f_fma(xt[v][i], w1v, acc[1][v]);
            }
        }
    }
    for (; ic < cin; ic++) {
        const float *wi = w + ic * taps * 8 + w0, *xp = xr + ic;
        for (int v = 0; v < nv; v++)
            for (int q = 0; q < 8; q++)
                for (int kx = 0; kx < 2; kx++)
                    acc[kx][v][q] =
                        __builtin_fmaf(xp[(8 * v + q) * cin], wi[8 * kx], acc[kx][v][q]);
    }
    const float b = bias ? bias[0] : 0.0f;
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
        v8f a0 = acc[0][v], a1 = acc[1][v];
        if (bias) {
            a0 += b;
            a1 += b;
        }
        const v8f lo = __builtin_shufflevector(a0, a1, 0, 8, 1, 9, 2, 10, 3, 11);
        const v8f hi = __builtin_shufflevector(a0, a1, 4, 12, 5, 13, 6, 14, 7, 15);
        memcpy(yr + 16 * v, &lo, sizeof lo);
        memcpy(yr + 16 * v + 8, &hi, sizeof hi);
    }
}

/* Row oy of a convt_c1_k2 layer: 32 input pixels at a time, then 8, then
 * the last pixels' outputs one by one. */
static void convt_row_c1_k2(const struct nib_vconv_params *p, const float *x, const float *w,
                            const float *bias, const int64_t *iys, const int64_t *kys, int ny,
                            int64_t oy, float *y)
{
    const int64_t iy = oy / p->stride_h, ky = oy % p->stride_h;
    const float *xr = x + iy * p->w * p->c_in;
    float *yr = y + oy * p->ow;
    int64_t ix = 0;
    for (; ix + 8 * CONVT_C1_CHAINS <= p->w; ix += 8 * CONVT_C1_CHAINS)
        convt_c1_k2_tile(p, xr + ix * p->c_in, w, bias, ky, CONVT_C1_CHAINS, yr + 2 * ix);
    for (; ix + 8 <= p->w; ix += 8)
        convt_c1_k2_tile(p, xr + ix * p->c_in, w, bias, ky, 1, yr + 2 * ix);
    for (; ix < p->w; ix++) {
        convt_pixel(p, x, w, bias, iys, kys, ny, oy, 2 * ix, y);
        convt_pixel(p, x, w, bias, iys, kys, ny, oy, 2 * ix + 1, y);
    }
}

/* Row oy of a transposed convolution with one output channel (a
 * probability map's head): seven of the eight lanes of a channel block
 * would idle, so here the lanes are pixels of a group (convt_group), 32
 * or 8 at a time. Each pixel is still its own chain in the order input
 * channel, ky, kx. */
static void convt_row_c1(const struct nib_vconv_params *p, const float *x, const float *w,
                         const float *bias, const int64_t *iys, const int64_t *kys, int ny,
                         int64_t oy, float *y)
{
    const int64_t sx = p->stride_w;
    int64_t xo[CONVT_PX_TAPS], wo[CONVT_PX_TAPS];
    for (int64_t r = 0; r < sx && r < p->ow; r++)
        for (int64_t ox = r; ox < p->ow;) {
            float *yr = y + oy * p->ow + ox;
            int n = convt_group(p, iys, kys, ny, ox, 8 * CONVT_C1_CHAINS, xo, wo);
            if (n >= 0 && n <= CONVT_C1_TAPS) {
                if (n == 1) /* the loop over taps unrolled */
                    convt_c1_tile(p, x, w, bias, xo, wo, 1, CONVT_C1_CHAINS, yr);
                else
                    convt_c1_tile(p, x, w, bias, xo, wo, n, CONVT_C1_CHAINS, yr);
                ox += 8 * CONVT_C1_CHAINS * sx;
                continue;
            }
            n = convt_group(p, iys, kys, ny, ox, 8, xo, wo); /* at most CONVT_PX_TAPS */
            if (n >= 0) {
                convt_c1_tile(p, x, w, bias, xo, wo, n, 1, yr);
                ox += 8 * sx;
                continue;
            }
            convt_pixel(p, x, w, bias, iys, kys, ny, oy, ox, y);
            ox += sx;
        }
}

void nib_vision_convt(const struct nib_vconv_params *p, const float *x, const float *w,
                      const float *bias, float *y, uint32_t b, uint32_t e)
{
    const int64_t sx = p->stride_w;
    int64_t xo[CONVT_PX_TAPS], wo[CONVT_PX_TAPS];
    int64_t iys[CONVT_MAX_TAPS], kys[CONVT_MAX_TAPS];
    for (int64_t oy = b; oy < e; oy++) {
        /* more than CONVT_MAX_TAPS rows of taps: every pixel has more
         * taps than that, or none (ny 0) */
        const int ny = p->kh > CONVT_MAX_TAPS ? -1 : convt_row_taps(p, oy, iys, kys);
        if (p->c_out == 1) {
            if (convt_c1_k2(p))
                convt_row_c1_k2(p, x, w, bias, iys, kys, ny, oy, y);
            else
                convt_row_c1(p, x, w, bias, iys, kys, ny, oy, y);
            continue;
        }
        for (int64_t r = 0; r < sx && r < p->ow; r++)
            for (int64_t ox = r; ox < p->ow;) {
                const int n = convt_group(p, iys, kys, ny, ox, CONVT_TILE_PX, xo, wo);
                if (n < 0) {
                    convt_pixel(p, x, w, bias, iys, kys, ny, oy, ox, y);
                    ox += sx;
                    continue;
                }
                float *yp = y + (oy * p->ow + ox) * p->c_out;
                if (n == 1) /* kernel == stride: one tap, the loop over taps unrolled */
                    convt_tiles(p, x, w, bias, xo, wo, 1, yp);
                else
                    convt_tiles(p, x, w, bias, xo, wo, n, yp);
                ox += CONVT_TILE_PX * sx;
            }
    }
}
