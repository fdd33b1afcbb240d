/* Preconditions checked at each kernel's entry, shared by the variants of
 * one op. They are assert()s: on in debug and sanitizer builds (meson's
 * default debugoptimized keeps NDEBUG off), compiled out in release. */
#ifndef NIB_KERNELS_PRE_H
#define NIB_KERNELS_PRE_H

#include <assert.h>
#include <stdint.h>

#include "kernels/qkernels.h"

/* Quantized GEMM on weights of format dtype. */
static inline void nib_pre_qgemm(uint32_t dtype, const struct nib_qlayout *l, const uint8_t *w,
                                 const struct nib_qact *a, uint32_t m, const float *y,
                                 size_t y_stride, uint32_t n_begin, uint32_t n_end)
{
    assert(l && w && a && y);
    assert(l->dtype == dtype && l->tile_n == NIB_Q_TILE_N);
    assert(nib_qact_fits(a, l));         /* same K, padded K and block */
    assert(((uintptr_t)a->q & 31) == 0); /* rows start 32-byte aligned */
    assert(m >= 1 && m <= a->m);
    assert(m == 1 || y_stride >= n_end); /* token rows do not overlap */
    assert(n_begin <= n_end && n_end <= l->rows);
    (void)dtype, (void)l, (void)w, (void)a, (void)m, (void)y, (void)y_stride, (void)n_begin,
        (void)n_end;
}

/* Activation quantizer: row `row` of a from k floats at x. */
static inline void nib_pre_qact(const struct nib_qact *a, uint32_t row, const float *x)
{
    assert(a && x && row < a->m);
    assert(a->k_pad == a->n_blocks * a->block && a->k <= a->k_pad);
    /* whole rows are padded to 32 inputs; a view of blocks of 16
     * (nib_qact_blocks) may start and end between two of them */
    assert(a->k_pad % 16 == 0 && ((uintptr_t)a->q & 15) == 0);
    assert(a->block == 16 || (a->k_pad % 32 == 0 && ((uintptr_t)a->q & 31) == 0));
    (void)a, (void)row, (void)x;
}

static inline void nib_pre_gemv_f32(const float *w, const float *x, const float *y, size_t n_begin,
                                    size_t n_end, size_t k)
{
    assert(w && x && y && n_begin <= n_end && k > 0);
    (void)w, (void)x, (void)y, (void)n_begin, (void)n_end, (void)k;
}

static inline void nib_pre_rows(const float *a, const float *b, const float *out, size_t n)
{
    assert(n == 0 || (a && b && out));
    (void)a, (void)b, (void)out, (void)n;
}

static inline void nib_pre_rope(const float *v, size_t r_begin, size_t r_end, size_t head_dim,
                                size_t rope_dim, const float *cs)
{
    assert(v && cs && r_begin <= r_end);
    assert(r_begin % 2 == 0 && r_end % 2 == 0); /* a pair is never split */
    assert(head_dim > 0 && head_dim % 2 == 0 && rope_dim % 2 == 0 && rope_dim <= head_dim);
    (void)v, (void)r_begin, (void)r_end, (void)head_dim, (void)rope_dim, (void)cs;
}

static inline void nib_pre_attention(const float *q, const float *kc, const float *vc,
                                     const float *out, const float *att, size_t h_begin,
                                     size_t h_end, size_t head_dim, size_t group, size_t row_stride,
                                     size_t head_stride, size_t t0, size_t pos, size_t ctx,
                                     float softcap)
{
    assert(q && kc && vc && out && att);
    assert(h_begin <= h_end && head_dim > 0 && group > 0 && pos < ctx);
    assert(t0 <= pos);                                    /* at least one key */
    assert(softcap >= 0.0f && softcap - softcap == 0.0f); /* finite; 0: no soft-capping */
    /* rows apart: a position's heads side by side, or a head's positions */
    assert((head_stride == head_dim &&
            (h_end == 0 || ((h_end - 1) / group + 1) * head_dim <= row_stride)) ||
           (row_stride == head_dim && head_stride >= ctx * row_stride));
    (void)q, (void)kc, (void)vc, (void)out, (void)att, (void)h_begin, (void)h_end, (void)head_dim,
        (void)group, (void)row_stride, (void)head_stride, (void)t0, (void)pos, (void)ctx,
        (void)softcap;
}

#endif
