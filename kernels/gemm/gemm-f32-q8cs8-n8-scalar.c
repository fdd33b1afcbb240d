/* Reference GEMM for q8c: int8 codes, either one f32 scale per row (group 0)
 * or one f16 scale per row and group (holds GGUF Q8_0 exactly).
 * The order of operations every variant follows is in qgemm-scalar.h. */
#include "kernels/gemm/qgemm-scalar.h"

NIB_QGEMM_SCALAR_KERNEL(nib_gemm_f32_q8cs8_n8_scalar, NIB_DT_Q8C, 0)
