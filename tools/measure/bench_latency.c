/* nib bench --latency: how steady is the time per token?
 *
 *   nib bench --latency MODEL.blob [--tokens N] [--workers N] [--prompt TEXT] [--json]
 *       runs the blob in this process the way the appliance does (blob
 *       copied into huge-page memory, one pinned worker per physical core,
 *       the same thread team), generating greedily until N tokens (default
 *       1000) in requests of --gen tokens each (default: to the end of the
 *       context), and times every generated token: sampling plus one
 *       forward pass. A token late in the context costs more than an
 *       early one (attention reads the whole KV cache so far), so it also
 *       reports the jitter: each token's latency over the median latency
 *       of the tokens at the same position. Beside the tokens it runs the
 *       reference loop (rt/refloop.h): the same bytes on the same team with
 *       the same shares and barriers, without the model, in blocks of
 *       --block tokens then --block iterations, across positions and at
 *       one fixed position (--pos), and reports the ratios
 *       (nibble p99/p50) / (reference p99/p50) and nibble p50 / reference p50;
 *   nib bench --latency --name NAME [--tokens N] [--block N] [--json]
 *       drives a running appliance over shared memory instead and reads the
 *       per-token histogram of its stats page (before and after); where the
 *       appliance serves measurements (docs/ring.md 6.3), each request of
 *       --block tokens is followed by a measurement of the same positions,
 *       and the reference passes' times go through a histogram of the same
 *       shape, so both sides are read alike.
 *
 * Reports tokens/s, p50/p90/p99/p99.9/max and the ratios p99/p50 and
 * p99.9/p50 (the appliance's goal: p99 <= 1.05 x p50). A benchmark: it
 * reports, it never fails on a number. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/sample.h"
#include "proto/private/sync.h"
#include "proto/stats.h"
#include "rt/team.h"
#include "rt/tokenizer.h"
#include "rt/topology.h"
#include "tools/measure/bench_noise.h"
#include "tools/measure/bench_ops.h"
#include "rt/prefetch_tune.h"
#include "tools/measure/bench_vsref.h"
#include "rt/refloop.h"
#include "tools/measure/measure.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"
#include "tools/host/nibhost.h"
#include "proto/shm_layout.h"
#include "tools/compiler/tok_load.h"

#define WARMUP 16 /* first generated tokens not counted: caches, page tables */

struct bench_opts {
    const char *blob, *name, *prompt;
    uint32_t tokens, workers, gen, block, pos;
    int json, ops;
};

