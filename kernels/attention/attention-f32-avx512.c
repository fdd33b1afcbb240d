/* 512-bit steps of the AVX2 attention (attention-avx512.h), for CPUs
 * whose 512-bit FMAs retire twice the lanes of the 256-bit ones (Zen 5:
 * 7.1 G FMAs/s in either width on one core of the development VM).
 *
 * Scores: a zmm holds the 8 lanes of two query heads of one KV group
 * (head h low, h + 1 high), so one FMA does both heads' step for a K
 * chunk loaded once and broadcast to both halves; the query pairs are
 * built once per call and, for 64-dim heads, stay in 16 registers across
 * the blocks of keys (other sizes load them per chunk).
 * Each half is the reference's 8-lane accumulator, and the reduction of
 * four keys of two heads does the additions of tree8x4_avx2 in both
 * halves at once.
 *
 * Outputs: lanes are dims, which the reference sums independently, so
 * 16 of them per register need no reordering at all: per key, four V
 * loads serve up to four heads (16 accumulators).
 *
 * Built with the AVX2 flags; the functions carry the target attribute and
 * run only where nib_avx512vnni_available() (AVX-512 F and the zmm state;
 * nothing beyond AVX-512 F is used). */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <immintrin.h>
#include <math.h>

#include "kernels/attention/attention-avx512.h"
#include "kernels/common/f32-math.h"

#define AVX512F_FN __attribute__((target("avx512f")))

/* [lo | hi] */
static inline __attribute__((always_inline)) AVX512F_FN __m512 pair8(const float *lo,
                                                                     const float *hi)
{
    return _mm512_castpd_ps(_mm512_insertf64x4(
        _mm512_castpd256_pd512(_mm256_loadu_pd((const double *)(const void *)lo)),
        _mm256_loadu_pd((const double *)(const void *)hi), 1));
}

/* the 8 floats at p in both halves: one broadcast load */
static inline __attribute__((always_inline)) AVX512F_FN __m512 dup8(const float *p)
{
    return _mm512_castpd_ps(
        _mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)(const void *)p)));
}

/* tree8 of both halves of x, y, z, w (keys j..j+3; heads h low, h + 1
 * high) by tree8x4_avx2's additions: lane i + lane i + 4 of each half,
 * then (0+2) and (1+3), then their sum; times scale, to ah[0..4) and
 * ah1[0..4). */
