/* NEON-dotprod GEMM for q4h: nib_qh_group in qgemm-neon.h (q4's
 * two-chunk dot step per sub-block of 16, one fma per sub-block). */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4hs8_n8_neon, NIB_DT_Q4H, nib_qh_block)
#else
typedef int nib_gemm_f32_q4hs8_n8_neon_unused;
#endif
