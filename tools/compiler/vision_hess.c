/* The input Hessian of a quantized vision node, for gptq (vq_hessian in
 * vision_quant.h). The cost is bounded by summing at most
 * vq_hess_cols(k) columns (about 2^30 multiply-adds per node), taken at
 * evenly spaced output pixels over all kept calibration inputs. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* vectorize the rank-1 updates (no reassociation) */
#endif

#include <stdlib.h>
#include <string.h>

#include "tools/compiler/vision_quant.h"

#define HESS_BUDGET (1ull << 30) /* columns x k^2 */
#define HESS_MIN_COLS 512u

uint64_t vq_hess_cols(uint32_t k)
{
    const uint64_t kk = (uint64_t)k * k;
    const uint64_t n = kk ? HESS_BUDGET / kk : HESS_BUDGET;
    return n < HESS_MIN_COLS ? HESS_MIN_COLS : n;
}

/* Column of output pixel (oy, ox) of one input, in (ic, ky, kx) order. */
static void im2col(const float *x, const struct nib_conv_shape *s, uint32_t oy, uint32_t ox,
                   double *col)
{
    for (uint32_t ky = 0; ky < s->kh; ky++)
        for (uint32_t kx = 0; kx < s->kw; kx++) {
            const int64_t iy = (int64_t)oy * s->stride_h - s->pad_top + (int64_t)ky * s->dil_h;
            const int64_t ix = (int64_t)ox * s->stride_w - s->pad_left + (int64_t)kx * s->dil_w;
            const int in = iy >= 0 && iy < s->h && ix >= 0 && ix < s->w;
            const float *px = in ? x + ((size_t)iy * s->w + (size_t)ix) * s->c_in : NULL;
            for (uint32_t c = 0; c < s->c_in; c++)
                col[((size_t)c * s->kh + ky) * s->kw + kx] = in ? (double)px[c] : 0.0;
        }
}

void vq_hessian(const float *x, uint32_t n_img, const struct nib_conv_shape *s, double *h)
{
    const uint32_t k = s->c_in * s->kh * s->kw;
    memset(h, 0, (size_t)k * k * sizeof *h);
    double *col = malloc((size_t)k * sizeof *col);
    if (!col)
        return; /* an empty Hessian: gptq then treats every input as dead (plain rounding) */
    const uint64_t per = (uint64_t)s->oh * s->ow, all = per * n_img;
    const uint64_t cap = vq_hess_cols(k), n = all < cap ? all : cap;
    const size_t img_elems = (size_t)s->h * s->w * s->c_in;
    for (uint64_t j = 0; j < n; j++) {
        const uint64_t p = j * all / n, img = p / per, pix = p % per;
        im2col(x + img * img_elems, s, (uint32_t)(pix / s->ow), (uint32_t)(pix % s->ow), col);
        for (uint32_t i = 0; i < k; i++) {
            const double a = col[i];
            if (a == 0.0)
                continue;
            double *hi = h + (size_t)i * k;
            for (uint32_t m = 0; m <= i; m++)
                hi[m] += a * col[m];
        }
    }
    for (uint32_t i = 0; i < k; i++)
        for (uint32_t m = 0; m < i; m++)
            h[(size_t)m * k + i] = h[(size_t)i * k + m];
    free(col);
}
