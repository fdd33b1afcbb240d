/* Reference GEMM for the per-group 4-bit formats q4 (zero point 8) and q4a
 * (zero point stored per row and group). Walks the packed layout
 * (kernels/qformat.h) chunk by chunk, exactly as the SIMD variants do, but
 * one row and one product at a time. */
#include "kernels/qkernels.h"

/* Exact integer dot product of row rr (0..7) of one 4-bit scale group with
 * g activations. */
static int32_t dot_u4s8(const uint8_t *codes, uint32_t rr, const int8_t *a, uint32_t g)
{
    int32_t s = 0;
    for (uint32_t c = 0; c < g / 8; c++, a += 8) {
        const uint8_t *p = codes + c * NIB_Q_CHUNK + 4 * rr;
        for (int i = 0; i < 4; i++)
            s += (p[i] & 15) * a[i] + (p[i] >> 4) * a[4 + i];
    }
    return s;
}

static void q4g(const struct nib_qlayout *l, const uint8_t *w, const struct nib_qact *a, uint32_t m,
                float *y, size_t y_stride, const float *add, size_t add_stride, uint32_t n_begin,
                uint32_t n_end, int asym)
{
    const uint32_t g = l->gsize;
    for (uint32_t t = 0; t < m; t++) {
        const int8_t *aq = a->q + (size_t)t * a->k_pad;
        const float *sa = a->scale + (size_t)t * a->n_blocks;
        const int32_t *asum = a->sum + (size_t)t * a->n_blocks;
        for (uint32_t r = n_begin; r < n_end; r++) {
            float acc = 0.0f;
            for (uint32_t j = 0; j < l->n_sgroups; j++) {
                const uint8_t *sg = w + nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, j);
                uint32_t rr = r % NIB_Q_TILE_N;
                uint16_t h;
                memcpy(&h, sg + l->code_bytes + 2 * rr, 2);
                int32_t zp = asym ? sg[l->code_bytes + 2 * NIB_Q_TILE_N + rr] : 8;
                int32_t isum = dot_u4s8(sg, rr, aq + (size_t)j * g, g) - zp * asum[j];
                acc = __builtin_fmaf((float)isum, nib_f16_to_f32(h) * sa[j], acc);
            }
            y[t * y_stride + r] = add ? acc + add[t * add_stride + r] : acc;
        }
    }
}

NIB_QGEMM_DECL(nib_gemm_q4s8_n8_scalar)
{
    q4g(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 0);
}

NIB_QGEMM_DECL(nib_gemm_q4as8_n8_scalar)
{
    q4g(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 1);
}
