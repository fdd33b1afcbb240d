/* nib bench's attention table: the attention kernel's multiply-adds per
 * second from the caches, beside the core's own peak and a read of the
 * same bytes, measured in the same round (tools/measure/bench_attention.c). */
#ifndef NIB_BENCH_ATTENTION_H
#define NIB_BENCH_ATTENTION_H

#include "kernels/qkernels.h"

#define BENCH_ATT_MAX_ROUNDS 15

/* Per-round figures; bench_attention_round fills round r. */
struct bench_att {
    double peak[BENCH_ATT_MAX_ROUNDS];       /* multiply-adds per second, the peak loop */
    double us[2][BENCH_ATT_MAX_ROUNDS];      /* per call, each shape */
    double ratio[2][BENCH_ATT_MAX_ROUNDS];   /* multiply-adds a second / the round's peak */
    double read_us[2][BENCH_ATT_MAX_ROUNDS]; /* the same K and V bytes read */
};

/* One round: the peak loop, then each shape's attention for at least
 * min_seconds and a stream read of its K and V bytes. 0, or -1 when
 * memory for the caches cannot be had. */
int bench_attention_round(const struct nib_qkernels *kt, int round, double min_seconds,
                          struct bench_att *b);

/* The table: the medians of rounds 0..rounds-1. */
void bench_attention_print(const struct nib_qkernels *kt, const struct bench_att *b, int rounds);

#endif
