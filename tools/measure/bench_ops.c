#include "tools/measure/bench_ops.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "proto/private/sync.h"
#include "rt/refloop.h"
#include "rt/team.h"
#include "tools/measure/bench_vsref.h"

#define ROWS_MAX 32

struct row {
    char name[NIB_NAME_MAX];
    uint32_t ops;
    uint64_t bytes;
};

/* A matmul's tensor name without its "blk.N." prefix; an op's name otherwise. */
static void row_name(const struct nib_blob_view *v, const struct nib_op *op, char *out)
{
    const char *s = nib_op_name(op->code);
    if (op->code == NIB_OP_MATMUL && op->tensor != UINT32_MAX) {
        s = v->tensors[op->tensor].name;
        if (strncmp(s, "blk.", 4) == 0 && strchr(s + 4, '.'))
            s = strchr(s + 4, '.') + 1;
    }
    snprintf(out, NIB_NAME_MAX, "%s", s);
}

/* Each op's row; the rows' names, op counts and reference bytes. */
static uint32_t assign_rows(const struct nib_blob_view *v, uint32_t pos, uint8_t *row_of,
                            struct row *rows)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        char name[NIB_NAME_MAX];
        row_name(v, &v->ops[i], name);
        uint32_t r = 0;
        while (r < n && strcmp(rows[r].name, name))
            r++;
        if (r == n && n == ROWS_MAX) {
            r = ROWS_MAX - 1; /* full: the last row ("other") takes the rest */
        } else if (r == n) {
            if (n == ROWS_MAX - 1)
                snprintf(name, sizeof name, "other");
            rows[n] = (struct row){{0}, 0, 0};
            memcpy(rows[n].name, name, sizeof name);
            n++;
        }
        struct nib_ref_span s[NIB_REF_SPANS_MAX];
        int k = nib_ref_spans(v, &v->ops[i], pos, 0, 1, s);
        for (int j = 0; j < k; j++)
            rows[r].bytes += s[j].len * s[j].count;
        rows[r].ops++;
        row_of[i] = (uint8_t)r;
    }
    return n;
}

/* The median of column r of samples[passes][ROWS_MAX + 1] (sorts tmp). */
static double column_median(const uint64_t *samples, uint32_t passes, uint32_t r, uint64_t *tmp)
{
    for (uint32_t p = 0; p < passes; p++)
        tmp[p] = samples[(uint64_t)p * (ROWS_MAX + 1) + r];
    struct vsref_side side;
    vsref_summarize(tmp, passes, &side);
    return side.l.p50;
}

/* The kernels of a pass at pos feeding token, which it sets. */
static const struct nib_qkernels *pass_start(const struct nib_exec *e, uint32_t token, uint32_t pos)
{
    const struct nib_blob_view *v = e->v;
    memcpy(e->mem + v->h->token_slot_off, &token, 4);
    memcpy(e->mem + v->h->pos_slot_off, &pos, 4);
    return e->qk ? e->qk : nib_qkernels_get(NIB_ISA_SCALAR);
}

/* One timed pass (or reference iteration) as every worker runs it: each
 * worker w stamps arrive[w][i] when its share of op i - 1 is done (before
 * the barrier op i may have) and start[w][i] when it begins op i's share;
 * arrive[w][n_ops] ends its last share. n x (n_ops + 1) stamps each. */
struct timed {
    const struct nib_exec *e;
    const struct nib_qkernels *qk; /* NULL: the reference loop's reads */
    uint32_t pos, n;
    uint64_t *arrive, *start, *sink;
};

static void timed_share(uint32_t w, void *arg)
{
    const struct timed *p = arg;
    const struct nib_exec *e = p->e;
    const struct nib_blob_view *v = e->v;
    const uint32_t n_ops = v->h->n_ops;
    uint64_t *arrive = p->arrive + (uint64_t)w * (n_ops + 1);
    uint64_t *start = p->start + (uint64_t)w * (n_ops + 1);
    uint8_t *ws = nib_exec_worker_scratch(e, w);
    uint64_t sink = p->sink[w];
    for (uint32_t i = 0; i < n_ops; i++) {
        arrive[i] = start[i] = nib_now_ns();
        if (p->n > 1 && e->barrier_before[i]) {
            nib_team_barrier(e->team, w);
            start[i] = nib_now_ns();
        }
        if (p->qk)
            nib_exec_op(p->qk, v, e->mem, ws, &v->ops[i], 1, p->pos, w, p->n);
        else
            nib_ref_op(e, i, p->pos, w, p->n, &sink);
    }
    arrive[n_ops] = nib_now_ns();
    p->sink[w] = sink;
}

/* Runs p on the team (or this thread), then adds to out[row] each op's
 * time on worker 0, from the start of its share to the start of the next
 * op's (so it includes waiting for the slowest worker at the barrier
 * between), and to wait[row] and wait[ROWS_MAX] the mean over workers of
 * that wait; sets out[ROWS_MAX] to the whole pass. */
