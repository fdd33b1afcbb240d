/* Reference GEMM for q8f: int8 codes with an f32 scale and an f32 minimum
 * per row and group of 16 or 32 (holds GGUF Q5_1, Q5_K, Q6_K and IQ4_XS
 * exactly).
 * The order of operations every variant follows is in qgemm-scalar.h
 * (nib_qmin_row). */
#include "kernels/gemm/qgemm-scalar.h"

NIB_QGEMM_SCALAR_KERNEL(nib_gemm_f32_q8fs8_n8_scalar, NIB_DT_Q8F, 0)
