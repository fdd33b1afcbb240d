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

/* One 8-input chunk of two blocks (p0 in the low half, p1 in the high)
 * for tokens 0..M-1 (M <= 8) whose activations are at ak, kp apart:
 * the low nibbles (inputs 0..3) into lo[t], the high (4..7) into hi[t],
 * the unsigned codes against the signed activations (vpdpbusd). */
static inline __attribute__((always_inline)) AVX512VNNI void
q4_pair_chunk(const uint8_t *p0, const uint8_t *p1, const int8_t *ak, size_t kp, const int M,
              __m512i *lo, __m512i *hi)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i wv = pair_load(p0, p1);
    const __m512i wl = _mm512_and_si512(wv, m4);
    const __m512i wh = _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4);
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        const int8_t *at = ak + t * kp;
        lo[t] = _mm512_dpbusd_epi32(lo[t], wl, _mm512_set1_epi32(nib_ld32(at)));
        hi[t] = _mm512_dpbusd_epi32(hi[t], wh, _mm512_set1_epi32(nib_ld32(at + 4)));
    }
}
#endif

#endif
