/* vision_autoprec.h: per-node sensitivity to 4 bits, and the nodes kept
 * at 8 bits within a budget of weights. */
#include "tools/compiler/vision_autoprec.h"

#include <stdlib.h>
#include <string.h>

#include "tools/compiler/vision_eval.h"
#include "tools/util/tool_util.h"

struct cand {
    uint32_t node;
    uint64_t params;
    double score, sens;
    uint32_t bits;
};

static uint64_t node_params(const struct nx_graph *g, uint32_t i)
{
    const struct nx_tensor *w = &g->t[g->n[i].in[1]];
    uint64_t n = 1;
    for (uint32_t d = 0; d < w->rank; d++)
        n *= (uint64_t)w->dims[d];
    return n;
}

static const struct vq_override *named(const struct vq_opts *q, const char *name)
{
    for (uint32_t k = 0; k < q->n_over; k++)
        if (!strcmp(q->over[k].node, name))
            return &q->over[k];
    return NULL;
}

/* Compile g as tq says and score it against rf. */
static int score(const struct nx_graph *g, const struct vision_opts *o, const struct vq_opts *tq,
                 uint32_t workers, const struct vision_ref *rf, const struct vision_samples *s,
                 double *out, char *err, size_t errlen)
{
    uint8_t *blob;
    uint64_t len;
    if (vision_compile_mem(g, o, tq, &blob, &len, NULL, err, errlen))
        return -1;
    struct vision_runner r;
    struct vision_out_diff *d = calloc(rf->n_out + 1, sizeof *d);
    int rc = d ? vision_runner_open(&r, blob, len, workers, err, errlen)
               : nib_fail(err, errlen, "out of memory");
    if (!d)
        free(blob);
    else if (!rc)
        rc = vision_compare(rf, &r, s, d, err, errlen);
    if (d)
        vision_runner_close(&r);
    if (!rc)
        *out = vision_diff_score(d, rf->n_out);
    free(d);
    return rc;
}

static int by_sens(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    if (x->sens != y->sens)
        return x->sens < y->sens ? 1 : -1;
    return x->node < y->node ? -1 : x->node > y->node; /* a fixed order for ties */
}

