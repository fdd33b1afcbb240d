/* What the bench commands share for timing (tools/measure/bench*.c): the
 * clock and the median of a round's figures. */
#ifndef NIB_BENCH_STATS_H
#define NIB_BENCH_STATS_H

/* Seconds on the monotonic clock. */
double bench_now(void);

/* The median of v[0..n) (n >= 1); sorts v. */
double bench_median(double *v, int n);

#endif
