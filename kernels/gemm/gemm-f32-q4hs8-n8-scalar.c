/* Reference GEMM for q4h: 4-bit codes (q + 8) in sub-blocks of 16, each
 * scaled by a 6-bit signed multiple of the row's f16 super-scale
 * (kernels/qformat.h). The order of operations every variant follows is
 * in qgemm-scalar.h (nib_q4h_row). */
#include "kernels/gemm/qgemm-scalar.h"

NIB_QGEMM_SCALAR_KERNEL(nib_gemm_f32_q4hs8_n8_scalar, NIB_DT_Q4H, 0)
