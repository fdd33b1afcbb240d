/* AVX-512 VNNI GEMM for q4h (4-bit codes in sub-blocks of 16, 6-bit
 * sub-scales times an f16 super-scale per row and super-block), two
 * N-blocks at a time as the q4 one does (gemm-f32-q4s8-n16-avx512vnni.c):
 * a chunk of block nb and the same chunk of nb + 1, stored side by side
 * (kernels/qformat.h), fill one zmm register with one load, the pair read
 * front to back, so a vpdpbusd does 16 rows x 4 inputs of one token, and
 * the per-sub-block float steps (the sub-scales decoded, ws = (float)s x
 * D, ws x sa, one fma) run 16 rows wide. The same operations in the same order as the
 * scalar reference (qgemm-scalar.h, nib_q4h_row), lane for lane: the same
 * bits. A block without its partner in the range runs the AVX2 block. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
#include "kernels/gemm/qgemm-avx512.h"

/* A super-block pair's 6-bit sub-scales, decoded once into bytes:
 * tab[16 i + r] is sub-block i's field of row r (0..7 block 0, 8..15
 * block 1) minus 32 (kernels/qformat.h), so each sub-block's 16 scales
 * are one widening load. Four sub-blocks (64 bytes) at a time: the
 * blocks' words interleaved into qwords (sub-block i of block 0, of
 * block 1, i + 1 ...), the byte holding each row's field copied to the
 * row's byte (vpshufb), shifted to it (even and odd rows blended: a
 * 16-bit shift serves two rows) and masked. Decoding per sub-block, as
 * this kernel did, took 11 vector instructions each; this takes about
 * 5 (docs/benchmarks.md, "The q4h sub-scales decoded once"). Masked
 * loads: no byte past the fields is read (a masked-off lane never
 * faults). */
static inline __attribute__((always_inline)) AVX512VNNI void
q4h_subscales(const uint8_t *f0, const uint8_t *f1, uint32_t lo_off, uint32_t hi_off,
              const uint32_t ns, int8_t *tab)
{
    const __mmask16 m = (__mmask16)((1u << ns) - 1);
    const __m512i lo_both =
        _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_both = /* 16-bit indexes 0, 32, 1, 33, ... 7, 39 */
        _mm512_setr_epi32(0x200000, 0x210001, 0x220002, 0x230003, 0x240004, 0x250005, 0x260006,
                          0x270007, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i lo = _mm512_permutex2var_epi32(_mm512_maskz_loadu_epi32(m, f0 + lo_off), lo_both,
                                                 _mm512_maskz_loadu_epi32(m, f1 + lo_off));
    const __m512i hi = _mm512_permutex2var_epi16(_mm512_maskz_loadu_epi16(m, f0 + hi_off), hi_both,
                                                 _mm512_maskz_loadu_epi16(m, f1 + hi_off));
    /* per qword: row r's field from byte r / 2 (low bits: rows 2b, 2b + 1
     * in byte b's nibbles) and from byte r / 4 (high bits, 2 each); vpshufb
     * indexes within 16 bytes, so a lane's second qword adds 8 */
    const __m512i by2 = _mm512_setr_epi64(
        0x0303020201010000ll, 0x0b0b0a0a09090808ll, 0x0303020201010000ll, 0x0b0b0a0a09090808ll,
        0x0303020201010000ll, 0x0b0b0a0a09090808ll, 0x0303020201010000ll, 0x0b0b0a0a09090808ll);
    const __m512i by4 = _mm512_setr_epi64(
        0x0101010100000000ll, 0x0909090908080808ll, 0x0101010100000000ll, 0x0909090908080808ll,
        0x0101010100000000ll, 0x0909090908080808ll, 0x0101010100000000ll, 0x0909090908080808ll);
    const __mmask64 odd = 0xAAAAAAAAAAAAAAAAull;
    for (uint32_t h = 0; h < (ns + 3) / 4; h++) {
        const __m512i lw = _mm512_cvtepu32_epi64(h ? _mm512_extracti64x4_epi64(lo, 1)
                                                   : _mm512_castsi512_si256(lo));
        const __m512i hw = _mm512_cvtepu16_epi64(h ? _mm512_extracti32x4_epi32(hi, 1)
                                                   : _mm512_castsi512_si128(hi));
        const __m512i l = _mm512_shuffle_epi8(lw, by2);
        const __m512i lr = _mm512_and_si512(_mm512_mask_blend_epi8(odd, l, _mm512_srli_epi16(l, 4)),
                                            _mm512_set1_epi8(15));
        const __m512i hb = _mm512_shuffle_epi8(hw, by4);
        /* rows 2k and 2k + 1 of a 16-bit word: shifts 2 (2k % 4) and 2 more */
        const __m512i hr = _mm512_and_si512(
            _mm512_mask_blend_epi8(odd, _mm512_srlv_epi16(hb, _mm512_set1_epi32(0x40000)),
                                   _mm512_srlv_epi16(hb, _mm512_set1_epi32(0x60002))),
            _mm512_set1_epi8(3));
        _mm512_storeu_si512(
            (void *)(tab + 64 * h),
            _mm512_sub_epi8(_mm512_or_si512(lr, _mm512_slli_epi16(hr, 4)), _mm512_set1_epi8(32)));
    }
}

/* Sub-block i's weight scales, 16 rows: (float)s x D. */
static inline __attribute__((always_inline)) AVX512VNNI __m512 q4h_ws(const int8_t *tab, uint32_t i,
                                                                      __m512 D)
{
    const __m128i s = _mm_loadu_si128((const __m128i *)(const void *)(tab + 16 * i));
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(s)), D);
}

