/* nib bench --latency against the reference loop (rt/refloop.h): blocks of
 * real tokens and blocks of reference iterations, interleaved on the same
 * team so both see the same machine at the same times, and the report that
 * sets one against the other. */
#ifndef NIB_BENCH_VSREF_H
#define NIB_BENCH_VSREF_H

#include <stdint.h>
#include <stdio.h>

#include "proto/stats.h"
#include "rt/exec.h"
#include "rt/refloop.h"

/* One comparison: the same count of tokens and of iterations. */
struct vsref_side {
    struct nib_latency l; /* ns */
    double mean_ns;       /* 0: unknown (an appliance's histogram keeps no sum) */
};
struct vsref_result {
    const char *mode; /* "fixed" or "positions" */
    uint32_t pos_lo, pos_hi, block, workers;
    uint64_t bytes; /* per reference iteration ("fixed" only; 0 otherwise) */
    struct vsref_side nibble, reference;
    /* The reference without its per-op barriers ("fixed" with more than
     * one worker; count 0 otherwise): reference p50 / this p50 is what the
     * plan's barriers cost a pass that only reads. */
    struct vsref_side free_running;
};

/* Summarize n samples (sorted in place) into *s. */
void vsref_summarize(uint64_t *ns, uint64_t n, struct vsref_side *s);

/* The two ratios the goals are stated in, and the barriers' share of the
 * reference; 0 when a p50 is 0. */
double vsref_tail_ratio(const struct vsref_result *r);    /* (nib p99/p50) / (ref p99/p50) */
double vsref_p50_ratio(const struct vsref_result *r);     /* nib p50 / ref p50 */
double vsref_barrier_ratio(const struct vsref_result *r); /* ref p50 / free-running p50 */

/* Print r as text, or as one JSON object on a line. */
void vsref_report(FILE *f, const struct vsref_result *r, int json);

/* The in-process runs. e runs on its team; ids[0..n_ids) is the prompt.
 * lat, lat2: room for tokens + warmup samples each; lat3 the same or NULL
 * (no free-running block). */
struct vsref_run {
    struct nib_exec *e;
    struct nib_ref *ref;
    const uint32_t *ids;
    uint32_t n_ids, tokens, warmup, block, gen, workers;
    uint64_t *lat, *lat2, *lat3;
    uint32_t *pos_of; /* position of each nibble sample (for the jitter) */
};
/* Feed the prompt (and, to reach upto, the prompt again and again) in
 * passes of up to max_batch tokens: the KV cache filled below upto. */
void vsref_prefill(const struct vsref_run *run, uint32_t upto);
/* Decode through the context in requests (prompt, then greedy to the
 * end or gen tokens), each block of tokens followed by a block of
 * reference iterations at the same positions. Fills run->lat (tokens),
 * run->lat2 (iterations) and run->pos_of; vsref_finish summarizes. */
void vsref_positions(const struct vsref_run *run, struct vsref_result *out);
/* The KV cache filled up to pos, then blocks of tokens at pos (each
 * rewrites row pos, as a decode at pos does) and blocks of iterations at
 * pos; with run->lat3, after each a block of free-running iterations
 * (struct nib_ref), summarized into out->free_running here. pos: n_ids <=
 * pos < ctx_len. */
void vsref_fixed(const struct vsref_run *run, uint32_t pos, struct vsref_result *out);
/* Summarize the samples after the warmup (sorting them in place). */
void vsref_finish(const struct vsref_run *run, struct vsref_result *out);

#endif
