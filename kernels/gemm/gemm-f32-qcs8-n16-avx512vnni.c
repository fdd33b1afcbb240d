/* AVX-512 VNNI GEMMs for the per-channel formats q4c and q8c, two
 * N-blocks at a time: the packed layouts are unchanged (8-row blocks);
 * a chunk of block nb and the same chunk of block nb + 1 fill the two
 * halves of one zmm register, so each 512-bit vpdpbusd does 16 rows for
 * one token, twice the work of the 256-bit AVX-VNNI kernels per
 * instruction (on CPUs that run 512-bit ops at full width, twice the
 * multiply-adds per cycle).
 *
 * The integer sums are exact (|sum| <= K * 15 * 127 or K * 127 * 127
 * < 2^31 for K <= 2^20 at q4c, 2^17 at q8c), the same sums every other
 * variant forms; each half then goes through the same per-channel finish
 * as the AVX2 kernels (nib_qc_finish_avx2), so the bits are those of
 * every ISA.
 *
 * An odd last block (24 channels: the detector's 3x3 heads, most of its
 * work) has no partner, so its two halves hold two parts of k instead:
 * each row's chunk is spread to lanes 2i and 2i + 1 once per k step,
 * each token's 8 input bytes fill every lane pair with one 64-bit
 * broadcast load, and at the end lane 2i + 1 is added to lane 2i. One
 * vpdpbusd does 8 rows over 8 inputs, full width, where pairing the
 * block with itself did 8 rows over 4.
 *
 * Used by the quantized convolution where CPUID and the OS report AVX-512
 * F, BW and VNNI with the zmm state enabled (kernels/conv/conv-s8-qcs8-avx2.c
 * asks); the functions carry their target attribute, the build flags stay
 * AVX2. */
#include "kernels/gemm/qgemm-avx2.h"

#if NIB_HAVE_AVX2
#include <assert.h>
#include <cpuid.h>

#include "kernels/conv.h"
#include "kernels/gemm/qgemm-avx512.h"

/* Integer sums of tokens t0..t0+M-1 (M <= 8) against the N-blocks at b0
 * and b1: isum[t] low half for b0's 8 rows, high half for
 * b1's. J accumulators per token: 4 (low/high nibbles, even/odd chunks)
 * for up to 4 tokens, 2 (low/high) for 8, so that 16 independent vpdpbusd
 * chains cover its latency at two per cycle either way; 8 tokens load and
 * unpack each weight chunk once for twice the multiply-adds. The sums are
 * exact integers, so J and M change no bit. */
static inline __attribute__((always_inline)) AVX512VNNI void
q4c_pair_sums(const uint8_t *b0, const uint8_t *b1, const struct nib_qlayout *l,
              const struct nib_qact *a, uint32_t t0, const int M, const int J, __m512i *isum)
{
    const size_t kp = a->k_pad;
    const int8_t *ak = a->q + t0 * kp;
    __m512i acc[4][8];
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        for (int j = 0; j < J; j++)
            acc[j][t] = _mm512_setzero_si512();
    const uint8_t *p0 = b0, *p1 = b1;
    for (uint32_t k = 0; k < l->k_pad; k += 32, p0 += 128, p1 += 128, ak += 32) {
        nib_prefetch(p0, 128);
        nib_prefetch(p1, 128);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const int j = J == 4 ? (c & 1) * 2 : 0;
            q4_pair_chunk(p0 + c * 32, p1 + c * 32, ak + c * 8, kp, M, acc[j], acc[j + 1], 0);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        __m512i s = _mm512_add_epi32(acc[0][t], acc[1][t]);
        if (J == 4)
            s = _mm512_add_epi32(s, _mm512_add_epi32(acc[2][t], acc[3][t]));
        isum[t] = _mm512_sub_epi32(s, _mm512_set1_epi32(8 * a->sum[t0 + t]));
    }
}

/* The same for q8c per channel (chunks of 8 rows x 4 inputs), with the
 * weights made unsigned: vpdpbusd multiplies w + 128 (w ^ 0x80, u8) by
 * the activations (s8, broadcast straight from memory), and 128 x the
 * row's sum of activations comes off at the end: sum (w + 128) a - 128
 * sum a = sum w a exactly (the int32 lanes wrap alike on the way; the
 * result fits, nib_qlayout_get bounds K). Taking |w| and the activation
 * negated under w's sign mask, as the 256-bit kernel does, cost an
 * instruction per product. Two accumulators per token (even and odd
 * chunks). */
