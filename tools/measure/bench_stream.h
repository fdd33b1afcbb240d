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

/* "8 accumulators, prefetch 1024 B ahead" */
void stream_variant_name(const struct stream_variant *v, char *buf, size_t len);

#endif
