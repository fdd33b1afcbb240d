/* AVX2 GEMM for q8c (int8 weights, per channel or per group): the 8-bit
 * step (nib_q8_dot in qgemm-avx2.h: |w| x a * sign(w), widened at once),
 * chunk = 8 rows x 4 inputs, one row per 32-bit lane. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
static inline __attribute__((always_inline)) void
q8_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
         const int M, const struct nib_qrows *e, __m256 *out)
{
    if (l->group == 0) { /* per channel: one fma with the add */
        __m256i isum[4];
        nib_q8_dot(blk, a->q + t0 * (size_t)a->k_pad, a->k_pad, l->k_pad / 4, M, isum);
        nib_qc_finish_avx2(blk, l, a, t0, M, e, isum, out);
        return;
    }
    nib_qg_block(blk, l, a, t0, M, e, out, 8, NIB_ZP_NONE);
}

NIB_QGEMM_KERNEL(nib_gemm_f32_q8cs8_n8_avx2, NIB_DT_Q8C, q8_block)
#else
typedef int nib_gemm_f32_q8cs8_n8_avx2_unused;
#endif
