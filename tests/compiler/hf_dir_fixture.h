/* Test fixture: tiny Hugging Face model directories written by the tests
 * (config.json, model.safetensors or shards with an index, tokenizer.json),
 * and a float64 forward pass over a directory's safetensors written from
 * the transformers definitions (rotate-half RoPE on the weights as stored,
 * Gemma's (1 + w) norms, soft-capping, sliding windows), independent of
 * nibble's importer views. Header-only: static functions. */
#ifndef NIB_TEST_HF_DIR_FIXTURE_H
#define NIB_TEST_HF_DIR_FIXTURE_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/compiler/gguf.h"
#include "tools/compiler/safetensors.h"

enum { HD_F32 = 0, HD_F16 = 1, HD_BF16 = 2 };

/* The shape of a tiny model. */
struct hd_params {
    const char *model_type;
    uint32_t dim, n_layers, n_heads, n_kv_heads, head_dim, ffn, vocab, n_tok, ctx;
    float eps, theta;
    float partial; /* partial_rotary_factor (0: not written) */
    int tie;       /* 1: no lm_head (tie_word_embeddings true); 0: lm_head */
    int bias;      /* q/k/v_proj biases */
    int qk_norm, fused, gemma;
    uint32_t window;   /* sliding_window written (0: not written) */
    int dtype;         /* HD_* of the matrices */
    const char *extra; /* more config.json members, e.g. "\"rope_scaling\": {...}" */
};

static inline void hd_default(struct hd_params *p, const char *model_type)
{
    memset(p, 0, sizeof *p);
    p->model_type = model_type;
    p->dim = 32, p->n_layers = 2, p->n_heads = 4, p->n_kv_heads = 2, p->head_dim = 8;
    p->ffn = 64, p->vocab = 64, p->n_tok = 60, p->ctx = 64;
    p->eps = 1e-5f, p->theta = 10000.0f, p->tie = 1;
    if (!strcmp(model_type, "qwen2"))
        p->bias = 1;
    if (!strcmp(model_type, "qwen3"))
        p->qk_norm = 1, p->head_dim = 16, p->tie = 0; /* Q is wider than dim */
    if (!strcmp(model_type, "phi3"))
        p->fused = 1, p->n_kv_heads = 4, p->partial = 0.5f, p->tie = 0;
    if (!strcmp(model_type, "gemma2"))
        p->gemma = 1, p->n_heads = 2, p->n_kv_heads = 1, p->head_dim = 16, p->window = 4,
        p->n_layers = 3;
}

/* One tensor as the test holds it: exact values k/64 (representable in
 * F32, F16 and BF16 alike). */
struct hd_tensor {
    char name[96];
    int dtype;
    uint32_t nd;
    uint64_t shape[4]; /* row-major */
    uint64_t n;
    float *v;
    int shard; /* which file it goes to (sharded writes) */
};

struct hd_model {
    struct hd_params p;
    struct hd_tensor t[160];
    uint32_t n;
    uint64_t seed;
};

static inline float hd_rand(struct hd_model *m, int around_one)
{
    m->seed = m->seed * 6364136223846793005ull + 1442695040888963407ull;
    int k = (int)((m->seed >> 33) % 41) - 20; /* -20..20 */
    return (around_one ? 1.0f : 0.0f) + (float)k / 64.0f;
}

static inline struct hd_tensor *hd_add(struct hd_model *m, const char *name, int dtype,
                                       uint64_t rows, uint64_t cols, int around_one)
{
    ck_assert_uint_lt(m->n, sizeof m->t / sizeof m->t[0]);
    struct hd_tensor *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->nd = rows ? 2 : 1;
    t->shape[0] = rows ? rows : cols;
    t->shape[1] = cols;
    t->n = (rows ? rows : 1) * cols;
    t->v = malloc(t->n * sizeof *t->v);
    for (uint64_t i = 0; i < t->n; i++)
        t->v[i] = hd_rand(m, around_one);
    return t;
}

