#include "tests/kernels/qcheck.h"
#include "tests/kernels/check_util.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/isa.h"
#if NIB_HAVE_AVX2
#include "kernels/common/f32-avx2.h"
#elif NIB_HAVE_NEON
#include "kernels/common/f32-neon.h"
#else
#include "kernels/common/f32-math.h"
#endif

/* ---- small helpers ---- */

/* Activations for m rows of k inputs: mostly N(0,1)-like, with outliers,
 * an all-zero stretch and tiny values, so blocks differ in scale. */
static void random_x(uint64_t *s, float *x, size_t n)
{
    int style = (int)rnd_below(s, 4);
    for (size_t i = 0; i < n; i++) {
        float v = rnd_unit(s) + rnd_unit(s) + rnd_unit(s);
        if (style == 1 && rnd_below(s, 16) == 0)
            v *= 40.0f;
        if (style == 2 && i % 97 < 40)
            v = 0.0f;
        if (style == 3)
            v *= 1e-6f;
        x[i] = v;
    }
}

static const char *dt_name(uint32_t d)
{
    static const char *const names[] = {"f32", "q4", "q4a", "q4c", "q8c", "q4f", "q8f", "q4h"};
    return d < sizeof names / sizeof names[0] ? names[d] : "?";
}

/* The weight formats under test. */
struct fmt {
    uint32_t dtype, group;
};
static const struct fmt fmts[] = {
    {NIB_DT_Q4, 32},   {NIB_DT_Q4, 64},  {NIB_DT_Q4, 128},  {NIB_DT_Q4A, 32}, {NIB_DT_Q4A, 64},
    {NIB_DT_Q4A, 128}, {NIB_DT_Q4C, 0},  {NIB_DT_Q8C, 0},   {NIB_DT_Q8C, 32}, {NIB_DT_Q8C, 64},
    {NIB_DT_Q8C, 128}, {NIB_DT_Q4F, 16}, {NIB_DT_Q4F, 32},  {NIB_DT_Q8F, 16}, {NIB_DT_Q8F, 32},
    {NIB_DT_Q4H, 32},  {NIB_DT_Q4H, 64}, {NIB_DT_Q4H, 128},
};
#define N_FMTS (sizeof fmts / sizeof fmts[0])

/* An f32 scale or minimum of random sign: usually small, sometimes 0,
 * huge (1e25), tiny (1e-30) or subnormal, so the two fmas of q4f/q8f
 * meet every magnitude (all products stay finite). */
static float random_f32_param(uint64_t *s)
{
    float v = rnd_unit(s) * 0.05f;
    switch (rnd_below(s, 16)) {
    case 0: return 0.0f;
    case 1: return v * 1e25f;
    case 2: return v * 1e-30f;
    case 3: return v * 1e-38f; /* subnormal */
    case 4: return -0.0f;
    default: return v;
    }
}

/* Random packed weights: random codes, finite scales of random sign and
 * magnitude, zero points 0..15, minimums (q4f, q8f) of random sign and
 * magnitude. */
static uint8_t *random_w(uint64_t *s, const struct nib_qlayout *l)
{
    uint8_t *w = xalloc(l->size);
    for (uint64_t i = 0; i < l->size; i++)
        w[i] = (uint8_t)rnd(s);
    for (uint32_t r = 0; r < l->n_pad; r++)
        for (uint32_t j = 0; j < l->n_sgroups; j++) {
            float v = l->has_min ? random_f32_param(s) : rnd_unit(s) * 0.05f;
            if (l->has_min) {
                float mn = random_f32_param(s);
                memcpy(w + nib_ql_min_off(l, r, j), &mn, 4);
            }
            uint64_t off = nib_ql_scale_off(l, r, j);
            if (l->scale_bytes == 2) {
                uint16_t h = nib_f32_to_f16(v);
                memcpy(w + off, &h, 2);
            } else {
                memcpy(w + off, &v, 4);
            }
            if (l->has_zp)
                w[nib_ql_zp_off(l, r, j)] = (uint8_t)rnd_below(s, 16);
        }
    return w;
}

/* A quantized activation object for m rows of k (caller frees mem). */
static void *make_act(struct nib_qact *a, uint32_t m, uint32_t k, uint32_t block)
{
    size_t fp = nib_qact_footprint(m, k, block);
    void *mem = xalloc(fp ? fp : 64);
    if (!fp || nib_qact_init(a, mem, m, k, block)) {
        fprintf(stderr, "qcheck: bad activation parameters m=%u k=%u block=%u\n", m, k, block);
        abort();
    }
    return mem;
}

static uint32_t pick_k(uint64_t *s)
{
    static const uint32_t ks[] = {172, 32, 64, 96, 128, 160, 256, 320};
    uint32_t i = rnd_below(s, 12);
    return i < 8 ? ks[i] : 1 + rnd_below(s, 400);
}

/* ---- activation quantizer ---- */

int qcheck_qact(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                char *msg, size_t len)
{
    int nfail = 0;
    static const uint32_t blocks[] = {0, 16, 32, 64, 128};
    for (int iter = 0; iter < 300 && !nfail; iter++) {
        uint32_t k = iter < 10 ? 172 : pick_k(&seed), block = blocks[iter % 5], m = 2;
        struct nib_qact a, b;
        void *ma = make_act(&a, m, k, block), *mb = make_act(&b, m, k, block);
        memset(a.q, 0x55, (size_t)m * a.k_pad); /* padding must be rewritten */
        memset(b.q, 0x33, (size_t)m * b.k_pad);
        float *x = xalloc((size_t)m * k * sizeof *x);
        random_x(&seed, x, (size_t)m * k);
        if (iter == 5)
            x[k / 2] = NAN; /* defined and identical, if meaningless */
        for (uint32_t t = 0; t < m; t++) {
            ref->qact(&a, t, x + (size_t)t * k);
            var->qact(&b, t, x + (size_t)t * k);
        }
        if (memcmp(a.q, b.q, (size_t)m * a.k_pad))
            fail(&nfail, msg, len, "qact %s vs %s: q differ (k=%u block=%u)", var->name, ref->name,
                 k, block);
        else if (memcmp(a.scale, b.scale, (size_t)m * a.n_blocks * 4))
            fail(&nfail, msg, len, "qact %s vs %s: scales differ (k=%u block=%u)", var->name,
                 ref->name, k, block);
        else if (memcmp(a.sum, b.sum, (size_t)m * a.n_blocks * 4))
            fail(&nfail, msg, len, "qact %s vs %s: sums differ (k=%u block=%u)", var->name,
                 ref->name, k, block);
        free(ma), free(mb), free(x);
    }
    return nfail;
}

