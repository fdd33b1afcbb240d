/* Weight quantizers and dequantizer (tools/compiler/quant.h).
 *
 * Determinism: the same weights give the same packed bytes on every build,
 * whether or not the compiler fuses a*b+c. Codes come from one IEEE
 * division and rintf; errors are measured in double, where d*q (24-bit
 * scale times a code of at most 8 bits) and e*e (e rounded to float
 * first) are exact products, so a fused and an unfused sum round alike;
 * q4f/q8f weights are formed by explicit fmaf, as the format defines. */
#include "tools/compiler/quant.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- format names ---- */

int nib_qspec_parse(const char *s, struct nib_qspec *spec, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        uint32_t dtype, group;
    } base[] = {
        {"f32", NIB_DT_F32, 0},  {"q4", NIB_DT_Q4, 32},    {"q4a", NIB_DT_Q4A, 32},
        {"q4c", NIB_DT_Q4C, 0},  {"q8c", NIB_DT_Q8C, 0},   {"q4f", NIB_DT_Q4F, 32},
        {"q8f", NIB_DT_Q8F, 32}, {"q4h", NIB_DT_Q4H, 128},
    };
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
        if (strlen(base[i].name) != n || strncmp(s, base[i].name, n))
            continue;
        spec->dtype = base[i].dtype;
        spec->group = base[i].group;
        if (slash) {
            char *end;
            unsigned long g = strtoul(slash + 1, &end, 10);
            if (!slash[1] || *end || g > 1024) {
                snprintf(err, errlen, "format '%s': the group after '/' must be a number", s);
                return -1;
            }
            spec->group = (uint32_t)g;
        }
        if (!nib_qformat_valid(spec->dtype, spec->group)) {
            snprintf(
                err, errlen,
                "format '%s': invalid group (q4, q4a and q4h take 32, 64 or 128; q8c takes none, "
                "32, 64 or 128; q4f and q8f take 16 or 32; f32 and q4c take none)",
                s);
            return -1;
        }
        return 0;
    }
    snprintf(err, errlen,
             "unknown format '%s' (expected f32, q4, q4a, q4c, q8c, q4f, q8f or q4h, optionally "
             "/GROUP)",
             s);
    return -1;
}

const char *nib_qspec_str(struct nib_qspec spec, char *buf, size_t len)
{
    static const char *const names[NIB_DT_COUNT] = {"f32", "q4",  "q4a", "q4c",
                                                    "q8c", "q4f", "q8f", "q4h"};
    const char *name = spec.dtype < NIB_DT_COUNT ? names[spec.dtype] : "?";
    if (spec.group)
        snprintf(buf, len, "%s/%u", name, spec.group);
    else
        snprintf(buf, len, "%s", name);
    return buf;
}

/* ---- writing codes, scales and zero points ---- */

static void put_code(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t k, int code)
{
    unsigned shift;
    uint64_t off = nib_ql_code_off(l, r, k, &shift);
    if (l->code_bits == 8) {
        out[off] = (uint8_t)(int8_t)code;
        return;
    }
    out[off] = (uint8_t)((out[off] & ~(0xfu << shift)) | ((unsigned)code & 0xfu) << shift);
}

static void put_scale(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t j,
                      struct nib_qgroup g)
{
    uint64_t off = nib_ql_scale_off(l, r, j);
    if (l->scale_bytes == 2)
        memcpy(out + off, &g.bits, 2);
    else
        memcpy(out + off, &g.scale, 4);
}

/* q4h: sub-scale s (-32..31) of row r, sub-block j (of the whole row), as
 * its 6-bit field s + 32 split into the low-nibble and high-pair words. */
static void put_sub(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t j, int s)
{
    const uint32_t ns = l->gsize / l->sub, rr = r % NIB_Q_TILE_N;
    uint8_t *super = out + nib_q4h_fields_off(l, r / NIB_Q_TILE_N, j / ns);
    const unsigned v = (unsigned)(s + 32) & 63, slo = 4 * (rr & 1), shi = 2 * (rr & 3);
    uint8_t *lo = super + nib_q4h_lo_off(l, j % ns) + rr / 2;
    uint8_t *hi = super + nib_q4h_hi_off(l, j % ns) + rr / 4;
    *lo = (uint8_t)((*lo & ~(15u << slo)) | (v & 15) << slo);
    *hi = (uint8_t)((*hi & ~(3u << shi)) | (v >> 4) << shi);
}

