/* The vision kernels against each other and against independent
 * references (tests/kernels/convcheck.h). */
#include "tests/kernels/convcheck.h"
#include "tests/kernels/check_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 40

static float *rand_f32(uint64_t *s, size_t n, float mag)
{
    float *p = xalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = rnd_unit(s) * mag;
    return p;
}

static int8_t *rand_s8(uint64_t *s, size_t n, int lo, int hi)
{
    int8_t *p = xalloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (int8_t)(lo + (int)rnd_below(s, (uint32_t)(hi - lo + 1)));
    return p;
}

/* A random valid shape; depthwise: groups == c_in == c_out. */
static void rand_shape(uint64_t *s, struct nib_conv_shape *sh, int depthwise)
{
    for (;;) {
        memset(sh, 0, sizeof *sh);
        uint32_t g = depthwise
                         ? (rnd_below(s, 3) == 0 ? 22 + rnd_below(s, 51) : 1 + rnd_below(s, 21))
                         : (rnd_below(s, 3) == 0 ? 1 + rnd_below(s, 4) : 1);
        uint32_t icg = depthwise ? 1 : 1 + rnd_below(s, 11),
                 ocg = depthwise
                           ? 1
                           : (rnd_below(s, 4) == 0 ? 20 + rnd_below(s, 21) : 1 + rnd_below(s, 19));
        sh->groups = g, sh->c_in = g * icg, sh->c_out = g * ocg;
        sh->kh = 1 + rnd_below(s, 5), sh->kw = 1 + rnd_below(s, 5);
        sh->stride_h = 1 + rnd_below(s, 3), sh->stride_w = 1 + rnd_below(s, 3);
        sh->dil_h = rnd_below(s, 4) == 0 ? 2 + rnd_below(s, 2) : 1;
        sh->dil_w = rnd_below(s, 4) == 0 ? 2 + rnd_below(s, 2) : 1;
        sh->h = 1 + rnd_below(s, 13), sh->w = 1 + rnd_below(s, 13);
        uint32_t span_h = sh->dil_h * (sh->kh - 1) + 1, span_w = sh->dil_w * (sh->kw - 1) + 1;
        sh->pad_top = rnd_below(s, span_h), sh->pad_left = rnd_below(s, span_w);
        uint32_t pb = rnd_below(s, span_h), pr = rnd_below(s, span_w);
        sh->oh = nib_conv_out_dim(sh->h, sh->kh, sh->stride_h, sh->pad_top, pb, sh->dil_h);
        sh->ow = nib_conv_out_dim(sh->w, sh->kw, sh->stride_w, sh->pad_left, pr, sh->dil_w);
        if (nib_conv_shape_ok(sh))
            return;
    }
}

/* Shapes that reach each path of the quantized convolution's integer part
 * (kernels/qconv.c), sizes random: 1x1 stride 1 with c_in a multiple of 32
 * (the input rows used in place), and the gathers beside it: c_in not a
 * multiple of 32, stride 2, 3x3 and 7x7/2 windows with pads (one copy per
 * kernel row), groups and horizontal dilation (one copy per tap), and the
 * in-place shape with an input not 32-byte aligned (gathered instead). */
#define FAST_SHAPES 10
#define FAST_MISALIGNED 9 /* 1x1 with c_in 64, the input at an odd address */
static void fast_shape(uint64_t *s, int which, struct nib_conv_shape *sh)
{
    static const struct {
        uint32_t c_in, k, stride, pad, groups, dil_w;
    } f[FAST_SHAPES] = {
        {32, 1, 1, 0, 1, 1}, {64, 1, 1, 0, 1, 1}, {96, 1, 1, 0, 1, 1}, {40, 1, 1, 0, 1, 1},
        {64, 1, 2, 0, 1, 1}, {32, 3, 1, 1, 1, 1}, {3, 7, 2, 3, 1, 1},  {64, 3, 2, 1, 2, 1},
        {33, 3, 1, 2, 1, 2}, {64, 1, 1, 0, 1, 1},
    };
    memset(sh, 0, sizeof *sh);
    sh->c_in = f[which].c_in, sh->c_out = 1 + rnd_below(s, 40);
    sh->groups = f[which].groups;
    sh->c_out = (sh->c_out + sh->groups - 1) / sh->groups * sh->groups;
    sh->kh = sh->kw = f[which].k;
    sh->stride_h = sh->stride_w = f[which].stride;
    sh->pad_top = sh->pad_left = f[which].pad;
    sh->dil_h = 1, sh->dil_w = f[which].dil_w;
    sh->h = 1 + rnd_below(s, 11), sh->w = 1 + rnd_below(s, 11);
    uint32_t span_w = sh->dil_w * (sh->kw - 1) + 1;
    sh->oh = nib_conv_out_dim(sh->h, sh->kh, sh->stride_h, sh->pad_top, sh->pad_top, 1);
    sh->ow = nib_conv_out_dim(sh->w, sh->kw, sh->stride_w, sh->pad_left,
                              sh->pad_left < span_w ? sh->pad_left : 0, sh->dil_w);
}

