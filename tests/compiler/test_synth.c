/* Tests for the GGUF writer and `nib synth`: what synth writes must parse
 * with nibble's own reader, carry the metadata and vocabulary llama.cpp
 * expects, import through llama_import as the architecture it names (every
 * shape), and be a pure function of (shape, dtype, seed). */
#include "tests/common/test_util.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/gguf_write.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/synth.h"
#include "model_blob/blob_format.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SP "\xe2\x96\x81"

/* For hot loops: every ck_assert costs a write to the runner's pipe, so
 * only call into Check when something is wrong. */
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

/* ---- helpers ---- */

struct blob {
    uint8_t *p;
    size_t n;
};

static struct blob slurp(const char *path)
{
    struct blob b = {0};
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    b.n = (size_t)ftell(f);
    rewind(f);
    b.p = malloc(b.n ? b.n : 1);
    ck_assert_ptr_nonnull(b.p);
    ck_assert_uint_eq(fread(b.p, 1, b.n, f), b.n);
    fclose(f);
    return b;
}

/* A fresh temporary file: open for writing, path in path[]. */
static FILE *temp_file(char path[64])
{
    snprintf(path, 64, "/tmp/nib_test_synth_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "wb");
    ck_assert_ptr_nonnull(f);
    return f;
}

static struct blob synth_blob(const char *shape, uint32_t dtype, uint64_t seed)
{
    char path[64], err[256];
    FILE *f = temp_file(path);
    int rc = nib_synth_write(f, nib_synth_find(shape), dtype, seed, 0, err, sizeof err);
    ck_assert_msg(rc == 0, "synth failed: %s", err);
    ck_assert_int_eq(fclose(f), 0);
    struct blob b = slurp(path);
    unlink(path);
    return b;
}

static void open_ok(struct gguf_file *g, struct blob b)
{
    char err[256];
    int rc = gguf_open(g, b.p, b.n, err, sizeof err);
    ck_assert_msg(rc == 0, "gguf_open: %s", err);
}

/* stories260k's f32 synth (seed 0), opened into g: close with close_blob(). */
static struct blob stories260k_open(struct gguf_file *g)
{
    struct blob b = synth_blob("stories260k", GGML_TYPE_F32, 0);
    open_ok(g, b);
    return b;
}

static void close_blob(struct gguf_file *g, struct blob b)
{
    gguf_close(g);
    free(b.p);
}

static uint32_t u32_of(const struct gguf_file *g, const char *key)
{
    uint32_t v = 0;
    ck_assert_msg(gguf_get_u32(g, key, &v) == 0, "missing u32 %s", key);
    return v;
}

static float f32_at(const uint8_t *p, uint64_t i)
{
    float f;
    memcpy(&f, p + 4 * i, 4);
    return f;
}

static uint16_t u16_at(const uint8_t *p, uint64_t i)
{
    return (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
}

static void check_tensor(const struct gguf_file *g, const char *name, uint32_t type,
                         uint32_t n_dims, uint64_t ne0, uint64_t ne1)
{
    const struct gguf_tensor *t = gguf_find_tensor(g, name);
    ck_assert_msg(t != NULL, "tensor %s missing", name);
    ck_assert_msg(t->type == type, "%s: type %u", name, t->type);
    ck_assert_uint_eq(t->n_dims, n_dims);
    ck_assert_uint_eq(t->ne[0], ne0);
    if (n_dims > 1)
        ck_assert_uint_eq(t->ne[1], ne1);
    ck_assert_uint_eq(t->offset % g->alignment, 0);
}

/* Pieces of a parsed tokens array, as NUL-terminated copies. */
static char **read_pieces(const struct gguf_file *g, uint64_t *n)
{
    const struct gguf_kv *kv = gguf_find_kv(g, "tokenizer.ggml.tokens");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->type, GGUF_TYPE_ARRAY);
    ck_assert_uint_eq(kv->arr_type, GGUF_TYPE_STRING);
    *n = kv->arr_n;
    char **v = calloc(kv->arr_n, sizeof *v);
    const uint8_t *p = kv->val;
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        struct gguf_str s = gguf_next_str(&p);
        v[i] = strndup(s.ptr, s.len);
    }
    return v;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns the id of piece s, or -1. Linear: the test vocabularies are small
 * enough, and this stays independent of the code under test. */
static long find_piece(char **v, uint64_t n, const char *s, size_t len)
{
    for (uint64_t i = 0; i < n; i++)
        if (strlen(v[i]) == len && memcmp(v[i], s, len) == 0)
            return (long)i;
    return -1;
}

/* The vocabulary rules every synth model must satisfy. */
static void check_vocab(char **v, const float *scores, const int32_t *types, uint64_t n)
{
    ck_assert_str_eq(v[0], "<unk>");
    ck_assert_str_eq(v[1], "<s>");
    ck_assert_str_eq(v[2], "</s>");
    ck_assert_int_eq(types[0], NIB_TOK_UNKNOWN);
    ck_assert_int_eq(types[1], NIB_TOK_CONTROL);
    ck_assert_int_eq(types[2], NIB_TOK_CONTROL);
    for (int c = 0; c < 256; c++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", c);
        ck_assert_str_eq(v[3 + c], s);
        ck_assert_int_eq(types[3 + c], NIB_TOK_BYTE);
    }
    for (uint64_t i = 259; i < n; i++) {
        EXPECT(types[i] == NIB_TOK_NORMAL, "type of %llu", (unsigned long long)i);
        EXPECT(i == 259 || scores[i] < scores[i - 1], "scores not decreasing at %llu",
               (unsigned long long)i);
    }
    /* Every printable ASCII character and the space marker. */
    for (char c = 0x20; c < 0x7f; c++)
        ck_assert_msg(find_piece(v, n, &c, 1) >= 259, "char '%c' missing", c);
    ck_assert_int_ge(find_piece(v, n, SP, 3), 259);
    ck_assert_int_ge(find_piece(v, n, SP "the", 6), 259);

    /* Unique. */
    char **sorted = malloc(n * sizeof *sorted);
    memcpy(sorted, v, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_strp);
    for (uint64_t i = 1; i < n; i++)
        EXPECT(strcmp(sorted[i - 1], sorted[i]) != 0, "duplicate piece '%s'", sorted[i]);
    free(sorted);
}

/* Every character prefix of a normal piece is a piece with a lower id, so
 * merges can build it. Uses a sorted copy for the look-ups (n may be 32000). */
static void check_prefix_closure(char **v, uint64_t n)
{
    struct ent {
        const char *s;
        uint64_t id;
    } *e = malloc(n * sizeof *e);
    for (uint64_t i = 0; i < n; i++)
        e[i] = (struct ent){v[i], i};
    qsort(e, n, sizeof *e, cmp_strp); /* s is the first member */
    char buf[64];
    for (uint64_t i = 259; i < n; i++) {
        size_t len = strlen(v[i]);
        EXPECT(len < sizeof buf, "piece %llu too long", (unsigned long long)i);
        for (size_t k = 1; k < len; k++) {
            if (((uint8_t)v[i][k] & 0xc0) == 0x80)
                continue; /* inside a UTF-8 character */
            memcpy(buf, v[i], k);
            buf[k] = 0;
            const char *key = buf;
            struct ent *hit = bsearch(&key, e, n, sizeof *e, cmp_strp);
            EXPECT(hit != NULL && hit->id < i, "prefix '%s' of '%s' missing or later", buf, v[i]);
        }
    }
    free(e);
}

static void free_pieces(char **v, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* ---- synth output ---- */

START_TEST(test_stories260k_metadata)
{
    struct gguf_file g;
    struct blob b = stories260k_open(&g);
    ck_assert_uint_eq(g.version, 3);
    ck_assert_uint_eq(g.n_tensors, 3 + 5 * 9);
    ck_assert_uint_eq(g.n_kv, 22);
    ck_assert_uint_eq(g.alignment, 32);
    ck_assert_ptr_null(gguf_find_kv(&g, "general.alignment"));

    struct gguf_str s;
    ck_assert_int_eq(gguf_get_str(&g, "general.architecture", &s), 0);
    ck_assert(gguf_str_eq(s, "llama"));
    ck_assert_int_eq(gguf_get_str(&g, "general.name", &s), 0);
    ck_assert(gguf_str_eq(s, "stories260k"));
    ck_assert_int_eq(gguf_get_str(&g, "tokenizer.ggml.model", &s), 0);
    ck_assert(gguf_str_eq(s, "llama"));

    ck_assert_uint_eq(u32_of(&g, "general.file_type"), 0);
    ck_assert_uint_eq(u32_of(&g, "llama.context_length"), 512);
    ck_assert_uint_eq(u32_of(&g, "llama.embedding_length"), 64);
    ck_assert_uint_eq(u32_of(&g, "llama.block_count"), 5);
    ck_assert_uint_eq(u32_of(&g, "llama.feed_forward_length"), 172);
    ck_assert_uint_eq(u32_of(&g, "llama.rope.dimension_count"), 8);
    ck_assert_uint_eq(u32_of(&g, "llama.attention.head_count"), 8);
    ck_assert_uint_eq(u32_of(&g, "llama.attention.head_count_kv"), 4);
    ck_assert_uint_eq(u32_of(&g, "llama.vocab_size"), 512);
    ck_assert_uint_eq(u32_of(&g, "tokenizer.ggml.bos_token_id"), 1);
    ck_assert_uint_eq(u32_of(&g, "tokenizer.ggml.eos_token_id"), 2);
    ck_assert_uint_eq(u32_of(&g, "tokenizer.ggml.unknown_token_id"), 0);
    float f;
    ck_assert_int_eq(gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &f), 0);
    ck_assert_float_eq(f, 1e-5f);
    ck_assert_int_eq(gguf_get_f32(&g, "llama.rope.freq_base", &f), 0);
    ck_assert_float_eq(f, 10000.0f);

    const struct gguf_kv *kv = gguf_find_kv(&g, "tokenizer.ggml.add_bos_token");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->type, GGUF_TYPE_BOOL);
    ck_assert_uint_eq(kv->val[0], 1);
    kv = gguf_find_kv(&g, "tokenizer.ggml.add_eos_token");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->type, GGUF_TYPE_BOOL);
    ck_assert_uint_eq(kv->val[0], 0);

    close_blob(&g, b);
}
END_TEST

