/* AVX2 GEMM for q4 / q4a (per-group 4-bit, 8-row N-blocks).
 *
 * Per 32-byte chunk (8 rows x 8 inputs): one load, and/shift/and to split
 * the nibbles, then per token two vpbroadcastd of 4 activations and two
 * vpmaddubsw (u4 x s8 -> int16 pairs) added into an int16 accumulator,
 * widened to int32 every 4 chunks (nib_q4_block32 in qgemm-avx2.h has the
 * headroom argument). Each 32-bit lane holds one row: no horizontal sums.
 * Per group: subtract zp * sum(a) (8 for q4), convert, scale, one fma. */
#include "kernels/qkernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include "kernels/qgemm/qgemm-avx2.h"

/* M tokens (1..4, constant), groups of G inputs (32/64/128, constant). */
static inline __attribute__((always_inline)) void
q4g_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
          const int M, const uint32_t G, const int ASYM, __m256 *out)
{
    const uint32_t nsg = l->n_sgroups, sgb = l->sgroup_bytes, cb = l->code_bytes;
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    __m256 accf[4];
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        accf[t] = _mm256_setzero_ps();
    for (uint32_t j = 0; j < nsg; j++) {
        const uint8_t *p = blk + (size_t)j * sgb;
        const int8_t *ak = aq + (size_t)j * G;
        nib_prefetch(p, 4 * G + 16 + (ASYM ? 8 : 0)); /* sgb, as a constant */
        __m256i acc32[4];
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++)
            acc32[t] = _mm256_setzero_si256();
        #pragma GCC unroll 4
        for (uint32_t c4 = 0; c4 < G / 32; c4++)
            nib_q4_block32(p + c4 * 128, ak + c4 * 32, kp, M, acc32);
        __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + cb)));
        __m256i zp = _mm256_set1_epi32(8);
        if (ASYM)
            zp = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(p + cb + 16)));
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            /* zero point x activation sum: one vector multiply per row for
             * q4a; for q4 (zero point 8 in every row) a scalar shift. */
            __m256i corr = ASYM ? _mm256_mullo_epi32(zp, _mm256_set1_epi32(as[t * nbk + j]))
                                : _mm256_set1_epi32((int32_t)((uint32_t)as[t * nbk + j] << 3));
            __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc32[t], corr));
            __m256 s = _mm256_mul_ps(ws, _mm256_set1_ps(sa[t * nbk + j]));
            accf[t] = _mm256_fmadd_ps(f, s, accf[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        out[t] = accf[t];
}

#define Q4G_CASES(G, ASYM)                                                                         \
    switch (M) {                                                                                   \
    case 1: q4g_block(blk, l, a, t0, 1, G, ASYM, out); break;                                      \
    case 2: q4g_block(blk, l, a, t0, 2, G, ASYM, out); break;                                      \
    case 3: q4g_block(blk, l, a, t0, 3, G, ASYM, out); break;                                      \
    default: q4g_block(blk, l, a, t0, 4, G, ASYM, out); break;                                     \
    }

static void q4g_block_any(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
                          uint32_t t0, int M, int asym, __m256 *out)
{
    if (!asym) {
        switch (l->gsize) {
        case 32: Q4G_CASES(32, 0) break;
        case 64: Q4G_CASES(64, 0) break;
        default: Q4G_CASES(128, 0) break;
        }
    } else {
        switch (l->gsize) {
        case 32: Q4G_CASES(32, 1) break;
        case 64: Q4G_CASES(64, 1) break;
        default: Q4G_CASES(128, 1) break;
        }
    }
}

static void q4g(const struct nib_qlayout *l, const uint8_t *w, const struct nib_qact *a, uint32_t m,
                float *y, size_t y_stride, const float *add, size_t add_stride, uint32_t n_begin,
                uint32_t n_end, int asym)
{
    for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb++) {
        const uint8_t *blk = w + (size_t)nb * l->nblock_bytes;
        for (uint32_t t0 = 0; t0 < m; t0 += 4) {
            int M = m - t0 < 4 ? (int)(m - t0) : 4;
            __m256 out[4];
            q4g_block_any(blk, l, a, t0, M, asym, out);
            for (int t = 0; t < M; t++)
                nib_store_acc_add(out[t], y + (t0 + t) * y_stride,
                                  add ? add + (t0 + t) * add_stride : NULL, nb * NIB_Q_TILE_N, n_begin,
                                  n_end);
        }
    }
}

NIB_QGEMM_DECL(nib_gemm_q4s8_n8_avx2)
{
    q4g(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 0);
}

NIB_QGEMM_DECL(nib_gemm_q4as8_n8_avx2)
{
    q4g(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 1);
}
#else
typedef int nib_gemm_q4s8_avx2_unused;
#endif