static void usage(FILE *f)
{
    fprintf(
        f, "usage: nib bench --latency MODEL.blob [--tokens N] [--workers N] [--gen N] [--block N] "
           "[--pos N] [--prompt TEXT] [--ops] [--json]\n"
           "       nib bench --latency --name NAME [--tokens N] [--block N] [--prompt TEXT] "
           "[--json]\n"
           "  --tokens N   generated tokens to time (default 1000, at least 1)\n"
           "  --workers N  threads (default: one per physical core of this machine)\n"
           "  --gen N      generated tokens per request (default: to the end of the context)\n"
           "  --block N    tokens, then reference iterations, per block (default 64)\n"
           "  --pos N      the fixed position (default: half the context, at most 512)\n"
           "  --ops        instead: where a token's time goes, op by op, beside the reference\n"
           "               loop's time for each op's bytes (the team, at the fixed "
           "position)\n");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double exact_pct(const uint64_t *sorted, size_t n, double pct)
{
    size_t rank = (size_t)ceil(pct / 100.0 * (double)n);
    return (double)sorted[rank < 1 ? 0 : rank - 1];
}

/* Per-position jitter: every token's latency over the median latency of
 * the timed tokens at its position (positions with fewer than 3 samples
 * are left out). Fills *out with the p50/p99/p99.9/max of the ratios (x 1e3,
 * in the nib_latency fields) and returns how many tokens took part. */
static size_t position_jitter(const uint64_t *lat, const uint32_t *pos_of, size_t n, uint32_t ctx,
                              struct nib_latency *out)
{
    uint64_t *ratio = malloc(n * sizeof *ratio), *at = malloc(n * sizeof *at);
    size_t m = 0;
    if (!ratio || !at) {
        free(ratio);
        free(at);
        return 0;
    }
    for (uint32_t p = 0; p < ctx; p++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (pos_of[i] == p)
                at[k++] = lat[i];
        if (k < 3)
            continue;
        qsort(at, k, sizeof *at, cmp_u64);
        double med = (double)at[(k - 1) / 2];
        for (size_t i = 0; i < k; i++)
            ratio[m++] = (uint64_t)llround((double)at[i] / med * 1e6);
    }
    if (m) {
        qsort(ratio, m, sizeof *ratio, cmp_u64);
        *out = (struct nib_latency){.count = m,
                                    .p50 = exact_pct(ratio, m, 50) / 1e6,
                                    .p90 = exact_pct(ratio, m, 90) / 1e6,
                                    .p99 = exact_pct(ratio, m, 99) / 1e6,
                                    .p999 = exact_pct(ratio, m, 99.9) / 1e6,
                                    .max = (double)ratio[m - 1] / 1e6};
    }
    free(ratio);
    free(at);
    return m;
}

static void report(const struct bench_opts *o, const char *what, uint64_t tokens, double secs,
                   const struct nib_latency *l)
{
    double tps = secs > 0 ? (double)tokens / secs : 0;
    double r99 = l->p50 > 0 ? l->p99 / l->p50 : 0, r999 = l->p50 > 0 ? l->p999 / l->p50 : 0;
    if (o->json) {
        printf("{\"source\": \"%s\", \"tokens\": %llu, \"seconds\": %.3f, \"tokens_per_s\": %.2f, "
               "\"p50_us\": %.2f, \"p90_us\": %.2f, \"p99_us\": %.2f, \"p99.9_us\": %.2f, "
               "\"max_us\": %.2f, \"p99_over_p50\": %.4f, \"p99.9_over_p50\": %.4f}\n",
               what, (unsigned long long)tokens, secs, tps, l->p50 / 1e3, l->p90 / 1e3,
               l->p99 / 1e3, l->p999 / 1e3, l->max / 1e3, r99, r999);
        return;
    }
    printf("tokens: %llu timed in %.3f s: %.2f tokens/s\n", (unsigned long long)tokens, secs, tps);
    printf("per-token latency: p50 %.1f us, p90 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n",
           l->p50 / 1e3, l->p90 / 1e3, l->p99 / 1e3, l->p999 / 1e3, l->max / 1e3);
    printf("p99/p50 %.4f, p99.9/p50 %.4f (goal: p99/p50 <= 1.05)\n", r99, r999);
}

/* --- in-process -------------------------------------------------------------- */

static int bench_blob(const struct bench_opts *o)
{
    char err[512];
    const uint8_t *file;
    size_t size;
    if (nib_map_file(o->blob, &file, &size, err, sizeof err)) {
        fprintf(stderr, "nib bench: %s\n", err);
        return 1;
    }
    /* Like the appliance: an anonymous, 2 MiB-aligned, huge-page copy. */
    const size_t huge = 2u << 20;
    size_t map = (size + huge - 1) / huge * huge + huge;
    uint8_t *raw = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        fprintf(stderr, "nib bench: cannot map %zu bytes\n", map);
        nib_unmap_file(file, size);
        return 1;
    }
    uint8_t *blob = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(blob, map - huge, MADV_HUGEPAGE);
    memcpy(blob, file, size);
    nib_unmap_file(file, size);
    struct nib_blob_view v;
    if (nib_blob_open(&v, blob, size, 1, err, sizeof err)) {
        fprintf(stderr, "nib bench: %s: %s\n", o->blob, err);
        munmap(raw, map);
        return 1;
    }
    const struct nib_hparams *hp = &v.h->hp;
    if (v.h->model_kind == NIB_MODEL_VISION) {
        fprintf(stderr,
                "nib bench: %s is a vision model: --latency times a decoder's tokens (a vision "
                "blob's per-image latency: nib bench --model %s)\n",
                o->blob, o->blob);
        munmap(raw, map);
        return 2;
    }
    if (o->pos >= hp->ctx_len) {
        fprintf(stderr, "nib bench: --pos %u: the context holds positions 0..%u\n", o->pos,
                hp->ctx_len - 1);
        munmap(raw, map);
        return 2;
    }
    const struct nib_qkernels *qk = nib_exec_kernels(nib_cpu_isa()); /* as the appliance does */

    static struct nib_topo topo;
    uint32_t cpus[NIB_TEAM_MAX_WORKERS], n = 1;
    int pinned = nib_topo_read_sys(&topo, "/sys", err, sizeof err) == 0;
    if (pinned)
        n = nib_topo_workers(&topo, cpus, NULL, NIB_TEAM_MAX_WORKERS);
    if (o->workers) {
        if (pinned && o->workers > n) {
            fprintf(stderr, "nib bench: --workers %u: this machine has %u physical cores\n",
                    o->workers, n);
            munmap(raw, map);
            return 2;
        }
        n = o->workers;
    }
    uint64_t arena_size = (v.mem_size + huge - 1) / huge * huge;
    uint64_t team_size = ((nib_team_footprint(n) + 63) & ~63ull) + nib_exec_team_footprint(n, &v);
    uint8_t *arena = mmap(NULL, arena_size + team_size, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint32_t *ids = malloc((strlen(o->prompt) + 2) * sizeof *ids);
    uint64_t *lat = malloc((size_t)(o->tokens + WARMUP) * sizeof *lat);
    uint32_t *pos_of = malloc((size_t)(o->tokens + WARMUP) * sizeof *pos_of);
    pthread_t tids[NIB_TEAM_MAX_WORKERS];
    if (arena == MAP_FAILED || !ids || !lat || !pos_of) {
        fprintf(stderr, "nib bench: out of memory\n");
        return 1;
    }
    madvise(arena, arena_size, MADV_HUGEPAGE);
    memset(arena, 0, arena_size + team_size);
    struct nib_team *t = nib_team_new(arena + arena_size, n, 1000000000ull, 200000);
    struct nib_exec e = {.v = &v, .mem = arena, .qk = qk};
    uint32_t n_barriers =
        t ? nib_exec_set_team(&e, t, arena + arena_size + ((nib_team_footprint(n) + 63) & ~63ull))
          : 0;
    int rc = t ? nib_team_spawn(t, pinned ? cpus : NULL, tids) : -1;
    if (rc) {
        fprintf(stderr, "nib bench: cannot start %u workers\n", n);
        return 1;
    }
    int n_ids = tok_encode_into(&v, o->prompt, strlen(o->prompt), hp->add_bos ? 1 : 0, ids,
                                strlen(o->prompt) + 2);
    if (n_ids <= 0 || (uint32_t)n_ids >= hp->ctx_len) {
        fprintf(stderr, "nib bench: the prompt gives %d tokens; the context holds %u\n", n_ids,
                hp->ctx_len);
        nib_team_join(t, tids);
        return 2;
    }
    if (o->gen && (uint32_t)n_ids + o->gen > hp->ctx_len)
        nib_args_note("nib bench",
                      "--gen %u: the context holds %u more positions after the prompt; "
                      "generating %u per request",
                      o->gen, hp->ctx_len - (uint32_t)n_ids, hp->ctx_len - (uint32_t)n_ids);
    if (!o->json) {
        printf("nib bench --latency: %s: dim %u, %u layers, vocab %u, ctx %u\n", o->blob, hp->dim,
               hp->n_layers, hp->vocab_size, hp->ctx_len);
        printf("workers: %u%s", n, pinned ? " pinned to cpus " : " (not pinned)");
        for (uint32_t i = 0; pinned && i < n; i++)
            printf("%s%u", i ? "," : "", cpus[i]);
        printf("; %u barriers per token over %u ops; kernels %s\n", n_barriers, v.h->n_ops,
               nib_qkernels_label(qk));
    }
    /* The prefetch distance as the appliance takes it: NIB_PREFETCH (nib's
     * stand-in for the topology table's) when set, else measured here. */
    static struct nib_prefetch_tune tune;
    nib_prefetch_tune_init(&tune);
    const int tuned = !getenv("NIB_PREFETCH") &&
                      nib_prefetch_tune_run(&e, &tune, NIB_TUNE_ROUNDS, NIB_TUNE_BUDGET_NS) == 0;
    if (o->json) {
        printf("{\"source\": \"prefetch\", \"bytes\": %u, \"from\": \"%s\"", nib_prefetch_bytes,
               tuned ? "measured" : "NIB_PREFETCH");
        for (uint32_t i = 0; tuned && i < NIB_TUNE_CANDIDATES; i++)
            printf("%s{\"bytes\": %u, \"median_us\": %.3f, \"ratio\": %.4f}",
                   i ? ", " : ", \"candidates\": [", tune.bytes[i], (double)tune.median_ns[i] / 1e3,
                   tune.ratio[i]);
        printf("%s}\n", tuned ? "]" : "");
    } else if (tuned) {
        char line[256];
        nib_prefetch_tune_describe(&tune, line, sizeof line);
        printf("prefetch: %u bytes ahead, measured as the appliance does (median pass at each "
               "distance (ratio to the default's, paired by round): %s)\n",
               nib_prefetch_bytes, line);
    } else {
        printf("prefetch: %u bytes ahead (NIB_PREFETCH)\n", nib_prefetch_bytes);
    }
    static struct nib_ref ref; /* 16 KiB of per-worker slots */
    ref = (struct nib_ref){.e = &e};
    uint64_t *lat2 = malloc((size_t)(o->tokens + WARMUP) * sizeof *lat2);
    /* with a team, the fixed position's reference also runs free (no per-op barriers) */
    uint64_t *lat3 = n > 1 ? malloc((size_t)(o->tokens + WARMUP) * sizeof *lat3) : NULL;
    if (!lat2 || (n > 1 && !lat3)) {
        fprintf(stderr, "nib bench: out of memory\n");
        free(lat2);
        nib_team_join(t, tids);
        return 1;
    }
    struct vsref_run run = {.e = &e,
                            .ref = &ref,
                            .ids = ids,
                            .n_ids = (uint32_t)n_ids,
                            .tokens = o->tokens,
                            .warmup = WARMUP,
                            .block = o->block,
                            .gen = o->gen,
                            .workers = n,
                            .lat = lat,
                            .lat2 = lat2,
                            .lat3 = lat3,
                            .pos_of = pos_of};
    uint32_t fixed_pos = o->pos ? o->pos : hp->ctx_len / 2 < 512 ? hp->ctx_len / 2 : 512;
    if (fixed_pos < (uint32_t)n_ids)
        fixed_pos = (uint32_t)n_ids;
    if (o->ops) {
        /* the cache filled by the team, then the team op by op */
        vsref_prefill(&run, fixed_pos);
        rc = bench_ops(stdout, &e, nib_exec_argmax(&e), fixed_pos, o->tokens, o->block, o->json);
        nib_team_join(t, tids);
        if (rc)
            fprintf(stderr, "nib bench: %s\n",
                    rc == -1 ? "out of memory" : "the op-by-op pass's logits differ from a pass's");
        rc = rc ? 1 : 0;
        goto done;
    }
    /* Across positions: requests through the context, as the appliance serves them. */
    struct vsref_result across, fixed;
    uint64_t t_start = nib_now_ns();
    vsref_positions(&run, &across);
    double secs = (double)(nib_now_ns() - t_start) / 1e9;
    uint64_t *timed = lat + WARMUP;
    struct nib_latency jit = {0};
    size_t jn = position_jitter(timed, pos_of + WARMUP, o->tokens, hp->ctx_len, &jit);
    vsref_finish(&run, &across);
    /* At one position: the same bytes every time, so any spread is jitter. */
    vsref_fixed(&run, fixed_pos, &fixed);
    vsref_finish(&run, &fixed);
    uint64_t sleeps = nib_team_sleeps(t);
    nib_team_join(t, tids);
    /* tokens/s over the tokens' own time (the reference blocks between them excluded) */
    double token_secs = across.nibble.mean_ns * o->tokens / 1e9;
    if (!o->json) {
        char gen[64] = "to the end of the context";
        if (o->gen)
            snprintf(gen, sizeof gen, "up to %u tokens", o->gen);
        printf("requests: %d prompt tokens, then greedy, %s; run took %.2f s; "
               "barrier waits that slept (CPU taken by another process): %llu\n",
               n_ids, gen, secs, (unsigned long long)sleeps);
    }
    report(o, "in-process", o->tokens, token_secs, &across.nibble.l);
    if (o->json)
        printf("{\"source\": \"jitter\", \"tokens\": %zu, \"p99\": %.4f, \"p99.9\": %.4f, \"max\": "
               "%.4f}\n",
               jn, jit.p99, jit.p999, jit.max);
    else if (jn)
        printf("jitter (latency / median latency at the same position, %zu tokens at positions "
               "with >= 3 samples): p99 %.4f, p99.9 %.4f, max %.4f\n",
               jn, jit.p99, jit.p999, jit.max);
    vsref_report(stdout, &across, o->json);
    vsref_report(stdout, &fixed, o->json);
    const struct nib_latency l = across.nibble.l;
    /* The machine's own noise on the same CPUs, right after. */
    struct nib_noise nz;
    uint32_t ncpu[NIB_TEAM_MAX_WORKERS];
    for (uint32_t i = 0; i < n; i++)
        ncpu[i] = pinned ? cpus[i] : i;
    if (nib_noise_measure(ncpu, n, 2.0, (uint64_t)l.p50, &nz) == 0) {
        if (o->json)
            printf("{\"source\": \"machine-noise\", \"gaps_over_5us_per_s\": %llu, "
                   "\"gaps_over_20us_per_s\": %llu, \"gaps_over_100us_per_s\": %llu, "
                   "\"lost_pct\": %.3f, \"max_gap_us\": %.1f, \"floor_p99_over_p50\": %.4f, "
                   "\"floor_p99.9_over_p50\": %.4f}\n",
                   (unsigned long long)nz.gaps_5us, (unsigned long long)nz.gaps_20us,
                   (unsigned long long)nz.gaps_100us, nz.lost_pct, nz.max_gap_us, nz.floor_p99,
                   nz.floor_p999);
        else
            printf("machine noise (a spin loop on the same %u CPU(s), %.0f s, per CPU): gaps > 5 "
                   "us %llu/s, "
                   "> 20 us %llu/s, > 100 us %llu/s; %.2f%% of time lost; longest %.1f us\n"
                   "  floor it puts under a %.1f us pass: p99/p50 %.4f, p99.9/p50 %.4f\n",
                   n, nz.seconds, (unsigned long long)nz.gaps_5us, (unsigned long long)nz.gaps_20us,
                   (unsigned long long)nz.gaps_100us, nz.lost_pct, nz.max_gap_us, l.p50 / 1e3,
                   nz.floor_p99, nz.floor_p999);
    }
done:
    free(pos_of);
    free(ids);
    free(lat);
    free(lat2);
    free(lat3);
    munmap(arena, arena_size + team_size);
    munmap(raw, map);
    return rc;
}

/* --- a running appliance --------------------------------------------------------- */

static int bench_appliance(const struct bench_opts *o)
{
    struct nib_host *h;
    if (nib_host_attach(&h, o->name, 0) != NIB_HOST_OK) {
        fprintf(stderr, "nib bench: %s\n", nib_host_error(h));
        nib_host_detach(h);
        return 1;
    }
    static struct nib_stats before, after;
    static uint32_t ref_hist[NIB_TOKEN_HIST_BUCKETS];
    uint64_t ref_max = 0, ref_count = 0, ref_sum = 0;
    uint32_t pos_lo = UINT32_MAX, pos_hi = 0;
    /* Blocks of --block tokens, each followed by a measurement of the
     * same positions: the appliance runs the reference loop between
     * requests, and both sides land in histograms of the same shape. */
    const int measure = (nib_host_measures(h) != 0);
    memcpy(&before, nib_host_stats(h), sizeof before);
    uint64_t generated = 0, t0 = nib_now_ns();
    uint32_t requests = 0;
    while (generated < o->tokens) {
        struct nib_gen_params p = {.max_tokens = measure ? o->block + 1 : 256, .busy_wait_ms = -1};
        struct nib_req_handle r;
        struct nib_progress pr;
        int rc = nib_host_submit(h, o->prompt, strlen(o->prompt), &p, &r);
        if (rc == NIB_HOST_OK)
            rc = nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, -1, &pr);
        if (rc != NIB_HOST_OK) {
            fprintf(stderr, "nib bench: %s\n", nib_host_error(h));
            nib_host_detach(h);
            return 1;
        }
        generated += pr.n_tokens - pr.n_prompt;
        requests++;
        nib_host_release(h, &r);
        if (pr.n_tokens <= pr.n_prompt)
            break; /* the model ends at once: nothing more to time */
        /* decode passes ran at n_prompt .. n_tokens - 2 (the first token
         * comes from the prompt's pass, the last is not fed back) */
        uint32_t passes = pr.n_tokens - pr.n_prompt - 1, first = pr.n_prompt;
        if (!measure || passes == 0)
            continue;
        rc = nib_host_submit_measure(h, first, passes, &r);
        if (rc == NIB_HOST_OK)
            rc = nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, -1, &pr);
        if (rc != NIB_HOST_OK || pr.status != NIB_ST_OK) {
            fprintf(stderr, "nib bench: measurement: %s %s\n",
                    rc != NIB_HOST_OK ? nib_host_error(h) : nib_status_name(pr.status),
                    rc != NIB_HOST_OK ? "" : pr.error);
            nib_host_detach(h);
            return 1;
        }
        for (uint32_t i = 0; i < pr.n_tokens && i < passes; i++) {
            nib_hist_add(&nib_token_hist_shape, ref_hist, pr.tokens[i]);
            ref_max = pr.tokens[i] > ref_max ? pr.tokens[i] : ref_max;
            ref_sum += pr.tokens[i];
            ref_count++;
        }
        nib_host_release(h, &r);
        pos_lo = first < pos_lo ? first : pos_lo;
        pos_hi = first + passes - 1 > pos_hi ? first + passes - 1 : pos_hi;
    }
    double secs = (double)(nib_now_ns() - t0) / 1e9;
    memcpy(&after, nib_host_stats(h), sizeof after);
    nib_host_detach(h);
    static uint32_t delta[NIB_TOKEN_HIST_BUCKETS];
    for (uint32_t b = 0; b < NIB_TOKEN_HIST_BUCKETS; b++)
        delta[b] = after.token_hist[b] - before.token_hist[b];
    struct nib_latency l;
    nib_hist_summary(&nib_token_hist_shape, delta, after.token_pass_ns_max, &l);
    l.max = nib_hist_percentile(&nib_token_hist_shape, delta, 100, after.token_pass_ns_max);
    if (!o->json)
        printf("nib bench --latency: appliance '%s': %u requests, %llu forward passes timed by "
               "the appliance (%u workers)\n",
               o->name ? o->name : "nib", requests, (unsigned long long)l.count, after.n_workers);
    report(o, "appliance", generated, secs, &l);
    if (!measure) {
        printf("%s", o->json ? "" : "the appliance does not serve measurements: no reference\n");
        return 0;
    }
    /* the reference side exactly as the token side: through the histogram */
    struct vsref_result vr = {.mode = "appliance",
                              .pos_lo = pos_lo,
                              .pos_hi = pos_hi,
                              .block = o->block,
                              .workers = after.n_workers};
    vr.nibble.l = l;
    nib_hist_summary(&nib_token_hist_shape, ref_hist, ref_max, &vr.reference.l);
    vr.reference.l.max = (double)ref_max;
    vr.reference.l.count = ref_count;
    vr.nibble.mean_ns = 0; /* unknown: the stats page keeps no sum of pass times */
    vr.reference.mean_ns = ref_count ? (double)ref_sum / (double)ref_count : 0;
    vsref_report(stdout, &vr, o->json);
    return 0;
}

