/* Throughput of the vision kernels on ResNet-50's and a text detector's
 * layer shapes (suite perf: reports, never asserts a speed). For each shape
 * and ISA: the quantized convolution with q4c and q8c weights, the f32
 * convolution (the scalar variant is the plain reference loop) or the f32
 * depthwise convolution, in GMAC/s (multiply-adds of the convolution as
 * written, padding taps not counted), beside the single-core peaks of this
 * CPU measured by tight loops of independent FMAs (f32: 8 multiply-adds
 * each) and of vpmaddubsw + vpaddw (int8: 32 each, the quantized kernels'
 * inner step).
 *
 * Time is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), best of
 * a few runs, so other processes on a loaded machine inflate it less than
 * wall time would; caches are still shared.
 *
 *   bench_conv [--quick] [--only SUBSTRING]   (--quick: AVX2 only) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/conv.h"
#include "tests/kernels/check_util.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

struct layer {
    const char *name;
    uint32_t h, w, c_in, c_out, k, stride, depthwise;
    uint32_t q8;    /* first/last layer: q8c weights by default */
    uint32_t count; /* times ResNet-50 runs this shape (0: not ResNet-50) */
};

/* Every convolution shape of ResNet-50 (v1.5: the stride on the 3x3), with
 * how often it runs, and layers a MobileNet-style detector at 640x640 runs
 * (stem, depthwise 3x3/5x5, pointwise, the feature pyramid's 3x3). */