START_TEST(test_stories260k_tensors)
{
    struct gguf_file g;
    struct blob b = stories260k_open(&g);
    const uint32_t F32 = GGML_TYPE_F32;
    check_tensor(&g, "token_embd.weight", F32, 2, 64, 512);
    check_tensor(&g, "output_norm.weight", F32, 1, 64, 1);
    check_tensor(&g, "output.weight", F32, 2, 64, 512);
    for (int l = 0; l < 5; l++) {
        char n[64];
#define T(suffix, nd, a, c)                                                                        \
    snprintf(n, sizeof n, "blk.%d." suffix ".weight", l);                                          \
    check_tensor(&g, n, F32, nd, a, c)
        T("attn_norm", 1, 64, 1);
        T("attn_q", 2, 64, 64);
        T("attn_k", 2, 64, 32);
        T("attn_v", 2, 64, 32);
        T("attn_output", 2, 64, 64);
        T("ffn_norm", 1, 64, 1);
        T("ffn_gate", 2, 64, 172);
        T("ffn_up", 2, 64, 172);
        T("ffn_down", 2, 172, 64);
#undef T
    }
    ck_assert_ptr_null(gguf_find_tensor(&g, "blk.5.attn_q.weight"));

    /* Norms are ones; matrices uniform within ±1/sqrt(ne0), not degenerate.
     * (Per-element checks count first and assert once: each Check assertion
     * costs a write to the runner's pipe.) */
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const struct gguf_tensor *t = &g.tensors[i];
        float bound = 1.0f / sqrtf((float)t->ne[0]);
        double sum = 0, sq = 0;
        uint64_t bad = 0;
        for (uint64_t k = 0; k < t->n_elems; k++) {
            float x = f32_at(t->data, k);
            if (t->n_dims == 1) {
                bad += x != 1.0f;
                continue;
            }
            bad += !(fabsf(x) <= bound);
            sum += x;
            sq += (double)x * x;
        }
        ck_assert_msg(bad == 0, "%.*s: %llu values out of range", (int)t->name.len, t->name.ptr,
                      (unsigned long long)bad);
        if (t->n_dims == 2) { /* mean ~0, variance ~bound^2/3 */
            double mean = sum / t->n_elems, var = sq / t->n_elems - mean * mean;
            ck_assert_double_lt(fabs(mean), 0.05 * bound);
            ck_assert_double_gt(var, 0.8 * bound * bound / 3);
            ck_assert_double_lt(var, 1.2 * bound * bound / 3);
        }
    }
    /* Tensors are independent streams, not copies of one another. */
    const struct gguf_tensor *e = gguf_find_tensor(&g, "token_embd.weight");
    const struct gguf_tensor *o = gguf_find_tensor(&g, "output.weight");
    ck_assert(memcmp(e->data, o->data, e->nbytes) != 0);
    close_blob(&g, b);
}
END_TEST

START_TEST(test_stories260k_vocab)
{
    struct gguf_file g;
    struct blob b = stories260k_open(&g);
    uint64_t n;
    char **v = read_pieces(&g, &n);
    ck_assert_uint_eq(n, 512);

    const struct gguf_kv *ks = gguf_find_kv(&g, "tokenizer.ggml.scores");
    const struct gguf_kv *kt = gguf_find_kv(&g, "tokenizer.ggml.token_type");
    ck_assert_ptr_nonnull(ks);
    ck_assert_ptr_nonnull(kt);
    ck_assert_uint_eq(ks->arr_type, GGUF_TYPE_FLOAT32);
    ck_assert_uint_eq(kt->arr_type, GGUF_TYPE_INT32);
    ck_assert_uint_eq(ks->arr_n, n);
    ck_assert_uint_eq(kt->arr_n, n);
    float *scores = malloc(n * sizeof *scores);
    int32_t *types = malloc(n * sizeof *types);
    memcpy(scores, ks->val, n * 4);
    memcpy(types, kt->val, n * 4);

    check_vocab(v, scores, types, n);
    check_prefix_closure(v, n);
    ck_assert_float_eq(scores[0], 0.0f);
    ck_assert_float_eq(scores[259], 0.0f);
    ck_assert_float_eq(scores[260], -1.0f);

    free(scores);
    free(types);
    free_pieces(v, n);
    close_blob(&g, b);
}
END_TEST

START_TEST(test_deterministic)
{
    struct blob a = synth_blob("stories260k", GGML_TYPE_F32, 7);
    struct blob b = synth_blob("stories260k", GGML_TYPE_F32, 7);
    struct blob c = synth_blob("stories260k", GGML_TYPE_F32, 8);
    ck_assert_uint_eq(a.n, b.n);
    ck_assert(memcmp(a.p, b.p, a.n) == 0);
    ck_assert_uint_eq(a.n, c.n);
    ck_assert(memcmp(a.p, c.p, a.n) != 0);

    /* Only the weights differ between seeds: same header, same vocab. */
    struct gguf_file ga, gc;
    open_ok(&ga, a);
    open_ok(&gc, c);
    size_t header = (size_t)(ga.data - a.p);
    ck_assert(memcmp(a.p, c.p, header) == 0);
    const struct gguf_tensor *ta = gguf_find_tensor(&ga, "blk.0.attn_q.weight");
    const struct gguf_tensor *tc = gguf_find_tensor(&gc, "blk.0.attn_q.weight");
    ck_assert(memcmp(ta->data, tc->data, ta->nbytes) != 0);
    gguf_close(&ga);
    gguf_close(&gc);
    free(a.p);
    free(b.p);
    free(c.p);
}
END_TEST