static inline __attribute__((always_inline)) AVX512VNNI void
q8c_pair_sums(const uint8_t *b0, const uint8_t *b1, const struct nib_qlayout *l,
              const struct nib_qact *a, uint32_t t0, const int M, __m512i *isum)
{
    const size_t kp = a->k_pad;
    const int8_t *ak = a->q + t0 * kp;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i acc[2][8];
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc[0][t] = acc[1][t] = _mm512_setzero_si512();
    const uint8_t *p0 = b0, *p1 = b1;
    for (uint32_t k = 0; k < l->k_pad; k += 8, p0 += 64, p1 += 64, ak += 8) {
        nib_prefetch(p0, 64);
        nib_prefetch(p1, 64);
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            __m512i wu = _mm512_xor_si512(pair_load(p0 + c * 32, p1 + c * 32), flip);
#pragma GCC unroll 8
            for (int t = 0; t < M; t++)
                acc[c][t] = _mm512_dpbusd_epi32(acc[c][t], wu,
                                                _mm512_set1_epi32(nib_ld32(ak + t * kp + c * 4)));
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        isum[t] = _mm512_sub_epi32(_mm512_add_epi32(acc[0][t], acc[1][t]),
                                   _mm512_set1_epi32(128 * a->sum[t0 + t]));
}

/* Lanes 2i and 2i + 1 of the interleaved sums added: row i's sum per
 * token, in the order the finish takes (exact: integers). */
static inline __attribute__((always_inline)) AVX512VNNI __m256i fold_lane_pairs(__m512i s)
{
    return _mm512_cvtepi64_epi32(_mm512_add_epi32(s, _mm512_srli_epi64(s, 32)));
}

/* Sums of the odd last block at b for tokens t0..t0+M-1, the register's
 * two halves on two parts of k, so that one 64-bit broadcast of a
 * token's 8 bytes feeds both:
 *   q4c: lane 2i holds row i's low nibbles (against the token's bytes
 *        0..3 of each 8), lane 2i + 1 its high nibbles (bytes 4..7);
 *   q8c: lane 2i holds row i's first chunk of each 8 inputs (bytes 0..3),
 *        lane 2i + 1 its second (bytes 4..7), unsigned as in
 *        q8c_pair_sums.
 * J accumulators per token over the four 8-input steps of each 32; the
 * correction (8 or 128 x the token's sum) comes off at the end. */
static inline __attribute__((always_inline)) AVX512VNNI void
odd_sums(const uint8_t *b, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
         const int M, const int J, const int Q8, __m256i *isum)
{
    const size_t kp = a->k_pad;
    const int8_t *ak = a->q + t0 * kp;
    const __m512i m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i zip = _mm512_set_epi32(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
    const uint32_t step = Q8 ? 256 : 128; /* weight bytes per 32 inputs */
    __m512i acc[4][8];
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        for (int j = 0; j < J; j++)
            acc[j][t] = _mm512_setzero_si512();
    const uint8_t *p = b;
    for (uint32_t k = 0; k < l->k_pad; k += 32, p += step, ak += 32) {
        nib_prefetch(p, step);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512i wv;
            if (Q8) {
                wv = _mm512_xor_si512(
                    _mm512_permutexvar_epi32(zip, _mm512_loadu_si512((const void *)(p + c * 64))),
                    flip);
            } else {
                wv = _mm512_permutexvar_epi32(
                    dup, _mm512_castsi256_si512(
                             _mm256_loadu_si256((const __m256i *)(const void *)(p + c * 32))));
                wv = _mm512_and_si512(_mm512_mask_srli_epi32(wv, 0xAAAA, wv, 4), m4);
            }
            const int j = J == 4 ? c : c & 1;
#pragma GCC unroll 8
            for (int t = 0; t < M; t++)
                acc[j][t] = _mm512_dpbusd_epi32(acc[j][t], wv,
                                                _mm512_set1_epi64(nib_ld64(ak + t * kp + c * 8)));
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        __m512i s = _mm512_add_epi32(acc[0][t], acc[1][t]);
        if (J == 4)
            s = _mm512_add_epi32(s, _mm512_add_epi32(acc[2][t], acc[3][t]));
        isum[t] = _mm256_sub_epi32(fold_lane_pairs(s),
                                   _mm256_set1_epi32((Q8 ? 128 : 8) * a->sum[t0 + t]));
    }
}

/* Final values of tokens t0..t0+M-1 for the odd last block at b (rows
 * e), written to y. */
static inline __attribute__((always_inline)) AVX512VNNI void
q_odd(const uint8_t *b, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
      const int M, const struct nib_qrows *e, float *y, size_t y_stride, const int Q8)
{
    __m256i isum[8];
    __m256 out[8];
    odd_sums(b, l, a, t0, M, M > 4 ? 2 : 4, Q8, isum);
    nib_qc_finish_avx2(b, l, a, t0, M, e, isum, out);
    for (int t = 0; t < M; t++)
        nib_qrows_store(e, out[t], y + (t0 + t) * y_stride);
}

/* Final values of tokens t0..t0+M-1 for the blocks at b0 (rows e0) and
 * b1 (rows e1), written to y; b1 NULL: b0 is the odd last block. */
static inline __attribute__((always_inline)) AVX512VNNI void
q_pair(const uint8_t *b0, const uint8_t *b1, const struct nib_qlayout *l, const struct nib_qact *a,
       uint32_t t0, const int M, const struct nib_qrows *e0, const struct nib_qrows *e1, float *y,
       size_t y_stride, const int Q8)
{
    if (!b1) {
        q_odd(b0, l, a, t0, M, e0, y, y_stride, Q8);
        return;
    }
    __m512i isum[8];
    __m256i lo[8], hi[8];
    __m256 out[8];
    if (Q8)
        q8c_pair_sums(b0, b1, l, a, t0, M, isum);
    else
        q4c_pair_sums(b0, b1, l, a, t0, M, M > 4 ? 2 : 4, isum);
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        lo[t] = _mm512_castsi512_si256(isum[t]);
        hi[t] = _mm512_extracti64x4_epi64(isum[t], 1);
    }
    nib_qc_finish_avx2(b0, l, a, t0, M, e0, lo, out);
    for (int t = 0; t < M; t++)
        nib_qrows_store(e0, out[t], y + (t0 + t) * y_stride);
    nib_qc_finish_avx2(b1, l, a, t0, M, e1, hi, out);
    for (int t = 0; t < M; t++)
        nib_qrows_store(e1, out[t], y + (t0 + t) * y_stride);
}

/* The walk over pairs of N-blocks and groups of 8 tokens (the rest in
 * groups of up to 4). */
static inline __attribute__((always_inline)) AVX512VNNI void
q_pairs(const struct nib_qlayout *l, const uint8_t *w, const struct nib_qact *a, uint32_t m,
        float *y, size_t y_stride, const float *add, size_t add_stride, uint32_t n_begin,
        uint32_t n_end, const int Q8)
{
    for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb += 2) {
        const uint8_t *b0 = w + (size_t)nb * l->nblock_bytes;
        const struct nib_qrows e0 = {add, add_stride, nb * NIB_Q_TILE_N, n_begin, n_end};
        const struct nib_qrows e1 = {add, add_stride, (nb + 1) * NIB_Q_TILE_N, n_begin, n_end};
        int pair = (nb + 1) * NIB_Q_TILE_N < n_end; /* block nb + 1 has rows in range */
        const uint8_t *b1 = pair ? b0 + l->nblock_bytes : NULL;
        const struct nib_qrows *r1 = pair ? &e1 : NULL;
        uint32_t t0 = 0;
        for (; t0 + 8 <= m; t0 += 8)
            q_pair(b0, b1, l, a, t0, 8, &e0, r1, y, y_stride, Q8);
        for (; t0 < m; t0 += 4) {
            switch (m - t0 < 4 ? m - t0 : 4) {
            case 1: q_pair(b0, b1, l, a, t0, 1, &e0, r1, y, y_stride, Q8); break;
            case 2: q_pair(b0, b1, l, a, t0, 2, &e0, r1, y, y_stride, Q8); break;
            case 3: q_pair(b0, b1, l, a, t0, 3, &e0, r1, y, y_stride, Q8); break;
            default: q_pair(b0, b1, l, a, t0, 4, &e0, r1, y, y_stride, Q8); break;
            }
        }
    }
}

