/* Calibration (tools/compiler/calib.h). */
#include "tools/compiler/calib.h"

#include "tools/compiler/calib_store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/qkernels.h"
#include "rt/cpu_isa.h"
#include "tools/compiler/evalcore.h"
#include "tools/compiler/gptq.h"
#include "tools/compiler/tok_load.h"
#include "tools/util/tool_util.h"

/* ---- the Hessian X^T X, rows of H split among threads ---- */

struct hjob {
    const float *x; /* n x k */
    uint32_t n, k, w, nw;
    double *h; /* k x k */
};

/* H in tiles of 4 rows x 8 columns (upper triangle, tile by tile), the
 * rows of tiles dealt to workers in turn; a tile's 32 sums are held in
 * registers over every token. Each element sums its products in token
 * order from zero (every product is exact in double, so contracting the
 * sum into fma changes nothing), whatever the tiling or thread count. */
#define HT_I 4
#define HT_C 8
typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

static void hessian_tile(const float *x, uint32_t n, uint32_t k, uint32_t i0, uint32_t c0,
                         double *h)
{
    if (i0 + HT_I > k || c0 + HT_C > k) { /* an edge tile, element by element */
        for (uint32_t i = i0; i < i0 + HT_I && i < k; i++)
            for (uint32_t c = c0 > i ? c0 : i; c < c0 + HT_C && c < k; c++) {
                double s = 0;
                for (uint32_t t = 0; t < n; t++)
                    s += (double)x[(uint64_t)t * k + i] * (double)x[(uint64_t)t * k + c];
                h[(uint64_t)i * k + c] = s;
            }
        return;
    }
    v4d a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0}, c0v = {0}, c1v = {0}, d0 = {0}, d1 = {0};
    for (uint32_t t = 0; t < n; t++) {
        const float *xt = x + (uint64_t)t * k;
        v4f lo, hi;
        memcpy(&lo, xt + c0, sizeof lo);
        memcpy(&hi, xt + c0 + 4, sizeof hi);
        const v4d l = __builtin_convertvector(lo, v4d), u = __builtin_convertvector(hi, v4d);
        const double x0 = xt[i0], x1 = xt[i0 + 1], x2 = xt[i0 + 2], x3 = xt[i0 + 3];
        a0 += x0 * l, a1 += x0 * u, b0 += x1 * l, b1 += x1 * u;
        c0v += x2 * l, c1v += x2 * u, d0 += x3 * l, d1 += x3 * u;
    }
    double *r = h + (uint64_t)i0 * k + c0;
    memcpy(r, &a0, 32), memcpy(r + 4, &a1, 32), r += k;
    memcpy(r, &b0, 32), memcpy(r + 4, &b1, 32), r += k;
    memcpy(r, &c0v, 32), memcpy(r + 4, &c1v, 32), r += k;
    memcpy(r, &d0, 32), memcpy(r + 4, &d1, 32);
}

static void *hessian_rows(void *arg)
{
    const struct hjob *j = arg;
    const uint32_t k = j->k;
    for (uint32_t i0 = j->w * HT_I; i0 < k; i0 += j->nw * HT_I)
        for (uint32_t c0 = i0 / HT_C * HT_C; c0 < k; c0 += HT_C)
            hessian_tile(j->x, j->n, k, i0, c0, j->h);
    return NULL;
}

