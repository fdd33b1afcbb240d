/* NEON (armv8.2-a dotprod) GEMM for q8c (per channel or per group): a
 * chunk is 8 rows x 4 inputs, so 4 chunks use the 4 lanes of one 16-byte
 * activation load; sdot multiplies int8 by int8 into int32 directly
 * (nib_q8_dot in qgemm-neon.h). */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
static inline __attribute__((always_inline)) void
q8_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
         const int M, const struct nib_qrows *e, nib_f32x8 *out)
{
    if (l->group == 0) { /* per channel: y = fma(isum, ws * sa, add) */
        static const int32_t no_corr[4] = {0};
        int32x4_t acc[4][2];
        nib_q8_dot(blk, a->q + t0 * (size_t)a->k_pad, a->k_pad, l->k_pad / 4, M, acc);
        nib_qc_finish_neon(blk, l, a, t0, M, e, acc, no_corr, out);
        return;
    }
    nib_qg_block(blk, l, a, t0, M, e, out, 8, NIB_ZP_NONE);
}

NIB_QGEMM_KERNEL(nib_gemm_f32_q8cs8_n8_neon, NIB_DT_Q8C, q8_block)
#else
typedef int nib_gemm_f32_q8cs8_n8_neon_unused;
#endif
