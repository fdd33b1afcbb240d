/* GPTQ (tools/compiler/gptq.h).
 *
 * The damped Hessian is factored as H = V V^T with V upper triangular (the
 * lower Cholesky factor of H with rows and columns in reversed order, read
 * back reversed). The classic update uses U, the upper Cholesky factor of
 * H^-1, which is V^-1; with d = w - q (original weights minus their
 * quantized values) the error scaled by U is e = d V, so the current value
 * of column k after the columns before it are quantized is
 *
 *     w'[k] = w[k] + (sum over m < k of d[m] V[m][k]) / V[k][k]
 *
 * the same numbers as the textbook loop without inverting anything: one
 * Cholesky (double, blocked, threaded) and then per row a running sum acc
 * updated with row m of V after each quantized column m. Columns are taken
 * in blocks of QB: inside a block acc is updated per column, the columns
 * past the block once per block (the same additions in the same order, so
 * the blocking changes no bit).
 *
 * A group's parameters are chosen from its columns' values after the
 * columns before the group: for k in the group starting at i these are
 * w[k] + sum over i <= m <= k of acc[m] U[m][k], which needs only the
 * diagonal blocks of U (the inverses of V's diagonal blocks, one per group,
 * computed in double). Per-channel layouts choose at column 0, where
 * nothing has been fed back yet. Rows are independent: threads take
 * QR-row tasks in a fixed interleave, and nothing a row computes depends
 * on another. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* vectorize the update loops (no reassociation) */
#endif

#include "tools/compiler/gptq.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/quant.h"

#define CB 64          /* Cholesky panel width */
#define TJ 64          /* Cholesky trailing update: columns per chunk */
#define QB 128         /* GPTQ column block (a multiple of every group size) */
#define QR 16          /* rows per task: V's rows are reused across them */
#define MAX_THREADS 64 /* more threads than this share the work of 64 */
#define KV 16          /* columns per register tile of the trailing update (2 x v8f) */

/* Row stride of V as float: a multiple of KV plus KV, so the block's rows
 * at one column do not all fall in one cache set. */
static size_t v_stride(uint32_t n)
{
    return ((size_t)n + KV - 1) / KV * KV + KV;
}

/* ---- a parallel region: fn(ctx, t, nt) for t < nt ---- */

typedef void (*par_fn)(void *ctx, uint32_t t, uint32_t nt);

struct par_arg {
    par_fn fn;
    void *ctx;
    uint32_t t, nt;
};

static void *par_main(void *p)
{
    struct par_arg *a = p;
    a->fn(a->ctx, a->t, a->nt);
    return NULL;
}

/* The caller runs share 0, and the share of any thread that could not be
 * started: results never depend on which thread ran a share. */
static void par_run(uint32_t nt, par_fn fn, void *ctx)
{
    pthread_t th[MAX_THREADS];
    struct par_arg a[MAX_THREADS];
    int ok[MAX_THREADS];
    for (uint32_t t = 1; t < nt; t++) {
        a[t] = (struct par_arg){fn, ctx, t, nt};
        ok[t] = pthread_create(&th[t], NULL, par_main, &a[t]) == 0;
    }
    fn(ctx, 0, nt);
    for (uint32_t t = 1; t < nt; t++) {
        if (ok[t])
            pthread_join(th[t], NULL);
        else
            fn(ctx, t, nt);
    }
}

/* ---- blocked lower Cholesky of a (n x n, row-major, lower triangle) ---- */

struct chol {
    double *a, *pt;    /* pt: the panel transposed, CB x n (pt[p*n + i] = L[i][k0+p]) */
    double t[CB * CB]; /* the diagonal block transposed (t[c*CB + c2] = L[k0+c2][k0+c]) */
    uint32_t n, k0, nb;
};

