/* AVX2 attention: the scalar reference's operations (attention-f32-scalar.c
 * lists them), eight lanes at a time, with the query heads that share a
 * KV head taken together.
 *
 * One head at a time, a score is a chain of head_dim / 8 FMAs and the
 * output a chain of n FMAs per 8 dims: latency-bound, about 38 cycles per
 * key and head on Zen 3 / Xeon, which made attention the one thing a
 * decode token does beyond reading its bytes (issue 13: at position 1000
 * of tinyllama-1.1b, 24 % over the reference loop, 3 % at position 8).
 * Here up to four heads of one KV group go together: each K or V row is
 * loaded once for all of them, and a block keeps eight independent
 * accumulators (heads x keys for scores, heads x dims for the output).
 * Every accumulator still sees exactly the operations of the reference,
 * in its order, so the bits are unchanged on every ISA.
 *
 * Where nib_avx512vnni_available(), the steps attention-avx512.h covers
 * (scores of four heads whose size is a multiple of 8, outputs 64 dims
 * at a time, the softmax without a cap) run in 512-bit registers, with
 * the same bits. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <math.h>

#include "kernels/attention/attention-avx512.h"
#include "kernels/common/f32-avx2.h"
#include "kernels/qkernels.h"

/* nib_tree8_avx2 of four vectors at once: {tree8(a), tree8(b), tree8(c),
 * tree8(d)} by the same additions in the same order (lane j + lane j+4,
 * then (0+2) and (1+3), then their sum). */
