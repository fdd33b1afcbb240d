/* AVX2 GEMM for q4c (4-bit per channel): the q4 inner step
 * (nib_q4_block32, qgemm-avx2.h: int16 sums widened every 4 chunks) over
 * the whole row, int32 to the end (|sum| <= K * 15 * 128 < 2^31 for
 * K <= 2^20), one fma per output. */
#include "kernels/qkernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kernels/qgemm/qgemm-avx2.h"

static inline __attribute__((always_inline)) void
q4c_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
          const int M, __m256i *isum)
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
        isum[t] = _mm256_sub_epi32(acc32[t], _mm256_set1_epi32(8 * a->sum[t0 + t]));
}

NIB_QGEMM_DECL(nib_gemm_q4cs8_n8_avx2)
{
    for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb++) {
        const uint8_t *blk = w + (size_t)nb * l->nblock_bytes;
        __m256 ws = _mm256_loadu_ps((const float *)(const void *)(blk + l->code_bytes));
        uint32_t r0 = nb * NIB_Q_TILE_N;
        for (uint32_t t0 = 0; t0 < m; t0 += 4) {
            int M = m - t0 < 4 ? (int)(m - t0) : 4;
            __m256i isum[4];
            switch (M) {
            case 1: q4c_block(blk, l, a, t0, 1, isum); break;
            case 2: q4c_block(blk, l, a, t0, 2, isum); break;
            case 3: q4c_block(blk, l, a, t0, 3, isum); break;
            default: q4c_block(blk, l, a, t0, 4, isum); break;
            }
            for (int t = 0; t < M; t++) {
                size_t tt = t0 + t;
                __m256 base = nib_load_add(add ? add + tt * add_stride : NULL, r0, n_begin, n_end);
                __m256 s = _mm256_mul_ps(ws, _mm256_set1_ps(a->scale[tt]));
                __m256 v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), s, base);
                nib_store_rows(v, y + tt * y_stride, r0, n_begin, n_end);
            }
        }
    }
}
#else
typedef int nib_gemm_q4cs8_avx2_unused;
#endif
