/* NEON (armv8.2-a dotprod) GEMM for q8c (per channel or per group): a
 * chunk is 8 rows x 4 inputs, so 4 chunks use the 4 lanes of one 16-byte
 * activation load; sdot multiplies int8 by int8 into int32 directly. */
#include "kernels/qkernels.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include "kernels/qgemm/qgemm-neon.h"

/* acc[t][half] = integer sums over n_chunks (a multiple of 4) at p. */
static inline __attribute__((always_inline)) void
q8_dot(const uint8_t *p, const int8_t *ak, size_t kp, uint32_t n_chunks, const int M, int32x4_t (*acc)[2])
{
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc[t][0] = acc[t][1] = vdupq_n_s32(0);
    for (uint32_t c = 0; c < n_chunks; c += 4, p += 128) {
        int8x16_t w[8];
        #pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            w[i] = vld1q_s8((const int8_t *)(const void *)(p + 16 * i));
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            int8x16_t av = vld1q_s8(ak + t * kp + 4 * c);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[0], av, 0);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[1], av, 0);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[2], av, 1);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[3], av, 1);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[4], av, 2);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[5], av, 2);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[6], av, 3);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[7], av, 3);
        }
    }
}

static inline __attribute__((always_inline)) void
q8_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
         const int M, float32x4_t (*out)[2], const float *add, size_t add_stride, uint32_t r0,
         uint32_t n_begin, uint32_t n_end)
{
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    int32x4_t acc[4][2];
    if (l->group == 0) { /* per channel: y = fma(isum, ws * sa, add) */
        q8_dot(blk, aq, kp, l->k_pad / 4, M, acc);
        const float *wsp = (const float *)(const void *)(blk + l->code_bytes);
        float32x4_t ws0 = vld1q_f32(wsp), ws1 = vld1q_f32(wsp + 4);
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            size_t tt = t0 + t;
            float32x4_t base[2];
            nib_neon_load_add(base, add ? add + tt * add_stride : NULL, r0, n_begin, n_end);
            out[t][0] = vfmaq_f32(base[0], vcvtq_f32_s32(acc[t][0]), vmulq_n_f32(ws0, a->scale[tt]));
            out[t][1] = vfmaq_f32(base[1], vcvtq_f32_s32(acc[t][1]), vmulq_n_f32(ws1, a->scale[tt]));
        }
        return;
    }
    const float *sa = a->scale + t0 * nbk;
    float32x4_t accf[4][2];
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        accf[t][0] = accf[t][1] = vdupq_n_f32(0.0f);
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *p = blk + (size_t)j * l->sgroup_bytes;
        q8_dot(p, aq + (size_t)j * l->gsize, kp, l->gsize / 4, M, acc);
        float32x4_t ws0 = nib_ld_f16x4(p + l->code_bytes), ws1 = nib_ld_f16x4(p + l->code_bytes + 8);
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            float sat = sa[t * nbk + j];
            accf[t][0] = vfmaq_f32(accf[t][0], vcvtq_f32_s32(acc[t][0]), vmulq_n_f32(ws0, sat));
            accf[t][1] = vfmaq_f32(accf[t][1], vcvtq_f32_s32(acc[t][1]), vmulq_n_f32(ws1, sat));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        out[t][0] = accf[t][0];
        out[t][1] = accf[t][1];
    }
}

NIB_QGEMM_DECL(nib_gemm_q8cs8_n8_neon)
{
    for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb++) {
        const uint8_t *blk = w + (size_t)nb * l->nblock_bytes;
        uint32_t r0 = nb * NIB_Q_TILE_N;
        for (uint32_t t0 = 0; t0 < m; t0 += 4) {
            int M = m - t0 < 4 ? (int)(m - t0) : 4;
            float32x4_t out[4][2];
            switch (M) {
            case 1: q8_block(blk, l, a, t0, 1, out, add, add_stride, r0, n_begin, n_end); break;
            case 2: q8_block(blk, l, a, t0, 2, out, add, add_stride, r0, n_begin, n_end); break;
            case 3: q8_block(blk, l, a, t0, 3, out, add, add_stride, r0, n_begin, n_end); break;
            default: q8_block(blk, l, a, t0, 4, out, add, add_stride, r0, n_begin, n_end); break;
            }
            for (int t = 0; t < M; t++) {
                size_t tt = t0 + t;
                if (l->group == 0)
                    nib_neon_store_rows(out[t], y + tt * y_stride, r0, n_begin, n_end);
                else
                    nib_neon_store_acc_add(out[t], y + tt * y_stride, add ? add + tt * add_stride : NULL,
                                           r0, n_begin, n_end);
            }
        }
    }
}
#else
typedef int nib_gemm_q8cs8_neon_unused;
#endif