static void put_min(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t j, float m)
{
    memcpy(out + nib_ql_min_off(l, r, j), &m, 4);
}

/* ---- methods ---- */

int nib_qmethod_parse(const char *s, enum nib_qmethod *m, char *err, size_t errlen)
{
    for (int i = 0; i <= NIB_QM_GPTQ; i++)
        if (!strcmp(s, nib_qmethod_name((enum nib_qmethod)i))) {
            *m = (enum nib_qmethod)i;
            return 0;
        }
    snprintf(err, errlen, "unknown method '%s' (expected rtn, search or gptq)", s);
    return -1;
}

const char *nib_qmethod_name(enum nib_qmethod m)
{
    return m == NIB_QM_RTN ? "rtn" : m == NIB_QM_SEARCH ? "search" : "gptq";
}

/* ---- one group: codes and dequantized values ---- */

/* The scale as stored: rounded to f16 when the layout keeps f16. */
static struct nib_qgroup mkscale(const struct nib_qlayout *l, float d)
{
    struct nib_qgroup g = {.scale = d};
    if (l->scale_bytes == 2) {
        g.bits = nib_f32_to_f16(d);
        g.scale = nib_f16_to_f32(g.bits);
    }
    return g;
}

/* Code range of the layout, and the fixed zero point of the formats
 * without a stored one (q4, q4c: 8; q8c: 0). */
static void code_range(const struct nib_qlayout *l, int *lo, int *hi)
{
    if (l->dtype == NIB_DT_Q8F)
        *lo = -128, *hi = 127;
    else if (l->code_bits == 8)
        *lo = -127, *hi = 127;
    else
        *lo = 0, *hi = 15;
}

static int fixed_zp(const struct nib_qlayout *l)
{
    return l->code_bits == 4 && !l->has_min ? 8 : 0;
}

int nib_qgroup_code(const struct nib_qlayout *l, const struct nib_qgroup *g, float x, float *deq)
{
    int lo, hi;
    code_range(l, &lo, &hi);
    if (l->has_min) {
        float q = g->scale != 0.0f ? __builtin_rintf((x - g->min) / g->scale) : 0.0f;
        q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
        *deq = __builtin_fmaf(g->scale, q, g->min);
        return (int)q;
    }
    const int zp = l->has_zp ? g->zp : fixed_zp(l);
    float q = g->scale != 0.0f ? __builtin_rintf(x / g->scale) : 0.0f; /* ties to even, inline */
    const float qlo = (float)(lo - zp), qhi = (float)(hi - zp);
    q = q < qlo ? qlo : q > qhi ? qhi : q;
    *deq = q * g->scale;
    return (int)q + zp;
}

/* Codes of x[0..n) under g and the squared error weighted by w (NULL: 1).
 * Errors are rounded to float before squaring, so the sum does not depend
 * on the compiler contracting a*b+c. */
static double fit(const struct nib_qlayout *l, const struct nib_qgroup *g, const float *x,
                  const float *w, uint32_t n, int *codes)
{
    double sse = 0;
    if (!l->has_min && g->scale != 0.0f) {
        /* nib_qgroup_code's arithmetic with its constants hoisted: codes of
         * a chunk first (a loop the compiler can vectorize), then the sum
         * in order */
        int lo, hi;
        code_range(l, &lo, &hi);
        const int zp = l->has_zp ? g->zp : fixed_zp(l);
        const float s = g->scale, qlo = (float)(lo - zp), qhi = (float)(hi - zp);
        for (uint32_t i0 = 0; i0 < n; i0 += 64) {
            const uint32_t m = n - i0 < 64 ? n - i0 : 64;
            float q[64];
            for (uint32_t i = 0; i < m; i++) {
                float v = __builtin_rintf(x[i0 + i] / s);
                q[i] = v < qlo ? qlo : v > qhi ? qhi : v;
            }
            for (uint32_t i = 0; i < m; i++) {
                float e = (float)((double)x[i0 + i] - (double)(q[i] * s));
                double e2 = (double)e * e;
                sse += w ? e2 * w[i0 + i] : e2;
                if (codes)
                    codes[i0 + i] = (int)q[i] + zp;
            }
        }
        return sse;
    }
    for (uint32_t i = 0; i < n; i++) {
        float deq;
        int c = nib_qgroup_code(l, g, x[i], &deq);
        float e = (float)((double)x[i] - (double)deq);
        double e2 = (double)e * e;
        sse += w ? e2 * w[i] : e2;
        if (codes)
            codes[i] = c;
    }
    return sse;
}

