/* Tests for nib_gptq_quantize: against a plain float64 GPTQ written here
 * (Gauss-Jordan inverse, Cholesky of the inverse, the textbook column
 * loop), against per-group search without error feedback, for thread-count
 * independence, dead inputs, padding and refusals. The speed of a
 * 512x512 case is printed (never asserted); NIB_GPTQ_BENCH=1 prints the
 * tinyllama-1.1b shapes instead. */
#include "tests/common/test_util.h"
#include "tools/compiler/gptq.h"
#include "tools/compiler/quant.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

/* ---- random data ---- */

static uint64_t rng_state;

static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double nrand(void)
{
    double u = urand(), v = urand();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* H = X^T X for s samples of n inputs with a few dominant directions (and
 * the inputs in dead[] never active). */
static double *make_h(uint32_t n, uint32_t s, const int *dead)
{
    const uint32_t kdir = 4;
    double *dir = malloc((size_t)kdir * n * sizeof *dir), *x = malloc(n * sizeof *x);
    double *h = calloc((size_t)n * n, sizeof *h);
    ck_assert(dir && x && h);
    for (uint32_t i = 0; i < kdir * n; i++)
        dir[i] = nrand();
    for (uint32_t t = 0; t < s; t++) {
        double z[4];
        for (uint32_t k = 0; k < kdir; k++)
            z[k] = nrand() * (8.0 / (k + 1));
        for (uint32_t i = 0; i < n; i++) {
            x[i] = 0.3 * nrand();
            for (uint32_t k = 0; k < kdir; k++)
                x[i] += z[k] * dir[k * n + i];
            if (dead && dead[i])
                x[i] = 0;
        }
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < n; j++)
                h[(size_t)i * n + j] += x[i] * x[j];
    }
    free(dir), free(x);
    return h;
}

static float *make_w(uint32_t rows, uint32_t cols)
{
    float *w = malloc((size_t)rows * cols * sizeof *w);
    ck_assert(w);
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        w[i] = (float)(0.05 * nrand() * (urand() < 0.01 ? 6.0 : 1.0));
    return w;
}

static struct nib_qlayout layout(const char *spec, uint32_t rows, uint32_t cols)
{
    struct nib_qspec sp;
    struct nib_qlayout l;
    char err[128];
    ck_assert_msg(nib_qspec_parse(spec, &sp, err, sizeof err) == 0, "%s", err);
    ck_assert(nib_qlayout_get(&l, sp.dtype, sp.group, rows, cols) == 0);
    return l;
}

/* ---- the reference and the measures ---- */