static inline struct hd_tensor *hd_find(struct hd_model *m, const char *name)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name))
            return &m->t[i];
    return NULL;
}

static inline void hd_del(struct hd_model *m, const char *name)
{
    struct hd_tensor *t = hd_find(m, name);
    ck_assert_ptr_nonnull(t);
    free(t->v);
    *t = m->t[--m->n];
}

/* Every tensor the model type has, random. */
static inline void hd_init(struct hd_model *m, const struct hd_params *p, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->p = *p;
    m->seed = seed;
    int mt = p->dtype, nt = p->gemma ? HD_F32 : p->dtype; /* Gemma norms near 0 (+1 at use) */
    uint32_t q = p->n_heads * p->head_dim, kv = p->n_kv_heads * p->head_dim;
    char n[96];
    hd_add(m, "model.embed_tokens.weight", mt, p->vocab, p->dim, 0);
    if (!p->tie)
        hd_add(m, "lm_head.weight", mt, p->vocab, p->dim, 0);
    hd_add(m, "model.norm.weight", nt, 0, p->dim, !p->gemma);
    for (uint32_t l = 0; l < p->n_layers; l++) {
#define N(part) (snprintf(n, sizeof n, "model.layers.%u.%s", l, part), n)
        hd_add(m, N("input_layernorm.weight"), nt, 0, p->dim, !p->gemma);
        hd_add(m, N("post_attention_layernorm.weight"), nt, 0, p->dim, !p->gemma);
        if (p->gemma) {
            hd_add(m, N("pre_feedforward_layernorm.weight"), nt, 0, p->dim, 0);
            hd_add(m, N("post_feedforward_layernorm.weight"), nt, 0, p->dim, 0);
        }
        if (p->fused) {
            hd_add(m, N("self_attn.qkv_proj.weight"), mt, q + 2 * kv, p->dim, 0);
            hd_add(m, N("mlp.gate_up_proj.weight"), mt, 2 * p->ffn, p->dim, 0);
        } else {
            hd_add(m, N("self_attn.q_proj.weight"), mt, q, p->dim, 0);
            hd_add(m, N("self_attn.k_proj.weight"), mt, kv, p->dim, 0);
            hd_add(m, N("self_attn.v_proj.weight"), mt, kv, p->dim, 0);
            hd_add(m, N("mlp.gate_proj.weight"), mt, p->ffn, p->dim, 0);
            hd_add(m, N("mlp.up_proj.weight"), mt, p->ffn, p->dim, 0);
        }
        if (p->bias) {
            hd_add(m, N("self_attn.q_proj.bias"), HD_F32, 0, q, 0);
            hd_add(m, N("self_attn.k_proj.bias"), HD_F32, 0, kv, 0);
            hd_add(m, N("self_attn.v_proj.bias"), HD_F32, 0, kv, 0);
        }
        if (p->qk_norm) {
            hd_add(m, N("self_attn.q_norm.weight"), nt, 0, p->head_dim, 1);
            hd_add(m, N("self_attn.k_norm.weight"), nt, 0, p->head_dim, 1);
        }
        hd_add(m, N("self_attn.o_proj.weight"), mt, p->dim, q, 0);
        hd_add(m, N("mlp.down_proj.weight"), mt, p->dim, p->ffn, 0);
#undef N
    }
}

static inline void hd_free(struct hd_model *m)
{
    for (uint32_t i = 0; i < m->n; i++)
        free(m->t[i].v);
    m->n = 0;
}

static inline uint16_t hd_f16_bits(float f)
{
    /* exact for the k/64 values and 1 + k/64 the fixture uses */
    if (f == 0)
        return 0;
    uint16_t s = f < 0 ? 0x8000 : 0;
    double a = fabs((double)f);
    int e = 0;
    double m = frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
    int exp = e - 1 + 15;
    uint32_t mant = (uint32_t)llround((m * 2 - 1) * 1024);
    ck_assert(exp > 0 && exp < 31);
    ck_assert_msg(fabs(ldexp(1 + mant / 1024.0, e - 1) - a) == 0, "%g is not an exact f16", a);
    return (uint16_t)(s | exp << 10 | mant);
}