static inline __m128 tree8x4_avx2(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 ab =
        _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    __m256 cd =
        _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
    /* lane 0: a0+a2, a1+a3, c0+c2, c1+c3; lane 1: the same for b and d */
    __m256 u = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    __m256 h = _mm256_hadd_ps(u, u); /* lane 0: a, c, a, c; lane 1: b, d, b, d */
    return _mm_unpacklo_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* Chunk c (8 dims) of a row: a masked load for the last, partial chunk
 * (lanes past head_dim read as +0, as the reference counts them). */
static inline __m256 chunk_load(const float *p, size_t c, size_t full, __m256i tail)
{
    return c < full ? _mm256_loadu_ps(p + c * 8) : _mm256_maskload_ps(p + c * 8, tail);
}

/* Raw scores (tree8 x scale, before any cap) of HB heads (qh[0..HB)) for
 * the TB keys j..j+TB-1 at once, stored to a[h][j..]: HB x TB <= 8
 * accumulators (2 x 4 or 1 x 8, and 1 key at a time at the end). HB and
 * TB are constants at every call. */
static inline __attribute__((always_inline)) void
scores_block(const float *const *qh, const float *k, size_t row_stride, size_t head_dim,
             __m256i tail, float scale, float *const *a, size_t j, const int HB, const int TB)
{
    const size_t full = head_dim / 8, chunks = (head_dim + 7) / 8;
    __m256 acc[4][8];
#pragma GCC unroll 4
    for (int h = 0; h < HB; h++)
#pragma GCC unroll 8
        for (int t = 0; t < TB; t++)
            acc[h][t] = _mm256_setzero_ps();
    for (size_t c = 0; c < chunks; c++) {
        __m256 kv[8]; /* one head: loaded where used (8 keys would not fit in registers) */
#pragma GCC unroll 8
        for (int t = 0; t < TB && HB > 1; t++)
            kv[t] = chunk_load(k + (j + t) * row_stride, c, full, tail);
#pragma GCC unroll 4
        for (int h = 0; h < HB; h++) {
            __m256 qv = chunk_load(qh[h], c, full, tail);
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
                acc[h][t] = _mm256_fmadd_ps(
                    qv, HB > 1 ? kv[t] : chunk_load(k + (j + t) * row_stride, c, full, tail),
                    acc[h][t]);
        }
    }
    const __m128 s4 = _mm_set1_ps(scale);
    if (TB % 4 == 0) { /* one head, four keys per reduction */
#pragma GCC unroll 4
        for (int h = 0; h < HB; h++)
#pragma GCC unroll 2
            for (int t = 0; t < TB; t += 4)
                _mm_storeu_ps(a[h] + j + t, _mm_mul_ps(tree8x4_avx2(acc[h][t], acc[h][t + 1],
                                                                    acc[h][t + 2], acc[h][t + 3]),
                                                       s4));
    } else {
#pragma GCC unroll 4
        for (int h = 0; h < HB; h++)
#pragma GCC unroll 8
            for (int t = 0; t < TB; t++)
                a[h][j + t] = nib_tree8_avx2(acc[h][t]) * scale;
    }
}

/* Scores of HB heads over keys [j, j_end): blocks of TB keys, then one at
 * a time. */
static inline __attribute__((always_inline)) void
scores_heads(const float *const *qh, const float *k, size_t row_stride, size_t head_dim,
             float scale, float *const *a, size_t j, size_t j_end, const int HB, const int TB)
{
    const __m256i tail = nib_tail_mask_avx2(head_dim % 8);
    for (; j + TB <= j_end; j += TB)
        scores_block(qh, k, row_stride, head_dim, tail, scale, a, j, HB, TB);
    for (; j < j_end; j++)
        scores_block(qh, k, row_stride, head_dim, tail, scale, a, j, HB, 1);
}

/* Chunk c of DC at p: the last one masked by tail when MASKED. */
static inline __attribute__((always_inline)) __m256 out_load(const float *p, int c, const int DC,
                                                             __m256i tail, const int MASKED)
{
    return MASKED && c == DC - 1 ? _mm256_maskload_ps(p + c * 8, tail) : _mm256_loadu_ps(p + c * 8);
}

/* Output dims [i, i + 8 * DC) of HB heads over keys [j, j_end): out_h[d]
 * = fma over keys in order of w_h[t] * v[t][d], from +0 at the first
 * block of keys (first), else from what the blocks before left in out_h
 * (HB x DC <= 8 accumulators). MASKED: the last chunk has only tail's
 * lanes (the end of a head whose size is not a multiple of 8); the lanes
 * past the head read +0 and are never stored. */
static inline __attribute__((always_inline)) void out_block(const float *const *w, const float *v,
                                                            size_t row_stride, float *const *o,
                                                            size_t i, size_t j, size_t j_end,
                                                            int first, __m256i tail, const int HB,
                                                            const int DC, const int MASKED)
{
    __m256 acc[4][8];
#pragma GCC unroll 4
    for (int h = 0; h < HB; h++)
#pragma GCC unroll 8
        for (int c = 0; c < DC; c++)
            acc[h][c] = first ? _mm256_setzero_ps() : out_load(o[h] + i, c, DC, tail, MASKED);
    for (size_t t = j; t < j_end; t++) {
        const float *vt = v + t * row_stride + i;
        __m256 vv[8]; /* one head: loaded where used, as above */
#pragma GCC unroll 8
        for (int c = 0; c < DC && HB > 1; c++)
            vv[c] = out_load(vt, c, DC, tail, MASKED);
#pragma GCC unroll 4
        for (int h = 0; h < HB; h++) {
            __m256 wt = _mm256_broadcast_ss(w[h] + t);
#pragma GCC unroll 8
            for (int c = 0; c < DC; c++)
                acc[h][c] = _mm256_fmadd_ps(wt, HB > 1 ? vv[c] : out_load(vt, c, DC, tail, MASKED),
                                            acc[h][c]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < HB; h++)
#pragma GCC unroll 8
        for (int c = 0; c < DC; c++) {
            if (MASKED && c == DC - 1)
                _mm256_maskstore_ps(o[h] + i + c * 8, tail, acc[h][c]);
            else
                _mm256_storeu_ps(o[h] + i + c * 8, acc[h][c]);
        }
}

/* Output dims [i, head_dim) of HB heads, at most 8 / HB chunks (the
 * last one partial or not), over keys [j, j_end) in one block, so the
 * pass keeps several independent accumulators (a chain per chunk and per
 * dim left the last 36 dims of a 100-dim head latency-bound). */
static inline __attribute__((always_inline)) void out_rest(const float *const *w, const float *v,
                                                           size_t row_stride, float *const *o,
                                                           size_t i, size_t head_dim, size_t j,
                                                           size_t j_end, int first, const int HB)
{
    const size_t left = (head_dim - i + 7) / 8;
    const __m256i tail = nib_tail_mask_avx2((head_dim - i) % 8);
    const int masked = (head_dim - i) % 8 != 0;
    /* n: a constant at each call, HB x n <= 8 */
#define OUT_REST(n)                                                                                \
    if (HB * n <= 8 && left == n) {                                                                \
        if (masked)                                                                                \
            out_block(w, v, row_stride, o, i, j, j_end, first, tail, HB, n, 1);                    \
        else                                                                                       \
            out_block(w, v, row_stride, o, i, j, j_end, first, tail, HB, n, 0);                    \
        return;                                                                                    \
    }
    OUT_REST(1)
    OUT_REST(2)
    OUT_REST(3)
    OUT_REST(4)
    OUT_REST(5)
    OUT_REST(6)
    OUT_REST(7)
    OUT_REST(8)
#undef OUT_REST
}

/* Output dims [i, head_dim) of HB heads over keys [j, j_end): blocks of
 * 8 / HB chunks, then the rest. */
static inline __attribute__((always_inline)) void out_heads(const float *const *w, const float *v,
                                                            size_t row_stride, float *const *o,
                                                            size_t i, size_t head_dim, size_t j,
                                                            size_t j_end, int first, const int HB)
{
    const int DC = 8 / HB; /* 8 accumulators: 4 heads x 2 chunks ... 1 x 8 */
    for (; i + 8 * DC <= head_dim; i += 8 * DC)
        out_block(w, v, row_stride, o, i, j, j_end, first, _mm256_setzero_si256(), HB, DC, 0);
    if (i < head_dim)
        out_rest(w, v, row_stride, o, i, head_dim, j, j_end, first, HB);
}

/* Cap, max, exp, sum and weights of one head's scores a[0..n): the
 * reference's order (the sum's lane j adds terms j, j + 8, ...). */
static void softmax_head(float *a, size_t n, float softcap)
{
    size_t t;
    if (softcap > 0.0f) {
        const __m256 vc8 = _mm256_set1_ps(softcap);
        for (t = 0; t + 8 <= n; t += 8)
            _mm256_storeu_ps(a + t, nib_softcap8_avx2(_mm256_loadu_ps(a + t), vc8));
        for (; t < n; t++)
            a[t] = nib_softcapf(a[t], softcap);
    }
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    for (t = 0; t + 8 <= n; t += 8)
        vmax = _mm256_max_ps(_mm256_loadu_ps(a + t), vmax); /* NaN scores never win */
    float lanes[8], max;
    _mm256_storeu_ps(lanes, vmax);
    max = -INFINITY;
    for (int j = 0; j < 8; j++)
        max = lanes[j] > max ? lanes[j] : max;
    for (; t < n; t++)
        max = a[t] > max ? a[t] : max;
    __m256 vm = _mm256_set1_ps(max), vsum = _mm256_setzero_ps();
    for (t = 0; t + 8 <= n; t += 8) {
        __m256 e = nib_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(a + t), vm));
        _mm256_storeu_ps(a + t, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    _mm256_storeu_ps(lanes, vsum);
    /* nib_softmax_finish, with the divisions 8 at a time */
    const float sum = nib_softmax_tail_sum(a, t, n, max, lanes);
    const __m256 vs = _mm256_set1_ps(sum);
    for (t = 0; t + 8 <= n; t += 8)
        _mm256_storeu_ps(a + t, _mm256_div_ps(_mm256_loadu_ps(a + t), vs));
    for (; t < n; t++)
        a[t] = a[t] / sum;
}

/* Query heads taken together from h on: 4, 2 or 1, never past the end of
 * h's KV group or of the worker's heads. */
static size_t chunk_heads(size_t h, size_t h_end, size_t group)
{
    const size_t g_end = (h / group + 1) * group, left = (g_end < h_end ? g_end : h_end) - h;
    return left >= 4 ? 4 : left >= 2 ? 2 : 1;
}

/* Scores (phase 0) or outputs (phase 1) of heads [h, h + HB) over keys
 * [j, j_end); k0 and v0 are their KV head's first row; wide: the 512-bit
 * steps (attention-avx512.h) where they apply. */
static inline __attribute__((always_inline)) void
heads_keys(int phase, const float *q, const float *k0, const float *v0, float *out, float *att,
           size_t h, size_t head_dim, size_t row_stride, size_t j, size_t j_end, size_t ctx,
           float scale, int wide, const int HB)
{
    const float *qh[4];
    float *a[4], *o[4];
    for (int b = 0; b < HB; b++) {
        qh[b] = q + (h + b) * head_dim;
        a[b] = att + (h + b) * ctx;
        o[b] = out + (h + b) * head_dim;
    }
    if (phase == 0 && wide && HB == 4 && head_dim % 8 == 0 &&
        head_dim <= 8 * NIB_ATTENTION_AVX512_MAX_CHUNKS)
        j = nib_attention_scores4_avx512(qh, k0, row_stride, head_dim, scale, a, j, j_end);
    if (phase == 0 && HB == 1)
        scores_heads(qh, k0, row_stride, head_dim, scale, a, j, j_end, 1, 8);
    else if (phase == 0) /* two heads x four keys: one vector of scores per head */
        for (int b = 0; b < HB; b += 2)
            scores_heads(qh + b, k0, row_stride, head_dim, scale, a + b, j, j_end, 2, 4);
    else {
        size_t i = 0;
        for (; wide && i + 64 <= head_dim; i += 64)
            nib_attention_out64_avx512((const float *const *)a, v0, row_stride, o, i, j, j_end,
                                       j == 0, HB);
        out_heads((const float *const *)a, v0, row_stride, o, i, head_dim, j, j_end, j == 0, HB);
    }
}

/* heads_keys of 4, 2 and 1 heads, each out of line: inlined together
 * into the kernel's loop, the one-head steps' many output shapes cost the
 * four-head steps their registers (attention at 1.6 times the time). */
#define HEADS_KEYS_OF(HB)                                                                          \
    static __attribute__((noinline)) void heads_keys##HB(                                          \
        int phase, const float *q, const float *k0, const float *v0, float *out, float *att,       \
        size_t h, size_t head_dim, size_t row_stride, size_t j, size_t j_end, size_t ctx,          \
        float scale, int wide)                                                                     \
    {                                                                                              \
        heads_keys(phase, q, k0, v0, out, att, h, head_dim, row_stride, j, j_end, ctx, scale,      \
                   wide, HB);                                                                      \
    }
HEADS_KEYS_OF(4)
HEADS_KEYS_OF(2)
HEADS_KEYS_OF(1)
#undef HEADS_KEYS_OF

/* Prefetch the floats [p, p + len) into L1, one instruction per line. */
static inline void prefetch_span(const float *p, size_t len)
{
    const char *b = (const char *)p, *e = (const char *)(p + len);
    for (; b < e; b += 64)
        _mm_prefetch(b, _MM_HINT_T0);
}

/* Keys in blocks of about this many bytes of one KV head's rows, a
 * multiple of four keys (the 512-bit score step's): 16 keys of 64 dims, 8
 * of 100 or 128. A block's rows serve every query head of the KV head from
 * L1 while the next block's are prefetched. With the cache laid out head
 * by head (blobs since format 12) the rows are one run of bytes; at
 * position 512 with one worker this took attention in the model from
 * 1.56-1.67 to 1.41-1.45 ms a token for tinyllama-1.1b and from 18.5-20.9
 * to 13.2-13.4 ms for llama-3b, against blocks of 8 positions' rows of
 * every KV head over the old layout ("The KV cache head by head" in
 * docs/benchmarks.md, with the block sizes tried). */
#define KEY_BLOCK_BYTES 4096

/* Keys per block for heads of head_dim floats. */
static size_t key_block(size_t head_dim)
{
    size_t kb = KEY_BLOCK_BYTES / (head_dim * 4) / 4 * 4;
    return kb < 4 ? 4 : kb;
}

NIB_ATTENTION_DECL(nib_attention_f32_avx2)
{
    const int wide = nib_avx512vnni_available();
    nib_pre_attention(q, kc, vc, out, att, h_begin, h_end, head_dim, group, row_stride, head_stride,
                      t0, pos, ctx, softcap);
    if (h_begin >= h_end)
        return;
    const size_t n = pos - t0 + 1, kb = key_block(head_dim);
    for (size_t g = h_begin / group; g <= (h_end - 1) / group; g++) {
        /* the query heads of KV head g this worker computes, in chunks */
        const size_t hg0 = g * group > h_begin ? g * group : h_begin,
                     hg1 = (g + 1) * group < h_end ? (g + 1) * group : h_end;
        const float *k0 = kc + g * head_stride + t0 * row_stride,
                    *v0 = vc + g * head_stride + t0 * row_stride;
        size_t chunks = 0;
        for (size_t h = hg0; h < hg1; h += chunk_heads(h, hg1, group))
            chunks++;
        const size_t rows_per_chunk = (kb + chunks - 1) / chunks;
        for (int phase = 0; phase < 2; phase++) {
            if (phase == 1) /* every score is in: cap, softmax, weights */
                for (size_t h = hg0; h < hg1; h++) {
                    if (wide && softcap <= 0.0f)
                        nib_attention_softmax_avx512(att + h * ctx, n);
                    else
                        softmax_head(att + h * ctx, n, softcap);
                }
            const float *rows = phase == 0 ? k0 : v0;
            for (size_t j = 0; j < n; j += kb) {
                const size_t j_end = j + kb < n ? j + kb : n;
                size_t pf = j_end; /* the next block's rows, a share before each chunk */
                for (size_t h = hg0, hb; h < hg1; h += hb) {
                    hb = chunk_heads(h, hg1, group);
                    for (size_t r = 0; r < rows_per_chunk && pf < n && pf < j_end + kb; r++, pf++)
                        prefetch_span(rows + pf * row_stride, head_dim);
                    if (hb == 4)
                        heads_keys4(phase, q, k0, v0, out, att, h, head_dim, row_stride, j, j_end,
                                    ctx, scale, wide);
                    else if (hb == 2)
                        heads_keys2(phase, q, k0, v0, out, att, h, head_dim, row_stride, j, j_end,
                                    ctx, scale, wide);
                    else
                        heads_keys1(phase, q, k0, v0, out, att, h, head_dim, row_stride, j, j_end,
                                    ctx, scale, wide);
                }
            }
        }
    }
}
#else
typedef int nib_attention_f32_avx2_unused;
#endif
