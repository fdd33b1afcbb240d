#include "rt/prefetch_tune.h"

#include <stdio.h>

#include "kernels/qkernels.h"
#include "proto/private/sync.h"
#include "rt/exec.h"

void nib_prefetch_tune_init(struct nib_prefetch_tune *t)
{
    static const uint32_t others[] = {0, 8192, 2048}; /* two that differ from the default */
    *t = (struct nib_prefetch_tune){.bytes = {NIB_PF_DIST}};
    for (uint32_t i = 0, n = 1; n < NIB_TUNE_CANDIDATES; i++)
        if (others[i] != NIB_PF_DIST)
            t->bytes[n++] = others[i];
}

uint32_t nib_prefetch_tune_pick(const uint64_t *median_ns, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (median_ns[i] < median_ns[best])
            best = i;
    /* 2 % below the default, or the default stays */
    return best && (double)median_ns[best] <= 0.98 * (double)median_ns[0] ? best : 0;
}

static uint64_t median(uint64_t *v, uint32_t n)
{
    for (uint32_t i = 1; i < n; i++) /* insertion sort: n is small */
        for (uint32_t j = i; j > 0 && v[j] < v[j - 1]; j--) {
            uint64_t s = v[j];
            v[j] = v[j - 1], v[j - 1] = s;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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
    for (uint32_t r = 0; r < rounds; r++)
        for (uint32_t c = 0; c < NIB_TUNE_CANDIDATES; c++) {
            nib_prefetch_set(t->bytes[c]);
            for (uint32_t p = 0; p < t->passes; p++)
                t->samples[c][r * t->passes + p] = timed_pass(&run, pos);
        }
    for (uint32_t c = 0; c < NIB_TUNE_CANDIDATES; c++)
        t->median_ns[c] = median(t->samples[c], rounds * t->passes);
    t->chosen = nib_prefetch_tune_pick(t->median_ns, NIB_TUNE_CANDIDATES);
    if (nib_prefetch_set(t->bytes[t->chosen]))
        nib_prefetch_set(before);
    return 0;
}

void nib_prefetch_tune_describe(const struct nib_prefetch_tune *t, char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < NIB_TUNE_CANDIDATES && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%u B %.0f us", i ? ", " : "",
                                 t->bytes[i], (double)t->median_ns[i] / 1e3);
    if (used < len)
        snprintf(out + used, len - used, "; %u rounds of %u passes", t->rounds, t->passes);
}