static void shape_str(const struct nib_conv_shape *s, char *b, size_t n)
{
    snprintf(b, n, "%ux%ux%u -> %ux%ux%u g%u k%ux%u s%u,%u p%u,%u d%u,%u", s->h, s->w, s->c_in,
             s->oh, s->ow, s->c_out, s->groups, s->kh, s->kw, s->stride_h, s->stride_w, s->pad_top,
             s->pad_left, s->dil_h, s->dil_w);
}

static int tap(uint32_t o, uint32_t t, uint32_t stride, uint32_t pad, uint32_t dil, uint32_t in,
               uint32_t *pos)
{
    long v = (long)o * stride - (long)pad + (long)t * dil;
    *pos = (uint32_t)v;
    return v >= 0 && v < (long)in;
}

static double act_d(double v, uint32_t act, double p0, double p1)
{
    double t;
    switch (act) {
    case NIB_ACT_RELU: return v > 0 ? v : 0;
    case NIB_ACT_CLIP: return v < p0 ? p0 : v > p1 ? p1 : v;
    case NIB_ACT_HSIGMOID:
    case NIB_ACT_HSWISH:
        t = p0 * v + p1;
        t = t < 0 ? 0 : t > 1 ? 1 : t;
        return act == NIB_ACT_HSWISH ? v * t : t;
    default: return v;
    }
}

/* The documented float activation, written independently of the kernels'
 * header (explicit fma, compares). */
static float act_f(float v, uint32_t act, float p0, float p1)
{
    float t;
    switch (act) {
    case NIB_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case NIB_ACT_CLIP: return v < p0 ? p0 : v > p1 ? p1 : v;
    case NIB_ACT_HSIGMOID:
    case NIB_ACT_HSWISH:
        t = fmaf(p0, v, p1);
        t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
        return act == NIB_ACT_HSWISH ? v * t : t;
    default: return v;
    }
}

static void rand_act(uint64_t *s, uint32_t *act, float *p0, float *p1)
{
    *act = rnd_below(s, NIB_ACT_COUNT);
    *p0 = *p1 = 0.0f;
    if (*act == NIB_ACT_CLIP)
        *p0 = -0.5f * (1.0f + rnd_unit(s)) * 0.5f, *p1 = 0.2f + (1.0f + rnd_unit(s));
    else if (*act == NIB_ACT_HSIGMOID)
        *p0 = rnd_below(s, 2) ? 0.2f : 1.0f / 6.0f + 0.3f * rnd_unit(s),
        *p1 = 0.5f + 0.2f * rnd_unit(s);
    else if (*act == NIB_ACT_HSWISH)
        *p0 = 1.0f / 6.0f, *p1 = 0.5f;
}

/* ---- f32 convolution ---- */