/* ---- GEMM vs reference ---- */

/* Run one GEMM into y (m x y_stride floats pre-filled with a canary). */
static void run_gemm(const struct nib_qkernels *kt, const struct nib_qlayout *l, const uint8_t *w,
                     const struct nib_qact *a, uint32_t m, float *y, size_t ys, const float *add,
                     uint32_t n0, uint32_t n1)
{
    for (size_t i = 0; i < (size_t)m * ys; i++)
        y[i] = -12345.0f;
    kt->gemm[l->dtype](l, w, a, m, y, ys, add, add ? ys + 3 : 0, n0, n1);
}

int qcheck_gemm(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                char *msg, size_t len)
{
    int nfail = 0;
    for (int iter = 0; iter < 600 && !nfail; iter++) {
        const struct fmt f = fmts[iter % N_FMTS];
        uint32_t n = 1 + rnd_below(&seed, 37), k = iter < 2 * (int)N_FMTS ? 172 : pick_k(&seed);
        uint32_t m = 1 + rnd_below(&seed, 6);
        struct nib_qlayout l;
        if (nib_qlayout_get(&l, f.dtype, f.group, n, k)) {
            fail(&nfail, msg, len, "layout %u/%u %ux%u refused", f.dtype, f.group, n, k);
            break;
        }
        uint8_t *w = random_w(&seed, &l);
        struct nib_qact a;
        void *am = make_act(&a, m, k, nib_qformat_act_block(f.dtype, f.group));
        float *x = xalloc((size_t)k * sizeof *x);
        for (uint32_t t = 0; t < m; t++) {
            random_x(&seed, x, k);
            ref->qact(&a, t, x);
        }
        size_t ys = n + 5;
        float *add = NULL;
        if (rnd_below(&seed, 2)) {
            add = xalloc((size_t)m * (ys + 3) * sizeof *add);
            random_x(&seed, add, (size_t)m * (ys + 3));
        }
        /* full range, an N-block split, or an unaligned range */
        uint32_t n0 = 0, n1 = n;
        switch (rnd_below(&seed, 3)) {
        case 1: n0 = n > 8 ? 8 * rnd_below(&seed, (n - 1) / 8 + 1) : 0; break;
        case 2:
            n0 = rnd_below(&seed, n);
            n1 = n0 + 1 + rnd_below(&seed, n - n0);
            break;
        }
        float *y0 = xalloc((size_t)m * ys * sizeof *y0), *y1 = xalloc((size_t)m * ys * sizeof *y1);
        run_gemm(ref, &l, w, &a, m, y0, ys, add, n0, n1);
        run_gemm(var, &l, w, &a, m, y1, ys, add, n0, n1);
        for (uint32_t t = 0; t < m && !nfail; t++)
            for (uint32_t r = 0; r < ys && !nfail; r++) {
                float u = y0[t * ys + r], v = y1[t * ys + r];
                int inside = r >= n0 && r < n1;
                if (memcmp(&u, &v, 4))
                    fail(&nfail, msg, len,
                         "gemm %s vs %s, %s/%u %ux%u m=%u rows [%u,%u) add=%d: token %u row %u: "
                         "%.9g vs %.9g",
                         var->name, ref->name, dt_name(f.dtype), f.group, n, k, m, n0, n1,
                         add != NULL, t, r, (double)v, (double)u);
                else if (!inside && u != -12345.0f)
                    fail(&nfail, msg, len, "gemm %s %s/%u: row %u outside [%u,%u) was written",
                         ref->name, dt_name(f.dtype), f.group, r, n0, n1);
                else if (inside && u == -12345.0f)
                    fail(&nfail, msg, len, "gemm %s %s/%u: row %u inside [%u,%u) was not written",
                         ref->name, dt_name(f.dtype), f.group, r, n0, n1);
            }
        free(w), free(am), free(x), free(add), free(y0), free(y1);
    }
    return nfail;
}

/* ---- GEMM over m tokens == m GEMVs ---- */

int qcheck_gemm_vs_gemv(const struct nib_qkernels *kt, uint64_t seed, char *msg, size_t len)
{
    int nfail = 0;
    for (int iter = 0; iter < 2 * (int)N_FMTS && !nfail; iter++) {
        const struct fmt f = fmts[iter % N_FMTS];
        uint32_t n = 1 + rnd_below(&seed, 37), k = iter < (int)N_FMTS ? 172 : pick_k(&seed), m = 9;
        struct nib_qlayout l;
        nib_qlayout_get(&l, f.dtype, f.group, n, k);
        uint8_t *w = random_w(&seed, &l);
        struct nib_qact a;
        void *am = make_act(&a, m, k, nib_qformat_act_block(f.dtype, f.group));
        float *x = xalloc((size_t)k * sizeof *x), *add = xalloc((size_t)m * n * sizeof *add);
        random_x(&seed, add, (size_t)m * n);
        for (uint32_t t = 0; t < m; t++) {
            random_x(&seed, x, k);
            kt->qact(&a, t, x);
        }
        float *yg = xalloc((size_t)m * n * sizeof *yg), *yv = xalloc((size_t)m * n * sizeof *yv);
        kt->gemm[f.dtype](&l, w, &a, m, yg, n, add, n, 0, n);
        for (uint32_t t = 0; t < m; t++) {
            struct nib_qact row = nib_qact_rows(&a, t, 1);
            nib_qgemv(kt, &l, w, &row, yv + (size_t)t * n, add + (size_t)t * n, 0, n);
        }
        if (memcmp(yg, yv, (size_t)m * n * sizeof *yg))
            fail(&nfail, msg, len, "%s: gemm of %u tokens != %u gemvs for %s/%u %ux%u", kt->name, m,
                 m, dt_name(f.dtype), f.group, n, k);
        free(w), free(am), free(x), free(add), free(yg), free(yv);
    }
    return nfail;
}

