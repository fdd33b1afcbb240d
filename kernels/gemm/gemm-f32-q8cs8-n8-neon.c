/* NEON (armv8.2-a dotprod) GEMM for q8c (per channel or per group): a
 * chunk is 8 rows x 4 inputs, so 4 chunks use the 4 lanes of one 16-byte
 * activation load; sdot multiplies int8 by int8 into int32 directly. */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
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
         const int M, const struct nib_qrows *e, nib_f32x8 *out)
{
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    int32x4_t acc[4][2];
    if (l->group == 0) { /* per channel: y = fma(isum, ws * sa, add) */
        static const int32_t no_corr[4] = {0};
        q8_dot(blk, aq, kp, l->k_pad / 4, M, acc);
        nib_qc_finish_neon(blk, l, a, t0, M, e, acc, no_corr, out);
        return;
    }
    const float *sa = a->scale + t0 * nbk;
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        out[t].val[0] = out[t].val[1] = vdupq_n_f32(0.0f);
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *p = blk + (size_t)j * l->sgroup_bytes;
        q8_dot(p, aq + (size_t)j * l->gsize, kp, l->gsize / 4, M, acc);
        float32x4_t ws0 = nib_ld_f16x4(p + l->code_bytes), ws1 = nib_ld_f16x4(p + l->code_bytes + 8);
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            float sat = sa[t * nbk + j];
            out[t].val[0] = vfmaq_f32(out[t].val[0], vcvtq_f32_s32(acc[t][0]), vmulq_n_f32(ws0, sat));
            out[t].val[1] = vfmaq_f32(out[t].val[1], vcvtq_f32_s32(acc[t][1]), vmulq_n_f32(ws1, sat));
        }
    }
    nib_qrows_plus_add(e, t0, M, out);
}

NIB_QGEMM_KERNEL(nib_gemm_f32_q8cs8_n8_neon, NIB_DT_Q8C, q8_block)
#else
typedef int nib_gemm_f32_q8cs8_n8_neon_unused;
#endif