static int check_f32(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                     uint64_t seed, int depthwise, char *msg, size_t len)
{
    int nfail = 0;
    uint64_t s = seed * 7919 + (uint64_t)depthwise;
    for (int round = 0; round < ROUNDS && !nfail; round++) {
        struct nib_conv_shape sh;
        rand_shape(&s, &sh, depthwise);
        char what[160];
        shape_str(&sh, what, sizeof what);
        uint32_t icg = sh.c_in / sh.groups, ocg = sh.c_out / sh.groups;
        size_t nx = (size_t)sh.h * sh.w * sh.c_in, ny = (size_t)sh.oh * sh.ow * sh.c_out;
        size_t nw = (size_t)sh.c_out * icg * sh.kh * sh.kw;
        float *x = rand_f32(&s, nx, 2.0f), *w = rand_f32(&s, nw, 1.0f);
        struct nib_conv_epi e = {0};
        float *bias = rand_f32(&s, sh.c_out, 1.0f), *res = rand_f32(&s, ny, 1.0f);
        e.bias = rnd_below(&s, 2) ? bias : NULL;
        e.res = rnd_below(&s, 2) ? res : NULL;
        e.res_first = rnd_below(&s, 2);
        rand_act(&s, &e.act, &e.p0, &e.p1);
        size_t np = depthwise ? nib_dwconv_packed_f32_size(&sh) : nib_conv_packed_f32_size(&sh);
        float *wp = xalloc(np * sizeof(float));
        if (depthwise)
            nib_dwconv_pack_f32(&sh, w, wp);
        else
            nib_conv_pack_f32(&sh, w, wp);
        float *y0 = xalloc(ny * sizeof(float)), *y1 = xalloc(ny * sizeof(float));
        nib_conv_f32_fn fr = depthwise ? ref->dwconv_f32 : ref->conv_f32;
        nib_conv_f32_fn fv = depthwise ? var->dwconv_f32 : var->conv_f32;
        fr(&sh, x, wp, &e, y0, 0, sh.oh);
        uint32_t split = rnd_below(&s, sh.oh + 1);
        fv(&sh, x, wp, &e, y1, 0, split);
        fv(&sh, x, wp, &e, y1, split, sh.oh);
        if (memcmp(y0, y1, ny * sizeof(float))) {
            for (size_t i = 0; i < ny; i++)
                if (memcmp(&y0[i], &y1[i], 4)) {
                    fail(&nfail, msg, len, "%s%s: %s: output %zu: %s %.9g, %s %.9g",
                         depthwise ? "dw" : "", "conv f32", what, i, ref->name, y0[i], var->name,
                         y1[i]);
                    break;
                }
        }
        /* float64 reference from the OIHW weights */
        for (uint32_t oy = 0; oy < sh.oh && !nfail; oy++)
            for (uint32_t ox = 0; ox < sh.ow && !nfail; ox++)
                for (uint32_t o = 0; o < sh.c_out && !nfail; o++) {
                    uint32_t g = o / ocg;
                    double acc = 0, mag = 0;
                    for (uint32_t ky = 0; ky < sh.kh; ky++)
                        for (uint32_t kx = 0; kx < sh.kw; kx++) {
                            uint32_t iy, ix;
                            if (!tap(oy, ky, sh.stride_h, sh.pad_top, sh.dil_h, sh.h, &iy) ||
                                !tap(ox, kx, sh.stride_w, sh.pad_left, sh.dil_w, sh.w, &ix))
                                continue;
                            for (uint32_t ic = 0; ic < icg; ic++) {
                                double p =
                                    (double)x[((size_t)iy * sh.w + ix) * sh.c_in + g * icg + ic] *
                                    w[(((size_t)o * icg + ic) * sh.kh + ky) * sh.kw + kx];
                                acc += p, mag += fabs(p);
                            }
                        }
                    size_t i = ((size_t)oy * sh.ow + ox) * sh.c_out + o;
                    double v = acc;
                    if (e.bias)
                        v += e.bias[o], mag += fabs(e.bias[o]);
                    if (e.res && e.res_first)
                        v += e.res[i], mag += fabs(e.res[i]);
                    v = act_d(v, e.act, e.p0, e.p1);
                    if (e.res && !e.res_first)
                        v += e.res[i], mag += fabs(e.res[i]);
                    double tol = 3.0 * 1.2e-7 * (sh.kh * sh.kw * icg + 4) * (mag + 1e-30) +
                                 /* the epilogue's own roundings */
                                 4.0 * 1.2e-7 * (fabs(v) + fabs(e.p1));
                    if (!(fabs(y0[i] - v) <= tol))
                        fail(&nfail, msg, len,
                             "%sconv f32 %s vs float64: %s: output %zu: %.9g vs %.9g (tol %.3g, "
                             "act %u)",
                             depthwise ? "dw" : "", ref->name, what, i, y0[i], v, tol, e.act);
                }
        free(x), free(w), free(bias), free(res), free(wp), free(y0), free(y1);
    }
    return nfail;
}

int ccheck_conv_f32(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                    uint64_t seed, char *msg, size_t len)
{
    return check_f32(ref, var, seed, 0, msg, len);
}

int ccheck_dwconv_f32(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                      uint64_t seed, char *msg, size_t len)
{
    return check_f32(ref, var, seed, 1, msg, len);
}

/* ---- quantized convolution ---- */

