/* vq_calibrate (vision_quant.h): the f32 plan run on calibration inputs,
 * one op at a time, and each value a weighted node reads measured right
 * after the op that completes it: its absmax and a histogram of |x|, from
 * which its int8 scale is chosen (docs/vision.md, "Quantisation"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "tools/compiler/vision_quant.h"
#include "tools/compiler/vision_samples.h"
#include "tools/util/tensor_file.h"
#include "tools/util/tool_util.h"

#define HIST_BINS 2048u

/* |x| of one value over every calibration input: bins of width range /
 * HIST_BINS; a larger value doubles the range and merges bins in pairs, so
 * the histogram depends only on the inputs and their order. */
struct hist {
    double n[HIST_BINS];
    double zeros;
    float range, amax;
};

static void hist_add(struct hist *h, const float *x, uint64_t n)
{
    float amax = 0.0f;
    for (uint64_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    if (amax > h->amax)
        h->amax = amax;
    if (h->range == 0.0f)
        h->range = amax;
    while (amax > h->range) {
        for (uint32_t b = 0; b < HIST_BINS / 2; b++)
            h->n[b] = h->n[2 * b] + h->n[2 * b + 1];
        memset(h->n + HIST_BINS / 2, 0, HIST_BINS / 2 * sizeof *h->n);
        h->range *= 2.0f;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            continue;
        float a = fabsf(x[i]);
        if (a == 0.0f) {
            h->zeros += 1.0;
            continue;
        }
        uint32_t b = (uint32_t)(a / h->range * (float)HIST_BINS);
        h->n[b < HIST_BINS ? b : HIST_BINS - 1] += 1.0;
    }
}

/* The scale of the clip c = (j + 1) / HIST_BINS * range with the least
 * expected squared error: values above c are clipped ((v - c)^2 at the bin
 * centre v), values below are rounded (step^2 / 12, step = c / 127);
 * exact zeros stay exact. Without clip (the default): absmax / 127. */
static float hist_scale(const struct hist *h, int clip)
{
    if (!(h->amax > 0.0f))
        return 1.0f / 127.0f; /* never non-zero in calibration: any scale holds 0 */
    if (!clip)
        return h->amax / 127.0f;
    const double w = (double)h->range / HIST_BINS;
    double best = -1.0;
    uint32_t best_j = HIST_BINS - 1;
    for (uint32_t j = HIST_BINS / 16; j < HIST_BINS; j++) {
        const double c = (j + 1) * w, step = c / 127.0;
        double e = 0.0, below = 0.0;
        for (uint32_t b = 0; b < HIST_BINS; b++) {
            const double v = (b + 0.5) * w;
            if (v > c)
                e += h->n[b] * (v - c) * (v - c);
            else
                below += h->n[b];
        }
        e += below * step * step / 12.0;
        if (best < 0.0 || e < best)
            best = e, best_j = j;
    }
    float c = (float)((best_j + 1) * w);
    return (c < h->amax ? c : h->amax) / 127.0f;
}

/* ---- calibration inputs ---- */

static uint32_t rng_next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}

/* Synthetic input i of an image record (planar pixels, integer arithmetic
 * only): i % 4 picks gradients, edges (blocks and stripes), noise, or dark
 * text-like strokes on a light page; the rest comes from a seed of i. */