static const struct layer layers[] = {
    {"r50 stem 7x7/2 224x224x3->64", 224, 224, 3, 64, 7, 2, 0, 1, 1},
    {"r50 1x1 56x56x64->64", 56, 56, 64, 64, 1, 1, 0, 0, 1},
    {"r50 3x3 56x56x64->64", 56, 56, 64, 64, 3, 1, 0, 0, 3},
    {"r50 1x1 56x56x64->256", 56, 56, 64, 256, 1, 1, 0, 0, 4},
    {"r50 1x1 56x56x256->64", 56, 56, 256, 64, 1, 1, 0, 0, 2},
    {"r50 1x1 56x56x256->128", 56, 56, 256, 128, 1, 1, 0, 0, 1},
    {"r50 3x3/2 56x56x128->128", 56, 56, 128, 128, 3, 2, 0, 0, 1},
    {"r50 1x1/2 56x56x256->512", 56, 56, 256, 512, 1, 2, 0, 0, 1},
    {"r50 3x3 28x28x128->128", 28, 28, 128, 128, 3, 1, 0, 0, 3},
    {"r50 1x1 28x28x128->512", 28, 28, 128, 512, 1, 1, 0, 0, 4},
    {"r50 1x1 28x28x512->128", 28, 28, 512, 128, 1, 1, 0, 0, 3},
    {"r50 1x1 28x28x512->256", 28, 28, 512, 256, 1, 1, 0, 0, 1},
    {"r50 3x3/2 28x28x256->256", 28, 28, 256, 256, 3, 2, 0, 0, 1},
    {"r50 1x1/2 28x28x512->1024", 28, 28, 512, 1024, 1, 2, 0, 0, 1},
    {"r50 3x3 14x14x256->256", 14, 14, 256, 256, 3, 1, 0, 0, 5},
    {"r50 1x1 14x14x256->1024", 14, 14, 256, 1024, 1, 1, 0, 0, 6},
    {"r50 1x1 14x14x1024->256", 14, 14, 1024, 256, 1, 1, 0, 0, 5},
    {"r50 1x1 14x14x1024->512", 14, 14, 1024, 512, 1, 1, 0, 0, 1},
    {"r50 3x3/2 14x14x512->512", 14, 14, 512, 512, 3, 2, 0, 0, 1},
    {"r50 1x1/2 14x14x1024->2048", 14, 14, 1024, 2048, 1, 2, 0, 0, 1},
    {"r50 3x3 7x7x512->512", 7, 7, 512, 512, 3, 1, 0, 0, 2},
    {"r50 1x1 7x7x512->2048", 7, 7, 512, 2048, 1, 1, 0, 0, 3},
    {"r50 1x1 7x7x2048->512", 7, 7, 2048, 512, 1, 1, 0, 0, 2},
    {"det stem 3x3/2 640x640x3->16", 640, 640, 3, 16, 3, 2, 0, 1, 0},
    {"det dw 3x3 320x320x16", 320, 320, 16, 16, 3, 1, 1, 0, 0},
    {"det 1x1 320x320x16->32", 320, 320, 16, 32, 1, 1, 0, 0, 0},
    {"det dw 3x3/2 320x320x32", 320, 320, 32, 32, 3, 2, 1, 0, 0},
    {"det 1x1 160x160x32->48", 160, 160, 32, 48, 1, 1, 0, 0, 0},
    {"det dw 3x3 160x160x48", 160, 160, 48, 48, 3, 1, 1, 0, 0},
    {"det 1x1 80x80x96->96", 80, 80, 96, 96, 1, 1, 0, 0, 0},
    {"det dw 5x5 40x40x192", 40, 40, 192, 192, 5, 1, 1, 0, 0},
    {"det 1x1 40x40x192->192", 40, 40, 192, 192, 1, 1, 0, 0, 0},
    {"det 1x1 20x20x384->384", 20, 20, 384, 384, 1, 1, 0, 0, 0},
    {"det fpn 3x3 160x160x96->24", 160, 160, 96, 24, 3, 1, 0, 0, 0},
    {"det fpn 3x3 40x40x96->24", 40, 40, 96, 24, 3, 1, 0, 0, 0},
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static struct nib_conv_shape shape_of(const struct layer *L)
{
    struct nib_conv_shape s = {0};
    uint32_t pad = L->k / 2;
    s.h = L->h, s.w = L->w, s.c_in = L->c_in, s.c_out = L->c_out;
    s.groups = L->depthwise ? L->c_in : 1;
    s.kh = s.kw = L->k, s.stride_h = s.stride_w = L->stride;
    s.pad_top = s.pad_left = pad, s.dil_h = s.dil_w = 1;
    s.oh = nib_conv_out_dim(L->h, L->k, L->stride, pad, pad, 1);
    s.ow = nib_conv_out_dim(L->w, L->k, L->stride, pad, pad, 1);
    return s;
}

/* Multiply-adds with the taps inside the input only. */
static double macs_of(const struct nib_conv_shape *s)
{
    double taps = 0;
    for (uint32_t oy = 0; oy < s->oh; oy++)
        for (uint32_t ky = 0; ky < s->kh; ky++) {
            long iy = (long)oy * s->stride_h - s->pad_top + ky;
            if (iy < 0 || iy >= (long)s->h)
                continue;
            for (uint32_t ox = 0; ox < s->ow; ox++)
                for (uint32_t kx = 0; kx < s->kw; kx++) {
                    long ix = (long)ox * s->stride_w - s->pad_left + kx;
                    taps += ix >= 0 && ix < (long)s->w;
                }
        }
    return taps * (s->c_in / s->groups) * s->c_out;
}

/* Single-core peaks in multiply-adds per second: independent chains in
 * named registers (an array would live in memory; f32 10, int8 7 with
 * their 7 operands, all within the 16 ymm registers), best of 3. */
#define PEAK_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)
#define PEAK_CHAINS7(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6)
static double peak_f32(void)
{
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
#define F_INIT(i) __m256 a##i = _mm256_set1_ps((float)i);
#define F_STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define F_KEEP(i) __asm__("" : "+x"(a##i));
#define F_SUM(i) sum = _mm256_add_ps(sum, a##i);
    PEAK_CHAINS(F_INIT)
    const long n = 10000000;
    double best = 1e30;
    for (int run = 0; run < 3; run++) {
        double t0 = now_s();
        for (long r = 0; r < n; r++) {
            PEAK_CHAINS(F_STEP)
            PEAK_CHAINS(F_KEEP)
        }
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    __m256 sum = _mm256_setzero_ps();
    PEAK_CHAINS(F_SUM)
    float sink[8];
    _mm256_storeu_ps(sink, sum);
    if (sink[0] == 12345.0f)
        puts("");
    return (double)n * 10 * 8 / best;
#else
    return 0;
#endif
}

static double peak_s8(void)
{
#if defined(__AVX2__) && defined(__FMA__)
    const __m256i w = _mm256_set1_epi8(3);
#define Q_INIT(i)                                                                                  \
    __m256i a##i = _mm256_set1_epi16((short)i), x##i = _mm256_set1_epi8((char)(i - 3));
#define Q_STEP(i) a##i = _mm256_add_epi16(a##i, _mm256_maddubs_epi16(w, x##i));
#define Q_KEEP(i) __asm__("" : "+x"(a##i), "+x"(x##i));
#define Q_SUM(i) sum = _mm256_add_epi16(sum, a##i);
    PEAK_CHAINS7(Q_INIT)
    const long n = 10000000;
    double best = 1e30;
    for (int run = 0; run < 3; run++) {
        double t0 = now_s();
        for (long r = 0; r < n; r++) {
            PEAK_CHAINS7(Q_STEP)
            PEAK_CHAINS7(Q_KEEP)
        }
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    __m256i sum = _mm256_setzero_si256();
    PEAK_CHAINS7(Q_SUM)
    short sink[16];
    _mm256_storeu_si256((__m256i *)(void *)sink, sum);
    if (sink[0] == 12345)
        puts("");
    return (double)n * 7 * 32 / best;
#else
    return 0;
#endif
}

/* Best time of `runs` calls of one kernel over the whole output. */
#define BEST(runs, call)                                                                           \
    ({                                                                                             \
        double best_ = 1e30;                                                                       \
        for (int r_ = 0; r_ < (runs); r_++) {                                                      \
            double t0_ = now_s();                                                                  \
            call;                                                                                  \
            double t_ = now_s() - t0_;                                                             \
            best_ = t_ < best_ ? t_ : best_;                                                       \
        }                                                                                          \
        best_;                                                                                     \
    })

static void bench_layer(const struct layer *L, const struct nib_conv_kernels *k, int runs,
                        double *gm_q4, double *gm_q8, double *gm_f32)
{
    struct nib_conv_shape s = shape_of(L);
    uint64_t seed = 7;
    double macs = macs_of(&s);
    size_t nx = (size_t)s.h * s.w * s.c_in, ny = (size_t)s.oh * s.ow * s.c_out;
    size_t nw = (size_t)s.c_out * (s.c_in / s.groups) * s.kh * s.kw;
    float *xf = xalloc(nx * 4), *wf = xalloc(nw * 4), *yf = xalloc(ny * 4);
    float *bias = xalloc(s.c_out * 4), *ws = xalloc(s.c_out * 4);
    int8_t *xq = xalloc(nx), *wq = xalloc(nw), *yq = xalloc(ny);
    for (size_t i = 0; i < nx; i++)
        xf[i] = rnd_unit(&seed), xq[i] = (int8_t)(rnd_below(&seed, 255) - 127);
    for (size_t i = 0; i < nw; i++)
        wf[i] = rnd_unit(&seed), wq[i] = (int8_t)(rnd_below(&seed, 15) - 8);
    for (uint32_t o = 0; o < s.c_out; o++)
        bias[o] = rnd_unit(&seed), ws[o] = 1e-4f;
    struct nib_conv_epi ef = {bias, NIB_ACT_RELU, 0, 0, NULL, 0};
    *gm_q4 = *gm_q8 = 0;
    if (L->depthwise) {
        float *wp = xalloc(nib_dwconv_packed_f32_size(&s) * 4);
        nib_dwconv_pack_f32(&s, wf, wp);
        *gm_f32 = macs / BEST(runs, k->dwconv_f32(&s, xf, wp, &ef, yf, 0, s.oh)) / 1e9;
        free(wp);
    } else {
        float *wp = xalloc(nib_conv_packed_f32_size(&s) * 4);
        nib_conv_pack_f32(&s, wf, wp);
        *gm_f32 = macs / BEST(runs, k->conv_f32(&s, xf, wp, &ef, yf, 0, s.oh)) / 1e9;
        free(wp);
        for (int q = 0; q < 2; q++) {
            uint32_t dt = q ? NIB_DT_Q8C : NIB_DT_Q4C;
            uint8_t *pk = xalloc(nib_qconv_packed_size(&s, dt));
            void *scratch = xalloc(nib_qconv_scratch_size(&s, dt));
            if (nib_qconv_pack(&s, dt, wq, ws, pk)) {
                fprintf(stderr, "bench_conv: pack refused %s\n", L->name);
                exit(1);
            }
            struct nib_qconv_weights wt = {dt, pk};
            struct nib_qconv_epi eq = {bias, NIB_ACT_RELU, 0, 0, NULL, 0, NULL, 0, 0.05f, yq, NULL};
            double t = BEST(runs, k->conv_s8(&s, xq, 0.01f, &wt, &eq, scratch, 0, s.oh));
            *(q ? gm_q8 : gm_q4) = macs / t / 1e9;
            free(pk), free(scratch);
        }
    }
    free(xf), free(wf), free(yf), free(bias), free(ws), free(xq), free(wq), free(yq);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: bench_conv [--quick] [--only SUBSTRING]\n");
            return 2;
        }
    }
    if (!only) /* the peaks take a second: skipped when probing one layer */
        printf("single-core peaks (tight loops, thread CPU time): f32 FMA %.1f GMAC/s, "
               "int8 vpmaddubsw+vpaddw %.1f GMAC/s\n",
               peak_f32() / 1e9, peak_s8() / 1e9);
    const struct nib_conv_kernels *sc = nib_conv_kernels_get(NIB_ISA_SCALAR),
                                  *av = nib_conv_kernels_get(NIB_ISA_AVX2);
    printf("\n| layer | MMAC | scalar q4c | scalar q8c | scalar f32 | avx2 q4c | avx2 q8c | avx2 "
           "f32 | avx2 q4c / f32 |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    double tot_macs = 0, t_q4 = 0, t_q8 = 0, t_f = 0;
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        const struct layer *L = &layers[i];
        if (only && !strstr(L->name, only))
            continue;
        struct nib_conv_shape s = shape_of(L);
        double macs = macs_of(&s), sq4 = 0, sq8 = 0, sf = 0, aq4 = 0, aq8 = 0, af = 0;
        if (!quick)
            bench_layer(L, sc, 1, &sq4, &sq8, &sf);
        if (av)
            bench_layer(L, av, quick ? 3 : 5, &aq4, &aq8, &af);
        printf("| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", L->name,
               macs / 1e6, sq4, sq8, sf, aq4, aq8, af, af > 0 && aq4 > 0 ? aq4 / af : 0);
        if (L->count && aq4 > 0) {
            tot_macs += macs * L->count;
            t_q4 += L->count * macs / ((L->q8 ? aq8 : aq4) * 1e9);
            t_q8 += L->count * macs / (aq8 * 1e9), t_f += L->count * macs / (af * 1e9);
        }
    }
    if (tot_macs > 0)
        printf("\nResNet-50's convolutions (each shape times its count; %.2f GMAC), sum of the "
               "times above: avx2 %.1f ms with q4c (stem q8c), %.1f ms all q8c, %.1f ms f32\n",
               tot_macs / 1e9, t_q4 * 1e3, t_q8 * 1e3, t_f * 1e3);
    return 0;
}
