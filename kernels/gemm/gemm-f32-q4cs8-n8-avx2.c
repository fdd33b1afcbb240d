/* AVX2 GEMM for q4c (4-bit per channel): the q4 inner step
 * (nib_q4_block32, qgemm-avx2.h: int16 sums widened every 4 chunks) over
 * the whole row, int32 to the end (|sum| <= K * 15 * 128 < 2^31 for
 * K <= 2^20), one fma per output. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
static inline __attribute__((always_inline)) void
q4c_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
          const int M, const struct nib_qrows *e, __m256 *out)
{
    const size_t kp = a->k_pad;
    const int8_t *ak = a->q + t0 * kp;
    __m256i acc32[4];
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc32[t] = _mm256_setzero_si256();
    const uint8_t *p = blk;
    for (uint32_t k = 0; k < l->k_pad; k += 32, p += 128, ak += 32) {
        nib_prefetch(p, 128);
        nib_q4_block32(p, ak, kp, M, acc32);
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc32[t] = _mm256_sub_epi32(acc32[t], _mm256_set1_epi32(8 * a->sum[t0 + t]));
    nib_qc_finish_avx2(blk, l, a, t0, M, e, acc32, out);
}

NIB_QGEMM_KERNEL(nib_gemm_f32_q4cs8_n8_avx2, NIB_DT_Q4C, q4c_block)
#else
typedef int nib_gemm_f32_q4cs8_n8_avx2_unused;
#endif
