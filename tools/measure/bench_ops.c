#include "tools/measure/bench_ops.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "proto/private/sync.h"
#include "rt/refloop.h"
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

/* The kernels and scratch of a pass at pos feeding token, which it sets. */
static const struct nib_qkernels *pass_start(const struct nib_exec *e, uint32_t token, uint32_t pos,
                                             uint8_t **ws)
{
    const struct nib_blob_view *v = e->v;
    *ws = e->mem + v->h->wscratch_off;
    memcpy(e->mem + v->h->token_slot_off, &token, 4);
    memcpy(e->mem + v->h->pos_slot_off, &pos, 4);
    return e->qk ? e->qk : nib_qkernels_get(NIB_ISA_SCALAR);
}

/* One pass at pos, op by op, as nib_exec_tokens runs it on one worker. */
static void timed_pass(const struct nib_exec *e, uint32_t token, uint32_t pos,
                       const uint8_t *row_of, uint64_t *out)
{
    const struct nib_blob_view *v = e->v;
    uint8_t *ws;
    const struct nib_qkernels *qk = pass_start(e, token, pos, &ws);
    uint64_t t = nib_now_ns(), t0 = t;
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        nib_exec_op(qk, v, e->mem, ws, &v->ops[i], 1, pos, 0, 1);
        uint64_t now = nib_now_ns();
        out[row_of[i]] += now - t;
        t = now;
    }
    out[ROWS_MAX] = t - t0;
}

/* One pass at pos that runs every op twice in a row and times the second
 * run: the op with its bytes in the caches as far as they fit (the KV
 * rows and a matmul's weights up to the L3's size), so what is left is
 * its arithmetic. out[ROWS_MAX] sums the second runs. Running an op twice
 * leaves wrong values behind (a residual added twice), which the next
 * pass, recomputing everything from the token, overwrites. */
static void again_pass(const struct nib_exec *e, uint32_t token, uint32_t pos,
                       const uint8_t *row_of, uint64_t *out)
{
    const struct nib_blob_view *v = e->v;
    uint8_t *ws;
    const struct nib_qkernels *qk = pass_start(e, token, pos, &ws);
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        nib_exec_op(qk, v, e->mem, ws, &v->ops[i], 1, pos, 0, 1);
        uint64_t t = nib_now_ns();
        nib_exec_op(qk, v, e->mem, ws, &v->ops[i], 1, pos, 0, 1);
        uint64_t d = nib_now_ns() - t;
        out[row_of[i]] += d;
        out[ROWS_MAX] += d;
    }
}

/* One reference iteration at pos, op by op (the reads fold into *sink). */
static void timed_iteration(const struct nib_exec *e, uint32_t pos, const uint8_t *row_of,
                            uint64_t *out, uint64_t *sink)
{
    uint64_t t = nib_now_ns(), t0 = t;
    for (uint32_t i = 0; i < e->v->h->n_ops; i++) {
        nib_ref_op(e, i, pos, 0, 1, sink);
        uint64_t now = nib_now_ns();
        out[row_of[i]] += now - t;
        t = now;
    }
    out[ROWS_MAX] = t - t0;
}