/* f16 output is the f32 output rounded: the generator does not depend on
 * the dtype, and norms stay F32. */
START_TEST(test_f16_matches_f32)
{
    struct blob a = synth_blob("stories260k", GGML_TYPE_F32, 3);
    struct blob h = synth_blob("stories260k", GGML_TYPE_F16, 3);
    struct gguf_file ga, gh;
    open_ok(&ga, a);
    open_ok(&gh, h);
    ck_assert_uint_eq(u32_of(&gh, "general.file_type"), 1);
    ck_assert_uint_eq(ga.n_tensors, gh.n_tensors);
    for (uint64_t i = 0; i < ga.n_tensors; i++) {
        const struct gguf_tensor *ta = &ga.tensors[i], *th = &gh.tensors[i];
        if (ta->n_dims == 1) {
            ck_assert_uint_eq(th->type, GGML_TYPE_F32);
            ck_assert(memcmp(ta->data, th->data, ta->nbytes) == 0);
            continue;
        }
        ck_assert_uint_eq(th->type, GGML_TYPE_F16);
        ck_assert_uint_eq(th->nbytes, ta->nbytes / 2);
        uint64_t bad = 0;
        for (uint64_t k = 0; k < ta->n_elems; k++)
            bad += u16_at(th->data, k) != nib_f32_to_f16(f32_at(ta->data, k));
        ck_assert_uint_eq(bad, 0);
    }
    gguf_close(&ga);
    gguf_close(&gh);
    free(a.p);
    free(h.p);
}
END_TEST

/* ---- shapes and vocabulary ---- */

START_TEST(test_shape_table)
{
    size_t n;
    const struct nib_synth_shape *s = nib_synth_shapes(&n);
    ck_assert_uint_eq(n, 16);
    /* The published configs (Hugging Face config.json) of each real shape;
     * hd 0: dim / heads. */
    const struct {
        const char *name;
        uint32_t dim, layers, ffn, heads, kv, vocab, ctx, dtype, arch, hd;
        int tied;
        float theta, eps;
        uint64_t params; /* the models' published parameter counts */
    } want[] = {
        {"stories260k", 64, 5, 172, 8, 4, 512, 512, GGML_TYPE_F32, LLAMA_ARCH_LLAMA, 0, 0, 10000,
         1e-5f, 260032 + 64 * 512},
        {"stories15m", 288, 6, 768, 6, 6, 32000, 256, GGML_TYPE_F32, LLAMA_ARCH_LLAMA, 0, 0, 10000,
         1e-5f, 0},
        {"tinyllama-1.1b", 2048, 22, 5632, 32, 4, 32000, 2048, GGML_TYPE_F16, LLAMA_ARCH_LLAMA, 0,
         0, 10000, 1e-5f, 1100048384ull},
        {"llama-3b", 3200, 26, 8640, 32, 32, 32000, 2048, GGML_TYPE_F16, LLAMA_ARCH_LLAMA, 0, 0,
         10000, 1e-5f, 0},
        {"test-hd64", 128, 2, 344, 2, 1, 512, 256, GGML_TYPE_F32, LLAMA_ARCH_LLAMA, 0, 0, 10000,
         1e-5f, 0},
        {"smollm2-135m", 576, 30, 1536, 9, 3, 49152, 8192, GGML_TYPE_F16, LLAMA_ARCH_LLAMA, 0, 1,
         100000, 1e-5f, 134515008ull},
        {"qwen2.5-0.5b", 896, 24, 4864, 14, 2, 151936, 32768, GGML_TYPE_F16, LLAMA_ARCH_QWEN2, 0, 1,
         1e6f, 1e-6f, 494032768ull},
        {"qwen3-0.6b", 1024, 28, 3072, 16, 8, 151936, 40960, GGML_TYPE_F16, LLAMA_ARCH_QWEN3, 128,
         1, 1e6f, 1e-6f, 596049920ull},
        /* + the 32 rope_freqs factors Hugging Face keeps as a buffer */
        {"llama3.2-1b", 2048, 16, 8192, 32, 8, 128256, 131072, GGML_TYPE_F16, LLAMA_ARCH_LLAMA, 0,
         1, 500000, 1e-5f, 1235814400ull + 32},
        {"phi3-mini", 3072, 32, 8192, 32, 32, 32064, 4096, GGML_TYPE_F16, LLAMA_ARCH_PHI3, 0, 0,
         10000, 1e-5f, 3821079552ull},
        {"gemma2-2b", 2304, 26, 9216, 8, 4, 256000, 8192, GGML_TYPE_F16, LLAMA_ARCH_GEMMA2, 256, 1,
         10000, 1e-6f, 2614341888ull},
        {"test-llama3", 128, 2, 256, 2, 1, 512, 256, GGML_TYPE_F32, LLAMA_ARCH_LLAMA, 0, 1, 500000,
         1e-5f, 0},
        {"test-qwen2", 128, 2, 256, 2, 1, 512, 256, GGML_TYPE_F32, LLAMA_ARCH_QWEN2, 0, 1, 1e6f,
         1e-6f, 0},
        {"test-qwen3", 128, 2, 256, 4, 2, 512, 256, GGML_TYPE_F32, LLAMA_ARCH_QWEN3, 64, 1, 1e6f,
         1e-6f, 0},
        {"test-phi3", 128, 2, 256, 2, 2, 512, 256, GGML_TYPE_F32, LLAMA_ARCH_PHI3, 0, 0, 10000,
         1e-5f, 0},
        {"test-gemma2", 128, 4, 256, 4, 2, 512, 256, GGML_TYPE_F32, LLAMA_ARCH_GEMMA2, 64, 1, 10000,
         1e-6f, 0},
    };
    ck_assert_uint_eq(n, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(s[i].name, want[i].name);
        ck_assert_ptr_eq(nib_synth_find(want[i].name), &s[i]);
        ck_assert_uint_eq(s[i].dim, want[i].dim);
        ck_assert_uint_eq(s[i].n_layers, want[i].layers);
        ck_assert_uint_eq(s[i].ffn, want[i].ffn);
        ck_assert_uint_eq(s[i].n_heads, want[i].heads);
        ck_assert_uint_eq(s[i].n_kv_heads, want[i].kv);
        ck_assert_uint_eq(s[i].vocab, want[i].vocab);
        ck_assert_uint_eq(s[i].ctx, want[i].ctx);
        ck_assert_uint_eq(s[i].dtype, want[i].dtype);
        ck_assert_uint_eq(nib_synth_arch(&s[i]), want[i].arch);
        ck_assert_uint_eq(s[i].head_dim, want[i].hd);
        ck_assert_int_eq(s[i].tied, want[i].tied);
        ck_assert(s[i].rope_theta == (i < 5 ? 0 : want[i].theta));
        ck_assert(s[i].norm_eps == (i < 5 ? 0 : want[i].eps));
        if (want[i].hd == 0)
            ck_assert_uint_eq(s[i].dim % s[i].n_heads, 0);
        ck_assert_uint_eq(s[i].n_heads % s[i].n_kv_heads, 0);
        if (want[i].params)
            ck_assert_uint_eq(nib_synth_params(&s[i]), want[i].params);
    }
    ck_assert_ptr_null(nib_synth_find("stories260K-nope"));
    ck_assert_ptr_null(nib_synth_find(""));

    /* the architecture-specific fields */
    const struct nib_synth_shape *g = nib_synth_find("gemma2-2b");
    ck_assert(g->attn_softcap == 50.0f && g->final_softcap == 30.0f);
    ck_assert_uint_eq(g->window, 4096);
    g = nib_synth_find("test-gemma2");
    ck_assert_uint_eq(g->window, 16);
    const struct nib_synth_shape *l3 = nib_synth_find("llama3.2-1b");
    ck_assert(l3->llama3_factor == 32.0f);
    ck_assert_uint_eq(l3->llama3_ctx, 8192);

    /* stories260K: llama2.c counts 260032 with a shared classifier; synth
     * writes a separate output.weight (64 x 512). */
    ck_assert_uint_eq(nib_synth_bytes(&s[0], GGML_TYPE_F32), 4 * (260032 + 64 * 512));
    /* f16: matrices halve, the 45 norm vectors stay f32. */
    ck_assert_uint_eq(nib_synth_bytes(&s[2], GGML_TYPE_F16),
                      2 * 1100048384ull + 2 * 2048 * (22 * 2 + 1));
}
END_TEST