/* ---- against double precision ---- */

/* Weight (r, k) as scale * (code - zero point), or for q4f/q8f as
 * scale * code + *mn (both parts returned: the kernel rounds each part's
 * sum, so their magnitudes, not only the weight's, bound its error). */
static double dq_weight(const struct nib_qlayout *l, const uint8_t *w, uint32_t r, uint32_t k,
                        double *mn)
{
    *mn = 0;
    unsigned shift;
    uint64_t off = nib_ql_code_off(l, r, k, &shift);
    uint32_t j = k / l->gsize;
    int code = l->code_bits == 8 ? (int8_t)w[off] : (w[off] >> shift) & 15;
    int zp = l->has_zp ? w[nib_ql_zp_off(l, r, j)] : l->code_bits == 4 && !l->has_min ? 8 : 0;
    uint64_t so = nib_ql_scale_off(l, r, j);
    float s;
    if (l->scale_bytes == 2) {
        uint16_t h;
        memcpy(&h, w + so, 2);
        s = nib_f16_to_f32(h);
    } else {
        memcpy(&s, w + so, 4);
    }
    if (l->has_min) { /* q4f, q8f: s * code + min, in double */
        float m;
        memcpy(&m, w + nib_ql_min_off(l, r, j), 4);
        *mn = m;
        return (double)s * code;
    }
    if (l->sub) /* q4h: the sub-scale (random bits: any of -32..31) times D */
        s = (float)nib_q4h_sub(w + nib_q4h_fields_off(l, r / 8, j), l, k % l->gsize / l->sub,
                               r % 8) *
            s;
    return (double)s * (code - zp);
}

int qcheck_vs_double(const struct nib_qkernels *kt, uint64_t seed, char *msg, size_t len)
{
    int nfail = 0;
    for (int iter = 0; iter < 4 * (int)N_FMTS && !nfail; iter++) {
        const struct fmt f = fmts[iter % N_FMTS];
        uint32_t n = 1 + rnd_below(&seed, 37), k = iter < (int)N_FMTS ? 172 : pick_k(&seed);
        struct nib_qlayout l;
        nib_qlayout_get(&l, f.dtype, f.group, n, k);
        uint8_t *w = random_w(&seed, &l);
        struct nib_qact a;
        void *am = make_act(&a, 1, k, nib_qformat_act_block(f.dtype, f.group));
        float *x = xalloc((size_t)k * sizeof *x), *y = xalloc((size_t)n * sizeof *y);
        random_x(&seed, x, k);
        kt->qact(&a, 0, x);
        nib_qgemv(kt, &l, w, &a, y, NULL, 0, n);
        for (uint32_t r = 0; r < n && !nfail; r++) {
            double sum = 0, mag = 0;
            for (uint32_t i = 0; i < k; i++) {
                double mn, wc = dq_weight(&l, w, r, i, &mn),
                           av = (double)a.q[i] * a.scale[i / a.block];
                sum += wc * av + mn * av;
                mag += fabs(wc * av) + fabs(mn * av);
            }
            if (fabs(y[r] - sum) > 1e-5 * mag + 1e-30)
                fail(&nfail, msg, len, "%s %s/%u %ux%u row %u: %.9g, double gives %.9g", kt->name,
                     dt_name(f.dtype), f.group, n, k, r, (double)y[r], sum);
        }
        free(w), free(am), free(x), free(y);
    }
    return nfail;
}

/* ---- worst-case magnitudes ---- */

int qcheck_worst_case(const struct nib_qkernels *kt, char *msg, size_t len)
{
    int nfail = 0;
    static const struct fmt wf[] = {{NIB_DT_Q4, 32},   {NIB_DT_Q4, 64},  {NIB_DT_Q4, 128},
                                    {NIB_DT_Q4A, 128}, {NIB_DT_Q4C, 0},  {NIB_DT_Q8C, 0},
                                    {NIB_DT_Q8C, 128}, {NIB_DT_Q4F, 16}, {NIB_DT_Q4F, 32},
                                    {NIB_DT_Q8F, 16},  {NIB_DT_Q8F, 32}};
    for (size_t fi = 0; fi < sizeof wf / sizeof wf[0]; fi++) {
        const struct fmt f = wf[fi];
        const uint32_t n = 16, k = 1024;
        const int q8 = f.dtype == NIB_DT_Q8C || f.dtype == NIB_DT_Q8F;
        struct nib_qlayout l;
        nib_qlayout_get(&l, f.dtype, f.group, n, k);
        uint8_t *w = xalloc(l.size);
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t j = 0; j < l.n_sgroups; j++) {
                uint64_t base = nib_ql_sgroup_off(&l, r / 8, j);
                memset(w + base, q8 ? 0x80 : 0xff, l.code_bytes); /* codes -128 / 15 */
                uint64_t so = nib_ql_scale_off(&l, r, j);
                if (l.scale_bytes == 2) {
                    uint16_t one = 0x3c00;
                    memcpy(w + so, &one, 2);
                } else {
                    float one = 1.0f;
                    memcpy(w + so, &one, 4);
                }
                if (l.has_zp)
                    w[nib_ql_zp_off(&l, r, j)] = 0;
                if (l.has_min) { /* minimum 1: the activation sums' fma too */
                    float one = 1.0f;
                    memcpy(w + nib_ql_min_off(&l, r, j), &one, 4);
                }
            }
        /* 4-bit: -128 is the worst (2*15*128 = 3840 per vpmaddubsw lane);
         * 8-bit: activations never hold -128, so -127 and +127. */
        const int avals[2] = {q8 ? -127 : -128, 127};
        for (int ai = 0; ai < 2; ai++) {
            struct nib_qact a;
            void *am = make_act(&a, 1, k, nib_qformat_act_block(f.dtype, f.group));
            memset(a.q, (uint8_t)(int8_t)avals[ai], k);
            for (uint32_t b = 0; b < a.n_blocks; b++) {
                a.scale[b] = 1.0f;
                a.sum[b] = avals[ai] * (int32_t)a.block;
            }
            int wcode = q8 ? -128 : 15, zp = q8 || l.has_zp || l.has_min ? 0 : 8;
            if (l.has_min)
                zp = -1; /* weight = code + 1 */
            /* every term is (wcode - zp) * aval; |total| < 2^24: exact in float */
            float expect = (float)((int64_t)(wcode - zp) * avals[ai] * k);
            float y[16];
            nib_qgemv(kt, &l, w, &a, y, NULL, 0, n);
            for (uint32_t r = 0; r < n; r++)
                if (y[r] != expect) {
                    fail(
                        &nfail, msg, len,
                        "%s %s/%u worst case (codes %d, activations %d): row %u = %.9g, exact %.9g",
                        kt->name, dt_name(f.dtype), f.group, wcode, avals[ai], r, (double)y[r],
                        (double)expect);
                    break;
                }
            free(am);
        }
        free(w);
    }
    return nfail;
}

