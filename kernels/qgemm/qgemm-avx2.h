/* Helpers shared by the AVX2 GEMM kernels (include only from them). */
#ifndef NIB_QGEMM_AVX2_H
#define NIB_QGEMM_AVX2_H

#include <immintrin.h>
#include <string.h>

/* Pin v in a register here (no instruction). Used in the multi-token
 * loops: without it the compiler reassociates the unrolled integer adds
 * into a tree that keeps every product alive at once and spills registers
 * (GEMM of 4 tokens: 3.0M -> 2.5M instructions per 2048x2048 call). */
#define NIB_KEEP(v) __asm__("" : "+x"(v))

/* Software prefetch distance for the weight stream. The hardware
 * prefetcher alone left q4/32 GEMV from DRAM at 0.63-0.77 of the stream
 * read; prefetching 1.5-4 KiB ahead gave 0.87-0.99 (docs/kernels.md). */
#define NIB_PF_DIST 2048

/* Prefetch the lines NIB_PF_DIST past [p, p + bytes): one instruction per
 * 64-byte line, no fault past the end of the tensor. */
static inline void nib_prefetch(const uint8_t *p, uint32_t bytes)
{
    #pragma GCC unroll 16
    for (uint32_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)p + NIB_PF_DIST + o, _MM_HINT_T0);
}

static inline int32_t nib_ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Rows r0..r0+7 of y from v, plus add when given (per-group epilogue:
 * y = acc + add), keeping only rows in [n_begin, n_end). */
static inline void nib_store_acc_add(__m256 v, float *y, const float *add, uint32_t r0,
                                     uint32_t n_begin, uint32_t n_end)
{
    if (r0 >= n_begin && r0 + 8 <= n_end) {
        if (add)
            v = _mm256_add_ps(v, _mm256_loadu_ps(add + r0));
        _mm256_storeu_ps(y + r0, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t r = r0 + i;
        if (r >= n_begin && r < n_end)
            y[r] = add ? tmp[i] + add[r] : tmp[i];
    }
}

/* Rows r0..r0+7 of add (0 when absent or outside [n_begin, n_end)). */
static inline __m256 nib_load_add(const float *add, uint32_t r0, uint32_t n_begin, uint32_t n_end)
{
    if (!add)
        return _mm256_setzero_ps();
    if (r0 >= n_begin && r0 + 8 <= n_end)
        return _mm256_loadu_ps(add + r0);
    float tmp[8];
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t r = r0 + i;
        tmp[i] = r >= n_begin && r < n_end ? add[r] : 0.0f;
    }
    return _mm256_loadu_ps(tmp);
}

/* Rows of v in [n_begin, n_end) to y (per-channel epilogue: add is
 * already inside the fma). */
static inline void nib_store_rows(__m256 v, float *y, uint32_t r0, uint32_t n_begin, uint32_t n_end)
{
    if (r0 >= n_begin && r0 + 8 <= n_end) {
        _mm256_storeu_ps(y + r0, v);
        return;
    }
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t r = r0 + i;
        if (r >= n_begin && r < n_end)
            y[r] = tmp[i];
    }
}

/* acc32[t] += per-row sums of 32 inputs of 4-bit codes: 4 chunks at p
 * (8 rows x 8 inputs each) against the activations at ak + t * kp.
 * int16 headroom: a vpmaddubsw lane is at most 2 * 15 * 128 = 3840 in
 * magnitude, and 8 of them (2 per chunk) sum to <= 30720 < 32767, so
 * the int16 accumulator is widened (vpmaddwd with 1) only after the 4th. */
static inline __attribute__((always_inline)) void
nib_q4_block32(const uint8_t *p, const int8_t *ak, size_t kp, const int M, __m256i *acc32)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i acc16[4];
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc16[t] = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(p + c * 32));
        __m256i lo = _mm256_and_si256(wv, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            const int8_t *at = ak + t * kp + c * 8;
            __m256i a0 = _mm256_set1_epi32(nib_ld32(at)), a1 = _mm256_set1_epi32(nib_ld32(at + 4));
            acc16[t] = _mm256_add_epi16(acc16[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, a0),
                                                                   _mm256_maddubs_epi16(hi, a1)));
            if (M > 1)
                NIB_KEEP(acc16[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc32[t] = _mm256_add_epi32(acc32[t], _mm256_madd_epi16(acc16[t], ones));
}

#endif