static void timed_run(const struct timed *p, const uint8_t *row_of, uint64_t *out, uint64_t *wait)
{
    const struct nib_exec *e = p->e;
    const uint32_t n_ops = e->v->h->n_ops, n = p->n;
    const uint64_t t0 = nib_now_ns();
    if (n > 1)
        nib_team_run(e->team, timed_share, (void *)p);
    else
        timed_share(0, (void *)p);
    const uint64_t t1 = nib_now_ns(); /* every worker done: the pass's end */
    for (uint32_t i = 0; i < n_ops; i++) {
        const uint64_t next = i + 1 < n_ops ? p->start[i + 1] : t1;
        out[row_of[i]] += next - p->start[i];
        if (n == 1) /* no barrier, not even the pass's last */
            continue;
        uint64_t idle = 0;
        for (uint32_t w = 0; w < n; w++) {
            const uint64_t *arrive = p->arrive + (uint64_t)w * (n_ops + 1);
            const uint64_t *start = p->start + (uint64_t)w * (n_ops + 1);
            idle += (i + 1 < n_ops ? start[i + 1] : t1) - arrive[i + 1];
        }
        wait[row_of[i]] += idle / n;
        wait[ROWS_MAX] += idle / n;
    }
    out[ROWS_MAX] = t1 - t0;
}

/* One pass at pos feeding token, op by op, as nib_exec_tokens runs it. */
static void timed_pass(struct timed *p, uint32_t token, const uint8_t *row_of, uint64_t *out,
                       uint64_t *wait)
{
    p->qk = pass_start(p->e, token, p->pos);
    timed_run(p, row_of, out, wait);
}

/* One reference iteration at pos, op by op (the reads fold into p->sink). */
static void timed_iteration(struct timed *p, const uint8_t *row_of, uint64_t *out, uint64_t *wait)
{
    p->qk = NULL;
    timed_run(p, row_of, out, wait);
}

/* One pass at pos on this thread alone that runs every op twice in a row
 * and times the second run: the op with its bytes in the caches as far as
 * they fit (the KV rows and a matmul's weights up to the L3's size), so
 * what is left is its arithmetic. out[ROWS_MAX] sums the second runs.
 * Running an op twice leaves wrong values behind (a residual added twice),
 * which the next pass, recomputing everything from the token, overwrites. */
static void again_pass(const struct nib_exec *e, uint32_t token, uint32_t pos,
                       const uint8_t *row_of, uint64_t *out)
{
    const struct nib_blob_view *v = e->v;
    uint8_t *ws = nib_exec_worker_scratch(e, 0);
    const struct nib_qkernels *qk = pass_start(e, token, pos);
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        nib_exec_op(qk, v, e->mem, ws, &v->ops[i], 1, pos, 0, 1);
        uint64_t t = nib_now_ns();
        nib_exec_op(qk, v, e->mem, ws, &v->ops[i], 1, pos, 0, 1);
        uint64_t d = nib_now_ns() - t;
        out[row_of[i]] += d;
        out[ROWS_MAX] += d;
    }
}