/* ---- attention ---- */

/* A KV cache for the attention checks, in either layout the kernels take:
 * a position's KV heads side by side in rows of rs floats (padded or not),
 * or head by head as blobs lay it out, each head's ctx rows hs floats
 * after the last head's (a gap after them or not). */
struct kv_layout {
    size_t rs, hs, floats;
    int rows; /* heads side by side */
};

static struct kv_layout kv_layout_pick(uint64_t *s, uint32_t kvh, uint32_t hd, uint32_t ctx)
{
    struct kv_layout l;
    l.rows = (int)rnd_below(s, 2);
    if (l.rows) {
        l.rs = (size_t)kvh * hd + rnd_below(s, 3) * 4;
        l.hs = hd;
        l.floats = (size_t)ctx * l.rs;
    } else {
        l.rs = hd;
        l.hs = (size_t)ctx * hd + rnd_below(s, 3) * 4;
        l.floats = (size_t)kvh * l.hs;
    }
    return l;
}

int qcheck_attention(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                     char *msg, size_t len)
{
    /* 100 and 96 (openllama-3b, Phi-3): 64 dims, then what is left in
     * one block of chunks, the last partial or not; 60: eight chunks
     * left for one head, the last partial */
    static const uint32_t head_dims[] = {8, 48, 64, 20, 128, 36, 100, 96, 60};
    const int n_dims = (int)(sizeof head_dims / sizeof head_dims[0]);
    uint64_t s = seed * 7919u + 3;
    int nfail = 0;
    for (int round = 0; round < 4 * n_dims && !nfail; round++) {
        /* 1..8 query heads per KV head: the AVX2 kernel takes up to 4 at
         * once; with KV groups of one head, up to 20 heads (llama-3b's
         * kind), so a step over several such heads is reached */
        uint32_t hd = head_dims[round % n_dims], group = 1 + rnd_below(&s, 8),
                 kvh = 1 + rnd_below(&s, group == 1 ? 20 : 3);
        uint32_t heads = kvh * group, ctx = 1 + rnd_below(&s, 300), pos = rnd_below(&s, ctx);
        const struct kv_layout lay = kv_layout_pick(&s, kvh, hd, ctx);
        const size_t rs = lay.rs, hs = lay.hs;
        float scale =
            1.0f / sqrtf((float)hd) * (round % 5 == 4 ? 60.0f : 1.0f); /* peaky softmax too */
        float *q = xalloc((size_t)heads * hd * 4), *kc = xalloc(lay.floats * 4);
        float *vc = xalloc(lay.floats * 4);
        float *o1 = xalloc((size_t)heads * hd * 4), *o2 = xalloc((size_t)heads * hd * 4);
        float *a1 = xalloc((size_t)heads * ctx * 4), *a2 = xalloc((size_t)heads * ctx * 4);
        random_x(&s, q, (size_t)heads * hd);
        random_x(&s, kc, lay.floats);
        random_x(&s, vc, lay.floats);
        if (round == 7)
            q[0] = __builtin_nanf(""); /* a NaN score: defined, identical */
        uint32_t hb = rnd_below(&s, heads), he = hb + 1 + rnd_below(&s, heads - hb);
        ref->attention(q, kc, vc, o1, a1, hb, he, hd, group, rs, hs, 0, pos, ctx, scale, 0.0f);
        var->attention(q, kc, vc, o2, a2, hb, he, hd, group, rs, hs, 0, pos, ctx, scale, 0.0f);
        if (memcmp(o1, o2, (size_t)heads * hd * 4) != 0)
            fail(&nfail, msg, len,
                 "attention %s vs %s: head_dim %u, heads %u (group %u), pos %u, heads [%u,%u): "
                 "outputs differ",
                 var->name, ref->name, hd, heads, group, pos, hb, he);
        /* And against double precision (the NaN round aside). */
        for (uint32_t h = hb; h < he && !nfail && round != 7; h++) {
            const float *qh = q + (size_t)h * hd;
            size_t off = (size_t)(h / group) * hs;
            /* A float score carries an absolute error up to about
             * hd * eps * scale * sum|q k|; the weights inherit it as a
             * relative error (a peaky softmax makes it visible). */
            double mx = -INFINITY, w[300], sum = 0, score_err = 0;
            for (uint32_t t = 0; t <= pos; t++) {
                double d = 0, a = 0;
                for (uint32_t i = 0; i < hd; i++) {
                    d += (double)qh[i] * kc[(size_t)t * rs + off + i];
                    a += fabs((double)qh[i] * kc[(size_t)t * rs + off + i]);
                }
                w[t] = d * scale;
                mx = w[t] > mx ? w[t] : mx;
                a *= 2.0 * hd * 6e-8 * scale;
                score_err = a > score_err ? a : score_err;
            }
            for (uint32_t t = 0; t <= pos; t++)
                sum += (w[t] = exp(w[t] - mx));
            for (uint32_t i = 0; i < hd; i++) {
                double o = 0, mag = 0;
                for (uint32_t t = 0; t <= pos; t++) {
                    o += w[t] / sum * vc[(size_t)t * rs + off + i];
                    mag += w[t] / sum * fabs(vc[(size_t)t * rs + off + i]);
                }
                if (fabs(o - o2[(size_t)h * hd + i]) > (1e-5 + score_err) * mag + 1e-30)
                    fail(&nfail, msg, len,
                         "attention %s: head %u dim %u: %.9g, double gives %.9g (sum of |terms| "
                         "%.3g, pos %u, hd %u, scale %g)",
                         var->name, h, i, o2[(size_t)h * hd + i], o, mag, pos, hd, scale);
            }
        }
        free(q), free(kc), free(vc), free(o1), free(o2), free(a1), free(a2);
    }
    return nfail;
}