/* The documented epilogue of one output from its exact integer sum. */
static void q_expect(const struct nib_qconv_epi *e, int64_t isum, float ws, float xs, size_t i,
                     uint32_t o, int8_t *q, float *f)
{
    float v = fmaf((float)isum, ws * xs, e->bias ? e->bias[o] : 0.0f);
    if (e->res && e->res_first)
        v = fmaf(e->res_scale, (float)e->res[i], v);
    if (e->res_f32 && e->res_first)
        v = v + e->res_f32[i];
    v = act_f(v, e->act, e->p0, e->p1);
    if (e->res && !e->res_first)
        v = fmaf(e->res_scale, (float)e->res[i], v);
    if (e->res_f32 && !e->res_first)
        v = v + e->res_f32[i];
    *f = v;
    double r = nearbyint((double)v * (double)(1.0f / e->y_scale));
    *q = (int8_t)(r < -127 ? -127 : r > 127 ? 127 : r);
}

static int check_s8(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                    uint64_t seed, int depthwise, char *msg, size_t len)
{
    int nfail = 0;
    uint64_t s = seed * 104729 + (uint64_t)depthwise;
    for (int round = 0; round < ROUNDS && !nfail; round++) {
        struct nib_conv_shape sh;
        /* after the random shapes, each fast path and its fallbacks once
         * per weight format (the first extreme round stays random) */
        int fast = depthwise ? -1 : round - (ROUNDS - 2 * FAST_SHAPES);
        do
            if (fast >= 0)
                fast_shape(&s, fast / 2, &sh);
            else
                rand_shape(&s, &sh, depthwise);
        while (!nib_conv_shape_ok(&sh));
        char what[160];
        shape_str(&sh, what, sizeof what);
        uint32_t dtype = fast >= 0                       ? (fast % 2 ? NIB_DT_Q8C : NIB_DT_Q4C)
                         : depthwise || rnd_below(&s, 2) ? NIB_DT_Q8C
                                                         : NIB_DT_Q4C;
        int lo = dtype == NIB_DT_Q4C ? -8 : -127, hi = -lo - (dtype == NIB_DT_Q4C);
        uint32_t icg = sh.c_in / sh.groups, ocg = sh.c_out / sh.groups;
        size_t nx = (size_t)sh.h * sh.w * sh.c_in, ny = (size_t)sh.oh * sh.ow * sh.c_out;
        size_t nw = (size_t)sh.c_out * icg * sh.kh * sh.kw;
        int8_t *x = rand_s8(&s, nx, -127, 127), *wq = rand_s8(&s, nw, lo, hi), *x_mem = x;
        if (fast / 2 == FAST_MISALIGNED) {
            x_mem = xalloc(nx + 1);
            memcpy(x_mem + 1, x, nx);
            free(x);
            x = x_mem + 1;
        }
        if (round == 0) /* the extremes everywhere: the int16 steps' headroom */
            for (size_t i = 0; i < nx; i++)
                x[i] = -127;
        if (round == 0)
            for (size_t i = 0; i < nw; i++)
                wq[i] = (int8_t)lo;
        float *ws = rand_f32(&s, sh.c_out, 1.0f), *bias = rand_f32(&s, sh.c_out, 1.0f);
        int8_t *res = rand_s8(&s, ny, -127, 127);
        float *res_f = rand_f32(&s, ny, 2.5f);
        float xs = 0.01f + 0.02f * (1.0f + rnd_unit(&s));
        /* weight scales that put a typical sum near +-2, so most int8
         * outputs land inside the range rather than on its ends */
        double typical = sqrt((double)sh.kh * sh.kw * icg) * 73.0 * (lo == -8 ? 4.6 : 73.0);
        for (uint32_t o = 0; o < sh.c_out; o++)
            ws[o] = (float)((0.5 + 0.5 * fabs(ws[o])) * 2.0 / (xs * typical));
        struct nib_qconv_epi e = {0};
        e.bias = rnd_below(&s, 2) ? bias : NULL;
        uint32_t res_kind = rnd_below(&s, 3); /* none, int8, f32 (the plan's residual) */
        e.res = res_kind == 1 ? res : NULL;
        e.res_f32 = res_kind == 2 ? res_f : NULL;
        e.res_scale = (1.5f + rnd_unit(&s)) / 127.0f; /* residuals up to +-2.5 */
        e.res_first = rnd_below(&s, 2);
        rand_act(&s, &e.act, &e.p0, &e.p1);
        e.y_scale = (1.0f + 0.3f * rnd_unit(&s)) * 5.0f / 127.0f; /* outputs up to about +-5 */
        /* outputs: f32 only, int8 only, or both (the plan's qout 2: the
         * int8 codes of exactly the f32 values stored) */
        uint32_t out_kind = rnd_below(&s, 3);
        int f32_out = out_kind != 1, s8_out = out_kind != 0;
        int8_t *q0 = xalloc(ny), *q1 = xalloc(ny);
        float *f0 = xalloc(ny * 4), *f1 = xalloc(ny * 4);
        memset(f0, 0x7f, ny * 4), memset(f1, 0x7f, ny * 4); /* an output not asked for stays so */
        uint32_t split = rnd_below(&s, sh.oh + 1);
        if (depthwise) {
            int8_t *wp = xalloc(nib_dwconv_packed_s8_size(&sh));
            nib_dwconv_pack_s8(&sh, wq, wp);
            e.y_q = s8_out ? q0 : NULL, e.y_f32 = f32_out ? f0 : NULL;
            ref->dwconv_s8(&sh, x, xs, wp, ws, &e, 0, sh.oh);
            e.y_q = s8_out ? q1 : NULL, e.y_f32 = f32_out ? f1 : NULL;
            var->dwconv_s8(&sh, x, xs, wp, ws, &e, 0, split);
            var->dwconv_s8(&sh, x, xs, wp, ws, &e, split, sh.oh);
            free(wp);
        } else {
            uint8_t *wp = xalloc(nib_qconv_packed_size(&sh, dtype));
            if (nib_qconv_pack(&sh, dtype, wq, ws, wp)) {
                fail(&nfail, msg, len, "qconv pack refused valid codes: %s", what);
                break;
            }
            struct nib_qconv_weights wt = {dtype, wp};
            size_t ns = nib_qconv_scratch_size(&sh, dtype);
            void *scratch = xalloc(ns);
            /* the runtime hands over scratch another op wrote: nothing may
             * rely on zeros there (padding of a row, say) */
            memset(scratch, 0xa5, ns);
            e.y_q = s8_out ? q0 : NULL, e.y_f32 = f32_out ? f0 : NULL;
            ref->conv_s8(&sh, x, xs, &wt, &e, scratch, 0, sh.oh);
            e.y_q = s8_out ? q1 : NULL, e.y_f32 = f32_out ? f1 : NULL;
            var->conv_s8(&sh, x, xs, &wt, &e, scratch, 0, split);
            var->conv_s8(&sh, x, xs, &wt, &e, scratch, split, sh.oh);
            free(wp), free(scratch);
        }
        size_t inside = 0, live = 0;
        for (uint32_t oy = 0; oy < sh.oh && !nfail; oy++)
            for (uint32_t ox = 0; ox < sh.ow && !nfail; ox++)
                for (uint32_t o = 0; o < sh.c_out && !nfail; o++) {
                    uint32_t g = o / ocg;
                    int64_t isum = 0;
                    for (uint32_t ky = 0; ky < sh.kh; ky++)
                        for (uint32_t kx = 0; kx < sh.kw; kx++) {
                            uint32_t iy, ix;
                            if (!tap(oy, ky, sh.stride_h, sh.pad_top, sh.dil_h, sh.h, &iy) ||
                                !tap(ox, kx, sh.stride_w, sh.pad_left, sh.dil_w, sh.w, &ix))
                                continue;
                            for (uint32_t ic = 0; ic < icg; ic++)
                                isum +=
                                    (int64_t)x[((size_t)iy * sh.w + ix) * sh.c_in + g * icg + ic] *
                                    wq[(((size_t)o * icg + ic) * sh.kh + ky) * sh.kw + kx];
                        }
                    size_t i = ((size_t)oy * sh.ow + ox) * sh.c_out + o;
                    int8_t eq;
                    float ef;
                    q_expect(&e, isum, ws[o], xs, i, o, &eq, &ef);
                    if (isum) /* windows wholly in the padding give bias only */
                        live++, inside += eq > -127 && eq < 127 && eq != 0;
                    const char *k = depthwise             ? "dwconv s8"
                                    : dtype == NIB_DT_Q4C ? "conv q4c"
                                                          : "conv q8c";
                    const uint32_t untouched = 0x7f7f7f7fu;
                    if (!f32_out &&
                        (memcmp(&f0[i], &untouched, 4) || memcmp(&f1[i], &untouched, 4)))
                        fail(&nfail, msg, len, "%s s8 out: %s: output %zu written in f32 too", k,
                             what, i);
                    if (f32_out && (memcmp(&ef, &f0[i], 4) || memcmp(&ef, &f1[i], 4))) {
                        fail(&nfail, msg, len,
                             "%s f32 out%s: %s: output %zu (isum %lld): expected %.9g, %s %.9g, "
                             "%s %.9g",
                             k, s8_out ? " (and s8)" : "", what, i, (long long)isum, ef, ref->name,
                             f0[i], var->name, f1[i]);
                    } else if (s8_out && (q0[i] != eq || q1[i] != eq)) {
                        fail(&nfail, msg, len,
                             "%s s8 out%s: %s: output %zu (isum %lld, v %.9g): expected %d, %s "
                             "%d, %s %d",
                             k, f32_out ? " (and f32)" : "", what, i, (long long)isum, ef, eq,
                             ref->name, q0[i], var->name, q1[i]);
                    }
                }
        /* a check that only ever saw 0 and +-127 would prove little */
        if (!nfail && round > 0 && live >= 64 && inside * 8 < live)
            fail(&nfail, msg, len, "s8 check too weak: %zu of %zu outputs inside (-127, 127): %s",
                 inside, live, what);
        free(x_mem), free(wq), free(ws), free(bias), free(res), free(res_f), free(q0), free(q1),
            free(f0), free(f1);
    }
    return nfail;
}

