/* Exact repacks of GGUF quantized tensors (tools/compiler/repack.h).
 *
 * Each source type is described once: the size of its scale groups, and
 * each group decoded into ggml's own f32 scale S, minimum M (or none) and
 * integer codes c, so that ggml's weight is S*c (exact) or S*c + M
 * (rounded once). Writing a target format is then copying c (shifted by a
 * constant for q4 and q4f), S and M. Every weight written is checked
 * against ggml's dequantization of the same block before the repack
 * succeeds, so a wrong assumption can only refuse, never mislead. */
#include "tools/compiler/repack.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/f16.h"
#include "model_blob/blob_view.h"
#include "tools/compiler/ggml_dequant.h"
#include "tools/compiler/gguf.h"

/* A source type: scale groups of `group` elements; codes in [lo, hi];
 * `fma`: the weight is S*c + M (else S*c); `s_f16`: S is the block's f16
 * d itself (so q4 and q8c, which keep f16 scales, can hold it). */
struct src_kind {
    uint32_t type, group;
    int lo, hi, fma, s_f16;
};

static const struct src_kind kinds[] = {
    {GGML_TYPE_Q4_0, 32, -8, 7, 0, 1},     {GGML_TYPE_Q4_1, 32, 0, 15, 1, 1},
    {GGML_TYPE_Q5_0, 32, -16, 15, 0, 1},   {GGML_TYPE_Q5_1, 32, 0, 31, 1, 1},
    {GGML_TYPE_Q8_0, 32, -128, 127, 0, 1}, {GGML_TYPE_IQ4_NL, 32, -127, 113, 0, 1},
    {GGML_TYPE_Q2_K, 16, 0, 3, 1, 0},      {GGML_TYPE_Q3_K, 16, -4, 3, 0, 0},
    {GGML_TYPE_Q4_K, 32, 0, 15, 1, 0},     {GGML_TYPE_Q5_K, 32, 0, 31, 1, 0},
    {GGML_TYPE_Q6_K, 16, -32, 31, 0, 0},   {GGML_TYPE_IQ4_XS, 32, -127, 113, 0, 0},
};

static const struct src_kind *kind_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].type == type)
            return &kinds[i];
    return NULL;
}

/* One scale group of a source block, as ggml computes it. */
struct src_group {
    float s, m; /* m only when the kind is fma: weight = s*c + m */
    int c[32];
};

