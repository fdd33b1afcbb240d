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
        {"f32", NIB_DT_F32, 0},  {"q4", NIB_DT_Q4, 32},  {"q4a", NIB_DT_Q4A, 32},
        {"q4c", NIB_DT_Q4C, 0},  {"q8c", NIB_DT_Q8C, 0}, {"q4f", NIB_DT_Q4F, 32},
        {"q8f", NIB_DT_Q8F, 32},
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
                "format '%s': invalid group (q4 and q4a take 32, 64 or 128; q8c takes none, 32, "
                "64 or 128; q4f and q8f take 16 or 32; f32 and q4c take none)",
                s);
            return -1;
        }
        return 0;
    }
    snprintf(err, errlen,
             "unknown format '%s' (expected f32, q4, q4a, q4c, q8c, q4f or q8f, optionally /GROUP)",
             s);
    return -1;
}

const char *nib_qspec_str(struct nib_qspec spec, char *buf, size_t len)
{
    static const char *const names[NIB_DT_COUNT] = {"f32", "q4", "q4a", "q4c", "q8c", "q4f", "q8f"};
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

/* A scale: f16 bits or a float, as the layout stores it. */
struct qscale {
    float f;       /* the value the kernels use */
    uint16_t bits; /* f16 layouts */
};

static void put_scale(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t j,
                      struct qscale s)
{
    uint64_t off = nib_ql_scale_off(l, r, j);
    if (l->scale_bytes == 2)
        memcpy(out + off, &s.bits, 2);
    else
        memcpy(out + off, &s.f, 4);
}

static void put_min(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t j, float m)
{
    memcpy(out + nib_ql_min_off(l, r, j), &m, 4);
}

/* ---- choosing scales ---- */

/* The scale as stored: rounded to f16 when the layout keeps f16. */
static struct qscale mkscale(float d, int f16)
{
    struct qscale s = {d, 0};
    if (f16) {
        s.bits = nib_f32_to_f16(d);
        s.f = nib_f16_to_f32(s.bits);
    }
    return s;
}

static int clampi(long v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* Codes of x[0..n) for w = d * (code - zp), code in [lo, hi], and the
 * squared error (see the top of the file for why it is exact enough). */
static double fit(const float *x, uint32_t n, float d, int zp, int lo, int hi, int *codes)
{
    const float qlo = (float)(lo - zp), qhi = (float)(hi - zp);
    double sse = 0;
    for (uint32_t i = 0; i < n; i++) {
        float q = d != 0.0f ? __builtin_rintf(x[i] / d) : 0.0f; /* ties to even, inline */
        q = q < qlo ? qlo : q > qhi ? qhi : q;
        double e = (double)x[i] - (double)d * q;
        float ef = (float)e;
        sse += (double)ef * ef;
        if (codes)
            codes[i] = (int)q + zp;
    }
    return sse;
}

/* Least-squares scale for fixed codes: sum(x*q) / sum(q*q), q = code - zp. */
static float ls_scale(const float *x, uint32_t n, const int *codes, int zp)
{
    double xq = 0, qq = 0;
    for (uint32_t i = 0; i < n; i++) {
        int q = codes[i] - zp;
        xq += (double)x[i] * q;
        qq += (double)q * q;
    }
    return qq > 0 ? (float)(xq / qq) : 0.0f;
}

/* Symmetric 4-bit (codes 0..15 = q + 8). Candidates map the largest
 * magnitude m to -8 (Q4_0's choice, tried first), -7.5 ... or +7, +6.5;
 * the best is refined by least squares. Returns the scale. */
static struct qscale quant_sym4(const float *x, uint32_t n, int f16, int *codes, int *tmp)
{
    float m = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        if (fabsf(x[i]) > fabsf(m))
            m = x[i];
    struct qscale best = mkscale(0.0f, f16);
    if (m == 0.0f) {
        for (uint32_t i = 0; i < n; i++)
            codes[i] = 8;
        return best;
    }
    static const float div[] = {-8.0f, -7.5f, -7.0f, -6.5f, 7.0f, 6.5f};
    double best_sse = INFINITY;
    for (size_t i = 0; i <= sizeof div / sizeof div[0]; i++) {
        /* the last round refines the best candidate so far */
        struct qscale s = i < sizeof div / sizeof div[0] ? mkscale(m / div[i], f16)
                                                         : mkscale(ls_scale(x, n, codes, 8), f16);
        double e = fit(x, n, s.f, 8, 0, 15, tmp);
        if (e < best_sse) {
            best_sse = e;
            best = s;
            memcpy(codes, tmp, n * sizeof *codes);
        }
        if (best_sse == INFINITY) /* even the first scale overflowed f16 */
            break;
    }
    if (best_sse == INFINITY) { /* the caller reports the infinite scale */
        best.f = INFINITY;
        for (uint32_t i = 0; i < n; i++)
            codes[i] = 8;
    }
    return best;
}

/* Asymmetric 4-bit: w = s * (u - z), u and z in 0..15; the range always
 * holds 0. Starts from min/max (s = range / 15), tries narrower ranges and
 * z +- 1, refines the best scale by least squares. */
static struct qscale quant_asym4(const float *x, uint32_t n, int *zp, int *codes, int *tmp)
{
    float mn = 0.0f, mx = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    struct qscale best = mkscale(0.0f, 1);
    *zp = 0;
    if (mx == mn) { /* all zero */
        for (uint32_t i = 0; i < n; i++)
            codes[i] = 0;
        return best;
    }
    static const float shrink[] = {1.0f, 0.95f, 0.9f, 0.85f};
    double best_sse = INFINITY;
    for (size_t i = 0; i < sizeof shrink / sizeof shrink[0]; i++) {
        struct qscale s = mkscale((mx - mn) / 15.0f * shrink[i], 1);
        if (s.f == 0.0f)
            continue;
        int z0 = clampi((long)__builtin_rintf(-mn / s.f), 0, 15);
        for (int dz = -1; dz <= 1; dz++) {
            int z = clampi(z0 + dz, 0, 15);
            double e = fit(x, n, s.f, z, 0, 15, tmp);
            if (e < best_sse) {
                best_sse = e;
                best = s;
                *zp = z;
                memcpy(codes, tmp, n * sizeof *codes);
            }
        }
    }
    if (best_sse == INFINITY) { /* every scale was 0 or overflowed f16 */
        for (uint32_t i = 0; i < n; i++)
            codes[i] = 0;
        if (mx - mn > 1.0f)
            best.f = INFINITY; /* the caller reports it */
        return best;
    }
    struct qscale s = mkscale(ls_scale(x, n, codes, *zp), 1);
    if (s.f > 0.0f && fit(x, n, s.f, *zp, 0, 15, tmp) < best_sse) {
        best = s;
        memcpy(codes, tmp, n * sizeof *codes);
    }
    return best;
}

/* Symmetric 8-bit, codes -127..127: d = absmax / 127, rounded up to the
 * next f16 when stored as f16 so no code needs clamping. */
static struct qscale quant_sym8(const float *x, uint32_t n, int f16, int *codes)
{
    float amax = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    struct qscale s = mkscale(amax / 127.0f, f16);
    if (f16 && s.f * 127.0f < amax && s.bits < 0x7bff) {
        s.bits++;
        s.f = nib_f16_to_f32(s.bits);
    }
    fit(x, n, s.f, 0, -127, 127, codes);
    return s;
}

/* Codes of x[0..n) for w = fmaf(s, code, m), code in [lo, hi] (the q4f
 * and q8f dequantization), and the squared error. */
static double fit_min(const float *x, uint32_t n, float s, float m, int lo, int hi, int *codes)
{
    double sse = 0;
    for (uint32_t i = 0; i < n; i++) {
        float q = s != 0.0f ? __builtin_rintf((x[i] - m) / s) : 0.0f;
        q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
        float ef = (float)((double)x[i] - (double)__builtin_fmaf(s, q, m));
        sse += (double)ef * ef;
        codes[i] = (int)q;
    }
    return sse;
}

/* Scale and minimum (q4f: codes 0..15; q8f: -128..127) of one group: w =
 * fmaf(s, code, m). Candidates put the group's minimum on code lo and
 * its range on hi - lo steps (shrunk a little, or centred), and each
 * best so far is refined by least squares over its codes (s and m
 * together). All zero-range groups are exact: s = 0, m = the value.
 * Returns s (non-finite when the range overflows a float), *m. */
static float quant_min(const float *x, uint32_t n, int lo, int hi, float *m, int *codes, int *tmp)
{
    float mn = x[0], mx = x[0];
    for (uint32_t i = 1; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    *m = mn;
    for (uint32_t i = 0; i < n; i++)
        codes[i] = 0;
    if (mx == mn)
        return 0.0f;
    const float steps = (float)(hi - lo), range = mx - mn;
    if (!isfinite(range))
        return range;
    static const float shrink[] = {1.0f, 0.97f, 0.94f, 0.9f, 0.85f};
    double best_sse = INFINITY;
    float best_s = 0.0f;
    for (size_t i = 0; i < sizeof shrink / sizeof shrink[0]; i++) {
        float s = range / steps * shrink[i];
        if (!(s > 0.0f))
            continue;
        /* code lo at the minimum, or the slack split on both sides */
        const float m0[2] = {mn - (float)lo * s, mn - (float)lo * s + (range - s * steps) * 0.5f};
        for (int c = 0; c < 2; c++) {
            double e = fit_min(x, n, s, m0[c], lo, hi, tmp);
            if (e < best_sse) {
                best_sse = e, best_s = s, *m = m0[c];
                memcpy(codes, tmp, n * sizeof *codes);
            }
        }
    }
    for (int round = 0; round < 2; round++) { /* least squares for the best codes */
        double cm = 0, xm = 0, cc = 0, cx = 0;
        for (uint32_t i = 0; i < n; i++)
            cm += codes[i], xm += x[i];
        cm /= n, xm /= n;
        for (uint32_t i = 0; i < n; i++) {
            cc += (codes[i] - cm) * (codes[i] - cm);
            cx += (codes[i] - cm) * ((double)x[i] - xm);
        }
        if (!(cc > 0))
            break;
        float s = (float)(cx / cc), mm = (float)(xm - cx / cc * cm);
        if (!(s > 0.0f) || !isfinite(s) || !isfinite(mm))
            break;
        double e = fit_min(x, n, s, mm, lo, hi, tmp);
        if (!(e < best_sse))
            break;
        best_sse = e, best_s = s, *m = mm;
        memcpy(codes, tmp, n * sizeof *codes);
    }
    return best_s;
}

/* ---- quantize ---- */

int nib_quantize(struct nib_qspec spec, uint32_t rows, uint32_t cols, nib_row_fn row, void *ctx,
                 uint8_t *out, char *err, size_t errlen)
{
    struct nib_qlayout l;
    if (nib_qlayout_get(&l, spec.dtype, spec.group, rows, cols)) {
        char b[32];
        snprintf(err, errlen, "cannot quantize a %ux%u tensor to %s", rows, cols,
                 nib_qspec_str(spec, b, sizeof b));
        return -1;
    }
    float *x = calloc(l.k_pad, sizeof *x);
    int *codes = malloc(l.gsize * sizeof *codes), *tmp = malloc(l.gsize * sizeof *tmp);
    if (!x || !codes || !tmp) {
        free(x), free(codes), free(tmp);
        snprintf(err, errlen, "out of memory quantizing a %ux%u tensor", rows, cols);
        return -1;
    }
    memset(out, 0, l.size);
    int rc = 0, zero = spec.dtype == NIB_DT_Q4 || spec.dtype == NIB_DT_Q4C ? 8 : 0;
    for (uint32_t r = 0; r < l.n_pad && rc == 0; r++) {
        if (r < rows) {
            if (row(ctx, r, x)) {
                snprintf(err, errlen, "cannot read row %u", r);
                rc = -1;
                break;
            }
            for (uint32_t k = 0; k < cols; k++)
                if (!isfinite(x[k])) {
                    snprintf(err, errlen, "row %u, column %u is not a finite number", r, k);
                    rc = -1;
                }
        }
        for (uint32_t j = 0; j < l.n_sgroups && rc == 0; j++) {
            uint32_t k0 = j * l.gsize, n = 0, zp = 0;
            struct qscale s = mkscale(0.0f, l.scale_bytes == 2);
            float mn = 0.0f;
            if (r < rows && k0 < cols) { /* else padding only (groups of 16 come in pairs) */
                n = cols - k0 < l.gsize ? cols - k0 : l.gsize;
                int z = 0;
                switch (spec.dtype) {
                case NIB_DT_Q4:
                case NIB_DT_Q4C: s = quant_sym4(x + k0, n, l.scale_bytes == 2, codes, tmp); break;
                case NIB_DT_Q4A: s = quant_asym4(x + k0, n, &z, codes, tmp); break;
                case NIB_DT_Q4F: s.f = quant_min(x + k0, n, 0, 15, &mn, codes, tmp); break;
                case NIB_DT_Q8F: s.f = quant_min(x + k0, n, -128, 127, &mn, codes, tmp); break;
                default: s = quant_sym8(x + k0, n, l.scale_bytes == 2, codes); break;
                }
                zp = (uint32_t)z;
                if (!isfinite(s.f) && l.has_min) {
                    snprintf(err, errlen, "row %u: weights span more than a float's range", r);
                    rc = -1;
                } else if (!isfinite(s.f)) {
                    snprintf(err, errlen,
                             "row %u: weights too large for an f16 scale (use q4c or q8c)", r);
                    rc = -1;
                }
            }
            for (uint32_t i = 0; i < l.gsize; i++) /* padding gets the zero code */
                put_code(&l, out, r, k0 + i, i < n ? codes[i] : (l.has_zp ? (int)zp : zero));
            put_scale(&l, out, r, j, s);
            if (l.has_zp)
                out[nib_ql_zp_off(&l, r, j)] = (uint8_t)zp;
            if (l.has_min)
                put_min(&l, out, r, j, mn);
        }
    }
    free(x), free(codes), free(tmp);
    return rc;
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

int nib_quantize_f32(struct nib_qspec spec, uint32_t rows, uint32_t cols, const float *w,
                     uint8_t *out, char *err, size_t errlen)
{
    struct dense d = {w, cols};
    return nib_quantize(spec, rows, cols, dense_row, &d, out, err, errlen);
}

void nib_dequantize_row(const struct nib_qlayout *l, const uint8_t *packed, uint32_t r, float *out)
{
    nib_qrow_f32(l, packed, r, 0, l->cols, out); /* the kernels' own definition */
}
