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

/* Defines the GEMM `name` for weights of a per-channel format (one scale
 * group per N-block, so its blocks lie whole, one after the other):
 * block(blk, l, a, t0, M, &rows, out, ...) writes out[0..M) (M a constant
 * 1..4: tokens t0..t0+M-1), the final values of the N-block at blk, add
 * included. */
#define NIB_QGEMM_KERNEL(name, dtype, block, ...)                                                  \
    NIB_QGEMM_DECL(name)                                                                           \
    {                                                                                              \
        nib_pre_qgemm(dtype, l, w, a, m, y, y_stride, n_begin, n_end);                             \
        for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb++) {              \
            const uint8_t *blk = w + nib_ql_block_off(l, nb);                                      \
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

/* 1 when N-block nb starts a stored pair whose two blocks both have rows
 * in a range ending at n_end. */
static inline int nib_qpair_in_range(const struct nib_qlayout *l, uint32_t nb, uint32_t n_end)
{
    return !(nb & 1) && nib_ql_paired(l, nb) && (nb + 1) * NIB_Q_TILE_N < n_end;
}

/* Store out[b * M + t] (block b of NB, token t0 + t) to y. */
static inline void nib_qrows_store_nb(const struct nib_qrows *e0, const struct nib_qrows *e1,
                                      const int NB, const int M, const nib_f32x8 *out, float *y,
                                      size_t y_stride, uint32_t t0)
{
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < M; t++)
            nib_qrows_store(b ? e1 : e0, out[b * M + t], y + (t0 + t) * y_stride);
}

/* Defines the GEMM `name` for weights of a per-group format, whose stored
 * N-block pairs alternate scale groups (kernels/qformat.h): block(blk, gs,
 * l, a, t0, M, NB, &rows0, &rows1, out, ...) writes out[b * M + t], the
 * final values of block b of the NB (1, or 2: the stored pair, its second
 * block's groups right after the first's) starting at blk, groups gs bytes
 * apart. Decode (one or two tokens) reads a whole pair as one stream:
 * read as two blocks, one after the other, the decode GEMV from DRAM ran
 * at 0.6 of a linear read on a Zen 5 core, as one stream at 0.95
 * (docs/kernels.md). More tokens (prefill: groups of 4 need more
 * accumulators than NB = 2 leaves registers for) run each block for every
 * token group before the next block, the second from cache. */
