/* GGUF importer for every architecture nibble runs: reads hyper-parameters,
 * vocabulary and weight tensors out of an already validated GGUF and checks
 * that they describe one coherent model of its general.architecture.
 * gguf_open guaranteed every byte we touch lies in the file; this file
 * checks meaning: required keys, types, shapes and limits, and refuses by
 * name what nibble's forward pass has no place for (a wrong answer is never
 * an option). The per-architecture semantics follow llama.cpp's reading of
 * the same files (src/models/<arch>.cpp, llama_model_rope_type). */
#include "tools/compiler/llama_import.h"
#include "tools/compiler/gguf_meta.h"
#include "tools/compiler/gguf_tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- architectures ---- */

enum {
    A_LLAMA = 1u << LLAMA_ARCH_LLAMA,
    A_QWEN2 = 1u << LLAMA_ARCH_QWEN2,
    A_QWEN3 = 1u << LLAMA_ARCH_QWEN3,
    A_PHI3 = 1u << LLAMA_ARCH_PHI3,
    A_GEMMA2 = 1u << LLAMA_ARCH_GEMMA2,
    A_ALL = A_LLAMA | A_QWEN2 | A_QWEN3 | A_PHI3 | A_GEMMA2
};

static const struct arch_info {
    uint32_t arch;
    const char *name;
    int neox; /* rotate-half RoPE (llama.cpp LLAMA_ROPE_TYPE_NEOX) */
} archs[] = {
    {LLAMA_ARCH_LLAMA, "llama", 0},   {LLAMA_ARCH_QWEN2, "qwen2", 1},
    {LLAMA_ARCH_QWEN3, "qwen3", 1},   {LLAMA_ARCH_PHI3, "phi3", 1},
    {LLAMA_ARCH_GEMMA2, "gemma2", 1},
};

#define SUPPORTED_ARCHS                                                                            \
    "llama (Llama 1-3.x, Mistral, SmolLM2, TinyLlama), qwen2, qwen3, phi3, gemma2"

const char *llama_arch_name(uint32_t arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (archs[i].arch == arch)
            return archs[i].name;
    return "?";
}

/* One import: the metadata reader, the architecture, and room for the
 * "<arch>.<suffix>" key names (a few live at once inside one message). */
struct imp {
    struct gguf_meta im;
    const struct arch_info *a;
    char keys[4][96];
    unsigned next;
};

static const char *K(struct imp *x, const char *suffix)
{
    char *b = x->keys[x->next++ % 4];
    snprintf(b, sizeof x->keys[0], "%s.%s", x->a->name, suffix);
    return b;
}

static int has_key(struct imp *x, const char *key)
{
    return gguf_find_kv(x->im.g, key) != NULL;
}

static int opt_f32(struct gguf_meta *im, const char *key, float *out, float dflt, int required)
{
    int rc = gguf_get_f32(im->g, key, out);
    if (rc == -1 && !required) {
        *out = dflt;
        return 0;
    }
    return rc ? gguf_meta_bad(im, key, rc, "float") : 0;
}

static int check_arch(struct imp *x)
{
    struct gguf_str v;
    char s[72];
    if (gguf_meta_need_str(&x->im, "general.architecture", &v))
        return -1;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (gguf_str_eq(v, archs[i].name))
            x->a = &archs[i];
    if (!x->a)
        return gguf_meta_fail(&x->im,
                              "unsupported architecture '%s' (nibble reads " SUPPORTED_ARCHS ")",
                              gguf_str_show(v, s));
    uint32_t experts = 0;
    if (gguf_meta_opt_u32(&x->im, K(x, "expert_count"), &experts, 0))
        return -1;
    if (experts > 0)
        return gguf_meta_fail(
            &x->im,
            "unsupported metadata '%s' = %u: mixture of experts (nibble runs dense "
            "models)",
            K(x, "expert_count"), experts);
    return 0;
}

/* ---- hyper-parameters ---- */

