/* AVX-512 VNNI GEMM for q4h (4-bit codes in sub-blocks of 16, 6-bit
 * sub-scales times an f16 super-scale per row and super-block), two
 * N-blocks at a time as the q4 one does (gemm-f32-q4s8-n16-avx512vnni.c):
 * a chunk of block nb and the same chunk of nb + 1 fill one zmm register,
 * so a vpdpbusd does 16 rows x 4 inputs of one token, and the per-sub-block
 * float steps (the sub-scales decoded, ws = (float)s x D, ws x sa, one
 * fma) run 16 rows wide. The same operations in the same order as the
 * scalar reference (qgemm-scalar.h, nib_q4h_row), lane for lane: the same
 * bits. A block without its partner in the range runs the AVX2 block. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
#include "kernels/gemm/qgemm-avx512.h"

/* The two blocks' 32-bit words (x0 low half, x1 high half) in every lane. */
static inline __attribute__((always_inline)) AVX512VNNI __m512i pair_set1(int32_t x0, int32_t x1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(x0)), _mm256_set1_epi32(x1),
                              1);
}

static inline int32_t ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Tokens t0..t0+M-1 (M 1..4) of the N-block pair at b0 (one stream),
 * super-blocks of G inputs: the final values, add included, written to y. */
static inline __attribute__((always_inline)) AVX512VNNI void
q4h_pair(const uint8_t *b0, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
         const int M, const uint32_t G, const struct nib_qrows *e0, const struct nib_qrows *e1,
         float *y, size_t y_stride)
{
    const uint32_t ns = G / 16, sgb = l->sgroup_bytes, cb = l->code_bytes;
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    const __m512i sh_lo =
        _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m512i sh_hi = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 2, 4, 6, 8, 10, 12, 14);
    __m512 accf[4];
#pragma GCC unroll 4
    for (int t = 0; t < M; t++)
        accf[t] = _mm512_setzero_ps();
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *p0 = b0 + (size_t)j * 2 * sgb, *p1 = p0 + sgb;
        nib_prefetch_nb(p0, 2 * (4 * G + 16 + 6 * ns), 2); /* both super-blocks */
        const __m512 D = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(p0 + cb))),
            _mm_loadu_si128((const __m128i *)(const void *)(p1 + cb)), 1));
        for (uint32_t i = 0; i < ns; i++) {
            const uint32_t bi = j * ns + i;
            if (bi >= nbk) /* the rest of the super-block: padding */
                break;
            __m512i acc[4][4];
#pragma GCC unroll 4
            for (int t = 0; t < M; t++)
                for (int q = 0; q < 4; q++)
                    acc[q][t] = _mm512_setzero_si512();
            const int8_t *ak = aq + (size_t)bi * 16;
            q4_pair_chunk(p0 + i * 64, p1 + i * 64, ak, kp, M, acc[0], acc[1]);
            q4_pair_chunk(p0 + i * 64 + 32, p1 + i * 64 + 32, ak + 8, kp, M, acc[2], acc[3]);
            const uint32_t lo_off = cb + 16 + 4 * i, hi_off = cb + 16 + 4 * ns + 2 * i;
            const __m512i lo = _mm512_and_si512(
                _mm512_srlv_epi32(pair_set1(nib_ld32(p0 + lo_off), nib_ld32(p1 + lo_off)), sh_lo),
                _mm512_set1_epi32(15));
            const __m512i hi = _mm512_and_si512(
                _mm512_srlv_epi32(pair_set1(ld16(p0 + hi_off), ld16(p1 + hi_off)), sh_hi),
                _mm512_set1_epi32(3));
            const __m512i sv = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)),
                                                _mm512_set1_epi32(32));
            const __m512 ws = _mm512_mul_ps(_mm512_cvtepi32_ps(sv), D);
#pragma GCC unroll 4
            for (int t = 0; t < M; t++) {
                __m512i s = _mm512_add_epi32(_mm512_add_epi32(acc[0][t], acc[1][t]),
                                             _mm512_add_epi32(acc[2][t], acc[3][t]));
                s = _mm512_sub_epi32(s,
                                     _mm512_set1_epi32((int32_t)((uint32_t)as[t * nbk + bi] << 3)));
                __m512 sc = _mm512_mul_ps(ws, _mm512_set1_ps(sa[t * nbk + bi]));
                accf[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, accf[t]);
            }
        }
    }
    pair_store(accf, M, t0, e0, e1, y, y_stride);
}

static inline __attribute__((always_inline)) AVX512VNNI void
q4h_step(const uint8_t *w, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t nb,
         int pair, uint32_t t0, const int M, const struct nib_qrows *e0, const struct nib_qrows *e1,
         float *y, size_t y_stride)
{
    const uint8_t *b0 = w + nib_ql_block_off(l, nb);
    if (!pair) {
        __m256 out[4];
        nib_qh_block(b0, nib_ql_group_stride(l, nb), l, a, t0, M, 1, e0, e0, out);
        for (int t = 0; t < M; t++)
            nib_qrows_store(e0, out[t], y + (t0 + t) * y_stride);
        return;
    }
#define Q4H_PAIR(G) q4h_pair(b0, l, a, t0, M, G, e0, e1, y, y_stride)
    NIB_QGEMM_BY_GROUP(l->gsize, Q4H_PAIR)
#undef Q4H_PAIR
}

NIB_QGEMM_N16_KERNEL(nib_gemm_f32_q4hs8_n16_avx512vnni, NIB_DT_Q4H, q4h_step)
#else
typedef int nib_gemm_f32_q4hs8_n16_avx512vnni_unused;
#endif
