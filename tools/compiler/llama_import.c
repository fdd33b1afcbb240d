/* LLaMA importer: reads hyper-parameters, vocabulary and weight tensors out
 * of an already validated GGUF and checks that they describe one coherent
 * LLaMA model. gguf_open guaranteed every byte we touch lies in the file;
 * this file checks meaning: required keys, types, shapes and limits. */
#include "tools/compiler/llama_import.h"
#include "tools/compiler/gguf_meta.h"
#include "tools/compiler/gguf_tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int opt_f32(struct gguf_meta *im, const char *key, float *out, float dflt, int required)
{
    int rc = gguf_get_f32(im->g, key, out);
    if (rc == -1 && !required) {
        *out = dflt;
        return 0;
    }
    return rc ? gguf_meta_bad(im, key, rc, "float") : 0;
}

/* ---- hyper-parameters ---- */

/* A string key that must hold `want`, the one value nibble reads. */
static int need_str_is(struct gguf_meta *im, const char *key, const char *want, const char *what)
{
    struct gguf_str v;
    char s[72];
    if (gguf_meta_need_str(im, key, &v))
        return -1;
    if (!gguf_str_eq(v, want))
        return gguf_meta_fail(im, "unsupported %s '%s' (nibble reads '%s')", what,
                              gguf_str_show(v, s), want);
    return 0;
}

static int check_arch(struct gguf_meta *im)
{
    if (need_str_is(im, "general.architecture", "llama", "architecture"))
        return -1;
    uint32_t experts = 0;
    if (gguf_meta_opt_u32(im, "llama.expert_count", &experts, 0))
        return -1;
    if (experts > 0)
        return gguf_meta_fail(im, "unsupported model: mixture of experts (llama.expert_count = %u)",
                              experts);
    return 0;
}

