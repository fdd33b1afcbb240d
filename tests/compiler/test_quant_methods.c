/* Rounding methods (tools/compiler/quant.h, docs/accuracy.md).
 *
 *  - rtn is llama.cpp's reference rounding: nibble's rtn of every tensor of
 *    ../shared/models/stories260K.gguf (f32) gives, group for group, the
 *    f16 scale bits and the codes stored in stories260K-q4_0.gguf, which
 *    llama.cpp's quantizer wrote from that file (the suite quant_methods_real;
 *    it skips, saying so, when the files are absent). Q8_0 and Q4_1 are
 *    checked against their formulas written out here.
 *  - search is never worse than rtn under the importance it is given, and
 *    the importance changes what it chooses.
 *  - every method writes the same bytes twice, and for any thread count. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/f16.h"
#include "kernels/qformat.h"
#include "tests/common/test_util.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/quant.h"
#include "tools/util/tool_util.h"

static char err[512];

/* Codes of row r, group j of a packed tensor. */
static int code_at(const struct nib_qlayout *l, const uint8_t *p, uint32_t r, uint32_t k)
{
    unsigned shift;
    uint64_t off = nib_ql_code_off(l, r, k, &shift);
    return l->code_bits == 8 ? (int8_t)p[off] : (p[off] >> shift) & 15;
}

static uint16_t scale_bits_at(const struct nib_qlayout *l, const uint8_t *p, uint32_t r, uint32_t j)
{
    uint16_t h;
    memcpy(&h, p + nib_ql_scale_off(l, r, j), 2);
    return h;
}

#ifndef QM_REAL

static void random_rows(float *w, uint32_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (uint32_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        /* mostly small, a few outliers, as trained weights are */
        float u = (float)((s >> 11) & 0xffffff) / 16777216.0f - 0.5f;
        w[i] = (s >> 60) == 0 ? u * 8.0f : u;
    }
}

static uint8_t *quantize(struct nib_qspec spec, enum nib_qmethod m, const float *imp,
                         const float *w, uint32_t rows, uint32_t cols, struct nib_qlayout *l)
{
    ck_assert_int_eq(nib_qlayout_get(l, spec.dtype, spec.group, rows, cols), 0);
    uint8_t *out = malloc(l->size);
    ck_assert_msg(nib_quantize_m_f32(spec, m, imp, rows, cols, w, out, err, sizeof err) == 0, "%s",
                  err);
    return out;
}

/* Q8_0 (d = absmax / 127, code = roundf(x * (1 / d))) and Q4_1 (min,
 * (max - min) / 15, trunc((x - min) * (1 / d) + 0.5)), written out. */
START_TEST(test_rtn_formulas)
{
    enum { R = 11, C = 160 };
    float w[R * C], row[C];
    random_rows(w, R * C, 11);
    struct nib_qlayout l;
    /* Q8_0 (q8c/32) */
    uint8_t *p = quantize((struct nib_qspec){NIB_DT_Q8C, 32}, NIB_QM_RTN, NULL, w, R, C, &l);
    for (uint32_t r = 0; r < R; r++)
        for (uint32_t j = 0; j < C / 32; j++) {
            float amax = 0;
            for (int i = 0; i < 32; i++)
                amax = fmaxf(amax, fabsf(w[r * C + j * 32 + i]));
            const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
            ck_assert_uint_eq(scale_bits_at(&l, p, r, j), nib_f32_to_f16(d));
            for (int i = 0; i < 32; i++)
                ck_assert_int_eq(code_at(&l, p, r, j * 32 + i),
                                 (int)roundf(w[r * C + j * 32 + i] * id));
        }
    free(p);
    /* Q4_1's rule in q4f/32 (f32 scale and minimum) */
    p = quantize((struct nib_qspec){NIB_DT_Q4F, 32}, NIB_QM_RTN, NULL, w, R, C, &l);
    for (uint32_t r = 0; r < R; r++) {
        nib_dequantize_row(&l, p, r, row);
        for (uint32_t j = 0; j < C / 32; j++) {
            float mn = INFINITY, mx = -INFINITY;
            for (int i = 0; i < 32; i++)
                mn = fminf(mn, w[r * C + j * 32 + i]), mx = fmaxf(mx, w[r * C + j * 32 + i]);
            const float d = (mx - mn) / 15.0f, id = d ? 1.0f / d : 0.0f;
            for (int i = 0; i < 32; i++) {
                float t = (w[r * C + j * 32 + i] - mn) * id;
                int q = (int)(t + 0.5f);
                q = q > 15 ? 15 : q;
                ck_assert_int_eq(code_at(&l, p, r, j * 32 + i), q);
                ck_assert_float_eq(row[j * 32 + i], fmaf(d, (float)q, mn));
            }
        }
    }
    free(p);
}
END_TEST