/* Plain float64 GPTQ: deq (rows x cols) gets the quantized values. */
static void ref_gptq(const struct nib_qlayout *l, const float *w0, const double *h0, double damp,
                     float *deq)
{
    const uint32_t n = l->cols, rows = l->rows;
    double *h = malloc((size_t)n * n * sizeof *h), *a = malloc((size_t)n * 2 * n * sizeof *a);
    double *u = calloc((size_t)n * n, sizeof *u), *w = malloc(n * sizeof *w);
    float *imp = malloc(n * sizeof *imp), *cur = malloc(n * sizeof *cur);
    ck_assert(h && a && u && w && imp && cur);
    memcpy(h, h0, (size_t)n * n * sizeof *h);
    double mean = 0;
    for (uint32_t i = 0; i < n; i++)
        imp[i] = (float)h[i * n + i], mean += h[i * n + i] / n;
    if (mean == 0)
        mean = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (h[i * n + i] == 0) {
            for (uint32_t k = 0; k < n; k++)
                h[i * n + k] = h[k * n + i] = 0;
            h[i * n + i] = 1;
        }
        h[i * n + i] += damp * mean;
    }
    /* Gauss-Jordan with partial pivoting on [H | I] */
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < 2 * n; k++)
            a[i * 2 * n + k] = k < n ? h[i * n + k] : (k - n == i);
    for (uint32_t c = 0; c < n; c++) {
        uint32_t p = c;
        for (uint32_t i = c + 1; i < n; i++)
            if (fabs(a[i * 2 * n + c]) > fabs(a[p * 2 * n + c]))
                p = i;
        for (uint32_t k = 0; k < 2 * n; k++) {
            double t = a[c * 2 * n + k];
            a[c * 2 * n + k] = a[p * 2 * n + k], a[p * 2 * n + k] = t;
        }
        double piv = a[c * 2 * n + c];
        for (uint32_t k = 0; k < 2 * n; k++)
            a[c * 2 * n + k] /= piv;
        for (uint32_t i = 0; i < n; i++)
            if (i != c) {
                double f = a[i * 2 * n + c];
                for (uint32_t k = 0; k < 2 * n; k++)
                    a[i * 2 * n + k] -= f * a[c * 2 * n + k];
            }
    }
    /* upper Cholesky of the inverse: Hinv = U^T U */
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i; j < n; j++) {
            double s = a[i * 2 * n + n + j];
            for (uint32_t k = 0; k < i; k++)
                s -= u[k * n + i] * u[k * n + j];
            if (j == i) {
                ck_assert(s > 0);
                u[i * n + i] = sqrt(s);
            } else
                u[i * n + j] = s / u[i * n + i];
        }
    for (uint32_t r = 0; r < rows; r++) {
        struct nib_qgroup g;
        char err[128];
        for (uint32_t k = 0; k < n; k++)
            w[k] = w0[(size_t)r * n + k];
        const uint32_t qg = nib_ql_qgroup(l); /* q4h: sub-blocks of 16 */
        for (uint32_t i = 0; i < n; i++) {
            if (i % qg == 0) {
                uint32_t m = n - i < qg ? n - i : qg;
                for (uint32_t k = 0; k < m; k++)
                    cur[k] = (float)w[i + k];
                if (l->sub) { /* the super-scale from the row as given */
                    const uint32_t s0 = i / l->gsize * l->gsize;
                    g.bits = nib_q4h_super(w0 + (size_t)r * n + s0,
                                           n - s0 < l->gsize ? n - s0 : l->gsize);
                }
                ck_assert_msg(nib_qgroup_choose(l, NIB_QM_SEARCH, cur, imp + i, m, &g, NULL, err,
                                                sizeof err) == 0,
                              "%s", err);
            }
            float q;
            nib_qgroup_code(l, &g, (float)w[i], &q);
            deq[(size_t)r * n + i] = q;
            double e = (w[i] - q) / u[i * n + i];
            for (uint32_t j = i + 1; j < n; j++)
                w[j] -= e * u[i * n + j];
        }
    }
    free(h), free(a), free(u), free(w), free(imp), free(cur);
}

/* The same code: float and double may move a least-squares scale or
 * minimum by a few ulps, never a value by a step. */
static int close(float a, float b)
{
    return fabsf(a - b) <= 1e-6f + 1e-5f * fabsf(b);
}

static float *dequant(const struct nib_qlayout *l, const uint8_t *packed)
{
    float *d = malloc((size_t)l->rows * l->cols * sizeof *d);
    ck_assert(d);
    for (uint32_t r = 0; r < l->rows; r++)
        nib_dequantize_row(l, packed, r, d + (size_t)r * l->cols);
    return d;
}

/* tr((W-Q) H (W-Q)^T) */
static double proxy_loss(uint32_t rows, uint32_t n, const float *w, const float *q, const double *h)
{
    double *e = malloc(n * sizeof *e), loss = 0;
    ck_assert(e);
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t k = 0; k < n; k++)
            e[k] = (double)w[(size_t)r * n + k] - q[(size_t)r * n + k];
        for (uint32_t i = 0; i < n; i++) {
            double s = 0;
            for (uint32_t j = 0; j < n; j++)
                s += h[(size_t)i * n + j] * e[j];
            loss += e[i] * s;
        }
    }
    free(e);
    return loss;
}

