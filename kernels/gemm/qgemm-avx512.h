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
#endif

#endif