int ccheck_conv_s8(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                   uint64_t seed, char *msg, size_t len)
{
    return check_s8(ref, var, seed, 0, msg, len);
}

int ccheck_dwconv_s8(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                     uint64_t seed, char *msg, size_t len)
{
    return check_s8(ref, var, seed, 1, msg, len);
}

/* ---- pooling ---- */

int ccheck_pool(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                uint64_t seed, char *msg, size_t len)
{
    int nfail = 0;
    uint64_t s = seed * 15485863;
    for (int round = 0; round < ROUNDS && !nfail; round++) {
        struct nib_conv_shape sh;
        rand_shape(&s, &sh, 1);
        uint32_t mode = rnd_below(&s, 3);
        if (round % 5 == 4) /* global pooling (a path of its own in the SIMD kernels) */
            nib_pool_global_shape(&sh, 1 + rnd_below(&s, 17), 1 + rnd_below(&s, 17),
                                  1 + rnd_below(&s, 40));
        char what[160];
        shape_str(&sh, what, sizeof what);
        uint32_t c = sh.c_out;
        size_t nx = (size_t)sh.h * sh.w * c, ny = (size_t)sh.oh * sh.ow * c;
        float *x = rand_f32(&s, nx, 3.0f), *y0 = xalloc(ny * 4), *y1 = xalloc(ny * 4);
        ref->pool_f32(&sh, mode, x, y0, 0, sh.oh);
        uint32_t split = rnd_below(&s, sh.oh + 1);
        var->pool_f32(&sh, mode, x, y1, 0, split);
        var->pool_f32(&sh, mode, x, y1, split, sh.oh);
        if (memcmp(y0, y1, ny * 4))
            fail(&nfail, msg, len, "pool mode %u %s != %s: %s", mode, var->name, ref->name, what);
        for (uint32_t oy = 0; oy < sh.oh && !nfail; oy++)
            for (uint32_t ox = 0; ox < sh.ow && !nfail; ox++)
                for (uint32_t ch = 0; ch < c && !nfail; ch++) {
                    double acc = mode == NIB_POOL_MAX ? -INFINITY : 0, mag = 0;
                    unsigned n = 0;
                    for (uint32_t ky = 0; ky < sh.kh; ky++)
                        for (uint32_t kx = 0; kx < sh.kw; kx++) {
                            uint32_t iy, ix;
                            if (!tap(oy, ky, sh.stride_h, sh.pad_top, sh.dil_h, sh.h, &iy) ||
                                !tap(ox, kx, sh.stride_w, sh.pad_left, sh.dil_w, sh.w, &ix))
                                continue;
                            double v = x[((size_t)iy * sh.w + ix) * c + ch];
                            acc = mode == NIB_POOL_MAX ? (v > acc ? v : acc) : acc + v;
                            mag += fabs(v), n++;
                        }
                    if (mode != NIB_POOL_MAX)
                        acc /= mode == NIB_POOL_AVG ? n : sh.kh * sh.kw, mag /= n ? n : 1;
                    double got = y0[((size_t)oy * sh.ow + ox) * c + ch];
                    double tol = mode == NIB_POOL_MAX ? 0 : 1.2e-7 * (sh.kh * sh.kw + 2) * mag;
                    int bad = mode == NIB_POOL_MAX             ? got != acc
                              : n == 0 && mode == NIB_POOL_AVG ? !isnan(got)
                                                               : !(fabs(got - acc) <= tol);
                    if (bad)
                        fail(&nfail, msg, len,
                             "pool mode %u %s vs float64: %s: (%u,%u,%u) %.9g vs %.9g", mode,
                             ref->name, what, oy, ox, ch, got, acc);
                }
        free(x), free(y0), free(y1);
    }
    return nfail;
}