/* nib_gptq_quantize on copies of w and h; returns the packed tensor. */
static uint8_t *run_gptq(const struct nib_qlayout *l, const float *w, const double *h,
                         uint32_t threads)
{
    const size_t nw = (size_t)l->rows * l->cols, nh = (size_t)l->cols * l->cols;
    float *wc = malloc(nw * sizeof *wc);
    double *hc = malloc(nh * sizeof *hc);
    uint8_t *out = malloc(l->size);
    ck_assert(wc && hc && out);
    memcpy(wc, w, nw * sizeof *wc), memcpy(hc, h, nh * sizeof *hc);
    char err[256] = "";
    struct nib_gptq_opts o = {NIB_GPTQ_DAMP, threads};
    ck_assert_msg(nib_gptq_quantize(l, wc, hc, &o, out, err, sizeof err) == 0, "%s", err);
    free(wc), free(hc);
    return out;
}

static uint8_t *run_search(const char *spec, const struct nib_qlayout *l, const float *w,
                           const float *imp)
{
    struct nib_qspec sp;
    char err[256];
    ck_assert(nib_qspec_parse(spec, &sp, err, sizeof err) == 0);
    uint8_t *out = malloc(l->size);
    ck_assert(out);
    ck_assert_msg(
        nib_quantize_m_f32(sp, NIB_QM_SEARCH, imp, l->rows, l->cols, w, out, err, sizeof err) == 0,
        "%s", err);
    return out;
}

static float *diag_f(const double *h, uint32_t n)
{
    float *d = malloc(n * sizeof *d);
    ck_assert(d);
    for (uint32_t i = 0; i < n; i++)
        d[i] = (float)h[(size_t)i * n + i];
    return d;
}

static const char *const specs[] = {"q4/32",  "q4c",    "q8c",    "q4f/32",  "q4a/32",
                                    "q8c/32", "q4f/16", "q4/128", "q4h/128", "q4h/32"};
#define NSPECS (sizeof specs / sizeof *specs)

/* ---- tests ---- */

/* 37 rows (padding rows), 200 columns (a tail group; Cholesky panels of
 * 64 and a tail): the same loss as the float64 reference, most values
 * equal, and clearly below search without feedback. */
START_TEST(test_against_reference)
{
    const char *spec = specs[_i];
    const uint32_t rows = 37, cols = 200;
    rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
    struct nib_qlayout l = layout(spec, rows, cols);
    double *h = make_h(cols, 400, NULL);
    float *w = make_w(rows, cols), *imp = diag_f(h, cols);
    float *ref = malloc((size_t)rows * cols * sizeof *ref);
    ck_assert(ref);
    ref_gptq(&l, w, h, NIB_GPTQ_DAMP, ref);
    uint8_t *packed = run_gptq(&l, w, h, 2), *base = run_search(spec, &l, w, imp);
    float *q = dequant(&l, packed), *qb = dequant(&l, base);
    size_t same = 0;
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        EXPECT(isfinite(q[i]), "%s: value %zu is %g", spec, i, q[i]);
        same += close(q[i], ref[i]);
    }
    const double lg = proxy_loss(rows, cols, w, q, h), lr = proxy_loss(rows, cols, w, ref, h);
    const double ls = proxy_loss(rows, cols, w, qb, h);
    printf("%-7s loss gptq %.6g reference %.6g search %.6g (x%.3f); %.2f %% values equal\n", spec,
           lg, lr, ls, lg / ls, 100.0 * same / ((double)rows * cols));
    ck_assert_msg(fabs(lg - lr) <= 0.01 * lr, "%s: loss %g vs reference %g", spec, lg, lr);
    ck_assert_msg(same >= 0.99 * rows * cols, "%s: only %zu of %u values equal the reference", spec,
                  same, rows * cols);
    ck_assert_msg(lg < 0.8 * ls, "%s: gptq loss %g not clearly below search's %g", spec, lg, ls);
    free(h), free(w), free(imp), free(ref), free(packed), free(base), free(q), free(qb);
}
END_TEST