/* The diagonal block, unblocked; 0, or -1 when a pivot is not positive. */
static int chol_diag(struct chol *c, uint32_t *bad)
{
    const uint32_t n = c->n, k0 = c->k0, k1 = k0 + c->nb;
    double *a = c->a;
    for (uint32_t j = k0; j < k1; j++) {
        double s = a[(size_t)j * n + j];
        for (uint32_t p = k0; p < j; p++)
            s -= a[(size_t)j * n + p] * a[(size_t)j * n + p];
        if (!(s > 0) || !isfinite(s)) {
            *bad = j;
            return -1;
        }
        const double d = sqrt(s);
        a[(size_t)j * n + j] = d;
        for (uint32_t i = j + 1; i < k1; i++) {
            double x = a[(size_t)i * n + j];
            for (uint32_t p = k0; p < j; p++)
                x -= a[(size_t)i * n + p] * a[(size_t)j * n + p];
            a[(size_t)i * n + j] = x / d;
        }
    }
    for (uint32_t p = 0; p < c->nb; p++)
        for (uint32_t q = 0; q < c->nb; q++)
            c->t[p * CB + q] = a[(size_t)(k0 + q) * n + k0 + p];
    return 0;
}

/* Rows below the diagonal block: L[i][k0..k1) = A[i][k0..k1) L11^-T. */
static void chol_panel(void *p, uint32_t t, uint32_t nt)
{
    struct chol *c = p;
    const uint32_t n = c->n, k0 = c->k0, nb = c->nb, k1 = k0 + nb;
    for (uint32_t i = k1 + t; i < n; i += nt) {
        double x[CB];
        memcpy(x, c->a + (size_t)i * n + k0, nb * sizeof *x);
        for (uint32_t q = 0; q < nb; q++) {
            x[q] /= c->t[q * CB + q];
            const double xq = x[q], *tq = c->t + q * CB;
            for (uint32_t q2 = q + 1; q2 < nb; q2++)
                x[q2] -= xq * tq[q2];
        }
        memcpy(c->a + (size_t)i * n + k0, x, nb * sizeof *x);
        for (uint32_t q = 0; q < nb; q++)
            c->pt[(size_t)q * n + i] = x[q];
    }
}

/* A[i][j] -= sum_p L[i][p] L[j][p] for k1 <= j <= i, in TJ-column chunks
 * so a chunk of the transposed panel stays in cache across rows. */
static void chol_trail(void *p, uint32_t t, uint32_t nt)
{
    struct chol *c = p;
    const uint32_t n = c->n, nb = c->nb, k1 = c->k0 + nb;
    const double *pt = c->pt;
    for (uint32_t jc = k1; jc < n; jc += TJ) {
        const uint32_t je = jc + TJ < n ? jc + TJ : n;
        uint32_t i = k1 + t;
        if (i < jc)
            i += (jc - i + nt - 1) / nt * nt;
        while (i < n) {
            const uint32_t m = (i + 1 < je ? i + 1 : je) - jc;
            if (i + 1 >= je && i + nt < n) { /* two full rows share each load of the panel */
                const uint32_t i2 = i + nt;
                double a0[TJ] = {0}, a1[TJ] = {0};
                for (uint32_t q = 0; q < nb; q++) {
                    const double l0 = pt[(size_t)q * n + i], l1 = pt[(size_t)q * n + i2];
                    const double *r = pt + (size_t)q * n + jc;
                    for (uint32_t j = 0; j < m; j++) {
                        a0[j] += l0 * r[j];
                        a1[j] += l1 * r[j];
                    }
                }
                double *r0 = c->a + (size_t)i * n + jc, *r1 = c->a + (size_t)i2 * n + jc;
                for (uint32_t j = 0; j < m; j++)
                    r0[j] -= a0[j], r1[j] -= a1[j];
                i += 2 * nt;
                continue;
            }
            double acc[TJ] = {0};
            for (uint32_t q = 0; q < nb; q++) {
                const double l = pt[(size_t)q * n + i], *r = pt + (size_t)q * n + jc;
                for (uint32_t j = 0; j < m; j++)
                    acc[j] += l * r[j];
            }
            double *ai = c->a + (size_t)i * n + jc;
            for (uint32_t j = 0; j < m; j++)
                ai[j] -= acc[j];
            i += nt;
        }
    }
}