/* Weighted least-squares scale for fixed codes, w = s * (code - zp):
 * sum(w x q) / sum(w q q). */
static float ls_scale(const float *x, const float *w, uint32_t n, const int *codes, int zp)
{
    double xq = 0, qq = 0;
    for (uint32_t i = 0; i < n; i++) {
        double q = codes[i] - zp, wi = w ? w[i] : 1.0;
        xq += wi * x[i] * q;
        qq += wi * q * q;
    }
    return qq > 0 ? (float)(xq / qq) : 0.0f;
}

static int clampi(long v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* ---- rtn: the classic scale, rounded as llama.cpp's reference does ---- */

static int rtn(const struct nib_qlayout *l, const float *x, uint32_t n, struct nib_qgroup *g,
               int *codes)
{
    float mn = x[0], mx = x[0], amax = 0.0f, max = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        if (amax < fabsf(x[i])) /* the first of equal magnitudes, as Q4_0 */
            amax = fabsf(x[i]), max = x[i];
    }
    if (l->has_min) { /* Q4_1's rule: min, (max - min) / steps, truncation + 0.5 */
        int lo, hi;
        code_range(l, &lo, &hi);
        const float d = (mx - mn) / (float)(hi - lo), id = d != 0.0f ? 1.0f / d : 0.0f;
        *g = (struct nib_qgroup){.scale = d, .min = mn};
        if (!isfinite(d))
            return -1;
        for (uint32_t i = 0; i < n; i++) {
            const float t = (x[i] - mn) * id;
            const int c = (int)(t + 0.5f);
            codes[i] = (c > hi - lo ? hi - lo : c) + lo;
        }
        if (lo) /* q8f: code lo at the minimum */
            g->min = __builtin_fmaf(-(float)lo, d, mn);
        return 0;
    }
    if (l->has_zp) { /* the range always holds 0: s = (max - min) / 15 */
        mn = mn < 0.0f ? mn : 0.0f;
        mx = mx > 0.0f ? mx : 0.0f;
        *g = mkscale(l, (mx - mn) / 15.0f);
        g->zp = g->scale != 0.0f ? clampi((long)__builtin_rintf(-mn / g->scale), 0, 15) : 0;
        if (!isfinite(g->scale))
            return -1;
        fit(l, g, x, NULL, n, codes);
        return 0;
    }
    if (l->code_bits == 8) { /* Q8_0: d = absmax / 127, code = roundf(x / d) */
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        *g = mkscale(l, d);
        for (uint32_t i = 0; i < n; i++) {
            const float t = x[i] * id;
            codes[i] = clampi(lroundf(t), -127, 127);
        }
        return isfinite(g->scale) ? 0 : -1;
    }
    /* Q4_0: d = max / -8 (max: the value of largest magnitude), code =
     * min(15, trunc(x / d + 8.5)) with x / d as x * (1 / d) */
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    *g = mkscale(l, d);
    for (uint32_t i = 0; i < n; i++) {
        const float t = x[i] * id;
        const int c = (int)(t + 8.5f);
        codes[i] = c > 15 ? 15 : c;
    }
    return isfinite(g->scale) ? 0 : -1;
}

/* ---- search: candidates scored by importance-weighted squared error ---- */

struct best {
    struct nib_qgroup g;
    double sse;
    int *codes, *tmp;
    uint32_t n;
};

static void try_group(struct best *b, const struct nib_qlayout *l, struct nib_qgroup g,
                      const float *x, const float *w)
{
    if (!isfinite(g.scale) || !isfinite(g.min))
        return;
    double e = fit(l, &g, x, w, b->n, b->tmp);
    if (e < b->sse) {
        b->sse = e, b->g = g;
        memcpy(b->codes, b->tmp, b->n * sizeof *b->codes);
    }
}

/* Formats with a zero point (fixed, or q4a's): candidate scales map the
 * extreme values onto the code range's ends a little inside or outside,
 * each refined once by weighted least squares over its codes. */