enum {
    O_LATENCY = NIB_ARGS_OPT,
    O_JSON,
    O_NAME,
    O_PROMPT,
    O_TOKENS,
    O_WORKERS,
    O_GEN,
    O_BLOCK,
    O_POS,
    O_OPS
};

int nib_bench_latency_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"--latency", O_LATENCY, 0},
        {"--json", O_JSON, 0},
        {"--name", O_NAME, 1},
        {"--prompt", O_PROMPT, 1},
        {"--tokens", O_TOKENS, 1},
        {"--workers", O_WORKERS, 1},
        {"--gen", O_GEN, 1},
        {"--block", O_BLOCK, 1},
        {"--pos", O_POS, 1},
        {"--ops", O_OPS, 0},
        {NULL, 0, 0},
    };
    struct bench_opts o = {.prompt = "Once upon a time", .tokens = 1000, .block = 64};
    int latency = 0;
    struct nib_args a;
    nib_args_init(&a, "nib bench", argc, argv, opts, usage, &o.blob);
    int opt;
    while ((opt = nib_args_next(&a)) > NIB_ARGS_END) {
        if (opt == O_LATENCY)
            latency = 1;
        else if (opt == O_JSON)
            o.json = 1;
        else if (opt == O_OPS)
            o.ops = 1;
        else if (opt == O_NAME)
            o.name = a.value;
        else if (opt == O_PROMPT)
            o.prompt = a.value;
        else if (nib_args_u32(&a, 1, opt == O_WORKERS ? NIB_TEAM_MAX_WORKERS : 100000000u,
                              opt == O_TOKENS  ? &o.tokens
                              : opt == O_GEN   ? &o.gen
                              : opt == O_BLOCK ? &o.block
                              : opt == O_POS   ? &o.pos
                                               : &o.workers))
            return 2;
    }
    if (opt == NIB_ARGS_EXIT)
        return a.status;
    if (!latency)
        return nib_args_fail(&a, "only --latency is available here");
    if (!o.blob == !o.name) {
        fprintf(stderr, "nib bench: give a MODEL.blob or --name NAME (one of them)\n");
        return nib_args_missing(&a);
    }
    if (o.name && o.ops)
        return nib_args_fail(&a, "--ops runs a blob in this process; it has no form for an "
                                 "appliance (--name)");
    if (o.name && (o.workers || o.gen || o.pos))
        nib_args_note(a.cmd, "--workers, --gen and --pos are ignored with --name: the appliance "
                             "has its own");
    if (!o.prompt[0]) {
        fprintf(stderr, "nib bench: --prompt must not be empty\n");
        return 2;
    }
    return o.blob ? bench_blob(&o) : bench_appliance(&o);
}
