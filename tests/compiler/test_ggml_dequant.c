/* GGUF tensor types: dequantization value-exact and exact repacks.
 *
 * The reference here is independent of tools/compiler/ggml_dequant.c: a
 * block is described by its logical fields (f16 d and dmin/m, sub-block
 * scales and mins as stored, each element's stored code), packed into
 * bytes by an encoder written from ggml's block layouts (the way ggml's
 * quantize_row_*_ref lays codes out), and each weight is computed from the
 * fields with the format's formula. Fields are driven to their extremes
 * (zero and negative zero scales, the largest half, subnormal halves,
 * infinities and NaN, the smallest and largest codes, 6-bit scales and
 * mins 0 and 63, high bits set and clear) and at random.
 *
 * Repacks: every type repacked into its nibble format dequantizes
 * (nib_dequantize_row, the kernels' definition) to ggml's weights bit for
 * bit (Q3_K: a zero's sign aside), through views too (row0, rotate-half
 * reorder), and into every other format that nib_repack_holds allows. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/f16.h"
#include "kernels/qformat.h"
#include "model_blob/blob_view.h"
#include "tests/common/gguf_fixture.h"
#include "tests/common/test_util.h"
#include "tools/compiler/ggml_dequant.h"
#include "tools/compiler/ggml_quant.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/pack.h"
#include "tools/compiler/plan.h"
#include "tools/compiler/quant.h"
#include "tools/compiler/repack.h"

#define QK 256

static const int8_t book[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                1,    13,   25,  38,  53,  69,  89,  113};

/* One block's logical fields. */
struct lblk {
    uint16_t d, dm;     /* f16 bits: d, and m (Q4_1, Q5_1) or dmin (Q2_K, Q4_K, Q5_K) */
    int sc[16], mn[16]; /* sub-block scales and mins as stored */
    int q[QK];          /* stored codes */
};

/* What each type stores. */
struct tdesc {
    uint32_t type, blck, bytes;
    int nsub;       /* sub-blocks with a scale (0: none) */
    int qlo, qhi;   /* stored code range */
    int sclo, schi; /* stored sub-scale range */
    int mnhi;       /* stored sub-min range 0..mnhi (0: none) */
    int has_dm;
};

static const struct tdesc types[] = {
    {GGML_TYPE_Q4_0, 32, 18, 0, 0, 15, 0, 0, 0, 0},
    {GGML_TYPE_Q4_1, 32, 20, 0, 0, 15, 0, 0, 0, 1},
    {GGML_TYPE_Q5_0, 32, 22, 0, 0, 31, 0, 0, 0, 0},
    {GGML_TYPE_Q5_1, 32, 24, 0, 0, 31, 0, 0, 0, 1},
    {GGML_TYPE_Q8_0, 32, 34, 0, -128, 127, 0, 0, 0, 0},
    {GGML_TYPE_Q2_K, QK, 84, 16, 0, 3, 0, 15, 15, 1},
    {GGML_TYPE_Q3_K, QK, 110, 16, 0, 7, 0, 63, 0, 0},
    {GGML_TYPE_Q4_K, QK, 144, 8, 0, 15, 0, 63, 63, 1},
    {GGML_TYPE_Q5_K, QK, 176, 8, 0, 31, 0, 63, 63, 1},
    {GGML_TYPE_Q6_K, QK, 210, 16, 0, 63, -128, 127, 0, 0},
    {GGML_TYPE_IQ4_NL, 32, 18, 0, 0, 15, 0, 0, 0, 0},
    {GGML_TYPE_IQ4_XS, QK, 136, 8, 0, 15, 0, 63, 0, 0},
};
#define N_TYPES (sizeof types / sizeof types[0])

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

static float h2f(uint16_t h)
{
    return nib_f16_to_f32(h);
}

/* ---- the encoder: logical fields -> ggml block bytes ---- */

/* Q2_K/Q3_K 2-bit planes: byte 32*h + l holds elements 128h + l + 32i in
 * bits 2i (i = 0..3). */
static void put_2bit(uint8_t *qs, const int *L)
{
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++)
            qs[32 * h + l] = (uint8_t)(L[128 * h + l] | L[128 * h + l + 32] << 2 |
                                       L[128 * h + l + 64] << 4 | L[128 * h + l + 96] << 6);
}

/* Q4_K/Q5_K 12 scale bytes from eight 6-bit scales and mins. */
static void put_k_scales(uint8_t *s, const int *sc, const int *mn)
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = (uint8_t)sc[j];
            s[j + 4] = (uint8_t)mn[j];
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

