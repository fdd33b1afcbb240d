/* AVX2 GEMM for q4a (4-bit with a u8 zero point per row and group): the
 * q4 kernel's steps (nib_qg_group in qgemm-avx2.h) with the stored
 * zero points, one vector multiply per group for the correction. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4as8_n8_avx2, NIB_DT_Q4A, nib_qg_block, 4, NIB_ZP_STORED)
#else
typedef int nib_gemm_f32_q4as8_n8_avx2_unused;
#endif
