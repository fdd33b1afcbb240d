/* Helpers shared by the scalar reference GEMMs (include only from them):
 * they walk the packed layout (kernels/qformat.h) chunk by chunk, exactly
 * as the SIMD variants do, but one row and one product at a time. */
#ifndef NIB_QGEMM_SCALAR_H
#define NIB_QGEMM_SCALAR_H

#include "kernels/common/pre.h"
#include "kernels/qkernels.h"

/* Exact integer dot product of row rr (0..7) of g inputs of 4-bit codes
 * (code = q + zero point, in 8-input chunks) with g activations. */
static inline int32_t nib_dot_u4s8(const uint8_t *codes, uint32_t rr, const int8_t *a, uint32_t g)
{
    int32_t s = 0;
    for (uint32_t c = 0; c < g / 8; c++, a += 8) {
        const uint8_t *p = codes + c * NIB_Q_CHUNK + 4 * rr;
        for (int i = 0; i < 4; i++)
            s += (p[i] & 15) * a[i] + (p[i] >> 4) * a[4 + i];
    }
    return s;
}

/* The same for 8-bit codes (4-input chunks). */
static inline int32_t nib_dot_s8s8(const uint8_t *codes, uint32_t rr, const int8_t *a, uint32_t g)
{
    int32_t s = 0;
    for (uint32_t c = 0; c < g / 4; c++, a += 4) {
        const int8_t *p = (const int8_t *)codes + c * NIB_Q_CHUNK + 4 * rr;
        for (int i = 0; i < 4; i++)
            s += p[i] * a[i];
    }
    return s;
}

/* Row r, token t of a per-group format: acc = fma(isum_j, ws_j * sa_j,
 * acc) over groups j in order, isum_j = dot(codes, a) - zp * sum(a), zp
 * the stored u8 (asym) or 8 (4-bit) or 0 (8-bit). */
static inline float nib_qgroups_row(const struct nib_qlayout *l, const uint8_t *w,
                                    const struct nib_qact *a, uint32_t t, uint32_t r, int asym)
{
    const uint32_t g = l->gsize, rr = r % NIB_Q_TILE_N;
    const int8_t *aq = a->q + (size_t)t * a->k_pad;
    const float *sa = a->scale + (size_t)t * a->n_blocks;
    const int32_t *asum = a->sum + (size_t)t * a->n_blocks;
    float acc = 0.0f;
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *sg = w + nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, j);
        uint16_t h;
        memcpy(&h, sg + l->code_bytes + 2 * rr, 2);
        int32_t isum;
        if (l->code_bits == 8) {
            isum = nib_dot_s8s8(sg, rr, aq + (size_t)j * g, g);
        } else {
            int32_t zp = asym ? sg[l->code_bytes + 2 * NIB_Q_TILE_N + rr] : 8;
            isum = nib_dot_u4s8(sg, rr, aq + (size_t)j * g, g) - zp * asum[j];
        }
        acc = __builtin_fmaf((float)isum, nib_f16_to_f32(h) * sa[j], acc);
    }
    return acc;
}

/* Row r, token t of a format with a minimum (q4f, q8f): per group j in
 * order, acc = fma(isum_j, ws_j * sa_j, acc), then acc = fma(asum_j,
 * wm_j * sa_j, acc); isum_j the dot product of the raw codes (q4f 0..15,
 * q8f -128..127), asum_j the activation block sum, ws and wm the f32
 * scale and minimum. */
static inline float nib_qmin_row(const struct nib_qlayout *l, const uint8_t *w,
                                 const struct nib_qact *a, uint32_t t, uint32_t r)
{
    const uint32_t g = l->gsize, rr = r % NIB_Q_TILE_N;
    const int8_t *aq = a->q + (size_t)t * a->k_pad;
    const float *sa = a->scale + (size_t)t * a->n_blocks;
    const int32_t *asum = a->sum + (size_t)t * a->n_blocks;
    float acc = 0.0f;
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *sg = w + nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, j);
        float ws, wm;
        memcpy(&ws, sg + l->code_bytes + 4 * rr, 4);
        memcpy(&wm, sg + l->code_bytes + 4 * NIB_Q_TILE_N + 4 * rr, 4);
        int32_t isum = l->code_bits == 8 ? nib_dot_s8s8(sg, rr, aq + (size_t)j * g, g)
                                         : nib_dot_u4s8(sg, rr, aq + (size_t)j * g, g);
        acc = __builtin_fmaf((float)isum, ws * sa[j], acc);
        acc = __builtin_fmaf((float)asum[j], wm * sa[j], acc);
    }
    return acc;
}

