#include "tools/measure/bench_vsref.h"

#include <math.h>
#include <stdlib.h>

#include "proto/private/sync.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The nearest-rank percentile of sorted[0..n). */
static double rank_pct(const uint64_t *sorted, uint64_t n, double pct)
{
    uint64_t rank = (uint64_t)ceil(pct / 100.0 * (double)n);
    return (double)sorted[rank < 1 ? 0 : rank - 1];
}

void vsref_summarize(uint64_t *ns, uint64_t n, struct vsref_side *s)
{
    *s = (struct vsref_side){{0}, 0};
    if (!n)
        return;
    qsort(ns, n, sizeof *ns, cmp_u64);
    double sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += (double)ns[i];
    s->mean_ns = sum / (double)n;
    s->l = (struct nib_latency){.count = n,
                                .p50 = rank_pct(ns, n, 50),
                                .p90 = rank_pct(ns, n, 90),
                                .p99 = rank_pct(ns, n, 99),
                                .p999 = rank_pct(ns, n, 99.9),
                                .max = (double)ns[n - 1]};
}

static double tail(const struct vsref_side *s)
{
    return s->l.p50 > 0 ? s->l.p99 / s->l.p50 : 0;
}

double vsref_tail_ratio(const struct vsref_result *r)
{
    double ref = tail(&r->reference);
    return ref > 0 ? tail(&r->nibble) / ref : 0;
}

double vsref_p50_ratio(const struct vsref_result *r)
{
    return r->reference.l.p50 > 0 ? r->nibble.l.p50 / r->reference.l.p50 : 0;
}

double vsref_barrier_ratio(const struct vsref_result *r)
{
    return r->free_running.l.p50 > 0 ? r->reference.l.p50 / r->free_running.l.p50 : 0;
}

static void side_json(FILE *f, const char *name, const struct vsref_side *s)
{
    fprintf(f,
            "\"%s\": {\"count\": %llu, \"p50_us\": %.3f, \"p90_us\": %.3f, \"p99_us\": %.3f, "
            "\"p99.9_us\": %.3f, \"max_us\": %.3f, \"mean_us\": %.3f, \"p99_over_p50\": %.6f}",
            name, (unsigned long long)s->l.count, s->l.p50 / 1e3, s->l.p90 / 1e3, s->l.p99 / 1e3,
            s->l.p999 / 1e3, s->l.max / 1e3, s->mean_ns / 1e3, tail(s));
}

static void side_text(FILE *f, const char *name, const struct vsref_side *s)
{
    fprintf(f, "  %-9s p50 %9.1f  p90 %9.1f  p99 %9.1f  p99.9 %9.1f  max %9.1f us; p99/p50 %.4f\n",
            name, s->l.p50 / 1e3, s->l.p90 / 1e3, s->l.p99 / 1e3, s->l.p999 / 1e3, s->l.max / 1e3,
            tail(s));
}

void vsref_report(FILE *f, const struct vsref_result *r, int json)
{
    if (json) {
        fprintf(f,
                "{\"source\": \"vs-reference\", \"mode\": \"%s\", \"pos_first\": %u, "
                "\"pos_last\": %u, \"block\": %u, \"workers\": %u, ",
                r->mode, r->pos_lo, r->pos_hi, r->block, r->workers);
        if (r->bytes) /* one figure only where every iteration reads the same */
            fprintf(f, "\"bytes_per_iteration\": %llu, ", (unsigned long long)r->bytes);
        side_json(f, "nibble", &r->nibble);
        fprintf(f, ", ");
        side_json(f, "reference", &r->reference);
        if (r->free_running.l.count) {
            fprintf(f, ", ");
            side_json(f, "reference_free", &r->free_running);
            fprintf(f, ", \"barrier_ratio\": %.6f", vsref_barrier_ratio(r));
        }
        fprintf(f, ", \"tail_ratio\": %.6f, \"p50_ratio\": %.6f}\n", vsref_tail_ratio(r),
                vsref_p50_ratio(r));
        return;
    }
    if (r->pos_lo == r->pos_hi)
        fprintf(f, "at position %u", r->pos_lo);
    else
        fprintf(f, "across positions %u..%u", r->pos_lo, r->pos_hi);
    fprintf(f, ", blocks of %u tokens then %u reference iterations, %llu of each timed", r->block,
            r->block, (unsigned long long)r->nibble.l.count);
    if (r->bytes)
        fprintf(f, "; %.2f MB per iteration: nibble %.2f GB/s, reference %.2f GB/s at p50",
                (double)r->bytes / 1e6,
                r->nibble.l.p50 > 0 ? (double)r->bytes / r->nibble.l.p50 : 0,
                r->reference.l.p50 > 0 ? (double)r->bytes / r->reference.l.p50 : 0);
    fprintf(f, ":\n");
    side_text(f, "nibble", &r->nibble);
    side_text(f, "reference", &r->reference);
    if (r->free_running.l.count)
        side_text(f, "ref free", &r->free_running);
    fprintf(f,
            "  nibble p99/p50 / reference p99/p50 = %.4f (goal <= 1.05); "
            "nibble p50 / reference p50 = %.4f\n",
            vsref_tail_ratio(r), vsref_p50_ratio(r));
    if (r->free_running.l.count)
        fprintf(f,
                "  reference p50 / reference without per-op barriers (ref free) p50 = %.4f "
                "(what the barriers cost a pass of reads alone)\n",
                vsref_barrier_ratio(r));
}

