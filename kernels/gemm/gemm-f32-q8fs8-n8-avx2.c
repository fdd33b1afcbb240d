/* AVX2 GEMM for q8f (8-bit codes, f32 scale and f32 minimum per row and
 * group of 16 or 32): nib_qf_group in qgemm-avx2.h, the integer steps of
 * q8c (nib_q8_dot: |w| x a*sign(w), so code -128 is exact),
 * then two fmas per group: isum * (ws * sa) and asum * (wm * sa). */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q8fs8_n8_avx2, NIB_DT_Q8F, nib_qf_block, 8)
#else
typedef int nib_gemm_f32_q8fs8_n8_avx2_unused;
#endif