/* ---- resize ---- */

static double coord_d(const struct nib_resize *r, int vertical, uint32_t o)
{
    double in = vertical ? r->h : r->w, out = vertical ? r->oh : r->ow;
    double scale = vertical ? r->scale_h : r->scale_w;
    switch (r->coord) {
    case NIB_RESIZE_HALF_PIXEL: return (o + 0.5) / scale - 0.5;
    case NIB_RESIZE_PYTORCH_HALF_PIXEL: return out > 1 ? (o + 0.5) / scale - 0.5 : 0;
    case NIB_RESIZE_ASYMMETRIC: return o / scale;
    default: return out > 1 ? o * (in - 1) / (out - 1) : 0;
    }
}

/* Nearest index, or -1 when the coordinate is too close to a rounding
 * boundary for float and double to be sure to agree. */
static long nearest_d(const struct nib_resize *r, double c, uint32_t in)
{
    double f = c - floor(c), ix;
    switch (r->nearest_mode) {
    case NIB_NEAREST_FLOOR:
    case NIB_NEAREST_CEIL:
        if (f < 1e-4 || f > 1 - 1e-4)
            return -1;
        ix = r->nearest_mode == NIB_NEAREST_FLOOR ? floor(c) : ceil(c);
        break;
    default:
        if (fabs(f - 0.5) < 1e-4)
            return -1;
        ix = floor(c + 0.5);
    }
    return ix < 0 ? 0 : ix > in - 1 ? (long)in - 1 : (long)ix;
}