/* The same bytes for 1, 2 and 3 threads (5 row tasks, 4 Cholesky panels). */
START_TEST(test_threads)
{
    const uint32_t rows = 75, cols = 230;
    rng_state = 77;
    double *h = make_h(cols, 300, NULL);
    float *w = make_w(rows, cols);
    for (size_t s = 0; s < NSPECS; s++) {
        struct nib_qlayout l = layout(specs[s], rows, cols);
        uint8_t *a = run_gptq(&l, w, h, 1);
        for (uint32_t t = 2; t <= 3; t++) {
            uint8_t *b = run_gptq(&l, w, h, t);
            ck_assert_msg(memcmp(a, b, l.size) == 0, "%s: %u threads differ from 1", specs[s], t);
            free(b);
        }
        free(a);
    }
    free(h), free(w);
}
END_TEST

/* Inputs that are never active take no error and give none; with H = 0
 * (or any diagonal H) there is no feedback at all, so the result is
 * exactly search's with the same importance. */
START_TEST(test_dead_inputs)
{
    const uint32_t rows = 21, cols = 96;
    rng_state = 5;
    int dead[96] = {0};
    for (uint32_t i = 0; i < cols; i += 7)
        dead[i] = 1;
    for (uint32_t i = 32; i < 64; i++) /* one whole group dead */
        dead[i] = 1;
    double *h = make_h(cols, 200, dead), *hz = calloc((size_t)cols * cols, sizeof *hz);
    double *hd = calloc((size_t)cols * cols, sizeof *hd);
    float *w = make_w(rows, cols), *zero = calloc(cols, sizeof *zero);
    ck_assert(hz && hd && zero);
    for (uint32_t i = 0; i < cols; i++)
        hd[(size_t)i * cols + i] = dead[i] ? 0 : 1 + urand();
    float *imp_d = diag_f(hd, cols);
    for (size_t s = 0; s < NSPECS; s++) {
        struct nib_qlayout l = layout(specs[s], rows, cols);
        uint8_t *p = run_gptq(&l, w, h, 2);
        float *q = dequant(&l, p), *ref = malloc((size_t)rows * cols * sizeof *ref);
        ck_assert(ref);
        ref_gptq(&l, w, h, NIB_GPTQ_DAMP, ref);
        size_t same = 0;
        for (size_t i = 0; i < (size_t)rows * cols; i++) {
            EXPECT(isfinite(q[i]), "%s: value %zu is %g", specs[s], i, q[i]);
            same += close(q[i], ref[i]);
        }
        ck_assert_msg(same >= 0.99 * rows * cols, "%s: %zu values equal the reference", specs[s],
                      same);
        free(p), free(q), free(ref);

        p = run_gptq(&l, w, hz, 1);
        uint8_t *b = run_search(specs[s], &l, w, zero);
        ck_assert_msg(memcmp(p, b, l.size) == 0, "%s: H = 0 differs from search", specs[s]);
        q = dequant(&l, p);
        for (size_t i = 0; i < (size_t)rows * cols; i++)
            EXPECT(isfinite(q[i]), "%s: value %zu is %g", specs[s], i, q[i]);
        free(p), free(b), free(q);

        p = run_gptq(&l, w, hd, 3);
        b = run_search(specs[s], &l, w, imp_d);
        ck_assert_msg(memcmp(p, b, l.size) == 0, "%s: diagonal H differs from search", specs[s]);
        free(p), free(b);
    }
    free(h), free(hz), free(hd), free(w), free(zero), free(imp_d);
}
END_TEST

