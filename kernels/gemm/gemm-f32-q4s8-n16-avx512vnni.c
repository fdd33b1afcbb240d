/* AVX-512 VNNI GEMM for q4 (4-bit, zero point 8, f16 scale per row and
 * group of 32, 64 or 128 inputs), two N-blocks at a time: the packed
 * layout is unchanged (8-row blocks); a chunk of block nb and the same
 * chunk of block nb + 1 fill the two halves of one zmm register, so each
 * vpdpbusd does 16 rows x 4 inputs for one token, where the AVX2 kernel
 * needs a vpmaddubsw, an int16 add and a share of the widening for 8
 * rows. From cache, on one Zen 5 core, 60-73 GB/s against the AVX2
 * kernel's 42, and prefill 1.5-1.8x; decode from DRAM stays bounded by
 * the read (docs/benchmarks.md, "A 512-bit q4 kernel").
 *
 * Per group, the integer sums are exact (|sum| <= 128 x 15 x 128) and
 * the same every variant forms: the unsigned codes (q + 8) times the
 * activations, minus 8 x the group's activation sum. Then, per row, the
 * same float steps as the AVX2 kernel in the same order (convert,
 * ws x sa, one fma into the row's accumulator per group; the add last),
 * lane for lane in 16 lanes instead of 8, so the bits are every ISA's.
 * It reads the stored N-block pairs (kernels/qformat.h), whose scale
 * groups alternate, as one stream; a block without its partner in the
 * range runs the AVX2 block.
 *
 * The AVX2 table's q4 GEMM calls it where nib_avx512vnni_available();
 * nib_gemm_f32_q4s8_n8_avx2plain is the AVX2 kernel alone (tests). */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
#include "kernels/gemm/qgemm-avx512.h"

/* Tokens t0..t0+M-1 (M 1..4) of the N-block pair at b0 (rows e0, and e1
 * for its second block, whose groups follow the first's: one stream),
 * groups of G inputs: the final values, add included, written to y.
 * Four accumulators per token (low/high nibbles, even/odd chunks) keep
 * the vpdpbusd chains of a group short; groups are independent until
 * the fma, so consecutive groups overlap. */
static inline __attribute__((always_inline)) AVX512VNNI void
q4_pair(const uint8_t *b0, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
        const int M, const uint32_t G, const struct nib_qrows *e0, const struct nib_qrows *e1,
        float *y, size_t y_stride)
{
    const uint32_t nsg = l->n_sgroups, sgb = l->sgroup_bytes, cb = l->code_bytes;
    /* The pair's two halves (sgb apart: 144, 272, 528 bytes) are loaded
     * in turn, a read some hosts' prefetchers do not follow (q4/128 from
     * DRAM at 0.35 of q4/32), so the pair's bytes are prefetched in stream
     * order, a share per 8-input chunk (for groups of 32 too: 0.75 -> 0.82
     * of the read, docs/benchmarks.md). */
    const uint32_t pf_step = (2 * (4 * G + 16) + G / 8 - 1) / (G / 8);
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    __m512 accf[4];
#pragma GCC unroll 4
    for (int t = 0; t < M; t++)
        accf[t] = _mm512_setzero_ps();
    for (uint32_t j = 0; j < nsg; j++) {
        const uint8_t *p0 = b0 + (size_t)j * 2 * sgb, *p1 = p0 + sgb;
        const int8_t *ak = aq + (size_t)j * G;
        __m512i acc[4][4];
#pragma GCC unroll 4
        for (int t = 0; t < M; t++)
            for (int i = 0; i < 4; i++)
                acc[i][t] = _mm512_setzero_si512();
#pragma GCC unroll 16
        for (uint32_t c = 0; c < G / 8; c++) { /* chunks of 8 rows x 8 inputs */
            const int i = (c & 1) * 2;
            nib_prefetch_nb(p0 + c * pf_step, pf_step, 2);
            q4_pair_chunk(p0 + c * 32, p1 + c * 32, ak + c * 8, kp, M, acc[i], acc[i + 1], 1);
        }
        __m512 ws = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(p0 + cb))),
            _mm_loadu_si128((const __m128i *)(const void *)(p1 + cb)), 1));
#pragma GCC unroll 4
        for (int t = 0; t < M; t++) {
            __m512i s =
                _mm512_add_epi32(_mm512_add_epi32(acc[0][t], acc[2][t]),
                                 _mm512_srai_epi32(_mm512_add_epi32(acc[1][t], acc[3][t]), 4));
            s = _mm512_sub_epi32(s, _mm512_set1_epi32((int32_t)((uint32_t)as[t * nbk + j] << 3)));
            __m512 sc = _mm512_mul_ps(ws, _mm512_set1_ps(sa[t * nbk + j]));
            accf[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, accf[t]);
        }
    }
    pair_store(accf, M, t0, e0, e1, y, y_stride);
}

/* N-block nb alone (the AVX2 block, reading its groups gs bytes apart)
 * or, pair set, the pair nb, nb + 1, for tokens t0..t0+M-1. */
static inline __attribute__((always_inline)) AVX512VNNI void
q4_step(const uint8_t *w, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t nb,
        int pair, uint32_t t0, const int M, const struct nib_qrows *e0, const struct nib_qrows *e1,
        float *y, size_t y_stride)
{
    const uint8_t *b0 = w + nib_ql_block_off(l, nb);
    if (!pair) {
        __m256 out[4];
        nib_qg_block(b0, nib_ql_group_stride(l, nb), l, a, t0, M, 1, e0, e0, out, 4, NIB_ZP_8);
        for (int t = 0; t < M; t++)
            nib_qrows_store(e0, out[t], y + (t0 + t) * y_stride);
        return;
    }
#define Q4_PAIR(G) q4_pair(b0, l, a, t0, M, G, e0, e1, y, y_stride)
    NIB_QGEMM_BY_GROUP(l->gsize, Q4_PAIR)
#undef Q4_PAIR
}

/* Whole stored pairs (an even block with its partner in the range) run
 * 16 rows at a time; a block whose partner lies outside the range (a
 * share starting or ending inside a pair) or that has none runs alone. */
NIB_QGEMM_N16_KERNEL(nib_gemm_f32_q4s8_n16_avx512vnni, NIB_DT_Q4, q4_step)
#else
typedef int nib_gemm_f32_q4s8_n16_avx512vnni_unused;
#endif
