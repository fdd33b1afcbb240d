#include "rt/prefetch_tune.h"

#include <stdio.h>

#include "kernels/qkernels.h"
#include "proto/private/sync.h"
#include "rt/exec.h"

void nib_prefetch_tune_init(struct nib_prefetch_tune *t)
{
    static const uint32_t others[] = {0, 4096, 8192, 2048}; /* three that differ from the default */
    *t = (struct nib_prefetch_tune){.bytes = {NIB_PF_DIST}};
    for (uint32_t i = 0, n = 1; n < NIB_TUNE_CANDIDATES; i++)
        if (others[i] != NIB_PF_DIST)
            t->bytes[n++] = others[i];
}

uint32_t nib_prefetch_tune_pick(const double *ratio, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (ratio[i] < (best ? ratio[best] : 1.0))
            best = i;
    /* 2 % below the default, or the default stays */
    return best && ratio[best] <= 0.98 ? best : 0;
}

/* The median of v[0..n) (sorts v: n is small). */
static double median(double *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double s = v[j];
            v[j] = v[j - 1], v[j - 1] = s;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of n samples. */
static double median_of(const uint64_t *x, uint32_t n)
{
    double v[NIB_TUNE_ROUNDS_MAX * NIB_TUNE_PASSES_MAX];
    for (uint32_t i = 0; i < n; i++)
        v[i] = (double)x[i];
    return median(v, n);
}

void nib_prefetch_tune_score(struct nib_prefetch_tune *t)
{
    /* Paired: in each round, a candidate's slot (the median of its passes)
     * over the default's slot of the same round. The slots of a round
     * lie within a few passes of each other, so a swing of the machine that
     * lasts longer than that (they last seconds on a shared VM) moves
     * all alike and cancels in the ratio; the medians of whole candidates
     * compare slots up to a round apart and do not cancel it. */
    double base[NIB_TUNE_ROUNDS_MAX]; /* the default's slot in each round */
    for (uint32_t r = 0; r < t->rounds; r++)
        base[r] = median_of(t->samples[0] + r * t->passes, t->passes);
    for (uint32_t c = 0; c < NIB_TUNE_CANDIDATES; c++) {
        double rel[NIB_TUNE_ROUNDS_MAX];
        for (uint32_t r = 0; r < t->rounds; r++)
            rel[r] =
                base[r] > 0 ? median_of(t->samples[c] + r * t->passes, t->passes) / base[r] : 1.0;
        t->ratio[c] = median(rel, t->rounds);
        t->median_ns[c] = (uint64_t)median_of(t->samples[c], t->rounds * t->passes);
    }
    t->chosen = nib_prefetch_tune_pick(t->ratio, NIB_TUNE_CANDIDATES);
}

static uint64_t timed_pass(struct nib_exec *e, uint32_t pos)
{
    uint64_t t0 = nib_now_ns();
    nib_exec_token(e, 0, pos);
    return nib_now_ns() - t0;
}

int nib_prefetch_tune_run(const struct nib_exec *e, struct nib_prefetch_tune *t, uint32_t rounds,
                          uint64_t budget_ns)
{
    const struct nib_blob_view *v = e->v;
    if (v->h->model_kind == NIB_MODEL_VISION || rounds == 0 || rounds > NIB_TUNE_ROUNDS_MAX)
        return -1;
    const uint32_t pos = v->h->hp.ctx_len > 64 ? 64 : v->h->hp.ctx_len - 1;
    struct nib_exec run = *e; /* no latency recording, no digest */
    run.stats = NULL;
    run.digest = 0;
    const uint32_t before = nib_prefetch_bytes;
    uint64_t one = 0;
    for (uint32_t c = 0; c < NIB_TUNE_CANDIDATES; c++) { /* warm-up: caches, page tables */
        nib_prefetch_set(t->bytes[c]);
        uint64_t d = timed_pass(&run, pos);
        one = c == 0 || d < one ? d : one;
    }
    uint64_t slot = budget_ns / ((uint64_t)rounds * NIB_TUNE_CANDIDATES);
    uint64_t passes = one ? slot / one : NIB_TUNE_PASSES_MAX;
    t->passes = passes < 1                     ? 1
                : passes > NIB_TUNE_PASSES_MAX ? NIB_TUNE_PASSES_MAX
                                               : (uint32_t)passes;
    t->rounds = rounds;
    /* Each round starts at the next candidate, so none always runs first
     * (right after the previous round's last) or last. */
    for (uint32_t r = 0; r < rounds; r++)
        for (uint32_t i = 0; i < NIB_TUNE_CANDIDATES; i++) {
            const uint32_t c = (r + i) % NIB_TUNE_CANDIDATES;
            nib_prefetch_set(t->bytes[c]);
            for (uint32_t p = 0; p < t->passes; p++)
                t->samples[c][r * t->passes + p] = timed_pass(&run, pos);
        }
    nib_prefetch_tune_score(t);
    if (nib_prefetch_set(t->bytes[t->chosen]))
        nib_prefetch_set(before);
    return 0;
}

void nib_prefetch_tune_describe(const struct nib_prefetch_tune *t, char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < NIB_TUNE_CANDIDATES && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%u B %.0f us (%.3f)", i ? ", " : "",
                                 t->bytes[i], (double)t->median_ns[i] / 1e3, t->ratio[i]);
    if (used < len)
        snprintf(out + used, len - used, "; %u rounds of %u passes", t->rounds, t->passes);
}