static int read_sizes(struct imp *x, struct nib_hparams *hp)
{
    struct gguf_meta *im = &x->im;
    if (gguf_meta_need_u32(im, K(x, "embedding_length"), &hp->dim) ||
        gguf_meta_need_u32(im, K(x, "block_count"), &hp->n_layers) ||
        gguf_meta_need_u32(im, K(x, "feed_forward_length"), &hp->ffn_dim) ||
        gguf_meta_need_u32(im, K(x, "attention.head_count"), &hp->n_heads) ||
        gguf_meta_opt_u32(im, K(x, "attention.head_count_kv"), &hp->n_kv_heads, hp->n_heads) ||
        gguf_meta_need_u32(im, K(x, "context_length"), &hp->ctx_len) ||
        opt_f32(im, K(x, "rope.freq_base"), &hp->rope_theta, 10000.0f, 0) ||
        opt_f32(im, K(x, "attention.layer_norm_rms_epsilon"), &hp->norm_eps, 0, 1))
        return -1;
    if (hp->dim == 0 || hp->dim > NIB_MAX_DIM)
        return gguf_meta_fail(im, "%s %u is out of range [1, %u]", K(x, "embedding_length"),
                              hp->dim, NIB_MAX_DIM);
    if (hp->ffn_dim == 0 || hp->ffn_dim > NIB_MAX_DIM)
        return gguf_meta_fail(im, "%s %u is out of range [1, %u]", K(x, "feed_forward_length"),
                              hp->ffn_dim, NIB_MAX_DIM);
    if (hp->n_layers == 0 || hp->n_layers > NIB_MAX_LAYERS)
        return gguf_meta_fail(im, "%s %u is out of range [1, %u]", K(x, "block_count"),
                              hp->n_layers, NIB_MAX_LAYERS);
    return 0;
}

/* Head geometry: head_dim from attention.key_length when present (gemma2,
 * qwen3: not dim / n_heads), V heads as wide as K heads, RoPE dims. */
static int read_heads(struct imp *x, struct nib_hparams *hp)
{
    struct gguf_meta *im = &x->im;
    const char *kl_key = K(x, "attention.key_length"), *vl_key = K(x, "attention.value_length");
    int has_kl = has_key(x, kl_key);
    if (hp->n_heads == 0 || hp->n_heads > NIB_MAX_DIM || (!has_kl && hp->dim % hp->n_heads))
        return gguf_meta_fail(im, "%s %u is not a multiple of %s %u", K(x, "embedding_length"),
                              hp->dim, K(x, "attention.head_count"), hp->n_heads);
    if (hp->n_kv_heads == 0 || hp->n_heads % hp->n_kv_heads)
        return gguf_meta_fail(im, "%s %u is not a multiple of %s %u", K(x, "attention.head_count"),
                              hp->n_heads, K(x, "attention.head_count_kv"), hp->n_kv_heads);
    uint32_t kl, vl;
    if (gguf_meta_opt_u32(im, kl_key, &kl, hp->dim / hp->n_heads) ||
        gguf_meta_opt_u32(im, vl_key, &vl, hp->dim / hp->n_heads)) /* llama.cpp's defaults */
        return -1;
    if (kl == 0 || kl > NIB_MAX_DIM || (uint64_t)kl * hp->n_heads > NIB_MAX_DIM)
        return gguf_meta_fail(
            im, "%s %u: attention width %llu (x %u heads) is out of range [1, %u]", kl_key, kl,
            (unsigned long long)kl * hp->n_heads, hp->n_heads, NIB_MAX_DIM);
    if (vl != kl)
        return gguf_meta_fail(im,
                              "unsupported metadata '%s' = %u: value heads must be as wide as key "
                              "heads (%s %u)",
                              vl_key, vl, kl_key, kl);
    hp->head_dim = kl;
    if (hp->head_dim % 2)
        return gguf_meta_fail(im, "head dimension %u is odd (RoPE rotates pairs)", hp->head_dim);
    if (gguf_meta_opt_u32(im, K(x, "rope.dimension_count"), &hp->rope_dim, hp->head_dim))
        return -1;
    if (hp->rope_dim == 0 || hp->rope_dim % 2 || hp->rope_dim > hp->head_dim)
        return gguf_meta_fail(im, "%s %u must be even and in [2, head dimension %u]",
                              K(x, "rope.dimension_count"), hp->rope_dim, hp->head_dim);
    return 0;
}

