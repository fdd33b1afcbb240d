/* LLaMA importer tests: the fixture imports with the right hyper-parameters,
 * vocabulary and exact weight values for every dtype; each missing or wrong
 * piece of metadata or tensor fails with a message naming it; and the real
 * models in ../shared/models import with their published shapes. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/gguf_fixture.h"
#include "tests/common/test_util.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"

#ifndef NIB_SOURCE_ROOT
#define NIB_SOURCE_ROOT "."
#endif

/* Token i of a SentencePiece spec is the GGUF piece text (U+2581 as ' '). */
static int piece_is(const struct tok_spec *s, uint32_t i, const char *text)
{
    char buf[1024];
    size_t n = 0;
    for (const char *p = text; *p && n < sizeof buf; p++) {
        if (!strncmp(p, "\xe2\x96\x81", 3)) {
            buf[n++] = ' ';
            p += 2;
        } else {
            buf[n++] = *p;
        }
    }
    return i < s->n_vocab && s->tokens[i].len == n && !memcmp(s->tokens[i].bytes, buf, n);
}

/* A fixture file, parsed and imported. */
struct loaded {
    struct fx_file f;
    struct gguf_file g;
    struct llama_model m;
    char err[512];
    int rc; /* 0 imported; -1 gguf_open failed; -2 llama_import failed */
};

static void load(struct loaded *L, const struct fx_model *fm)
{
    memset(L, 0, sizeof *L);
    fx_build(fm, &L->f);
    L->rc = -1;
    if (gguf_open(&L->g, L->f.buf, L->f.size, L->err, sizeof L->err))
        return;
    L->rc = -2;
    if (llama_import(&L->m, &L->g, L->err, sizeof L->err)) {
        ck_assert_ptr_null(L->m.layers); /* nothing left allocated */
        ck_assert_ptr_null(L->m.tok.tokens);
        return;
    }
    L->rc = 0;
}

static void unload(struct loaded *L)
{
    if (L->rc == 0)
        llama_model_free(&L->m);
    if (L->rc != -1)
        gguf_close(&L->g);
    fx_file_free(&L->f);
}

/* The edited model must fail to import with `phrase` in the message. */
static void expect_import_fail(const struct fx_model *fm, const char *phrase)
{
    struct loaded L;
    load(&L, fm);
    ck_assert_msg(L.rc == -2,
                  "import of a broken model gave rc %d (%s), expected to fail with '%s'", L.rc,
                  L.err, phrase);
    ck_assert_msg(strstr(L.err, phrase) != NULL, "error '%s' lacks '%s'", L.err, phrase);
    unload(&L);
}

static void expect_import_ok(const struct fx_model *fm, struct loaded *L)
{
    load(L, fm);
    ck_assert_msg(L->rc == 0, "import failed: %s", L->err);
}

/* Every weight of a model with its expected tensor name. */
struct named {
    const struct llama_weight *w;
    char name[64];
};

static size_t model_weights(const struct llama_model *m, struct named *out)
{
    static const char *const parts[] = {"attn_norm", "attn_q",   "attn_k", "attn_v",  "attn_output",
                                        "ffn_norm",  "ffn_gate", "ffn_up", "ffn_down"};
    size_t n = 0;
    out[n].w = &m->tok_embd, strcpy(out[n++].name, "token_embd.weight");
    out[n].w = &m->output_norm, strcpy(out[n++].name, "output_norm.weight");
    out[n].w = &m->output,
    strcpy(out[n++].name, m->output_tied ? "token_embd.weight" : "output.weight");
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        const struct llama_layer *L = &m->layers[l];
        const struct llama_weight *w[9] = {&L->attn_norm, &L->wq,     &L->wk,   &L->wv,    &L->wo,
                                           &L->ffn_norm,  &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < 9; i++) {
            out[n].w = w[i];
            snprintf(out[n++].name, sizeof out[0].name, "blk.%u.%s.weight", l, parts[i]);
        }
    }
    return n;
}

/* Each weight is bound to the right tensor and every element decodes to
 * exactly the value the fixture generated. */
static void check_weights(struct fx_model *fm, const struct llama_model *m)
{
    struct named ws[3 + 9 * 4];
    size_t n = model_weights(m, ws);
    float *row = malloc(4096 * sizeof *row);
    for (size_t i = 0; i < n; i++) {
        const struct llama_weight *w = ws[i].w;
        ck_assert_ptr_nonnull(w->t);
        ck_assert_msg(gguf_str_eq(w->t->name, ws[i].name), "weight %zu bound to the wrong tensor",
                      i);
        const struct fx_tensor *t = fx_tensor(fm, ws[i].name);
        ck_assert_uint_eq(w->cols, t->ne[0]);
        ck_assert_uint_eq(w->rows, t->n_dims == 2 ? t->ne[1] : 1);
        for (uint32_t r = 0; r < w->rows; r++) {
            ck_assert_int_eq(llama_weight_row_f32(w, r, row), 0);
            for (uint32_t c = 0; c < w->cols; c++) {
                float want = fx_value(t->type, t->seed, (uint64_t)r * w->cols + c);
                ck_assert_msg(row[c] == want, "%s[%u][%u] = %g, expected %g", ws[i].name, r, c,
                              row[c], want);
            }
        }
        ck_assert_int_eq(llama_weight_row_f32(w, w->rows, row), -1);
    }
    free(row);
}

START_TEST(test_import_f32)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_default_params(&p);
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    const struct nib_hparams *hp = &L.m.hp;
    ck_assert_uint_eq(hp->dim, 8);
    ck_assert_uint_eq(hp->n_layers, 2);
    ck_assert_uint_eq(hp->n_heads, 2);
    ck_assert_uint_eq(hp->n_kv_heads, 1);
    ck_assert_uint_eq(hp->head_dim, 4);
    ck_assert_uint_eq(hp->ffn_dim, 16);
    ck_assert_uint_eq(hp->vocab_size, 20);
    ck_assert_uint_eq(hp->ctx_len, 64);
    ck_assert_uint_eq(hp->rope_dim, 2);
    ck_assert(hp->rope_theta == 500000.0f);
    ck_assert(hp->norm_eps == 1e-5f);
    ck_assert_uint_eq(hp->bos_id, 1);
    ck_assert_uint_eq(hp->eos_id, 2);
    ck_assert_uint_eq(hp->add_bos, 0);
    ck_assert_int_eq(L.m.output_tied, 0);
    ck_assert_uint_eq(L.m.tok.n_vocab, 20);
    char buf[32];
    for (uint32_t i = 0; i < 20; i++) {
        ck_assert(piece_is(&L.m.tok, i, fx_piece(i, buf)));
        ck_assert(L.m.tok.tokens[i].score == fx_score(i));
        ck_assert_uint_eq(L.m.tok.tokens[i].type, fx_tok_type(i));
    }
    ck_assert_uint_eq(L.m.tok.tokens[0].type, NIB_TOK_UNKNOWN);
    ck_assert_uint_eq(L.m.tok.tokens[1].type, NIB_TOK_CONTROL);
    ck_assert_uint_eq(L.m.tok.tokens[3].type, NIB_TOK_BYTE);
    ck_assert_uint_eq(L.m.tok.tokens[7].type, NIB_TOK_NORMAL);
    check_weights(&fm, &L.m);

    /* a few values by hand: token_embd is seed 0, x = ((7i) % 29 - 14) / 8 */
    float row[8];
    ck_assert_int_eq(llama_weight_row_f32(&L.m.tok_embd, 0, row), 0);
    ck_assert(row[0] == -1.75f && row[1] == -0.875f && row[2] == 0.0f);
    ck_assert_int_eq(llama_weight_row_f32(&L.m.tok_embd, 1, row), 0);
    ck_assert(row[0] == (float)((56 % 29) - 14) / 8);
    unload(&L);

    /* v2 imports the same */
    fm.p.version = 2;
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.g.version, 2);
    ck_assert_uint_eq(L.m.hp.dim, 8);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