START_TEST(test_vocab_32000)
{
    struct nib_synth_vocab a, b;
    char err[128];
    ck_assert_int_eq(nib_synth_vocab_build(&a, 32000, err, sizeof err), 0);
    ck_assert_int_eq(nib_synth_vocab_build(&b, 32000, err, sizeof err), 0);
    ck_assert_uint_eq(a.n, 32000);
    char **v = malloc(a.n * sizeof *v);
    for (uint32_t i = 0; i < a.n; i++) {
        v[i] = (char *)a.pieces[i];
        EXPECT(strlen(v[i]) == a.lens[i], "length of %u", i);
        EXPECT(strcmp(a.pieces[i], b.pieces[i]) == 0, "piece %u differs between builds", i);
    }
    check_vocab(v, a.scores, a.types, a.n);
    check_prefix_closure(v, a.n);
    free(v);
    nib_synth_vocab_free(&a);
    nib_synth_vocab_free(&b);
    ck_assert_int_eq(nib_synth_vocab_build(&b, NIB_SYNTH_MIN_VOCAB - 1, err, sizeof err), -1);
    ck_assert_int_eq(nib_synth_vocab_build(&b, NIB_SYNTH_MIN_VOCAB, err, sizeof err), 0);
    ck_assert_uint_eq(b.n, NIB_SYNTH_MIN_VOCAB);
    nib_synth_vocab_free(&b);
}
END_TEST

/* stories15m: the 32000-token path end to end. Written as f16 into memory
 * (49 MB, ~0.1 s optimised, under a second with sanitizers); the two big
 * shapes are covered by the shape table only. */
START_TEST(test_stories15m_header)
{
    const struct nib_synth_shape *s = nib_synth_find("stories15m");
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(s->dim / s->n_heads, 48); /* rope.dimension_count */
    ck_assert_uint_eq(nib_synth_params(s),
                      2ull * 288 * 32000 + 288 + 6ull * (2 * 288 + 4 * 288 * 288 + 3 * 288 * 768));

    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    char err[256];
    ck_assert_int_eq(nib_synth_write(f, s, GGML_TYPE_F16, 1, 0, err, sizeof err), 0);
    fclose(f);
    struct gguf_file g;
    open_ok(&g, (struct blob){(uint8_t *)mem, len});
    ck_assert_uint_eq(u32_of(&g, "llama.embedding_length"), 288);
    ck_assert_uint_eq(u32_of(&g, "llama.rope.dimension_count"), 48);
    ck_assert_uint_eq(u32_of(&g, "llama.attention.head_count_kv"), 6);
    ck_assert_uint_eq(u32_of(&g, "llama.vocab_size"), 32000);
    ck_assert_uint_eq(u32_of(&g, "general.file_type"), 1);
    check_tensor(&g, "token_embd.weight", GGML_TYPE_F16, 2, 288, 32000);
    check_tensor(&g, "blk.5.ffn_down.weight", GGML_TYPE_F16, 2, 768, 288);
    check_tensor(&g, "blk.5.ffn_norm.weight", GGML_TYPE_F32, 1, 288, 1);
    uint64_t n;
    char **v = read_pieces(&g, &n);
    ck_assert_uint_eq(n, 32000);
    free_pieces(v, n);
    gguf_close(&g);
    free(mem);
}
END_TEST

/* ---- f16 ---- */

START_TEST(test_f16_conversion)
{
    const struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {65504.0f, 0x7bff},
        {65519.0f, 0x7bff},
        {65520.0f, 0x7c00},
        {1e9f, 0x7c00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0x1p-14f, 0x0400},
        {0x1p-24f, 0x0001},
        {0x1p-25f, 0x0000},
        {0x1.8p-25f, 0x0001},
        {0x1.8p-24f, 0x0002} /* tie -> even */,
        {0x1.002p0f, 0x3c00} /* tie, even stays */,
        {0x1.006p0f, 0x3c02} /* tie, odd rounds up */,
        {0x1.ffcp-15f, 0x0400} /* subnormal rounds up into the smallest normal */,
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(nib_f32_to_f16(cases[i].f) == cases[i].h, "%a -> %04x, want %04x", cases[i].f,
                      nib_f32_to_f16(cases[i].f), cases[i].h);
    uint16_t nan = nib_f32_to_f16(NAN);
    ck_assert((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);

    /* Every half value converts back to itself, and both neighbours'
     * midpoints round to the even one. */
    uint32_t bad = 0, first = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float x = gguf_f16_to_f32((uint16_t)h);
        float mid = (x + gguf_f16_to_f32((uint16_t)(h + 1))) / 2; /* exact in f32 */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        int ok = nib_f32_to_f16(x) == h && nib_f32_to_f16(-x) == (h | 0x8000) &&
                 nib_f32_to_f16(mid) == even;
        if (!ok && bad++ == 0)
            first = h;
    }
    ck_assert_msg(bad == 0, "%u half values wrong, first %04x", bad, first);
#ifdef __FLT16_MAX__
    /* And it agrees with the compiler's own conversion on random floats. */
    uint64_t z = 1;
    for (int i = 0; i < 1000000; i++) {
        float f = tu_random_f32_bits(&z);
        if (isnan(f))
            continue;
        _Float16 r = (_Float16)f;
        uint16_t want;
        memcpy(&want, &r, 2);
        if (nib_f32_to_f16(f) != want && bad++ == 0)
            memcpy(&first, &f, sizeof first); /* its bits */
    }
    ck_assert_msg(bad == 0, "%u floats differ from _Float16, first %08x", bad, first);
#endif
}
END_TEST

/* ---- writer ---- */

static int fill_pattern(void *ctx, uint64_t at, void *buf, uint64_t nbytes)
{
    uint8_t salt = *(uint8_t *)ctx;
    uint8_t *p = buf;
    for (uint64_t i = 0; i < nbytes; i++)
        p[i] = (uint8_t)((at + i) * 131 + salt);
    return 0;
}

static struct blob write_to_blob(struct gguf_writer *w)
{
    char *mem = NULL;
    size_t len = 0;
    char err[256];
    FILE *f = open_memstream(&mem, &len);
    int rc = gguf_writer_write(w, f, err, sizeof err);
    ck_assert_msg(rc == 0, "write: %s", err);
    fclose(f);
    return (struct blob){(uint8_t *)mem, len};
}

static const struct gguf_kv *kv_of(const struct gguf_file *g, const char *key, uint32_t type)
{
    const struct gguf_kv *kv = gguf_find_kv(g, key);
    ck_assert_msg(kv != NULL, "%s missing", key);
    ck_assert_msg(kv->type == type, "%s: type %u, want %u", key, kv->type, type);
    return kv;
}