static int check_values(struct imp *x, const struct nib_hparams *hp)
{
    struct gguf_meta *im = &x->im;
    if (hp->ctx_len == 0)
        return gguf_meta_fail(im, "%s is 0", K(x, "context_length"));
    if (!(hp->norm_eps > 0) || !isfinite(hp->norm_eps))
        return gguf_meta_fail(im, "%s %g must be positive and finite",
                              K(x, "attention.layer_norm_rms_epsilon"), hp->norm_eps);
    if (!(hp->rope_theta > 0) || !isfinite(hp->rope_theta))
        return gguf_meta_fail(im, "%s %g must be positive and finite", K(x, "rope.freq_base"),
                              hp->rope_theta);
    return 0;
}

/* RoPE scaling: none, or linear (every frequency divided by the factor:
 * llama.cpp's freq_scale = 1 / factor). Llama 3's scaling comes as the
 * rope_freqs.weight tensor (read with the tensors). *linear = the factor,
 * 1 when none. */
static int read_rope_scaling(struct imp *x, float *linear)
{
    struct gguf_meta *im = &x->im;
    const char *tkey = K(x, "rope.scaling.type");
    struct gguf_str t;
    char s[72];
    int rc = gguf_get_str(im->g, tkey, &t);
    if (rc == -2)
        return gguf_meta_bad(im, tkey, rc, "string");
    if (rc == 0 && !gguf_str_eq(t, "none") && !gguf_str_eq(t, "linear"))
        return gguf_meta_fail(im,
                              "unsupported metadata '%s' = '%s' (nibble supports none and linear; "
                              "Llama 3 scaling is read from rope_freqs.weight)",
                              tkey, gguf_str_show(t, s));
    const char *fkey = K(x, "rope.scaling.factor");
    if (!has_key(x, fkey))
        fkey = K(x, "rope.scale_linear"); /* the older name */
    float f, attn;
    if (opt_f32(im, fkey, &f, 0.0f, 0) ||
        opt_f32(im, K(x, "rope.scaling.attn_factor"), &attn, 1.0f, 0))
        return -1;
    if (f != 0.0f && (!(f > 0) || !isfinite(f)))
        return gguf_meta_fail(im, "%s %g must be positive and finite", fkey, f);
    if (attn != 1.0f)
        return gguf_meta_fail(im,
                              "unsupported metadata '%s' = %g (RoPE magnitude scaling; nibble "
                              "supports 1)",
                              K(x, "rope.scaling.attn_factor"), attn);
    *linear = f == 0.0f ? 1.0f : f;
    return 0;
}

/* Gemma 2: soft-capping, sliding window on the layers llama.cpp assigns
 * (pattern n: layer il slides when il % n < n - 1, so 2 = even layers; or a
 * per-layer bool array), the attention scale as llama.cpp derives it. */
static int read_gemma2(struct imp *x, struct llama_model *m)
{
    struct gguf_meta *im = &x->im;
    const struct nib_hparams *hp = &m->hp;
    uint32_t window, pattern = 2;
    float base_swa;
    if (opt_f32(im, K(x, "attn_logit_softcapping"), &m->attn_softcap, 50.0f, 0) ||
        opt_f32(im, K(x, "final_logit_softcapping"), &m->final_softcap, 30.0f, 0) ||
        gguf_meta_opt_u32(im, K(x, "attention.sliding_window"), &window, 4096) ||
        opt_f32(im, K(x, "rope.freq_base_swa"), &base_swa, hp->rope_theta, 0))
        return -1;
    if (!(m->attn_softcap > 0) || !isfinite(m->attn_softcap))
        return gguf_meta_fail(im, "%s %g must be positive and finite",
                              K(x, "attn_logit_softcapping"), m->attn_softcap);
    if (!(m->final_softcap > 0) || !isfinite(m->final_softcap))
        return gguf_meta_fail(im, "%s %g must be positive and finite",
                              K(x, "final_logit_softcapping"), m->final_softcap);
    if (window == 0)
        return gguf_meta_fail(im, "%s is 0", K(x, "attention.sliding_window"));
    if (base_swa != hp->rope_theta)
        return gguf_meta_fail(im,
                              "unsupported metadata '%s' = %g: sliding layers with their own RoPE "
                              "base (nibble uses %s %g for all)",
                              K(x, "rope.freq_base_swa"), base_swa, K(x, "rope.freq_base"),
                              hp->rope_theta);
    const char *pkey = K(x, "attention.sliding_window_pattern");
    const struct gguf_kv *kv = gguf_find_kv(im->g, pkey);
    if (kv && kv->type == GGUF_TYPE_ARRAY) {
        if (kv->arr_type != GGUF_TYPE_BOOL)
            return gguf_meta_wrong_type(im, pkey, kv, "integer or array of bool");
        if (kv->arr_n != hp->n_layers)
            return gguf_meta_fail(im, "metadata '%s' has %llu entries, expected %u", pkey,
                                  (unsigned long long)kv->arr_n, hp->n_layers);
        for (uint32_t l = 0; l < hp->n_layers; l++)
            m->layers[l].window = kv->val[l] ? window : 0;
    } else {
        if (gguf_meta_opt_u32(im, pkey, &pattern, 2))
            return -1;
        for (uint32_t l = 0; l < hp->n_layers; l++) /* llama_hparams::set_swa_pattern */
            m->layers[l].window = pattern == 0 || l % pattern < pattern - 1 ? window : 0;
    }
    /* llama.cpp: Gemma 2 27B (46 layers) scales by 1/sqrt(dim / heads),
     * the others by 1/sqrt(head size); GGUF has no query_pre_attn_scalar. */
    m->attn_scale = hp->n_layers == 46 ? 1.0f / sqrtf((float)(hp->dim / hp->n_heads))
                                       : 1.0f / sqrtf((float)hp->head_dim);
    m->embed_scale = sqrtf((float)hp->dim);
    m->ffn_act = LLAMA_ACT_GELU_TANH;
    return 0;
}