/* ---- block views ---- */

int qcheck_qact_blocks(const struct nib_qkernels *kt, uint64_t seed, char *msg, size_t len)
{
    static const uint32_t blocks[] = {16, 32, 64, 128};
    uint64_t s = seed * 104729u + 11;
    int nfail = 0;
    for (int round = 0; round < 48 && !nfail; round++) {
        uint32_t block = blocks[round % 4], k = 1 + rnd_below(&s, 700), m = 1 + rnd_below(&s, 3);
        struct nib_qact a, b;
        void *ma = make_act(&a, m, k, block), *mb = make_act(&b, m, k, block);
        float *x = xalloc((size_t)k * 4);
        for (uint32_t t = 0; t < m; t++) {
            random_x(&s, x, k);
            kt->qact(&a, t, x);
            /* the same row in random runs of blocks */
            for (uint32_t b0 = 0; b0 < b.n_blocks;) {
                uint32_t b1 = b0 + 1 + rnd_below(&s, b.n_blocks - b0);
                struct nib_qact v = nib_qact_blocks(&b, t, b0, b1);
                kt->qact(&v, 0, x + (size_t)b0 * block);
                b0 = b1;
            }
        }
        if (memcmp(a.q, b.q, (size_t)m * a.k_pad) ||
            memcmp(a.scale, b.scale, (size_t)m * a.n_blocks * 4) ||
            memcmp(a.sum, b.sum, (size_t)m * a.n_blocks * 4))
            fail(&nfail, msg, len,
                 "qact %s: k %u block %u: quantizing by blocks differs from the whole row",
                 kt->name, k, block);
        free(ma), free(mb), free(x);
    }
    return nfail;
}

/* ---- f32 element-wise and reduction kernels ---- */