START_TEST(test_refusals)
{
    const uint32_t rows = 9, cols = 64;
    rng_state = 11;
    struct nib_qlayout l = layout("q4/32", rows, cols);
    double *h = make_h(cols, 100, NULL), *hc = malloc((size_t)cols * cols * sizeof *hc);
    float *w = make_w(rows, cols);
    uint8_t *out = malloc(l.size);
    ck_assert(hc && out);
    char err[256] = "";
    struct nib_gptq_opts o = {NIB_GPTQ_DAMP, 2};

    memcpy(hc, h, (size_t)cols * cols * sizeof *hc);
    w[5 * cols + 7] = NAN;
    ck_assert_int_eq(nib_gptq_quantize(&l, w, hc, &o, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "row 5, column 7"), "%s", err);
    w[5 * cols + 7] = 0.0f;
    w[8 * cols + 63] = INFINITY;
    memcpy(hc, h, (size_t)cols * cols * sizeof *hc);
    ck_assert_int_eq(nib_gptq_quantize(&l, w, hc, &o, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "row 8, column 63"), "%s", err);
    w[8 * cols + 63] = 0.0f;

    memcpy(hc, h, (size_t)cols * cols * sizeof *hc); /* indefinite */
    hc[3 * cols + 3] = -1e6;
    ck_assert_int_eq(nib_gptq_quantize(&l, w, hc, &o, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "not positive definite"), "%s", err);

    memcpy(hc, h, (size_t)cols * cols * sizeof *hc);
    hc[2 * cols + 9] = hc[9 * cols + 2] = NAN;
    ck_assert_int_eq(nib_gptq_quantize(&l, w, hc, &o, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "not positive definite"), "%s", err);

    memcpy(hc, h, (size_t)cols * cols * sizeof *hc);
    struct nib_gptq_opts bad = {-1.0, 1};
    ck_assert_int_eq(nib_gptq_quantize(&l, w, hc, &bad, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "damping"), "%s", err);
    free(h), free(hc), free(w), free(out);
}
END_TEST

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Printed, never asserted. */
static void time_shape(uint32_t rows, uint32_t cols, uint32_t threads)
{
    struct nib_qlayout l = layout("q4/32", rows, cols);
    double *h = calloc((size_t)cols * cols, sizeof *h);
    float *w = make_w(rows, cols);
    uint8_t *out = malloc(l.size);
    ck_assert(h && out);
    for (uint32_t i = 0; i < cols; i++) /* a cheap positive definite H: banded */
        for (uint32_t j = 0; j < cols; j++) {
            uint32_t d = i > j ? i - j : j - i;
            h[(size_t)i * cols + j] = d == 0 ? 2.0 + urand() : d < 4 ? 0.3 : 0.0;
        }
    char err[256];
    struct nib_gptq_opts o = {NIB_GPTQ_DAMP, threads};
    const double t0 = now();
    ck_assert_msg(nib_gptq_quantize(&l, w, h, &o, out, err, sizeof err) == 0, "%s", err);
    printf("gptq q4/32 %ux%u, %u threads: %.2f s\n", rows, cols, threads, now() - t0);
    free(h), free(w), free(out);
}

START_TEST(test_speed)
{
    rng_state = 3;
    const char *b = getenv("NIB_GPTQ_BENCH");
    if (b && *b && strcmp(b, "0")) {
        static const uint32_t shapes[][2] = {
            {2560, 2048}, {2048, 2048}, {11264, 2048}, {2048, 5632}};
        for (size_t i = 0; i < 4; i++)
            time_shape(shapes[i][0], shapes[i][1], 2);
    } else {
        printf("(NIB_GPTQ_BENCH=1 times the tinyllama-1.1b shapes)\n");
        time_shape(512, 512, 2);
    }
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("gptq");
    TCase *tc = TU_CASE(s, "gptq", NULL, NULL, 600, test_threads, test_dead_inputs, test_refusals,
                        test_speed);
    tcase_add_loop_test(tc, test_against_reference, 0, (int)NSPECS);
    return s;
}