START_TEST(test_writer_roundtrip)
{
    uint32_t align = _i ? 64 : 32; /* looped: default and custom alignment */
    struct gguf_writer *w = gguf_writer_new(3, align);
    gguf_w_u8(w, "t.u8", 200);
    gguf_w_i8(w, "t.i8", -100);
    gguf_w_u16(w, "t.u16", 60000);
    gguf_w_i16(w, "t.i16", -30000);
    gguf_w_u32(w, "t.u32", 4000000000u);
    gguf_w_i32(w, "t.i32", -2000000000);
    gguf_w_u64(w, "t.u64", 0x0123456789abcdefull);
    gguf_w_i64(w, "t.i64", -5);
    gguf_w_f32(w, "t.f32", 0.25f);
    gguf_w_f64(w, "t.f64", -1.5e300);
    gguf_w_bool(w, "t.bool", 7); /* any non-zero is true, stored as 1 */
    gguf_w_str(w, "t.str", "héllo");
    gguf_w_str(w, "t.empty", "");
    const char *strs[] = {"a", "", "x\0y", SP "z"};
    const uint32_t lens[] = {1, 0, 3, 4};
    gguf_w_arr_str(w, "t.astr", strs, lens, 4);
    gguf_w_arr_str(w, "t.astr0", strs, NULL, 2);
    const float af[] = {1.5f, -2.0f, 1e-30f};
    gguf_w_arr_f32(w, "t.af32", af, 3);
    const int32_t ai[] = {-1, 0, 2147483647};
    gguf_w_arr_i32(w, "t.ai32", ai, 3);
    const uint8_t au8[] = {1, 2, 255};
    gguf_w_arr(w, "t.au8", GGUF_TYPE_UINT8, au8, 3);
    const int16_t ai16[] = {-7, 7};
    gguf_w_arr(w, "t.ai16", GGUF_TYPE_INT16, ai16, 2);
    const uint64_t au64[] = {1ull << 63, 9};
    gguf_w_arr(w, "t.au64", GGUF_TYPE_UINT64, au64, 2);
    const double af64[] = {3.25};
    gguf_w_arr(w, "t.af64", GGUF_TYPE_FLOAT64, af64, 1);
    const uint8_t ab[] = {0, 5, 1};
    gguf_w_arr(w, "t.abool", GGUF_TYPE_BOOL, ab, 3);
    gguf_w_arr(w, "t.aempty", GGUF_TYPE_INT32, NULL, 0);

    /* One tensor of every type; sizes that are not multiples of the alignment. */
    static uint8_t q8[3 * 34], q4[2 * 18], f16[5 * 2];
    for (size_t i = 0; i < sizeof q8; i++)
        q8[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof q4; i++)
        q4[i] = (uint8_t)(i * 3 + 2);
    for (size_t i = 0; i < sizeof f16; i++)
        f16[i] = (uint8_t)(i + 9);
    uint8_t salt_a = 11, salt_b = 22;
    gguf_w_tensor(w, "a.f32", GGML_TYPE_F32, 2, (uint64_t[]){3, 7}, fill_pattern, &salt_a);
    gguf_w_tensor_data(w, "b.q8", GGML_TYPE_Q8_0, 2, (uint64_t[]){32, 3}, q8);
    gguf_w_tensor_data(w, "c.q4", GGML_TYPE_Q4_0, 1, (uint64_t[]){64}, q4);
    gguf_w_tensor_data(w, "d.f16", GGML_TYPE_F16, 1, (uint64_t[]){5}, f16);
    gguf_w_tensor(w, "e.bf16", GGML_TYPE_BF16, 4, (uint64_t[]){1, 2, 3, 1}, fill_pattern, &salt_b);
    struct blob b = write_to_blob(w);
    gguf_writer_free(w);

    struct gguf_file g;
    open_ok(&g, b);
    ck_assert_uint_eq(g.version, 3);
    ck_assert_uint_eq(g.alignment, align);
    ck_assert_uint_eq(g.n_tensors, 5);
    ck_assert_uint_eq(g.n_kv, 23 + (align != 32));
    if (align != 32)
        ck_assert_uint_eq(u32_of(&g, "general.alignment"), align);
    else
        ck_assert_ptr_null(gguf_find_kv(&g, "general.alignment"));
    ck_assert_uint_eq(b.n % align, 0); /* padded to the end */
    ck_assert_uint_eq((size_t)(g.data - b.p) % align, 0);

    uint8_t u8 = kv_of(&g, "t.u8", GGUF_TYPE_UINT8)->val[0];
    ck_assert_uint_eq(u8, 200);
    ck_assert_int_eq((int8_t)kv_of(&g, "t.i8", GGUF_TYPE_INT8)->val[0], -100);
    uint16_t u16;
    memcpy(&u16, kv_of(&g, "t.u16", GGUF_TYPE_UINT16)->val, 2);
    ck_assert_uint_eq(u16, 60000);
    int16_t i16;
    memcpy(&i16, kv_of(&g, "t.i16", GGUF_TYPE_INT16)->val, 2);
    ck_assert_int_eq(i16, -30000);
    kv_of(&g, "t.u32", GGUF_TYPE_UINT32);
    ck_assert_uint_eq(u32_of(&g, "t.u32"), 4000000000u);
    int32_t i32;
    memcpy(&i32, kv_of(&g, "t.i32", GGUF_TYPE_INT32)->val, 4);
    ck_assert_int_eq(i32, -2000000000);
    uint64_t u64;
    memcpy(&u64, kv_of(&g, "t.u64", GGUF_TYPE_UINT64)->val, 8);
    ck_assert_uint_eq(u64, 0x0123456789abcdefull);
    int64_t i64;
    memcpy(&i64, kv_of(&g, "t.i64", GGUF_TYPE_INT64)->val, 8);
    ck_assert_int_eq(i64, -5);
    float f;
    kv_of(&g, "t.f32", GGUF_TYPE_FLOAT32);
    ck_assert_int_eq(gguf_get_f32(&g, "t.f32", &f), 0);
    ck_assert_float_eq(f, 0.25f);
    double d;
    memcpy(&d, kv_of(&g, "t.f64", GGUF_TYPE_FLOAT64)->val, 8);
    ck_assert_double_eq(d, -1.5e300);
    ck_assert_uint_eq(kv_of(&g, "t.bool", GGUF_TYPE_BOOL)->val[0], 1);
    struct gguf_str s;
    ck_assert_int_eq(gguf_get_str(&g, "t.str", &s), 0);
    ck_assert(gguf_str_eq(s, "héllo"));
    ck_assert_int_eq(gguf_get_str(&g, "t.empty", &s), 0);
    ck_assert_uint_eq(s.len, 0);

    const struct gguf_kv *kv = kv_of(&g, "t.astr", GGUF_TYPE_ARRAY);
    ck_assert_uint_eq(kv->arr_type, GGUF_TYPE_STRING);
    ck_assert_uint_eq(kv->arr_n, 4);
    const uint8_t *p = kv->val;
    for (int i = 0; i < 4; i++) {
        s = gguf_next_str(&p);
        ck_assert_uint_eq(s.len, lens[i]);
        ck_assert(memcmp(s.ptr, strs[i], lens[i]) == 0);
    }
    kv = kv_of(&g, "t.astr0", GGUF_TYPE_ARRAY);
    ck_assert_uint_eq(kv->arr_n, 2);
    p = kv->val;
    ck_assert(gguf_str_eq(gguf_next_str(&p), "a"));
    ck_assert(gguf_str_eq(gguf_next_str(&p), ""));

    const struct {
        const char *key;
        uint32_t type;
        const void *v;
        uint64_t n, size;
    } arrs[] = {
        {"t.af32", GGUF_TYPE_FLOAT32, af, 3, 4},   {"t.ai32", GGUF_TYPE_INT32, ai, 3, 4},
        {"t.au8", GGUF_TYPE_UINT8, au8, 3, 1},     {"t.ai16", GGUF_TYPE_INT16, ai16, 2, 2},
        {"t.au64", GGUF_TYPE_UINT64, au64, 2, 8},  {"t.af64", GGUF_TYPE_FLOAT64, af64, 1, 8},
        {"t.aempty", GGUF_TYPE_INT32, NULL, 0, 4},
    };
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        kv = kv_of(&g, arrs[i].key, GGUF_TYPE_ARRAY);
        ck_assert_uint_eq(kv->arr_type, arrs[i].type);
        ck_assert_uint_eq(kv->arr_n, arrs[i].n);
        if (arrs[i].n)
            ck_assert(memcmp(kv->val, arrs[i].v, arrs[i].n * arrs[i].size) == 0);
    }
    kv = kv_of(&g, "t.abool", GGUF_TYPE_ARRAY);
    ck_assert_uint_eq(kv->arr_type, GGUF_TYPE_BOOL);
    ck_assert(memcmp(kv->val, (uint8_t[]){0, 1, 1}, 3) == 0);

    /* Tensors: order, shapes, payloads. */
    const char *names[] = {"a.f32", "b.q8", "c.q4", "d.f16", "e.bf16"};
    const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_F16,
                              GGML_TYPE_BF16};
    const uint64_t sizes[] = {84, sizeof q8, sizeof q4, sizeof f16, 12};
    for (int i = 0; i < 5; i++) {
        const struct gguf_tensor *t = &g.tensors[i];
        ck_assert(gguf_str_eq(t->name, names[i]));
        ck_assert_uint_eq(t->type, types[i]);
        ck_assert_uint_eq(t->nbytes, sizes[i]);
        ck_assert_uint_eq(t->offset % align, 0);
    }
    ck_assert_uint_eq(g.tensors[4].n_dims, 4);
    ck_assert_uint_eq(g.tensors[4].ne[2], 3);
    uint8_t want[84];
    fill_pattern(&salt_a, 0, want, 84);
    ck_assert(memcmp(g.tensors[0].data, want, 84) == 0);
    fill_pattern(&salt_b, 0, want, 12);
    ck_assert(memcmp(g.tensors[4].data, want, 12) == 0);
    ck_assert(memcmp(g.tensors[1].data, q8, sizeof q8) == 0);
    ck_assert(memcmp(g.tensors[2].data, q4, sizeof q4) == 0);
    ck_assert(memcmp(g.tensors[3].data, f16, sizeof f16) == 0);
    close_blob(&g, b);
}
END_TEST