int qcheck_f32_ops(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                   char *msg, size_t len)
{
    static const uint32_t sizes[] = {1, 7, 8, 9, 64, 172, 288, 2048};
    uint64_t s = seed * 6151u + 5;
    int nfail = 0;
    float *x = xalloc(4096 * 4), *w = xalloc(4096 * 4), *o1 = xalloc(4096 * 4),
          *o2 = xalloc(4096 * 4);
    for (int round = 0; round < 32 && !nfail; round++) {
        uint32_t n = round < 8 ? sizes[round] : 1 + rnd_below(&s, 3000);
        random_x(&s, x, n);
        random_x(&s, w, n);
        /* rmsnorm */
        ref->rmsnorm(x, w, o1, n, 1e-5f);
        var->rmsnorm(x, w, o2, n, 1e-5f);
        if (memcmp(o1, o2, n * 4))
            fail(&nfail, msg, len, "rmsnorm %s vs %s: n %u: outputs differ", var->name, ref->name,
                 n);
        double ss = 0;
        for (uint32_t i = 0; i < n; i++)
            ss += (double)x[i] * x[i];
        double r = 1.0 / sqrt(ss / n + 1e-5);
        for (uint32_t i = 0; i < n && !nfail; i++) {
            double want = (double)w[i] * x[i] * r;
            if (fabs(o2[i] - want) > 1e-5 * fabs(want) + 1e-30)
                fail(&nfail, msg, len, "rmsnorm %s: n %u, [%u] = %.9g, double gives %.9g",
                     var->name, n, i, o2[i], want);
        }
        /* silu-mul, with large inputs (the exp clamps) and a NaN */
        for (uint32_t i = 0; i < n; i++)
            x[i] *= (round % 4 == 3) ? 60.0f : 4.0f;
        if (round == 5)
            x[n / 2] = __builtin_nanf("");
        ref->silu_mul(x, w, o1, n);
        var->silu_mul(x, w, o2, n);
        if (memcmp(o1, o2, n * 4))
            fail(&nfail, msg, len, "silu-mul %s vs %s: n %u: outputs differ", var->name, ref->name,
                 n);
        for (uint32_t i = 0; i < n && !nfail; i++) {
            if (x[i] != x[i])
                continue;
            double want = x[i] / (1.0 + exp(-(double)x[i])) * w[i];
            if (fabs(o2[i] - want) > 1e-5 * fabs(want) + 1e-30)
                fail(&nfail, msg, len, "silu-mul %s: a %.9g b %.9g gives %.9g, double %.9g",
                     var->name, x[i], w[i], o2[i], want);
        }
    }
    /* f32 GEMV: ragged K, split row ranges, with and without add */
    for (int round = 0; round < 24 && !nfail; round++) {
        uint32_t k = 1 + rnd_below(&s, 300), rows = 1 + rnd_below(&s, 12);
        uint32_t rb = rnd_below(&s, rows), re = rb + 1 + rnd_below(&s, rows - rb);
        float *wm = xalloc((size_t)rows * k * 4);
        random_x(&s, wm, (size_t)rows * k);
        random_x(&s, x, k);
        random_x(&s, w, rows);
        const float *add = round % 2 ? w : NULL;
        memset(o1, 0, rows * 4);
        memset(o2, 0, rows * 4);
        ref->gemv_f32(wm, x, o1, add, rb, re, k);
        var->gemv_f32(wm, x, o2, add, rb, re, k);
        if (memcmp(o1, o2, rows * 4))
            fail(&nfail, msg, len, "gemv f32 %s vs %s: %u x %u rows [%u,%u): outputs differ",
                 var->name, ref->name, rows, k, rb, re);
        for (uint32_t r = rb; r < re && !nfail; r++) {
            double d = 0, mag = 0;
            for (uint32_t i = 0; i < k; i++) {
                d += (double)wm[(size_t)r * k + i] * x[i];
                mag += fabs((double)wm[(size_t)r * k + i] * x[i]);
            }
            if (add)
                d += add[r], mag += fabs(add[r]);
            if (fabs(o2[r] - d) > 1e-6 * mag + 1e-30)
                fail(&nfail, msg, len, "gemv f32 %s: row %u of %u x %u: %.9g, double %.9g",
                     var->name, r, rows, k, o2[r], d);
        }
        free(wm);
    }
    /* RoPE over rows of heads: full and partial rotation, ragged ranges */
    static const uint32_t hds[] = {8, 20, 48, 64, 128};
    for (int round = 0; round < 40 && !nfail; round++) {
        uint32_t hd = hds[round % 5], heads = 1 + rnd_below(&s, 6), n = hd * heads;
        uint32_t rd = round % 3 == 0 ? hd : round % 3 == 1 ? hd / 2 / 2 * 2 : 6;
        if (rd == 0 || rd > hd)
            rd = hd;
        uint32_t b = 2 * rnd_below(&s, n / 2), e = b + 2 * rnd_below(&s, (n - b) / 2 + 1);
        float cs[128];
        for (uint32_t i = 0; i < rd; i += 2) {
            double ang = rnd_unit(&s) * 3.14159;
            cs[i] = (float)cos(ang);
            cs[i + 1] = (float)sin(ang);
        }
        random_x(&s, x, n);
        memcpy(o1, x, n * 4);
        memcpy(o2, x, n * 4);
        ref->rope_rows(o1, b, e, hd, rd, cs);
        var->rope_rows(o2, b, e, hd, rd, cs);
        if (memcmp(o1, o2, n * 4))
            fail(&nfail, msg, len,
                 "rope %s vs %s: head_dim %u rope_dim %u rows [%u,%u): outputs differ", var->name,
                 ref->name, hd, rd, b, e);
        for (uint32_t r = 0; r + 1 < n && !nfail; r += 2) {
            uint32_t i = r % hd;
            int rot = r >= b && r + 1 < e + 1 && r < e && i < rd;
            double a = x[r], bb = x[r + 1];
            double w0 = rot ? a * cs[i] - bb * cs[i + 1] : a,
                   w1 = rot ? a * cs[i + 1] + bb * cs[i] : bb;
            if (fabs(o2[r] - w0) > 1e-6 * (fabs(a) + fabs(bb)) ||
                fabs(o2[r + 1] - w1) > 1e-6 * (fabs(a) + fabs(bb)))
                fail(&nfail, msg, len,
                     "rope %s: head_dim %u rope_dim %u rows [%u,%u): pair %u wrong", var->name, hd,
                     rd, b, e, r);
        }
    }
    free(x), free(w), free(o1), free(o2);
    return nfail;
}

/* ---- tanh, GELU-mul, windowed and soft-capped attention ---- */

/* The spacing of floats at |t| (2^-149 among the subnormals). */
static double ulp_at(double t)
{
    t = fabs(t);
    return t < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(t) - 23);
}

/* nib_tanhf of n values through this build's SIMD form (scalar where
 * there is none, and for the tail). */
static void tanh_simd(const float *x, float *y, size_t n)
{
    size_t i = 0;
#if NIB_HAVE_AVX2
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, nib_tanh8_avx2(_mm256_loadu_ps(x + i)));
#elif NIB_HAVE_NEON
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, nib_tanh4_neon(vld1q_f32(x + i)));
#endif
    for (; i < n; i++)
        y[i] = nib_tanhf(x[i]);
}

int qcheck_tanh(char *msg, size_t len)
{
    enum { BATCH = 4096 };
    static const float special[] = {
        0.0f,  -0.0f,  INFINITY,       -INFINITY,       FLT_MAX,   -FLT_MAX,
        44.0f, -44.5f, 9.0f,           9.02f,           0x1p-149f, -1e-40f,
        0.75f, -0.75f, 0x1.7ffffep-1f, -0x1.7ffffep-1f, 1e-20f,    20.0f};
    float *x = xalloc(BATCH * 4), *y = xalloc(BATCH * 4), *ys = xalloc(BATCH * 4);
    int nfail = 0;
    double worst = 0, worst_x = 0;
    uint64_t bits = 0;
    int done = 0;
    while (!done && !nfail) {
        size_t n = 0;
        if (bits == 0) /* the special values first */
            for (; n < sizeof special / sizeof special[0]; n++)
                x[n] = special[n];
        /* every 4099th positive float (NaN excluded) and its negative */
        for (; n + 2 <= BATCH && !done; bits += 4099) {
            if (bits > 0x7f800000u) {
                done = 1;
                break;
            }
            uint32_t b = (uint32_t)bits;
            memcpy(&x[n], &b, 4);
            x[n + 1] = -x[n];
            n += 2;
        }
        for (size_t i = 0; i < n; i++)
            y[i] = nib_tanhf(x[i]);
        tanh_simd(x, ys, n);
        for (size_t i = 0; i < n && !nfail; i++) {
            double want = tanh((double)x[i]), err = fabs(y[i] - want) / ulp_at(want);
            uint32_t bx, by;
            memcpy(&bx, &x[i], 4);
            memcpy(&by, &y[i], 4);
            if (memcmp(&y[i], &ys[i], 4))
                fail(&nfail, msg, len, "tanh(%a): scalar %a, SIMD form %a", (double)x[i],
                     (double)y[i], (double)ys[i]);
            else if ((bx ^ by) >> 31) /* odd, signed zeros included */
                fail(&nfail, msg, len, "tanh(%a) = %a: wrong sign", (double)x[i], (double)y[i]);
            else if (!(err <= 1.1)) /* exhaustively 1.05 at most */
                fail(&nfail, msg, len, "tanh(%.9g) = %.9g, double gives %.9g: %.2f ulp",
                     (double)x[i], (double)y[i], want, err);
            if (err > worst)
                worst = err, worst_x = x[i];
        }
    }
    float nan = __builtin_nanf(""), t = nib_tanhf(nan);
    if (!nfail && t == t)
        fail(&nfail, msg, len, "tanh(NaN) = %g", (double)t);
    if (!nfail && worst < 0.5) /* a sweep that found nothing to round is no test */
        fail(&nfail, msg, len, "tanh sweep: worst error only %.3f ulp (at %g)?", worst, worst_x);
    free(x), free(y), free(ys);
    return nfail;
}