/* 0, or -1 with *bad the failing pivot (in a's order). */
static int cholesky(double *a, uint32_t n, uint32_t nt, double *pt, uint32_t *bad)
{
    struct chol *c = malloc(sizeof *c);
    if (!c) {
        *bad = UINT32_MAX;
        return -1;
    }
    c->a = a, c->pt = pt, c->n = n;
    int rc = 0;
    for (uint32_t k0 = 0; k0 < n && rc == 0; k0 += CB) {
        c->k0 = k0, c->nb = n - k0 < CB ? n - k0 : CB;
        if (chol_diag(c, bad))
            rc = -1;
        else if (k0 + c->nb < n) {
            par_run(nt, chol_panel, c);
            par_run(nt, chol_trail, c);
        }
    }
    free(c);
    return rc;
}

/* ---- the column loop, QR rows per task ---- */

struct qjob {
    const struct nib_qlayout *l;
    const float *w, *v, *vd, *imp; /* v: V as float (n x v_stride, upper); vd: its diagonal */
    const float *ub; /* U's diagonal blocks: gsize x gsize per group (NULL per channel) */
    uint8_t *out;
    uint32_t ntask;
    struct qfail {
        uint32_t row; /* UINT32_MAX: none */
        char msg[160];
    } fail[MAX_THREADS];
};

/* Per-thread scratch. */
struct qbuf {
    float *acc, *cur, *dl; /* acc: QR x cols; cur: gsize; dl: QR x QB (errors d of the block) */
    int *codes;            /* QR x cols */
    struct nib_qgroup *g;  /* QR x nib_ql_n_qgroups */
};

/* Eight floats, added and multiplied lane by lane (each lane exactly the
 * scalar IEEE operation, never fused): the register tile of the trailing
 * update, one AVX register where there is one. */
typedef float v8f __attribute__((vector_size(32)));

static inline v8f v8_load(const float *p)
{
    v8f x;
    memcpy(&x, p, sizeof x);
    return x;
}

static inline void v8_store(float *p, v8f x)
{
    memcpy(p, &x, sizeof x);
}

/* acc[r][k] += sum over the block's columns i (in order) of dl[r][i] V[i][k]
 * for k >= k0: the same additions as one column at a time, with a tile of
 * four rows x KV columns held in registers across the block (each load of
 * V serves four rows). */
static void trail(const float *v, size_t ldv, const float *dl, float *acc, uint32_t n, uint32_t nr,
                  uint32_t nb, uint32_t k0)
{
    uint32_t k = k0;
    for (; k + KV <= n; k += KV) {
        uint32_t r = 0;
        for (; r + 3 < nr; r += 4) {
            float *p0 = acc + (size_t)r * n + k, *p1 = p0 + n, *p2 = p1 + n, *p3 = p2 + n;
            const float *d0 = dl + (size_t)r * QB, *d1 = d0 + QB, *d2 = d1 + QB, *d3 = d2 + QB;
            v8f a0 = v8_load(p0), a1 = v8_load(p0 + 8), b0 = v8_load(p1), b1 = v8_load(p1 + 8);
            v8f c0 = v8_load(p2), c1 = v8_load(p2 + 8), e0 = v8_load(p3), e1 = v8_load(p3 + 8);
            for (uint32_t i = 0; i < nb; i++) {
                const float *vi = v + (size_t)i * ldv + k;
                const v8f x0 = v8_load(vi), x1 = v8_load(vi + 8);
                const float f0 = d0[i], f1 = d1[i], f2 = d2[i], f3 = d3[i];
                a0 += f0 * x0, a1 += f0 * x1, b0 += f1 * x0, b1 += f1 * x1;
                c0 += f2 * x0, c1 += f2 * x1, e0 += f3 * x0, e1 += f3 * x1;
            }
            v8_store(p0, a0), v8_store(p0 + 8, a1), v8_store(p1, b0), v8_store(p1 + 8, b1);
            v8_store(p2, c0), v8_store(p2 + 8, c1), v8_store(p3, e0), v8_store(p3 + 8, e1);
        }
        for (; r < nr; r++) {
            float *p0 = acc + (size_t)r * n + k;
            const float *d0 = dl + (size_t)r * QB;
            v8f a0 = v8_load(p0), a1 = v8_load(p0 + 8);
            for (uint32_t i = 0; i < nb; i++) {
                const float *vi = v + (size_t)i * ldv + k, f0 = d0[i];
                a0 += f0 * v8_load(vi), a1 += f0 * v8_load(vi + 8);
            }
            v8_store(p0, a0), v8_store(p0 + 8, a1);
        }
    }
    for (; k < n; k++)
        for (uint32_t r = 0; r < nr; r++) {
            float a = acc[(size_t)r * n + k];
            for (uint32_t i = 0; i < nb; i++)
                a += dl[(size_t)r * QB + i] * v[(size_t)i * ldv + k];
            acc[(size_t)r * n + k] = a;
        }
}