int bench_ops(FILE *f, struct nib_exec *e, uint32_t token, uint32_t pos, uint32_t passes,
              uint32_t block, int json)
{
    const struct nib_blob_view *v = e->v;
    const uint32_t n = e->team ? nib_team_workers(e->team) : 1;
    const uint64_t per = ROWS_MAX + 1; /* a sample: the rows, then the whole pass */
    const uint64_t samples = (uint64_t)passes * per, stamps = (uint64_t)n * (v->h->n_ops + 1);
    struct row rows[ROWS_MAX];
    /* nibble, reference, again; nibble's and the reference's waits; the
     * median's scratch; the stamps and the workers' folds */
    uint64_t *mem = calloc(5 * samples + passes + 2 * stamps + n, sizeof *mem);
    uint8_t *row_of = malloc(v->h->n_ops);
    if (!mem || !row_of) {
        free(mem);
        free(row_of);
        return -1;
    }
    uint64_t *nib = mem, *ref = nib + samples, *again = ref + samples, *nib_wait = again + samples,
             *ref_wait = nib_wait + samples, *tmp = ref_wait + samples;
    struct timed p = {.e = e, .pos = pos, .n = n, .arrive = tmp + passes};
    p.start = p.arrive + stamps;
    p.sink = p.start + stamps;
    uint32_t n_rows = assign_rows(v, pos, row_of, rows);
    static uint64_t warm[ROWS_MAX + 1], warm_wait[ROWS_MAX + 1];
    for (uint32_t i = 0; i < 4; i++) { /* caches, page tables */
        timed_pass(&p, token, row_of, warm, warm_wait);
        timed_iteration(&p, row_of, warm, warm_wait);
    }
    for (uint32_t got = 0; got < passes;) {
        uint32_t b = block < passes - got ? block : passes - got;
        for (uint32_t i = 0; i < b; i++)
            timed_pass(&p, token, row_of, nib + (uint64_t)(got + i) * per,
                       nib_wait + (uint64_t)(got + i) * per);
        for (uint32_t i = 0; i < b; i++)
            timed_iteration(&p, row_of, ref + (uint64_t)(got + i) * per,
                            ref_wait + (uint64_t)(got + i) * per);
        for (uint32_t i = 0; n == 1 && i < b; i++)
            again_pass(e, token, pos, row_of, again + (uint64_t)(got + i) * per);
        got += b;
    }
    uint64_t sink = 0;
    for (uint32_t w = 0; w < n; w++)
        sink += p.sink[w];
    /* The op-by-op pass is the executor's pass: its logits, bit for bit. */
    const uint32_t vocab = v->h->hp.vocab_size;
    float *mine = malloc((size_t)vocab * sizeof *mine);
    int same = 0;
    if (mine) {
        timed_pass(&p, token, row_of, warm, warm_wait);
        memcpy(mine, e->mem + v->h->logits_off, (size_t)vocab * sizeof *mine);
        const float *theirs = nib_exec_token(e, token, pos);
        same = theirs && memcmp(mine, theirs, (size_t)vocab * sizeof *mine) == 0;
        free(mine);
    }
    if (!json)
        fprintf(f,
                "per op at position %u, %u worker%s, %u passes and %u reference iterations in "
                "blocks of %u (medians of each row's per-pass sum; the reads' fold %llx);\n"
                "%s:\n"
                "  %-24s %4s %9s %10s %10s %7s %9s %9s %9s%s\n",
                pos, n, n > 1 ? "s" : "", passes, passes, block, (unsigned long long)(sink & 0xf),
                n > 1 ? "an op's time runs from its start on worker 0 to the next op's, waits at "
                        "the barrier between included; wait: the mean time a worker spends "
                        "there"
                      : "again: each op run a second time at once, its bytes in the caches as "
                        "far as they fit",
                "row", "ops", "MB", "nibble us", "ref us", "ratio", "nib GB/s", "ref GB/s",
                n > 1 ? "nib wait" : "again us", n > 1 ? "  ref wait" : "");
    uint64_t total_bytes = 0;
    for (uint32_t r = 0; r <= n_rows; r++) {
        uint32_t c = r < n_rows ? r : ROWS_MAX; /* the last line: the whole pass */
        const char *name = r < n_rows ? rows[r].name : "pass";
        uint64_t bytes = r < n_rows ? rows[r].bytes : total_bytes;
        uint32_t ops = r < n_rows ? rows[r].ops : v->h->n_ops;
        total_bytes += r < n_rows ? rows[r].bytes : 0;
        double tn = column_median(nib, passes, c, tmp), tr = column_median(ref, passes, c, tmp),
               ta = column_median(again, passes, c, tmp);
        double wn = column_median(nib_wait, passes, c, tmp),
               wr = column_median(ref_wait, passes, c, tmp);
        double ratio = tr > 0 ? tn / tr : 0;
        double gn = tn > 0 ? (double)bytes / tn : 0, gr = tr > 0 ? (double)bytes / tr : 0;
        char extra[64] = "";
        if (n == 1)
            snprintf(extra, sizeof extra, ", \"again_us\": %.3f", ta / 1e3);
        if (json)
            fprintf(f,
                    "{\"source\": \"per-op\", \"pos\": %u, \"passes\": %u, \"workers\": %u, "
                    "\"row\": \"%s\", \"ops\": %u, \"bytes\": %llu, \"nibble_us\": %.3f, "
                    "\"reference_us\": %.3f, \"ratio\": %.4f, \"nibble_wait_us\": %.3f, "
                    "\"reference_wait_us\": %.3f%s%s}\n",
                    pos, passes, n, name, ops, (unsigned long long)bytes, tn / 1e3, tr / 1e3, ratio,
                    wn / 1e3, wr / 1e3, extra,
                    r < n_rows ? ""
                    : same     ? ", \"same_logits\": true"
                               : ", \"same_logits\": false");
        else if (n > 1)
            fprintf(f, "  %-24s %4u %9.2f %10.1f %10.1f %7.3f %9.2f %9.2f %9.1f %9.1f\n", name, ops,
                    (double)bytes / 1e6, tn / 1e3, tr / 1e3, ratio, gn, gr, wn / 1e3, wr / 1e3);
        else
            fprintf(f, "  %-24s %4u %9.2f %10.1f %10.1f %7.3f %9.2f %9.2f %9.1f\n", name, ops,
                    (double)bytes / 1e6, tn / 1e3, tr / 1e3, ratio, gn, gr, ta / 1e3);
    }
    if (!json)
        fprintf(f, "  the op-by-op pass's logits %s a pass's of the executor\n",
                same ? "equal" : "DIFFER FROM");
    free(row_of);
    free(mem);
    return same ? 0 : -2;
}