static void encode(uint32_t type, const struct lblk *b, uint8_t *o)
{
    int L[QK];
    memcpy(L, b->q, sizeof L);
    switch (type) {
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_Q4_1: {
        int off = type == GGML_TYPE_Q4_1 ? 4 : 2;
        put16(o, b->d);
        if (type == GGML_TYPE_Q4_1)
            put16(o + 2, b->dm);
        for (int j = 0; j < 16; j++)
            o[off + j] = (uint8_t)(L[j] | L[j + 16] << 4);
        return;
    }
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1: {
        int off = type == GGML_TYPE_Q5_1 ? 4 : 2;
        uint32_t qh = 0;
        put16(o, b->d);
        if (type == GGML_TYPE_Q5_1)
            put16(o + 2, b->dm);
        for (int j = 0; j < 32; j++)
            qh |= (uint32_t)(L[j] >> 4) << j;
        for (int i = 0; i < 4; i++)
            o[off + i] = (uint8_t)(qh >> (8 * i));
        for (int j = 0; j < 16; j++)
            o[off + 4 + j] = (uint8_t)((L[j] & 15) | (L[j + 16] & 15) << 4);
        return;
    }
    case GGML_TYPE_Q8_0:
        put16(o, b->d);
        for (int j = 0; j < 32; j++)
            o[2 + j] = (uint8_t)(int8_t)L[j];
        return;
    case GGML_TYPE_Q2_K:
        for (int j = 0; j < 16; j++)
            o[j] = (uint8_t)(b->sc[j] | b->mn[j] << 4);
        put_2bit(o + 16, L);
        put16(o + 80, b->d);
        put16(o + 82, b->dm);
        return;
    case GGML_TYPE_Q3_K: {
        uint8_t *hm = o, *s = o + 96;
        memset(hm, 0, 32);
        memset(s, 0, 12);
        for (int j = 0; j < 16; j++) {
            int l = b->sc[j];
            if (j < 8)
                s[j] = (uint8_t)(l & 15);
            else
                s[j - 8] |= (uint8_t)((l & 15) << 4);
            s[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        for (int j = 0; j < QK; j++)
            if (L[j] > 3) {
                hm[j % 32] |= (uint8_t)(1 << (j / 32));
                L[j] -= 4;
            }
        put_2bit(o + 32, L);
        put16(o + 108, b->d);
        return;
    }
    case GGML_TYPE_Q4_K:
        put16(o, b->d);
        put16(o + 2, b->dm);
        put_k_scales(o + 4, b->sc, b->mn);
        for (int j = 0; j < QK; j += 64)
            for (int l = 0; l < 32; l++)
                o[16 + j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
        return;
    case GGML_TYPE_Q5_K: {
        uint8_t *qh = o + 16, *ql = o + 48;
        put16(o, b->d);
        put16(o + 2, b->dm);
        put_k_scales(o + 4, b->sc, b->mn);
        memset(qh, 0, 32);
        for (int n = 0, m1 = 1, m2 = 2; n < QK; n += 64, m1 <<= 2, m2 <<= 2, ql += 32)
            for (int j = 0; j < 32; j++) {
                int l1 = L[n + j], l2 = L[n + j + 32];
                if (l1 > 15)
                    l1 -= 16, qh[j] |= (uint8_t)m1;
                if (l2 > 15)
                    l2 -= 16, qh[j] |= (uint8_t)m2;
                ql[j] = (uint8_t)(l1 | l2 << 4);
            }
        return;
    }
    case GGML_TYPE_Q6_K: {
        uint8_t *ql = o, *qh = o + 128;
        for (int j = 0; j < QK; j += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((L[j + l] & 15) | (L[j + l + 64] & 15) << 4);
                ql[l + 32] = (uint8_t)((L[j + l + 32] & 15) | (L[j + l + 96] & 15) << 4);
                qh[l] = (uint8_t)(L[j + l] >> 4 | (L[j + l + 32] >> 4) << 2 |
                                  (L[j + l + 64] >> 4) << 4 | (L[j + l + 96] >> 4) << 6);
            }
        for (int j = 0; j < 16; j++)
            o[192 + j] = (uint8_t)(int8_t)b->sc[j];
        put16(o + 208, b->d);
        return;
    }
    case GGML_TYPE_IQ4_XS: {
        uint16_t sh = 0;
        put16(o, b->d);
        memset(o + 4, 0, 4);
        for (int ib = 0; ib < 8; ib++) {
            o[4 + ib / 2] |= (uint8_t)((b->sc[ib] & 15) << (4 * (ib % 2)));
            sh |= (uint16_t)((b->sc[ib] >> 4) << (2 * ib));
            for (int j = 0; j < 16; j++)
                o[8 + 16 * ib + j] = (uint8_t)(L[32 * ib + j] | L[32 * ib + 16 + j] << 4);
        }
        put16(o + 2, sh);
        return;
    }
    default: ck_abort_msg("no encoder for type %u", type);
    }
}

/* ---- the formula: logical fields -> weight e ---- */

static float expect(uint32_t type, const struct lblk *b, int e)
{
    float d = h2f(b->d), dm = h2f(b->dm);
    int q = b->q[e];
    switch (type) {
    case GGML_TYPE_Q4_0: return (float)(q - 8) * d;
    case GGML_TYPE_Q4_1: return (float)q * d + dm;
    case GGML_TYPE_Q5_0: return (float)(q - 16) * d;
    case GGML_TYPE_Q5_1: return (float)q * d + dm;
    case GGML_TYPE_Q8_0: return (float)q * d;
    case GGML_TYPE_IQ4_NL: return d * (float)book[q];
    case GGML_TYPE_Q2_K: return d * (float)b->sc[e / 16] * (float)q - dm * (float)b->mn[e / 16];
    case GGML_TYPE_Q3_K: return d * (float)(b->sc[e / 16] - 32) * (float)(q - 4);
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K: return d * (float)b->sc[e / 32] * (float)q - dm * (float)b->mn[e / 32];
    case GGML_TYPE_Q6_K: return d * (float)b->sc[e / 16] * (float)(q - 32);
    case GGML_TYPE_IQ4_XS: return d * (float)(b->sc[e / 32] - 32) * (float)book[q];
    default: ck_abort_msg("no formula for type %u", type);
    }
    return 0;
}

/* The same float: equal bits, or both NaN (payloads may differ). */
static int same_bits(float a, float b)
{
    return !memcmp(&a, &b, 4) || (isnan(a) && isnan(b));
}

/* ---- field values ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static int rnd_in(int lo, int hi)
{
    return lo + (int)(rnd() % (uint32_t)(hi - lo + 1));
}

/* zero, negative zero, largest half, its negative, smallest subnormal,
 * largest negative subnormal, smallest normal, 1, -1, +inf, NaN */
static const uint16_t extreme_h[] = {0x0000, 0x8000, 0x7bff, 0xfbff, 0x0001, 0x83ff,
                                     0x0400, 0x3c00, 0xbc00, 0x7c00, 0x7e00};
#define N_EXT (sizeof extreme_h / sizeof extreme_h[0])

/* A finite random half of moderate size (either sign). */
static uint16_t rnd_half(void)
{
    return (uint16_t)((rnd() & 0x8000) | rnd_in(0x0001, 0x7bff));
}

/* pattern: 0 all lo, 1 all hi, 2 alternate, 3 ramp, 4 random */
static int pick(int pattern, int i, int lo, int hi)
{
    switch (pattern) {
    case 0: return lo;
    case 1: return hi;
    case 2: return i % 2 ? hi : lo;
    case 3: return lo + i % (hi - lo + 1);
    default: return rnd_in(lo, hi);
    }
}

static void fill(const struct tdesc *t, struct lblk *b, uint16_t d, uint16_t dm, int qp, int sp,
                 int mp)
{
    memset(b, 0, sizeof *b);
    b->d = d;
    b->dm = t->has_dm ? dm : 0;
    for (uint32_t e = 0; e < t->blck; e++)
        b->q[e] = pick(qp, (int)e, t->qlo, t->qhi);
    for (int s = 0; s < t->nsub; s++) {
        b->sc[s] = pick(sp, s, t->sclo, t->schi);
        b->mn[s] = t->mnhi ? pick(mp, s + 1, 0, t->mnhi) : 0;
    }
}

static void check_block(const struct tdesc *t, const struct lblk *b, const char *what)
{
    uint8_t raw[256];
    float out[QK];
    encode(t->type, b, raw);
    ck_assert_int_eq(ggml_dequant_row(t->type, raw, t->blck, out), 0);
    for (uint32_t e = 0; e < t->blck; e++) {
        float want = expect(t->type, b, (int)e);
        ck_assert_msg(
            same_bits(out[e], want), "%s %s: d %04x dm %04x element %u (code %d): %.9g, want %.9g",
            ggml_type_name(t->type), what, b->d, b->dm, e, b->q[e], (double)out[e], (double)want);
    }
}

START_TEST(test_type_table)
{
    for (size_t i = 0; i < N_TYPES; i++) {
        const struct ggml_type_info *ti = ggml_type_info(types[i].type);
        ck_assert_ptr_nonnull(ti);
        ck_assert_uint_eq(ti->blck, types[i].blck);
        ck_assert_uint_eq(ti->bytes, types[i].bytes);
        ck_assert_str_eq(ggml_type_name(types[i].type), ti->name);
        ck_assert_ptr_nonnull(strstr(ggml_supported_types(), ti->name));
    }
    ck_assert_ptr_null(ggml_type_info(16)); /* iq2_xxs */
    ck_assert_ptr_null(ggml_type_info(4));  /* removed from ggml */
    ck_assert_ptr_null(ggml_type_info(UINT32_MAX));
    ck_assert_mem_eq(ggml_iq4_values, book, 16);
}
END_TEST

/* Every field at its extremes, one type per loop iteration. */
START_TEST(test_extremes)
{
    const struct tdesc *t = &types[_i];
    struct lblk b;
    int n = 0;
    for (size_t di = 0; di < N_EXT; di++)
        for (size_t mi = 0; mi < (t->has_dm ? N_EXT : 1); mi += 1 + (di % 2))
            for (int qp = 0; qp < 5; qp++)
                for (int sp = 0; sp < (t->nsub ? 5 : 1); sp++) {
                    fill(t, &b, extreme_h[di], extreme_h[mi], qp, sp, (sp + qp) % 5);
                    check_block(t, &b, "extremes");
                    n++;
                }
    ck_assert_int_gt(n, 50);
}
END_TEST

/* Whole tensors of random fields: rows of several blocks dequantized at
 * once equal the formula, block by block. */
START_TEST(test_random_tensors)
{
    const struct tdesc *t = &types[_i];
    const uint32_t rows = 7, nblk = t->blck == QK ? 3 : 24, cols = nblk * t->blck;
    uint8_t *data = malloc((size_t)rows * nblk * t->bytes);
    struct lblk *lb = malloc(sizeof *lb * rows * nblk);
    float *out = malloc(cols * sizeof *out);
    for (int round = 0; round < 8; round++) {
        for (uint32_t k = 0; k < rows * nblk; k++) {
            fill(t, &lb[k], rnd_half(), rnd_half(), 4, 4, 4);
            encode(t->type, &lb[k], data + (size_t)k * t->bytes);
        }
        for (uint32_t r = 0; r < rows; r++) {
            ck_assert_int_eq(
                ggml_dequant_row(t->type, data + (size_t)r * nblk * t->bytes, cols, out), 0);
            for (uint32_t c = 0; c < cols; c++) {
                const struct lblk *b = &lb[r * nblk + c / t->blck];
                float want = expect(t->type, b, (int)(c % t->blck));
                ck_assert_msg(same_bits(out[c], want), "%s row %u col %u: %.9g, want %.9g",
                              ggml_type_name(t->type), r, c, (double)out[c], (double)want);
            }
        }
    }
    free(data), free(lb), free(out);
}
END_TEST

START_TEST(test_plain_types)
{
    uint8_t raw[8] = {0x00, 0x3c, 0x01, 0x80, 0x00, 0x7c, 0xff, 0x7b}; /* 1, -2^-24, inf, 65504 */
    float out[4];
    ck_assert_int_eq(ggml_dequant_row(GGML_TYPE_F16, raw, 4, out), 0);
    ck_assert(out[0] == 1.0f && out[1] == -ldexpf(1, -24) && isinf(out[2]) && out[3] == 65504.0f);
    uint8_t bf[4] = {0x80, 0x3f, 0x01, 0x80}; /* 1, -(smallest bf16 subnormal) */
    ck_assert_int_eq(ggml_dequant_row(GGML_TYPE_BF16, bf, 2, out), 0);
    ck_assert(out[0] == 1.0f && out[1] == -0x1p-133f);
    float f[2] = {-0.0f, 3.5f};
    ck_assert_int_eq(ggml_dequant_row(GGML_TYPE_F32, (const uint8_t *)f, 2, out), 0);
    ck_assert(same_bits(out[0], -0.0f) && out[1] == 3.5f);
}
END_TEST

/* A row that is not a whole number of blocks, or an unknown type, is
 * refused before anything is written. */
START_TEST(test_dequant_refuses)
{
    uint8_t raw[256 * 2] = {0};
    float out[520];
    out[0] = 42.0f;
    for (size_t i = 0; i < N_TYPES; i++) {
        ck_assert_int_eq(ggml_dequant_row(types[i].type, raw, types[i].blck + 16, out), -1);
        ck_assert_int_eq(ggml_dequant_row(types[i].type, raw, types[i].blck / 2, out), -1);
    }
    ck_assert_int_eq(ggml_dequant_row(16, raw, 256, out), -1);
    ck_assert_int_eq(ggml_dequant_row(UINT32_MAX, raw, 256, out), -1);
    ck_assert(out[0] == 42.0f);
}
END_TEST

/* ---- tensors and views ---- */

struct src {
    struct gguf_tensor t;
    uint8_t *data;
    uint32_t rows, cols;
};

/* A rows x cols tensor of random finite fields, with a few blocks at the
 * extremes (largest and subnormal halves, negative and zero scales, codes
 * and sub-scales at both ends). */
static void make_src(struct src *s, const struct tdesc *td, uint32_t rows, uint32_t cols)
{
    uint32_t nblk = cols / td->blck;
    s->rows = rows, s->cols = cols;
    s->data = malloc((size_t)rows * nblk * td->bytes);
    static const uint16_t fin[] = {0x0000, 0x8000, 0x7bff, 0xfbff, 0x0001, 0x83ff, 0x3c00};
    for (uint32_t k = 0; k < rows * nblk; k++) {
        struct lblk b;
        if (k % 5 == 1)
            fill(td, &b, fin[rnd() % 7], fin[rnd() % 7], (int)(rnd() % 5), (int)(rnd() % 5),
                 (int)(rnd() % 5));
        else
            fill(td, &b, rnd_half(), rnd_half(), 4, 4, 4);
        encode(td->type, &b, s->data + (size_t)k * td->bytes);
    }
    memset(&s->t, 0, sizeof s->t);
    s->t.name = (struct gguf_str){6, "blk.0w"};
    s->t.n_dims = 2;
    s->t.ne[0] = cols, s->t.ne[1] = rows, s->t.ne[2] = s->t.ne[3] = 1;
    s->t.type = td->type;
    s->t.n_elems = (uint64_t)rows * cols;
    s->t.nbytes = (uint64_t)rows * nblk * td->bytes;
    s->t.data = s->data;
}

/* Source row of view row r, from the definition (independent of
 * weight_view.c): row0 plus, within heads of hd rows, 2j <- j and
 * 2j+1 <- j + rd/2 for j < rd/2. */
static uint32_t view_src(uint32_t row0, uint32_t hd, uint32_t rd, uint32_t r)
{
    if (!hd || r % hd >= rd)
        return row0 + r;
    uint32_t h = r / hd, j = r % hd;
    return row0 + h * hd + (j % 2 ? rd / 2 + j / 2 : j / 2);
}

/* Repack w into spec and compare every weight with ggml's: bit for bit,
 * or (zero_sign) a zero of either sign for a zero. */
static void check_repack(const struct llama_weight *w, struct nib_qspec spec, int zero_sign,
                         const char *what)
{
    struct nib_qlayout l;
    char err[512], fs[32];
    ck_assert_int_eq(nib_qlayout_get(&l, spec.dtype, spec.group, w->rows, w->cols), 0);
    uint8_t *p = malloc(l.size);
    nib_qspec_str(spec, fs, sizeof fs);
    ck_assert_msg(nib_repack_into(w, spec, p, err, sizeof err) == 0, "%s %s -> %s: %s",
                  ggml_type_name(w->t->type), what, fs, err);
    float *want = malloc(w->cols * 4), *got = malloc(w->cols * 4);
    int zeros = 0;
    for (uint32_t r = 0; r < w->rows; r++) {
        ck_assert_int_eq(llama_weight_row_f32(w, r, want), 0);
        nib_dequantize_row(&l, p, r, got);
        for (uint32_t c = 0; c < w->cols; c++) {
            int ok = !memcmp(&want[c], &got[c], 4);
            if (!ok && zero_sign && want[c] == 0.0f && got[c] == 0.0f)
                ok = 1, zeros++;
            ck_assert_msg(ok, "%s %s -> %s: row %u col %u: %.9g repacked as %.9g",
                          ggml_type_name(w->t->type), what, fs, r, c, (double)want[c],
                          (double)got[c]);
        }
    }
    /* padding rows: scale 0 (weights 0) */
    for (uint32_t r = w->rows; r < l.n_pad; r++) {
        nib_dequantize_row(&l, p, r, got);
        for (uint32_t c = 0; c < w->cols; c++)
            ck_assert_msg(got[c] == 0.0f, "padding row %u col %u is %g", r, c, (double)got[c]);
    }
    free(p), free(want), free(got);
}

/* The lossless-repack proof: each type into its own format. */
START_TEST(test_repack_native)
{
    const struct tdesc *td = &types[_i];
    struct src s;
    make_src(&s, td, 21, 2 * QK);
    struct llama_weight w = {.t = &s.t, .rows = s.rows, .cols = s.cols};
    struct nib_qspec spec;
    ck_assert_int_eq(nib_repack_spec(td->type, &spec), 0);
    ck_assert(nib_repack_holds(td->type, spec));
    check_repack(&w, spec, td->type == GGML_TYPE_Q3_K, "native");
    /* nib_repack_gguf is the same thing */
    struct nib_qlayout l;
    nib_qlayout_get(&l, spec.dtype, spec.group, w.rows, w.cols);
    uint8_t *a = malloc(l.size), *b = malloc(l.size);
    char err[256];
    ck_assert_int_eq(nib_repack_gguf(&w, a, err, sizeof err), 0);
    ck_assert_int_eq(nib_repack_into(&w, spec, b, err, sizeof err), 0);
    ck_assert_mem_eq(a, b, l.size);
    free(a), free(b), free(s.data);
}
END_TEST

/* The contract's table of exact homes. */
START_TEST(test_repack_specs)
{
    static const struct {
        uint32_t type, dtype, group;
    } want[] = {
        {GGML_TYPE_Q4_0, NIB_DT_Q4, 32},  {GGML_TYPE_Q8_0, NIB_DT_Q8C, 32},
        {GGML_TYPE_Q5_0, NIB_DT_Q8C, 32}, {GGML_TYPE_IQ4_NL, NIB_DT_Q8C, 32},
        {GGML_TYPE_Q4_1, NIB_DT_Q4F, 32}, {GGML_TYPE_Q4_K, NIB_DT_Q4F, 32},
        {GGML_TYPE_Q2_K, NIB_DT_Q4F, 16}, {GGML_TYPE_Q3_K, NIB_DT_Q4F, 16},
        {GGML_TYPE_Q5_1, NIB_DT_Q8F, 32}, {GGML_TYPE_Q5_K, NIB_DT_Q8F, 32},
        {GGML_TYPE_Q6_K, NIB_DT_Q8F, 16}, {GGML_TYPE_IQ4_XS, NIB_DT_Q8F, 32},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct nib_qspec s;
        ck_assert_int_eq(nib_repack_spec(want[i].type, &s), 0);
        ck_assert_msg(s.dtype == want[i].dtype && s.group == want[i].group, "%s",
                      ggml_type_name(want[i].type));
    }
    struct nib_qspec s;
    ck_assert_int_eq(nib_repack_spec(GGML_TYPE_F32, &s), -1);
    ck_assert_int_eq(nib_repack_spec(GGML_TYPE_F16, &s), -1);
    ck_assert_int_eq(nib_repack_spec(GGML_TYPE_BF16, &s), -1);
    ck_assert_int_eq(nib_repack_spec(16, &s), -1);
    /* cross-format homes a fused tensor may need */
    ck_assert(nib_repack_holds(GGML_TYPE_Q4_0, (struct nib_qspec){NIB_DT_Q8C, 32}));
    ck_assert(nib_repack_holds(GGML_TYPE_Q4_0, (struct nib_qspec){NIB_DT_Q8F, 16}));
    ck_assert(nib_repack_holds(GGML_TYPE_Q4_K, (struct nib_qspec){NIB_DT_Q8F, 16}));
    ck_assert(nib_repack_holds(GGML_TYPE_Q4_K, (struct nib_qspec){NIB_DT_Q4F, 16}));
    ck_assert(nib_repack_holds(GGML_TYPE_Q2_K, (struct nib_qspec){NIB_DT_Q8F, 16}));
    ck_assert(nib_repack_holds(GGML_TYPE_Q8_0, (struct nib_qspec){NIB_DT_Q8F, 32}));
    ck_assert(!nib_repack_holds(GGML_TYPE_Q6_K, (struct nib_qspec){NIB_DT_Q8F, 32}));
    ck_assert(!nib_repack_holds(GGML_TYPE_Q6_K, (struct nib_qspec){NIB_DT_Q4F, 16}));
    ck_assert(!nib_repack_holds(GGML_TYPE_Q4_K, (struct nib_qspec){NIB_DT_Q4, 32}));
    ck_assert(!nib_repack_holds(GGML_TYPE_Q5_K, (struct nib_qspec){NIB_DT_Q4F, 32}));
    ck_assert(!nib_repack_holds(GGML_TYPE_Q8_0, (struct nib_qspec){NIB_DT_Q4, 32}));
    ck_assert(!nib_repack_holds(GGML_TYPE_Q4_0, (struct nib_qspec){NIB_DT_Q4, 64}));
    ck_assert(!nib_repack_holds(GGML_TYPE_F16, (struct nib_qspec){NIB_DT_Q8F, 32}));
    ck_assert(!nib_repack_holds(GGML_TYPE_Q4_0, (struct nib_qspec){NIB_DT_Q4C, 0}));
}
END_TEST

/* Every type into every group format: exact where nib_repack_holds says
 * so, refused with a message otherwise (random data: never by luck). */
START_TEST(test_repack_cross)
{
    const struct tdesc *td = &types[_i];
    static const struct nib_qspec targets[] = {
        {NIB_DT_Q4, 32},  {NIB_DT_Q8C, 32}, {NIB_DT_Q4F, 16}, {NIB_DT_Q4F, 32},
        {NIB_DT_Q8F, 16}, {NIB_DT_Q8F, 32}, {NIB_DT_Q4A, 32}, {NIB_DT_Q4, 64},
    };
    struct src s;
    make_src(&s, td, 9, QK);
    struct llama_weight w = {.t = &s.t, .rows = s.rows, .cols = s.cols};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        struct nib_qspec sp = targets[i];
        if (nib_repack_holds(td->type, sp)) {
            check_repack(&w, sp, 1, "cross");
            continue;
        }
        uint8_t *p = malloc(nib_qformat_size(sp.dtype, sp.group, w.rows, w.cols));
        char err[512] = "";
        ck_assert_msg(nib_repack_into(&w, sp, p, err, sizeof err) == -1, "%s -> %u/%u accepted",
                      ggml_type_name(td->type), sp.dtype, sp.group);
        ck_assert_msg(strstr(err, "tensor 'blk.0w'") != NULL, "%s", err);
        free(p);
    }
    free(s.data);
}
END_TEST

/* Views: a fused source (row0) and the rotate-half reorder, full and
 * partial (rope_dim < head), read and repacked. */
START_TEST(test_views)
{
    const struct tdesc *td = &types[_i];
    struct src s;
    make_src(&s, td, 40, QK);
    float *src = malloc(QK * 4), *got = malloc(QK * 4);
    static const uint32_t cfg[][4] = {
        /* row0, rows, neox_head, neox_rope_dim */
        {8, 13, 0, 0},
        {0, 16, 8, 8},
        {16, 24, 8, 4},
        {8, 32, 16, 16},
    };
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        struct llama_weight w = {.t = &s.t,
                                 .rows = cfg[k][1],
                                 .cols = QK,
                                 .row0 = cfg[k][0],
                                 .neox_head = cfg[k][2],
                                 .neox_rope_dim = cfg[k][3]};
        for (uint32_t r = 0; r < w.rows; r++) {
            uint32_t sr = view_src(w.row0, w.neox_head, w.neox_rope_dim, r);
            ck_assert_uint_eq(llama_weight_src_row(&w, r), sr);
            ck_assert_int_eq(ggml_dequant_row(td->type,
                                              s.data + (size_t)sr * QK / td->blck * td->bytes, QK,
                                              src),
                             0);
            ck_assert_int_eq(llama_weight_row_f32(&w, r, got), 0);
            ck_assert_mem_eq(src, got, QK * 4);
        }
        ck_assert_uint_eq(llama_weight_src_row(&w, w.rows), UINT32_MAX);
        ck_assert_int_eq(llama_weight_row_f32(&w, w.rows, got), -1);
        struct nib_qspec spec;
        nib_repack_spec(td->type, &spec);
        check_repack(&w, spec, td->type == GGML_TYPE_Q3_K, "view");
    }
    /* a view reaching past the source's rows */
    struct llama_weight w = {.t = &s.t, .rows = 16, .cols = QK, .row0 = 30};
    ck_assert_int_eq(llama_weight_row_f32(&w, 9, got), 0);
    ck_assert_int_eq(llama_weight_row_f32(&w, 10, got), -1);
    struct nib_qspec spec;
    nib_repack_spec(td->type, &spec);
    uint8_t *p = malloc(nib_qformat_size(spec.dtype, spec.group, 16, QK));
    char err[512];
    ck_assert_int_eq(nib_repack_into(&w, spec, p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "view row 10") && strstr(err, "does not fit"), "%s", err);
    free(p), free(src), free(got), free(s.data);
}
END_TEST

/* Vector views: elements reordered per head, a slice of a fused vector,
 * and `add`. */
START_TEST(test_vector_views)
{
    float v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (float)i;
    struct gguf_tensor t = {.name = {4, "bias"},
                            .n_dims = 1,
                            .ne = {64, 1, 1, 1},
                            .type = GGML_TYPE_F32,
                            .n_elems = 64,
                            .nbytes = 256,
                            .data = (const uint8_t *)v};
    struct llama_weight w = {
        .t = &t, .rows = 1, .cols = 32, .row0 = 16, .neox_head = 16, .neox_rope_dim = 8};
    float out[64];
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, out), 0);
    for (uint32_t i = 0; i < 32; i++)
        ck_assert_msg(out[i] == (float)(view_src(16, 16, 8, i)), "element %u is %g", i,
                      (double)out[i]);
    w.add = 1.0f, w.neox_head = 0;
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, out), 0);
    for (uint32_t i = 0; i < 32; i++)
        ck_assert(out[i] == (float)(16 + i) + 1.0f);
    w.row0 = 40; /* 40 + 32 > 64 */
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, out), -1);
    w.row0 = 0, w.neox_head = 8, w.neox_rope_dim = 9; /* odd: inconsistent */
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, out), -1);
    w.neox_rope_dim = 16; /* larger than the head */
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, out), -1);
}
END_TEST