/* F16 / BF16 matrices and norms on the small shapes. */
START_TEST(test_import_half)
{
    static const uint32_t types[] = {GGML_TYPE_F16, GGML_TYPE_BF16};
    for (int i = 0; i < 2; i++) {
        struct fx_params p;
        struct fx_model fm;
        struct loaded L;
        fx_default_params(&p);
        p.wtype = p.ntype = types[i];
        fx_model_init(&fm, &p);
        expect_import_ok(&fm, &L);
        ck_assert_uint_eq(L.m.tok_embd.t->type, types[i]);
        ck_assert_uint_eq(L.m.output_norm.t->type, types[i]);
        check_weights(&fm, &L.m);
        float row[8];
        ck_assert_int_eq(llama_weight_row_f32(&L.m.tok_embd, 0, row), 0);
        ck_assert(row[0] == -1.75f && row[1] == -0.875f);
        unload(&L);
        fx_model_free(&fm);
    }
}
END_TEST

START_TEST(test_import_q8_0)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_quant_params(&p, GGML_TYPE_Q8_0);
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.hp.dim, 32);
    ck_assert_uint_eq(L.m.hp.head_dim, 8);
    ck_assert_uint_eq(L.m.hp.n_kv_heads, 2);
    check_weights(&fm, &L.m);
    /* by hand: seed 0, block b: d = (1 + b % 4) / 16, q[j] = (5j + 3b) % 255 - 127 */
    float row[32];
    ck_assert_int_eq(llama_weight_row_f32(&L.m.tok_embd, 0, row), 0);
    ck_assert(row[0] == -127 * 0.0625f && row[1] == -122 * 0.0625f && row[31] == 28 * 0.0625f);
    ck_assert_int_eq(llama_weight_row_f32(&L.m.tok_embd, 1, row), 0);
    ck_assert(row[0] == -124 * 0.125f);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_import_q4_0)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_quant_params(&p, GGML_TYPE_Q4_0);
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    check_weights(&fm, &L.m);
    /* by hand: seed 0, block b, byte j: lo = (j + b) & 15, hi = (3j + b) & 15 */
    float row[32];
    ck_assert_int_eq(llama_weight_row_f32(&L.m.tok_embd, 0, row), 0);
    ck_assert(row[0] == -8 * 0.0625f);        /* lo 0 */
    ck_assert(row[1] == -7 * 0.0625f);        /* lo 1 */
    ck_assert(row[15] == 7 * 0.0625f);        /* lo 15 */
    ck_assert(row[16] == -8 * 0.0625f);       /* hi 0 */
    ck_assert(row[17] == -5 * 0.0625f);       /* hi 3 */
    ck_assert(row[31] == (13 - 8) * 0.0625f); /* hi 45 & 15 = 13 */
    ck_assert_int_eq(llama_weight_row_f32(&L.m.tok_embd, 1, row), 0);
    ck_assert(row[0] == -7 * 0.125f);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

/* Q4_1: the row converter handles it for any tensor a caller binds by
 * hand, and model weights in it import. */
START_TEST(test_q4_1)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_quant_params(&p, GGML_TYPE_Q4_0);
    fx_model_init(&fm, &p);
    uint64_t ne[2] = {64, 3};
    struct fx_tensor *t = fx_add_tensor(&fm, "extra.q4_1", GGML_TYPE_Q4_1, 2, ne);
    uint32_t seed = t->seed;
    expect_import_ok(&fm, &L);
    struct llama_weight w = {.t = gguf_find_tensor(&L.g, "extra.q4_1"), .rows = 3, .cols = 64};
    float row[64];
    for (uint32_t r = 0; r < 3; r++) {
        ck_assert_int_eq(llama_weight_row_f32(&w, r, row), 0);
        for (uint32_t c = 0; c < 64; c++)
            ck_assert(row[c] == fx_value(GGML_TYPE_Q4_1, seed, r * 64 + c));
    }
    /* a weight claiming more rows than the tensor holds is refused */
    w.rows = 4;
    ck_assert_int_eq(llama_weight_row_f32(&w, 3, row), -1);
    w.t = NULL;
    ck_assert_int_eq(llama_weight_row_f32(&w, 0, row), -1);
    unload(&L);

    /* a Q4_1 model weight imports and decodes (every GGUF type nibble reads) */
    struct fx_tensor *aq = fx_tensor(&fm, "blk.1.attn_q.weight");
    aq->type = GGML_TYPE_Q4_1;
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.layers[1].wq.t->type, GGML_TYPE_Q4_1);
    ck_assert_int_eq(llama_weight_row_f32(&L.m.layers[1].wq, 1, row), 0);
    for (uint32_t c = 0; c < 32; c++)
        ck_assert(row[c] == fx_value(GGML_TYPE_Q4_1, aq->seed, 32 + c));
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_tied_output)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_default_params(&p);
    p.tied = 1;
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    ck_assert_int_eq(L.m.output_tied, 1);
    ck_assert_ptr_eq(L.m.output.t, L.m.tok_embd.t);
    ck_assert_uint_eq(L.m.output.rows, 20);
    check_weights(&fm, &L.m);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_missing_tensors)
{
    static const char *const names[] = {
        "token_embd.weight",      "output_norm.weight",       "blk.0.attn_q.weight",
        "blk.1.attn_norm.weight", "blk.1.attn_q.weight",      "blk.1.attn_k.weight",
        "blk.1.attn_v.weight",    "blk.1.attn_output.weight", "blk.1.ffn_norm.weight",
        "blk.1.ffn_gate.weight",  "blk.1.ffn_up.weight",      "blk.1.ffn_down.weight",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct fx_params p;
        struct fx_model fm;
        char want[96];
        fx_default_params(&p);
        fx_model_init(&fm, &p);
        ck_assert(fx_del_tensor(&fm, names[i]));
        snprintf(want, sizeof want, "missing tensor '%s'", names[i]);
        expect_import_fail(&fm, want);
        fx_model_free(&fm);
    }
}
END_TEST

START_TEST(test_wrong_shapes)
{
    struct fx_params p;
    struct fx_model fm;
    fx_default_params(&p);
    fx_model_init(&fm, &p);
    struct fx_tensor *t = fx_tensor(&fm, "blk.0.attn_k.weight");
    t->ne[1] = 8;
    expect_import_fail(&fm, "tensor 'blk.0.attn_k.weight' has shape [8, 8], expected [8, 4]");
    t->ne[1] = 4;
    t = fx_tensor(&fm, "blk.1.ffn_norm.weight");
    t->n_dims = 2, t->ne[1] = 2;
    expect_import_fail(&fm, "tensor 'blk.1.ffn_norm.weight' has shape [8, 2], expected [8]");
    t->n_dims = 1, t->ne[1] = 1;
    t = fx_tensor(&fm, "blk.1.ffn_down.weight"); /* transposed */
    t->ne[0] = 8, t->ne[1] = 16;
    expect_import_fail(&fm, "tensor 'blk.1.ffn_down.weight' has shape [8, 16], expected [16, 8]");
    t->ne[0] = 16, t->ne[1] = 8;
    t = fx_tensor(&fm, "output.weight");
    t->n_dims = 3, t->ne[2] = 2;
    expect_import_fail(&fm, "tensor 'output.weight' has shape [8, 20, 2], expected [8, 20]");
    t->n_dims = 2, t->ne[2] = 1;
    t = fx_tensor(&fm, "token_embd.weight"); /* one row per token */
    t->ne[1] = 21;
    expect_import_fail(&fm, "tensor 'token_embd.weight' has shape [8, 21], expected [8, 20]");
    t->ne[1] = 20;
    /* a [8, 1] norm holds the same data as [8]: accepted */
    t = fx_tensor(&fm, "output_norm.weight");
    t->n_dims = 2;
    struct loaded L;
    expect_import_ok(&fm, &L);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_unsupported)
{
    struct fx_params p;
    struct fx_model fm;
    fx_default_params(&p);
    fx_model_init(&fm, &p);
    fx_set_str(&fm, "general.architecture", "gpt2");
    expect_import_fail(&fm, "unsupported architecture 'gpt2'");
    fx_set_str(&fm, "general.architecture", "llama");
    fx_set_str(&fm, "tokenizer.ggml.model", "bert");
    expect_import_fail(&fm, "unsupported tokenizer model 'bert'");
    fx_set_str(&fm, "tokenizer.ggml.model", "gpt2"); /* its pieces are not byte-level */
    expect_import_fail(&fm, "is not in the byte-level alphabet");
    fx_set_str(&fm, "tokenizer.ggml.model", "llama");
    fx_set_u32(&fm, "llama.expert_count", 8);
    expect_import_fail(&fm, "mixture of experts");
    fx_set_u32(&fm, "llama.expert_count", 0);
    struct loaded L;
    expect_import_ok(&fm, &L);
    unload(&L);
    fx_model_free(&fm);

    /* norms may not be quantized */
    fx_quant_params(&p, GGML_TYPE_Q8_0);
    p.ntype = GGML_TYPE_Q8_0;
    fx_model_init(&fm, &p);
    expect_import_fail(&fm, "tensor 'output_norm.weight' has unsupported dtype q8_0");
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_missing_metadata)
{
    static const char *const keys[] = {
        "general.architecture",
        "llama.embedding_length",
        "llama.block_count",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.context_length",
        "llama.attention.layer_norm_rms_epsilon",
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        struct fx_params p;
        struct fx_model fm;
        char want[96];
        fx_default_params(&p);
        fx_model_init(&fm, &p);
        ck_assert(fx_del(&fm, keys[i]));
        snprintf(want, sizeof want, "missing required metadata '%s'", keys[i]);
        expect_import_fail(&fm, want);
        fx_model_free(&fm);
    }
}
END_TEST

