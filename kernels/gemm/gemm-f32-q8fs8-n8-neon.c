/* NEON (armv8.2-a dotprod) GEMM for q8f: nib_qf_group in qgemm-neon.h,
 * the sdot-by-lane steps of q8c (int8 codes straight into sdot),
 * then two fmas per group: isum * (ws * sa) and asum * (wm * sa). */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q8fs8_n8_neon, NIB_DT_Q8F, nib_qf_block, 8)
#else
typedef int nib_gemm_f32_q8fs8_n8_neon_unused;
#endif
