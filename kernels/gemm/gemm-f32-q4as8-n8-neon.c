/* NEON (armv8.2-a dotprod) GEMM for q4a: the q4 kernel's steps
 * (nib_qg_group in qgemm-neon.h) with the stored u8 zero points. */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4as8_n8_neon, NIB_DT_Q4A, nib_qg_block, 4, NIB_ZP_STORED)
#else
typedef int nib_gemm_f32_q4as8_n8_neon_unused;
#endif