START_TEST(test_metadata_types)
{
    struct fx_params p;
    struct fx_model fm;
    fx_default_params(&p);
    fx_model_init(&fm, &p);
    fx_set_str(&fm, "llama.block_count", "2");
    expect_import_fail(&fm, "metadata 'llama.block_count' has type string, expected integer");
    fx_set_f32(&fm, "llama.block_count", 2.0f);
    expect_import_fail(&fm, "metadata 'llama.block_count' has type float32, expected integer");
    fx_set_i32(&fm, "llama.block_count", -2);
    expect_import_fail(&fm, "metadata 'llama.block_count' is out of range");
    uint8_t v[8];
    fx_put_u64(v, 1ull << 33);
    fx_set_raw(&fm, "llama.block_count", GGUF_TYPE_UINT64, v, 8);
    expect_import_fail(&fm, "metadata 'llama.block_count' is out of range");
    fx_put_u64(v, 2);
    fx_set_raw(&fm, "llama.block_count", GGUF_TYPE_UINT64, v, 8); /* any integer type that fits */
    struct loaded L;
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.hp.n_layers, 2);
    unload(&L);
    fx_set_u32(&fm, "llama.attention.layer_norm_rms_epsilon", 1);
    expect_import_fail(
        &fm, "metadata 'llama.attention.layer_norm_rms_epsilon' has type uint32, expected float");
    fx_set_f32(&fm, "llama.attention.layer_norm_rms_epsilon", 1e-6f);
    fx_set_u32(&fm, "general.architecture", 1);
    expect_import_fail(&fm, "metadata 'general.architecture' has type uint32, expected string");
    fx_set_str(&fm, "general.architecture", "llama");
    fx_set_u32(&fm, "tokenizer.ggml.add_bos_token", 1);
    expect_import_fail(&fm,
                       "metadata 'tokenizer.ggml.add_bos_token' has type uint32, expected bool");
    fx_set_bool(&fm, "tokenizer.ggml.add_bos_token", 1);
    fx_set_str(&fm, "llama.rope.freq_base", "big");
    expect_import_fail(&fm, "metadata 'llama.rope.freq_base' has type string, expected float");
    fx_set_f32(&fm, "llama.rope.freq_base", 10000.0f);
    fx_set_str(&fm, "llama.attention.head_count_kv", "1");
    expect_import_fail(
        &fm, "metadata 'llama.attention.head_count_kv' has type string, expected integer");
    fx_set_u32(&fm, "llama.attention.head_count_kv", 1);

    /* per-token arrays */
    uint8_t arr[4 + 8 + 20 * 4];
    fx_put_u32(arr, GGUF_TYPE_INT32);
    fx_put_u64(arr + 4, 20);
    for (int i = 0; i < 20; i++)
        fx_put_u32(arr + 12 + 4 * i, 1);
    fx_set_raw(&fm, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_fail(
        &fm, "metadata 'tokenizer.ggml.scores' has type array of int32, expected array of float32");
    fx_set_raw(&fm, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_fail(
        &fm, "metadata 'tokenizer.ggml.tokens' has type array of int32, expected array of string");
    fx_set_str(&fm, "tokenizer.ggml.tokens", "x");
    expect_import_fail(
        &fm, "metadata 'tokenizer.ggml.tokens' has type string, expected array of string");
    fx_model_free(&fm);

    fx_model_init(&fm, &p);
    fx_put_u32(arr, GGUF_TYPE_FLOAT32);
    fx_put_u64(arr + 4, 19);
    fx_set_raw(&fm, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY, arr, sizeof arr - 4);
    expect_import_fail(&fm, "metadata 'tokenizer.ggml.scores' has 19 entries, expected 20");
    fx_put_u32(arr, GGUF_TYPE_FLOAT32);
    fx_put_u64(arr + 4, 20);
    fx_set_raw(&fm, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY, arr, sizeof arr);
    fx_put_u32(arr, GGUF_TYPE_FLOAT32);
    fx_set_raw(&fm, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_fail(
        &fm,
        "metadata 'tokenizer.ggml.token_type' has type array of float32, expected array of int32");
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_defaults)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_default_params(&p);
    p.n_kv_heads = p.n_heads; /* so the default head_count_kv matches the tensors */
    fx_model_init(&fm, &p);
    static const char *const opt[] = {
        "llama.attention.head_count_kv",
        "llama.rope.dimension_count",
        "llama.rope.freq_base",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type",
        "general.name",
    };
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        ck_assert(fx_del(&fm, opt[i]));
    expect_import_ok(&fm, &L);
    const struct nib_hparams *hp = &L.m.hp;
    ck_assert_uint_eq(hp->n_kv_heads, 2);
    ck_assert_uint_eq(hp->rope_dim, hp->head_dim);
    ck_assert(hp->rope_theta == 10000.0f);
    ck_assert_uint_eq(hp->bos_id, 1);
    ck_assert_uint_eq(hp->eos_id, 2);
    ck_assert_uint_eq(hp->add_bos, 1);
    for (uint32_t i = 0; i < 20; i++) {
        ck_assert(L.m.tok.tokens[i].score == 0.0f);
        ck_assert_uint_eq(L.m.tok.tokens[i].type, NIB_TOK_NORMAL);
    }
    unload(&L);

    /* explicit values are used, f64 converts, token type 0 ("undefined") is normal */
    fx_set_u32(&fm, "tokenizer.ggml.bos_token_id", 5);
    fx_set_u32(&fm, "tokenizer.ggml.eos_token_id", 19);
    fx_set_bool(&fm, "tokenizer.ggml.add_bos_token", 1);
    double theta = 1e6;
    uint64_t u;
    uint8_t v[8];
    memcpy(&u, &theta, 8);
    fx_put_u64(v, u);
    fx_set_raw(&fm, "llama.rope.freq_base", GGUF_TYPE_FLOAT64, v, 8);
    fx_set_u32(&fm, "llama.vocab_size", 20);
    uint8_t arr[4 + 8 + 20 * 4] = {0};
    fx_put_u32(arr, GGUF_TYPE_INT32);
    fx_put_u64(arr + 4, 20);
    fx_set_raw(&fm, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.hp.bos_id, 5);
    ck_assert_uint_eq(L.m.hp.eos_id, 19);
    ck_assert_uint_eq(L.m.hp.add_bos, 1);
    ck_assert(L.m.hp.rope_theta == 1e6f);
    ck_assert_uint_eq(L.m.tok.tokens[3].type, NIB_TOK_NORMAL);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

/* One bad hyper-parameter at a time, with the phrase its error must carry. */
START_TEST(test_sanity_checks)
{
    static const struct {
        const char *key;
        uint32_t v;
        const char *phrase;
    } cases[] = {
        {"llama.attention.head_count", 3,
         "llama.embedding_length 8 is not a multiple of llama.attention.head_count 3"},
        {"llama.attention.head_count", 0, "is not a multiple of llama.attention.head_count 0"},
        {"llama.attention.head_count_kv", 3,
         "head_count 2 is not a multiple of llama.attention.head_count_kv 3"},
        {"llama.attention.head_count_kv", 0, "llama.attention.head_count_kv 0"},
        {"llama.attention.head_count", 8, "head dimension 1 is odd"},
        {"llama.rope.dimension_count", 3, "llama.rope.dimension_count 3 must be even"},
        {"llama.rope.dimension_count", 6,
         "llama.rope.dimension_count 6 must be even and in [2, head dimension 4]"},
        {"llama.rope.dimension_count", 0, "llama.rope.dimension_count 0"},
        {"llama.context_length", 0, "llama.context_length is 0"},
        {"llama.block_count", 0, "llama.block_count 0 is out of range"},
        {"llama.block_count", NIB_MAX_LAYERS + 1, "llama.block_count 513 is out of range [1, 512]"},
        {"llama.embedding_length", 0, "llama.embedding_length 0 is out of range"},
        {"llama.embedding_length", NIB_MAX_DIM + 2, "llama.embedding_length 65538 is out of range"},
        {"llama.feed_forward_length", NIB_MAX_DIM + 1,
         "llama.feed_forward_length 65537 is out of range"},
        {"tokenizer.ggml.bos_token_id", 20,
         "tokenizer.ggml.bos_token_id 20 is out of range (vocab 20)"},
        {"tokenizer.ggml.eos_token_id", 0xFFFFFFFFu,
         "tokenizer.ggml.eos_token_id 4294967295 is out of range"},
        {"llama.vocab_size", 32000, "llama.vocab_size 32000 differs from the 20 tokens"},
        {"llama.block_count", 3, "missing tensor 'blk.2.attn_norm.weight'"},
        {"llama.feed_forward_length", 17,
         "tensor 'blk.0.ffn_gate.weight' has shape [8, 16], expected [8, 17]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fx_params p;
        struct fx_model fm;
        fx_default_params(&p);
        fx_model_init(&fm, &p);
        fx_set_u32(&fm, cases[i].key, cases[i].v);
        expect_import_fail(&fm, cases[i].phrase);
        fx_model_free(&fm);
    }
    struct fx_params p;
    struct fx_model fm;
    fx_default_params(&p);
    fx_model_init(&fm, &p);
    fx_set_f32(&fm, "llama.attention.layer_norm_rms_epsilon", 0.0f);
    expect_import_fail(&fm, "layer_norm_rms_epsilon 0 must be positive");
    fx_set_f32(&fm, "llama.attention.layer_norm_rms_epsilon", NAN);
    expect_import_fail(&fm, "must be positive and finite");
    fx_set_f32(&fm, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    fx_set_f32(&fm, "llama.rope.freq_base", -1.0f);
    expect_import_fail(&fm, "llama.rope.freq_base -1 must be positive");
    fx_model_free(&fm);
}
END_TEST

/* Vocabulary arrays built by hand: n pieces, piece `long_at` of `long_len`
 * bytes, the rest one byte each. */
static void set_tokens(struct fx_model *fm, uint32_t n, uint32_t long_at, size_t long_len)
{
    size_t len = 12 + (size_t)n * 9 + long_len;
    uint8_t *b = calloc(1, len), *p = b + 12;
    fx_put_u32(b, GGUF_TYPE_STRING);
    fx_put_u64(b + 4, n);
    for (uint32_t i = 0; i < n; i++) {
        size_t l = i == long_at ? long_len : 1;
        fx_put_u64(p, l);
        memset(p + 8, 'a' + (int)(i % 26), l);
        p += 8 + l;
    }
    fx_set_raw(fm, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY, b, (size_t)(p - b));
    free(b);
}

START_TEST(test_vocab_checks)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_default_params(&p);
    fx_model_init(&fm, &p);
    set_tokens(&fm, 20, 7, NIB_MAX_PIECE);
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.tok.tokens[7].len, NIB_MAX_PIECE);
    unload(&L);
    set_tokens(&fm, 20, 7, NIB_MAX_PIECE + 1);
    expect_import_fail(&fm, "token 7 piece is 257 bytes, longer than the limit 256");
    set_tokens(&fm, 0, 0, 0);
    expect_import_fail(&fm, "vocabulary size 0 is out of range");
    set_tokens(&fm, 21, 99, 0);
    expect_import_fail(&fm, "metadata 'tokenizer.ggml.scores' has 20 entries, expected 21");
    fx_del(&fm, "tokenizer.ggml.scores");
    fx_del(&fm, "tokenizer.ggml.token_type");
    expect_import_fail(&fm, "tensor 'token_embd.weight' has shape [8, 20], expected [8, 21]");
    fx_model_free(&fm);

    /* bad token type and NaN score */
    fx_model_init(&fm, &p);
    uint8_t arr[4 + 8 + 20 * 4] = {0};
    fx_put_u32(arr, GGUF_TYPE_INT32);
    fx_put_u64(arr + 4, 20);
    fx_put_u32(arr + 12 + 4 * 9, 7);
    fx_set_raw(&fm, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_fail(&fm, "token 9 has unknown token type 7");
    fx_put_u32(arr + 12 + 4 * 9, (uint32_t)-1);
    fx_set_raw(&fm, "tokenizer.ggml.token_type", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_fail(&fm, "token 9 has unknown token type -1");
    fx_del(&fm, "tokenizer.ggml.token_type");
    float nan = NAN;
    uint32_t u;
    memcpy(&u, &nan, 4);
    fx_put_u32(arr, GGUF_TYPE_FLOAT32);
    fx_put_u32(arr + 12 + 4 * 3, u);
    fx_set_raw(&fm, "tokenizer.ggml.scores", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_fail(&fm, "token 3 has a NaN score");
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_extra_tensors_ignored)
{
    struct fx_params p;
    struct fx_model fm;
    struct loaded L;
    fx_default_params(&p);
    fx_model_init(&fm, &p);
    uint64_t ne[1] = {2};
    fx_add_tensor(&fm, "blk.0.attn_rot_embd", GGML_TYPE_F32, 1, ne); /* a name nibble never reads */
    uint64_t ne2[2] = {64, 2};
    fx_add_tensor(&fm, "blk.5.attn_q.weight", GGML_TYPE_Q4_1, 2, ne2); /* beyond block_count */
    expect_import_ok(&fm, &L);
    check_weights(&fm, &L.m);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

/* ---- architectures ---- */

static void arch_model(struct fx_model *fm, const char *arch)
{
    struct fx_params p;
    fx_arch_params(&p, arch);
    fx_model_init(fm, &p);
}

/* View entry i of a rotate-half source (heads of hd entries, the first rd
 * rotating): the source entry it holds, computed here independently of
 * tools/compiler/weight_view.c. */
static uint32_t neox_entry(uint32_t i, uint32_t hd, uint32_t rd)
{
    if (hd == 0 || i % hd >= rd)
        return i;
    uint32_t j = i % hd;
    return i - j + (j % 2 ? rd / 2 + j / 2 : j / 2);
}

/* w views tensor `name` from source row (matrix) or element (vector) row0,
 * reordered in heads of hd with rd rotating (hd 0: none), and every value
 * read through it is the fixture's value at that place. */
static void check_view(struct fx_model *fm, const struct llama_weight *w, const char *name,
                       uint32_t rows, uint32_t cols, uint32_t row0, uint32_t hd, uint32_t rd)
{
    const struct fx_tensor *t = fx_tensor(fm, name);
    ck_assert_msg(t != NULL, "fixture has no %s", name);
    ck_assert_msg(w->t && gguf_str_eq(w->t->name, name), "%s: bound to another tensor", name);
    ck_assert_uint_eq(w->rows, rows);
    ck_assert_uint_eq(w->cols, cols);
    ck_assert_uint_eq(w->row0, row0);
    ck_assert_uint_eq(w->neox_head, hd);
    ck_assert_uint_eq(w->neox_rope_dim, rd);
    ck_assert(w->add == 0.0f);
    float row[256];
    for (uint32_t r = 0; r < rows; r++) {
        ck_assert_int_eq(llama_weight_row_f32(w, r, row), 0);
        for (uint32_t c = 0; c < cols; c++) {
            uint64_t at = rows == 1 ? row0 + neox_entry(c, hd, rd)
                                    : (uint64_t)(row0 + neox_entry(r, hd, rd)) * t->ne[0] + c;
            float want = fx_value(t->type, t->seed, at);
            ck_assert_msg(row[c] == want, "%s view [%u][%u] = %g, expected %g", name, r, c, row[c],
                          want);
        }
    }
}

static void check_common(const struct llama_model *m, uint32_t arch, uint32_t act)
{
    ck_assert_uint_eq(m->arch, arch);
    ck_assert_uint_eq(m->hp.arch, arch);
    ck_assert_uint_eq(m->ffn_act, act);
    ck_assert_str_eq(llama_arch_name(arch), arch == LLAMA_ARCH_LLAMA   ? "llama"
                                            : arch == LLAMA_ARCH_QWEN2 ? "qwen2"
                                            : arch == LLAMA_ARCH_QWEN3 ? "qwen3"
                                            : arch == LLAMA_ARCH_PHI3  ? "phi3"
                                                                       : "gemma2");
}

START_TEST(test_arch_llama)
{
    struct fx_model fm;
    struct loaded L;
    arch_model(&fm, "llama");
    expect_import_ok(&fm, &L);
    check_common(&L.m, LLAMA_ARCH_LLAMA, LLAMA_ACT_SILU);
    ck_assert(L.m.embed_scale == 1.0f);
    ck_assert(L.m.attn_scale == 0.5f); /* 1/sqrt(4) */
    ck_assert(L.m.attn_softcap == 0.0f && L.m.final_softcap == 0.0f);
    ck_assert_ptr_null(L.m.rope_freq_factors);
    for (uint32_t l = 0; l < 2; l++) {
        const struct llama_layer *ly = &L.m.layers[l];
        ck_assert_uint_eq(ly->window, 0);
        ck_assert_uint_eq(ly->wq.neox_head, 0); /* llama: interleaved RoPE as nibble's */
        ck_assert_ptr_null(ly->bq.t);
        ck_assert_ptr_null(ly->q_norm.t);
        ck_assert_ptr_null(ly->post_attn_norm.t);
    }
    check_weights(&fm, &L.m);
    unload(&L);
    fx_model_free(&fm);

    /* Llama 3.x: rope_freqs.weight (divisors), tied embeddings; a linear
     * scaling factor multiplies every divisor. */
    struct fx_params p;
    fx_arch_params(&p, "llama");
    p.rope_dim = 4, p.rope_freqs = 1, p.tied = 1;
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    ck_assert_int_eq(L.m.output_tied, 1);
    ck_assert_ptr_nonnull(L.m.rope_freq_factors);
    ck_assert(L.m.rope_freq_factors[0] == fx_rope_freq(0));
    ck_assert(L.m.rope_freq_factors[1] == fx_rope_freq(1));
    unload(&L);
    fx_set_str(&fm, "llama.rope.scaling.type", "linear");
    fx_set_f32(&fm, "llama.rope.scaling.factor", 4.0f);
    expect_import_ok(&fm, &L);
    ck_assert(L.m.rope_freq_factors[0] == 4 * fx_rope_freq(0));
    ck_assert(L.m.rope_freq_factors[1] == 4 * fx_rope_freq(1));
    unload(&L);
    ck_assert(fx_del_tensor(&fm, "rope_freqs.weight"));
    fx_del(&fm, "llama.rope.scaling.factor");
    fx_set_f32(&fm, "llama.rope.scale_linear", 2.0f); /* the older key */
    expect_import_ok(&fm, &L);
    ck_assert(L.m.rope_freq_factors[0] == 2.0f && L.m.rope_freq_factors[1] == 2.0f);
    unload(&L);
    fx_set_str(&fm, "llama.rope.scaling.type", "none");
    fx_set_f32(&fm, "llama.rope.scale_linear", 1.0f);
    expect_import_ok(&fm, &L);
    ck_assert_ptr_null(L.m.rope_freq_factors);
    unload(&L);

    /* bad factors */
    uint64_t ne[1] = {2};
    struct fx_tensor *t = fx_add_tensor(&fm, "rope_freqs.weight", GGML_TYPE_F32, 1, ne);
    float bad[2] = {1.0f, 0.0f};
    fx_tensor_set_raw(t, bad, sizeof bad);
    expect_import_fail(&fm, "tensor 'rope_freqs.weight' element 1 is 0: factors must be positive");
    bad[1] = NAN;
    fx_tensor_set_raw(t, bad, sizeof bad);
    expect_import_fail(&fm, "element 1 is nan");
    t->ne[0] = 1;
    fx_tensor_set_raw(t, bad, 4);
    expect_import_fail(&fm, "tensor 'rope_freqs.weight' has shape [1], expected [2]");
    fx_model_free(&fm);

    /* a fused attn_qkv is read for llama too (llama.cpp's create_tensor_qkv) */
    fx_arch_params(&p, "llama");
    p.fused_qkv = 1;
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    check_view(&fm, &L.m.layers[1].wk, "blk.1.attn_qkv.weight", 4, 8, 8, 0, 0);
    check_view(&fm, &L.m.layers[1].wv, "blk.1.attn_qkv.weight", 4, 8, 12, 0, 0);
    unload(&L);
    fx_model_free(&fm);

    /* Mistral-style head size from metadata (key_length 6 with dim 8) */
    fx_arch_params(&p, "llama");
    p.head_dim = 6;
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.hp.head_dim, 6);
    ck_assert_uint_eq(L.m.layers[0].wq.rows, 12);
    ck_assert_uint_eq(L.m.layers[0].wo.cols, 12);
    ck_assert(L.m.attn_scale == 1.0f / sqrtf(6.0f));
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_arch_qwen2)
{
    struct fx_model fm;
    struct loaded L;
    arch_model(&fm, "qwen2");
    fx_set_u32(&fm, "qwen2.rope.dimension_count", 4); /* the whole head rotates */
    expect_import_ok(&fm, &L);
    check_common(&L.m, LLAMA_ARCH_QWEN2, LLAMA_ACT_SILU);
    ck_assert_uint_eq(L.m.hp.dim, 8);
    ck_assert_uint_eq(L.m.hp.head_dim, 4);
    ck_assert(L.m.attn_scale == 0.5f);
    for (uint32_t l = 0; l < 2; l++) {
        const struct llama_layer *ly = &L.m.layers[l];
        char n[64];
#define N(part) (snprintf(n, sizeof n, "blk.%u." part, l), n)
        check_view(&fm, &ly->wq, N("attn_q.weight"), 8, 8, 0, 4, 4);
        check_view(&fm, &ly->wk, N("attn_k.weight"), 4, 8, 0, 4, 4);
        check_view(&fm, &ly->wv, N("attn_v.weight"), 4, 8, 0, 0, 0);
        check_view(&fm, &ly->bq, N("attn_q.bias"), 1, 8, 0, 4, 4);
        check_view(&fm, &ly->bk, N("attn_k.bias"), 1, 4, 0, 4, 4);
        check_view(&fm, &ly->bv, N("attn_v.bias"), 1, 4, 0, 0, 0);
        check_view(&fm, &ly->wo, N("attn_output.weight"), 8, 8, 0, 0, 0);
        check_view(&fm, &ly->w_gate, N("ffn_gate.weight"), 16, 8, 0, 0, 0);
#undef N
    }
    /* by hand: source row 2 (the first half's second pair member) is view row 1 */
    float a[8], b[8];
    struct llama_weight src = L.m.layers[0].wq;
    src.neox_head = src.neox_rope_dim = 0;
    ck_assert_int_eq(llama_weight_row_f32(&L.m.layers[0].wq, 1, a), 0);
    ck_assert_int_eq(llama_weight_row_f32(&src, 2, b), 0);
    ck_assert(!memcmp(a, b, sizeof a));
    unload(&L);

    /* biases are optional (llama.cpp: TENSOR_NOT_REQUIRED) */
    ck_assert(fx_del_tensor(&fm, "blk.0.attn_q.bias"));
    expect_import_ok(&fm, &L);
    ck_assert_ptr_null(L.m.layers[0].bq.t);
    ck_assert_ptr_nonnull(L.m.layers[0].bk.t);
    unload(&L);
    fx_tensor(&fm, "blk.1.attn_k.bias")->ne[0] = 8;
    expect_import_fail(&fm, "tensor 'blk.1.attn_k.bias' has shape [8], expected [4]");
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_arch_qwen3)
{
    struct fx_model fm;
    struct loaded L;
    arch_model(&fm, "qwen3");
    fx_set_u32(&fm, "qwen3.rope.dimension_count", 6);
    expect_import_ok(&fm, &L);
    check_common(&L.m, LLAMA_ARCH_QWEN3, LLAMA_ACT_SILU);
    ck_assert_uint_eq(L.m.hp.head_dim, 6); /* not dim / heads = 4 */
    ck_assert_uint_eq(L.m.hp.rope_dim, 6);
    ck_assert(L.m.attn_scale == 1.0f / sqrtf(6.0f));
    for (uint32_t l = 0; l < 2; l++) {
        const struct llama_layer *ly = &L.m.layers[l];
        char n[64];
#define N(part) (snprintf(n, sizeof n, "blk.%u." part, l), n)
        check_view(&fm, &ly->wq, N("attn_q.weight"), 12, 8, 0, 6, 6);
        check_view(&fm, &ly->wk, N("attn_k.weight"), 6, 8, 0, 6, 6);
        check_view(&fm, &ly->wv, N("attn_v.weight"), 6, 8, 0, 0, 0);
        check_view(&fm, &ly->q_norm, N("attn_q_norm.weight"), 1, 6, 0, 6, 6);
        check_view(&fm, &ly->k_norm, N("attn_k_norm.weight"), 1, 6, 0, 6, 6);
        check_view(&fm, &ly->wo, N("attn_output.weight"), 8, 12, 0, 0, 0);
        ck_assert_ptr_null(ly->bq.t);
#undef N
    }
    unload(&L);
    fx_set_u32(&fm, "qwen3.attention.value_length", 4);
    expect_import_fail(&fm,
                       "unsupported metadata 'qwen3.attention.value_length' = 4: value heads must "
                       "be as wide as key heads (qwen3.attention.key_length 6)");
    fx_set_u32(&fm, "qwen3.attention.value_length", 6);
    fx_set_u32(&fm, "qwen3.attention.key_length", 5);
    expect_import_fail(&fm, "value_length' = 6");
    fx_del(&fm, "qwen3.attention.value_length"); /* llama.cpp's default: dim / heads */
    expect_import_fail(&fm, "value_length' = 4");
    fx_set_u32(&fm, "qwen3.attention.value_length", 5);
    expect_import_fail(&fm, "head dimension 5 is odd");
    fx_set_u32(&fm, "qwen3.attention.key_length", 0);
    fx_set_u32(&fm, "qwen3.attention.value_length", 0);
    expect_import_fail(&fm, "qwen3.attention.key_length 0: attention width 0");
    fx_set_u32(&fm, "qwen3.attention.key_length", 40000);
    fx_set_u32(&fm, "qwen3.attention.value_length", 40000);
    expect_import_fail(&fm, "attention width 80000 (x 2 heads) is out of range [1, 65536]");
    fx_set_u32(&fm, "qwen3.attention.key_length", 6);
    fx_set_u32(&fm, "qwen3.attention.value_length", 6);
    ck_assert(fx_del_tensor(&fm, "blk.1.attn_k_norm.weight"));
    expect_import_fail(&fm, "missing tensor 'blk.1.attn_k_norm.weight'");
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_arch_phi3)
{
    struct fx_model fm;
    struct loaded L;
    arch_model(&fm, "phi3");
    expect_import_ok(&fm, &L);
    check_common(&L.m, LLAMA_ARCH_PHI3, LLAMA_ACT_SILU);
    for (uint32_t l = 0; l < 2; l++) {
        const struct llama_layer *ly = &L.m.layers[l];
        char n[64];
#define N(part) (snprintf(n, sizeof n, "blk.%u." part, l), n)
        /* Q|K|V rows of attn_qkv: Q 8 rows, K 4, V 4; rope_dim 2 of heads of 4 */
        check_view(&fm, &ly->wq, N("attn_qkv.weight"), 8, 8, 0, 4, 2);
        check_view(&fm, &ly->wk, N("attn_qkv.weight"), 4, 8, 8, 4, 2);
        check_view(&fm, &ly->wv, N("attn_qkv.weight"), 4, 8, 12, 0, 0);
        /* gate rows then up rows of ffn_up */
        check_view(&fm, &ly->w_gate, N("ffn_up.weight"), 16, 8, 0, 0, 0);
        check_view(&fm, &ly->w_up, N("ffn_up.weight"), 16, 8, 16, 0, 0);
        check_view(&fm, &ly->w_down, N("ffn_down.weight"), 8, 16, 0, 0, 0);
        ck_assert_ptr_null(ly->bq.t);
        ck_assert_uint_eq(ly->window, 0);
#undef N
    }
    unload(&L);
    /* phi3's converter writes sliding_window; llama.cpp disables Phi-3 SWA */
    fx_set_u32(&fm, "phi3.attention.sliding_window", 2047);
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.layers[0].window, 0);
    ck_assert_uint_eq(L.m.layers[1].window, 0);
    unload(&L);
    fx_model_free(&fm);

    /* a fused bias gives vector views; separate biases with a fused matrix
     * count only as a set */
    struct fx_params p;
    fx_arch_params(&p, "phi3");
    p.qkv_bias = 1;
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    check_view(&fm, &L.m.layers[1].bq, "blk.1.attn_qkv.bias", 1, 8, 0, 4, 2);
    check_view(&fm, &L.m.layers[1].bk, "blk.1.attn_qkv.bias", 1, 4, 8, 4, 2);
    check_view(&fm, &L.m.layers[1].bv, "blk.1.attn_qkv.bias", 1, 4, 12, 0, 0);
    unload(&L);
    ck_assert(fx_del_tensor(&fm, "blk.1.attn_qkv.bias"));
    uint64_t ne[1] = {8};
    fx_add_tensor(&fm, "blk.1.attn_q.bias", GGML_TYPE_F32, 1, ne);
    expect_import_fail(&fm, "tensor 'blk.1.attn_qkv.weight' comes with only some of "
                            "attn_q/k/v.bias");
    fx_model_free(&fm);

    /* ffn_up must hold both halves */
    arch_model(&fm, "phi3");
    fx_tensor(&fm, "blk.0.ffn_up.weight")->ne[1] = 16;
    expect_import_fail(&fm, "tensor 'blk.0.ffn_up.weight' has shape [8, 16], expected [8, 32]");
    fx_model_free(&fm);
}
END_TEST

START_TEST(test_arch_gemma2)
{
    struct fx_model fm;
    struct loaded L;
    arch_model(&fm, "gemma2");
    expect_import_ok(&fm, &L);
    check_common(&L.m, LLAMA_ARCH_GEMMA2, LLAMA_ACT_GELU_TANH);
    ck_assert(L.m.embed_scale == sqrtf(8.0f));
    ck_assert(L.m.attn_scale == 1.0f / sqrtf(6.0f)); /* 1/sqrt(key_length) */
    ck_assert(L.m.attn_softcap == 50.0f);            /* llama.cpp's defaults */
    ck_assert(L.m.final_softcap == 30.0f);
    ck_assert_int_eq(L.m.output_tied, 1);
    ck_assert_ptr_eq(L.m.output.t, L.m.tok_embd.t);
    ck_assert_uint_eq(L.m.layers[0].window, 4096); /* even layers slide */
    ck_assert_uint_eq(L.m.layers[1].window, 0);
    for (uint32_t l = 0; l < 2; l++) {
        const struct llama_layer *ly = &L.m.layers[l];
        char n[64];
#define N(part) (snprintf(n, sizeof n, "blk.%u." part, l), n)
        check_view(&fm, &ly->wq, N("attn_q.weight"), 12, 8, 0, 6, 2);
        check_view(&fm, &ly->wk, N("attn_k.weight"), 6, 8, 0, 6, 2);
        check_view(&fm, &ly->post_attn_norm, N("post_attention_norm.weight"), 1, 8, 0, 0, 0);
        check_view(&fm, &ly->post_ffn_norm, N("post_ffw_norm.weight"), 1, 8, 0, 0, 0);
#undef N
    }
    unload(&L);

    /* explicit values (a separate output.weight is refused: gemma2 ties its
     * head, and llama.cpp refuses such a file too: the foreign-tensor table below) */
    fx_set_f32(&fm, "gemma2.attn_logit_softcapping", 20.0f);
    fx_set_f32(&fm, "gemma2.final_logit_softcapping", 15.0f);
    fx_set_u32(&fm, "gemma2.attention.sliding_window", 16);
    expect_import_ok(&fm, &L);
    ck_assert(L.m.attn_softcap == 20.0f && L.m.final_softcap == 15.0f);
    ck_assert_uint_eq(L.m.layers[0].window, 16);
    ck_assert_uint_eq(L.m.layers[1].window, 0);
    ck_assert_int_eq(L.m.output_tied, 1);
    unload(&L);
    /* a pattern of 1 (no sliding layer), and a per-layer bool array */
    fx_set_u32(&fm, "gemma2.attention.sliding_window_pattern", 1);
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.layers[0].window, 0);
    ck_assert_uint_eq(L.m.layers[1].window, 0);
    unload(&L);
    uint8_t arr[4 + 8 + 2] = {0};
    fx_put_u32(arr, GGUF_TYPE_BOOL);
    fx_put_u64(arr + 4, 2);
    arr[13] = 1;
    fx_set_raw(&fm, "gemma2.attention.sliding_window_pattern", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_import_ok(&fm, &L);
    ck_assert_uint_eq(L.m.layers[0].window, 0);
    ck_assert_uint_eq(L.m.layers[1].window, 16);
    unload(&L);
    fx_put_u64(arr + 4, 1);
    fx_set_raw(&fm, "gemma2.attention.sliding_window_pattern", GGUF_TYPE_ARRAY, arr, 13);
    expect_import_fail(&fm, "metadata 'gemma2.attention.sliding_window_pattern' has 1 entries, "
                            "expected 2");
    fx_put_u32(arr, GGUF_TYPE_UINT8);
    fx_set_raw(&fm, "gemma2.attention.sliding_window_pattern", GGUF_TYPE_ARRAY, arr, 13);
    expect_import_fail(&fm, "has type array of uint8, expected integer or array of bool");
    fx_del(&fm, "gemma2.attention.sliding_window_pattern");

    /* refused values */
    fx_set_u32(&fm, "gemma2.attention.sliding_window", 0);
    expect_import_fail(&fm, "gemma2.attention.sliding_window is 0");
    fx_set_u32(&fm, "gemma2.attention.sliding_window", 16);
    fx_set_f32(&fm, "gemma2.attn_logit_softcapping", 0.0f);
    expect_import_fail(&fm, "gemma2.attn_logit_softcapping 0 must be positive and finite");
    fx_set_f32(&fm, "gemma2.attn_logit_softcapping", 50.0f);
    fx_set_f32(&fm, "gemma2.final_logit_softcapping", INFINITY);
    expect_import_fail(&fm, "gemma2.final_logit_softcapping inf must be positive and finite");
    fx_set_f32(&fm, "gemma2.final_logit_softcapping", 30.0f);
    fx_set_f32(&fm, "gemma2.rope.freq_base_swa", 10000.0f);
    expect_import_fail(&fm, "unsupported metadata 'gemma2.rope.freq_base_swa' = 10000");
    fx_set_f32(&fm, "gemma2.rope.freq_base_swa", 500000.0f); /* the same base: fine */
    ck_assert(fx_del_tensor(&fm, "blk.0.post_ffw_norm.weight"));
    expect_import_fail(&fm, "missing tensor 'blk.0.post_ffw_norm.weight'");
    fx_model_free(&fm);

    /* 46 layers (Gemma 2 27B): llama.cpp scales by 1/sqrt(dim / heads) */
    struct fx_params p;
    fx_arch_params(&p, "gemma2");
    p.n_layers = 46;
    fx_model_init(&fm, &p);
    expect_import_ok(&fm, &L);
    ck_assert(L.m.attn_scale == 0.5f); /* 1/sqrt(8 / 2) */
    ck_assert_uint_eq(L.m.layers[44].window, 4096);
    ck_assert_uint_eq(L.m.layers[45].window, 0);
    unload(&L);
    fx_model_free(&fm);
}
END_TEST

/* Every refusal names what it refuses (and, for architectures, what is
 * supported). */
START_TEST(test_arch_refusals)
{
    struct fx_model fm;
    arch_model(&fm, "llama");
    fx_set_str(&fm, "general.architecture", "gemma3");
    expect_import_fail(&fm, "unsupported architecture 'gemma3' (nibble reads llama (Llama 1-3.x, "
                            "Mistral, SmolLM2, TinyLlama), qwen2, qwen3, phi3, gemma2)");
    fx_set_str(&fm, "general.architecture", "llama");
    fx_set_str(&fm, "llama.rope.scaling.type", "yarn");
    expect_import_fail(&fm, "unsupported metadata 'llama.rope.scaling.type' = 'yarn' (nibble "
                            "supports none and linear");
    fx_set_u32(&fm, "llama.rope.scaling.type", 3);
    expect_import_fail(&fm, "metadata 'llama.rope.scaling.type' has type uint32, expected string");
    fx_del(&fm, "llama.rope.scaling.type");
    fx_set_f32(&fm, "llama.rope.scaling.factor", -2.0f);
    expect_import_fail(&fm, "llama.rope.scaling.factor -2 must be positive and finite");
    fx_del(&fm, "llama.rope.scaling.factor");
    fx_set_f32(&fm, "llama.rope.scaling.attn_factor", 1.5f);
    expect_import_fail(&fm, "unsupported metadata 'llama.rope.scaling.attn_factor' = 1.5");
    fx_del(&fm, "llama.rope.scaling.attn_factor");
    fx_model_free(&fm);

    arch_model(&fm, "qwen2");
    fx_set_u32(&fm, "qwen2.expert_count", 60);
    expect_import_fail(&fm, "unsupported metadata 'qwen2.expert_count' = 60: mixture of experts");
    fx_model_free(&fm);

    /* tensors nibble's forward pass has no place for, by name */
    static const struct {
        const char *arch, *tensor;
        uint32_t n; /* elements (1-D) */
        const char *phrase;
    } foreign[] = {
        {"llama", "blk.1.attn_output.bias", 8, "an attention output bias"},
        {"llama", "blk.0.ffn_down.bias", 8, "FFN biases"},
        {"qwen2", "blk.0.ffn_up.bias", 16, "FFN biases"},
        {"llama", "blk.0.attn_norm.bias", 8, "LayerNorm biases"},
        {"llama", "blk.0.attn_q_norm.weight", 4, "per-head Q/K norms"},
        {"qwen2", "blk.1.post_ffw_norm.weight", 8, "post-norms"},
        {"phi3", "blk.0.ffn_gate.weight", 8, "a separate gate"},
        {"phi3", "rope_factors_long.weight", 1, "LongRoPE"},
        {"qwen3", "rope_freqs.weight", 1, "RoPE frequency factors"},
        {"gemma2", "output.bias", 20, "an output bias"},
        {"gemma2", "output.weight", 20, "separate output matrix"},
        {"llama", "blk.0.ffn_gate_inp.weight", 8, "mixture of experts"},
    };
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        char want[160];
        arch_model(&fm, foreign[i].arch);
        uint64_t ne[1] = {foreign[i].n};
        fx_add_tensor(&fm, foreign[i].tensor, GGML_TYPE_F32, 1, ne);
        snprintf(want, sizeof want, "unsupported tensor '%s' in a %s model (nibble runs no %s",
                 foreign[i].tensor, foreign[i].arch, foreign[i].phrase);
        expect_import_fail(&fm, want);
        fx_model_free(&fm);
    }
    /* the same names past block_count are not part of the model */
    arch_model(&fm, "llama");
    uint64_t ne[1] = {8};
    fx_add_tensor(&fm, "blk.7.attn_output.bias", GGML_TYPE_F32, 1, ne);
    struct loaded L;
    expect_import_ok(&fm, &L);
    unload(&L);
    fx_model_free(&fm);

    /* vectors (biases, norms) are f32, f16 or bf16; matrices any type */
    struct fx_params p;
    fx_quant_params(&p, GGML_TYPE_Q8_0);
    p.arch = "qwen2", p.qkv_bias = 1;
    fx_model_init(&fm, &p);
    fx_tensor(&fm, "blk.0.attn_q.bias")->type = GGML_TYPE_Q8_0;
    expect_import_fail(&fm, "tensor 'blk.0.attn_q.bias' has unsupported dtype q8_0 (norm weights, "
                            "biases and RoPE factors must be f32, f16 or bf16)");
    fx_model_free(&fm);
}
END_TEST

/* ---- real models from ../shared/models ---- */

static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    ck_assert(n > 0);
    uint8_t *b = malloc((size_t)n);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *size = (size_t)n;
    return b;
}

static const char *models_dir(char *buf, size_t n)
{
    const char *shared = getenv("NIB_SHARED_DIR");
    if (shared && *shared)
        snprintf(buf, n, "%s/models", shared);
    else
        snprintf(buf, n, "%s/../shared/models", NIB_SOURCE_ROOT);
    FILE *fp;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/stories260K.gguf", buf);
    if (!(fp = fopen(probe, "rb")))
        return NULL;
    fclose(fp);
    return buf;
}

struct real {
    uint8_t *buf;
    struct gguf_file g;
    struct llama_model m;
};

static void real_load(struct real *R, const char *dir, const char *file)
{
    char path[4200], err[512];
    size_t size;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    R->buf = read_file(path, &size);
    ck_assert_msg(gguf_open(&R->g, R->buf, size, err, sizeof err) == 0, "%s: %s", file, err);
    ck_assert_msg(llama_import(&R->m, &R->g, err, sizeof err) == 0, "%s: %s", file, err);
}

static void real_free(struct real *R)
{
    llama_model_free(&R->m);
    gguf_close(&R->g);
    free(R->buf);
}

static void check_stories_hp(const struct nib_hparams *hp)
{
    ck_assert_uint_eq(hp->dim, 64);
    ck_assert_uint_eq(hp->n_layers, 5);
    ck_assert_uint_eq(hp->n_heads, 8);
    ck_assert_uint_eq(hp->n_kv_heads, 4);
    ck_assert_uint_eq(hp->head_dim, 8);
    ck_assert_uint_eq(hp->ffn_dim, 172);
    ck_assert_uint_eq(hp->vocab_size, 512);
    ck_assert_uint_eq(hp->ctx_len, 2048);
    ck_assert_uint_eq(hp->rope_dim, 8);
    ck_assert(hp->rope_theta == 10000.0f);
    ck_assert(hp->norm_eps == 1e-5f);
    ck_assert_uint_eq(hp->bos_id, 1);
    ck_assert_uint_eq(hp->eos_id, 2);
    ck_assert_uint_eq(hp->add_bos, 1);
}

START_TEST(test_real_models)
{
    char dir[4096];
    if (!models_dir(dir, sizeof dir)) {
        fprintf(stderr, "SKIP: ../shared/models not found, real-model checks not run\n");
        return;
    }
    struct real f32, q4, q8;
    float a[512], b[512];

    /* stories260K F32: the published shapes; output.weight is a copy of
     * token_embd; the weights equal the llama2.c checkpoint's floats. */
    real_load(&f32, dir, "stories260K.gguf");
    check_stories_hp(&f32.m.hp);
    ck_assert_int_eq(f32.m.output_tied, 0);
    ck_assert(piece_is(&f32.m.tok, 0, "<unk>"));
    ck_assert(piece_is(&f32.m.tok, 3, "<0x00>"));
    ck_assert_uint_eq(f32.m.tok.tokens[3].type, NIB_TOK_BYTE);
    ck_assert_uint_eq(f32.m.tok.tokens[1].type, NIB_TOK_CONTROL);
    for (uint32_t r = 0; r < 512; r++) {
        ck_assert_int_eq(llama_weight_row_f32(&f32.m.tok_embd, r, a), 0);
        ck_assert_int_eq(llama_weight_row_f32(&f32.m.output, r, b), 0);
        ck_assert(!memcmp(a, b, 64 * sizeof(float)));
    }
    char path[4200];
    size_t bsize;
    snprintf(path, sizeof path, "%s/stories260K.bin", dir);
    uint8_t *bin = read_file(path, &bsize);
    ck_assert_uint_eq(bsize, 1056540);
    /* llama2.c: 7 x int32 header, token_embedding[512][64], rms_att[5][64], wq[5][64][64] */
    const uint8_t *emb = bin + 28, *wq = bin + 28 + 4 * (512 * 64 + 5 * 64);
    for (uint32_t r = 0; r < 512; r++) {
        llama_weight_row_f32(&f32.m.tok_embd, r, a);
        ck_assert(!memcmp(a, emb + 4 * 64 * r, 64 * sizeof(float)));
    }
    for (uint32_t r = 0; r < 64; r++) {
        llama_weight_row_f32(&f32.m.layers[0].wq, r, a);
        ck_assert(!memcmp(a, wq + 4 * 64 * r, 64 * sizeof(float)));
    }
    free(bin);

    /* Q4_0 version: same shapes; Q4_0 within one step of F32, ffn_down F16 */
    real_load(&q4, dir, "stories260K-q4_0.gguf");
    check_stories_hp(&q4.m.hp);
    ck_assert_uint_eq(q4.m.tok_embd.t->type, GGML_TYPE_Q4_0);
    ck_assert_uint_eq(q4.m.layers[0].w_down.t->type, GGML_TYPE_F16);
    for (uint32_t l = 0; l < 5; l++) {
        const struct llama_weight *wa = &f32.m.layers[l].wq, *wb = &q4.m.layers[l].wq;
        for (uint32_t r = 0; r < wa->rows; r++) {
            llama_weight_row_f32(wa, r, a);
            llama_weight_row_f32(wb, r, b);
            for (uint32_t blk = 0; blk < wa->cols / 32; blk++) {
                float amax = 0;
                for (int j = 0; j < 32; j++)
                    amax = fmaxf(amax, fabsf(a[blk * 32 + j]));
                for (int j = 0; j < 32; j++) /* one step d = amax / 8 (the clamped end), d in f16 */
                    ck_assert_msg(fabsf(a[blk * 32 + j] - b[blk * 32 + j]) <=
                                      amax / 8 * 1.01f + 1e-6f,
                                  "blk.%u.attn_q[%u][%u]: %g vs %g", l, r, blk * 32 + j,
                                  a[blk * 32 + j], b[blk * 32 + j]);
            }
        }
        wa = &f32.m.layers[l].w_down, wb = &q4.m.layers[l].w_down;
        for (uint32_t r = 0; r < wa->rows; r++) {
            llama_weight_row_f32(wa, r, a);
            llama_weight_row_f32(wb, r, b);
            for (uint32_t c = 0; c < wa->cols; c++)
                ck_assert(fabsf(a[c] - b[c]) <= fabsf(a[c]) * 0x1p-11f + 0x1p-25f);
        }
    }
    real_free(&q4);
    real_free(&f32);

    /* TinyStories-656K Q8_0: tied output */
    real_load(&q8, dir, "TinyStories-656K-Q8_0.gguf");
    const struct nib_hparams *hp = &q8.m.hp;
    ck_assert_uint_eq(hp->dim, 128);
    ck_assert_uint_eq(hp->n_layers, 2);
    ck_assert_uint_eq(hp->n_heads, 8);
    ck_assert_uint_eq(hp->n_kv_heads, 4);
    ck_assert_uint_eq(hp->head_dim, 16);
    ck_assert_uint_eq(hp->ffn_dim, 384);
    ck_assert_uint_eq(hp->vocab_size, 2048);
    ck_assert_uint_eq(hp->ctx_len, 512);
    ck_assert_uint_eq(hp->rope_dim, 16);
    ck_assert(hp->norm_eps == 1e-6f);
    ck_assert(hp->rope_theta == 10000.0f);
    ck_assert_uint_eq(hp->bos_id, 1);
    ck_assert_uint_eq(hp->eos_id, 2);
    ck_assert_uint_eq(hp->add_bos, 1);
    ck_assert_int_eq(q8.m.output_tied, 1);
    ck_assert_ptr_eq(q8.m.output.t, q8.m.tok_embd.t);
    ck_assert_uint_eq(q8.m.tok_embd.t->type, GGML_TYPE_Q8_0);
    ck_assert(piece_is(&q8.m.tok, 1, "<|start_story|>"));
    ck_assert_uint_eq(q8.m.tok.tokens[1].type, NIB_TOK_CONTROL);
    ck_assert(q8.m.tok.tokens[100].score == -1000.0f);
    for (uint32_t r = 0; r < 2048; r++) { /* every row decodes, finite */
        ck_assert_int_eq(llama_weight_row_f32(&q8.m.tok_embd, r, a), 0);
        for (int c = 0; c < 128; c++)
            ck_assert(isfinite(a[c]));
    }
    real_free(&q8);
}
END_TEST

TU_SUITE("llama_import", "import", NULL, NULL, 120, test_import_f32, test_import_half,
         test_import_q8_0, test_import_q4_0, test_q4_1, test_tied_output, test_missing_tensors,
         test_wrong_shapes, test_unsupported, test_missing_metadata, test_metadata_types,
         test_defaults, test_sanity_checks, test_vocab_checks, test_extra_tensors_ignored,
         test_arch_llama, test_arch_qwen2, test_arch_qwen3, test_arch_phi3, test_arch_gemma2,
         test_arch_refusals, test_real_models)
