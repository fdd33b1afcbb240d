/* Reference GEMM for q4c: 4-bit codes (q + 8) with one f32 scale per row;
 * the integer dot product runs over the whole row and one fma scales it. */
#include "kernels/qkernels.h"

NIB_QGEMM_DECL(nib_gemm_q4cs8_n8_scalar)
{
    for (uint32_t t = 0; t < m; t++) {
        const int8_t *aq = a->q + (size_t)t * a->k_pad;
        for (uint32_t r = n_begin; r < n_end; r++) {
            const uint8_t *blk = w + nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, 0);
            uint32_t rr = r % NIB_Q_TILE_N;
            int32_t isum = 0;
            for (uint32_t c = 0; c < l->k_pad / 8; c++) {
                const uint8_t *p = blk + c * NIB_Q_CHUNK + 4 * rr;
                const int8_t *ak = aq + 8 * c;
                for (int i = 0; i < 4; i++)
                    isum += (p[i] & 15) * ak[i] + (p[i] >> 4) * ak[4 + i];
            }
            isum -= 8 * a->sum[t];
            float ws;
            memcpy(&ws, blk + l->code_bytes + 4 * rr, 4);
            float base = add ? add[t * add_stride + r] : 0.0f;
            y[t * y_stride + r] = __builtin_fmaf((float)isum, ws * a->scale[t], base);
        }
    }
}