int bench_ops(FILE *f, struct nib_exec *e, uint32_t token, uint32_t pos, uint32_t passes,
              uint32_t block, int json)
{
    const struct nib_blob_view *v = e->v;
    struct row rows[ROWS_MAX];
    uint8_t *row_of = malloc(v->h->n_ops);
    const uint64_t per = ROWS_MAX + 1; /* a sample: the rows, then the whole pass */
    uint64_t *nib = calloc((uint64_t)passes * per, sizeof *nib);
    uint64_t *ref = calloc((uint64_t)passes * per, sizeof *ref);
    uint64_t *again = calloc((uint64_t)passes * per, sizeof *again);
    uint64_t *tmp = malloc((uint64_t)passes * sizeof *tmp);
    if (!row_of || !nib || !ref || !again || !tmp) {
        free(row_of);
        free(nib);
        free(ref);
        free(again);
        free(tmp);
        return -1;
    }
    uint32_t n_rows = assign_rows(v, pos, row_of, rows);
    static uint64_t warm[ROWS_MAX + 1];
    uint64_t sink = 0;
    for (uint32_t i = 0; i < 4; i++) { /* caches, page tables */
        timed_pass(e, token, pos, row_of, warm);
        timed_iteration(e, pos, row_of, warm, &sink);
    }
    for (uint32_t got = 0; got < passes;) {
        uint32_t b = block < passes - got ? block : passes - got;
        for (uint32_t i = 0; i < b; i++)
            timed_pass(e, token, pos, row_of, nib + (uint64_t)(got + i) * per);
        for (uint32_t i = 0; i < b; i++)
            timed_iteration(e, pos, row_of, ref + (uint64_t)(got + i) * per, &sink);
        for (uint32_t i = 0; i < b; i++)
            again_pass(e, token, pos, row_of, again + (uint64_t)(got + i) * per);
        got += b;
    }
    /* The op-by-op pass is the executor's pass: its logits, bit for bit. */
    const uint32_t vocab = v->h->hp.vocab_size;
    float *mine = malloc((size_t)vocab * sizeof *mine);
    int same = 0;
    if (mine) {
        timed_pass(e, token, pos, row_of, warm);
        memcpy(mine, e->mem + v->h->logits_off, (size_t)vocab * sizeof *mine);
        const float *theirs = nib_exec_token(e, token, pos);
        same = theirs && memcmp(mine, theirs, (size_t)vocab * sizeof *mine) == 0;
        free(mine);
    }
    if (!json)
        fprintf(f,
                "per op at position %u, one worker, %u passes and %u reference iterations in "
                "blocks of %u (medians of each row's per-pass sum; the reads' fold %llx);\n"
                "again: each op run a second time at once, its bytes in the caches as far as "
                "they fit:\n"
                "  %-24s %4s %9s %10s %10s %7s %9s %9s %9s\n",
                pos, passes, passes, block, (unsigned long long)(sink & 0xf), "row", "ops", "MB",
                "nibble us", "ref us", "ratio", "nib GB/s", "ref GB/s", "again us");
    uint64_t total_bytes = 0;
    for (uint32_t r = 0; r <= n_rows; r++) {
        uint32_t c = r < n_rows ? r : ROWS_MAX; /* the last line: the whole pass */
        const char *name = r < n_rows ? rows[r].name : "pass";
        uint64_t bytes = r < n_rows ? rows[r].bytes : total_bytes;
        uint32_t ops = r < n_rows ? rows[r].ops : v->h->n_ops;
        total_bytes += r < n_rows ? rows[r].bytes : 0;
        double tn = column_median(nib, passes, c, tmp), tr = column_median(ref, passes, c, tmp),
               ta = column_median(again, passes, c, tmp);
        double ratio = tr > 0 ? tn / tr : 0;
        double gn = tn > 0 ? (double)bytes / tn : 0, gr = tr > 0 ? (double)bytes / tr : 0;
        if (json)
            fprintf(f,
                    "{\"source\": \"per-op\", \"pos\": %u, \"passes\": %u, \"row\": \"%s\", "
                    "\"ops\": %u, \"bytes\": %llu, \"nibble_us\": %.3f, \"reference_us\": %.3f, "
                    "\"ratio\": %.4f, \"again_us\": %.3f%s}\n",
                    pos, passes, name, ops, (unsigned long long)bytes, tn / 1e3, tr / 1e3, ratio,
                    ta / 1e3,
                    r < n_rows ? ""
                    : same     ? ", \"same_logits\": true"
                               : ", \"same_logits\": false");
        else
            fprintf(f, "  %-24s %4u %9.2f %10.1f %10.1f %7.3f %9.2f %9.2f %9.1f\n", name, ops,
                    (double)bytes / 1e6, tn / 1e3, tr / 1e3, ratio, gn, gr, ta / 1e3);
    }
    if (!json)
        fprintf(f, "  the op-by-op pass's logits %s a pass's of the executor\n",
                same ? "equal" : "DIFFER FROM");
    free(row_of);
    free(nib);
    free(ref);
    free(again);
    free(tmp);
    return same ? 0 : -2;
}
