/* Reference GEMM for q4: 4-bit codes (q + 8), one f16 scale per row and
 * group.
 * The order of operations every variant follows is in qgemm-scalar.h. */
#include "kernels/gemm/qgemm-scalar.h"

NIB_QGEMM_SCALAR_KERNEL(nib_gemm_f32_q4s8_n8_scalar, NIB_DT_Q4, 0)
