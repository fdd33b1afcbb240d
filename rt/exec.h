/* Plan executor: runs the blob's flat op list for a pass of tokens. No graph
 * walking, no allocation: every operand address is base + offset, checked
 * once at boot by nib_blob_open.
 *
 * Work split. Every op is divided among n workers by a FIXED rule: rows of
 * a matmul in blocks of NIB_EXEC_ROW_BLOCK (whole heads for a fused QKV
 * with per-head Q/K norms), heads of attention, blocks of elements of the
 * embedding and of a norm_add; a quant op (a reduction over the whole row)
 * runs on worker 0 alone, and a norm before a matmul or a norm_add is
 * computed by every worker for itself (NIB_OPF_NORM_IN; norm_add's whole
 * row into the worker's scratch). Each output element is computed by
 * exactly the same instructions in the same order whoever computes it, so
 * the result is bit-identical for any number of workers (docs/runtime.md).
 * nib_exec_access lists what each share reads and writes so that
 * nib_exec_plan_barriers places the thread team's barriers (rt/team.h)
 * only where data depends. The team only runs jobs: a pass is one job. */
#ifndef NIB_EXEC_H
#define NIB_EXEC_H

#include <stdint.h>

#include "model_blob/blob_view.h"
#include "proto/stats_layout.h"

struct nib_team;
struct nib_qkernels;

struct nib_exec {
    const struct nib_blob_view *v;
    uint8_t *mem;                  /* act_size + kv_size bytes, 64-byte aligned, caller-owned */
    const struct nib_qkernels *qk; /* nib_exec_kernels(isa); NULL: the scalar reference */
    struct nib_team *team;         /* NULL: every op runs on the calling thread */
    const uint8_t *barrier_before; /* with a team (nib_exec_set_team): n_ops flags */
    uint8_t *wscratch;             /* with a team: workers 1..n-1's private scratch */
    struct nib_stats *stats;       /* NULL: no latency recording */
    int digest;                    /* fold every token's logits into stats->logits_digest */
    uint32_t digest_crc;           /* the running digest (also kept without stats) */
};

/* Run the whole plan for m tokens (1 <= m <= max_batch) at positions
 * pos..pos+m-1: decode is m = 1, prefill feeds a prompt in passes of up
 * to max_batch tokens. Returns a pointer to the vocab_size logits of the
 * LAST token inside mem, or NULL when m is out of range, a token is >=
 * vocab_size or pos + m > ctx_len. With stats, a pass of one token
 * records its duration (the token latency histogram). Prefill passes
 * leave bitwise the state (KV cache, logits) that m single-token passes
 * leave (tests/rt/test_prefill.c). */
const float *nib_exec_tokens(struct nib_exec *e, const uint32_t *tokens, uint32_t m, uint32_t pos);
const float *nib_exec_token(struct nib_exec *e, uint32_t token, uint32_t pos);

/* A vision model (blob_format.h NIB_MODEL_VISION): run the whole plan
 * once. The caller has put every input's bytes at its io record's offset
 * in mem; afterwards every output's bytes are at its record's offset.
 * Same team, same shares and barriers as a token pass, so the outputs are
 * bitwise the same for any worker count. With stats, records the run's
 * duration (the latency histogram). Returns 0, or -1 when the blob is not
 * a vision model. */
int nib_exec_run(struct nib_exec *e);

/* The greedy choice after a pass: the index of the largest logit (the
 * first of equals; NaNs ignored; 0 if every logit is NaN), reduced from
 * the LM head's per-block maxima when the plan fuses an argmax into it,
 * else by scanning the logits. Equal to nib_argmax(logits). */
uint32_t nib_exec_argmax(const struct nib_exec *e);

/* The quantized kernels for a CPU with these enum nib_isa bits (for
 * nib_exec.qk): the best variant it runs. Every variant gives the same
 * bits; ->name names it. */
const struct nib_qkernels *nib_exec_kernels(uint32_t isa);

/* Bytes that running v's plan on a team of n_workers needs beside the
 * runtime memory and the team: the barrier map and the private scratch of
 * workers 1..n-1 (worker 0's is in mem). */
uint64_t nib_exec_team_footprint(uint32_t n_workers, const struct nib_blob_view *v);
/* Run e's passes (e->v set) on team t from now on: lays out tmem
 * (nib_exec_team_footprint bytes, 64-byte aligned) and places the
 * barriers. Returns the barriers per pass. */
uint32_t nib_exec_set_team(struct nib_exec *e, struct nib_team *t, void *tmem);
/* Worker w's private scratch (worker 0's: mem + wscratch_off; the
 * others' in the team memory). */
uint8_t *nib_exec_worker_scratch(const struct nib_exec *e, uint32_t w);
/* The barrier map for n_workers: before[i] = 1 where a barrier precedes op
 * i (n_ops flags). Returns the barriers per pass, including the one that
 * ends it; 0 with one worker. */
uint32_t nib_exec_plan_barriers(const struct nib_blob_view *v, uint32_t n_workers, uint8_t *before);

#define NIB_EXEC_ROW_BLOCK 16u  /* matmul rows per block */
#define NIB_EXEC_ELEM_BLOCK 16u /* elements per block of element-wise ops */

/* Worker w of n: [begin, end) of the op's units (rows, heads, elements). */
void nib_exec_share(const struct nib_op *op, uint32_t w, uint32_t n, uint32_t *begin,
                    uint32_t *end);

/* Run worker w of n's share of op for the pass's m tokens at pos; wscratch
 * is the worker's private scratch (wscratch_size bytes, 64-byte aligned;
 * worker 0's is mem + wscratch_off). */
void nib_exec_op(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                 uint8_t *wscratch, const struct nib_op *op, uint32_t m, uint32_t pos, uint32_t w,
                 uint32_t n);

/* Byte ranges of runtime memory that worker w of n's share of op may read
 * or write, for any position and any m up to max_batch (the KV cache
 * ranges are whole layers; a share of several rows is listed as the span
 * from its first row's part to its last row's).
 * Weights are read-only and not listed. Returns the count (<= NIB_ACCESS_MAX). */
#define NIB_ACCESS_MAX 6
struct nib_access {
    uint64_t begin, end;
    uint32_t write;
};
int nib_exec_access(const struct nib_blob_view *v, const struct nib_op *op, uint32_t w, uint32_t n,
                    struct nib_access *out);

#endif