static double wsse(const struct nib_qlayout *l, const uint8_t *p, const float *w, const float *imp,
                   uint32_t rows, uint32_t cols)
{
    float *row = malloc(cols * sizeof *row);
    double s = 0;
    for (uint32_t r = 0; r < rows; r++) {
        nib_dequantize_row(l, p, r, row);
        for (uint32_t c = 0; c < cols; c++) {
            double e = (double)w[r * cols + c] - row[c];
            s += e * e * (imp ? imp[c] : 1.0);
        }
    }
    free(row);
    return s;
}

/* search is never worse than rtn (in its own weighted error) for every
 * format, with and without importance, and importance moves it. */
START_TEST(test_search_beats_rtn)
{
    enum { R = 24, C = 192 };
    float *w = malloc(R * C * sizeof *w), imp[C];
    random_rows(w, R * C, 3);
    for (int c = 0; c < C; c++) /* a few channels matter far more */
        imp[c] = c % 17 == 0 ? 50.0f : 0.2f + (float)(c % 5);
    static const struct nib_qspec specs[] = {{NIB_DT_Q4, 32},   {NIB_DT_Q4, 64},  {NIB_DT_Q4A, 32},
                                             {NIB_DT_Q4C, 0},   {NIB_DT_Q8C, 0},  {NIB_DT_Q8C, 32},
                                             {NIB_DT_Q4F, 32},  {NIB_DT_Q4F, 16}, {NIB_DT_Q8F, 16},
                                             {NIB_DT_Q4H, 128}, {NIB_DT_Q4H, 32}};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        struct nib_qlayout l;
        uint8_t *a = quantize(specs[i], NIB_QM_RTN, NULL, w, R, C, &l);
        uint8_t *b = quantize(specs[i], NIB_QM_SEARCH, NULL, w, R, C, &l);
        uint8_t *c = quantize(specs[i], NIB_QM_SEARCH, imp, w, R, C, &l);
        uint8_t *c2 = quantize(specs[i], NIB_QM_SEARCH, imp, w, R, C, &l);
        double ra = wsse(&l, a, w, NULL, R, C), rb = wsse(&l, b, w, NULL, R, C);
        double ia = wsse(&l, a, w, imp, R, C), ic = wsse(&l, c, w, imp, R, C);
        ck_assert_msg(rb <= ra * (1 + 1e-9), "format %zu: search %g > rtn %g", i, rb, ra);
        ck_assert_msg(ic <= ia * (1 + 1e-9), "format %zu: weighted search %g > rtn %g", i, ic, ia);
        if (specs[i].dtype != NIB_DT_Q8C && specs[i].dtype != NIB_DT_Q8F) /* 4-bit: clearly */
            ck_assert_msg(rb < 0.99 * ra && ic < 0.99 * ia, "format %zu: %g %g %g %g", i, rb, ra,
                          ic, ia);
        ck_assert_msg(memcmp(b, c, l.size) != 0, "format %zu: importance changed nothing", i);
        ck_assert_msg(memcmp(c, c2, l.size) == 0, "format %zu: not deterministic", i);
        free(a), free(b), free(c), free(c2);
    }
    free(w);
}
END_TEST

/* Rows split among threads: the same bytes for any count (rows not a
 * multiple of the chunk, so a worker gets a short last chunk), and a bad
 * row is reported as the first one whichever worker meets it. */