static void hessian(const float *x, uint32_t n, uint32_t k, double *h, uint32_t threads)
{
    memset(h, 0, (size_t)k * k * sizeof *h);
    enum { MAXT = 16 };
    struct hjob jobs[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = {0};
    const uint32_t nw = threads < 1 ? 1 : threads > MAXT ? MAXT : threads;
    for (uint32_t w = 0; w < nw; w++)
        jobs[w] = (struct hjob){x, n, k, w, nw, h};
    for (uint32_t w = 1; w < nw; w++)
        started[w] = pthread_create(&tid[w], NULL, hessian_rows, &jobs[w]) == 0;
    for (uint32_t w = 0; w < nw; w++) /* a worker that did not start: its blocks here */
        if (!started[w])
            hessian_rows(&jobs[w]);
    for (uint32_t w = 1; w < nw; w++)
        if (started[w])
            pthread_join(tid[w], NULL);
    for (uint32_t i = 0; i < k; i++) /* the lower triangle mirrors the upper */
        for (uint32_t c = 0; c < i; c++)
            h[(uint64_t)i * k + c] = h[(uint64_t)c * k + i];
}

/* ---- one matrix input: its statistics, and what is made of them ---- */

struct input {
    uint32_t op; /* plan op index */
    uint32_t k;  /* channels */
    float *x;    /* n_tokens x k, the inputs in token order */
};

static struct nib_calib_matrix *add_wstat(struct nib_calib *c, const struct llama_weight *w)
{
    struct nib_calib_matrix *s = nib_calib_find(c, w);
    if (s)
        return s;
    s = &c->ws[c->n_ws++]; /* capacity: every source of every plan tensor */
    memset(s, 0, sizeof *s);
    s->w = w;
    return s;
}

/* The formats w is wanted in: its tensor's in the quantized plan, and the
 * extras. */
static uint32_t add_spec(struct nib_qspec *out, uint32_t n, struct nib_qspec s)
{
    if (s.dtype == NIB_DT_F32)
        return n;
    for (uint32_t i = 0; i < n; i++)
        if (out[i].dtype == s.dtype && out[i].group == s.group)
            return n;
    out[n] = s;
    return n + 1;
}

/* The formats w is wanted in: those of the tensors holding it in the
 * quantized plan, and the extras. */
static uint32_t wanted(const struct nib_plan *qp, const struct nib_calib_opts *co,
                       const struct llama_weight *w, struct nib_qspec *out)
{
    uint32_t n = 0;
    for (uint32_t t = 0; t < qp->n_tensors; t++)
        for (uint32_t s = 0; s < qp->tensors[t].n_src; s++)
            if (qp->tensors[t].src[s] == w && n < NIB_CALIB_MAX_PREP)
                n = add_spec(
                    out, n, (struct nib_qspec){qp->tensors[t].rec.dtype, qp->tensors[t].rec.group});
    for (uint32_t e = 0; e < co->n_extra && n < NIB_CALIB_MAX_PREP; e++)
        n = add_spec(out, n, co->extra[e]);
    return n;
}

static int prepare(struct nib_calib *c, const struct nib_plan *fp, const struct nib_plan *qp,
                   const struct nib_calib_opts *co, const struct input *in, uint32_t tensor,
                   uint32_t embed_tensor, char *err, size_t errlen)
{
    const uint32_t n = c->n_tokens, k = in->k;
    double *h = NULL, *hcopy = NULL;
    float *w = NULL;
    int rc = -1;
    if (co->method == NIB_QM_GPTQ) {
        h = malloc((size_t)k * k * sizeof *h);
        hcopy = malloc((size_t)k * k * sizeof *hcopy);
        if (!h || !hcopy)
            goto oom;
        hessian(in->x, n, k, h, co->threads);
    }
    const struct plan_tensor *pt = &fp->tensors[tensor];
    for (uint32_t s = 0; s < pt->n_src; s++) {
        const struct llama_weight *lw = pt->src[s];
        if (!lw || !lw->t || lw->cols != k)
            continue;
        struct nib_calib_matrix *st = add_wstat(c, lw);
        if (!st->imp) {
            if (!(st->imp = malloc(k * sizeof *st->imp)))
                goto oom;
            /* mean of x^2, in token order: H's diagonal is that sum already
             * (the same additions of the same exact products) */
            for (uint32_t i = 0; i < k && h; i++)
                st->imp[i] = (float)(h[(uint64_t)i * k + i] / n);
            for (uint32_t i = 0; i < k && !h; i++) {
                double q = 0;
                for (uint32_t t = 0; t < n; t++) {
                    double v = in->x[(uint64_t)t * k + i];
                    q += v * v;
                }
                st->imp[i] = (float)(q / n);
            }
        }
        /* A table the embedding also reads (a tied LM head) is not given
         * gptq's error feedback: feedback trades each weight's own error
         * for the head's output error, and the embedding reads the weights
         * themselves. It is rounded by search with the head's importance. */
        if (!h || tensor == embed_tensor)
            continue;
        struct nib_qspec specs[NIB_CALIB_MAX_PREP];
        uint32_t ns = wanted(qp, co, lw, specs);
        if (ns && !w && !(w = malloc((size_t)lw->rows * k * sizeof *w)))
            goto oom;
        for (uint32_t q = 0; q < ns && st->n_prep < NIB_CALIB_MAX_PREP; q++) {
            if (nib_calib_packed(c, lw, specs[q]))
                continue;
            struct nib_qlayout l;
            if (nib_qlayout_get(&l, specs[q].dtype, specs[q].group, lw->rows, k))
                continue;
            for (uint32_t r = 0; r < lw->rows; r++)
                if (llama_weight_row_f32(lw, r, w + (uint64_t)r * k)) {
                    snprintf(err, errlen, "calibration: cannot read row %u of '%s'", r,
                             pt->rec.name);
                    goto out;
                }
            memcpy(hcopy, h, (size_t)k * k * sizeof *h);
            uint8_t *bytes = malloc(l.size);
            if (!bytes)
                goto oom;
            struct nib_gptq_opts go = {NIB_GPTQ_DAMP, co->threads ? co->threads : 1};
            char why[256];
            if (nib_gptq_quantize(&l, w, hcopy, &go, bytes, why, sizeof why)) {
                free(bytes);
                snprintf(err, errlen, "gptq of '%s': %s", pt->rec.name, why);
                goto out;
            }
            st->prep[st->n_prep++] = (struct nib_calib_prep){specs[q], bytes};
        }
    }
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "calibration: out of memory");
out:
    free(h);
    free(hcopy);
    free(w);
    return rc;
}