int ccheck_resize(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                  uint64_t seed, char *msg, size_t len)
{
    int nfail = 0;
    uint64_t s = seed * 32452843;
    for (int round = 0; round < 2 * ROUNDS && !nfail; round++) {
        struct nib_resize r = {0};
        r.h = 1 + rnd_below(&s, 9), r.w = 1 + rnd_below(&s, 9), r.c = 1 + rnd_below(&s, 21);
        if (rnd_below(&s, 2)) { /* integer factors, as the detector's upsampling */
            uint32_t f = 1 + rnd_below(&s, 4);
            r.oh = r.h * f, r.ow = r.w * f;
        } else {
            r.oh = 1 + rnd_below(&s, 19), r.ow = 1 + rnd_below(&s, 19);
        }
        r.scale_h = (float)r.oh / (float)r.h, r.scale_w = (float)r.ow / (float)r.w;
        r.linear = rnd_below(&s, 2), r.coord = rnd_below(&s, 4), r.nearest_mode = rnd_below(&s, 4);
        char what[160];
        snprintf(what, sizeof what, "%ux%ux%u -> %ux%u %s coord %u nearest %u", r.h, r.w, r.c, r.oh,
                 r.ow, r.linear ? "linear" : "nearest", r.coord, r.nearest_mode);
        size_t nx = (size_t)r.h * r.w * r.c, ny = (size_t)r.oh * r.ow * r.c;
        float *x = rand_f32(&s, nx, 5.0f), *y0 = xalloc(ny * 4), *y1 = xalloc(ny * 4);
        ref->resize_f32(&r, x, y0, 0, r.oh);
        uint32_t split = rnd_below(&s, r.oh + 1);
        var->resize_f32(&r, x, y1, 0, split);
        var->resize_f32(&r, x, y1, split, r.oh);
        if (memcmp(y0, y1, ny * 4))
            fail(&nfail, msg, len, "resize %s != %s: %s", var->name, ref->name, what);
        for (uint32_t oy = 0; oy < r.oh && !nfail; oy++)
            for (uint32_t ox = 0; ox < r.ow && !nfail; ox++) {
                double cy = coord_d(&r, 1, oy), cx = coord_d(&r, 0, ox);
                for (uint32_t ch = 0; ch < r.c && !nfail; ch++) {
                    double want;
                    if (!r.linear) {
                        long iy = nearest_d(&r, cy, r.h), ix = nearest_d(&r, cx, r.w);
                        if (iy < 0 || ix < 0)
                            continue;
                        want = x[((size_t)iy * r.w + (size_t)ix) * r.c + ch];
                    } else {
                        double yy = cy < 0 ? 0 : cy > r.h - 1 ? r.h - 1 : cy;
                        double xx = cx < 0 ? 0 : cx > r.w - 1 ? r.w - 1 : cx;
                        size_t y0i = (size_t)floor(yy), x0i = (size_t)floor(xx);
                        size_t y1i = y0i + 1 < r.h ? y0i + 1 : r.h - 1;
                        size_t x1i = x0i + 1 < r.w ? x0i + 1 : r.w - 1;
                        double fy = yy - floor(yy), fx = xx - floor(xx);
#define X(a, b) ((double)x[((a)*r.w + (b)) * r.c + ch])
                        want = X(y0i, x0i) * (1 - fy) * (1 - fx) + X(y0i, x1i) * (1 - fy) * fx +
                               X(y1i, x0i) * fy * (1 - fx) + X(y1i, x1i) * fy * fx;
#undef X
                    }
                    double got = y0[((size_t)oy * r.ow + ox) * r.c + ch];
                    if (!(fabs(got - want) <= (r.linear ? 5.0 * 1e-5 : 0.0)))
                        fail(&nfail, msg, len, "resize %s vs float64: %s: (%u,%u,%u) %.9g vs %.9g",
                             ref->name, what, oy, ox, ch, got, want);
                }
            }
        free(x), free(y0), free(y1);
    }
    return nfail;
}