static int dense_row_of(void *ctx, uint32_t r, float *out)
{
    memcpy(out, (const float *)ctx + (size_t)r * 96, 96 * sizeof *out);
    return 0;
}

START_TEST(test_threads_same_bytes)
{
    enum { R = 203, C = 96 };
    float *w = malloc(R * C * sizeof *w), imp[C];
    random_rows(w, R * C, 7);
    for (int c = 0; c < C; c++)
        imp[c] = 0.5f + (float)(c % 7);
    static const struct nib_qspec specs[] = {{NIB_DT_Q4, 32}, {NIB_DT_Q4A, 32}, {NIB_DT_Q4C, 0},
                                             {NIB_DT_Q8C, 0}, {NIB_DT_Q4F, 16}, {NIB_DT_Q4H, 64}};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        for (int m = 0; m < 2; m++) {
            const enum nib_qmethod meth = m ? NIB_QM_SEARCH : NIB_QM_RTN;
            struct nib_qlayout l;
            ck_assert_int_eq(nib_qlayout_get(&l, specs[i].dtype, specs[i].group, R, C), 0);
            uint8_t *one = malloc(l.size), *many = malloc(l.size);
            ck_assert_int_eq(nib_quantize_mt(specs[i], meth, imp, R, C, dense_row_of, w, one, 1,
                                             err, sizeof err),
                             0);
            for (uint32_t t = 2; t <= 7; t += 5) {
                memset(many, 0xa5, l.size);
                ck_assert_int_eq(nib_quantize_mt(specs[i], meth, imp, R, C, dense_row_of, w, many,
                                                 t, err, sizeof err),
                                 0);
                ck_assert_msg(memcmp(one, many, l.size) == 0, "format %zu, %s: %u threads differ",
                              i, nib_qmethod_name(meth), t);
            }
            free(one), free(many);
        }
    w[150 * C + 5] = NAN; /* rows 150 and 190: the error names 150 */
    w[190 * C + 9] = INFINITY;
    struct nib_qlayout l;
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q4, 32, R, C), 0);
    uint8_t *out = malloc(l.size);
    for (uint32_t t = 1; t <= 7; t += 3) {
        err[0] = 0;
        ck_assert_int_eq(nib_quantize_mt((struct nib_qspec){NIB_DT_Q4, 32}, NIB_QM_SEARCH, imp, R,
                                         C, dense_row_of, w, out, t, err, sizeof err),
                         -1);
        ck_assert_msg(strstr(err, "row 150, column 5") != NULL, "%u threads: %s", t, err);
    }
    free(out), free(w);
}
END_TEST

START_TEST(test_method_names)
{
    enum nib_qmethod m;
    ck_assert_int_eq(nib_qmethod_parse("rtn", &m, err, sizeof err), 0);
    ck_assert_int_eq(m, NIB_QM_RTN);
    ck_assert_int_eq(nib_qmethod_parse("gptq", &m, err, sizeof err), 0);
    ck_assert_str_eq(nib_qmethod_name(m), "gptq");
    ck_assert_int_eq(nib_qmethod_parse("GPTQ", &m, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "'GPTQ'"));
    /* gptq needs a Hessian: not a row-by-row method */
    float w[32] = {1};
    uint8_t out[64];
    ck_assert_int_eq(nib_quantize_m_f32((struct nib_qspec){NIB_DT_Q4, 32}, NIB_QM_GPTQ, NULL, 1, 32,
                                        w, out, err, sizeof err),
                     -1);
}
END_TEST

TU_SUITE("quant_methods", "methods", NULL, NULL, 120, test_rtn_formulas, test_search_beats_rtn,
         test_threads_same_bytes, test_method_names)

#else /* QM_REAL: stories260K.gguf against stories260K-q4_0.gguf */

struct mapped {
    const uint8_t *data;
    size_t size;
    struct gguf_file g;
};