/* ---- running the f32 model layer by layer ---- */

/* The layer of op i: parsed from "blk.N." of its tensor; ops without a
 * tensor (attention) belong to the one before. -1: not in a layer. */
static long op_layer(const struct nib_blob_view *v, uint32_t i, long prev)
{
    const struct nib_op *op = &v->ops[i];
    if (op->tensor == UINT32_MAX)
        return prev;
    const char *name = v->tensors[op->tensor].name;
    if (strncmp(name, "blk.", 4))
        return -1;
    return strtol(name + 4, NULL, 10);
}

/* Row t of the input op's matrix reads, into x[0..k): the normalized
 * residual (NIB_OPF_NORM_IN) or its f32 source row. */
static void capture(const struct nib_qkernels *qk, const struct nib_blob_view *v,
                    const uint8_t *mem, const struct nib_op *op, uint32_t t, float *x)
{
    const float *src =
        (const float *)(const void *)(mem + op->src0 + (uint64_t)t * op->src0_stride);
    if (op->flags & NIB_OPF_NORM_IN)
        qk->rmsnorm(src, nib_tensor_f32(v, op->matmul.norm.tensor), x, op->k, op->matmul.norm.eps);
    else
        memcpy(x, src, op->k * sizeof *x);
}

struct run {
    struct runner r;
    const struct nib_qkernels *qk;
    const uint32_t *ids; /* n tokens: sequences of seq tokens, each from position 0 */
    uint32_t n, seq, dim;
    uint64_t res_off, res_stride; /* the residual stream in the arena */
    float *res;                   /* n x dim: between segments */
};

/* Run ops [a, b) over every token, in passes of max_batch, from the saved
 * residual (a > 0) or from the tokens (a = 0), capturing the inputs of
 * the matmuls into ins (one per matmul op in [a, b), in order). A team of
 * nt workers runs every op, each its nib_exec_share of it (the runtime's
 * split: the same bits for any team size), with a barrier after each; a
 * matmul's inputs are captured by token, worker t taking tokens t, t+nt,
 * ..., before any worker runs the op. Worker 0 loads and saves the
 * residual stream between passes. */
struct team {
    struct run *u;
    uint32_t a, b, nt;
    struct input *ins;
    pthread_barrier_t bar;
    uint8_t *ws[NIB_CALIB_MAX_THREADS]; /* each worker's private scratch */
};