static int read_hparams(struct gguf_meta *im, struct nib_hparams *hp)
{
    if (gguf_meta_need_u32(im, "llama.embedding_length", &hp->dim) ||
        gguf_meta_need_u32(im, "llama.block_count", &hp->n_layers) ||
        gguf_meta_need_u32(im, "llama.feed_forward_length", &hp->ffn_dim) ||
        gguf_meta_need_u32(im, "llama.attention.head_count", &hp->n_heads) ||
        gguf_meta_opt_u32(im, "llama.attention.head_count_kv", &hp->n_kv_heads, hp->n_heads) ||
        gguf_meta_need_u32(im, "llama.context_length", &hp->ctx_len) ||
        opt_f32(im, "llama.rope.freq_base", &hp->rope_theta, 10000.0f, 0) ||
        opt_f32(im, "llama.attention.layer_norm_rms_epsilon", &hp->norm_eps, 0, 1))
        return -1;
    if (hp->dim == 0 || hp->dim > NIB_MAX_DIM)
        return gguf_meta_fail(im, "llama.embedding_length %u is out of range [1, %u]", hp->dim,
                              NIB_MAX_DIM);
    if (hp->ffn_dim == 0 || hp->ffn_dim > NIB_MAX_DIM)
        return gguf_meta_fail(im, "llama.feed_forward_length %u is out of range [1, %u]",
                              hp->ffn_dim, NIB_MAX_DIM);
    if (hp->n_layers == 0 || hp->n_layers > NIB_MAX_LAYERS)
        return gguf_meta_fail(im, "llama.block_count %u is out of range [1, %u]", hp->n_layers,
                              NIB_MAX_LAYERS);
    if (hp->n_heads == 0 || hp->dim % hp->n_heads)
        return gguf_meta_fail(
            im, "llama.embedding_length %u is not a multiple of llama.attention.head_count %u",
            hp->dim, hp->n_heads);
    if (hp->n_kv_heads == 0 || hp->n_heads % hp->n_kv_heads)
        return gguf_meta_fail(
            im,
            "llama.attention.head_count %u is not a multiple of llama.attention.head_count_kv %u",
            hp->n_heads, hp->n_kv_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    if (hp->head_dim % 2)
        return gguf_meta_fail(im, "head dimension %u is odd (RoPE rotates pairs)", hp->head_dim);
    if (gguf_meta_opt_u32(im, "llama.rope.dimension_count", &hp->rope_dim, hp->head_dim))
        return -1;
    if (hp->rope_dim == 0 || hp->rope_dim % 2 || hp->rope_dim > hp->head_dim)
        return gguf_meta_fail(
            im, "llama.rope.dimension_count %u must be even and in [2, head dimension %u]",
            hp->rope_dim, hp->head_dim);
    if (hp->ctx_len == 0)
        return gguf_meta_fail(im, "llama.context_length is 0");
    if (!(hp->norm_eps > 0) || !isfinite(hp->norm_eps))
        return gguf_meta_fail(
            im, "llama.attention.layer_norm_rms_epsilon %g must be positive and finite",
            hp->norm_eps);
    if (!(hp->rope_theta > 0) || !isfinite(hp->rope_theta))
        return gguf_meta_fail(im, "llama.rope.freq_base %g must be positive and finite",
                              hp->rope_theta);
    return 0;
}

/* ---- vocabulary ---- */

static int read_vocab(struct gguf_meta *im, struct llama_model *m)
{
    if (gguf_tok_load(im->g, &m->tok, im->err, im->errlen))
        return -1;
    struct nib_hparams *hp = &m->hp;
    uint32_t n_vocab_key;
    hp->vocab_size = m->tok.n_vocab;
    if (gguf_meta_opt_u32(im, "llama.vocab_size", &n_vocab_key, hp->vocab_size))
        return -1;
    if (n_vocab_key != hp->vocab_size)
        return gguf_meta_fail(
            im, "llama.vocab_size %u differs from the %u tokens in tokenizer.ggml.tokens",
            n_vocab_key, hp->vocab_size);
    /* hparams keep ids for the header; -1 (none) is stored as 0 with add_bos off. */
    hp->bos_id = m->tok.bos_id >= 0 ? (uint32_t)m->tok.bos_id : 0;
    hp->eos_id = m->tok.eos_id >= 0 ? (uint32_t)m->tok.eos_id : 0;
    hp->add_bos = (uint32_t)m->tok.add_bos;
    return 0;
}

/* ---- tensors ---- */

enum wkind { NORM, MATRIX };

static int dtype_ok(uint32_t type, enum wkind kind)
{
    switch (type) {
    case GGML_TYPE_F32:
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16: return 1;
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_0: return kind == MATRIX;
    default: return 0;
    }
}

static void fmt_shape(char *out, size_t n, const uint64_t *ne, uint32_t nd)
{
    size_t at = (size_t)snprintf(out, n, "[");
    for (uint32_t d = 0; d < nd && at < n; d++)
        at += (size_t)snprintf(out + at, n - at, d ? ", %llu" : "%llu", (unsigned long long)ne[d]);
    if (at < n)
        snprintf(out + at, n - at, "]");
}

/* Find `name`, check it is [cols] (rows == 0) or [cols, rows] and of a dtype
 * this kind of weight may have. Absent + optional leaves w->t NULL. */
static int bind(struct gguf_meta *im, struct llama_weight *w, const char *name, enum wkind kind,
                uint32_t cols, uint32_t rows, int required)
{
    const struct gguf_tensor *t = gguf_find_tensor(im->g, name);
    memset(w, 0, sizeof *w);
    if (!t)
        return required ? gguf_meta_fail(im, "missing tensor '%s'", name) : 0;
    uint64_t want[GGUF_MAX_DIMS] = {cols, rows ? rows : 1, 1, 1};
    if (memcmp(t->ne, want, sizeof want)) {
        char got[128], exp[64];
        fmt_shape(got, sizeof got, t->ne, t->n_dims);
        fmt_shape(exp, sizeof exp, want, rows ? 2 : 1);
        return gguf_meta_fail(im, "tensor '%s' has shape %s, expected %s", name, got, exp);
    }
    if (!dtype_ok(t->type, kind))
        return gguf_meta_fail(im, "tensor '%s' has unsupported dtype %s for this importer (%s)",
                              name, ggml_type_name(t->type),
                              kind == NORM ? "norms must be f32, f16 or bf16"
                                           : "matrices must be f32, f16, bf16, q8_0 or q4_0");
    w->t = t;
    w->cols = cols;
    w->rows = rows ? rows : 1;
    return 0;
}

static int bind_layer(struct gguf_meta *im, const struct nib_hparams *hp, uint32_t l,
                      struct llama_layer *L)
{
    uint32_t q = hp->n_heads * hp->head_dim, kv = hp->n_kv_heads * hp->head_dim;
    const struct {
        struct llama_weight *w;
        const char *part;
        enum wkind kind;
        uint32_t cols, rows;
    } parts[] = {
        {&L->attn_norm, "attn_norm", NORM, hp->dim, 0},
        {&L->wq, "attn_q", MATRIX, hp->dim, q},
        {&L->wk, "attn_k", MATRIX, hp->dim, kv},
        {&L->wv, "attn_v", MATRIX, hp->dim, kv},
        {&L->wo, "attn_output", MATRIX, q, hp->dim},
        {&L->ffn_norm, "ffn_norm", NORM, hp->dim, 0},
        {&L->w_gate, "ffn_gate", MATRIX, hp->dim, hp->ffn_dim},
        {&L->w_up, "ffn_up", MATRIX, hp->dim, hp->ffn_dim},
        {&L->w_down, "ffn_down", MATRIX, hp->ffn_dim, hp->dim},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.%s.weight", l, parts[i].part);
        if (bind(im, parts[i].w, name, parts[i].kind, parts[i].cols, parts[i].rows, 1))
            return -1;
    }
    return 0;
}

static int bind_tensors(struct gguf_meta *im, struct llama_model *m)
{
    const struct nib_hparams *hp = &m->hp;
    if (bind(im, &m->tok_embd, "token_embd.weight", MATRIX, hp->dim, hp->vocab_size, 1) ||
        bind(im, &m->output_norm, "output_norm.weight", NORM, hp->dim, 0, 1) ||
        bind(im, &m->output, "output.weight", MATRIX, hp->dim, hp->vocab_size, 0))
        return -1;
    if (!m->output.t) { /* tied embeddings: the classifier reuses token_embd */
        m->output = m->tok_embd;
        m->output_tied = 1;
    }
    m->layers = calloc(hp->n_layers, sizeof *m->layers);
    if (!m->layers)
        return gguf_meta_fail(im, "out of memory");
    for (uint32_t l = 0; l < hp->n_layers; l++)
        if (bind_layer(im, hp, l, &m->layers[l]))
            return -1;
    return 0;
}

int llama_import(struct llama_model *m, const struct gguf_file *g, char *err, size_t errlen)
{
    struct gguf_meta im;
    gguf_meta_init(&im, g, err, errlen);
    memset(m, 0, sizeof *m);
    if (check_arch(&im) || read_hparams(&im, &m->hp) || read_vocab(&im, m) ||
        bind_tensors(&im, m)) {
        llama_model_free(m);
        return -1;
    }
    return 0;
}

void llama_model_free(struct llama_model *m)
{
    free(m->layers);
    tok_spec_free(&m->tok);
    memset(m, 0, sizeof *m);
}

/* ---- dequantization ---- */

static float f16_at(const uint8_t *p)
{
    return gguf_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static void row_q8_0(const uint8_t *p, uint32_t cols, float *out)
{
    for (uint32_t b = 0; b < cols / 32; b++, p += 34) {
        float d = f16_at(p);
        for (int j = 0; j < 32; j++)
            out[b * 32 + j] = (float)(int8_t)p[2 + j] * d;
    }
}

/* Q4_0 and Q4_1 share the nibble layout: byte j holds element j (low
 * nibble) and element j + 16 (high nibble). Q4_0 is centred on 8. */
static void row_q4_0(const uint8_t *p, uint32_t cols, float *out)
{
    for (uint32_t b = 0; b < cols / 32; b++, p += 18) {
        float d = f16_at(p);
        for (int j = 0; j < 16; j++) {
            out[b * 32 + j] = (float)((p[2 + j] & 15) - 8) * d;
            out[b * 32 + j + 16] = (float)((p[2 + j] >> 4) - 8) * d;
        }
    }
}

/* Q4_1 is asymmetric: x = q * d + m. */
static void row_q4_1(const uint8_t *p, uint32_t cols, float *out)
{
    for (uint32_t b = 0; b < cols / 32; b++, p += 20) {
        float d = f16_at(p), m = f16_at(p + 2);
        for (int j = 0; j < 16; j++) {
            out[b * 32 + j] = (float)(p[4 + j] & 15) * d + m;
            out[b * 32 + j + 16] = (float)(p[4 + j] >> 4) * d + m;
        }
    }
}

int llama_weight_row_f32(const struct llama_weight *w, uint32_t r, float *out)
{
    const struct gguf_tensor *t = w->t;
    if (!t || r >= w->rows)
        return -1;
    uint64_t rb = ggml_type_nbytes(t->type, w->cols);
    if (!rb || (uint64_t)r + 1 > t->nbytes / rb) /* the row must lie inside the tensor */
        return -1;
    const uint8_t *p = t->data + (uint64_t)r * rb;
    switch (t->type) {
    case GGML_TYPE_F32: memcpy(out, p, (size_t)w->cols * 4); return 0; /* little-endian host */
    case GGML_TYPE_F16:
        for (uint32_t i = 0; i < w->cols; i++)
            out[i] = f16_at(p + 2 * i);
        return 0;
    case GGML_TYPE_BF16:
        for (uint32_t i = 0; i < w->cols; i++)
            out[i] = gguf_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    case GGML_TYPE_Q8_0: row_q8_0(p, w->cols, out); return 0;
    case GGML_TYPE_Q4_0: row_q4_0(p, w->cols, out); return 0;
    case GGML_TYPE_Q4_1: row_q4_1(p, w->cols, out); return 0;
    default: return -1;
    }
}