static inline __attribute__((always_inline)) AVX512F_FN void
tree8x4x2(__m512 x, __m512 y, __m512 z, __m512 w, float scale, float *ah, float *ah1)
{
    /* 128-bit blocks: [x.h 0+4, y.h 0+4, x.h1 0+4, y.h1 0+4] per lane */
    __m512 sxy = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));
    __m512 szw = _mm512_add_ps(_mm512_shuffle_f32x4(z, w, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_f32x4(z, w, _MM_SHUFFLE(3, 1, 3, 1)));
    /* (0+4)+(2+6) and (1+5)+(3+7) of each */
    __m512 r = _mm512_add_ps(_mm512_shuffle_ps(sxy, szw, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(sxy, szw, _MM_SHUFFLE(3, 2, 3, 2)));
    /* their sum: per block [x/y, z/w, ., .] */
    __m512 f = _mm512_add_ps(_mm512_shuffle_ps(r, r, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(r, r, _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i idx = _mm512_setr_epi32(0, 8, 1, 9, 4, 12, 5, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    __m256 s =
        _mm256_mul_ps(_mm512_castps512_ps256(_mm512_permutexvar_ps(idx, f)), _mm256_set1_ps(scale));
    _mm_storeu_ps(ah, _mm256_castps256_ps128(s));
    _mm_storeu_ps(ah1, _mm256_extractf128_ps(s, 1));
}

/* Keys j, j + 4, ... of two head pairs (heads 0|1 and 2|3: eight
 * accumulators with four keys), head_dim = 8 x chunks: q2[p x chunks +
 * c] is chunk c of pair p. Inlined with chunks 8 and q2 filled beside it,
 * the pairs stay in registers; otherwise they are loaded per chunk,
 * beside the four K broadcasts. */
static inline __attribute__((always_inline)) AVX512F_FN size_t
scores4(const __m512 *q2, const size_t chunks, const float *k, size_t row_stride, float scale,
        float *const *a, size_t j, size_t j_end)
{
    for (; j + 4 <= j_end; j += 4) {
        const float *r[4]; /* row pointers: offsets stay immediates */
        r[0] = k + j * row_stride;
#pragma GCC unroll 4
        for (int t = 1; t < 4; t++)
            r[t] = r[t - 1] + row_stride;
        __m512 acc[2][4];
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++)
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                acc[p][t] = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (size_t c = 0; c < chunks; c++) {
            __m512 kv[4];
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++)
                kv[t] = dup8(r[t] + c * 8);
#pragma GCC unroll 2
            for (int p = 0; p < 2; p++)
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++)
                    acc[p][t] = _mm512_fmadd_ps(q2[p * chunks + c], kv[t], acc[p][t]);
        }
#pragma GCC unroll 2
        for (int p = 0; p < 2; p++)
            tree8x4x2(acc[p][0], acc[p][1], acc[p][2], acc[p][3], scale, a[2 * p] + j,
                      a[2 * p + 1] + j);
    }
    return j;
}

/* The two query pairs, chunk by chunk, into q2[p x chunks + c]. */
static inline __attribute__((always_inline)) AVX512F_FN void query_pairs(const float *const *qh,
                                                                         size_t chunks, __m512 *q2)
{
#pragma GCC unroll 2
    for (int p = 0; p < 2; p++)
#pragma GCC unroll 8
        for (size_t c = 0; c < chunks; c++)
            q2[p * chunks + c] = pair8(qh[2 * p] + c * 8, qh[2 * p + 1] + c * 8);
}

AVX512F_FN size_t nib_attention_scores4_avx512(const float *const *qh, const float *k,
                                               size_t row_stride, size_t head_dim, float scale,
                                               float *const *a, size_t j, size_t j_end)
{
    if (head_dim == 64) {
        __m512 q2[2 * 8];
        query_pairs(qh, 8, q2);
        return scores4(q2, 8, k, row_stride, scale, a, j, j_end);
    }
    __m512 q2[2 * NIB_ATTENTION_AVX512_MAX_CHUNKS];
    query_pairs(qh, head_dim / 8, q2);
    return scores4(q2, head_dim / 8, k, row_stride, scale, a, j, j_end);
}

static inline __attribute__((always_inline)) AVX512F_FN void
out64(const float *const *w, const float *v, size_t row_stride, float *const *o, size_t i, size_t j,
      size_t j_end, int first, const int HB)
{
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int h = 0; h < HB; h++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            acc[h][c] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o[h] + i + c * 16);
    for (size_t t = j; t < j_end; t++) {
        const float *vt = v + t * row_stride + i;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            vv[c] = _mm512_loadu_ps(vt + c * 16);
#pragma GCC unroll 4
        for (int h = 0; h < HB; h++) {
            const __m512 wt = _mm512_set1_ps(w[h][t]);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
                acc[h][c] = _mm512_fmadd_ps(wt, vv[c], acc[h][c]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < HB; h++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            _mm512_storeu_ps(o[h] + i + c * 16, acc[h][c]);
}

AVX512F_FN void nib_attention_out64_avx512(const float *const *w, const float *v, size_t row_stride,
                                           float *const *o, size_t i, size_t j, size_t j_end,
                                           int first, int heads)
{
    if (heads == 4)
        out64(w, v, row_stride, o, i, j, j_end, first, 4);
    else if (heads == 2)
        out64(w, v, row_stride, o, i, j, j_end, first, 2);
    else
        out64(w, v, row_stride, o, i, j, j_end, first, 1);
}

/* nib_exp8_avx2's operations, 16 lanes (NaN and x < NIB_EXP_MIN: +0). */
static inline __attribute__((always_inline)) AVX512F_FN __m512 exp16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(NIB_EXP_MIN), round = _mm512_set1_ps(NIB_EXP_ROUND);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(NIB_EXP_MAX));
    __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(NIB_EXP_LOG2E)), round),
                             round);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-NIB_EXP_LN2_HI), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-NIB_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(nib_exp_c[0]);
    for (int i = 1; i < 8; i++)
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(nib_exp_c[i]));
    __m512i e =
        _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ), y);
}

AVX512F_FN void nib_attention_softmax_avx512(float *a, size_t n)
{
    size_t t;
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (t = 0; t + 16 <= n; t += 16)
        vmax = _mm512_max_ps(_mm512_loadu_ps(a + t), vmax); /* NaN scores never win */
    float lanes[16], max = -INFINITY;
    _mm512_storeu_ps(lanes, vmax);
    for (int j = 0; j < 16; j++)
        max = lanes[j] > max ? lanes[j] : max;
    for (; t < n; t++)
        max = a[t] > max ? a[t] : max;
    /* the sum in 8 lanes, as the reference: each 16 terms' low half, then
     * their high half */
    const __m512 vm = _mm512_set1_ps(max);
    __m256 vsum = _mm256_setzero_ps();
    for (t = 0; t + 16 <= n; t += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(a + t), vm));
        _mm512_storeu_ps(a + t, e);
        vsum = _mm256_add_ps(vsum, _mm512_castps512_ps256(e));
        vsum =
            _mm256_add_ps(vsum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
    _mm256_storeu_ps(lanes, vsum);
    const float sum = nib_softmax_tail_sum(a, t, n, max, lanes);
    const __m512 vs = _mm512_set1_ps(sum);
    for (t = 0; t + 16 <= n; t += 16)
        _mm512_storeu_ps(a + t, _mm512_div_ps(_mm512_loadu_ps(a + t), vs));
    for (; t < n; t++)
        a[t] = a[t] / sum;
}
#else
typedef int nib_attention_f32_avx512_unused;
#endif