/* One timed token at pos: the greedy choice, then a forward pass. */
static uint64_t timed_token(struct nib_exec *e, uint32_t pos)
{
    uint64_t t0 = nib_now_ns();
    uint32_t next = nib_exec_argmax(e);
    nib_exec_token(e, next, pos);
    return nib_now_ns() - t0;
}

static uint64_t timed_iteration(struct nib_ref *r, uint32_t pos, uint32_t free_running)
{
    r->free_running = free_running;
    uint64_t t0 = nib_now_ns();
    nib_ref_iteration(r, pos);
    return nib_now_ns() - t0;
}

void vsref_prefill(const struct vsref_run *run, uint32_t upto)
{
    const struct nib_blob_view *v = run->e->v;
    uint32_t buf[64], pos = 0;
    while (pos < upto) {
        uint32_t m = upto - pos < v->h->max_batch ? upto - pos : v->h->max_batch;
        m = m < 64 ? m : 64;
        for (uint32_t i = 0; i < m; i++)
            buf[i] = run->ids[(pos + i) % run->n_ids];
        nib_exec_tokens(run->e, buf, m, pos);
        pos += m;
    }
}

void vsref_positions(const struct vsref_run *run, struct vsref_result *out)
{
    const uint32_t ctx = run->e->v->h->hp.ctx_len, want = run->tokens + run->warmup;
    uint32_t got = 0, lo = UINT32_MAX, hi = 0;
    while (got < want) {
        vsref_prefill(run, run->n_ids);
        uint32_t pos = run->n_ids;
        uint32_t end = run->gen && pos + run->gen < ctx ? pos + run->gen : ctx;
        while (got < want && pos < end) {
            uint32_t b = run->block, start = pos;
            b = b < end - pos ? b : end - pos;
            b = b < want - got ? b : want - got;
            for (uint32_t i = 0; i < b; i++) {
                run->pos_of[got + i] = pos;
                run->lat[got + i] = timed_token(run->e, pos++);
            }
            for (uint32_t i = 0; i < b; i++)
                run->lat2[got + i] = timed_iteration(run->ref, start + i, 0);
            if (got + b > run->warmup) {
                uint32_t first = got >= run->warmup ? start : start + (run->warmup - got);
                lo = first < lo ? first : lo;
                hi = pos - 1 > hi ? pos - 1 : hi;
            }
            got += b;
        }
    }
    *out = (struct vsref_result){.mode = "positions",
                                 .pos_lo = lo,
                                 .pos_hi = hi,
                                 .block = run->block,
                                 .workers = run->workers};
}

void vsref_fixed(const struct vsref_run *run, uint32_t pos, struct vsref_result *out)
{
    const uint32_t want = run->tokens + run->warmup;
    vsref_prefill(run, pos);
    for (uint32_t got = 0; got < want;) {
        uint32_t b = run->block < want - got ? run->block : want - got;
        for (uint32_t i = 0; i < b; i++) {
            run->pos_of[got + i] = pos;
            run->lat[got + i] = timed_token(run->e, pos);
        }
        for (uint32_t i = 0; i < b; i++)
            run->lat2[got + i] = timed_iteration(run->ref, pos, 0);
        for (uint32_t i = 0; run->lat3 && i < b; i++)
            run->lat3[got + i] = timed_iteration(run->ref, pos, 1);
        got += b;
    }
    struct nib_ref_bytes b;
    nib_ref_bytes(run->e->v, pos, run->workers, &b);
    *out = (struct vsref_result){.mode = "fixed",
                                 .pos_lo = pos,
                                 .pos_hi = pos,
                                 .block = run->block,
                                 .workers = run->workers,
                                 .bytes = b.weights + b.kv};
    if (run->lat3)
        vsref_summarize(run->lat3 + run->warmup, run->tokens, &out->free_running);
}

void vsref_finish(const struct vsref_run *run, struct vsref_result *out)
{
    vsref_summarize(run->lat + run->warmup, run->tokens, &out->nibble);
    vsref_summarize(run->lat2 + run->warmup, run->tokens, &out->reference);
}