static void search_zp(struct best *b, const struct nib_qlayout *l, const float *x, const float *w)
{
    int lo, hi;
    code_range(l, &lo, &hi);
    float mn = 0.0f, mx = 0.0f, max = 0.0f;
    for (uint32_t i = 0; i < b->n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
        if (fabsf(max) < fabsf(x[i]))
            max = x[i];
    }
    for (int i = 0; i <= 20; i++) {
        struct nib_qgroup cand[3];
        int nc = 0;
        if (l->has_zp) { /* range shrunk by 1 % steps, zero point z0 - 1 .. z0 + 1 */
            struct nib_qgroup g = mkscale(l, (mx - mn) / 15.0f * (1.0f - 0.01f * (float)i));
            if (!(g.scale > 0.0f))
                continue;
            const int z0 = clampi((long)__builtin_rintf(-mn / g.scale), 0, 15);
            for (int dz = -1; dz <= 1; dz++) {
                cand[nc] = g;
                cand[nc++].zp = clampi(z0 + dz, 0, 15);
            }
        } else { /* the largest magnitude onto the negative end, or the positive one */
            const float step = l->code_bits == 8 ? 0.5f : 0.1f;
            const float neg = (float)(lo - fixed_zp(l)), pos = (float)(hi - fixed_zp(l));
            cand[nc++] = mkscale(l, max / (neg - step * (float)(i - 10)));
            cand[nc++] = mkscale(l, max / (pos - step * (float)(i - 10)));
        }
        for (int c = 0; c < nc; c++)
            if (cand[c].scale != 0.0f)
                try_group(b, l, cand[c], x, w);
    }
    /* the best refined by weighted least squares over its codes, twice */
    for (int round = 0; round < 2; round++) {
        struct nib_qgroup r = b->g;
        int zp = l->has_zp ? r.zp : fixed_zp(l);
        struct nib_qgroup ls = mkscale(l, ls_scale(x, w, b->n, b->codes, zp));
        ls.zp = r.zp;
        if (ls.scale == 0.0f)
            break;
        double before = b->sse;
        try_group(b, l, ls, x, w);
        if (!(b->sse < before))
            break;
    }
}

/* q4f, q8f (w = fmaf(s, code, m)): ranges shrunk by 1 % steps with the
 * minimum on the lowest code or the slack split on both sides, the best
 * refined by weighted least squares of s and m together, twice. */