/* ---- vocabulary ---- */

static int read_vocab(struct imp *x, struct llama_model *m)
{
    struct gguf_meta *im = &x->im;
    if (gguf_tok_load(im->g, &m->tok, im->err, im->errlen))
        return -1;
    struct nib_hparams *hp = &m->hp;
    uint32_t n_vocab_key;
    hp->vocab_size = m->tok.n_vocab;
    if (gguf_meta_opt_u32(im, K(x, "vocab_size"), &n_vocab_key, hp->vocab_size))
        return -1;
    if (n_vocab_key != hp->vocab_size)
        return gguf_meta_fail(im, "%s %u differs from the %u tokens in tokenizer.ggml.tokens",
                              K(x, "vocab_size"), n_vocab_key, hp->vocab_size);
    /* hparams keep ids for the header; -1 (none) is stored as 0 with add_bos off. */
    hp->bos_id = m->tok.bos_id >= 0 ? (uint32_t)m->tok.bos_id : 0;
    hp->eos_id = m->tok.eos_id >= 0 ? (uint32_t)m->tok.eos_id : 0;
    hp->add_bos = (uint32_t)m->tok.add_bos;
    return 0;
}

/* ---- tensors ---- */

/* VEC: norm weights, biases, RoPE factors: f32, f16 or bf16 (read whole,
 * or sliced out of a fused bias). MATRIX: any type gguf_open accepted
 * (every one nibble dequantizes or repacks). */
enum wkind { VEC, MATRIX };

static int dtype_ok(uint32_t type, enum wkind kind)
{
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16)
        return 1;
    return kind == MATRIX && ggml_type_nbytes(type, 256) != 0;
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
static int bind(struct imp *x, struct llama_weight *w, const char *name, enum wkind kind,
                uint32_t cols, uint32_t rows, int required)
{
    struct gguf_meta *im = &x->im;
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
        return gguf_meta_fail(im, "tensor '%s' has unsupported dtype %s (%s)", name,
                              ggml_type_name(t->type),
                              kind == VEC ? "norm weights, biases and RoPE factors must be f32, "
                                            "f16 or bf16"
                                          : "no nibble format reads it");
    w->t = t;
    w->cols = cols;
    w->rows = rows ? rows : 1;
    return 0;
}

/* A view of rows [row0, row0 + rows) of a bound matrix (or elements
 * [row0, row0 + cols) of a bound vector). */
static struct llama_weight view(const struct llama_weight *src, uint32_t row0, uint32_t rows,
                                uint32_t cols)
{
    struct llama_weight w = *src;
    w.row0 = row0;
    w.rows = rows;
    w.cols = cols;
    return w;
}

static void neox(struct llama_weight *w, const struct nib_hparams *hp)
{
    if (w->t) {
        w->neox_head = hp->head_dim;
        w->neox_rope_dim = hp->rope_dim;
    }
}

