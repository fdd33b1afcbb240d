/* NEON (armv8.2-a dotprod) GEMM for q4c: the q4 two-chunk sdot step
 * (qgemm-neon.h) over the whole row, int32 to the end, one fma per output. */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
static inline __attribute__((always_inline)) void
q4c_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
          const int M, const struct nib_qrows *e, nib_f32x8 *out)
{
    const size_t kp = a->k_pad;
    int32x4_t acc[4][2];
    int32_t corr[4];
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        acc[t][0] = acc[t][1] = vdupq_n_s32(0);
        corr[t] = 8 * a->sum[t0 + t];
    }
    for (uint32_t c = 0; c < l->k_pad / 8; c += 2)
        nib_q4_two_chunks(blk + c * 32, NIB_Q_CHUNK, a->q + t0 * kp + c * 8, kp, M, acc);
    nib_qc_finish_neon(blk, l, a, t0, M, e, acc, corr, out);
}

NIB_QGEMM_KERNEL(nib_gemm_f32_q4cs8_n8_neon, NIB_DT_Q4C, q4c_block)
#else
typedef int nib_gemm_f32_q4cs8_n8_neon_unused;
#endif