struct chunk_log {
    uint64_t next_at; /* fills must come in order, without gaps */
    uint64_t calls, max;
    uint32_t block;
};

static int fill_logged(void *ctx, uint64_t at, void *buf, uint64_t nbytes)
{
    struct chunk_log *c = ctx;
    ck_assert_uint_eq(at, c->next_at);
    ck_assert_uint_eq(nbytes % c->block, 0);
    ck_assert_uint_gt(nbytes, 0);
    c->next_at += nbytes;
    c->calls++;
    if (nbytes > c->max)
        c->max = nbytes;
    memset(buf, 0x5a, nbytes);
    return 0;
}

/* Big tensors stream in bounded chunks of whole blocks. */
START_TEST(test_writer_chunks)
{
    struct gguf_writer *w = gguf_writer_new(3, 32);
    struct chunk_log q = {0, 0, 0, 34}, f = {0, 0, 0, 4};
    uint64_t ne_q[2] = {4096, 1000}; /* 128000 blocks, 4352000 B */
    uint64_t ne_f[2] = {1000, 5000}; /* 20 MB */
    gguf_w_tensor(w, "q", GGML_TYPE_Q8_0, 2, ne_q, fill_logged, &q);
    gguf_w_tensor(w, "f", GGML_TYPE_F32, 2, ne_f, fill_logged, &f);
    FILE *out = fopen("/dev/null", "wb");
    ck_assert_ptr_nonnull(out);
    char err[256];
    ck_assert_int_eq(gguf_writer_write(w, out, err, sizeof err), 0);
    fclose(out);
    gguf_writer_free(w);
    ck_assert_uint_eq(q.next_at, 128000ull * 34);
    ck_assert_uint_eq(f.next_at, 20000000ull);
    ck_assert_uint_le(f.max, 8u << 20);
    ck_assert_uint_ge(f.calls, 3);
}
END_TEST

static int fill_fail(void *ctx, uint64_t at, void *buf, uint64_t nbytes)
{
    (void)ctx, (void)at, (void)buf, (void)nbytes;
    return -1;
}

/* Each mistake is reported by gguf_writer_write, with a message. */
START_TEST(test_writer_errors)
{
    char err[256];
    uint64_t ne[2] = {32, 2};
    static const uint8_t data[256];
    FILE *out = fopen("/dev/null", "wb");
    for (int c = 0; c < 10; c++) {
        struct gguf_writer *w = gguf_writer_new(c == 9 ? 1 : 3, c == 0 ? 48 : 32);
        const char *want = NULL;
        switch (c) {
        case 0: want = "power of two"; break;
        case 1:
            gguf_w_u32(w, "k", 1);
            gguf_w_str(w, "k", "x");
            want = "twice";
            break;
        case 2:
            gguf_w_tensor_data(w, "t", 0, 2, ne, data);
            gguf_w_tensor_data(w, "t", 0, 2, ne, data);
            want = "twice";
            break;
        case 3:
            gguf_w_tensor_data(w, "t", 99, 2, ne, data);
            want = "type";
            break;
        case 4:
            gguf_w_tensor_data(w, "t", GGML_TYPE_Q4_0, 2, (uint64_t[]){31, 2}, data);
            want = "multiple";
            break;
        case 5:
            gguf_w_tensor_data(w,
                               "a_name_that_is_far_too_long_for_ggml_to_accept_"
                               "as_a_tensor_name_xx",
                               0, 2, ne, data);
            want = "name";
            break;
        case 6:
            gguf_w_tensor_data(w, "t", 0, 5, ne, data);
            want = "dimensions";
            break;
        case 7:
            gguf_w_tensor(w, "t", 0, 2, ne, fill_fail, NULL);
            want = "'t'";
            break;
        case 8:
            gguf_w_arr(w, "k", GGUF_TYPE_STRING, data, 1);
            want = "gguf_w_arr";
            break;
        case 9: want = "version"; break; /* v1's 32-bit layout is not written */
        }
        err[0] = 0;
        ck_assert_int_eq(gguf_writer_write(w, out, err, sizeof err), -1);
        ck_assert_msg(strstr(err, want) != NULL, "case %d: '%s' lacks '%s'", c, err, want);
        gguf_writer_free(w);
    }
    fclose(out);
}
END_TEST

/* A full disk is reported, with the system's reason. */
START_TEST(test_writer_disk_full)
{
    FILE *out = fopen("/dev/full", "wb");
    if (!out) {
        fprintf(stderr, "test_writer_disk_full: skipped, no /dev/full\n");
        return;
    }
    struct gguf_writer *w = gguf_writer_new(3, 32);
    uint8_t salt = 1;
    gguf_w_tensor(w, "t", GGML_TYPE_F32, 1, (uint64_t[]){1 << 20}, fill_pattern, &salt);
    char err[256];
    ck_assert_int_eq(gguf_writer_write(w, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "No space left") != NULL, "%s", err);
    gguf_writer_free(w);
    fclose(out);
}
END_TEST

/* ---- architectures ---- */

/* A shape written into memory and imported. */
struct imported {
    char *mem;
    size_t len;
    struct gguf_file g;
    struct llama_model m;
};

static void import_shape(struct imported *I, const struct nib_synth_shape *s, uint32_t dtype,
                         uint64_t seed)
{
    char err[512];
    memset(I, 0, sizeof *I);
    FILE *f = open_memstream(&I->mem, &I->len);
    ck_assert_int_eq(nib_synth_write(f, s, dtype, seed, 0, err, sizeof err), 0);
    fclose(f);
    open_ok(&I->g, (struct blob){(uint8_t *)I->mem, I->len});
    ck_assert_msg(llama_import(&I->m, &I->g, err, sizeof err) == 0, "%s: %s", s->name, err);
}

static void import_free(struct imported *I)
{
    llama_model_free(&I->m);
    gguf_close(&I->g);
    free(I->mem);
}