static inline void hd_put_value(FILE *fp, int dtype, float v)
{
    uint8_t b[4];
    if (dtype == HD_F32) {
        memcpy(b, &v, 4);
        fwrite(b, 1, 4, fp);
    } else {
        uint32_t u;
        memcpy(&u, &v, 4);
        uint16_t h = dtype == HD_BF16 ? (uint16_t)(u >> 16) : hd_f16_bits(v);
        ck_assert(dtype != HD_BF16 || (u & 0xffff) == 0);
        b[0] = (uint8_t)h, b[1] = (uint8_t)(h >> 8);
        fwrite(b, 1, 2, fp);
    }
}

static const char *const hd_dtype_name[] = {"F32", "F16", "BF16"};

/* Write the tensors of shard `shard` (-1: all) as a safetensors file. */
static inline void hd_write_st(const struct hd_model *m, const char *path, int shard)
{
    char *h = malloc(1 << 16);
    size_t at = (size_t)snprintf(h, 1 << 16, "{\"__metadata__\": {\"format\": \"pt\"}");
    uint64_t off = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        const struct hd_tensor *t = &m->t[i];
        if (shard >= 0 && t->shard != shard)
            continue;
        uint64_t bytes = t->n * (t->dtype == HD_F32 ? 4 : 2);
        if (t->nd == 2)
            at += (size_t)snprintf(h + at, (1 << 16) - at,
                                   ", \"%s\": {\"dtype\": \"%s\", \"shape\": [%llu, %llu], "
                                   "\"data_offsets\": [%llu, %llu]}",
                                   t->name, hd_dtype_name[t->dtype],
                                   (unsigned long long)t->shape[0], (unsigned long long)t->shape[1],
                                   (unsigned long long)off, (unsigned long long)(off + bytes));
        else
            at +=
                (size_t)snprintf(h + at, (1 << 16) - at,
                                 ", \"%s\": {\"dtype\": \"%s\", \"shape\": [%llu], "
                                 "\"data_offsets\": [%llu, %llu]}",
                                 t->name, hd_dtype_name[t->dtype], (unsigned long long)t->shape[0],
                                 (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    at += (size_t)snprintf(h + at, (1 << 16) - at, "}");
    while (at % 8) /* the reference writer pads the header with spaces */
        h[at++] = ' ';
    FILE *fp = fopen(path, "wb");
    ck_assert_msg(fp != NULL, "cannot write %s", path);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)at >> (8 * i));
    fwrite(len, 1, 8, fp);
    fwrite(h, 1, at, fp);
    for (uint32_t i = 0; i < m->n; i++) {
        const struct hd_tensor *t = &m->t[i];
        if (shard >= 0 && t->shard != shard)
            continue;
        for (uint64_t k = 0; k < t->n; k++)
            hd_put_value(fp, t->dtype, t->v[k]);
    }
    fclose(fp);
    free(h);
}

static inline void hd_write_text(const char *dir, const char *file, const char *text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *fp = fopen(path, "wb");
    ck_assert_msg(fp != NULL, "cannot write %s", path);
    fputs(text, fp);
    fclose(fp);
}

