/* NEON (armv8.2-a dotprod) GEMM for q4. The layout is the AVX2 one: a
 * 32-byte chunk is two 16-byte halves (rows 0-3, rows 4-7), each 32-bit
 * lane one row. Nibbles 0..15 are valid signed bytes, so sdot by lane
 * multiplies them straight against 4 activations and accumulates in int32
 * (no int16 stage, nothing to saturate): nib_qg_group in
 * qgemm-neon.h, shared with q4a. */
#include "kernels/gemm/qgemm-neon.h"

#if NIB_HAVE_NEON
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4s8_n8_neon, NIB_DT_Q4, nib_qg_block, 4, NIB_ZP_8)
#else
typedef int nib_gemm_f32_q4s8_n8_neon_unused;
#endif