static int qtask(struct qjob *j, struct qbuf *b, uint32_t r0, struct qfail *f)
{
    const struct nib_qlayout *l = j->l;
    const uint32_t n = l->cols, gs = nib_ql_qgroup(l), nq = nib_ql_n_qgroups(l);
    const uint32_t nr = l->rows - r0 < QR ? l->rows - r0 : QR;
    const float *v = j->v, *vd = j->vd;
    const size_t ldv = v_stride(n);
    memset(b->acc, 0, (size_t)nr * n * sizeof *b->acc);
    for (uint32_t b0 = 0; b0 < n; b0 += QB) {
        const uint32_t b1 = b0 + QB < n ? b0 + QB : n;
        for (uint32_t i = b0; i < b1; i++) {
            const float *vi = v + (size_t)i * ldv;
            for (uint32_t r = 0; r < nr; r++) {
                const float *wr = j->w + (size_t)(r0 + r) * n;
                float *ar = b->acc + (size_t)r * n;
                if (i % gs == 0) {
                    const uint32_t m = n - i < gs ? n - i : gs;
                    memcpy(b->cur, wr + i, m * sizeof *b->cur);
                    if (j->ub) { /* no feedback before column 0 of a per-channel row */
                        const float *ub = j->ub + (size_t)(i / gs) * gs * gs;
                        for (uint32_t p = 0; p < m; p++) {
                            const float a = ar[i + p], *up = ub + (size_t)p * gs;
                            for (uint32_t k = p; k < m; k++)
                                b->cur[k] += a * up[k];
                        }
                    }
                    char why[128];
                    struct nib_qgroup *g = &b->g[(size_t)r * nq + i / gs];
                    if (l->sub) { /* q4h: the super-scale, from the row as given, once
                                   * per super-block: later sub-blocks copy the first's */
                        const uint32_t s0 = i / l->gsize * l->gsize;
                        g->bits =
                            i == s0 ? nib_q4h_super(wr + s0, n - s0 < l->gsize ? n - s0 : l->gsize)
                                    : b->g[(size_t)r * nq + s0 / gs].bits;
                    }
                    if (nib_qgroup_choose(l, NIB_QM_SEARCH, b->cur, j->imp + i, m, g, NULL, why,
                                          sizeof why)) {
                        f->row = r0 + r;
                        snprintf(f->msg, sizeof f->msg, "row %u, columns %u..%u: %s", r0 + r, i,
                                 i + m - 1, why);
                        return -1;
                    }
                }
                float deq;
                const float x = wr[i] + ar[i] / vd[i];
                if (!isfinite(x)) { /* feedback through a near-singular Hessian overflowed */
                    f->row = r0 + r;
                    snprintf(f->msg, sizeof f->msg,
                             "row %u, column %u: the error feedback reached a non-finite value "
                             "(the calibration Hessian is too ill-conditioned)",
                             r0 + r, i);
                    return -1;
                }
                b->codes[(size_t)r * n + i] =
                    nib_qgroup_code(l, &b->g[(size_t)r * nq + i / gs], x, &deq);
                const float d = wr[i] - deq;
                b->dl[(size_t)r * QB + (i - b0)] = d;
                for (uint32_t k = i + 1; k < b1; k++)
                    ar[k] += d * vi[k];
            }
        }
        trail(v + (size_t)b0 * ldv, ldv, b->dl, b->acc, n, nr, b1 - b0, b1);
    }
    for (uint32_t r = 0; r < nr; r++)
        for (uint32_t g = 0; g < nq && g * gs < n; g++) {
            const uint32_t k0 = g * gs, m = n - k0 < gs ? n - k0 : gs;
            nib_qgroup_put(l, j->out, r0 + r, g, &b->g[(size_t)r * nq + g],
                           b->codes + (size_t)r * n + k0, m);
        }
    return 0;
}

