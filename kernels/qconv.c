/* The quantized convolution's implicit GEMM (kernels/conv.h), the same
 * for every ISA: it gathers output pixels' windows into an activation
 * object and hands them to the ISA's q4c/q8c matmul kernel, whose bits
 * every ISA shares, then runs the shared epilogue. */
#include <assert.h>
#include <string.h>

#include "kernels/common/conv-epi.h"
#include "kernels/conv.h"

static size_t align64(size_t n)
{
    return (n + 63u) & ~(size_t)63u;
}

/* Gather the window of output pixel p for group g into row t of a
 * (codes in the order (ky, kx, ic), zeros outside the input) with its sum. */
static void qconv_gather(const struct nib_conv_shape *s, const int8_t *x, float x_scale, uint32_t g,
                         size_t p, const struct nib_qact *a, uint32_t t)
{
    uint32_t icg = s->c_in / s->groups, oy = (uint32_t)(p / s->ow), ox = (uint32_t)(p % s->ow);
    int8_t *row = a->q + (size_t)t * a->k_pad;
    int32_t sum = 0;
    size_t k = 0;
    for (uint32_t ky = 0; ky < s->kh; ky++) {
        uint32_t iy;
        int in_y = nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy);
        for (uint32_t kx = 0; kx < s->kw; kx++, k += icg) {
            uint32_t ix;
            if (!in_y || !nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix)) {
                memset(row + k, 0, icg);
                continue;
            }
            const int8_t *src = x + ((size_t)iy * s->w + ix) * s->c_in + (size_t)g * icg;
            memcpy(row + k, src, icg);
            for (uint32_t i = 0; i < icg; i++)
                sum += src[i];
        }
    }
    memset(row + k, 0, a->k_pad - k);
    a->scale[t] = x_scale;
    a->sum[t] = sum;
}

void nib_qconv_run(nib_qgemm_fn gemm, const struct nib_conv_shape *s, const int8_t *x,
                   float x_scale, const struct nib_qconv_weights *wt, const struct nib_qconv_epi *e,
                   void *scratch, uint32_t oh_begin, uint32_t oh_end)
{
    struct nib_qlayout l;
    int rc = nib_qconv_layout(s, wt->dtype, &l);
    assert(rc == 0 && x && wt->packed && e && scratch && ((uintptr_t)scratch & 63) == 0);
    assert(oh_begin <= oh_end && oh_end <= s->oh && (e->y_q || e->y_f32));
    (void)rc;
    struct nib_qact a;
    rc = nib_qact_init(&a, scratch, NIB_QCONV_TILE, l.cols, 0);
    assert(rc == 0);
    float *v =
        (float *)((uint8_t *)scratch + align64(nib_qact_footprint(NIB_QCONV_TILE, l.cols, 0)));
    uint32_t ocg = s->c_out / s->groups;
    size_t p_end = (size_t)oh_end * s->ow;
    for (size_t p0 = (size_t)oh_begin * s->ow; p0 < p_end; p0 += NIB_QCONV_TILE) {
        uint32_t m = (uint32_t)(p_end - p0 < NIB_QCONV_TILE ? p_end - p0 : NIB_QCONV_TILE);
        for (uint32_t g = 0; g < s->groups; g++) {
            for (uint32_t t = 0; t < m; t++)
                qconv_gather(s, x, x_scale, g, p0 + t, &a, t);
            gemm(&l, wt->packed + (size_t)g * l.size, &a, m, v + (size_t)g * ocg, s->c_out,
                 e->bias ? e->bias + (size_t)g * ocg : NULL, 0, 0, ocg);
        }
        for (uint32_t t = 0; t < m; t++)
            nib_qconv_epi_px(e, v + (size_t)t * s->c_out, p0 + t, s->c_out, 0, s->c_out);
    }
}
