/* NEON (armv8.2-a dotprod) GEMM for q4f: nib_qf_group in qgemm-neon.h,
 * the sdot-by-lane steps of q4 (raw codes 0..15 are valid signed bytes),
 * then two fmas per group: isum * (ws * sa) and asum * (wm * sa). */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4fs8_n8_neon, NIB_DT_Q4F, nib_qf_block, 4)
#else
typedef int nib_gemm_f32_q4fs8_n8_neon_unused;
#endif