static void segment_worker(struct team *tm, uint32_t w)
{
    if (w >= tm->nt)
        return;
    struct run *u = tm->u;
    const struct nib_blob_view *v = &u->r.v;
    uint8_t *mem = u->r.mem;
    const uint32_t mb = v->h->max_batch, nt = tm->nt;
    for (uint32_t s0 = 0; s0 < u->n; s0 += u->seq) {
        const uint32_t len = u->n - s0 < u->seq ? u->n - s0 : u->seq;
        for (uint32_t pos = 0; pos < len; pos += mb) {
            const uint32_t m = len - pos < mb ? len - pos : mb, row = s0 + pos;
            if (w == 0) {
                memcpy(mem + v->h->token_slot_off, u->ids + row, (size_t)m * 4);
                memcpy(mem + v->h->pos_slot_off, &pos, 4);
                if (tm->a > 0)
                    for (uint32_t t = 0; t < m; t++)
                        memcpy(mem + u->res_off + t * u->res_stride,
                               u->res + (uint64_t)(row + t) * u->dim, u->dim * sizeof(float));
            }
            if (nt > 1)
                pthread_barrier_wait(&tm->bar);
            struct input *in = tm->ins;
            for (uint32_t i = tm->a; i < tm->b; i++) {
                const struct nib_op *op = &v->ops[i];
                if (op->code == NIB_OP_MATMUL) {
                    for (uint32_t t = w; t < m; t += nt)
                        capture(u->qk, v, mem, op, t, in->x + (uint64_t)(row + t) * in->k);
                    in++;
                    if (nt > 1) /* captured before the op may overwrite its input */
                        pthread_barrier_wait(&tm->bar);
                }
                nib_exec_op(u->qk, v, mem, tm->ws[w], op, m, pos, w, nt);
                if (nt > 1)
                    pthread_barrier_wait(&tm->bar);
            }
            if (w == 0)
                for (uint32_t t = 0; t < m; t++)
                    memcpy(u->res + (uint64_t)(row + t) * u->dim,
                           mem + u->res_off + t * u->res_stride, u->dim * sizeof(float));
        }
    }
}

struct team_arg {
    struct team *tm;
    uint32_t w;
};

/* Workers wait at the gate until the team's size is known (a thread that
 * cannot be started shrinks it: the bits do not depend on its size). */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
};

struct team_start {
    struct team_arg arg;
    struct gate *g;
};

static void *segment_main(void *p)
{
    struct team_start *s = p;
    pthread_mutex_lock(&s->g->mu);
    while (!s->g->open)
        pthread_cond_wait(&s->g->cv, &s->g->mu);
    pthread_mutex_unlock(&s->g->mu);
    segment_worker(s->arg.tm, s->arg.w);
    return NULL;
}

static void run_segment(struct run *u, uint32_t a, uint32_t b, struct input *ins, uint32_t threads)
{
    const struct nib_blob_view *v = &u->r.v;
    struct team tm = {.u = u, .a = a, .b = b, .ins = ins};
    uint32_t nt = threads < 1                       ? 1
                  : threads > NIB_CALIB_MAX_THREADS ? NIB_CALIB_MAX_THREADS
                                                    : threads;
    const size_t wsz = ((size_t)v->h->wscratch_size + 63) / 64 * 64;
    tm.ws[0] = u->r.mem + v->h->wscratch_off;
    for (uint32_t w = 1; w < nt; w++)
        if (!(tm.ws[w] = aligned_alloc(64, wsz ? wsz : 64))) {
            nt = w;
            break;
        }
    pthread_t tid[NIB_CALIB_MAX_THREADS];
    struct team_start st[NIB_CALIB_MAX_THREADS];
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    uint32_t started = 1;
    for (; started < nt; started++) {
        st[started] = (struct team_start){{&tm, started}, &g};
        if (pthread_create(&tid[started], NULL, segment_main, &st[started]))
            break;
    }
    tm.nt = started;
    if (started > 1 && pthread_barrier_init(&tm.bar, NULL, started))
        tm.nt = 1; /* the started workers run no share: worker w >= nt does nothing */
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    segment_worker(&tm, 0);
    for (uint32_t w = 1; w < started; w++)
        pthread_join(tid[w], NULL);
    if (tm.nt > 1)
        pthread_barrier_destroy(&tm.bar);
    for (uint32_t w = 1; w < nt; w++)
        free(tm.ws[w]);
}

/* One line redrawn per step on a terminal; elsewhere (a log) only the
 * finished line. */