static void synth_image(uint32_t i, uint32_t C, uint32_t H, uint32_t W, uint8_t *px)
{
    uint64_t s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(i + 1) * 0x100000001b3ull);
    for (int k = 0; k < 4; k++)
        rng_next(&s);
    const uint64_t plane = (uint64_t)H * W;
    switch (i % 4) {
    case 0: /* gradients, a direction and range per channel, light noise */
        for (uint32_t c = 0; c < C; c++) {
            uint32_t dir = rng_next(&s) % 3, lo = rng_next(&s) % 128, hi = 128 + rng_next(&s) % 128;
            for (uint32_t y = 0; y < H; y++)
                for (uint32_t x = 0; x < W; x++) {
                    uint64_t t = dir == 0   ? (uint64_t)x * 255 / (W > 1 ? W - 1 : 1)
                                 : dir == 1 ? (uint64_t)y * 255 / (H > 1 ? H - 1 : 1)
                                            : ((uint64_t)x + y) * 255 / (W + H > 2 ? W + H - 2 : 1);
                    int v = (int)(lo + t * (hi - lo) / 255) + (int)(rng_next(&s) % 9) - 4;
                    px[c * plane + (uint64_t)y * W + x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
        }
        break;
    case 1: { /* edges: blocks of random colours and stripes */
        uint32_t bs = 2 + rng_next(&s) % 16, cols[8][4];
        for (int k = 0; k < 8; k++)
            for (int c = 0; c < 4; c++)
                cols[k][c] = rng_next(&s) % 256;
        int stripes = rng_next(&s) % 2;
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x = 0; x < W; x++) {
                uint32_t k = stripes ? (x / bs) % 8 : ((x / bs) * 3 + (y / bs) * 5) % 8;
                for (uint32_t c = 0; c < C; c++)
                    px[c * plane + (uint64_t)y * W + x] = (uint8_t)cols[k][c % 4];
            }
        break;
    }
    case 2: /* noise */
        for (uint64_t j = 0; j < C * plane; j++)
            px[j] = (uint8_t)rng_next(&s);
        break;
    default: { /* text-like strokes: lines of short dark bars on a light page */
        uint32_t page = 200 + rng_next(&s) % 56, ink = rng_next(&s) % 80;
        memset(px, (int)page, C * plane);
        uint32_t lh = 8 + rng_next(&s) % (H / 2 > 8 ? H / 2 - 7 : 1);
        for (uint32_t y0 = rng_next(&s) % 4; y0 + 4 <= H; y0 += lh + 2) {
            for (uint32_t x0 = rng_next(&s) % 8; x0 + 2 <= W;) {
                uint32_t cw = 3 + rng_next(&s) % (lh > 4 ? lh : 4), th = 1 + (lh > 12);
                for (uint32_t st = 0; st < 3; st++) { /* three strokes per glyph */
                    int vert = rng_next(&s) % 2;
                    uint32_t ox = x0 + rng_next(&s) % cw, oy = y0 + rng_next(&s) % lh;
                    uint32_t len = vert ? lh : cw;
                    for (uint32_t t = 0; t < len; t++)
                        for (uint32_t d = 0; d < th; d++) {
                            uint32_t x = vert ? ox + d : x0 + t, y = vert ? y0 + t : oy + d;
                            if (x < W && y < H)
                                for (uint32_t c = 0; c < C; c++)
                                    px[c * plane + (uint64_t)y * W + x] = (uint8_t)ink;
                        }
                }
                x0 += cw + 1 + rng_next(&s) % 4;
            }
        }
        break;
    }
    }
}

/* Synthetic input i for record r into out (r->bytes bytes): an image
 * record ([1, C, H, W]) gets synth_image's pixels, as u8 or as value / 255
 * (what an image file gives, nib_tensor_load); anything else values in
 * [-1, 1] from a seed of i. */
static int synth_input(uint32_t i, const struct nib_io_rec *r, uint8_t *out)
{
    const uint64_t n = r->dtype == NIB_IO_F32 ? r->bytes / 4 : r->bytes;
    if (r->rank == 4 && r->dims[0] == 1) {
        uint8_t *px = r->dtype == NIB_IO_U8 ? out : malloc(n);
        if (!px)
            return -1;
        synth_image(i, r->dims[1], r->dims[2], r->dims[3], px);
        if (px != out) {
            for (uint64_t j = 0; j < n; j++)
                ((float *)(void *)out)[j] = (float)px[j] / 255.0f;
            free(px);
        }
        return 0;
    }
    uint64_t s = 0x2545f4914f6cdd1dull ^ (uint64_t)(i + 1);
    for (uint64_t j = 0; j < n; j++) {
        int v = (int)(rng_next(&s) % 2001) - 1000;
        if (r->dtype == NIB_IO_F32)
            ((float *)(void *)out)[j] = (float)v / 1000.0f;
        else
            out[j] = (uint8_t)(v + 1000) / 8;
    }
    return 0;
}

/* ---- the run ---- */

struct calib_run {
    struct vision_plan p;
    uint8_t *blob, *mem;
    struct nib_blob_view v;
    const struct nib_qkernels *qk;
    struct hist **h; /* per IR tensor: its histogram, or NULL */
    uint32_t *by_op; /* tracked tensors sorted by t_done */
    uint32_t n_tracked;
    struct vq_capture *cap; /* or NULL */
    const uint8_t *cap_t;   /* per IR tensor: 1 when captured */
    uint32_t img;           /* the calibration input being run */
};

static const struct vision_plan *sort_p;

static int by_done(const void *a, const void *b)
{
    int32_t x = sort_p->t_done[*(const uint32_t *)a], y = sort_p->t_done[*(const uint32_t *)b];
    return x < y ? -1 : x > y;
}