#define NIB_QGEMM_KERNEL_PAIRS(name, dtype, block, ...)                                            \
    NIB_QGEMM_DECL(name)                                                                           \
    {                                                                                              \
        nib_pre_qgemm(dtype, l, w, a, m, y, y_stride, n_begin, n_end);                             \
        for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end;) {                   \
            const int pair = nib_qpair_in_range(l, nb, n_end);                                     \
            const uint8_t *blk = w + nib_ql_block_off(l, nb);                                      \
            const uint32_t gs = nib_ql_group_stride(l, nb);                                        \
            const struct nib_qrows e0 = {add, add_stride, nb * NIB_Q_TILE_N, n_begin, n_end};      \
            const struct nib_qrows e1 = {add, add_stride, (nb + 1) * NIB_Q_TILE_N, n_begin,        \
                                         n_end};                                                   \
            nib_f32x8 out[4];                                                                      \
            if (pair && m <= 2) {                                                                  \
                if (m == 1)                                                                        \
                    block(blk, gs, l, a, 0, 1, 2, &e0, &e1, out, ##__VA_ARGS__);                   \
                else                                                                               \
                    block(blk, gs, l, a, 0, 2, 2, &e0, &e1, out, ##__VA_ARGS__);                   \
                nib_qrows_store_nb(&e0, &e1, 2, (int)m, out, y, y_stride, 0);                      \
                nb += 2;                                                                           \
                continue;                                                                          \
            }                                                                                      \
            for (int b = 0; b <= pair; b++) {                                                      \
                const uint8_t *bb = blk + (size_t)b * l->sgroup_bytes;                             \
                const struct nib_qrows *eb = b ? &e1 : &e0;                                        \
                for (uint32_t t0 = 0; t0 < m; t0 += 4) {                                           \
                    int M = m - t0 < 4 ? (int)(m - t0) : 4;                                        \
                    switch (M) {                                                                   \
                    case 1: block(bb, gs, l, a, t0, 1, 1, eb, eb, out, ##__VA_ARGS__); break;      \
                    case 2: block(bb, gs, l, a, t0, 2, 1, eb, eb, out, ##__VA_ARGS__); break;      \
                    case 3: block(bb, gs, l, a, t0, 3, 1, eb, eb, out, ##__VA_ARGS__); break;      \
                    default: block(bb, gs, l, a, t0, 4, 1, eb, eb, out, ##__VA_ARGS__); break;     \
                    }                                                                              \
                    nib_qrows_store_nb(eb, eb, 1, M, out, y, y_stride, t0);                        \
                }                                                                                  \
            }                                                                                      \
            nb += pair ? 2 : 1;                                                                    \
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
 * (1..4) of NB blocks (1, or 2 with M <= 2: block b's group j at blk + j
 * x gs + b x sgroup_bytes), groups of G inputs, BITS-bit codes with zero
 * points ZP (all constant): out[b * M + t] = sum over groups j in order
 * of fma(isum_j, ws_j * sa_j, .), without the add. */
static inline __attribute__((always_inline)) void
nib_qg_group(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const uint32_t G, const int BITS, const int ZP,
             nib_f32x8 *out);

/* Defined by the ISA header: the rows of the formats with a minimum (q4f,
 * q8f), blocks as nib_qg_group's, groups of G (16 or 32) inputs, BITS-bit
 * codes (all constant): out[b * M + t] = sum over groups j in order of
 * fma(isum_j, ws_j * sa_j, .) then fma(asum_j, wm_j * sa_j, .), without
 * the add. */
static inline __attribute__((always_inline)) void
nib_qf_group(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const uint32_t G, const int BITS,
             nib_f32x8 *out);

/* Defined by the ISA header: the rows of q4h, blocks as nib_qg_group's,
 * super-blocks of G (32, 64, 128: constant) inputs: out[b * M + t] = sum
 * over sub-blocks i of 16 inputs in order of fma(isum_i, ws_i * sa_i, .),
 * ws_i = (float)s_i * D (qgemm-scalar.h, nib_q4h_row), without the add;
 * bf: which block of its stored pair blk is (0 or 1), since a stored
 * pair interleaves its blocks' code chunks (kernels/qformat.h). */
static inline __attribute__((always_inline)) void
nib_qh_group(const uint8_t *blk, uint32_t gs, uint32_t bf, const struct nib_qlayout *l,
             const struct nib_qact *a, uint32_t t0, const int M, const int NB, const uint32_t G,
             nib_f32x8 *out);

/* Defined by the ISA header: per-channel q8c rows, add included. */
static inline __attribute__((always_inline)) void
nib_q8c_channel(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
                uint32_t t0, const int M, const struct nib_qrows *e, nib_f32x8 *out);

/* The add of NB blocks' rows (out[b * M + t]). */
static inline void nib_qrows_plus_add_nb(const struct nib_qrows *e0, const struct nib_qrows *e1,
                                         uint32_t t0, const int M, const int NB, nib_f32x8 *out)
{
    nib_qrows_plus_add(e0, t0, M, out);
    if (NB == 2)
        nib_qrows_plus_add(e1, t0, M, out + M);
}

/* The blocks of every per-group format (q4, q4a, q8c/g). */
static inline __attribute__((always_inline)) void
nib_qg_block(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const struct nib_qrows *e0,
             const struct nib_qrows *e1, nib_f32x8 *out, const int BITS, const int ZP)
{
#define NIB_QG(G) nib_qg_group(blk, gs, l, a, t0, M, NB, G, BITS, ZP, out)
    NIB_QGEMM_BY_GROUP(l->gsize, NIB_QG)
#undef NIB_QG
    nib_qrows_plus_add_nb(e0, e1, t0, M, NB, out);
}

/* The blocks of q4f (BITS 4) and q8f (BITS 8): groups of 16 or 32. */
static inline __attribute__((always_inline)) void
nib_qf_block(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const struct nib_qrows *e0,
             const struct nib_qrows *e1, nib_f32x8 *out, const int BITS)
{
    if (l->gsize == 16)
        nib_qf_group(blk, gs, l, a, t0, M, NB, 16, BITS, out);
    else
        nib_qf_group(blk, gs, l, a, t0, M, NB, 32, BITS, out);
    nib_qrows_plus_add_nb(e0, e1, t0, M, NB, out);
}

/* The blocks of q4h: super-blocks of 32, 64 or 128. */
static inline __attribute__((always_inline)) void
nib_qh_block(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const struct nib_qrows *e0,
             const struct nib_qrows *e1, nib_f32x8 *out)
{
    /* which block of its stored pair blk is (q4h interleaves a pair) */
    const uint32_t bf = (e0->r0 / NIB_Q_TILE_N) & 1u;
#define NIB_QH(G) nib_qh_group(blk, gs, bf, l, a, t0, M, NB, G, out)
    NIB_QGEMM_BY_GROUP(l->gsize, NIB_QH)
#undef NIB_QH
    nib_qrows_plus_add_nb(e0, e1, t0, M, NB, out);
}

/* The blocks of q8c: per channel (group 0: one scale group per block, so
 * the second block of a pair follows the first whole) or per group. */
static inline __attribute__((always_inline)) void
nib_q8c_block(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l,
              const struct nib_qact *a, uint32_t t0, const int M, const int NB,
              const struct nib_qrows *e0, const struct nib_qrows *e1, nib_f32x8 *out)
{
    if (l->group != 0) {
        nib_qg_block(blk, gs, l, a, t0, M, NB, e0, e1, out, 8, NIB_ZP_NONE);
        return;
    }
    nib_q8c_channel(blk, l, a, t0, M, e0, out);
    if (NB == 2)
        nib_q8c_channel(blk + l->nblock_bytes, l, a, t0, M, e1, out + M);
}

#endif
