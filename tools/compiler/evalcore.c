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

double runner_matmul_bits(const struct runner *r)
{
    const struct nib_blob_view *v = &r->v;
    double bytes = 0, weights = 0;
    for (uint32_t t = 0; t < v->h->n_tensors; t++) {
        int used = 0;
        for (uint32_t i = 0; i < v->h->n_ops && !used; i++)
            used = v->ops[i].code == NIB_OP_MATMUL && v->ops[i].tensor == t;
        if (used) {
            bytes += (double)v->tensors[t].size;
            weights += (double)v->tensors[t].rows * v->tensors[t].cols;
        }
    }
    return weights > 0 ? bytes * 8 / weights : 0;
}

double model_matmul_bits(const struct llama_model *m)
{
    enum { PER_LAYER = 7 };
    const struct gguf_tensor **seen = calloc((size_t)m->hp.n_layers * PER_LAYER + 1, sizeof *seen);
    if (!seen)
        return 0;
    uint32_t n = 0;
    double bits = 0, weights = 0;
    for (uint32_t l = 0; l <= m->hp.n_layers; l++) {
        const struct llama_layer *y = l < m->hp.n_layers ? &m->layers[l] : NULL;
        const struct llama_weight *ws[PER_LAYER] = {
            y ? &y->wq : (m->output_tied ? &m->tok_embd : &m->output),
            y ? &y->wk : NULL,
            y ? &y->wv : NULL,
            y ? &y->wo : NULL,
            y ? &y->w_gate : NULL,
            y ? &y->w_up : NULL,
            y ? &y->w_down : NULL};
        for (int i = 0; i < PER_LAYER; i++) {
            const struct gguf_tensor *t = ws[i] ? ws[i]->t : NULL;
            int dup = !t;
            for (uint32_t j = 0; j < n && !dup; j++)
                dup = seen[j] == t;
            if (dup)
                continue;
            seen[n++] = t; /* a fused source (phi3) counted once */
            bits += 8.0 * (double)ggml_type_nbytes(t->type, t->n_elems);
            weights += (double)t->n_elems;
        }
    }
    free(seen);
    return weights > 0 ? bits / weights : 0;
}