AVX512VNNI NIB_QGEMM_DECL(nib_gemm_f32_q4cs8_n16_avx512vnni)
{
    nib_pre_qgemm(NIB_DT_Q4C, l, w, a, m, y, y_stride, n_begin, n_end);
    q_pairs(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 0);
}

/* q8c per channel only (l->group 0): the convolution's format. */
AVX512VNNI NIB_QGEMM_DECL(nib_gemm_f32_q8cs8_n16_avx512vnni)
{
    nib_pre_qgemm(NIB_DT_Q8C, l, w, a, m, y, y_stride, n_begin, n_end);
    assert(l->group == 0);
    q_pairs(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 1);
}

/* -1 until asked, then 1 when this CPU and OS run AVX-512 F, BW and VNNI
 * (zmm state enabled), else 0; 0 for good after nib_avx512vnni_allow(0). */
static int avx512vnni_state = -1;

int nib_avx512vnni_available(void)
{
    /* workers racing on the first call all store the same answer */
    int k = __atomic_load_n(&avx512vnni_state, __ATOMIC_RELAXED);
    if (k < 0) {
        unsigned int a = 0, b = 0, c = 0, d = 0;
        k = 0;
        if (__get_cpuid(1, &a, &b, &c, &d) && ((c >> 27) & 1)) { /* OSXSAVE */
            uint32_t lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            (void)hi;
            int zmm_ok = (lo & 0xE6) == 0xE6; /* SSE, AVX, opmask, zmm state */
            k = zmm_ok && __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((b >> 16) & 1) &&
                ((b >> 30) & 1) && ((c >> 11) & 1);
        }
        __atomic_store_n(&avx512vnni_state, k, __ATOMIC_RELAXED);
    }
    return k;
}

void nib_avx512vnni_allow(int on)
{
    /* relaxed, as nib_prefetch_set: a kernel that reads the old value
     * runs the other variant, with the same bits */
    __atomic_store_n(&avx512vnni_state, on ? -1 : 0, __ATOMIC_RELAXED);
}
#else
/* not an x86 build with AVX2: no AVX-512 kernels either */
int nib_avx512vnni_available(void)
{
    return 0;
}

void nib_avx512vnni_allow(int on)
{
    (void)on;
}
#endif
