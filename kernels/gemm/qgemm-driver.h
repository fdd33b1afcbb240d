/* The part of every SIMD quantized GEMM that does not depend on the ISA:
 * the walk over 8-row N-blocks and groups of up to 4 tokens, the edge
 * handling of the row range, the add epilogue, the entry checks. Included
 * by qgemm-avx2.h and qgemm-neon.h after they define
 *   nib_f32x8: 8 float lanes (one per row of an N-block), with
 *   nib_f32x8_load(p), nib_f32x8_store(p, v), nib_f32x8_add(a, b).
 *   nib_qg_group(), nib_q8c_channel(): the per-group formats' rows and
 *   the per-channel q8c rows (declared below).
 * A kernel file is then one line: NIB_QGEMM_KERNEL(name, dtype, block, ...). */
#ifndef NIB_QGEMM_DRIVER_H
#define NIB_QGEMM_DRIVER_H

#include "kernels/common/pre.h"
#include "kernels/qkernels.h"

/* The output rows of one N-block: rows r0..r0+7, of which those in
 * [n_begin, n_end) are written; add (per token, add_stride apart) or NULL. */
struct nib_qrows {
    const float *add;
    size_t add_stride;
    uint32_t r0, n_begin, n_end;
};

static inline int nib_qrows_full(const struct nib_qrows *e)
{
    return e->r0 >= e->n_begin && e->r0 + 8 <= e->n_end;
}

/* Token t's add for the 8 rows; 0 in rows outside the range, all 0
 * without add (the per-channel fma's +0). */
static inline nib_f32x8 nib_qrows_add(const struct nib_qrows *e, size_t t)
{
    float tmp[8] = {0};
    if (e->add) {
        const float *add = e->add + t * e->add_stride;
        if (nib_qrows_full(e))
            return nib_f32x8_load(add + e->r0);
        for (uint32_t i = 0; i < 8; i++) {
            uint32_t r = e->r0 + i;
            tmp[i] = r >= e->n_begin && r < e->n_end ? add[r] : 0.0f;
        }
    }
    return nib_f32x8_load(tmp);
}

/* Per-group epilogue: out[t] = acc + add for tokens t0..t0+M-1 (no add:
 * acc itself, so a -0 stays -0 as in the scalar reference). */
static inline void nib_qrows_plus_add(const struct nib_qrows *e, uint32_t t0, int M, nib_f32x8 *out)
{
    if (e->add)
        for (int t = 0; t < M; t++)
            out[t] = nib_f32x8_add(out[t], nib_qrows_add(e, t0 + t));
}

/* The rows of v in the range to y. */
static inline void nib_qrows_store(const struct nib_qrows *e, nib_f32x8 v, float *y)
{
    if (nib_qrows_full(e)) {
        nib_f32x8_store(y + e->r0, v);
        return;
    }
    float tmp[8];
    nib_f32x8_store(tmp, v);
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t r = e->r0 + i;
        if (r >= e->n_begin && r < e->n_end)
            y[r] = tmp[i];
    }
}

/* Defines the GEMM `name` for weights of format dtype: block(blk, l, a,
 * t0, M, &rows, out, ...) writes out[0..M) (M a constant 1..4: tokens
 * t0..t0+M-1), the final values of the N-block at blk, add included. */