/* Scale group g (of the block's blck / group) of the block at blk. */
static void decode_group(uint32_t type, const uint8_t *blk, int g, struct src_group *o)
{
    float sub, min;
    switch (type) {
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_IQ4_NL: {
        const uint8_t *qs = blk + (type == GGML_TYPE_Q4_1 ? 4 : 2);
        o->s = ggml_f16_at(blk);
        o->m = type == GGML_TYPE_Q4_1 ? ggml_f16_at(blk + 2) : 0.0f;
        for (int j = 0; j < 32; j++) {
            int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
            o->c[j] = type == GGML_TYPE_Q4_0   ? q - 8
                      : type == GGML_TYPE_Q4_1 ? q
                                               : ggml_iq4_values[q];
        }
        return;
    }
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1: {
        int one = type == GGML_TYPE_Q5_1;
        const uint8_t *qh = blk + (one ? 4 : 2), *qs = qh + 4;
        uint32_t h =
            (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
        o->s = ggml_f16_at(blk);
        o->m = one ? ggml_f16_at(blk + 2) : 0.0f;
        for (int j = 0; j < 32; j++) {
            int q = (j < 16 ? qs[j] & 15 : qs[j - 16] >> 4) | (int)((h >> j) & 1) << 4;
            o->c[j] = one ? q : q - 16;
        }
        return;
    }
    case GGML_TYPE_Q8_0:
        o->s = ggml_f16_at(blk);
        for (int j = 0; j < 32; j++)
            o->c[j] = (int8_t)blk[2 + j];
        return;
    case GGML_TYPE_Q2_K:
        ggml_q2_k_sub(blk, g, &sub, &min);
        o->s = sub, o->m = -min;
        for (int l = 0; l < 16; l++)
            o->c[l] = ggml_q2_k_code(blk, 16 * g + l);
        return;
    case GGML_TYPE_Q3_K:
        o->s = ggml_q3_k_scale(blk, g);
        for (int l = 0; l < 16; l++)
            o->c[l] = ggml_q3_k_code(blk, 16 * g + l) - 4;
        return;
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
        ggml_k_sub(blk, g, &sub, &min);
        o->s = sub, o->m = -min;
        for (int l = 0; l < 32; l++)
            o->c[l] = type == GGML_TYPE_Q4_K ? ggml_q4_k_code(blk, 32 * g + l)
                                             : ggml_q5_k_code(blk, 32 * g + l);
        return;
    case GGML_TYPE_Q6_K:
        o->s = ggml_q6_k_scale(blk, g);
        for (int l = 0; l < 16; l++)
            o->c[l] = ggml_q6_k_code(blk, 16 * g + l);
        return;
    case GGML_TYPE_IQ4_XS:
        o->s = ggml_iq4_xs_scale(blk, g);
        for (int l = 0; l < 32; l++)
            o->c[l] = ggml_iq4_values[ggml_iq4_xs_index(blk, 32 * g + l)];
        return;
    default: return;
    }
}

int nib_repack_spec(uint32_t ggml_type, struct nib_qspec *spec)
{
    switch (ggml_type) {
    case GGML_TYPE_Q4_0: *spec = (struct nib_qspec){NIB_DT_Q4, 32}; return 0;
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_IQ4_NL: *spec = (struct nib_qspec){NIB_DT_Q8C, 32}; return 0;
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q4_K: *spec = (struct nib_qspec){NIB_DT_Q4F, 32}; return 0;
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K: *spec = (struct nib_qspec){NIB_DT_Q4F, 16}; return 0;
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_IQ4_XS: *spec = (struct nib_qspec){NIB_DT_Q8F, 32}; return 0;
    case GGML_TYPE_Q6_K: *spec = (struct nib_qspec){NIB_DT_Q8F, 16}; return 0;
    default: return -1;
    }
}

/* The constant added to a kind's codes to give the target's code: q4
 * stores c + 8; q4f stores c - lo for signed kinds (whose minimum becomes
 * s*lo); q8c and q8f store c. */
static int code_shift(const struct src_kind *k, uint32_t dtype)
{
    if (dtype == NIB_DT_Q4)
        return 8;
    if (dtype == NIB_DT_Q4F && !k->fma)
        return -k->lo;
    return 0;
}

int nib_repack_holds(uint32_t ggml_type, struct nib_qspec target)
{
    const struct src_kind *k = kind_of(ggml_type);
    uint32_t dt = target.dtype;
    if (!k || !nib_qformat_valid(dt, target.group) || target.group == 0 || k->group % target.group)
        return 0;
    int sh = code_shift(k, dt);
    switch (dt) {
    case NIB_DT_Q4: return !k->fma && k->s_f16 && k->lo + sh >= 0 && k->hi + sh <= 15;
    case NIB_DT_Q8C: return !k->fma && k->s_f16 && k->lo >= -128 && k->hi <= 127;
    case NIB_DT_Q4F: return k->lo + sh >= 0 && k->hi + sh <= 15;
    case NIB_DT_Q8F: return k->lo >= -128 && k->hi <= 127;
    default: return 0;
    }
}

/* ---- writing ---- */

static void put_code(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t k, int code)
{
    unsigned shift;
    uint64_t off = nib_ql_code_off(l, r, k, &shift);
    if (l->code_bits == 8)
        out[off] = (uint8_t)(int8_t)code;
    else
        out[off] = (uint8_t)((out[off] & ~(0xfu << shift)) | ((unsigned)code & 0xfu) << shift);
}

/* What the packed weight will be: nib_qrow_f32's expression. */
static float target_value(uint32_t dtype, float s, float m, int code)
{
    switch (dtype) {
    case NIB_DT_Q4: return (float)(code - 8) * s;
    case NIB_DT_Q8C: return (float)code * s;
    default: return fmaf(s, (float)code, m);
    }
}

/* Equal as the repack promises: the same bits, or both zeros. */
static int same_weight(float a, float b)
{
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y || (a == 0.0f && b == 0.0f);
}

struct job {
    const struct llama_weight *w;
    const struct src_kind *k;
    struct nib_qlayout l;
    char name[72];
    char *err;
    size_t errlen;
};

static int fail(struct job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct job *j, const char *fmt, ...)
{
    int n = snprintf(j->err, j->errlen, "tensor '%s': ", j->name);
    if (n >= 0 && (size_t)n < j->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->err + n, j->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The source bytes of view row r: a matrix view's source row
 * (llama_weight_src_row); a one-row view of a 1-D source starts at element
 * row0 (as tools/compiler/weight_view.c reads it). NULL when outside. */
static const uint8_t *src_row(struct job *j, uint32_t r, uint64_t rb)
{
    const struct gguf_tensor *t = j->w->t;
    const struct ggml_type_info *ti = ggml_type_info(t->type);
    uint64_t n_rows = t->ne[0] ? t->n_elems / t->ne[0] : 0, off;
    if (j->w->rows == 1 && n_rows == 1) {
        off = j->w->row0;
        if (off % ti->blck || off + j->w->cols > t->n_elems)
            return NULL;
        off = off / ti->blck * ti->bytes;
    } else {
        uint32_t s = llama_weight_src_row(j->w, r);
        if (t->ne[0] != j->w->cols || s == UINT32_MAX || s >= n_rows)
            return NULL;
        off = (uint64_t)s * rb;
    }
    return off + rb <= t->nbytes ? t->data + off : NULL;
}

/* One view row: decode each source group, write the target's codes,
 * scales and minimums for each target group inside it, and check every
 * weight against ggml's (ref). */
static int repack_row(struct job *j, uint32_t r, const uint8_t *p, float *ref, uint8_t *out)
{
    const struct src_kind *k = j->k;
    const struct ggml_type_info *ti = ggml_type_info(k->type);
    const struct nib_qlayout *l = &j->l;
    const uint32_t dt = l->dtype, tg = l->group, per_blk = ti->blck / k->group;
    const int sh = code_shift(k, dt);
    ggml_dequant_row(k->type, p, j->w->cols, ref);
    for (uint32_t c0 = 0; c0 < j->w->cols; c0 += k->group) {
        const uint8_t *blk = p + (uint64_t)(c0 / ti->blck) * ti->bytes;
        struct src_group g = {0};
        decode_group(k->type, blk, (int)(c0 / k->group % per_blk), &g);
        if (!isfinite(g.s) || !isfinite(g.m))
            return fail(j,
                        "row %u, columns %u..%u: a non-finite scale or minimum (%g, %g) in the "
                        "source block; refused",
                        r, c0, c0 + k->group - 1, (double)g.s, (double)g.m);
        float s = g.s, m = k->fma ? g.m : sh ? g.s * (float)(-sh) : -0.0f;
        if (dt == NIB_DT_Q4 || dt == NIB_DT_Q8C) {
            uint16_t h = nib_f32_to_f16(s);
            if (k->fma && !same_weight(g.m, -0.0f))
                return fail(j, "row %u, columns %u..%u: minimum %g: %s has no minimum", r, c0,
                            c0 + k->group - 1, (double)g.m, nib_dtype_name(dt));
            float back = nib_f16_to_f32(h);
            if (memcmp(&back, &s, 4))
                return fail(j,
                            "row %u, columns %u..%u: scale %.9g is not a half (%s keeps f16 "
                            "scales)",
                            r, c0, c0 + k->group - 1, (double)s, nib_dtype_name(dt));
            for (uint32_t t0 = c0; t0 < c0 + k->group; t0 += tg) {
                uint64_t so = nib_ql_scale_off(l, r, t0 / tg);
                memcpy(out + so, &h, 2);
            }
        } else {
            for (uint32_t t0 = c0; t0 < c0 + k->group; t0 += tg) {
                memcpy(out + nib_ql_scale_off(l, r, t0 / tg), &s, 4);
                memcpy(out + nib_ql_min_off(l, r, t0 / tg), &m, 4);
            }
        }
        int lo = dt == NIB_DT_Q8C || dt == NIB_DT_Q8F ? -128 : 0;
        int hi = dt == NIB_DT_Q8C || dt == NIB_DT_Q8F ? 127 : 15;
        for (uint32_t i = 0; i < k->group; i++) {
            int code = g.c[i] + sh;
            uint32_t col = c0 + i;
            if (code < lo || code > hi)
                return fail(j, "row %u, column %u: code %d does not fit %s", r, col, g.c[i],
                            nib_dtype_name(dt));
            put_code(l, out, r, col, code);
            float v = target_value(dt, s, m, code);
            if (!same_weight(v, ref[col]))
                return fail(j, "row %u, column %u: %.9g would be %.9g in %s", r, col,
                            (double)ref[col], (double)v, nib_dtype_name(dt));
        }
    }
    return 0;
}

int nib_repack_into(const struct llama_weight *w, struct nib_qspec target, uint8_t *out, char *err,
                    size_t errlen)
{
    struct job j = {.w = w, .err = err, .errlen = errlen};
    const struct gguf_tensor *t = w->t;
    if (!t)
        return snprintf(err, errlen, "repack: the tensor is absent"), -1;
    gguf_str_show(t->name, j.name);
    const struct ggml_type_info *ti = ggml_type_info(t->type);
    j.k = kind_of(t->type);
    char fmt[32];
    nib_qspec_str(target, fmt, sizeof fmt);
    if (!j.k)
        return fail(&j,
                    "type %s has no exact nibble format (types that repack: Q4_0, Q4_1, Q5_0, "
                    "Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
                    ggml_type_name(t->type));
    if (target.dtype != NIB_DT_Q4 && target.dtype != NIB_DT_Q8C && target.dtype != NIB_DT_Q4F &&
        target.dtype != NIB_DT_Q8F)
        return fail(&j, "%s is not a repack target (q4, q8c, q4f and q8f are)", fmt);
    if (!nib_qformat_valid(target.dtype, target.group) || target.group == 0 ||
        j.k->group % target.group)
        return fail(&j, "%s groups of %u cannot be held by %s (its group must divide %u)", ti->name,
                    j.k->group, fmt, j.k->group);
    if (w->add != 0.0f)
        return fail(&j, "the view adds %g to every weight: not a repack", (double)w->add);
    if (w->rows == 1 && w->neox_head)
        return fail(&j, "a reordered vector is not repacked");
    if (w->cols == 0 || w->cols % ti->blck)
        return fail(&j, "rows of %u elements are not a whole number of %s blocks (%u)", w->cols,
                    ti->name, ti->blck);
    if (nib_qlayout_get(&j.l, target.dtype, target.group, w->rows, w->cols))
        return fail(&j, "%ux%u does not fit format %s", w->rows, w->cols, fmt);
    uint64_t rb = (uint64_t)w->cols / ti->blck * ti->bytes;
    float *ref = malloc((size_t)w->cols * sizeof *ref);
    if (!ref)
        return fail(&j, "out of memory");
    memset(out, 0, j.l.size); /* padding: code 0, scale 0, min 0 */
    int rc = 0;
    for (uint32_t r = 0; r < j.l.n_pad && rc == 0; r++) {
        if (r >= w->rows) { /* q4's zero code is 8 */
            for (uint32_t c = 0; c < j.l.k_pad && target.dtype == NIB_DT_Q4; c++)
                put_code(&j.l, out, r, c, 8);
            continue;
        }
        const uint8_t *p = src_row(&j, r, rb);
        if (!p) {
            rc = fail(&j, "view row %u (%ux%u %s) does not fit its data", r, w->rows, w->cols,
                      ti->name);
            break;
        }
        rc = repack_row(&j, r, p, ref, out);
        for (uint32_t c = w->cols; c < j.l.k_pad && target.dtype == NIB_DT_Q4; c++)
            put_code(&j.l, out, r, c, 8);
    }
    free(ref);
    return rc;
}

int nib_repack_gguf(const struct llama_weight *w, uint8_t *out, char *err, size_t errlen)
{
    struct nib_qspec spec = {0, 0};
    if (w->t && nib_repack_spec(w->t->type, &spec)) {
        char name[72];
        snprintf(err, errlen,
                 "tensor '%s': type %s has no exact nibble format (types that repack: Q4_0, "
                 "Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
                 gguf_str_show(w->t->name, name), ggml_type_name(w->t->type));
        return -1;
    }
    return nib_repack_into(w, spec, out, err, errlen);
}
