/* The weight prefetch distance, measured on the machine itself.
 *
 * How far ahead the quantized kernels prefetch the weight stream
 * (nib_prefetch_bytes, kernels/qkernels.h) changes no bit of any result,
 * only speed, and the best distance is a property of the machine: on one
 * VM 2 KiB read fastest and none ran at two thirds of that; on another, no
 * prefetch, 4 KiB or 8 KiB beat 2 KiB, as the day went (docs/benchmarks.md). A topology table
 * that names a distance (`prefetch BYTES`) is taken as it is; otherwise
 * the appliance and `nib bench --latency` time a few decode passes at each
 * candidate, interleaved so that every candidate sees the machine at the
 * same moments, and keep the fastest, compared pair-wise within each
 * round (a VM's swings last longer than a round and cancel).
 *
 * Memory: the caller's (struct nib_prefetch_tune holds the samples);
 * nothing is allocated. */
#ifndef NIB_PREFETCH_TUNE_H
#define NIB_PREFETCH_TUNE_H

#include <stddef.h>
#include <stdint.h>

struct nib_exec;

#define NIB_TUNE_CANDIDATES 4
#define NIB_TUNE_ROUNDS_MAX 16
#define NIB_TUNE_PASSES_MAX 8
/* What the appliance and nib bench run: 5 rounds in about 0.4 s. */
#define NIB_TUNE_ROUNDS 5
#define NIB_TUNE_BUDGET_NS 400000000ull

struct nib_prefetch_tune {
    uint32_t bytes[NIB_TUNE_CANDIDATES];     /* the candidates, the build's default first */
    uint64_t median_ns[NIB_TUNE_CANDIDATES]; /* each one's median pass */
    double ratio[NIB_TUNE_CANDIDATES];       /* median over rounds of its pass / the default's */
    uint32_t rounds, passes;                 /* rounds x passes timed per candidate */
    uint32_t chosen;                         /* index of the distance left set */
    uint64_t samples[NIB_TUNE_CANDIDATES][NIB_TUNE_ROUNDS_MAX * NIB_TUNE_PASSES_MAX];
};

/* The candidates: the build's default (NIB_PF_DIST), then none (0), 4 KiB
 * and 8 KiB (2 KiB for any of them that is the default). */
void nib_prefetch_tune_init(struct nib_prefetch_tune *t);

/* The index of the least ratio (a candidate's time over the default's, the
 * default's own 1), the default kept unless another's is at most 0.98 (a
 * difference smaller than that is the machine's noise, not the distance's). */
uint32_t nib_prefetch_tune_pick(const double *ratio, uint32_t n);

/* From t->samples (t->rounds rounds of t->passes passes per candidate, in
 * round order): each candidate's median_ns and ratio, and chosen. */
void nib_prefetch_tune_score(struct nib_prefetch_tune *t);

/* Time decode passes of e's blob (a decoder) at position min(64, ctx - 1)
 * with token 0: one warm-up pass per candidate, then rounds in which
 * every candidate runs t->passes passes, each timed alone (round r starts
 * at candidate r mod NIB_TUNE_CANDIDATES), the passes per
 * slot chosen so that the whole takes about budget_ns (at least 1, at
 * most NIB_TUNE_PASSES_MAX). Each candidate's ratio is the median over
 * rounds of its slot's median pass over the default's slot in the same
 * round. Sets nib_prefetch_bytes to the pick (nib_prefetch_tune_pick of the
 * ratios) and fills t. The passes write that one
 * KV-cache row, which any later request writes before it reads it; e's
 * stats and digest are not touched (the passes run on a copy of e). Returns 0, or -1 (nothing changed) when e's blob
 * is not a decoder or rounds is not in 1..NIB_TUNE_ROUNDS_MAX. */
int nib_prefetch_tune_run(const struct nib_exec *e, struct nib_prefetch_tune *t, uint32_t rounds,
                          uint64_t budget_ns);

/* "2048 B 35 us (1.000), 0 B 36 us (1.021), 4096 B 34 us (0.990), 8192 B
 * 36 us (1.013); 5 rounds of 8 passes" (median pass, ratio) into out. */
void nib_prefetch_tune_describe(const struct nib_prefetch_tune *t, char *out, size_t len);

#endif
