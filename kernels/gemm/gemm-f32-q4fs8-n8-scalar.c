/* Reference GEMM for q4f: 4-bit codes 0..15 (no offset) with an f32 scale
 * and an f32 minimum per row and group of 16 or 32 (holds GGUF Q4_1, Q4_K,
 * Q2_K and Q3_K exactly).
 * The order of operations every variant follows is in qgemm-scalar.h
 * (nib_qmin_row). */
#include "kernels/gemm/qgemm-scalar.h"

NIB_QGEMM_SCALAR_KERNEL(nib_gemm_f32_q4fs8_n8_scalar, NIB_DT_Q4F, 0)