#define TNAME(buf, l, part) (snprintf(buf, sizeof buf, "blk.%u.%s", l, part), buf)

/* Q, K and V: separate attn_q/k/v, or one fused attn_qkv holding Q|K|V rows
 * (phi3; llama.cpp accepts it for every architecture here); biases from
 * attn_q/k/v.bias or a fused attn_qkv.bias. */
static int bind_qkv(struct imp *x, const struct nib_hparams *hp, uint32_t l, struct llama_layer *L)
{
    uint32_t q = hp->n_heads * hp->head_dim, kv = hp->n_kv_heads * hp->head_dim;
    char n[64];
    struct llama_weight fused;
    if (bind(x, &fused, TNAME(n, l, "attn_qkv.weight"), MATRIX, hp->dim, q + 2 * kv, 0))
        return -1;
    int is_fused = fused.t != NULL;
    if (is_fused) {
        L->wq = view(&fused, 0, q, hp->dim);
        L->wk = view(&fused, q, kv, hp->dim);
        L->wv = view(&fused, q + kv, kv, hp->dim);
        if (bind(x, &fused, TNAME(n, l, "attn_qkv.bias"), VEC, q + 2 * kv, 0, 0))
            return -1;
        if (fused.t) {
            L->bq = view(&fused, 0, 1, q);
            L->bk = view(&fused, q, 1, kv);
            L->bv = view(&fused, q + kv, 1, kv);
            return 0;
        }
    } else if (bind(x, &L->wq, TNAME(n, l, "attn_q.weight"), MATRIX, hp->dim, q, 1) ||
               bind(x, &L->wk, TNAME(n, l, "attn_k.weight"), MATRIX, hp->dim, kv, 1) ||
               bind(x, &L->wv, TNAME(n, l, "attn_v.weight"), MATRIX, hp->dim, kv, 1)) {
        return -1;
    }
    if (bind(x, &L->bq, TNAME(n, l, "attn_q.bias"), VEC, q, 0, 0) ||
        bind(x, &L->bk, TNAME(n, l, "attn_k.bias"), VEC, kv, 0, 0) ||
        bind(x, &L->bv, TNAME(n, l, "attn_v.bias"), VEC, kv, 0, 0))
        return -1;
    int nb = !!L->bq.t + !!L->bk.t + !!L->bv.t;
    if (is_fused && nb && nb < 3) /* llama.cpp adds them to a fused product only as a set */
        return gguf_meta_fail(&x->im,
                              "tensor 'blk.%u.attn_qkv.weight' comes with only some of "
                              "attn_q/k/v.bias (all three or none)",
                              l);
    return 0;
}

static int bind_layer(struct imp *x, const struct nib_hparams *hp, uint32_t l,
                      struct llama_layer *L)
{
    uint32_t q = hp->n_heads * hp->head_dim, arch = x->a->arch;
    char n[64];
    if (bind(x, &L->attn_norm, TNAME(n, l, "attn_norm.weight"), VEC, hp->dim, 0, 1) ||
        bind_qkv(x, hp, l, L) ||
        bind(x, &L->wo, TNAME(n, l, "attn_output.weight"), MATRIX, q, hp->dim, 1) ||
        bind(x, &L->ffn_norm, TNAME(n, l, "ffn_norm.weight"), VEC, hp->dim, 0, 1))
        return -1;
    if (arch == LLAMA_ARCH_PHI3) { /* ffn_up holds gate rows then up rows (ggml_swiglu's halves) */
        struct llama_weight up;
        if (bind(x, &up, TNAME(n, l, "ffn_up.weight"), MATRIX, hp->dim, 2 * hp->ffn_dim, 1))
            return -1;
        L->w_gate = view(&up, 0, hp->ffn_dim, hp->dim);
        L->w_up = view(&up, hp->ffn_dim, hp->ffn_dim, hp->dim);
    } else if (bind(x, &L->w_gate, TNAME(n, l, "ffn_gate.weight"), MATRIX, hp->dim, hp->ffn_dim,
                    1) ||
               bind(x, &L->w_up, TNAME(n, l, "ffn_up.weight"), MATRIX, hp->dim, hp->ffn_dim, 1)) {
        return -1;
    }
    if (bind(x, &L->w_down, TNAME(n, l, "ffn_down.weight"), MATRIX, hp->ffn_dim, hp->dim, 1))
        return -1;
    if (arch == LLAMA_ARCH_QWEN3 &&
        (bind(x, &L->q_norm, TNAME(n, l, "attn_q_norm.weight"), VEC, hp->head_dim, 0, 1) ||
         bind(x, &L->k_norm, TNAME(n, l, "attn_k_norm.weight"), VEC, hp->head_dim, 0, 1)))
        return -1;
    if (arch == LLAMA_ARCH_GEMMA2 &&
        (bind(x, &L->post_attn_norm, TNAME(n, l, "post_attention_norm.weight"), VEC, hp->dim, 0,
              1) ||
         bind(x, &L->post_ffn_norm, TNAME(n, l, "post_ffw_norm.weight"), VEC, hp->dim, 0, 1)))
        return -1;
    if (x->a->neox) {
        neox(&L->wq, hp), neox(&L->wk, hp), neox(&L->bq, hp), neox(&L->bk, hp);
        neox(&L->q_norm, hp), neox(&L->k_norm, hp);
    }
    return 0;
}