/* Row r, token t of q4h: per sub-block of 16 inputs i in order, acc =
 * fma(isum_i, ws_i * sa_i, acc), isum_i = dot(codes, a) - 8 * sum(a),
 * ws_i = (float)s_i * D (exact: D the row's f16 super-scale, s_i its
 * 6-bit sub-scale). */
static inline float nib_q4h_row(const struct nib_qlayout *l, const uint8_t *w,
                                const struct nib_qact *a, uint32_t t, uint32_t r)
{
    const uint32_t rr = r % NIB_Q_TILE_N, ns = l->gsize / l->sub;
    const int8_t *aq = a->q + (size_t)t * a->k_pad;
    const float *sa = a->scale + (size_t)t * a->n_blocks;
    const int32_t *asum = a->sum + (size_t)t * a->n_blocks;
    float acc = 0.0f;
    const uint32_t nb = r / NIB_Q_TILE_N, cs = nib_q4h_chunk_stride(l, nib_ql_group_stride(l, nb));
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *codes = w + nib_q4h_codes_off(l, nb, j);
        const uint8_t *fields = w + nib_q4h_fields_off(l, nb, j);
        uint16_t h;
        memcpy(&h, fields + 2 * rr, 2);
        const float D = nib_f16_to_f32(h);
        for (uint32_t i = 0; i < ns; i++) {
            const uint32_t b = j * ns + i;
            if (b >= a->n_blocks) /* the rest of the super-block: padding */
                break;
            const float ws = (float)nib_q4h_sub(fields, l, i, rr) * D;
            const int8_t *ak = aq + (size_t)b * 16;
            const int32_t isum = nib_dot_u4s8(codes + 2 * i * cs, rr, ak, 8) +
                                 nib_dot_u4s8(codes + (2 * i + 1) * cs, rr, ak + 8, 8) -
                                 8 * asum[b];
            acc = __builtin_fmaf((float)isum, ws * sa[b], acc);
        }
    }
    return acc;
}

/* Row r, token t of a per-channel format: fma(isum, ws * sa, add or +0). */
static inline float nib_qchannel_row(const struct nib_qlayout *l, const uint8_t *w,
                                     const struct nib_qact *a, uint32_t t, uint32_t r, float base)
{
    const uint32_t rr = r % NIB_Q_TILE_N;
    const int8_t *aq = a->q + (size_t)t * a->k_pad;
    const uint8_t *blk = w + nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, 0);
    int32_t isum = l->code_bits == 8 ? nib_dot_s8s8(blk, rr, aq, l->k_pad)
                                     : nib_dot_u4s8(blk, rr, aq, l->k_pad) - 8 * a->sum[t];
    float ws;
    memcpy(&ws, blk + l->code_bytes + 4 * rr, 4);
    return __builtin_fmaf((float)isum, ws * a->scale[t], base);
}

/* Defines the reference GEMM `name` for format dtype: every row and token
 * through nib_qgroups_row or nib_qmin_row (per group, then + add) or
 * nib_qchannel_row. */
#define NIB_QGEMM_SCALAR_KERNEL(name, dtype, asym)                                                 \
    NIB_QGEMM_DECL(name)                                                                           \
    {                                                                                              \
        nib_pre_qgemm(dtype, l, w, a, m, y, y_stride, n_begin, n_end);                             \
        for (uint32_t t = 0; t < m; t++)                                                           \
            for (uint32_t r = n_begin; r < n_end; r++) {                                           \
                float base = add ? add[t * add_stride + r] : 0.0f, v;                              \
                if (l->group == 0) {                                                               \
                    v = nib_qchannel_row(l, w, a, t, r, base);                                     \
                } else {                                                                           \
                    v = l->has_min ? nib_qmin_row(l, w, a, t, r)                                   \
                        : l->sub   ? nib_q4h_row(l, w, a, t, r)                                    \
                                   : nib_qgroups_row(l, w, a, t, r, asym);                           \
                    v = add ? v + base : v;                                                        \
                }                                                                                  \
                y[t * y_stride + r] = v;                                                           \
            }                                                                                      \
    }

#endif
