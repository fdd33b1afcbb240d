/* Helpers shared by the AVX-512 VNNI GEMM kernels (include only from
 * them, after qgemm-avx2.h): their target attribute and the load that
 * puts the same chunk of two 8-row N-blocks in one zmm register. The
 * build flags stay AVX2; each function carries the attribute and runs
 * only where nib_avx512vnni_available() says the CPU and OS allow it. */
#ifndef NIB_QGEMM_AVX512_H
#define NIB_QGEMM_AVX512_H

#if NIB_HAVE_AVX2
#include <immintrin.h>

#define AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* 32 bytes at p0 in the low half, 32 at p1 in the high half. */
static inline __attribute__((always_inline)) AVX512VNNI __m512i pair_load(const uint8_t *p0,
                                                                          const uint8_t *p1)
{
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)p0)),
        _mm256_loadu_si256((const __m256i *)(const void *)p1), 1);
}

/* One 8-input chunk of two blocks (wv: p0's in the low half, p1's in the
 * high; q4_pair_chunk loads them from two places) for tokens 0..M-1
 * (M <= 8) whose activations are at ak, kp apart: the low nibbles
 * (inputs 0..3) into lo[t], the high (4..7) into hi[t], the unsigned
 * codes against the signed activations (vpdpbusd).
 * x16 set: the high nibbles stay where they are (code x 16: wv & 0xf0,
 * one instruction fewer per chunk), so hi[t] sums 16 x their products,
 * exact while it stays under 2^31 (a group of at most 128 inputs:
 * 64 x 240 x 128 < 2^21; not q4c's whole rows), and the caller adds
 * hi >> 4 (exact: a multiple of 16) once per group. */
static inline __attribute__((always_inline)) AVX512VNNI void
q4_pair_chunk_v(const __m512i wv, const int8_t *ak, size_t kp, const int M, __m512i *lo,
                __m512i *hi, const int x16)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i wl = _mm512_and_si512(wv, m4);
    const __m512i wh =
        x16 ? _mm512_andnot_si512(m4, wv) : _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4);
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        const int8_t *at = ak + t * kp;
        lo[t] = _mm512_dpbusd_epi32(lo[t], wl, _mm512_set1_epi32(nib_ld32(at)));
        hi[t] = _mm512_dpbusd_epi32(hi[t], wh, _mm512_set1_epi32(nib_ld32(at + 4)));
    }
}

static inline __attribute__((always_inline)) AVX512VNNI void
q4_pair_chunk(const uint8_t *p0, const uint8_t *p1, const int8_t *ak, size_t kp, const int M,
              __m512i *lo, __m512i *hi, const int x16)
{
    q4_pair_chunk_v(pair_load(p0, p1), ak, kp, M, lo, hi, x16);
}

/* The end of a pair's rows: accf[t] (16 lanes: block e0's 8 rows low,
 * e1's high) plus the add, stored to y. */
static inline __attribute__((always_inline)) AVX512VNNI void
pair_store(const __m512 *accf, const int M, uint32_t t0, const struct nib_qrows *e0,
           const struct nib_qrows *e1, float *y, size_t y_stride)
{
    __m256 lo[4], hi[4];
#pragma GCC unroll 4
    for (int t = 0; t < M; t++) {
        lo[t] = _mm512_castps512_ps256(accf[t]);
        hi[t] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(accf[t]), 1));
    }
    nib_qrows_plus_add(e0, t0, M, lo);
    nib_qrows_plus_add(e1, t0, M, hi);
    for (int t = 0; t < M; t++) {
        nib_qrows_store(e0, lo[t], y + (t0 + t) * y_stride);
        nib_qrows_store(e1, hi[t], y + (t0 + t) * y_stride);
    }
}

/* Defines the 512-bit GEMM `name` for dtype: whole stored pairs (an even
 * block with its partner in the range) run 16 rows at a time, a block
 * whose partner lies outside the range or that has none alone; step(w,
 * l, a, nb, pair, t0, M, &e0, &e1, y, y_stride) does tokens t0..t0+M-1. */
#define NIB_QGEMM_N16_KERNEL(name, dtype, step)                                                    \
    AVX512VNNI NIB_QGEMM_DECL(name)                                                                \
    {                                                                                              \
        nib_pre_qgemm(dtype, l, w, a, m, y, y_stride, n_begin, n_end);                             \
        for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end;) {                   \
            const int pair = nib_qpair_in_range(l, nb, n_end);                                     \
            const struct nib_qrows e0 = {add, add_stride, nb * NIB_Q_TILE_N, n_begin, n_end};      \
            const struct nib_qrows e1 = {add, add_stride, (nb + 1) * NIB_Q_TILE_N, n_begin,        \
                                         n_end};                                                   \
            for (uint32_t t0 = 0; t0 < m; t0 += 4) {                                               \
                switch (m - t0 < 4 ? m - t0 : 4) {                                                 \
                case 1: step(w, l, a, nb, pair, t0, 1, &e0, &e1, y, y_stride); break;              \
                case 2: step(w, l, a, nb, pair, t0, 2, &e0, &e1, y, y_stride); break;              \
                case 3: step(w, l, a, nb, pair, t0, 3, &e0, &e1, y, y_stride); break;              \
                default: step(w, l, a, nb, pair, t0, 4, &e0, &e1, y, y_stride); break;             \
                }                                                                                  \
            }                                                                                      \
            nb += pair ? 2 : 1;                                                                    \
        }                                                                                          \
    }
#endif

#endif