static void measure(struct calib_run *c, int32_t op, uint32_t *next)
{
    while (*next < c->n_tracked && c->p.t_done[c->by_op[*next]] == op) {
        uint32_t t = c->by_op[(*next)++];
        const struct vp_buf *b = &c->p.bufs[c->p.t_buf[t]];
        const float *x = (const float *)(const void *)(c->mem + b->off);
        if (c->h[t])
            hist_add(c->h[t], x, b->bytes / 4);
        if (c->cap && c->cap_t[t] && c->img < c->cap->n_img && c->cap->x[t])
            memcpy(c->cap->x[t] + (size_t)c->img * c->cap->elems[t], x,
                   c->cap->elems[t] * sizeof *x);
    }
}

/* One pass of the f32 plan on one worker, with the inputs already in mem. */
static void run_one(struct calib_run *c)
{
    uint32_t next = 0;
    measure(c, -1, &next);
    for (uint32_t i = 0; i < c->v.h->n_ops; i++) {
        nib_exec_op(c->qk, &c->v, c->mem, c->mem + c->v.h->wscratch_off, &c->v.ops[i], 1, 0, 0, 1);
        measure(c, (int32_t)i, &next);
    }
}

static void calib_free(struct calib_run *c, uint32_t n_t)
{
    for (uint32_t t = 0; c->h && t < n_t; t++)
        free(c->h[t]);
    free(c->h);
    free(c->by_op);
    free((void *)c->cap_t);
    free(c->mem);
    free(c->blob);
    vp_free(&c->p);
}

void vq_capture_free(struct vq_capture *cap)
{
    for (uint32_t t = 0; cap->x && t < cap->n_t; t++)
        free(cap->x[t]);
    free(cap->x);
    free(cap->elems);
    memset(cap, 0, sizeof *cap);
}

/* Room for the values read by the nodes of 4 bits, for as many inputs
 * (at most VQ_HESS_INPUTS) as VQ_HESS_BYTES holds, at least one. */
static int capture_init(const struct nx_graph *g, const struct calib_run *c, const uint8_t *bits,
                        uint32_t want, struct vq_capture *cap, uint8_t *cap_t)
{
    uint64_t per = 0;
    cap->n_t = g->n_t;
    cap->x = calloc(g->n_t + 1, sizeof *cap->x);
    cap->elems = calloc(g->n_t + 1, sizeof *cap->elems);
    if (!cap->x || !cap->elems)
        return -1;
    for (uint32_t i = 0; i < g->n_n; i++) {
        const int32_t t = g->n[i].in[0];
        if (bits[i] != 4 || !vq_weighted(g, i) || t < 0 || c->p.t_buf[t] < 0 || cap_t[t])
            continue;
        cap_t[t] = 1;
        cap->elems[t] = c->p.bufs[c->p.t_buf[t]].bytes / 4;
        per += cap->elems[t] * 4;
    }
    uint64_t n = per ? VQ_HESS_BYTES / per : want;
    n = n < 1 ? 1 : n > VQ_HESS_INPUTS ? VQ_HESS_INPUTS : n;
    cap->n_img = (uint32_t)(n < want ? n : want);
    for (uint32_t t = 0; t < g->n_t; t++)
        if (cap_t[t] && !(cap->x[t] = malloc(cap->elems[t] * cap->n_img * 4 + 4)))
            return -1;
    return 0;
}

int vq_calibrate(const struct nx_graph *g, const struct vision_opts *o, const struct vq_opts *q,
                 float **scale, char *err, size_t errlen)
{
    return vq_calibrate_capture(g, o, q, NULL, scale, NULL, err, errlen);
}