static inline void hd_write_config(const struct hd_model *m, const char *dir)
{
    const struct hd_params *p = &m->p;
    char c[4096];
    size_t at = (size_t)snprintf(
        c, sizeof c,
        "{\"architectures\": [\"X\"], \"model_type\": \"%s\", \"hidden_size\": %u,\n"
        " \"num_hidden_layers\": %u, \"num_attention_heads\": %u, \"num_key_value_heads\": %u,\n"
        " \"head_dim\": %u, \"intermediate_size\": %u, \"vocab_size\": %u,\n"
        " \"max_position_embeddings\": %u, \"rms_norm_eps\": %.9g, \"rope_theta\": %.9g,\n"
        " \"tie_word_embeddings\": %s, \"torch_dtype\": \"float32\"",
        p->model_type, p->dim, p->n_layers, p->n_heads, p->n_kv_heads, p->head_dim, p->ffn,
        p->vocab, p->ctx, (double)p->eps, (double)p->theta, p->tie ? "true" : "false");
    if (p->partial > 0)
        at += (size_t)snprintf(c + at, sizeof c - at, ", \"partial_rotary_factor\": %g",
                               (double)p->partial);
    if (p->window)
        at += (size_t)snprintf(c + at, sizeof c - at, ", \"sliding_window\": %u", p->window);
    if (p->gemma)
        at += (size_t)snprintf(c + at, sizeof c - at,
                               ", \"query_pre_attn_scalar\": 16, \"attn_logit_softcapping\": 2.5,"
                               " \"final_logit_softcapping\": 3.0, \"hidden_activation\": "
                               "\"gelu_pytorch_tanh\"");
    if (p->extra)
        at += (size_t)snprintf(c + at, sizeof c - at, ", %s", p->extra);
    snprintf(c + at, sizeof c - at, "}\n");
    hd_write_text(dir, "config.json", c);
}

/* A BPE tokenizer.json of n tokens: <unk> <s> </s>, then one character
 * each; BOS added by the template. */
static inline void hd_write_tokenizer(const char *dir, uint32_t n)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    ck_assert_uint_le(n, 3 + sizeof chars - 1);
    char t[8192];
    size_t at = (size_t)snprintf(
        t, sizeof t,
        "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": ["
        "{\"id\": 0, \"content\": \"<unk>\", \"single_word\": false, \"lstrip\": false, "
        "\"rstrip\": false, \"normalized\": false, \"special\": true},"
        "{\"id\": 1, \"content\": \"<s>\", \"single_word\": false, \"lstrip\": false, "
        "\"rstrip\": false, \"normalized\": false, \"special\": true},"
        "{\"id\": 2, \"content\": \"</s>\", \"single_word\": false, \"lstrip\": false, "
        "\"rstrip\": false, \"normalized\": false, \"special\": true}],"
        " \"normalizer\": null, \"pre_tokenizer\": null,"
        " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": "
        "{\"id\": \"<s>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}]},"
        " \"decoder\": null, \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": "
        "\"<unk>\", \"fuse_unk\": true, \"byte_fallback\": false, \"vocab\": {\"<unk>\": 0, "
        "\"<s>\": 1, \"</s>\": 2");
    for (uint32_t i = 3; i < n; i++)
        at += (size_t)snprintf(t + at, sizeof t - at, ", \"%c\": %u", chars[i - 3], i);
    snprintf(t + at, sizeof t - at, "}, \"merges\": []}}\n");
    hd_write_text(dir, "tokenizer.json", t);
    hd_write_text(dir, "tokenizer_config.json",
                  "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_bos_token\": true}\n");
    hd_write_text(dir, "generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": 2}\n");
}

/* A fresh directory under the build tree (or /tmp). */
static inline void hd_mkdir(char *out, size_t n, const char *name)
{
    const char *base = getenv("MESON_BUILD_ROOT");
    snprintf(out, n, "%s/hf-test-%d-%s", base && *base ? base : "/tmp", (int)getpid(), name);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(mkdir(out, 0755), 0);
}

