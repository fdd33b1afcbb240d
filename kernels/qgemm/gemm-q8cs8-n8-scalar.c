/* Reference GEMM for q8c: int8 codes, either one f32 scale per row
 * (group 0) or one f16 scale per row and group (holds GGUF Q8_0 exactly). */
#include "kernels/qkernels.h"

static int32_t dot_s8s8(const uint8_t *codes, uint32_t rr, const int8_t *a, uint32_t g)
{
    int32_t s = 0;
    for (uint32_t c = 0; c < g / 4; c++, a += 4) {
        const int8_t *p = (const int8_t *)codes + c * NIB_Q_CHUNK + 4 * rr;
        for (int i = 0; i < 4; i++)
            s += p[i] * a[i];
    }
    return s;
}

NIB_QGEMM_DECL(nib_gemm_q8cs8_n8_scalar)
{
    const uint32_t g = l->gsize;
    for (uint32_t t = 0; t < m; t++) {
        const int8_t *aq = a->q + (size_t)t * a->k_pad;
        const float *sa = a->scale + (size_t)t * a->n_blocks;
        for (uint32_t r = n_begin; r < n_end; r++) {
            uint32_t rr = r % NIB_Q_TILE_N;
            float base = add ? add[t * add_stride + r] : 0.0f;
            if (l->group == 0) { /* per channel */
                const uint8_t *blk = w + nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, 0);
                float ws;
                memcpy(&ws, blk + l->code_bytes + 4 * rr, 4);
                int32_t isum = dot_s8s8(blk, rr, aq, g);
                y[t * y_stride + r] = __builtin_fmaf((float)isum, ws * sa[0], base);
                continue;
            }
            float acc = 0.0f;
            for (uint32_t j = 0; j < l->n_sgroups; j++) {
                const uint8_t *sg = w + nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, j);
                uint16_t h;
                memcpy(&h, sg + l->code_bytes + 2 * rr, 2);
                int32_t isum = dot_s8s8(sg, rr, aq + (size_t)j * g, g);
                acc = __builtin_fmaf((float)isum, nib_f16_to_f32(h) * sa[j], acc);
            }
            y[t * y_stride + r] = add ? acc + base : acc;
        }
    }
}