int qcheck_gelu_mul(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                    char *msg, size_t len)
{
    static const uint32_t sizes[] = {1, 3, 4, 7, 8, 9, 64, 172, 2048};
    static const float special[] = {
        0.0f,  -0.0f,  0x1p-149f, -0x1p-149f, 1e-40f,   -1e-40f,   1e-30f, -1e-30f, 0.5f, -0.5f,
        3.0f,  -3.0f,  8.0f,      -8.0f,      9.5f,     -9.5f,     20.0f,  -20.0f,  1e3f, -1e3f,
        1e20f, -1e20f, FLT_MAX,   -FLT_MAX,   INFINITY, -INFINITY, -5.9f,  -6.2f};
    const size_t n_special = sizeof special / sizeof special[0];
    const double k = sqrt(2.0 / 3.14159265358979323846);
    uint64_t s = seed * 7877u + 9;
    int nfail = 0;
    float *x = xalloc(4096 * 4), *b = xalloc(4096 * 4), *o1 = xalloc(4096 * 4),
          *o2 = xalloc(4096 * 4);
    for (int round = 0; round < 40 && !nfail; round++) {
        uint32_t n = round < 9 ? sizes[round] : 1 + rnd_below(&s, 3000);
        random_x(&s, x, n);
        random_x(&s, b, n);
        for (uint32_t i = 0; i < n; i++) {
            switch (round % 4) {
            case 1: x[i] *= 4.0f; break;
            case 2: x[i] *= 30.0f; break;
            case 3: x[i] = ldexpf(rnd_unit(&s), (int)rnd_below(&s, 200) - 140); break;
            }
            if (round % 2)
                b[i] = 1.0f; /* gelu itself */
        }
        for (uint32_t i = 0; i < n && i < n_special; i++) /* the specials, in every lane */
            x[(i * 7 + (uint32_t)round) % n] = special[(i + (uint32_t)round) % n_special];
        if (round == 5)
            x[n / 2] = __builtin_nanf("");
        ref->gelu_mul(x, b, o1, n);
        var->gelu_mul(x, b, o2, n);
        if (memcmp(o1, o2, n * 4))
            fail(&nfail, msg, len, "gelu-mul %s vs %s: n %u: outputs differ", var->name, ref->name,
                 n);
        for (uint32_t i = 0; i < n && !nfail; i++) {
            double xi = x[i], u = k * (xi + 0.044715 * xi * xi * xi);
            /* 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), without 1 + tanh's
             * cancellation for negative x */
            double want = xi / (1.0 + exp(-2.0 * u)) * b[i];
            if (!isfinite(xi) || !(fabs(want) <= FLT_MAX))
                continue;
            /* exp's argument carries a few roundings: its relative error
             * scales with |2u| (where the logistic term matters); below
             * exp's clamp (2u < -87) only an absolute bound is left */
            double e = exp(-2.0 * u), amp = fabs(2.0 * u) * e / (1.0 + e);
            double tol = (8.0 + 5.0 * amp) * 0x1p-24 * fabs(want) + 1e-37 * fabs(xi * b[i]) +
                         0x1p-149 * (1.0 + fabs(b[i])); /* gelu, then the product, subnormal */
            if (fabs(o2[i] - want) > tol)
                fail(&nfail, msg, len, "gelu-mul %s: a %.9g b %.9g gives %.9g, double %.9g",
                     var->name, xi, (double)b[i], (double)o2[i], want);
            /* and the tanh form as written, where 1 + tanh u keeps its digits */
            double tform = 0.5 * xi * (1.0 + tanh(u)) * b[i];
            if (xi >= -2.0 && fabs(o2[i] - tform) > tol)
                fail(&nfail, msg, len, "gelu-mul %s: a %.9g b %.9g gives %.9g, tanh form %.9g",
                     var->name, xi, (double)b[i], (double)o2[i], tform);
        }
    }
    free(x), free(b), free(o1), free(o2);
    return nfail;
}