/* ---- refusals ---- */

int ccheck_rejects(char *msg, size_t len)
{
    int nfail = 0;
    struct nib_conv_shape ok = {.h = 5,
                                .w = 5,
                                .c_in = 4,
                                .oh = 5,
                                .ow = 5,
                                .c_out = 6,
                                .groups = 2,
                                .kh = 3,
                                .kw = 3,
                                .stride_h = 1,
                                .stride_w = 1,
                                .pad_top = 1,
                                .pad_left = 1,
                                .dil_h = 1,
                                .dil_w = 1};
    if (!nib_conv_shape_ok(&ok))
        fail(&nfail, msg, len, "a valid shape refused");
    struct nib_conv_shape b;
#define BAD(field, value)                                                                          \
    do {                                                                                           \
        b = ok;                                                                                    \
        b.field = value;                                                                           \
        if (nib_conv_shape_ok(&b))                                                                 \
            fail(&nfail, msg, len, "shape with " #field " = %lu accepted",                         \
                 (unsigned long)(value));                                                          \
    } while (0)
    BAD(h, 0);
    BAD(c_in, 0);
    BAD(groups, 0);
    BAD(groups, 3); /* does not divide */
    BAD(c_out, 5);  /* not divisible by the groups */
    BAD(stride_h, 0);
    BAD(dil_w, 0);
    BAD(kh, 0);
    BAD(pad_top, 3);  /* the whole window in the padding */
    BAD(oh, 9);       /* windows past the input */
    BAD(w, 1u << 17); /* huge */
    BAD(c_out, 1u << 21);
#undef BAD
    if (nib_conv_out_dim(2, 5, 1, 0, 0, 1) != 0 || nib_conv_out_dim(7, 3, 2, 1, 1, 1) != 4 ||
        nib_conv_out_dim(7, 3, 1, 0, 0, 2) != 3)
        fail(&nfail, msg, len, "nib_conv_out_dim");
    int8_t q[6 * 2 * 9];
    float sc[6] = {1, 1, 1, 1, 1, 1};
    memset(q, 0, sizeof q);
    q[17] = 8; /* beyond q4's [-8, 7] */
    uint8_t *dst = xalloc(nib_qconv_packed_size(&ok, NIB_DT_Q8C));
    if (nib_qconv_pack(&ok, NIB_DT_Q4C, q, sc, dst) != -1)
        fail(&nfail, msg, len, "q4c code 8 accepted");
    if (nib_qconv_pack(&ok, NIB_DT_Q8C, q, sc, dst) != 0)
        fail(&nfail, msg, len, "q8c code 8 refused");
    q[17] = -128;
    if (nib_qconv_pack(&ok, NIB_DT_Q8C, q, sc, dst) != -1)
        fail(&nfail, msg, len, "q8c code -128 accepted");
    if (nib_qconv_pack(&ok, NIB_DT_Q4, q, sc, dst) != -1 || nib_qconv_packed_size(&ok, NIB_DT_F32))
        fail(&nfail, msg, len, "a non per-channel format accepted");
    free(dst);
    struct nib_resize r = {.h = 4, .w = 4, .c = 3, .oh = 8, .ow = 8, .scale_h = 2, .scale_w = 2};
    if (!nib_resize_ok(&r))
        fail(&nfail, msg, len, "a valid resize refused");
    r.scale_w = 0.0f;
    if (nib_resize_ok(&r))
        fail(&nfail, msg, len, "resize with scale 0 accepted");
    r.scale_w = 2, r.coord = 9;
    if (nib_resize_ok(&r))
        fail(&nfail, msg, len, "resize with coordinate mode 9 accepted");
    return nfail;
}
