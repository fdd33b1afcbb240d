/* NEON (armv8.2-a dotprod) GEMM for q4c: the q4 two-chunk sdot step
 * (qgemm-neon.h) over the whole row, int32 to the end, one fma per output. */
#include "kernels/qkernels.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include "kernels/qgemm/qgemm-neon.h"

static inline __attribute__((always_inline)) void
q4c_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
          const int M, int32x4_t (*acc)[2])
{
    const size_t kp = a->k_pad;
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc[t][0] = acc[t][1] = vdupq_n_s32(0);
    for (uint32_t c = 0; c < l->k_pad / 8; c += 2)
        nib_q4_two_chunks(blk + c * 32, a->q + t0 * kp + c * 8, kp, M, acc);
}

NIB_QGEMM_DECL(nib_gemm_q4cs8_n8_neon)
{
    for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb++) {
        const uint8_t *blk = w + (size_t)nb * l->nblock_bytes;
        const float *wsp = (const float *)(const void *)(blk + l->code_bytes);
        float32x4_t ws0 = vld1q_f32(wsp), ws1 = vld1q_f32(wsp + 4);
        uint32_t r0 = nb * NIB_Q_TILE_N;
        for (uint32_t t0 = 0; t0 < m; t0 += 4) {
            int M = m - t0 < 4 ? (int)(m - t0) : 4;
            int32x4_t acc[4][2];
            switch (M) {
            case 1: q4c_block(blk, l, a, t0, 1, acc); break;
            case 2: q4c_block(blk, l, a, t0, 2, acc); break;
            case 3: q4c_block(blk, l, a, t0, 3, acc); break;
            default: q4c_block(blk, l, a, t0, 4, acc); break;
            }
            for (int t = 0; t < M; t++) {
                size_t tt = t0 + t;
                int32x4_t corr = vdupq_n_s32(8 * a->sum[tt]);
                float32x4_t base[2], v[2];
                nib_neon_load_add(base, add ? add + tt * add_stride : NULL, r0, n_begin, n_end);
                v[0] = vfmaq_f32(base[0], vcvtq_f32_s32(vsubq_s32(acc[t][0], corr)),
                                 vmulq_n_f32(ws0, a->scale[tt]));
                v[1] = vfmaq_f32(base[1], vcvtq_f32_s32(vsubq_s32(acc[t][1], corr)),
                                 vmulq_n_f32(ws1, a->scale[tt]));
                nib_neon_store_rows(v, y + tt * y_stride, r0, n_begin, n_end);
            }
        }
    }
}
#else
typedef int nib_gemm_q4cs8_neon_unused;
#endif