static void qthread(void *p, uint32_t t, uint32_t nt)
{
    struct qjob *j = p;
    struct qfail *f = &j->fail[t];
    const struct nib_qlayout *l = j->l;
    struct qbuf b;
    b.acc = malloc((size_t)QR * l->cols * sizeof *b.acc);
    b.cur = malloc(nib_ql_qgroup(l) * sizeof *b.cur);
    b.dl = malloc((size_t)QR * QB * sizeof *b.dl);
    b.codes = malloc((size_t)QR * l->cols * sizeof *b.codes);
    b.g = malloc((size_t)QR * nib_ql_n_qgroups(l) * sizeof *b.g);
    if (!b.acc || !b.cur || !b.dl || !b.codes || !b.g) {
        f->row = t * QR < l->rows ? t * QR : 0;
        snprintf(f->msg, sizeof f->msg, "out of memory quantizing a %ux%u tensor", l->rows,
                 l->cols);
    } else {
        for (uint32_t k = t; k < j->ntask; k += nt)
            if (qtask(j, &b, k * QR, f))
                break;
    }
    free(b.acc), free(b.cur), free(b.dl), free(b.codes), free(b.g);
}

/* ---- the Hessian: dead inputs, damping, V ---- */

/* imp = the undamped diagonal; v, vd = V (H = V V^T, V upper) as float. */
static int factor(double *h, uint32_t n, const struct nib_gptq_opts *o, uint32_t nt, float *imp,
                  float *v, float *vd, uint32_t gs, float *ub, char *err, size_t errlen)
{
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) {
        const double d = h[(size_t)i * n + i];
        imp[i] = (float)d;
        sum += d;
    }
    for (uint32_t i = 0; i < n; i++)
        if (h[(size_t)i * n + i] == 0) { /* never active: no error in, none out */
            for (uint32_t k = 0; k < n; k++)
                h[(size_t)i * n + k] = h[(size_t)k * n + i] = 0;
            h[(size_t)i * n + i] = 1;
        }
    double mean = sum / n;
    if (mean == 0)
        mean = 1;
    const double add = o->damp * mean;
    for (uint32_t i = 0; i < n; i++)
        h[(size_t)i * n + i] += add;
    /* reversed order: element (i, k) <-> (n-1-i, n-1-k) is the flat array reversed */
    const size_t nn = (size_t)n * n;
    for (size_t a = 0, z = nn - 1; a < z; a++, z--) {
        const double s = h[a];
        h[a] = h[z], h[z] = s;
    }
    double *pt = malloc((size_t)CB * n * sizeof *pt);
    uint32_t bad = 0;
    int rc = pt ? cholesky(h, n, nt, pt, &bad) : -1;
    free(pt);
    if (rc) {
        if (!pt || bad == UINT32_MAX)
            snprintf(err, errlen, "out of memory factoring a %ux%u Hessian", n, n);
        else
            snprintf(err, errlen,
                     "the %ux%u Hessian is not positive definite even after damping (input %u)", n,
                     n, n - 1 - bad);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        const double *li =
            h + (size_t)(n - 1 - i) * n + (n - 1 - i); /* V[i][k] = L[n-1-i][n-1-k] */
        float *vi = v + (size_t)i * v_stride(n);
        for (uint32_t k = i; k < n; k++) {
            vi[k] = (float)li[-(ptrdiff_t)(k - i)];
            if (!isfinite(vi[k]) || (k == i && !(vi[k] > 0))) {
                snprintf(err, errlen, "the %ux%u Hessian is beyond float range", n, n);
                return -1;
            }
        }
        vd[i] = vi[i];
    }
    for (uint32_t g0 = 0; ub && g0 < n; g0 += gs) { /* U's diagonal blocks: X = B^-1 */
        const uint32_t m = n - g0 < gs ? n - g0 : gs;
        float *x = ub + (size_t)(g0 / gs) * gs * gs;
#define VB(a, b) h[(size_t)(n - 1 - g0 - (a)) * n + (n - 1 - g0 - (b))] /* V[g0+a][g0+b] */
        for (uint32_t c = 0; c < m; c++) {
            double col[256]; /* gsize <= 128 */
            col[c] = 1.0 / VB(c, c);
            for (uint32_t r = c; r-- > 0;) {
                double s = 0;
                for (uint32_t p = r + 1; p <= c; p++)
                    s += VB(r, p) * col[p];
                col[r] = -s / VB(r, r);
            }
            for (uint32_t r = 0; r <= c; r++)
                x[(size_t)r * gs + c] = (float)col[r];
        }
#undef VB
    }
    return 0;
}

