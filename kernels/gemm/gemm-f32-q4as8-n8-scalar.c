/* Reference GEMM for q4a: 4-bit codes with a u8 zero point and an f16 scale
 * per row and group.
 * The order of operations every variant follows is in qgemm-scalar.h. */
#include "kernels/gemm/qgemm-scalar.h"

NIB_QGEMM_SCALAR_KERNEL(nib_gemm_f32_q4as8_n8_scalar, NIB_DT_Q4A, 1)
