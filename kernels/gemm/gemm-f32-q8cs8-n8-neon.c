/* NEON (armv8.2-a dotprod) GEMM for q8c (int8 weights, per channel or per group):
 * nib_q8_dot in qgemm-neon.h (chunk = 8 rows x 4 inputs, one row per
 * 32-bit lane), per group through nib_qg_group like q4. */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q8cs8_n8_neon, NIB_DT_Q8C, nib_q8c_block)
#else
typedef int nib_gemm_f32_q8cs8_n8_neon_unused;
#endif