int nib_gptq_quantize(const struct nib_qlayout *l, float *w, double *h,
                      const struct nib_gptq_opts *o, uint8_t *out, char *err, size_t errlen)
{
    const uint32_t rows = l->rows, n = l->cols;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t k = 0; k < n; k++)
            if (!isfinite(w[(size_t)r * n + k])) {
                snprintf(err, errlen, "row %u, column %u is not a finite number", r, k);
                return -1;
            }
    if (!(o->damp >= 0) || !isfinite(o->damp)) {
        snprintf(err, errlen, "gptq damping %g is not a finite non-negative number", o->damp);
        return -1;
    }
    const uint32_t nt = o->threads < 1 ? 1 : o->threads > MAX_THREADS ? MAX_THREADS : o->threads;
    float *imp = malloc((size_t)n * sizeof *imp), *vd = malloc((size_t)n * sizeof *vd);
    float *v = malloc((size_t)n * v_stride(n) * sizeof *v);
    struct qjob *j = malloc(sizeof *j);
    const uint32_t gs = nib_ql_qgroup(l);
    float *ub = gs < n ? malloc((size_t)((n + gs - 1) / gs) * gs * gs * sizeof *ub) : NULL;
    if (!imp || !vd || !v || !j || (gs < n && !ub)) {
        free(imp), free(vd), free(v), free(j), free(ub);
        snprintf(err, errlen, "out of memory quantizing a %ux%u tensor", rows, n);
        return -1;
    }
    int rc = factor(h, n, o, nt, imp, v, vd, gs, ub, err, errlen);
    if (rc == 0) {
        memset(out, 0, l->size);
        *j = (struct qjob){.l = l, .w = w, .v = v, .vd = vd, .imp = imp, .ub = ub, .out = out};
        j->ntask = (rows + QR - 1) / QR;
        for (uint32_t t = 0; t < MAX_THREADS; t++)
            j->fail[t].row = UINT32_MAX;
        par_run(nt, qthread, j);
        const struct qfail *f = NULL;
        for (uint32_t t = 0; t < nt; t++)
            if (j->fail[t].row != UINT32_MAX && (!f || j->fail[t].row < f->row))
                f = &j->fail[t];
        if (f) {
            snprintf(err, errlen, "%s", f->msg);
            rc = -1;
        }
    }
    if (rc == 0) { /* padding: rows past the tensor, groups past its columns */
        const struct nib_qgroup zero = {0};
        for (uint32_t r = 0; r < l->n_pad; r++)
            for (uint32_t g = r < rows ? (n + gs - 1) / gs : 0; g < nib_ql_n_qgroups(l); g++)
                nib_qgroup_put(l, out, r, g, &zero, NULL, 0);
    }
    free(imp), free(vd), free(v), free(j), free(ub);
    return rc;
}
