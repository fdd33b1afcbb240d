/* AVX2 GEMM for q4h (4-bit codes in sub-blocks of 16, 6-bit sub-scales
 * times an f16 super-scale per row and super-block): nib_qh_group in
 * qgemm-avx2.h, q4's integer step (nib_q4_chunks, 2 chunks per sub-block)
 * and one fma per sub-block. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4hs8_n8_avx2, NIB_DT_Q4H, nib_qh_block)
#else
typedef int nib_gemm_f32_q4hs8_n8_avx2_unused;
#endif