/* Tensors llama.cpp would apply for some model that nibble's forward pass
 * for this architecture has no place for: refused by name rather than
 * silently dropped. Per layer ("blk.N." + part) or global. */
static const struct {
    const char *part;
    unsigned archs; /* where it is refused */
    const char *what;
} foreign[] =
    {
        {"attn_output.bias", A_ALL, "an attention output bias"},
        {"ffn_gate.bias", A_ALL, "FFN biases"},
        {"ffn_up.bias", A_ALL, "FFN biases"},
        {"ffn_down.bias", A_ALL, "FFN biases"},
        {"attn_norm.bias", A_ALL, "LayerNorm biases"},
        {"ffn_norm.bias", A_ALL, "LayerNorm biases"},
        {"ffn_gate_inp.weight", A_ALL, "mixture of experts"},
        {"attn_q_norm.weight", A_ALL & ~A_QWEN3, "per-head Q/K norms (qwen3 has them)"},
        {"attn_k_norm.weight", A_ALL & ~A_QWEN3, "per-head Q/K norms (qwen3 has them)"},
        {"post_attention_norm.weight", A_ALL & ~A_GEMMA2, "post-norms (gemma2 has them)"},
        {"post_ffw_norm.weight", A_ALL & ~A_GEMMA2, "post-norms (gemma2 has them)"},
        {"ffn_gate.weight", A_PHI3, "a separate gate (phi3 holds gate and up in ffn_up)"},
},
  foreign_global[] = {
      {"output.bias", A_ALL, "an output bias"},
      {"output.weight", A_GEMMA2, "separate output matrix (gemma2 ties it to token_embd)"},
      {"output_norm.bias", A_ALL, "LayerNorm biases"},
      {"rope_factors_long.weight", A_ALL, "LongRoPE (Phi-3 128k) frequency factors"},
      {"rope_factors_short.weight", A_ALL, "LongRoPE (Phi-3 128k) frequency factors"},
      {"rope_freqs.weight", A_ALL & ~A_LLAMA, "RoPE frequency factors (llama has them)"},
};

static int refuse_foreign(struct imp *x, const struct nib_hparams *hp)
{
    const struct gguf_file *g = x->im.g;
    unsigned bit = 1u << x->a->arch;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct gguf_str nm = g->tensors[i].name;
        char s[72];
        for (size_t k = 0; k < sizeof foreign_global / sizeof foreign_global[0]; k++)
            if ((foreign_global[k].archs & bit) && gguf_str_eq(nm, foreign_global[k].part))
                return gguf_meta_fail(&x->im,
                                      "unsupported tensor '%s' in a %s model (nibble runs no %s)",
                                      gguf_str_show(nm, s), x->a->name, foreign_global[k].what);
        if (nm.len < 6 || memcmp(nm.ptr, "blk.", 4))
            continue;
        uint64_t at = 4, l = 0;
        while (at < nm.len && at < 14 && nm.ptr[at] >= '0' && nm.ptr[at] <= '9')
            l = l * 10 + (uint64_t)(nm.ptr[at++] - '0');
        if (at == 4 || at >= nm.len || nm.ptr[at] != '.' || l >= hp->n_layers)
            continue;
        struct gguf_str part = {nm.len - at - 1, nm.ptr + at + 1};
        for (size_t k = 0; k < sizeof foreign / sizeof foreign[0]; k++)
            if ((foreign[k].archs & bit) && gguf_str_eq(part, foreign[k].part))
                return gguf_meta_fail(&x->im,
                                      "unsupported tensor '%s' in a %s model (nibble runs no %s)",
                                      gguf_str_show(nm, s), x->a->name, foreign[k].what);
    }
    return 0;
}