#define NIB_QGEMM_KERNEL(name, dtype, block, ...)                                                  \
    NIB_QGEMM_DECL(name)                                                                           \
    {                                                                                              \
        nib_pre_qgemm(dtype, l, w, a, m, y, y_stride, n_begin, n_end);                             \
        for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb++) {              \
            const uint8_t *blk = w + (size_t)nb * l->nblock_bytes;                                 \
            const struct nib_qrows e = {add, add_stride, nb * NIB_Q_TILE_N, n_begin, n_end};       \
            for (uint32_t t0 = 0; t0 < m; t0 += 4) {                                               \
                int M = m - t0 < 4 ? (int)(m - t0) : 4;                                            \
                nib_f32x8 out[4];                                                                  \
                switch (M) {                                                                       \
                case 1: block(blk, l, a, t0, 1, &e, out, ##__VA_ARGS__); break;                    \
                case 2: block(blk, l, a, t0, 2, &e, out, ##__VA_ARGS__); break;                    \
                case 3: block(blk, l, a, t0, 3, &e, out, ##__VA_ARGS__); break;                    \
                default: block(blk, l, a, t0, 4, &e, out, ##__VA_ARGS__); break;                   \
                }                                                                                  \
                for (int t = 0; t < M; t++)                                                        \
                    nib_qrows_store(&e, out[t], y + (t0 + t) * y_stride);                          \
            }                                                                                      \
        }                                                                                          \
    }

/* CALL(G) with G the constant 32, 64 or 128 equal to g. */
#define NIB_QGEMM_BY_GROUP(g, CALL)                                                                \
    switch (g) {                                                                                   \
    case 32: CALL(32); break;                                                                      \
    case 64: CALL(64); break;                                                                      \
    default: CALL(128); break;                                                                     \
    }

/* Zero points of the per-group formats: none (8-bit codes), 8 (q4: code
 * = q + 8), a stored u8 per row and group (q4a). */
enum { NIB_ZP_NONE, NIB_ZP_8, NIB_ZP_STORED };

/* Defined by the ISA header: the per-group formats' rows for M tokens
 * (1..4), groups of G inputs, BITS-bit codes with zero points ZP (all
 * constant): out[t] = sum over groups j in order of fma(isum_j, ws_j *
 * sa_j, .), without the add. */
static inline __attribute__((always_inline)) void
nib_qg_group(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
             const int M, const uint32_t G, const int BITS, const int ZP, nib_f32x8 *out);

/* Defined by the ISA header: the rows of the formats with a minimum (q4f,
 * q8f) for M tokens, groups of G (16 or 32) inputs, BITS-bit codes (all
 * constant): out[t] = sum over groups j in order of fma(isum_j, ws_j *
 * sa_j, .) then fma(asum_j, wm_j * sa_j, .), without the add. */
static inline __attribute__((always_inline)) void
nib_qf_group(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
             const int M, const uint32_t G, const int BITS, nib_f32x8 *out);

/* Defined by the ISA header: per-channel q8c rows, add included. */
static inline __attribute__((always_inline)) void
nib_q8c_channel(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
                uint32_t t0, const int M, const struct nib_qrows *e, nib_f32x8 *out);

/* The block of every per-group format (q4, q4a, q8c/g). */
static inline __attribute__((always_inline)) void
nib_qg_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
             const int M, const struct nib_qrows *e, nib_f32x8 *out, const int BITS, const int ZP)
{
#define NIB_QG(G) nib_qg_group(blk, l, a, t0, M, G, BITS, ZP, out)
    NIB_QGEMM_BY_GROUP(l->gsize, NIB_QG)
#undef NIB_QG
    nib_qrows_plus_add(e, t0, M, out);
}

/* The block of q4f (BITS 4) and q8f (BITS 8): groups of 16 or 32. */
static inline __attribute__((always_inline)) void
nib_qf_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
             const int M, const struct nib_qrows *e, nib_f32x8 *out, const int BITS)
{
    if (l->gsize == 16)
        nib_qf_group(blk, l, a, t0, M, 16, BITS, out);
    else
        nib_qf_group(blk, l, a, t0, M, 32, BITS, out);
    nib_qrows_plus_add(e, t0, M, out);
}

/* The block of q8c: per channel (group 0) or per group. */
static inline __attribute__((always_inline)) void
nib_q8c_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
              uint32_t t0, const int M, const struct nib_qrows *e, nib_f32x8 *out)
{
    if (l->group == 0)
        nib_q8c_channel(blk, l, a, t0, M, e, out);
    else
        nib_qg_block(blk, l, a, t0, M, e, out, 8, NIB_ZP_NONE);
}

#endif