static int open_model(struct mapped *m, const char *path)
{
    if (nib_map_file(path, &m->data, &m->size, err, sizeof err))
        return -1;
    ck_assert_msg(gguf_open(&m->g, m->data, m->size, err, sizeof err) == 0, "%s", err);
    return 0;
}

static char dir[4096];

static int row_of_f32(void *ctx, uint32_t r, float *out)
{
    const struct gguf_tensor *t = ctx;
    memcpy(out, t->data + (uint64_t)r * t->ne[0] * 4, t->ne[0] * 4);
    return 0;
}

START_TEST(test_rtn_is_q4_0)
{
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/stories260K.gguf", dir);
    snprintf(b, sizeof b, "%s/stories260K-q4_0.gguf", dir);
    struct mapped f, q;
    ck_assert_int_eq(open_model(&f, a), 0);
    ck_assert_int_eq(open_model(&q, b), 0);
    uint32_t tensors = 0;
    uint64_t groups = 0;
    for (uint64_t i = 0; i < q.g.n_tensors; i++) {
        const struct gguf_tensor *tq = &q.g.tensors[i];
        if (tq->type != 2) /* GGML_TYPE_Q4_0 */
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)tq->name.len, tq->name.ptr);
        const struct gguf_tensor *tf = gguf_find_tensor(&f.g, name);
        ck_assert_msg(tf && tf->type == 0, "%s: no f32 tensor of that name", name);
        const uint32_t cols = (uint32_t)tf->ne[0], rows = (uint32_t)(tf->n_elems / cols);
        ck_assert_uint_eq(tq->n_elems, tf->n_elems);
        struct nib_qspec spec = {NIB_DT_Q4, 32};
        struct nib_qlayout l;
        ck_assert_int_eq(nib_qlayout_get(&l, spec.dtype, spec.group, rows, cols), 0);
        uint8_t *p = malloc(l.size);
        ck_assert_msg(nib_quantize_m(spec, NIB_QM_RTN, NULL, rows, cols, row_of_f32, (void *)tf, p,
                                     err, sizeof err) == 0,
                      "%s", err);
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t j = 0; j < cols / 32; j++) {
                const uint8_t *blk = tq->data + ((uint64_t)r * (cols / 32) + j) * 18;
                uint16_t d;
                memcpy(&d, blk, 2);
                ck_assert_msg(scale_bits_at(&l, p, r, j) == d,
                              "%s row %u group %u: scale %04x, "
                              "the file has %04x",
                              name, r, j, scale_bits_at(&l, p, r, j), d);
                for (int e = 0; e < 32; e++) {
                    int want = e < 16 ? blk[2 + e] & 15 : blk[2 + e - 16] >> 4;
                    ck_assert_msg(code_at(&l, p, r, j * 32 + e) == want,
                                  "%s row %u element %u: code %d, the file has %d", name, r,
                                  j * 32 + e, code_at(&l, p, r, j * 32 + e), want);
                }
                groups++;
            }
        free(p);
        tensors++;
    }
    printf("ok: rtn reproduces %u Q4_0 tensors (%llu groups) of stories260K-q4_0.gguf bit for "
           "bit\n",
           tensors, (unsigned long long)groups);
    ck_assert_uint_ge(tensors, 20); /* every layer matrix but ffn_down, and the head */
    gguf_close(&f.g), gguf_close(&q.g);
    nib_unmap_file(f.data, f.size), nib_unmap_file(q.data, q.size);
}
END_TEST

Suite *nib_test_suite(void)
{
    const char *shared = getenv("NIB_SHARED_DIR");
    snprintf(dir, sizeof dir, "%s/models", shared && *shared ? shared : "../shared");
    char probe[4200];
    struct stat st;
    snprintf(probe, sizeof probe, "%s/stories260K-q4_0.gguf", dir);
    if (stat(probe, &st) != 0) {
        printf("SKIP: %s is absent: rtn cannot be compared with llama.cpp's Q4_0 file\n", probe);
        exit(77);
    }
    Suite *s = suite_create("quant_methods_real");
    TU_CASE(s, "real", NULL, NULL, 120, test_rtn_is_q4_0);
    return s;
}

#endif