/* Sub-block i (activation block bi) of the pair for tokens 0..M-1: the
 * exact integer sum (codes times activations, minus 8 x the block's
 * activation sum, in any order: int32 is exact), then the scalar
 * reference's float steps (convert, ws x sa, one fma), in its order. */
static inline __attribute__((always_inline)) AVX512VNNI void
q4h_sub(const uint8_t *g, uint32_t i, size_t bi, const int8_t *aq, size_t kp, const float *sa,
        const int32_t *as, size_t nbk, const int M, __m512 ws, __m512 *accf)
{
    __m512i lo[4], hi[4];
#pragma GCC unroll 4
    for (int t = 0; t < M; t++) {
        lo[t] = _mm512_set1_epi32(-(int32_t)((uint32_t)as[t * nbk + bi] << 3));
        hi[t] = _mm512_setzero_si512();
    }
    const int8_t *ak = aq + bi * 16;
    q4_pair_chunk_v(_mm512_loadu_si512((const void *)(g + i * 128)), ak, kp, M, lo, hi, 1);
    q4_pair_chunk_v(_mm512_loadu_si512((const void *)(g + i * 128 + 64)), ak + 8, kp, M, lo, hi, 1);
#pragma GCC unroll 4
    for (int t = 0; t < M; t++) {
        const __m512 sc = _mm512_mul_ps(ws, _mm512_set1_ps(sa[t * nbk + bi]));
        accf[t] = _mm512_fmadd_ps(
            _mm512_cvtepi32_ps(_mm512_add_epi32(lo[t], _mm512_srai_epi32(hi[t], 4))), sc, accf[t]);
    }
}

/* Tokens t0..t0+M-1 (M 1..4) of the N-block pair at b0 (one stream),
 * super-blocks of G inputs: the final values, add included, written to
 * y. Whole super-blocks run unrolled; a last one cut short by the
 * activations' end (padding) runs sub-block by sub-block. */
static inline __attribute__((always_inline)) AVX512VNNI void
q4h_pair(const uint8_t *b0, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
         const int M, const uint32_t G, const struct nib_qrows *e0, const struct nib_qrows *e1,
         float *y, size_t y_stride)
{
    const uint32_t ns = G / 16, sgb = l->sgroup_bytes, cb = l->code_bytes;
    const uint32_t lo_off = nib_q4h_lo_off(l, 0), hi_off = nib_q4h_hi_off(l, 0);
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    __m512 accf[4];
#pragma GCC unroll 4
    for (int t = 0; t < M; t++)
        accf[t] = _mm512_setzero_ps();
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        /* the pair's super-block j: both blocks' codes, then the fields
         * of block 0 (f0) and of block 1 (f1) */
        const uint8_t *g = b0 + (size_t)j * 2 * sgb, *f0 = g + 2 * cb, *f1 = f0 + (sgb - cb);
        const __m512 D = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)f0)),
            _mm_loadu_si128((const __m128i *)(const void *)f1), 1));
        /* The super-block pair's lines (2 x sgb bytes, stream order) twice
         * the distance ahead, all at once, as the AVX2 kernel does: with
         * the pair one stream (format 13) a share per sub-block ran the
         * two-worker matmuls a tenth slower (docs/benchmarks.md, "A
         * pair's prefetches at once"). */
        nib_prefetch_nb(g, 2 * sgb, 2);
        int8_t tab[128] __attribute__((aligned(64)));
        q4h_subscales(f0, f1, lo_off, hi_off, ns, tab);
        const size_t b = (size_t)j * ns;
        if (b + ns <= nbk) {
#pragma GCC unroll 8
            for (uint32_t i = 0; i < ns; i++)
                q4h_sub(g, i, b + i, aq, kp, sa, as, nbk, M, q4h_ws(tab, i, D), accf);
        } else {
            for (uint32_t i = 0; b + i < nbk; i++) /* the rest: padding */
                q4h_sub(g, i, b + i, aq, kp, sa, as, nbk, M, q4h_ws(tab, i, D), accf);
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