/* Bad input: clear refusals, never a crash. */
START_TEST(test_repack_refuses)
{
    char err[512];
    const struct tdesc *q40 = &types[0], *q4k = &types[7];
    struct src s;
    make_src(&s, q40, 8, 64);
    uint8_t *p = malloc(1 << 16);
    struct nib_qspec q4 = {NIB_DT_Q4, 32};
    /* a row that is not whole blocks */
    struct llama_weight w = {.t = &s.t, .rows = 8, .cols = 48};
    ck_assert_int_eq(nib_repack_into(&w, q4, p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "not a whole number of q4_0 blocks (32)"), "%s", err);
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, (float *)p), -1);
    /* data shorter than the rows */
    w.cols = 64;
    s.t.nbytes = 7 * 36;
    ck_assert_int_eq(nib_repack_into(&w, q4, p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "does not fit"), "%s", err);
    s.t.nbytes = 8 * 36;
    /* a tensor record with no shape (ne[0] = 0): refused, no division by zero */
    s.t.ne[0] = 0;
    ck_assert_int_eq(nib_repack_into(&w, q4, p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "does not fit"), "%s", err);
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, (float *)p), -1);
    s.t.ne[0] = 64;
    /* non-finite scale */
    put16(s.data + 18 * 3, 0x7c00); /* row 1, second block */
    ck_assert_int_eq(nib_repack_into(&w, q4, p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "row 1, columns 32..63: a non-finite scale"), "%s", err);
    put16(s.data + 18 * 3, 0x3c00);
    ck_assert_int_eq(nib_repack_into(&w, q4, p, err, sizeof err), 0);
    /* a view that adds */
    w.add = 1.0f;
    ck_assert_int_eq(nib_repack_into(&w, q4, p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "adds"), "%s", err);
    w.add = 0.0f;
    /* a format whose group does not divide the source's */
    ck_assert_int_eq(nib_repack_into(&w, (struct nib_qspec){NIB_DT_Q4, 64}, p, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "cannot be held by q4/64"), "%s", err);
    ck_assert_int_eq(nib_repack_into(&w, (struct nib_qspec){NIB_DT_F32, 0}, p, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "f32 is not a repack target"), "%s", err);
    ck_assert_int_eq(nib_repack_into(&w, (struct nib_qspec){NIB_DT_Q4A, 32}, p, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "q4a/32 is not a repack target"), "%s", err);
    /* a type with no exact format */
    s.t.type = GGML_TYPE_F16;
    ck_assert_int_eq(nib_repack_gguf(&w, p, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "type f16 has no exact nibble format") && strstr(err, "Q4_0"), "%s",
                  err);
    free(s.data);
    /* a Q4_K minimum cannot go into q8c (no minimum); a Q6_K scale that is
     * not a half cannot go into q8c (f16 scales) */
    make_src(&s, q4k, 8, QK);
    ck_assert_int_eq(nib_repack_into(&(struct llama_weight){.t = &s.t, .rows = 8, .cols = QK},
                                     (struct nib_qspec){NIB_DT_Q8C, 32}, p, err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "q8c has no minimum") || strstr(err, "is not a half"), "%s", err);
    free(s.data);
    free(p);
}
END_TEST

