/* Latency histograms: buckets tile the range without gaps, and percentiles
 * read back from them are within about 1-2 % of the exact ones, which is
 * what p99/p50 needs. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto/stats.h"
#include "tests/common/test_util.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double exact_pct(const uint64_t *sorted, size_t n, double pct)
{
    size_t rank = (size_t)ceil(pct / 100.0 * (double)n);
    if (rank < 1)
        rank = 1;
    return (double)sorted[rank - 1];
}

START_TEST(buckets_tile_the_range)
{
    const struct nib_hist_shape *shapes[] = {&nib_token_hist_shape, &nib_request_hist_shape};
    for (int k = 0; k < 2; k++) {
        const struct nib_hist_shape *s = shapes[k];
        ck_assert_uint_eq(nib_hist_lower(s, 0), 0);
        for (uint32_t b = 0; b + 1 < s->n_buckets; b++) {
            uint64_t lo = nib_hist_lower(s, b), hi = nib_hist_upper(s, b);
            ck_assert_msg(lo < hi, "bucket %u empty", b);
            ck_assert_uint_eq(nib_hist_bucket(s, lo), b);
            ck_assert_uint_eq(nib_hist_bucket(s, hi - 1), b);
            ck_assert_uint_eq(nib_hist_bucket(s, hi), b + 1);
            if (b > 0 && lo >= (1ull << s->min_exp))
                ck_assert_msg((double)(hi - lo) / (double)lo <= 1.0 / (1u << s->sub_bits) + 1e-12,
                              "bucket %u is %.3f%% wide", b,
                              100.0 * (double)(hi - lo) / (double)lo);
        }
        ck_assert_uint_eq(nib_hist_bucket(s, UINT64_MAX), s->n_buckets - 1);
    }
    ck_assert_uint_eq(nib_token_hist_shape.n_buckets, NIB_TOKEN_HIST_BUCKETS);
}
END_TEST

/* A token-latency-like distribution: a tight body around base with a few
 * slow outliers. */
static void check_distribution(uint64_t base, double spread, double outlier_frac)
{
    enum { N = 20000 };
    uint64_t *v = malloc(N * sizeof *v);
    uint32_t *hist = calloc(NIB_TOKEN_HIST_BUCKETS, 4);
    uint64_t x = 88172645463325252ull, max = 0;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0;
        double f = 1.0 + spread * u * u;
        if ((double)(x & 0xFFFF) / 65536.0 < outlier_frac)
            f *= 1.5 + u;
        v[i] = (uint64_t)((double)base * f);
        if (v[i] > max)
            max = v[i];
        nib_hist_add(&nib_token_hist_shape, hist, v[i]);
    }
    qsort(v, N, sizeof *v, cmp_u64);
    const double pcts[] = {50, 90, 99, 99.9};
    for (int i = 0; i < 4; i++) {
        double want = exact_pct(v, N, pcts[i]);
        double got = nib_hist_percentile(&nib_token_hist_shape, hist, pcts[i], max);
        ck_assert_msg(fabs(got - want) / want < 0.02, "p%g: %.0f ns from the histogram, %.0f exact",
                      pcts[i], got, want);
    }
    double r_want = exact_pct(v, N, 99) / exact_pct(v, N, 50);
    double r_got = nib_hist_percentile(&nib_token_hist_shape, hist, 99, max) /
                   nib_hist_percentile(&nib_token_hist_shape, hist, 50, max);
    ck_assert_msg(fabs(r_got - r_want) / r_want < 0.02, "p99/p50 %.4f, exact %.4f", r_got, r_want);
    struct nib_latency lat;
    nib_hist_summary(&nib_token_hist_shape, hist, max, &lat);
    ck_assert_uint_eq(lat.count, N);
    ck_assert(lat.p50 <= lat.p90 && lat.p90 <= lat.p99 && lat.p99 <= lat.p999 &&
              lat.p999 <= lat.max);
    free(hist);
    free(v);
}

START_TEST(percentiles_within_two_percent)
{
    check_distribution(5000000, 0.06, 0.002); /* 5 ms tokens, tight */
    check_distribution(37000, 0.5, 0.01);     /* 37 us tokens, wide */
    check_distribution(250000000, 0.02, 0.0); /* 250 ms tokens */
}
END_TEST

START_TEST(empty_and_saturating)
{
    uint32_t hist[NIB_TOKEN_HIST_BUCKETS] = {0};
    ck_assert(nib_hist_percentile(&nib_token_hist_shape, hist, 50, 0) == 0);
    uint32_t b = nib_hist_bucket(&nib_token_hist_shape, 1000000);
    hist[b] = UINT32_MAX;
    nib_hist_add(&nib_token_hist_shape, hist, 1000000);
    ck_assert_uint_eq(hist[b], UINT32_MAX);
    /* Below and above the range: underflow and overflow buckets, clamped by max. */
    memset(hist, 0, sizeof hist);
    nib_hist_add(&nib_token_hist_shape, hist, 10);
    nib_hist_add(&nib_token_hist_shape, hist, 1ull << 40);
    ck_assert_uint_eq(hist[0], 1);
    ck_assert_uint_eq(hist[NIB_TOKEN_HIST_BUCKETS - 1], 1);
    ck_assert(nib_hist_percentile(&nib_token_hist_shape, hist, 100, 1ull << 40) ==
              (double)(1ull << 40));
}
END_TEST

START_TEST(stats_recorders)
{
    struct nib_stats *st = calloc(1, sizeof *st);
    nib_stats_token(st, 1000000);
    nib_stats_token(st, 3000000);
    nib_stats_request(st, 50000000);
    ck_assert_uint_eq(st->tokens_run, 2);
    ck_assert_uint_eq(st->token_pass_ns_max, 3000000);
    ck_assert_uint_eq(st->request_ns_max, 50000000);
    struct nib_latency lat;
    nib_hist_summary(&nib_request_hist_shape, st->request_hist, st->request_ns_max, &lat);
    ck_assert_uint_eq(lat.count, 1);
    ck_assert(fabs(lat.p50 - 50000000) / 50000000 < 0.07);
    free(st);
}
END_TEST

TU_SUITE("stats", "stats", NULL, NULL, 0, buckets_tile_the_range, percentiles_within_two_percent,
         empty_and_saturating, stats_recorders)