int vq_calibrate_capture(const struct nx_graph *g, const struct vision_opts *o,
                         const struct vq_opts *q, const uint8_t *bits, float **scale,
                         struct vq_capture *cap, char *err, size_t errlen)
{
    struct calib_run c;
    memset(&c, 0, sizeof c);
    float *own = NULL;
    if (!scale)
        scale = &own;
    *scale = NULL;
    if (cap)
        memset(cap, 0, sizeof *cap);
    uint64_t len;
    if (vp_lower(g, o, NULL, &c.p, err, errlen))
        return -1;
    vp_place(&c.p);
    int rc = -1;
    char why[400];
    if (vp_build_blob(&c.p, &c.blob, &len, err, errlen))
        goto out;
    if (nib_blob_open(&c.v, c.blob, len, 0, why, sizeof why)) {
        nib_fail(err, errlen, "calibration: %s", why);
        goto out;
    }
    c.qk = nib_exec_kernels(nib_cpu_isa()); /* every variant gives the same bits */
    c.mem = aligned_alloc(64, (c.v.h->act_size + 63) / 64 * 64);
    c.h = calloc(g->n_t + 1, sizeof *c.h);
    c.by_op = malloc((g->n_t + 1) * sizeof *c.by_op);
    *scale = calloc(g->n_t + 1, sizeof **scale);
    if (!c.mem || !c.h || !c.by_op || !*scale) {
        nib_fail(err, errlen, "out of memory");
        goto out;
    }
    memset(c.mem, 0, (c.v.h->act_size + 63) / 64 * 64);
    for (uint32_t k = 0; k < g->n_order; k++) {
        const uint32_t i = g->order[k];
        const int32_t t = g->n[i].in[0];
        if (!vq_weighted(g, i) || t < 0 || c.p.t_buf[t] < 0 || c.h[t])
            continue;
        if (!(c.h[t] = calloc(1, sizeof *c.h[t]))) {
            nib_fail(err, errlen, "out of memory");
            goto out;
        }
        c.by_op[c.n_tracked++] = (uint32_t)t;
    }
    sort_p = &c.p;
    qsort(c.by_op, c.n_tracked, sizeof *c.by_op, by_done);
    const uint32_t n_in = c.v.n_io && c.v.io ? g->n_inputs : 0;
    uint32_t want = q && q->calib_max ? q->calib_max : VQ_CALIB_DEFAULT;
    if (cap && bits) {
        uint8_t *ct = calloc(g->n_t + 1, 1);
        c.cap_t = ct, c.cap = cap;
        if (!ct || capture_init(g, &c, bits, want, cap, ct)) {
            nib_fail(err, errlen, "out of memory keeping calibration values for gptq");
            goto out;
        }
        if (scale == &own) /* scales not wanted: only the inputs kept */
            want = cap->n_img;
    }
    if (q && q->calib_dir) {
        if (n_in != 1) {
            nib_fail(err, errlen,
                     "--calib %s: the model has %u inputs; a calibration directory feeds a "
                     "model of one input (without --calib, the built-in set feeds every input)",
                     q->calib_dir, n_in);
            goto out;
        }
        char **names = NULL;
        uint32_t n = 0;
        if (vision_dir_files(q->calib_dir, &names, &n, why, sizeof why)) {
            nib_fail(err, errlen, "--calib %s", why);
            goto out;
        }
        if (n == 0) {
            nib_fail(err, errlen, "--calib %s: no input files in the directory", q->calib_dir);
            goto out;
        }
        const struct nib_io_rec *r = &c.v.io[0];
        for (uint32_t i = 0; i < n && i < want; i++) {
            size_t pl = strlen(q->calib_dir) + strlen(names[i]) + 2;
            char *path = malloc(pl);
            if (!path) {
                vision_dir_files_free(names, n);
                nib_fail(err, errlen, "out of memory");
                goto out;
            }
            snprintf(path, pl, "%s/%s", q->calib_dir, names[i]);
            int bad = nib_tensor_load(path, 0, r, c.mem + r->off, why, sizeof why);
            if (bad) {
                nib_fail(err, errlen, "--calib: %s (an input of %s %ux%ux%ux%u expected)", why,
                         r->name, r->dims[0], r->rank > 1 ? r->dims[1] : 1,
                         r->rank > 2 ? r->dims[2] : 1, r->rank > 3 ? r->dims[3] : 1);
                free(path);
                vision_dir_files_free(names, n);
                goto out;
            }
            free(path);
            run_one(&c);
            c.img++;
        }
        vision_dir_files_free(names, n);
    } else {
        for (uint32_t i = 0; i < want; i++) {
            for (uint32_t k = 0; k < n_in; k++)
                if (synth_input(i, &c.v.io[k], c.mem + c.v.io[k].off)) {
                    nib_fail(err, errlen, "out of memory");
                    goto out;
                }
            run_one(&c);
            c.img++;
        }
    }
    for (uint32_t k = 0; k < c.n_tracked; k++) {
        uint32_t t = c.by_op[k];
        (*scale)[t] = hist_scale(c.h[t], q && q->calib_clip && !q->calib_absmax);
    }
    if (cap && cap->n_img > c.img)
        cap->n_img = c.img; /* fewer inputs in the directory */
    rc = 0;
out:
    calib_free(&c, g->n_t);
    if (rc) {
        free(*scale);
        *scale = NULL;
        if (cap)
            vq_capture_free(cap);
    }
    free(own);
    return rc;
}