/* What llama_import read equals what the shape says. */
static void check_imported(const struct nib_synth_shape *s, const struct llama_model *m)
{
    const struct nib_hparams *hp = &m->hp;
    uint32_t arch = nib_synth_arch(s), hd = s->head_dim ? s->head_dim : s->dim / s->n_heads;
    ck_assert_uint_eq(m->arch, arch);
    ck_assert_uint_eq(hp->dim, s->dim);
    ck_assert_uint_eq(hp->n_layers, s->n_layers);
    ck_assert_uint_eq(hp->ffn_dim, s->ffn);
    ck_assert_uint_eq(hp->n_heads, s->n_heads);
    ck_assert_uint_eq(hp->n_kv_heads, s->n_kv_heads);
    ck_assert_uint_eq(hp->head_dim, hd);
    ck_assert_uint_eq(hp->rope_dim, hd);
    ck_assert_uint_eq(hp->vocab_size, s->vocab);
    ck_assert_uint_eq(hp->ctx_len, s->ctx);
    ck_assert(hp->rope_theta == (s->rope_theta > 0 ? s->rope_theta : 10000.0f));
    ck_assert(hp->norm_eps == (s->norm_eps > 0 ? s->norm_eps : 1e-5f));
    ck_assert_int_eq(m->output_tied, s->tied);
    ck_assert_uint_eq(m->ffn_act, arch == LLAMA_ARCH_GEMMA2 ? LLAMA_ACT_GELU_TANH : LLAMA_ACT_SILU);
    ck_assert(m->attn_softcap == s->attn_softcap);
    ck_assert(m->final_softcap == s->final_softcap);
    ck_assert(m->embed_scale == (arch == LLAMA_ARCH_GEMMA2 ? sqrtf((float)s->dim) : 1.0f));
    ck_assert(m->attn_scale == 1.0f / sqrtf((float)hd));
    ck_assert_int_eq(m->rope_freq_factors != NULL, s->llama3_factor > 0);
    int neox = arch != LLAMA_ARCH_LLAMA;
    for (uint32_t l = 0; l < hp->n_layers; l++) {
        const struct llama_layer *L = &m->layers[l];
        ck_assert_uint_eq(L->window, arch == LLAMA_ARCH_GEMMA2 && l % 2 == 0 ? s->window : 0);
        ck_assert_uint_eq(L->wq.neox_head, neox ? hd : 0);
        ck_assert_uint_eq(L->wk.neox_head, neox ? hd : 0);
        ck_assert_int_eq(L->bq.t != NULL, arch == LLAMA_ARCH_QWEN2);
        ck_assert_int_eq(L->bv.t != NULL, arch == LLAMA_ARCH_QWEN2);
        ck_assert_int_eq(L->q_norm.t != NULL, arch == LLAMA_ARCH_QWEN3);
        ck_assert_int_eq(L->post_ffn_norm.t != NULL, arch == LLAMA_ARCH_GEMMA2);
        /* phi3: Q, K and V are views of one attn_qkv; gate and up of ffn_up */
        ck_assert_int_eq(L->wq.t == L->wv.t, arch == LLAMA_ARCH_PHI3);
        ck_assert_int_eq(L->w_gate.t == L->w_up.t, arch == LLAMA_ARCH_PHI3);
        if (arch == LLAMA_ARCH_PHI3) {
            ck_assert_uint_eq(L->wk.row0, s->n_heads * hd);
            ck_assert_uint_eq(L->wv.row0, (s->n_heads + s->n_kv_heads) * hd);
            ck_assert_uint_eq(L->w_up.row0, s->ffn);
        }
    }
}

/* Every small shape of each architecture imports with every field right,
 * at every depth --layers gives. */
START_TEST(test_arch_shapes_import)
{
    static const char *const names[] = {"test-hd64",  "test-llama3", "test-qwen2",
                                        "test-qwen3", "test-phi3",   "test-gemma2"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const struct nib_synth_shape *s = nib_synth_find(names[i]);
        ck_assert_ptr_nonnull(s);
        struct imported I;
        import_shape(&I, s, GGML_TYPE_F32, 1);
        check_imported(s, &I.m);
        import_free(&I);
        struct nib_synth_shape one = *s;
        one.n_layers = 1;
        import_shape(&I, &one, GGML_TYPE_F16, 1);
        check_imported(&one, &I.m);
        ck_assert_ptr_null(gguf_find_tensor(&I.g, "blk.1.attn_norm.weight"));
        import_free(&I);
    }
}
END_TEST

/* The real shapes at their real widths: one layer and a small vocabulary
 * (the vocabulary only sizes the embedding rows), f16. */
START_TEST(test_real_shapes_import)
{
    static const char *const names[] = {"smollm2-135m", "qwen2.5-0.5b", "qwen3-0.6b",
                                        "llama3.2-1b",  "phi3-mini",    "gemma2-2b"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct nib_synth_shape s = *nib_synth_find(names[i]);
        s.n_layers = 1;
        s.vocab = NIB_SYNTH_MIN_VOCAB;
        struct imported I;
        import_shape(&I, &s, GGML_TYPE_F16, 0);
        check_imported(&s, &I.m);
        import_free(&I);
    }
}
END_TEST

/* The tensors and keys of each architecture, by the names llama.cpp
 * loads; norms not all ones; Llama 3 factors as the converter computes. */
