/* Attention's arithmetic against the core's own peak, in one round.
 *
 * The attention kernel runs at a fixed position over a KV cache that
 * stays in the caches (one layer's cache, laid out head by head as blobs
 * lay it out), so what is timed is its arithmetic and its cache reads,
 * not DRAM. Beside it, in the same round: a loop of independent
 * multiply-adds as wide as the widest the kernel uses (512-bit where the
 * AVX2 table takes its AVX-512 steps, else 256-bit; 128-bit on NEON;
 * scalar for the scalar table) gives the core's peak, and the strongest
 * of nib bench's stream reads (tools/measure/bench_stream.h) folding the
 * same K and V bytes, warm as well, gives the time the reads alone take.
 * The multiply-adds counted are the scores' and the outputs' (2 x heads x
 * keys x head_dim); the softmax comes on top. Why these yardsticks:
 * docs/benchmarks.md, "Attention against the core's multiply-add peak".
 * Timings are reported, never asserted. */
#include "tools/measure/bench_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/measure/bench_stats.h"
#include "tools/measure/bench_stream.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

/* 512 keys, and a cache of exactly those rows: each KV head's K (and V)
 * rows are whole pages (512 x 64 and 512 x 100 floats), so the read
 * beside the attention folds exactly the bytes the attention reads */
#define ATT_POS 511
#define ATT_CTX (ATT_POS + 1)
#define CHAINS 12 /* independent accumulators: more than latency x pipes (4 x 2) */

static const struct att_shape {
    const char *what;
    uint32_t heads, kv_heads, head_dim;
} att_shapes[2] = {{"tinyllama-1.1b", 32, 4, 64}, {"llama-3b", 32, 32, 100}};

static volatile float peak_sink;

/* n iterations of CHAINS multiply-adds of `lanes` lanes; seconds. Distinct
 * starting values keep the chains from being merged. */
#define PEAK_LOOP(T, SET1, FMA, SUM)                                                               \
    T m = SET1(0.9999999f), c = SET1(1e-7f), a[CHAINS];                                            \
    for (int i = 0; i < CHAINS; i++)                                                               \
        a[i] = SET1(1.0f + (float)i);                                                              \
    double t = bench_now();                                                                        \
    for (long it = 0; it < n; it++) {                                                              \
        _Pragma("GCC unroll 12") for (int i = 0; i < CHAINS; i++) a[i] = FMA(a[i], m, c);          \
    }                                                                                              \
    t = bench_now() - t;                                                                           \
    float s = 0;                                                                                   \
    for (int i = 0; i < CHAINS; i++)                                                               \
        s += SUM(a[i]);                                                                            \
    peak_sink = s;                                                                                 \
    return t;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double peak_zmm(long n)
{
    PEAK_LOOP(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_reduce_add_ps)
}

__attribute__((target("avx2,fma"))) static float sum_ymm(__m256 v)
{
    float l[8];
    _mm256_storeu_ps(l, v);
    return l[0] + l[7];
}

__attribute__((target("avx2,fma"))) static double peak_ymm(long n)
{
    PEAK_LOOP(__m256, _mm256_set1_ps, _mm256_fmadd_ps, sum_ymm)
}
#elif defined(__aarch64__)
static float32x4_t fma_neon(float32x4_t a, float32x4_t m, float32x4_t c)
{
    return vfmaq_f32(c, a, m);
}

static double peak_neon(long n)
{
    PEAK_LOOP(float32x4_t, vdupq_n_f32, fma_neon, vaddvq_f32)
}
#endif

static float fma_scalar(float a, float m, float c)
{
    return a * m + c;
}

static float id_scalar(float v)
{
    return v;
}

static float set1_scalar(float v)
{
    return v;
}

/* GCC would otherwise vectorize the twelve scalar chains */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("no-tree-vectorize")))
#endif
static double
peak_scalar(long n)
{
    PEAK_LOOP(float, set1_scalar, fma_scalar, id_scalar)
}

/* The lanes of the widest multiply-add kt's attention uses. */
static int peak_lanes(const struct nib_qkernels *kt)
{
    if (!strcmp(kt->name, "avx2"))
        return nib_avx512vnni_available() ? 16 : 8;
    if (!strncmp(kt->name, "neon", 4))
        return 4;
    return 1;
}

static double peak_seconds(int lanes, long n)
{
#if defined(__x86_64__)
    if (lanes == 16)
        return peak_zmm(n);
    if (lanes == 8)
        return peak_ymm(n);
#elif defined(__aarch64__)
    if (lanes == 4)
        return peak_neon(n);
#endif
    return peak_scalar(n);
}

/* Multiply-adds per second of the peak loop, over at least min_seconds. */
static double peak_rate(int lanes, double min_seconds)
{
    long n = 1 << 14;
    double t = peak_seconds(lanes, n);
    while (t < min_seconds && n < (1l << 40)) {
        n *= 2;
        t = peak_seconds(lanes, n);
    }
    return (double)n * CHAINS * lanes / t;
}

/* Deterministic values in [-0.5, 0.5). */
static void fill(float *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 7919u + seed * 104729u) % 1000u) / 1000.0f - 0.5f;
}

/* The floats of shape s's K cache (and of its V cache): every row read. */
static size_t att_cache_floats(const struct att_shape *s)
{
    return (size_t)s->kv_heads * ATT_CTX * s->head_dim;
}

