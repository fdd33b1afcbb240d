#include "proto/stats.h"

const struct nib_hist_shape nib_token_hist_shape = {NIB_TOKEN_HIST_MIN_EXP, NIB_TOKEN_HIST_MAX_EXP,
                                                    NIB_TOKEN_HIST_SUB_BITS,
                                                    NIB_TOKEN_HIST_BUCKETS};
const struct nib_hist_shape nib_request_hist_shape = {
    NIB_REQUEST_HIST_MIN_EXP, NIB_REQUEST_HIST_MAX_EXP, NIB_REQUEST_HIST_SUB_BITS,
    NIB_REQUEST_HIST_BUCKETS};

uint32_t nib_hist_bucket(const struct nib_hist_shape *s, uint64_t ns)
{
    if (ns < (1ull << s->min_exp))
        return 0;
    if (ns >= (1ull << s->max_exp))
        return s->n_buckets - 1;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(ns);
    uint32_t sub = (uint32_t)((ns >> (e - s->sub_bits)) & ((1u << s->sub_bits) - 1u));
    return 1u + ((e - s->min_exp) << s->sub_bits) + sub;
}

uint64_t nib_hist_lower(const struct nib_hist_shape *s, uint32_t b)
{
    if (b == 0)
        return 0;
    if (b >= s->n_buckets - 1)
        return 1ull << s->max_exp;
    uint32_t i = b - 1u;
    uint32_t e = s->min_exp + (i >> s->sub_bits);
    uint64_t sub = i & ((1u << s->sub_bits) - 1u);
    return (1ull << e) + (sub << (e - s->sub_bits));
}

uint64_t nib_hist_upper(const struct nib_hist_shape *s, uint32_t b)
{
    if (b >= s->n_buckets - 1)
        return UINT64_MAX;
    return nib_hist_lower(s, b + 1);
}

void nib_hist_add(const struct nib_hist_shape *s, uint32_t *hist, uint64_t ns)
{
    uint32_t *c = &hist[nib_hist_bucket(s, ns)];
    if (*c != UINT32_MAX)
        (*c)++;
}

double nib_hist_percentile(const struct nib_hist_shape *s, const uint32_t *hist, double pct,
                           uint64_t max_ns)
{
    uint64_t total = 0;
    for (uint32_t b = 0; b < s->n_buckets; b++)
        total += hist[b];
    if (total == 0)
        return 0;
    /* The sample of rank r (1-based) with r = ceil(pct% of total). */
    double want = pct / 100.0 * (double)total;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > total)
        rank = total;
    uint64_t acc = 0;
    for (uint32_t b = 0; b < s->n_buckets; b++) {
        if (acc + hist[b] < rank) {
            acc += hist[b];
            continue;
        }
        double lo = (double)nib_hist_lower(s, b);
        double v;
        if (b == s->n_buckets - 1) {
            v = max_ns ? (double)max_ns : lo; /* overflow: only the max is known */
        } else {
            /* Samples spread evenly over the bucket: the k-th of n sits at
             * (k - 0.5) / n of its width. */
            double width = (double)(nib_hist_upper(s, b) - nib_hist_lower(s, b));
            v = lo + ((double)(rank - acc) - 0.5) / (double)hist[b] * width;
        }
        if (max_ns && v > (double)max_ns)
            v = (double)max_ns;
        return v;
    }
    return max_ns ? (double)max_ns : 0;
}

void nib_hist_summary(const struct nib_hist_shape *s, const uint32_t *hist, uint64_t max_ns,
                      struct nib_latency *out)
{
    out->count = 0;
    for (uint32_t b = 0; b < s->n_buckets; b++)
        out->count += hist[b];
    out->p50 = nib_hist_percentile(s, hist, 50, max_ns);
    out->p90 = nib_hist_percentile(s, hist, 90, max_ns);
    out->p99 = nib_hist_percentile(s, hist, 99, max_ns);
    out->p999 = nib_hist_percentile(s, hist, 99.9, max_ns);
    out->max = out->count ? (double)max_ns : 0;
}

void nib_stats_token(struct nib_stats *st, uint64_t ns)
{
    nib_hist_add(&nib_token_hist_shape, st->token_hist, ns);
    if (ns > st->token_pass_ns_max)
        st->token_pass_ns_max = ns;
    st->tokens_run++;
}

void nib_stats_request(struct nib_stats *st, uint64_t ns)
{
    nib_hist_add(&nib_request_hist_shape, st->request_hist, ns);
    if (ns > st->request_ns_max)
        st->request_ns_max = ns;
}