static void progress(FILE *f, uint32_t done, uint32_t total, uint32_t tokens)
{
    if (!f || (done < total && !isatty(fileno(f))))
        return;
    char bar[33];
    uint32_t fill = total ? done * 32 / total : 32;
    for (uint32_t i = 0; i < 32; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[32] = 0;
    fprintf(f, "%snib compile: calibrating on %u tokens [%s] %u/%u", isatty(fileno(f)) ? "\r" : "",
            tokens, bar, done, total);
    if (done == total)
        fputc('\n', f);
    fflush(f);
}

int nib_calib_run(const struct llama_model *m, const struct plan_opts *po,
                  const struct nib_calib_opts *co, struct nib_calib **out, char *err, size_t errlen)
{
    struct plan_opts fo = *po;
    nib_plan_opts_quant(&fo, "f32", err, errlen);
    fo.precision = NULL;
    fo.calib = NULL;
    struct run u = {0};
    struct nib_plan fp = {0}, qp = {0};
    struct nib_calib *c = calloc(1, sizeof *c);
    uint32_t *ids = NULL;
    struct input *ins = NULL;
    uint32_t *seg = NULL; /* seg[i]: the first op of segment i */
    const struct nib_blob_view *v = &u.r.v;
    long prev = -1;
    int rc = -1;
    *out = NULL;
    if (!c)
        goto oom;
    if (runner_open(&u.r, m, &fo, err, errlen) || nib_plan_build(&fp, m, &fo, err, errlen) ||
        nib_plan_build(&qp, m, po, err, errlen))
        goto out;
    uint32_t n_src = 0;
    for (uint32_t t = 0; t < fp.n_tensors; t++)
        n_src += fp.tensors[t].n_src;
    if (!(c->ws = calloc(n_src ? n_src : 1, sizeof *c->ws)))
        goto oom;
    const char *text = co->text ? co->text : nib_calib_default_text;
    size_t len = co->text ? co->text_len : strlen(nib_calib_default_text);
    /* The text's tokens in sequences of seq, each starting with BOS at
     * position 0 (the text's own BOS starts the first). */
    u.seq = v->h->hp.ctx_len < NIB_CALIB_SEQ ? v->h->hp.ctx_len : NIB_CALIB_SEQ;
    uint32_t cap = co->max_tokens ? co->max_tokens : NIB_CALIB_TOKENS;
    uint32_t *stream = malloc((len + 2) * sizeof *stream);
    if (!stream || !(ids = malloc(((size_t)cap + 1) * sizeof *ids))) {
        free(stream);
        goto oom;
    }
    int n = tok_encode_into(v, text, len, 1, stream, (uint32_t)len + 2);
    uint32_t got = n > 0 ? (uint32_t)n : 0, bos = got ? stream[0] : 0;
    int has_bos = got > 0 && v->h->hp.add_bos && stream[0] == v->h->hp.bos_id;
    for (uint32_t i = 0; i < got && u.n < cap; i++) {
        if (u.n % u.seq == 0 && u.n > 0 && has_bos) {
            ids[u.n++] = bos; /* the next sequence */
            if (u.n == cap)
                break;
        }
        ids[u.n++] = stream[i];
    }
    free(stream);
    if (u.n < 2) {
        snprintf(err, errlen, "calibration text gives fewer than 2 tokens");
        goto out;
    }
    c->n_tokens = u.n;
    c->threads = co->threads ? co->threads : 1;
    u.ids = ids;
    /* NIB_CALIB_SCALAR=1 (tests): the scalar kernels, which give the same
     * bits as every other ISA's */
    const char *sc = getenv("NIB_CALIB_SCALAR");
    u.qk = nib_exec_kernels(sc && *sc == '1' ? 0 : nib_cpu_isa());
    /* The embedding ops come first and write the residual stream. */
    const struct nib_op *emb = &v->ops[0];
    if (v->h->n_ops == 0 || emb->code != NIB_OP_EMBED) {
        snprintf(err, errlen, "calibration: the plan does not start with the embedding");
        goto out;
    }
    u.res_off = emb->dst;
    u.res_stride = emb->dst_stride;
    u.dim = emb->n;
    if (!(u.res = malloc((uint64_t)u.n * u.dim * sizeof *u.res)))
        goto oom;
    if (!(ins = calloc(v->h->n_ops, sizeof *ins)))
        goto oom;
    /* Segments: [0, first layer op), each layer, the rest (the head). */
    uint32_t n_seg = 0;
    if (!(seg = malloc((v->h->n_ops + 1) * sizeof *seg)))
        goto oom;
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        long l = op_layer(v, i, prev);
        if (i == 0 || l != prev)
            seg[n_seg++] = i;
        prev = l;
    }
    seg[n_seg] = v->h->n_ops;
    for (uint32_t sg = 0; sg < n_seg; sg++) {
        const uint32_t a = seg[sg], b = seg[sg + 1];
        uint32_t n_in = 0;
        for (uint32_t j = a; j < b; j++)
            if (v->ops[j].code == NIB_OP_MATMUL) {
                ins[n_in] = (struct input){j, v->ops[j].k, NULL};
                if (!(ins[n_in].x = malloc((uint64_t)u.n * v->ops[j].k * sizeof(float))))
                    goto oom;
                n_in++;
            }
        run_segment(&u, a, b, ins, co->threads);
        for (uint32_t q = 0; q < n_in; q++) {
            if (prepare(c, &fp, &qp, co, &ins[q], v->ops[ins[q].op].tensor, v->ops[0].tensor, err,
                        errlen))
                goto out;
            free(ins[q].x);
            ins[q].x = NULL;
        }
        progress(co->progress, sg + 1, n_seg, u.n);
    }
    *out = c;
    c = NULL;
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "calibration: out of memory");
out:
    if (ins)
        for (uint32_t i = 0; i < v->h->n_ops; i++) /* ins exists only with the blob */
            free(ins[i].x);
    free(ins);
    free(seg);
    free(u.res);
    free(ids);
    nib_plan_free(&fp);
    nib_plan_free(&qp);
    runner_close(&u.r);
    nib_calib_free(c);
    return rc;
}

