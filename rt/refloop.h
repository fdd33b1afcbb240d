/* The reference loop: the memory work of one decode token without the
 * model. Each iteration reads, on the executor's own team with its own
 * per-op shares (nib_exec_share) and its own barriers (the executor's
 * barrier map), exactly the bytes a single-token pass at a fixed position
 * streams: every matmul's share of its weights in plan order, and each
 * attention share's K and V cache rows up to the position (from the
 * window's start for a sliding window). The only arithmetic is an integer
 * xor/add of the loaded words into a per-worker sink, which keeps the
 * loads alive. Whatever jitter it shows is the machine's; what a real
 * token shows beyond it is the executor's (nib bench --latency).
 *
 * Activations (a few KiB per op, in L1/L2) and the embedding row are not
 * read: the loop measures the streamed bytes only. Nothing is allocated;
 * an iteration makes no system call (the team's own barriers aside, as in
 * a pass). */
#ifndef NIB_REFLOOP_H
#define NIB_REFLOOP_H

#include <stdint.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "rt/team.h"

/* count runs of len bytes, stride bytes apart, starting at off: in the
 * weights section (weights = 1) or in runtime memory (weights = 0). */
struct nib_ref_span {
    uint64_t off, len, stride;
    uint32_t count, weights;
};

#define NIB_REF_SPANS_MAX 3

/* The spans worker w of n reads for op in a single-token pass at pos
 * (pos < ctx_len). Returns the count (<= NIB_REF_SPANS_MAX): one for a
 * matmul's weight share, two (K, V) for an attention share, 0 otherwise. */
int nib_ref_spans(const struct nib_blob_view *v, const struct nib_op *op, uint32_t pos, uint32_t w,
                  uint32_t n, struct nib_ref_span *out);

/* Bytes one iteration at pos reads on n workers, summed over the
 * workers' shares (a KV head that two workers' query heads share is read
 * by both, as attention reads it). */
struct nib_ref_bytes {
    uint64_t weights, kv;
};
void nib_ref_bytes(const struct nib_blob_view *v, uint32_t pos, uint32_t n,
                   struct nib_ref_bytes *out);

/* Per-worker state, a cache line each so workers never share one. */
struct nib_ref_slot {
    uint64_t sink;  /* folded loads */
    uint64_t bytes; /* bytes read so far */
    uint64_t pad[6];
} __attribute__((aligned(64)));

/* The loop over an executor: e->v, e->mem, and (for more than one worker)
 * e->team and its barrier map (nib_exec_set_team) as the executor runs. */
struct nib_ref {
    const struct nib_exec *e;
    uint32_t pos;
    /* 1: the per-op barriers left out (the team's start and end remain),
     * the same shares read back to back: set against an iteration with
     * them, what the plan's barriers cost a pass that only reads. */
    uint32_t free_running;
    struct nib_ref_slot slot[NIB_TEAM_MAX_WORKERS];
};

/* Worker w of n's reads for op i at pos, folded into *sink; returns the
 * bytes read. An iteration is this for every op, with the barriers. */
uint64_t nib_ref_op(const struct nib_exec *e, uint32_t i, uint32_t pos, uint32_t w, uint32_t n,
                    uint64_t *sink);

/* One iteration at pos on e's team (or the calling thread without one).
 * Returns -1 when pos >= ctx_len, else 0. Adds every worker's bytes to
 * its slot's bytes. */
int nib_ref_iteration(struct nib_ref *r, uint32_t pos);

/* The sum of the slots' bytes (the test's view of what was read). */
uint64_t nib_ref_bytes_read(const struct nib_ref *r);

#endif