int qcheck_attention_window(const struct nib_qkernels *ref, const struct nib_qkernels *var,
                            uint64_t seed, char *msg, size_t len)
{
    static const uint32_t head_dims[] = {8, 48, 64, 20, 128, 36, 256};
    static const float caps[] = {0.0f, 50.0f, 0.5f, 30.0f};
    uint64_t s = seed * 6007u + 1;
    int nfail = 0;
    for (int round = 0; round < 48 && !nfail; round++) {
        uint32_t hd = head_dims[round % 7], kvh = 1 + rnd_below(&s, 3),
                 group = 1 + rnd_below(&s, 8);
        uint32_t heads = kvh * group, ctx = 1 + rnd_below(&s, 300), pos = rnd_below(&s, ctx);
        uint32_t t0 = round % 3 == 0 ? 0 : round % 3 == 1 ? pos : rnd_below(&s, pos + 1);
        if (round % 6 == 5 && pos >= 16)
            t0 = pos - 15; /* a window of 16 */
        const struct kv_layout lay = kv_layout_pick(&s, kvh, hd, ctx);
        const size_t rs = lay.rs, hs = lay.hs;
        float cap = round % 8 == 7 ? 0.01f + 100.0f * (rnd_unit(&s) + 1.0f) : caps[round % 4];
        float scale = 1.0f / sqrtf((float)hd) * (round % 5 == 4 ? 60.0f : 1.0f);
        float *q = xalloc((size_t)heads * hd * 4), *kc = xalloc(lay.floats * 4);
        float *vc = xalloc(lay.floats * 4);
        float *o1 = xalloc((size_t)heads * hd * 4), *o2 = xalloc((size_t)heads * hd * 4),
              *o3 = xalloc((size_t)heads * hd * 4);
        float *a1 = xalloc((size_t)heads * ctx * 4), *a2 = xalloc((size_t)heads * ctx * 4);
        random_x(&s, q, (size_t)heads * hd);
        random_x(&s, kc, lay.floats);
        random_x(&s, vc, lay.floats);
        if (round % 4 == 2)
            for (size_t i = 0; i < (size_t)heads * hd; i++)
                q[i] *= 20.0f; /* cap 0.5 saturates: tanh is +-1 for most scores */
        /* keys outside the window are never read: NaN there poisons any
         * output that reads them */
        for (uint32_t t = 0; t < ctx; t++)
            if (t < t0 || t > pos)
                for (uint32_t g = 0; g < (lay.rows ? 1 : kvh); g++)
                    for (size_t i = 0; i < (lay.rows ? rs : hd); i++) /* a row's padding too */
                        kc[g * hs + t * rs + i] = vc[g * hs + t * rs + i] = __builtin_nanf("");
        const int nan_round = round == 11;
        if (nan_round)
            q[0] = __builtin_nanf(""); /* a NaN score under the cap: defined, identical */
        uint32_t hb = rnd_below(&s, heads), he = hb + 1 + rnd_below(&s, heads - hb);
        ref->attention(q, kc, vc, o1, a1, hb, he, hd, group, rs, hs, t0, pos, ctx, scale, cap);
        var->attention(q, kc, vc, o2, a2, hb, he, hd, group, rs, hs, t0, pos, ctx, scale, cap);
        /* the window t0..pos is the whole cache that starts at row t0 */
        var->attention(q, kc + (size_t)t0 * rs, vc + (size_t)t0 * rs, o3, a2, hb, he, hd, group, rs,
                       hs, 0, pos - t0, ctx, scale, cap);
        size_t ob = (size_t)hb * hd, on = (size_t)(he - hb) * hd;
        if (memcmp(o1 + ob, o2 + ob, on * 4) != 0)
            fail(&nfail, msg, len,
                 "attention %s vs %s: head_dim %u, heads %u (group %u), keys %u..%u, softcap %g, "
                 "heads [%u,%u): outputs differ",
                 var->name, ref->name, hd, heads, group, t0, pos, (double)cap, hb, he);
        else if (memcmp(o2 + ob, o3 + ob, on * 4) != 0)
            fail(&nfail, msg, len,
                 "attention %s: keys %u..%u differ from the same rows as a cache from 0 "
                 "(head_dim %u, softcap %g)",
                 var->name, t0, pos, hd, (double)cap);
        for (size_t i = ob; i < ob + on && !nfail && !nan_round; i++)
            if (!isfinite(o2[i]))
                fail(&nfail, msg, len, "attention %s: keys %u..%u read a key outside the window",
                     var->name, t0, pos);
        /* against double precision: the window's softmax of capped scores */
        for (uint32_t h = hb; h < he && !nfail && !nan_round; h++) {
            const float *qh = q + (size_t)h * hd;
            size_t off = (size_t)(h / group) * hs;
            double mx = -INFINITY, w[300], sum = 0, score_err = 0;
            for (uint32_t t = t0; t <= pos; t++) {
                double d = 0, a = 0;
                for (uint32_t i = 0; i < hd; i++) {
                    d += (double)qh[i] * kc[(size_t)t * rs + off + i];
                    a += fabs((double)qh[i] * kc[(size_t)t * rs + off + i]);
                }
                d *= scale;
                if (cap > 0)
                    d = cap * tanh(d / cap);
                w[t - t0] = d;
                mx = d > mx ? d : mx;
                /* the raw score's rounding (see qcheck_attention), which the
                 * cap never amplifies, plus the cap's own: tanh within
                 * 1.1 ulp, a division and a product */
                a = a * 2.0 * hd * 6e-8 * scale + (cap > 0 ? 4.0 * 0x1p-24 * cap : 0.0);
                score_err = a > score_err ? a : score_err;
            }
            for (uint32_t t = 0; t <= pos - t0; t++)
                sum += (w[t] = exp(w[t] - mx));
            for (uint32_t i = 0; i < hd; i++) {
                double o = 0, mag = 0;
                for (uint32_t t = t0; t <= pos; t++) {
                    o += w[t - t0] / sum * vc[(size_t)t * rs + off + i];
                    mag += w[t - t0] / sum * fabs(vc[(size_t)t * rs + off + i]);
                }
                if (fabs(o - o2[(size_t)h * hd + i]) > (1e-5 + 2.0 * score_err) * mag + 1e-30)
                    fail(&nfail, msg, len,
                         "attention %s: head %u dim %u: %.9g, double gives %.9g (keys %u..%u, "
                         "softcap %g, hd %u, scale %g)",
                         var->name, h, i, o2[(size_t)h * hd + i], o, t0, pos, (double)cap, hd,
                         scale);
            }
        }
        free(q), free(kc), free(vc), free(o1), free(o2), free(o3), free(a1), free(a2);
    }
    return nfail;
}
