/* AVX2 GEMM for q4 (4-bit, zero point 8, f16 scale per row and group).
 * Per 32-byte chunk (8 rows x 8 inputs): one load, and/shift/and to split
 * the nibbles, then per token two vpbroadcastd of 4 activations and two
 * vpmaddubsw (u4 x s8 -> int16 pairs) added into an int16 accumulator,
 * widened to int32 every 4 chunks; each 32-bit lane holds one row, so no
 * horizontal sums (nib_qg_group in qgemm-avx2.h, shared with q4a).
 *
 * The AVX2 table's entry, nib_gemm_f32_q4s8_n8_avx2, runs the 512-bit
 * VNNI kernel instead where the CPU has AVX-512 VNNI (the same bits,
 * kernels/gemm/gemm-f32-q4s8-n16-avx512vnni.c); the AVX2 kernel alone is
 * nib_gemm_f32_q4s8_n8_avx2plain. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4s8_n8_avx2plain, NIB_DT_Q4, nib_qg_block, 4, NIB_ZP_8)

NIB_QGEMM_DECL(nib_gemm_f32_q4s8_n8_avx2)
{
    (nib_avx512vnni_available() ? nib_gemm_f32_q4s8_n16_avx512vnni
                                : nib_gemm_f32_q4s8_n8_avx2plain)(l, w, a, m, y, y_stride, add,
                                                                  add_stride, n_begin, n_end);
}
#else
typedef int nib_gemm_f32_q4s8_n8_avx2_unused;
#endif
