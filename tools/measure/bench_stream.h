/* The stream read nib bench divides by: the strongest read of a buffer
 * this machine does. Several loop variants (independent 32-byte
 * accumulators, software prefetch distance) are each timed several times
 * and the best pass is the yardstick, so that a ratio of 0.9 means 0.9 of
 * what the memory can deliver, not of one loop's idea of it. */
#ifndef NIB_BENCH_STREAM_H
#define NIB_BENCH_STREAM_H

#include <stddef.h>
#include <stdint.h>

struct stream_variant {
    int accumulators; /* independent 32-byte accumulators */
    int prefetch;     /* bytes ahead for a software prefetch; 0: none */
};

extern const struct stream_variant stream_variants[];
extern const int n_stream_variants;

/* Fold n bytes of p (n a multiple of 4096) with variant v; the sum keeps
 * the loads alive. */
uint64_t stream_fold(const uint8_t *p, size_t n, const struct stream_variant *v);

/* The read order of the 512-bit kernels (docs/benchmarks.md, "The read
 * order, found"): chunks of two halves, `half` bytes each (a stored
 * N-block pair's super-blocks), read a line of the first half, the same
 * line of the second, in turn. */
enum pair_order {
    PAIR_IN_STREAM, /* the same bytes in stream order: the comparison */
    PAIR_TURNS,     /* halves in turn, no software prefetch */
    PAIR_TURNS_PF,  /* halves in turn, prefetched in stream order */
    PAIR_N_ORDERS
};

/* Fold n bytes of p in chunks of 2 x half bytes (half a multiple of 64),
 * in that order; prefetch: bytes ahead for PAIR_TURNS_PF. */
uint64_t pair_order_fold(const uint8_t *p, size_t n, size_t half, enum pair_order o,
                         size_t prefetch);

/* "8 accumulators, prefetch 1024 B ahead" */
void stream_variant_name(const struct stream_variant *v, char *buf, size_t len);

#endif