int nib_calib_arg(struct nib_calib_args *ca, int which, const char *value, char *err, size_t errlen)
{
    char why[128];
    if (which == NIB_CALIB_ARG_METHOD) {
        if (nib_qmethod_parse(value, &ca->method, why, sizeof why))
            return nib_fail(err, errlen, "--method: %s", why);
    } else if (which == NIB_CALIB_ARG_FILE) {
        ca->path = value;
    } else if (nib_parse_u32(value, NIB_MAX_CTX, &ca->tokens) || ca->tokens < 2) {
        return nib_fail(err, errlen, "--calib-tokens wants 2..%u, not '%s'", NIB_MAX_CTX, value);
    }
    return 0;
}

int nib_calib_setup(const struct llama_model *m, struct plan_opts *po,
                    const struct nib_calib_args *ca, const struct nib_qspec *extra,
                    uint32_t n_extra, FILE *progress, struct nib_calib **out, char *err,
                    size_t errlen)
{
    const enum nib_qmethod method = ca->method;
    const char *path = ca->path;
    const uint32_t max_tokens = ca->tokens;
    *out = NULL;
    po->method = method;
    po->calib = NULL;
    if (method == NIB_QM_RTN || po->source)
        return 0;
    struct nib_plan qp;
    if (nib_plan_build(&qp, m, po, err, errlen))
        return -1;
    int quantized = 0;
    for (uint32_t t = 0; t < qp.n_tensors; t++)
        quantized |= qp.tensors[t].rec.dtype != NIB_DT_F32;
    nib_plan_free(&qp);
    if (!quantized && !n_extra)
        return 0;
    const uint8_t *text = NULL;
    size_t len = 0;
    if (path && nib_map_file(path, &text, &len, err, errlen))
        return -1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const char *nt = getenv("NIB_CALIB_THREADS"); /* tests: the result must not change */
    if (nt && atol(nt) > 0)
        cpus = atol(nt);
    struct nib_calib_opts co = {
        .method = method,
        .text = (const char *)text,
        .text_len = len,
        .max_tokens = max_tokens,
        .threads = cpus > 0 ? (uint32_t)(cpus < 16 ? cpus : 16) : 1,
        .progress = progress,
        .extra = extra,
        .n_extra = n_extra,
    };
    int rc = nib_calib_run(m, po, &co, out, err, errlen);
    if (path)
        nib_unmap_file(text, len);
    if (rc == 0)
        po->calib = *out;
    return rc;
}
