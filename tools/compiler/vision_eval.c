/* vision_eval.h: f32 reference outputs and a candidate's differences. */
#include "tools/compiler/vision_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/util/tool_util.h"

static const uint8_t *const *sample(const struct vision_samples *s, uint32_t i)
{
    return (const uint8_t *const *)&s->data[(size_t)i * s->n_in];
}

int vision_ref_make(struct vision_ref *rf, struct vision_runner *f32,
                    const struct vision_samples *s, char *err, size_t errlen)
{
    memset(rf, 0, sizeof *rf);
    const uint32_t n_out = f32->v.n_io - f32->v.n_inputs;
    rf->out = calloc((size_t)s->n * n_out + 1, sizeof *rf->out);
    rf->len = calloc(n_out + 1, sizeof *rf->len);
    rf->max_ref = calloc(n_out + 1, sizeof *rf->max_ref);
    if (!rf->out || !rf->len || !rf->max_ref) {
        vision_ref_free(rf);
        return nib_fail(err, errlen, "out of memory");
    }
    rf->n_out = n_out;
    for (uint32_t i = 0; i < s->n; i++) {
        rf->n_samples = i + 1;
        if (vision_runner_run(f32, sample(s, i), err, errlen)) {
            vision_ref_free(rf);
            return -1;
        }
        for (uint32_t j = 0; j < n_out; j++) {
            uint64_t n;
            const float *o = vision_runner_out(f32, j, &n);
            float *c = malloc(n * sizeof *c + 1);
            if (!c) {
                vision_ref_free(rf);
                return nib_fail(err, errlen, "out of memory");
            }
            memcpy(c, o, n * sizeof *c);
            rf->out[(size_t)i * n_out + j] = c;
            rf->len[j] = n;
            for (uint64_t e = 0; e < n; e++)
                if (fabs(c[e]) > rf->max_ref[j])
                    rf->max_ref[j] = fabs(c[e]);
        }
    }
    return 0;
}

void vision_ref_free(struct vision_ref *rf)
{
    for (size_t i = 0; rf->out && i < (size_t)rf->n_samples * rf->n_out; i++)
        free(rf->out[i]);
    free(rf->out);
    free(rf->len);
    free(rf->max_ref);
    memset(rf, 0, sizeof *rf);
}

int vision_is_classifier(const struct nib_io_rec *rec)
{
    for (uint32_t d = 0; d + 1 < rec->rank; d++)
        if (rec->dims[d] != 1)
            return 0;
    return rec->rank >= 1 && rec->dims[rec->rank - 1] >= 2;
}

uint64_t vision_sequence_steps(const struct nib_io_rec *rec)
{
    return rec->rank == 3 && rec->dims[0] == 1 && rec->dims[1] > 1 && rec->dims[2] >= 2
               ? rec->dims[1]
               : 0;
}

static uint64_t argmax(const float *x, uint64_t n)
{
    uint64_t b = 0;
    for (uint64_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

int vision_compare(const struct vision_ref *rf, struct vision_runner *cand,
                   const struct vision_samples *s, struct vision_out_diff *d, char *err,
                   size_t errlen)
{
    if (cand->v.n_io - cand->v.n_inputs != rf->n_out || cand->v.n_inputs != s->n_in)
        return nib_fail(err, errlen,
                        "the candidate blob's inputs and outputs are not the f32 blob's");
    double *sum = calloc(2 * (size_t)rf->n_out + 1, sizeof *sum), *sq = sum + rf->n_out;
    if (!sum)
        return nib_fail(err, errlen, "out of memory");
    for (uint32_t j = 0; j < rf->n_out; j++) {
        memset(&d[j], 0, sizeof d[j]);
        d[j].max_ref = rf->max_ref[j];
        d[j].classifier = vision_is_classifier(&cand->v.io[cand->v.n_inputs + j]);
    }
    for (uint32_t i = 0; i < s->n; i++) {
        if (vision_runner_run(cand, sample(s, i), err, errlen)) {
            free(sum);
            return -1;
        }
        for (uint32_t j = 0; j < rf->n_out; j++) {
            uint64_t n;
            const float *q = vision_runner_out(cand, j, &n);
            const float *r = rf->out[(size_t)i * rf->n_out + j];
            if (n != rf->len[j]) {
                free(sum);
                return nib_fail(err, errlen, "output %u: %llu values, the f32 blob's %llu", j,
                                (unsigned long long)n, (unsigned long long)rf->len[j]);
            }
            for (uint64_t e = 0; e < n; e++) {
                double a = fabs((double)q[e] - (double)r[e]);
                if (!(a <= d[j].max_abs)) /* a NaN counts as infinitely far */
                    d[j].max_abs = isnan(a) ? INFINITY : a;
                sum[j] += isnan(a) ? INFINITY : a;
                sq[j] += isnan(a) ? INFINITY : a * a;
            }
            if (d[j].classifier)
                d[j].top1_same += argmax(q, n) == argmax(r, n);
            const uint64_t steps = vision_sequence_steps(&cand->v.io[cand->v.n_inputs + j]);
            for (uint64_t t = 0, w = steps ? n / steps : 0; t < steps; t++)
                d[j].steps_changed += argmax(q + t * w, w) != argmax(r + t * w, w);
            d[j].steps += steps;
        }
    }
    for (uint32_t j = 0; j < rf->n_out; j++) {
        const double cnt = (double)s->n * (double)rf->len[j];
        d[j].mean_abs = cnt > 0 ? sum[j] / cnt : 0;
        d[j].rms = cnt > 0 ? sqrt(sq[j] / cnt) : 0;
    }
    free(sum);
    return 0;
}

double vision_diff_score(const struct vision_out_diff *d, uint32_t n_out)
{
    double t = 0;
    for (uint32_t j = 0; j < n_out; j++)
        t += d[j].rms / (d[j].max_ref > 0 ? d[j].max_ref : 1.0);
    return n_out ? t / n_out : 0;
}
