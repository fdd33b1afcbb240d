/* AVX2 GEMM for q8c (int8 weights, per channel or per group).
 * vpmaddubsw needs one unsigned operand: it multiplies |w| (u8, up to 128)
 * by a * sign(w) (s8; exact because activations are never -128), so a
 * pair sums to at most 2 * 128 * 127 = 32512 and cannot saturate; each
 * result is widened at once with vpmaddwd (two would overflow int16).
 * Chunk = 8 rows x 4 inputs, one row per 32-bit lane. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
/* acc[t] += the products of one chunk (8 rows x 4 inputs) at p. */
static inline __attribute__((always_inline)) void
q8_chunk(const uint8_t *p, const int8_t *ak, size_t kp, const int M, __m256i *acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i wa = _mm256_abs_epi8(wv);
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        __m256i av = _mm256_set1_epi32(nib_ld32(ak + t * kp));
        __m256i pr = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(av, wv));
        acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(pr, ones));
        if (M > 1)
            NIB_KEEP(acc[t]);
    }
}

/* Integer sums of chunks [0, n_chunks) of one scale group (n_chunks even). */
static inline __attribute__((always_inline)) void
q8_dot(const uint8_t *p, const int8_t *ak, size_t kp, uint32_t n_chunks, const int M, __m256i *acc)
{
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc[t] = _mm256_setzero_si256();
    for (uint32_t c = 0; c < n_chunks; c += 2, p += 64, ak += 8) {
        nib_prefetch(p, 64);
        q8_chunk(p, ak, kp, M, acc);
        q8_chunk(p + 32, ak + 4, kp, M, acc);
    }
}

/* Per group (G constant): one fma per group with the f16 row scales. */
static inline __attribute__((always_inline)) void
q8g_group(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
          const int M, const uint32_t G, __m256 *out)
{
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    __m256 accf[4];
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        accf[t] = _mm256_setzero_ps();
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *p = blk + (size_t)j * l->sgroup_bytes;
        __m256i isum[4];
        q8_dot(p, aq + (size_t)j * G, kp, G / 4, M, isum);
        __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + l->code_bytes)));
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            __m256 s = _mm256_mul_ps(ws, _mm256_set1_ps(sa[t * nbk + j]));
            accf[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), s, accf[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        out[t] = accf[t];
}

static inline __attribute__((always_inline)) void
q8_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
         const int M, const struct nib_qrows *e, __m256 *out)
{
    if (l->group == 0) { /* per channel: one fma with the add */
        __m256i isum[4];
        q8_dot(blk, a->q + t0 * (size_t)a->k_pad, a->k_pad, l->k_pad / 4, M, isum);
        nib_qc_finish_avx2(blk, l, a, t0, M, e, isum, out);
        return;
    }
#define Q8G(G) q8g_group(blk, l, a, t0, M, G, out)
    NIB_QGEMM_BY_GROUP(l->gsize, Q8G)
#undef Q8G
    nib_qrows_plus_add(e, t0, M, out);
}

NIB_QGEMM_KERNEL(nib_gemm_f32_q8cs8_n8_avx2, NIB_DT_Q8C, q8_block)
#else
typedef int nib_gemm_f32_q8cs8_n8_avx2_unused;
#endif