/* Shape s's attention at ATT_POS, all heads on this thread: seconds per
 * call, over at least min_seconds (after one call that warms the caches). */
static int att_seconds(const struct nib_qkernels *kt, const struct att_shape *s, double min_seconds,
                       double *per_call, double *read)
{
    const size_t hd = s->head_dim, cache = att_cache_floats(s);
    float *q = malloc(s->heads * hd * sizeof *q), *out = malloc(s->heads * hd * sizeof *out);
    float *att = malloc((size_t)s->heads * ATT_CTX * sizeof *att);
    float *kc = malloc(cache * sizeof *kc), *vc = malloc(cache * sizeof *vc);
    int rc = q && out && att && kc && vc ? 0 : -1;
    if (rc == 0) {
        fill(q, s->heads * hd, 1);
        fill(kc, cache, 2);
        fill(vc, cache, 3);
        const float scale = 1.0f / sqrtf((float)hd);
#define ATT_CALL                                                                                   \
    kt->attention(q, kc, vc, out, att, 0, s->heads, hd, s->heads / s->kv_heads, hd, ATT_CTX * hd,  \
                  0, ATT_POS, ATT_CTX, scale, 0.0f)
        ATT_CALL;
        long calls = 0;
        double t0 = bench_now(), t;
        do {
            ATT_CALL;
            calls++;
            t = bench_now() - t0;
        } while (t < min_seconds);
#undef ATT_CALL
        *per_call = t / (double)calls;
        peak_sink = out[0];
        /* the same bytes read, each variant warm, the best pass */
        uint64_t sum = 0;
        *read = 1e30;
        for (int v = 0; v < n_stream_variants; v++) {
            sum += stream_fold((const uint8_t *)kc, cache * sizeof *kc, &stream_variants[v]);
            double tv = bench_now(), e;
            long folds = 0;
            do {
                double p = bench_now();
                sum += stream_fold((const uint8_t *)kc, cache * sizeof *kc, &stream_variants[v]);
                sum += stream_fold((const uint8_t *)vc, cache * sizeof *vc, &stream_variants[v]);
                p = bench_now() - p;
                *read = p < *read ? p : *read;
                folds++;
                e = bench_now() - tv;
            } while (e < min_seconds / n_stream_variants || folds < 3);
        }
        peak_sink = (float)(sum & 1);
    }
    free(q), free(out), free(att), free(kc), free(vc);
    return rc;
}

/* The multiply-adds one call counts: the scores' and the outputs'. */
static double att_macs(const struct att_shape *s)
{
    return 2.0 * s->heads * (ATT_POS + 1) * s->head_dim;
}

int bench_attention_round(const struct nib_qkernels *kt, int round, double min_seconds,
                          struct bench_att *b)
{
    const int lanes = peak_lanes(kt);
    b->peak[round] = peak_rate(lanes, min_seconds);
    for (int i = 0; i < 2; i++) {
        const struct att_shape *s = &att_shapes[i];
        double t, r;
        if (att_seconds(kt, s, min_seconds, &t, &r))
            return -1;
        b->us[i][round] = t * 1e6;
        b->read_us[i][round] = r * 1e6;
        b->ratio[i][round] = att_macs(s) / t / b->peak[round];
    }
    return 0;
}

static double median_of(const double *v, int n)
{
    double c[BENCH_ATT_MAX_ROUNDS];
    memcpy(c, v, (size_t)n * sizeof *c);
    return bench_median(c, n);
}

void bench_attention_print(const struct nib_qkernels *kt, const struct bench_att *b, int rounds)
{
    const int lanes = peak_lanes(kt);
    printf("\nattention from the caches, position %d, one thread, all heads (KV cache head by "
           "head,\none layer's); G MAC/s = the scores' and outputs' multiply-adds (2 x heads x "
           "keys x\nhead_dim) per second; (x) = median ratio to the peak in the same round: %d "
           "chains of\n%d-lane multiply-adds, median %.1f G MAC/s; GB/s = K and V bytes read per "
           "second;\nread us = the strongest stream read of the same K and V bytes, warm too "
           "(best pass); (x read) = read us / us\n",
           ATT_POS, CHAINS, lanes, median_of(b->peak, rounds) / 1e9);
    printf("%-16s %6s %8s %7s %9s %7s  %-17s %s\n", "shape", "heads", "kv heads", "KV MB",
           "us/call", "GB/s", "G MAC/s (x peak)", "read us (x read)");
    for (int i = 0; i < 2; i++) {
        const struct att_shape *s = &att_shapes[i];
        const double us = median_of(b->us[i], rounds),
                     kv = 2.0 * att_cache_floats(s) * sizeof(float);
        char dims[32];
        snprintf(dims, sizeof dims, "%ux%u", s->heads, s->head_dim);
        const double read = median_of(b->read_us[i], rounds);
        printf("%-16s %6s %8u %7.2f %9.1f %7.1f  %7.1f (%.2f)      %7.1f (%.2f)\n", s->what, dims,
               s->kv_heads, kv / 1e6, us, kv / us / 1e3, att_macs(s) / us / 1e3,
               median_of(b->ratio[i], rounds), read, read / us);
    }
}
