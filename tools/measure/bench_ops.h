/* nib bench --latency --ops: where a token's time goes, op by op, beside
 * the reference loop's time for the same op's bytes.
 *
 * The executor's team (worker 0 on the calling thread; pin it first):
 * passes at one position alternate in blocks with reference iterations at
 * that position, every op timed on its own (a vDSO clock read between
 * ops, tens of ns against ops of microseconds). With several workers each
 * worker stamps when it reaches the barrier before an op and when it
 * leaves it: an op's time is worker 0's from its start to the next op's
 * (the wait for the slowest share included), and each row adds the mean
 * time a worker waited at the barrier after it. Ops are grouped by kind (a matmul by its tensor's
 * name without the layer prefix, so every layer's attn_qkv is one row);
 * each row reports the median over passes of the row's per-pass sum, for
 * the token and for the reference, and the bytes the reference reads for
 * it. A row whose token time is far above its reference time is where the
 * executor does work the memory does not explain; its "again" time (each
 * op run twice in a row, the second run timed, its bytes in the caches as
 * far as they fit; one worker only) tells arithmetic from reads not
 * overlapped. */
#ifndef NIB_BENCH_OPS_H
#define NIB_BENCH_OPS_H

#include <stdint.h>
#include <stdio.h>

#include "rt/exec.h"

/* e: the executor with the KV cache filled below pos, its team (if any)
 * running;
 * token: the token each pass feeds; passes, block: as --tokens and
 * --block. Prints the table (or one JSON object per row; the last, row
 * "pass", says whether the op-by-op pass gave the executor's logits bit
 * for bit). Returns 0; -1 when memory for the samples cannot be had; -2
 * when the logits differ. */
int bench_ops(FILE *f, struct nib_exec *e, uint32_t token, uint32_t pos, uint32_t passes,
              uint32_t block, int json);

#endif