static void search_min(struct best *b, const struct nib_qlayout *l, const float *x, const float *w)
{
    int lo, hi;
    code_range(l, &lo, &hi);
    float mn = x[0], mx = x[0];
    for (uint32_t i = 1; i < b->n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    const float steps = (float)(hi - lo), range = mx - mn;
    for (int i = 0; i <= 20; i++) {
        const float s = range / steps * (1.0f - 0.01f * (float)i);
        if (!(s > 0.0f))
            continue;
        const float m0 = mn - (float)lo * s;
        try_group(b, l, (struct nib_qgroup){.scale = s, .min = m0}, x, w);
        try_group(b, l, (struct nib_qgroup){.scale = s, .min = m0 + (range - s * steps) * 0.5f}, x,
                  w);
    }
    for (int round = 0; round < 2; round++) {
        double sw = 0, sc = 0, sx = 0, scc = 0, scx = 0;
        for (uint32_t i = 0; i < b->n; i++) {
            double wi = w ? w[i] : 1.0, c = b->codes[i];
            sw += wi, sc += wi * c, sx += wi * x[i], scc += wi * c * c, scx += wi * c * x[i];
        }
        double det = sw * scc - sc * sc;
        if (!(det > 0))
            break;
        float s = (float)((sw * scx - sc * sx) / det), m = (float)((scc * sx - sc * scx) / det);
        if (!(s > 0.0f) || !isfinite(s) || !isfinite(m))
            break;
        try_group(b, l, (struct nib_qgroup){.scale = s, .min = m}, x, w);
    }
}

/* The error weights: importance plus 1 % of its mean, so no element is free. */
static void imp_weights(const float *imp, uint32_t n, float *w)
{
    double mean = 0;
    for (uint32_t i = 0; i < n; i++)
        mean += imp[i];
    mean /= n;
    for (uint32_t i = 0; i < n; i++)
        w[i] = (float)(imp[i] + 0.01 * mean + 1e-30);
}

/* ---- q4h: a super-scale per super-block, sub-scales on its grid ---- */

uint16_t nib_q4h_super(const float *x, uint32_t n)
{
    float amax = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    /* the Q4_0 scale of the largest value, max / 8, at sub-scale 31 */
    return nib_f32_to_f16(amax / (8.0f * 31.0f));
}

static struct nib_qgroup q4h_group(float D, uint16_t bits, int s)
{
    return (struct nib_qgroup){.scale = (float)s * D, .bits = bits, .zp = s};
}

/* Sub-block x[0..n) under the super-scale in g->bits: rtn takes the Q4_0
 * scale (max / -8) rounded to the grid; search every sub-scale -32..31,
 * rtn's first, by weighted squared error. */
static int q4h_choose(const struct nib_qlayout *l, enum nib_qmethod m, const float *x,
                      const float *w, uint32_t n, struct nib_qgroup *g, int *codes, int *tmp)
{
    const uint16_t bits = g->bits;
    const float D = nib_f16_to_f32(bits);
    if (!isfinite(D))
        return -1;
    float amax = 0.0f, max = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        if (amax < fabsf(x[i]))
            amax = fabsf(x[i]), max = x[i];
    const int s0 = D > 0.0f ? clampi((long)__builtin_rintf(max / -8.0f / D), -32, 31) : 0;
    *g = q4h_group(D, bits, s0);
    double best = fit(l, g, x, w, n, codes);
    if (m == NIB_QM_RTN || D == 0.0f)
        return 0;
    for (int s = -32; s <= 31; s++) {
        const struct nib_qgroup c = q4h_group(D, bits, s);
        if (s == 0 || s == s0)
            continue;
        const double e = fit(l, &c, x, w, n, tmp);
        if (e < best) {
            best = e, *g = c;
            memcpy(codes, tmp, n * sizeof *codes);
        }
    }
    return 0;
}

int nib_qgroup_choose(const struct nib_qlayout *l, enum nib_qmethod m, const float *x,
                      const float *imp, uint32_t n, struct nib_qgroup *g, int *codes, char *err,
                      size_t errlen)
{
    enum { SMALL = 256 };
    int ibuf[2 * SMALL];
    float wbuf[SMALL];
    void *heap = NULL;
    int *c = ibuf, *tmp = ibuf + SMALL;
    float *w = wbuf;
    if (n > SMALL) { /* a per-channel group: the whole row */
        heap = malloc((size_t)n * (2 * sizeof(int) + sizeof(float)));
        if (!heap) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        c = heap, tmp = c + n, w = (float *)(void *)(tmp + n);
    }
    if (codes)
        c = codes;
    if (l->sub) { /* q4h: n <= 16, g->bits the super-scale */
        if (imp)
            imp_weights(imp, n, w);
        if (q4h_choose(l, m, x, imp ? w : NULL, n, g, c, tmp)) {
            snprintf(err, errlen, "weights too large for an f16 scale (use q4c or q8c)");
            return -1;
        }
        return 0;
    }
    int rc = rtn(l, x, n, g, c);
    float mn = x[0], mx = x[0];
    for (uint32_t i = 1; i < n; i++)
        mn = x[i] < mn ? x[i] : mn, mx = x[i] > mx ? x[i] : mx;
    if (rc == 0 && mx == mn && l->has_min) { /* exact: s = 0, m = the value */
        *g = (struct nib_qgroup){.scale = 0.0f, .min = mn};
        for (uint32_t i = 0; i < n; i++)
            c[i] = 0;
    } else if (rc == 0 && m != NIB_QM_RTN && !(mx == mn && mx == 0.0f)) {
        if (imp)
            imp_weights(imp, n, w);
        struct best b = {.g = *g, .codes = c, .tmp = tmp, .n = n};
        /* rtn's scale with the nearest codes first (rtn's own codes may
         * round differently), so search is never worse than that */
        b.sse = fit(l, g, x, imp ? w : NULL, n, c);
        if (l->has_min)
            search_min(&b, l, x, imp ? w : NULL);
        else
            search_zp(&b, l, x, imp ? w : NULL);
        *g = b.g;
    }
    free(heap);
    if (rc == 0 && isfinite(g->scale) && isfinite(g->min))
        return 0;
    if (l->has_min)
        snprintf(err, errlen, "weights span more than a float's range");
    else
        snprintf(err, errlen, "weights too large for an f16 scale (use q4c or q8c)");
    return -1;
}

void nib_qgroup_put(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t j,
                    const struct nib_qgroup *g, const int *codes, uint32_t n)
{
    const int zero = l->has_zp ? g->zp : l->has_min ? 0 : fixed_zp(l);
    const uint32_t qg = nib_ql_qgroup(l), k0 = j * qg;
    for (uint32_t i = 0; i < qg; i++) /* padding gets the zero code */
        put_code(l, out, r, k0 + i, i < n ? codes[i] : zero);
    if (l->sub) { /* q4h: the super-block's scale with its first sub-block
                   * (a later one may be padding, g zeroed) and the sub-scale */
        if (k0 % l->gsize == 0)
            memcpy(out + nib_ql_scale_off(l, r, k0 / l->gsize), &g->bits, 2);
        put_sub(l, out, r, j, g->zp);
        return;
    }
    put_scale(l, out, r, j, *g);
    if (l->has_zp)
        out[nib_ql_zp_off(l, r, j)] = (uint8_t)g->zp;
    if (l->has_min)
        put_min(l, out, r, j, g->min);
}

/* ---- quantize ---- */

/* Rows are quantized in chunks of QM_ROWS (a whole number of the packed
 * layouts' row blocks, so no two chunks share a byte), chunk c by worker
 * c % nt; each row's bytes depend on that row alone, so the result does
 * not depend on nt. */
#define QM_ROWS 16
#define QM_MAX_THREADS 64

struct qm_job {
    struct nib_qlayout l;
    enum nib_qmethod m;
    const float *imp;
    uint32_t rows, cols, nt;
    nib_row_fn row;
    void *ctx;
    uint8_t *out;
    struct {
        uint32_t row; /* the first row that failed, UINT32_MAX: none */
        char msg[160];
    } fail[QM_MAX_THREADS];
};

struct qm_arg {
    struct qm_job *j;
    uint32_t t;
};

static void qm_rows(struct qm_job *j, uint32_t t)
{
    const struct nib_qlayout *l = &j->l;
    const uint32_t rows = j->rows, cols = j->cols;
    float *x = calloc(l->k_pad, sizeof *x);
    const uint32_t qg = nib_ql_qgroup(l);
    int *codes = malloc(qg * sizeof *codes);
    if (!x || !codes) {
        j->fail[t].row = t * QM_ROWS;
        snprintf(j->fail[t].msg, sizeof j->fail[t].msg, "out of memory quantizing a %ux%u tensor",
                 rows, cols);
        free(x), free(codes);
        return;
    }
    for (uint32_t r0 = t * QM_ROWS; r0 < l->n_pad; r0 += j->nt * QM_ROWS)
        for (uint32_t r = r0; r < r0 + QM_ROWS && r < l->n_pad; r++) {
            char why[128];
            int bad = 0;
            if (r < rows) {
                if (j->row(j->ctx, r, x)) {
                    snprintf(why, sizeof why, "cannot read row %u", r);
                    bad = 1;
                }
                for (uint32_t k = 0; k < cols && !bad; k++)
                    if (!isfinite(x[k])) {
                        snprintf(why, sizeof why, "row %u, column %u is not a finite number", r, k);
                        bad = 1;
                    }
            }
            uint16_t super = 0; /* q4h: the current super-block's super-scale */
            for (uint32_t g = 0; g < nib_ql_n_qgroups(l) && !bad; g++) {
                uint32_t k0 = g * qg, n = 0;
                struct nib_qgroup q = l->sub ? (struct nib_qgroup){0} : mkscale(l, 0.0f);
                if (r < rows && k0 < cols) { /* else padding only (groups of 16 come in pairs) */
                    n = cols - k0 < qg ? cols - k0 : qg;
                    char e[128];
                    if (l->sub) { /* q4h: the super-scale, once per super-block (at its
                                   * first sub-block, which is never padding when k0 is not) */
                        if (k0 % l->gsize == 0)
                            super =
                                nib_q4h_super(x + k0, cols - k0 < l->gsize ? cols - k0 : l->gsize);
                        q.bits = super;
                    }
                    if (nib_qgroup_choose(l, j->m, x + k0, j->imp ? j->imp + k0 : NULL, n, &q,
                                          codes, e, sizeof e)) {
                        snprintf(why, sizeof why, "row %u: %.100s", r, e);
                        bad = 1;
                        break;
                    }
                }
                nib_qgroup_put(l, j->out, r, g, &q, codes, n);
            }
            if (bad) {
                j->fail[t].row = r;
                snprintf(j->fail[t].msg, sizeof j->fail[t].msg, "%s", why);
                free(x), free(codes);
                return;
            }
        }
    free(x), free(codes);
}

static void *qm_main(void *p)
{
    struct qm_arg *a = p;
    qm_rows(a->j, a->t);
    return NULL;
}

int nib_quantize_mt(struct nib_qspec spec, enum nib_qmethod m, const float *imp, uint32_t rows,
                    uint32_t cols, nib_row_fn row, void *ctx, uint8_t *out, uint32_t threads,
                    char *err, size_t errlen)
{
    struct qm_job *j = malloc(sizeof *j);
    char b[32];
    if (!j) {
        snprintf(err, errlen, "out of memory quantizing a %ux%u tensor", rows, cols);
        return -1;
    }
    if (nib_qlayout_get(&j->l, spec.dtype, spec.group, rows, cols) || m == NIB_QM_GPTQ) {
        snprintf(err, errlen, "cannot quantize a %ux%u tensor to %s by %s", rows, cols,
                 nib_qspec_str(spec, b, sizeof b), nib_qmethod_name(m));
        free(j);
        return -1;
    }
    const uint32_t chunks = (j->l.n_pad + QM_ROWS - 1) / QM_ROWS;
    uint32_t nt = threads < 1 ? 1 : threads > QM_MAX_THREADS ? QM_MAX_THREADS : threads;
    if (nt > chunks)
        nt = chunks ? chunks : 1;
    j->m = m, j->imp = imp, j->rows = rows, j->cols = cols, j->nt = nt;
    j->row = row, j->ctx = ctx, j->out = out;
    for (uint32_t t = 0; t < QM_MAX_THREADS; t++)
        j->fail[t].row = UINT32_MAX;
    memset(out, 0, j->l.size);
    pthread_t tid[QM_MAX_THREADS];
    struct qm_arg arg[QM_MAX_THREADS];
    int started[QM_MAX_THREADS] = {0};
    for (uint32_t t = 1; t < nt; t++) {
        arg[t] = (struct qm_arg){j, t};
        started[t] = pthread_create(&tid[t], NULL, qm_main, &arg[t]) == 0;
    }
    qm_rows(j, 0);
    for (uint32_t t = 1; t < nt; t++) { /* a worker that did not start: its chunks here */
        if (started[t])
            pthread_join(tid[t], NULL);
        else
            qm_rows(j, t);
    }
    int rc = 0;
    uint32_t first = UINT32_MAX;
    for (uint32_t t = 0; t < nt; t++)
        if (j->fail[t].row < first) {
            first = j->fail[t].row;
            snprintf(err, errlen, "%s", j->fail[t].msg);
            rc = -1;
        }
    free(j);
    return rc;
}

int nib_quantize_m(struct nib_qspec spec, enum nib_qmethod m, const float *imp, uint32_t rows,
                   uint32_t cols, nib_row_fn row, void *ctx, uint8_t *out, char *err, size_t errlen)
{
    return nib_quantize_mt(spec, m, imp, rows, cols, row, ctx, out, 1, err, errlen);
}

int nib_quantize(struct nib_qspec spec, uint32_t rows, uint32_t cols, nib_row_fn row, void *ctx,
                 uint8_t *out, char *err, size_t errlen)
{
    return nib_quantize_m(spec, NIB_QM_SEARCH, NULL, rows, cols, row, ctx, out, err, errlen);
}

struct dense {
    const float *w;
    uint32_t cols;
};

static int dense_row(void *ctx, uint32_t r, float *out)
{
    const struct dense *d = ctx;
    memcpy(out, d->w + (size_t)r * d->cols, d->cols * sizeof *out);
    return 0;
}

int nib_quantize_m_f32(struct nib_qspec spec, enum nib_qmethod m, const float *imp, uint32_t rows,
                       uint32_t cols, const float *w, uint8_t *out, char *err, size_t errlen)
{
    struct dense d = {w, cols};
    return nib_quantize_m(spec, m, imp, rows, cols, dense_row, &d, out, err, errlen);
}

int nib_quantize_f32(struct nib_qspec spec, uint32_t rows, uint32_t cols, const float *w,
                     uint8_t *out, char *err, size_t errlen)
{
    return nib_quantize_m_f32(spec, NIB_QM_SEARCH, NULL, rows, cols, w, out, err, errlen);
}

void nib_dequantize_row(const struct nib_qlayout *l, const uint8_t *packed, uint32_t r, float *out)
{
    nib_qrow_f32(l, packed, r, 0, l->cols, out); /* the kernels' own definition */
}