/* Q3_K in q8f/16 (signed codes, minimum -0.0) is bit for bit, zeros
 * included: the zero-sign allowance is q4f's alone. */
START_TEST(test_q3k_bit_exact_in_q8f)
{
    struct src s;
    make_src(&s, &types[6], 8, QK);
    struct llama_weight w = {.t = &s.t, .rows = 8, .cols = QK};
    check_repack(&w, (struct nib_qspec){NIB_DT_Q8F, 16}, 0, "q8f/16 (bit for bit)");
    free(s.data);
}
END_TEST

/* ---- nib compile --quant source, end to end ---- */

static const struct tdesc *desc_of(uint32_t type)
{
    for (size_t i = 0; i < N_TYPES; i++)
        if (types[i].type == type)
            return &types[i];
    return NULL;
}

/* Give fixture tensor `name` type `type` and random finite blocks. */
static void set_type(struct fx_model *m, const char *name, uint32_t type)
{
    struct fx_tensor *t = fx_tensor(m, name);
    ck_assert_msg(t != NULL, "fixture has no %s", name);
    const struct tdesc *td = desc_of(type);
    uint64_t n = t->ne[0] * t->ne[1], nb = n / td->blck;
    uint8_t *raw = malloc(nb * td->bytes);
    for (uint64_t k = 0; k < nb; k++) {
        struct lblk b;
        fill(td, &b, (uint16_t)rnd_in(0x1000, 0x2c00) | (k % 3 ? 0 : 0x8000),
             (uint16_t)rnd_in(0x1000, 0x2c00), 4, 4, 4);
        encode(type, &b, raw + k * td->bytes);
    }
    t->type = type;
    fx_tensor_set_raw(t, raw, nb * td->bytes);
    free(raw);
}