START_TEST(test_arch_tensors)
{
    struct gguf_file g;
    struct blob b = synth_blob("test-qwen2", GGML_TYPE_F32, 0);
    open_ok(&g, b);
    check_tensor(&g, "blk.1.attn_q.bias", GGML_TYPE_F32, 1, 128, 1);
    check_tensor(&g, "blk.1.attn_k.bias", GGML_TYPE_F32, 1, 64, 1);
    check_tensor(&g, "blk.1.attn_v.bias", GGML_TYPE_F32, 1, 64, 1);
    ck_assert_ptr_null(gguf_find_tensor(&g, "output.weight")); /* tied */
    ck_assert_uint_eq(g.n_tensors, 2 + 2 * 12);
    const struct gguf_tensor *t = gguf_find_tensor(&g, "blk.0.attn_norm.weight");
    uint64_t ones = 0;
    for (uint64_t k = 0; k < t->n_elems; k++) {
        float x = f32_at(t->data, k);
        ck_assert(x >= 0.5f && x < 1.5f);
        ones += x == 1.0f;
    }
    ck_assert_uint_lt(ones, 4);
    t = gguf_find_tensor(&g, "blk.0.attn_k.bias");
    for (uint64_t k = 0; k < t->n_elems; k++)
        ck_assert(fabsf(f32_at(t->data, k)) <= 0.5f);
    close_blob(&g, b);

    b = synth_blob("test-qwen3", GGML_TYPE_F32, 0);
    open_ok(&g, b);
    check_tensor(&g, "blk.0.attn_q.weight", GGML_TYPE_F32, 2, 128, 256);
    check_tensor(&g, "blk.0.attn_output.weight", GGML_TYPE_F32, 2, 256, 128);
    check_tensor(&g, "blk.0.attn_q_norm.weight", GGML_TYPE_F32, 1, 64, 1);
    check_tensor(&g, "blk.0.attn_k_norm.weight", GGML_TYPE_F32, 1, 64, 1);
    ck_assert_uint_eq(u32_of(&g, "qwen3.attention.key_length"), 64);
    ck_assert_uint_eq(u32_of(&g, "qwen3.attention.value_length"), 64);
    close_blob(&g, b);

    b = synth_blob("test-phi3", GGML_TYPE_F32, 0);
    open_ok(&g, b);
    check_tensor(&g, "blk.0.attn_qkv.weight", GGML_TYPE_F32, 2, 128, 128 + 2 * 128);
    check_tensor(&g, "blk.0.ffn_up.weight", GGML_TYPE_F32, 2, 128, 512);
    check_tensor(&g, "output.weight", GGML_TYPE_F32, 2, 128, 512);
    ck_assert_ptr_null(gguf_find_tensor(&g, "blk.0.ffn_gate.weight"));
    ck_assert_ptr_null(gguf_find_tensor(&g, "blk.0.attn_q.weight"));
    struct gguf_str str;
    ck_assert_int_eq(gguf_get_str(&g, "general.architecture", &str), 0);
    ck_assert(gguf_str_eq(str, "phi3"));
    /* llama.cpp looks "<|endoftext|>" up in any model named phi3 */
    uint64_t n;
    char **v = read_pieces(&g, &n);
    ck_assert_str_eq(v[n - 1], "<|endoftext|>");
    const struct gguf_kv *kt = gguf_find_kv(&g, "tokenizer.ggml.token_type");
    int32_t type;
    memcpy(&type, kt->val + 4 * (n - 1), 4);
    ck_assert_int_eq(type, NIB_TOK_CONTROL);
    free_pieces(v, n);
    close_blob(&g, b);

    b = synth_blob("test-gemma2", GGML_TYPE_F32, 0);
    open_ok(&g, b);
    check_tensor(&g, "blk.3.post_attention_norm.weight", GGML_TYPE_F32, 1, 128, 1);
    check_tensor(&g, "blk.3.post_ffw_norm.weight", GGML_TYPE_F32, 1, 128, 1);
    ck_assert_uint_eq(u32_of(&g, "gemma2.attention.sliding_window"), 16);
    float f;
    ck_assert_int_eq(gguf_get_f32(&g, "gemma2.attn_logit_softcapping", &f), 0);
    ck_assert(f == 10.0f);
    ck_assert_int_eq(gguf_get_f32(&g, "gemma2.final_logit_softcapping", &f), 0);
    ck_assert(f == 5.0f);
    close_blob(&g, b);

    /* Llama 3 scaling: factor 8 from 64 positions, heads of 64, base 5e5:
     * divisor 1 where the wavelength is under 64 / 4, 8 over 64, between
     * them 1 / ((1 - s) / 8 + s) with s = (64 / wavelength - 1) / 3. */
    b = synth_blob("test-llama3", GGML_TYPE_F32, 0);
    open_ok(&g, b);
    check_tensor(&g, "rope_freqs.weight", GGML_TYPE_F32, 1, 32, 1);
    t = gguf_find_tensor(&g, "rope_freqs.weight");
    int n1 = 0, n8 = 0, mid = 0;
    for (int i = 0; i < 32; i++) {
        double freq = pow(500000.0, -2.0 * i / 64), wl = 2 * M_PI / freq;
        double want = wl < 16   ? 1
                      : wl > 64 ? 8
                                : 1 / ((1 - (64 / wl - 1) / 3) / 8 + (64 / wl - 1) / 3);
        float x = f32_at(t->data, (uint64_t)i);
        ck_assert_msg(fabs(x - want) <= 1e-5 * want, "factor %d: %g, expected %g", i, x, want);
        n1 += x == 1.0f, n8 += x == 8.0f, mid += x > 1.0f && x < 8.0f;
        if (i > 0)
            ck_assert(x >= f32_at(t->data, (uint64_t)i - 1));
    }
    ck_assert(n1 > 0 && n8 > 0 && mid > 0); /* all three regimes occur */
    struct llama_model m;
    char err[256];
    ck_assert_int_eq(llama_import(&m, &g, err, sizeof err), 0);
    ck_assert(!memcmp(m.rope_freq_factors, t->data, 32 * sizeof(float)));
    llama_model_free(&m);
    close_blob(&g, b);

    /* deterministic, seeded */
    struct blob x = synth_blob("test-gemma2", GGML_TYPE_F32, 4);
    struct blob y = synth_blob("test-gemma2", GGML_TYPE_F32, 4);
    struct blob z = synth_blob("test-gemma2", GGML_TYPE_F32, 5);
    ck_assert_uint_eq(x.n, y.n);
    ck_assert(memcmp(x.p, y.p, x.n) == 0);
    ck_assert_uint_eq(x.n, z.n);
    ck_assert(memcmp(x.p, z.p, x.n) != 0);
    free(x.p);
    free(y.p);
    free(z.p);
}
END_TEST

/* ---- CLI ---- */

static int run_cli(int argc, const char **argv)
{
    return nib_synth_main(argc, (char **)argv);
}

START_TEST(test_cli)
{
    char path[64];
    fclose(temp_file(path));
    ck_assert_int_eq(run_cli(2, (const char *[]){"synth", "--list"}), 0);
    ck_assert_int_eq(run_cli(4, (const char *[]){"synth", "nope", "-o", path}), 2);
    ck_assert_int_eq(run_cli(1, (const char *[]){"synth"}), 2);
    ck_assert_int_eq(run_cli(2, (const char *[]){"synth", "stories260k"}), 2);
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "stories260k", "-o", path, "--seed", "-1"}), 2);
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "stories260k", "-o", path, "--seed", "1x"}), 2);
    ck_assert_int_eq(run_cli(6, (const char *[]){"synth", "stories260k", "-o", path, "--seed",
                                                 "99999999999999999999999"}),
                     2);
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "stories260k", "-o", path, "--dtype", "q4"}), 2);
    ck_assert_int_eq(run_cli(5, (const char *[]){"synth", "stories260k", "-o", path, "--bogus"}),
                     2);
    ck_assert_int_eq(
        run_cli(4, (const char *[]){"synth", "stories260k", "-o", "/nonexistent-dir/x.gguf"}), 1);

    /* The CLI writes exactly what the library does for the same arguments. */
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "stories260k", "-o", path, "--seed=5", "--dtype=f16"}),
        0);
    struct blob cli = slurp(path), lib = synth_blob("stories260k", GGML_TYPE_F16, 5);
    ck_assert_uint_eq(cli.n, lib.n);
    ck_assert(memcmp(cli.p, lib.p, cli.n) == 0);
    free(cli.p);
    free(lib.p);

    /* --layers cuts the depth: the same as the library with fewer layers */
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "test-gemma2", "-o", path, "--layers", "2"}), 0);
    cli = slurp(path);
    struct nib_synth_shape two = *nib_synth_find("test-gemma2");
    two.n_layers = 2;
    char *mem = NULL, err[256];
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    ck_assert_int_eq(nib_synth_write(f, &two, GGML_TYPE_F32, 0, 0, err, sizeof err), 0);
    fclose(f);
    ck_assert_uint_eq(cli.n, len);
    ck_assert(memcmp(cli.p, mem, len) == 0);
    struct gguf_file g;
    open_ok(&g, cli);
    ck_assert_uint_eq(u32_of(&g, "gemma2.block_count"), 2);
    ck_assert_ptr_nonnull(gguf_find_tensor(&g, "blk.1.post_ffw_norm.weight"));
    ck_assert_ptr_null(gguf_find_tensor(&g, "blk.2.attn_norm.weight"));
    gguf_close(&g);
    free(cli.p);
    free(mem);
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "test-gemma2", "-o", path, "--layers", "0"}), 2);
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "test-gemma2", "-o", path, "--layers", "513"}), 2);
    ck_assert_int_eq(
        run_cli(6, (const char *[]){"synth", "test-gemma2", "-o", path, "--layers", "x"}), 2);

    /* Default: f32 for stories260k, seed 0. */
    ck_assert_int_eq(run_cli(4, (const char *[]){"synth", "stories260k", "-o", path}), 0);
    cli = slurp(path);
    lib = synth_blob("stories260k", GGML_TYPE_F32, 0);
    ck_assert_uint_eq(cli.n, lib.n);
    ck_assert(memcmp(cli.p, lib.p, cli.n) == 0);
    free(cli.p);
    free(lib.p);
    unlink(path);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("synth");
    TCase *tc = TU_CASE(s, "writer", NULL, NULL, 60, test_writer_chunks, test_writer_errors,
                        test_writer_disk_full);
    tcase_add_loop_test(tc, test_writer_roundtrip, 0, 2);
    TU_CASE(s, "synth", NULL, NULL, 120, test_f16_conversion, test_shape_table, test_vocab_32000,
            test_stories260k_metadata, test_stories260k_tensors, test_stories260k_vocab,
            test_deterministic, test_f16_matches_f32, test_stories15m_header, test_cli,
            test_arch_shapes_import, test_real_shapes_import, test_arch_tensors);
    return s;
}
