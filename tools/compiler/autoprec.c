/* Mixed precision by measurement (nib compile --auto-precision): each weight
 * matrix in turn is kept in q8c while the rest stay in the base format, and
 * the drop in mean KL divergence against f32 on calibration text is that
 * matrix's sensitivity. Matrices are then upgraded in order of KL saved per
 * extra byte until the byte budget (or the KL target) is met. KL is
 * measured on the calibration text (tools/compiler/calib_text.c), never on
 * nib eval's, and with the rounding method and calibration of po (q8c
 * copies prepared by the calibration too), so the figures are those of the
 * blob that will be built. */
#include "tools/compiler/autoprec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/tokenizer.h"
#include "tools/compiler/calib.h"
#include "tools/compiler/evalcore.h"
#include "tools/compiler/tok_load.h"

struct cand {
    char name[NIB_NAME_MAX];
    double kl;     /* mean KL with only this matrix upgraded */
    double gain;   /* base KL - kl */
    int64_t extra; /* extra weight bytes */
    int chosen;
};

static int by_value(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    double vx = x->gain / (double)(x->extra > 0 ? x->extra : 1);
    double vy = y->gain / (double)(y->extra > 0 ? y->extra : 1);
    return vx < vy ? 1 : vx > vy ? -1 : strcmp(x->name, y->name);
}

/* Mean KL and weight bytes of the model under po, against ref. */
static int measure(const struct llama_model *m, const struct plan_opts *po, struct runner *ref,
                   const uint32_t *ids, uint32_t n, double *kl, uint64_t *bytes, char *err,
                   size_t errlen)
{
    struct runner q;
    if (runner_open(&q, m, po, err, errlen)) {
        runner_close(&q);
        return -1;
    }
    struct eval_result r;
    int rc = evaluate(ref, &q, ids, n, &r);
    *kl = r.kl_mean;
    *bytes = runner_weight_bytes(&q);
    runner_close(&q);
    if (rc)
        snprintf(err, errlen, "out of memory");
    return rc;
}

int nib_autoprec(const struct llama_model *m, struct plan_opts *po, const struct autoprec_opts *ao,
                 char **precision_out, char *err, size_t errlen)
{
    struct plan_opts ref_opts = *po;
    nib_plan_opts_quant(&ref_opts, "f32", err, errlen);
    ref_opts.precision = NULL;
    struct runner ref;
    uint32_t *ids = NULL;
    struct cand *c = NULL;
    char *prec = NULL;
    int rc = -1;
    if (runner_open(&ref, m, &ref_opts, err, errlen))
        goto out;
    size_t len = strlen(nib_calib_default_text);
    ids = malloc((len + 2) * sizeof *ids);
    if (!ids)
        goto oom;
    int n = tok_encode_into(&ref.v, nib_calib_default_text, len, 1, ids, len + 2);
    uint32_t n_ids = (uint32_t)(n > 0 ? n : 0);
    if (n_ids > ao->positions)
        n_ids = ao->positions;
    if (n_ids > ref.v.h->hp.ctx_len)
        n_ids = ref.v.h->hp.ctx_len;
    if (n_ids < 2) {
        snprintf(err, errlen, "calibration text gives fewer than 2 tokens");
        goto out;
    }

    double base_kl;
    uint64_t base_bytes;
    struct plan_opts base = *po;
    base.precision = NULL;
    if (measure(m, &base, &ref, ids, n_ids, &base_kl, &base_bytes, err, errlen))
        goto out;

    /* Candidates: every matrix of the plan. */
    uint32_t nc = m->hp.n_layers * 4 + 1;
    c = calloc(nc, sizeof *c);
    if (!c)
        goto oom;
    static const char *const kinds[4] = {"attn_qkv", "attn_output", "ffn_gate_up", "ffn_down"};
    for (uint32_t i = 0; i < nc; i++) {
        if (i + 1 == nc)
            snprintf(c[i].name, sizeof c[i].name, "output");
        else
            snprintf(c[i].name, sizeof c[i].name, "blk.%u.%s", i / 4, kinds[i % 4]);
        char item[NIB_NAME_MAX + 8];
        snprintf(item, sizeof item, "%s=q8c", c[i].name);
        struct plan_opts one = base;
        one.precision = item;
        uint64_t bytes;
        if (measure(m, &one, &ref, ids, n_ids, &c[i].kl, &bytes, err, errlen))
            goto out;
        c[i].gain = base_kl - c[i].kl;
        c[i].extra = (int64_t)bytes - (int64_t)base_bytes;
    }
    qsort(c, nc, sizeof *c, by_value);

    /* Greedy: best KL saved per byte first, within the budget. */
    uint64_t total = base_bytes;
    double est = base_kl;
    size_t cap = 1, used = 0;
    for (uint32_t i = 0; i < nc; i++)
        cap += strlen(c[i].name) + 6;
    prec = calloc(cap, 1);
    if (!prec)
        goto oom;
    for (uint32_t i = 0; i < nc; i++) {
        if (c[i].gain <= 0)
            continue;
        if (ao->max_bytes && total + (uint64_t)(c[i].extra > 0 ? c[i].extra : 0) > ao->max_bytes)
            continue;
        if (ao->max_kl > 0 && est <= ao->max_kl)
            break;
        c[i].chosen = 1;
        total += (uint64_t)(c[i].extra > 0 ? c[i].extra : 0);
        est -= c[i].gain;
        used += (size_t)snprintf(prec + used, cap - used, "%s%s=q8c", used ? "," : "", c[i].name);
    }
    struct plan_opts fin = base;
    fin.precision = prec;
    double final_kl;
    uint64_t final_bytes;
    if (measure(m, &fin, &ref, ids, n_ids, &final_kl, &final_bytes, err, errlen))
        goto out;

    FILE *f = ao->report;
    if (f) {
        fprintf(
            f, "auto-precision: %u calibration positions; base: mean KL %.6g, %.2f MB of weights\n",
            n_ids - 1, base_kl, (double)base_bytes / 1e6);
        fprintf(f, "  %-22s %12s %12s %12s  %s\n", "tensor", "KL if q8c", "KL saved", "extra bytes",
                "kept in q8c");
        for (uint32_t i = 0; i < nc; i++)
            fprintf(f, "  %-22s %12.6g %12.6g %12lld  %s\n", c[i].name, c[i].kl, c[i].gain,
                    (long long)c[i].extra, c[i].chosen ? "yes" : "");
        fprintf(
            f, "auto-precision: result: mean KL %.6g (base %.6g), %.2f MB of weights (budget %s)\n",
            final_kl, base_kl, (double)final_bytes / 1e6,
            ao->max_bytes    ? "bytes"
            : ao->max_kl > 0 ? "KL"
                             : "none");
    }
    *precision_out = prec;
    prec = NULL;
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "out of memory");
out:
    runner_close(&ref);
    free(ids);
    free(c);
    free(prec);
    return rc;
}
