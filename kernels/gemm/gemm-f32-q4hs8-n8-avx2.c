/* AVX2 GEMM for q4h (4-bit codes in sub-blocks of 16, 6-bit sub-scales
 * times an f16 super-scale per row and super-block): nib_qh_group in
 * qgemm-avx2.h, q4's integer step (nib_q4_chunks, 2 chunks per sub-block)
 * and one fma per sub-block; nib_gemm_f32_q4hs8_n8_avx2 runs the 512-bit
 * VNNI kernel instead where the CPU has AVX-512 VNNI
 * (gemm-f32-q4hs8-n16-avx512vnni.c). */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
NIB_QGEMM_KERNEL_PAIRS(nib_gemm_f32_q4hs8_n8_avx2plain, NIB_DT_Q4H, nib_qh_block)

/* The AVX2 table's entry: the 512-bit VNNI kernel where the CPU has it
 * (the same bits), as for q4. */
NIB_QGEMM_DECL(nib_gemm_f32_q4hs8_n8_avx2)
{
    (nib_avx512vnni_available() ? nib_gemm_f32_q4hs8_n16_avx512vnni
                                : nib_gemm_f32_q4hs8_n8_avx2plain)(l, w, a, m, y, y_stride, add,
                                                                   add_stride, n_begin, n_end);
}
#else
typedef int nib_gemm_f32_q4hs8_n8_avx2_unused;
#endif