int vq_auto_precision(const struct nx_graph *g, const struct vision_opts *o,
                      const struct vq_opts *q, const struct vq_auto_opts *ao,
                      struct vq_override *over, uint32_t *n_over, float **act_scale, int *act_owned,
                      char *err, size_t errlen)
{
    const uint32_t workers = ao->workers ? ao->workers : vision_default_workers();
    struct cand *c = calloc(g->n_order + 1, sizeof *c);
    uint32_t n_c = 0;
    uint64_t total = 0, fixed8 = 0;
    if (!c)
        return nib_fail(err, errlen, "out of memory");
    int64_t first, last;
    vq_kept_ends(g, q, &first, &last);
    for (uint32_t k = 0; k < g->n_order; k++) {
        uint32_t i = g->order[k];
        if (!vq_weighted(g, i))
            continue;
        uint64_t p = node_params(g, i);
        total += p;
        const struct vq_override *u = named(q, g->n[i].name);
        if (u)
            fixed8 += u->bits == 8 ? p : 0;
        else if ((int64_t)i == first || (int64_t)i == last)
            fixed8 += p; /* the default's ends: 8 bits, not measured */
        else
            c[n_c++] = (struct cand){.node = i, .params = p};
    }
    if (q->n_over + n_c > VQ_MAX_OVERRIDES) {
        free(c);
        return nib_fail(err, errlen, "%u weighted nodes: more than %d overrides", q->n_over + n_c,
                        VQ_MAX_OVERRIDES);
    }

    /* the f32 blob, the tuning inputs and its outputs on them */
    uint8_t *blob;
    uint64_t len;
    struct vision_runner f32;
    struct vision_samples s = {0};
    struct vision_ref rf = {0};
    float *scale = (float *)q->act_scale;
    int rc = vision_compile_mem(g, o, NULL, &blob, &len, NULL, err, errlen);
    if (!rc) {
        rc = vision_runner_open(&f32, blob, len, workers, err, errlen);
        const uint32_t ns = q->calib_max ? q->calib_max : VQ_AUTO_SAMPLES_DEFAULT;
        if (!rc)
            rc = q->calib_dir ? vision_samples_dir(&s, &f32.v, q->calib_dir, ns, err, errlen)
                              : vision_samples_synth(&s, &f32.v, o->n_mean || o->n_std,
                                                     VISION_SYNTH_TUNE, ns, err, errlen);
        if (!rc)
            rc = vision_ref_make(&rf, &f32, &s, err, errlen);
        vision_runner_close(&f32);
    }
    if (!rc && !scale)
        rc = vq_calibrate(g, o, q, &scale, err, errlen);

    /* every candidate at 8 bits, then each alone at 4 */
    struct vq_opts tq = *q;
    tq.bits = 8, tq.keep_ends = 0, tq.act_scale = scale, tq.over = over;
    if (q->n_over)
        memcpy(over, q->over, q->n_over * sizeof *over);
    double base = 0;
    tq.n_over = q->n_over;
    if (!rc)
        rc = score(g, o, &tq, workers, &rf, &s, &base, err, errlen);
    tq.n_over = q->n_over + 1;
    for (uint32_t k = 0; !rc && k < n_c; k++) {
        snprintf(over[q->n_over].node, sizeof over[q->n_over].node, "%s", g->n[c[k].node].name);
        over[q->n_over].bits = 4;
        rc = score(g, o, &tq, workers, &rf, &s, &c[k].score, err, errlen);
        c[k].sens = c[k].score - base;
    }

    if (!rc) {
        qsort(c, n_c, sizeof *c, by_sens);
        const double allow = ao->budget * (double)total;
        uint64_t used = fixed8;
        for (uint32_t k = 0; k < n_c; k++) {
            c[k].bits = 4;
            if (c[k].sens > 0 && (double)(used + c[k].params) <= allow) {
                c[k].bits = 8;
                used += c[k].params;
            }
            over[q->n_over + k].bits = c[k].bits;
            snprintf(over[q->n_over + k].node, sizeof over[q->n_over + k].node, "%s",
                     g->n[c[k].node].name);
        }
        *n_over = q->n_over + n_c;
        if (ao->report) {
            if (first >= 0)
                fprintf(ao->report,
                        "auto-precision: the first and the last weighted node (%s, %s) stay at 8 "
                        "bits, not measured (--precision NODE=q4 sets one to 4)\n",
                        g->n[first].name, g->n[last].name);
            fprintf(ao->report,
                    "auto-precision: %u weighted nodes measured on %u %s inputs; every node at 8 "
                    "bits scores %.4g (rms error / max |f32|)\n"
                    "%-40s %10s %12s %12s %5s\n",
                    n_c, s.n, s.synthetic ? "synthetic tuning" : "--calib", base, "node", "weights",
                    "alone at q4", "sensitivity", "bits");
            for (uint32_t k = 0; k < n_c; k++)
                fprintf(ao->report, "%-40s %10llu %12.4g %12.4g %5s\n", g->n[c[k].node].name,
                        (unsigned long long)c[k].params, c[k].score, c[k].sens,
                        c[k].bits == 8 ? "q8" : "q4");
            fprintf(ao->report,
                    "auto-precision: %.1f %% of the weights at 8 bits (budget %.1f %%)\n",
                    total ? 100.0 * (double)used / (double)total : 0.0, 100.0 * ao->budget);
        }
    }
    vision_ref_free(&rf);
    vision_samples_free(&s);
    free(c);
    if (rc && scale != q->act_scale)
        free(scale);
    if (!rc) {
        *act_scale = scale;
        *act_owned = scale != q->act_scale;
    }
    return rc;
}