static inline void hd_rmdir(const char *dir)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The whole directory: config, one model.safetensors, tokenizer. */
static inline void hd_write_dir(const struct hd_model *m, const char *dir)
{
    char path[4200];
    hd_write_config(m, dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    hd_write_st(m, path, -1);
    hd_write_tokenizer(dir, m->p.n_tok);
}

/* ---- the float64 reference ---- */

/* What the reference needs beyond config.json's shape. */
struct ref_cfg {
    uint32_t dim, n_layers, n_heads, n_kv_heads, head_dim, ffn, vocab, rope_dim;
    double eps, theta;
    int tied, bias, qk_norm, fused, gemma;
    double attn_scale, attn_softcap, final_softcap;
    uint32_t window;           /* gemma2: on even layers; else on every layer when set */
    const float *freq_factors; /* llama3 divisors, or NULL */
};

struct ref64 {
    struct ref_cfg c;
    struct st_file st;
    uint8_t *buf;
    uint32_t ctx;
    double *kc, *vc; /* [layer][pos][kv_dim] */
};

static inline double ref_elem(const struct gguf_tensor *t, uint64_t i)
{
    const uint8_t *p = t->data + i * (t->type == GGML_TYPE_F32 ? 4 : 2);
    if (t->type == GGML_TYPE_F32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return t->type == GGML_TYPE_F16 ? gguf_f16_to_f32(h) : gguf_bf16_to_f32(h);
}

static inline const struct gguf_tensor *ref_t(struct ref64 *r, const char *fmt, uint32_t l)
{
    char n[128];
    snprintf(n, sizeof n, fmt, l);
    const struct gguf_tensor *t = st_find(&r->st, n);
    ck_assert_msg(t != NULL, "reference: no tensor %s", n);
    return t;
}

/* y[rows] = W[row0 .. row0 + rows) x (+ bias) */
static inline void ref_mv(const struct gguf_tensor *w, uint32_t row0, uint32_t rows,
                          const double *x, double *y)
{
    uint64_t cols = w->ne[0];
    for (uint32_t r = 0; r < rows; r++) {
        double s = 0;
        for (uint64_t k = 0; k < cols; k++)
            s += ref_elem(w, (uint64_t)(row0 + r) * cols + k) * x[k];
        y[r] = s;
    }
}

static inline void ref_norm(const double *x, const struct gguf_tensor *w, uint32_t n, double eps,
                            int plus_one, double *y)
{
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++)
        y[i] = x[i] * s * (ref_elem(w, i) + (plus_one ? 1.0 : 0.0));
}

/* Rotate-half RoPE of one head (as stored by Hugging Face). */
static inline void ref_rope(const struct ref_cfg *c, double *h, uint32_t pos)
{
    uint32_t half = c->rope_dim / 2;
    for (uint32_t i = 0; i < half; i++) {
        double inv = pow(c->theta, -(double)(2 * i) / c->rope_dim);
        if (c->freq_factors)
            inv /= c->freq_factors[i];
        double a = pos * inv, co = cos(a), si = sin(a);
        double x0 = h[i], x1 = h[i + half];
        h[i] = x0 * co - x1 * si;
        h[i + half] = x1 * co + x0 * si;
    }
}

static inline int ref_open(struct ref64 *r, const struct ref_cfg *c, const char *dir, uint32_t ctx)
{
    memset(r, 0, sizeof *r);
    r->c = *c;
    r->ctx = ctx;
    char path[4400], err[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    r->buf = malloc((size_t)n);
    ck_assert_uint_eq(fread(r->buf, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    ck_assert_msg(st_open(&r->st, r->buf, (size_t)n, err, sizeof err) == 0, "%s", err);
    size_t kvn = (size_t)c->n_layers * ctx * c->n_kv_heads * c->head_dim;
    r->kc = calloc(kvn, sizeof(double));
    r->vc = calloc(kvn, sizeof(double));
    return 0;
}

static inline void ref_close(struct ref64 *r)
{
    st_close(&r->st);
    free(r->buf);
    free(r->kc);
    free(r->vc);
}

static inline double ref_gelu_tanh(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* Logits (vocab doubles) of token at pos; earlier positions already run. */
static inline void ref_step(struct ref64 *r, uint32_t token, uint32_t pos, double *logits)
{
    const struct ref_cfg *c = &r->c;
    uint32_t D = c->dim, hd = c->head_dim, q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    double *x = calloc(D, sizeof *x), *h = calloc(D, sizeof *h), *q = calloc(q_dim, sizeof *q),
           *k = calloc(kv_dim, sizeof *k), *v = calloc(kv_dim, sizeof *v),
           *att = calloc(q_dim, sizeof *att), *o = calloc(D, sizeof *o),
           *g = calloc(c->ffn, sizeof *g), *u = calloc(c->ffn, sizeof *u),
           *sc = calloc(r->ctx, sizeof *sc);
    const struct gguf_tensor *emb = st_find(&r->st, "model.embed_tokens.weight")
                                        ? ref_t(r, "model.embed_tokens.weight", 0)
                                        : ref_t(r, "lm_head.weight", 0);
    for (uint32_t i = 0; i < D; i++)
        x[i] = ref_elem(emb, (uint64_t)token * D + i) * (c->gemma ? (double)(float)sqrt(D) : 1.0);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        ref_norm(x, ref_t(r, "model.layers.%u.input_layernorm.weight", l), D, c->eps, c->gemma, h);
        if (c->fused) {
            const struct gguf_tensor *w = ref_t(r, "model.layers.%u.self_attn.qkv_proj.weight", l);
            ref_mv(w, 0, q_dim, h, q);
            ref_mv(w, q_dim, kv_dim, h, k);
            ref_mv(w, q_dim + kv_dim, kv_dim, h, v);
        } else {
            ref_mv(ref_t(r, "model.layers.%u.self_attn.q_proj.weight", l), 0, q_dim, h, q);
            ref_mv(ref_t(r, "model.layers.%u.self_attn.k_proj.weight", l), 0, kv_dim, h, k);
            ref_mv(ref_t(r, "model.layers.%u.self_attn.v_proj.weight", l), 0, kv_dim, h, v);
        }
        if (c->bias) {
            const struct gguf_tensor *bq = ref_t(r, "model.layers.%u.self_attn.q_proj.bias", l),
                                     *bk = ref_t(r, "model.layers.%u.self_attn.k_proj.bias", l),
                                     *bv = ref_t(r, "model.layers.%u.self_attn.v_proj.bias", l);
            for (uint32_t i = 0; i < q_dim; i++)
                q[i] += ref_elem(bq, i);
            for (uint32_t i = 0; i < kv_dim; i++)
                k[i] += ref_elem(bk, i), v[i] += ref_elem(bv, i);
        }
        for (uint32_t hh = 0; hh < c->n_heads; hh++) {
            if (c->qk_norm)
                ref_norm(q + hh * hd, ref_t(r, "model.layers.%u.self_attn.q_norm.weight", l), hd,
                         c->eps, 0, q + hh * hd);
            ref_rope(c, q + hh * hd, pos);
        }
        for (uint32_t hh = 0; hh < c->n_kv_heads; hh++) {
            if (c->qk_norm)
                ref_norm(k + hh * hd, ref_t(r, "model.layers.%u.self_attn.k_norm.weight", l), hd,
                         c->eps, 0, k + hh * hd);
            ref_rope(c, k + hh * hd, pos);
        }
        double *kc = r->kc + ((size_t)l * r->ctx) * kv_dim,
               *vc = r->vc + ((size_t)l * r->ctx) * kv_dim;
        memcpy(kc + (size_t)pos * kv_dim, k, kv_dim * sizeof *k);
        memcpy(vc + (size_t)pos * kv_dim, v, kv_dim * sizeof *v);
        uint32_t win = c->gemma ? (l % 2 == 0 ? c->window : 0) : c->window;
        uint32_t t0 = win && pos + 1 > win ? pos + 1 - win : 0;
        for (uint32_t hh = 0; hh < c->n_heads; hh++) {
            uint32_t kh = hh / (c->n_heads / c->n_kv_heads);
            double mx = -INFINITY, sum = 0;
            for (uint32_t t = t0; t <= pos; t++) {
                double s = 0;
                for (uint32_t i = 0; i < hd; i++)
                    s += q[hh * hd + i] * kc[(size_t)t * kv_dim + kh * hd + i];
                s *= c->attn_scale;
                if (c->attn_softcap > 0)
                    s = c->attn_softcap * tanh(s / c->attn_softcap);
                sc[t] = s;
                mx = s > mx ? s : mx;
            }
            for (uint32_t t = t0; t <= pos; t++)
                sum += (sc[t] = exp(sc[t] - mx));
            for (uint32_t i = 0; i < hd; i++) {
                double a = 0;
                for (uint32_t t = t0; t <= pos; t++)
                    a += sc[t] / sum * vc[(size_t)t * kv_dim + kh * hd + i];
                att[hh * hd + i] = a;
            }
        }
        ref_mv(ref_t(r, "model.layers.%u.self_attn.o_proj.weight", l), 0, D, att, o);
        if (c->gemma)
            ref_norm(o, ref_t(r, "model.layers.%u.post_attention_layernorm.weight", l), D, c->eps,
                     1, o);
        for (uint32_t i = 0; i < D; i++)
            x[i] += o[i];
        ref_norm(x,
                 ref_t(r,
                       c->gemma ? "model.layers.%u.pre_feedforward_layernorm.weight"
                                : "model.layers.%u.post_attention_layernorm.weight",
                       l),
                 D, c->eps, c->gemma, h);
        if (c->fused) {
            const struct gguf_tensor *w = ref_t(r, "model.layers.%u.mlp.gate_up_proj.weight", l);
            ref_mv(w, 0, c->ffn, h, g);
            ref_mv(w, c->ffn, c->ffn, h, u);
        } else {
            ref_mv(ref_t(r, "model.layers.%u.mlp.gate_proj.weight", l), 0, c->ffn, h, g);
            ref_mv(ref_t(r, "model.layers.%u.mlp.up_proj.weight", l), 0, c->ffn, h, u);
        }
        for (uint32_t i = 0; i < c->ffn; i++)
            g[i] = (c->gemma ? ref_gelu_tanh(g[i]) : g[i] / (1.0 + exp(-g[i]))) * u[i];
        ref_mv(ref_t(r, "model.layers.%u.mlp.down_proj.weight", l), 0, D, g, o);
        if (c->gemma)
            ref_norm(o, ref_t(r, "model.layers.%u.post_feedforward_layernorm.weight", l), D, c->eps,
                     1, o);
        for (uint32_t i = 0; i < D; i++)
            x[i] += o[i];
    }
    ref_norm(x, ref_t(r, "model.norm.weight", 0), D, c->eps, c->gemma, h);
    const struct gguf_tensor *head = c->tied ? emb : ref_t(r, "lm_head.weight", 0);
    ref_mv(head, 0, c->vocab, h, logits);
    if (c->final_softcap > 0)
        for (uint32_t i = 0; i < c->vocab; i++)
            logits[i] = c->final_softcap * tanh(logits[i] / c->final_softcap);
    free(x), free(h), free(q), free(k), free(v), free(att), free(o), free(g), free(u), free(sc);
}

/* The reference configuration of a fixture model. */
static inline struct ref_cfg hd_ref_cfg(const struct hd_params *p)
{
    struct ref_cfg c = {
        .dim = p->dim,
        .n_layers = p->n_layers,
        .n_heads = p->n_heads,
        .n_kv_heads = p->n_kv_heads,
        .head_dim = p->head_dim,
        .ffn = p->ffn,
        .vocab = p->vocab,
        .rope_dim = p->partial > 0 ? (uint32_t)(p->head_dim * p->partial) : p->head_dim,
        .eps = p->eps,
        .theta = p->theta,
        .tied = p->tie,
        .bias = p->bias,
        .qk_norm = p->qk_norm,
        .fused = p->fused,
        .gemma = p->gemma,
        .attn_scale = 1.0 / sqrt(p->head_dim),
        .window = p->window,
    };
    if (p->gemma) {
        c.attn_scale = 1.0 / sqrt(16.0); /* query_pre_attn_scalar 16 */
        c.attn_softcap = 2.5;
        c.final_softcap = 3.0;
    }
    if (p->window >= p->ctx)
        c.window = 0;
    return c;
}

#endif
