/* Recording into and reading from the statistics page (proto/stats_layout.h).
 * The appliance records with nib_stats_token / nib_stats_request (no
 * allocation, no system call); hosts (nib stats, nib bench) turn the
 * histograms into percentiles with nib_hist_summary, so the bucket
 * arithmetic lives in one place. */
#ifndef NIB_STATS_H
#define NIB_STATS_H

#include <stdint.h>

#include "proto/stats_layout.h"

/* Shape of a log-linear histogram: octaves [2^min_exp, 2^max_exp) ns, each
 * split into 2^sub_bits linear buckets, plus an underflow and an overflow
 * bucket. */
struct nib_hist_shape {
    uint32_t min_exp, max_exp, sub_bits, n_buckets;
};

extern const struct nib_hist_shape nib_token_hist_shape;   /* token_hist */
extern const struct nib_hist_shape nib_request_hist_shape; /* request_hist */

uint32_t nib_hist_bucket(const struct nib_hist_shape *s, uint64_t ns);
/* [lower, upper) edges of bucket b in ns (upper of the last = UINT64_MAX). */
uint64_t nib_hist_lower(const struct nib_hist_shape *s, uint32_t b);
uint64_t nib_hist_upper(const struct nib_hist_shape *s, uint32_t b);
/* Count one sample; the bucket saturates at UINT32_MAX. */
void nib_hist_add(const struct nib_hist_shape *s, uint32_t *hist, uint64_t ns);

struct nib_latency {
    uint64_t count;
    double p50, p90, p99, p999, max; /* ns; 0 when count == 0 */
};

/* Percentile pct (0..100] of the samples in hist, in ns: linear
 * interpolation inside the bucket that holds the rank, never above max_ns
 * (when max_ns != 0). 0 for an empty histogram. */
double nib_hist_percentile(const struct nib_hist_shape *s, const uint32_t *hist, double pct,
                           uint64_t max_ns);
void nib_hist_summary(const struct nib_hist_shape *s, const uint32_t *hist, uint64_t max_ns,
                      struct nib_latency *out);

/* One forward pass took ns (called by the executor). */
void nib_stats_token(struct nib_stats *st, uint64_t ns);
/* One request took ns from pick-up to final status (called by the server). */
void nib_stats_request(struct nib_stats *st, uint64_t ns);

#endif
