/* AVX2 GEMM for q4f (4-bit codes, f32 scale and f32 minimum per row and
 * group of 16 or 32): nib_qf_group in qgemm-avx2.h, the integer steps of
 * q4 (nib_q4_chunks: 2 or 4 chunks per group, raw codes 0..15),
 * then two fmas per group: isum * (ws * sa) and asum * (wm * sa). */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4fs8_n8_avx2, NIB_DT_Q4F, nib_qf_block, 4)
#else
typedef int nib_gemm_f32_q4fs8_n8_avx2_unused;
#endif
