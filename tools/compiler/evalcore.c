#include "tools/compiler/evalcore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/tokenizer.h"

int runner_open(struct runner *r, const struct llama_model *m, const struct plan_opts *po,
                char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (nib_blob_build_mem(m, po, &r->blob, &r->size, err, errlen))
        return -1;
    if (nib_blob_open(&r->v, r->blob, r->size, 1, err, errlen) || nib_tok_check(&r->v, err, errlen))
        return -1;
    r->mem = aligned_alloc(64, (r->v.mem_size + 63) & ~63ull);
    if (!r->mem) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memset(r->mem, 0, r->v.mem_size);
    r->e.v = &r->v;
    r->e.mem = r->mem;
    return 0;
}

void runner_close(struct runner *r)
{
    free(r->blob);
    free(r->mem);
}

/* log-softmax of logits into out (double), returns nothing. */
static void log_softmax(const float *logits, uint32_t n, double *out)
{
    double max = logits[0];
    for (uint32_t i = 1; i < n; i++)
        if (logits[i] > max)
            max = logits[i];
    double sum = 0;
    for (uint32_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - max);
    double lse = max + log(sum);
    for (uint32_t i = 0; i < n; i++)
        out[i] = (double)logits[i] - lse;
}

static uint32_t argmax_f(const float *x, uint32_t n)
{
    uint32_t b = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

int evaluate(struct runner *ref, struct runner *q, const uint32_t *ids, uint32_t n_ids,
             struct eval_result *res)
{
    uint32_t vocab = ref->v.h->hp.vocab_size;
    double *lp = malloc(vocab * sizeof *lp), *lq = malloc(vocab * sizeof *lq);
    if (!lp || !lq) {
        free(lp);
        free(lq);
        return -1;
    }
    double kl = 0, nll_p = 0, nll_q = 0;
    uint32_t agree = 0, n = 0;
    for (uint32_t pos = 0; pos + 1 < n_ids; pos++) {
        const float *a = nib_exec_token(&ref->e, ids[pos], pos);
        const float *b = nib_exec_token(&q->e, ids[pos], pos);
        if (!a || !b)
            break;
        log_softmax(a, vocab, lp);
        log_softmax(b, vocab, lq);
        double k = 0;
        for (uint32_t i = 0; i < vocab; i++)
            k += exp(lp[i]) * (lp[i] - lq[i]);
        kl += k;
        agree += argmax_f(a, vocab) == argmax_f(b, vocab);
        nll_p -= lp[ids[pos + 1]];
        nll_q -= lq[ids[pos + 1]];
        n++;
    }
    free(lp);
    free(lq);
    res->n = n;
    res->kl_mean = n ? kl / n : 0;
    res->top1 = n ? (double)agree / n : 0;
    res->ppl_ref = n ? exp(nll_p / n) : 0;
    res->ppl_q = n ? exp(nll_q / n) : 0;
    return 0;
}

uint64_t runner_weight_bytes(const struct runner *r)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < r->v.h->n_tensors; i++)
        n += r->v.tensors[i].size;
    return n;
}
