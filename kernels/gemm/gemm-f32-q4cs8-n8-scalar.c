/* Reference GEMM for q4c: 4-bit codes (q + 8) with one f32 scale per row;
 * the integer dot product runs over the whole row and one fma scales it.
 * The order of operations every variant follows is in qgemm-scalar.h. */
#include "kernels/gemm/qgemm-scalar.h"

NIB_QGEMM_SCALAR_KERNEL(nib_gemm_f32_q4cs8_n8_scalar, NIB_DT_Q4C, 0)