/* Compile the model with --quant source into a blob in memory; then every
 * row of every quantized source equals, weight for weight, its GGUF
 * dequantization (a zero's sign aside), and nothing was requantized. */
static void compile_exact(struct fx_model *fm, int *n_checked)
{
    struct fx_file f;
    fx_build(fm, &f);
    struct gguf_file g;
    struct llama_model m;
    char err[512];
    ck_assert_msg(gguf_open(&g, f.buf, f.size, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(llama_import(&m, &g, err, sizeof err) == 0, "%s", err);
    struct plan_opts o;
    memset(&o, 0, sizeof o);
    ck_assert_int_eq(nib_plan_opts_quant(&o, "source", err, sizeof err), 0);
    struct nib_plan p;
    ck_assert_msg(nib_plan_build(&p, &m, &o, err, sizeof err) == 0, "%s", err);
    FILE *out = tmpfile();
    ck_assert_ptr_nonnull(out);
    ck_assert_msg(nib_pack_blob(&p, &m, out, err, sizeof err) == 0, "%s", err);
    fseek(out, 0, SEEK_END);
    long size = ftell(out);
    uint8_t *blob = aligned_alloc(64, ((size_t)size + 63) & ~(size_t)63);
    rewind(out);
    ck_assert_uint_eq(fread(blob, 1, (size_t)size, out), (size_t)size);
    fclose(out);
    struct nib_blob_view v;
    ck_assert_msg(nib_blob_open(&v, blob, (uint64_t)size, 1, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(v.h->n_tensors, p.n_tensors);
    float *want = malloc(4096 * 4), *got = malloc(4096 * 4);
    for (uint32_t i = 0; i < p.n_tensors; i++) {
        const struct plan_tensor *pt = &p.tensors[i];
        const struct nib_tensor_rec *rec = &v.tensors[i];
        ck_assert_str_eq(rec->name, pt->rec.name);
        if (pt->kind != PT_ROWS || rec->dtype == NIB_DT_F32)
            continue;
        struct nib_qlayout l;
        ck_assert_int_eq(nib_qlayout_get(&l, rec->dtype, rec->group, rec->rows, rec->cols), 0);
        for (uint32_t k = 0; k < pt->n_src; k++) {
            const struct llama_weight *w = pt->src[k];
            ck_assert_msg(nib_repack_spec(w->t->type, &(struct nib_qspec){0, 0}) == 0,
                          "%s: source %u is not quantized", rec->name, k);
            for (uint32_t r = 0; r < w->rows; r++) {
                uint32_t pr = pt->tile_pairs ? r / 8 * 16 + k * 8 + r % 8 : pt->row_off[k] + r;
                ck_assert_int_eq(llama_weight_row_f32(w, r, want), 0);
                nib_qrow_f32(&l, v.weights + rec->offset, pr, 0, rec->cols, got);
                for (uint32_t c = 0; c < rec->cols; c++)
                    ck_assert_msg(!memcmp(&want[c], &got[c], 4) ||
                                      (want[c] == 0.0f && got[c] == 0.0f),
                                  "%s (%s from %s) row %u col %u: %.9g packed as %.9g", rec->name,
                                  nib_dtype_name(rec->dtype), ggml_type_name(w->t->type), r, c,
                                  (double)want[c], (double)got[c]);
            }
            (*n_checked)++;
        }
    }
    free(want), free(got), free(blob);
    nib_plan_free(&p);
    llama_model_free(&m);
    gguf_close(&g);
    fx_file_free(&f);
}

/* A Q4_K_M-like file (Q4_K with Q6_K attn_v, ffn_down and output), and one
 * whose fused projections mix types (Q|K|V in Q4_K, Q5_K, Q6_K; gate|up in
 * Q2_K, Q3_K), compile with --quant source to weights equal to the GGUF's. */
START_TEST(test_compile_source_kquant)
{
    struct fx_params pp;
    fx_quant_params(&pp, GGML_TYPE_F32);
    pp.dim = 256, pp.ffn_dim = 256, pp.n_layers = 1, pp.n_heads = 4, pp.n_kv_heads = 1;
    int n = 0;
    for (int variant = 0; variant < 2; variant++) {
        struct fx_model fm;
        fx_model_init(&fm, &pp);
        static const char *const names[] = {
            "token_embd.weight",   "blk.0.attn_q.weight",      "blk.0.attn_k.weight",
            "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.ffn_gate.weight",
            "blk.0.ffn_up.weight", "blk.0.ffn_down.weight",    "output.weight"};
        static const uint32_t q4km[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K,
                                        GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K,
                                        GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K};
        static const uint32_t mixed[] = {GGML_TYPE_IQ4_XS, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                                         GGML_TYPE_Q6_K,   GGML_TYPE_Q3_K, GGML_TYPE_Q2_K,
                                         GGML_TYPE_Q3_K,   GGML_TYPE_Q5_K, GGML_TYPE_IQ4_XS};
        for (int i = 0; i < 9; i++)
            set_type(&fm, names[i], variant ? mixed[i] : q4km[i]);
        compile_exact(&fm, &n);
        fx_model_free(&fm);
    }
    ck_assert_int_ge(n, 14);
}
END_TEST

/* The 32-element types the same way: Q|K|V in Q4_0, Q8_0, Q5_0 (q8c/32
 * holds all three), gate|up in Q4_1 and Q5_1, IQ4_NL elsewhere. */
START_TEST(test_compile_source_legacy)
{
    struct fx_params pp;
    fx_quant_params(&pp, GGML_TYPE_F32);
    struct fx_model fm;
    fx_model_init(&fm, &pp);
    int n = 0;
    static const uint32_t ty[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0,  GGML_TYPE_IQ4_NL,
                                  GGML_TYPE_Q4_1, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL};
    for (uint32_t l = 0; l < pp.n_layers; l++) {
        static const char *const part[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                           "ffn_gate", "ffn_up", "ffn_down"};
        for (int i = 0; i < 7; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s.weight", l, part[i]);
            set_type(&fm, name, ty[(i + l) % 7]);
        }
    }
    set_type(&fm, "token_embd.weight", GGML_TYPE_Q8_0);
    set_type(&fm, "output.weight", GGML_TYPE_Q5_1);
    compile_exact(&fm, &n);
    fx_model_free(&fm);
    ck_assert_int_ge(n, 14);
}
END_TEST

/* ---- writing GGUF types (tools/compiler/ggml_quant.c) ---- */

/* Rows of smooth random values quantized and dequantized again come back
 * within each type's error; zeros stay zeros; bad input is refused. */
START_TEST(test_quantize_roundtrip)
{
    static const struct {
        uint32_t type;
        double max_rel; /* RMS error / RMS value */
    } lim[] = {
        {GGML_TYPE_F32, 0},      {GGML_TYPE_F16, 1e-3},    {GGML_TYPE_BF16, 8e-3},
        {GGML_TYPE_Q4_0, 0.15},  {GGML_TYPE_Q4_1, 0.12},   {GGML_TYPE_Q5_0, 0.07},
        {GGML_TYPE_Q5_1, 0.06},  {GGML_TYPE_Q8_0, 0.01},   {GGML_TYPE_Q2_K, 0.45},
        {GGML_TYPE_Q3_K, 0.25},  {GGML_TYPE_Q4_K, 0.13},   {GGML_TYPE_Q5_K, 0.07},
        {GGML_TYPE_Q6_K, 0.035}, {GGML_TYPE_IQ4_NL, 0.15}, {GGML_TYPE_IQ4_XS, 0.15},
    };
    enum { N = 4 * QK };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    uint8_t *q = malloc(N * 4);
    for (int i = 0; i < N; i++) { /* sums of uniforms, some rows scaled up */
        float v = 0;
        for (int k = 0; k < 4; k++)
            v += (float)rnd() / 2147483648.0f - 1.0f;
        x[i] = v * (i < QK ? 1.0f : i < 2 * QK ? 1000.0f : 0.01f);
    }
    for (size_t t = 0; t < sizeof lim / sizeof lim[0]; t++) {
        uint32_t ty = lim[t].type;
        ck_assert_int_eq(ggml_quantize_row(ty, x, N, q), 0);
        ck_assert_int_eq(ggml_dequant_row(ty, q, N, y), 0);
        for (int r = 0; r < 4; r++) {
            double e = 0, s = 0;
            for (int i = r * QK; i < (r + 1) * QK; i++) {
                e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
                s += (double)x[i] * x[i];
            }
            ck_assert_msg(sqrt(e / s) <= lim[t].max_rel, "%s row %d: relative error %g > %g",
                          ggml_type_name(ty), r, sqrt(e / s), lim[t].max_rel);
        }
        /* zeros */
        float z[QK] = {0};
        ck_assert_int_eq(ggml_quantize_row(ty, z, QK, q), 0);
        ck_assert_int_eq(ggml_dequant_row(ty, q, QK, y), 0);
        for (int i = 0; i < QK; i++)
            ck_assert_msg(y[i] == 0.0f, "%s: zero came back as %g", ggml_type_name(ty),
                          (double)y[i]);
        /* the quantized tensor repacks exactly into its nibble format */
        struct nib_qspec sp;
        if (nib_repack_spec(ty, &sp) == 0) {
            struct gguf_tensor gt = {.name = {1, "q"},
                                     .n_dims = 2,
                                     .ne = {QK, 4, 1, 1},
                                     .type = ty,
                                     .n_elems = N,
                                     .nbytes = ggml_type_nbytes(ty, N),
                                     .data = q};
            ck_assert_int_eq(ggml_quantize_row(ty, x, N, q), 0);
            struct llama_weight w = {.t = &gt, .rows = 4, .cols = QK};
            check_repack(&w, sp, ty == GGML_TYPE_Q3_K, "quantized");
        }
        /* refusals: partial block, non-finite input */
        if (ggml_type_info(ty)->blck > 1)
            ck_assert_int_eq(ggml_quantize_row(ty, x, ggml_type_info(ty)->blck + 1, q), -1);
        x[5] = NAN;
        ck_assert_int_eq(ggml_quantize_row(ty, x, QK, q), -1);
        x[5] = INFINITY;
        ck_assert_int_eq(ggml_quantize_row(ty, x, QK, q), -1);
        x[5] = 0.5f;
    }
    /* a scale beyond the largest half */
    float big[32];
    for (int i = 0; i < 32; i++)
        big[i] = 1e9f;
    ck_assert_int_eq(ggml_quantize_row(GGML_TYPE_Q8_0, big, 32, q), -1);
    ck_assert_int_eq(ggml_quantize_row(16, x, QK, q), -1);
    free(x), free(y), free(q);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("ggml_dequant");
    TU_CASE(s, "table", NULL, NULL, 60, test_type_table, test_plain_types, test_dequant_refuses,
            test_repack_specs, test_repack_refuses, test_vector_views, test_q3k_bit_exact_in_q8f,
            test_quantize_roundtrip);
    TCase *t = tcase_create("types");
    tcase_set_timeout(t, 300);
    tcase_add_loop_test(t, test_extremes, 0, (int)N_TYPES);
    tcase_add_loop_test(t, test_random_tensors, 0, (int)N_TYPES);
    tcase_add_loop_test(t, test_repack_native, 0, (int)N_TYPES);
    tcase_add_loop_test(t, test_repack_cross, 0, (int)N_TYPES);
    tcase_add_loop_test(t, test_views, 0, (int)N_TYPES);
    suite_add_tcase(s, t);
    TU_CASE(s, "compile", NULL, NULL, 300, test_compile_source_kquant, test_compile_source_legacy);
    return s;
}