/* Llama 3.x: rope_freqs.weight divides each RoPE frequency; a linear
 * factor divides all of them. NULL factors when both are absent. */
static int rope_factors(struct imp *x, struct llama_model *m, float linear)
{
    const struct nib_hparams *hp = &m->hp;
    uint32_t n = hp->rope_dim / 2;
    struct llama_weight w;
    if (bind(x, &w, "rope_freqs.weight", VEC, n, 0, 0))
        return -1;
    if (!w.t && linear == 1.0f)
        return 0;
    m->rope_freq_factors = malloc(n * sizeof *m->rope_freq_factors);
    if (!m->rope_freq_factors)
        return gguf_meta_fail(&x->im, "out of memory");
    if (!w.t) {
        for (uint32_t i = 0; i < n; i++)
            m->rope_freq_factors[i] = linear;
        return 0;
    }
    if (llama_weight_row_f32(&w, 0, m->rope_freq_factors))
        return gguf_meta_fail(&x->im, "tensor 'rope_freqs.weight' cannot be read");
    for (uint32_t i = 0; i < n; i++) {
        float f = m->rope_freq_factors[i];
        if (!(f > 0) || !isfinite(f))
            return gguf_meta_fail(&x->im,
                                  "tensor 'rope_freqs.weight' element %u is %g: factors must be "
                                  "positive and finite",
                                  i, f);
        m->rope_freq_factors[i] = f * linear;
    }
    return 0;
}

static int bind_tensors(struct imp *x, struct llama_model *m)
{
    const struct nib_hparams *hp = &m->hp;
    /* gemma2: llama.cpp always reuses token_embd as the classifier */
    int read_output = x->a->arch != LLAMA_ARCH_GEMMA2;
    if (refuse_foreign(x, hp) ||
        bind(x, &m->tok_embd, "token_embd.weight", MATRIX, hp->dim, hp->vocab_size, 1) ||
        bind(x, &m->output_norm, "output_norm.weight", VEC, hp->dim, 0, 1) ||
        (read_output && bind(x, &m->output, "output.weight", MATRIX, hp->dim, hp->vocab_size, 0)))
        return -1;
    if (!m->output.t) { /* tied embeddings: the classifier reuses token_embd */
        m->output = m->tok_embd;
        m->output_tied = 1;
    }
    for (uint32_t l = 0; l < hp->n_layers; l++)
        if (bind_layer(x, hp, l, &m->layers[l]))
            return -1;
    return 0;
}

static int read_model(struct imp *x, struct llama_model *m)
{
    struct nib_hparams *hp = &m->hp;
    float linear = 1.0f;
    if (check_arch(x) || read_sizes(x, hp) || read_heads(x, hp) || check_values(x, hp) ||
        read_rope_scaling(x, &linear))
        return -1;
    m->arch = hp->arch = x->a->arch;
    m->ffn_act = LLAMA_ACT_SILU;
    m->embed_scale = 1.0f;
    m->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    m->layers = calloc(hp->n_layers, sizeof *m->layers);
    if (!m->layers)
        return gguf_meta_fail(&x->im, "out of memory");
    if (x->a->arch == LLAMA_ARCH_GEMMA2 && read_gemma2(x, m))
        return -1;
    return read_vocab(x, m) || bind_tensors(x, m) || rope_factors(x, m, linear) ? -1 : 0;
}

int llama_import(struct llama_model *m, const struct gguf_file *g, char *err, size_t errlen)
{
    struct imp x = {0};
    gguf_meta_init(&x.im, g, err, errlen);
    memset(m, 0, sizeof *m);
    if (read_model(&x, m)) {
        llama_model_free(m);
        return -1;
    }
    return 0;
}

void llama_model_free(struct llama_model *m)
{
    free(m->layers);
    free(m->rope_freq_factors);
    tok_spec_free(&m->tok);
    memset(m, 0, sizeof *m);
}
