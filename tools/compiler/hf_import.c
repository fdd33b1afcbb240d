/* Hugging Face directory importer (hf_import.h): config.json into the
 * hyper-parameters, safetensors tensors into weight views, the tokenizer
 * through hf_tokenizer_load. */
#include "tools/compiler/hf_import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/util/json.h"
#include "tools/util/tool_util.h"
#include "tools/compiler/hf_tokenizer.h"
#include "tools/compiler/safetensors.h"

/* ---- the directory ---- */

struct hf_shard {
    char *path;
    const uint8_t *map;
    size_t size;
    struct st_file st;
    uint8_t *bound; /* per tensor: 1 once a weight view reads it */
};

struct hf_dir {
    uint32_t n;
    struct hf_shard *s;
};

void hf_dir_close(struct hf_dir *d)
{
    if (!d)
        return;
    for (uint32_t i = 0; i < d->n; i++) {
        st_close(&d->s[i].st);
        free(d->s[i].bound);
        if (d->s[i].map)
            nib_unmap_file(d->s[i].map, d->s[i].size);
        free(d->s[i].path);
    }
    free(d->s);
    free(d);
}

static char *join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static int exists(const char *dir, const char *file)
{
    char *p = join(dir, file);
    struct stat st;
    int ok = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* Record that t (a tensor of one of d's shards) is read by a view. */
static void mark_bound(const struct hf_dir *d, const struct gguf_tensor *t)
{
    for (uint32_t i = 0; i < d->n; i++)
        if (t >= d->s[i].st.tensors && t < d->s[i].st.tensors + d->s[i].st.n_tensors)
            d->s[i].bound[t - d->s[i].st.tensors] = 1;
}

static const struct gguf_tensor *find(const struct hf_dir *d, const char *name)
{
    for (uint32_t i = 0; i < d->n; i++) {
        const struct gguf_tensor *t = st_find(&d->s[i].st, name);
        if (t)
            return t;
    }
    return NULL;
}

/* Map and parse shard i (d->s[i].path set). */
static int open_shard(struct hf_dir *d, uint32_t i, char *err, size_t errlen)
{
    struct hf_shard *s = &d->s[i];
    char why[400];
    if (nib_map_file(s->path, &s->map, &s->size, why, sizeof why))
        return nib_fail(err, errlen, "%s", why);
    if (st_open(&s->st, s->map, s->size, why, sizeof why))
        return nib_fail(err, errlen, "%s: %s", s->path, why);
    s->bound = calloc(s->st.n_tensors ? s->st.n_tensors : 1, 1);
    if (!s->bound)
        return nib_fail(err, errlen, "out of memory");
    /* a name in two shards would leave which one is meant undefined */
    for (uint32_t k = 0; k < i; k++)
        for (uint32_t t = 0; t < s->st.n_tensors; t++)
            if (st_find(&d->s[k].st, s->st.tensors[t].name.ptr)) {
                char b[72];
                return nib_fail(err, errlen, "%s: tensor '%s' is also in %s", s->path,
                                gguf_str_show(s->st.tensors[t].name, b), d->s[k].path);
            }
    return 0;
}

static int add_shard(struct hf_dir *d, const char *dir, const char *file, char *err, size_t errlen)
{
    struct hf_shard *s = realloc(d->s, (d->n + 1) * sizeof *s);
    if (!s)
        return nib_fail(err, errlen, "out of memory");
    d->s = s;
    memset(&s[d->n], 0, sizeof *s);
    s[d->n].path = join(dir, file);
    if (!s[d->n].path)
        return nib_fail(err, errlen, "out of memory");
    d->n++;
    return open_shard(d, d->n - 1, err, errlen);
}

/* A shard file name from the index: a plain name in the directory. */
static int shard_name_ok(const struct json_value *v)
{
    return json_is(v, JSON_STRING) && v->n > 0 && v->n <= 255 && !memchr(v->str, '/', v->n) &&
           !memchr(v->str, 0, v->n) && strcmp(v->str, ".") && strcmp(v->str, "..");
}

static int open_sharded(struct hf_dir *d, const char *dir, char *err, size_t errlen)
{
    char *ipath = join(dir, "model.safetensors.index.json");
    const uint8_t *map = NULL;
    size_t size = 0;
    struct json_doc *doc = NULL;
    char why[400];
    int rc = -1;
    if (!ipath)
        return nib_fail(err, errlen, "out of memory");
    if (nib_map_file(ipath, &map, &size, why, sizeof why)) {
        nib_fail(err, errlen, "%s", why);
        goto out;
    }
    struct json_limits lim = {.max_bytes = 64u << 20, .max_depth = 8};
    if (json_parse((const char *)map, size, &lim, &doc, why, sizeof why)) {
        nib_fail(err, errlen, "%s: %s", ipath, why);
        goto out;
    }
    const struct json_value *wm = json_get(json_root(doc), "weight_map");
    if (!json_is(wm, JSON_OBJECT) || wm->n == 0) {
        nib_fail(err, errlen, "%s: weight_map must be a non-empty object of tensor -> file", ipath);
        goto out;
    }
    for (uint32_t i = 0; i < wm->n; i++) { /* each file once, in order of first mention */
        const struct json_value *f = &wm->members[i].value;
        if (!shard_name_ok(f)) {
            char b[72];
            struct gguf_str k = {wm->members[i].key_len, wm->members[i].key};
            nib_fail(err, errlen, "%s: weight_map.%s must name a file in the directory", ipath,
                     gguf_str_show(k, b));
            goto out;
        }
        int seen = 0;
        for (uint32_t j = 0; j < i && !seen; j++)
            seen =
                wm->members[j].value.n == f->n && !memcmp(wm->members[j].value.str, f->str, f->n);
        if (!seen && add_shard(d, dir, f->str, err, errlen))
            goto out;
    }
    for (uint32_t i = 0; i < wm->n; i++) { /* each tensor is where the index says */
        const struct json_value *f = &wm->members[i].value;
        char *fp = join(dir, f->str);
        const struct gguf_tensor *t = NULL;
        for (uint32_t k = 0; fp && k < d->n && !t; k++)
            if (!strcmp(d->s[k].path, fp))
                t = st_find(&d->s[k].st, wm->members[i].key);
        free(fp);
        if (!t) {
            char b[72], c[72];
            struct gguf_str k = {wm->members[i].key_len, wm->members[i].key};
            nib_fail(err, errlen, "%s: tensor '%s' is not in %s", ipath, gguf_str_show(k, b),
                     gguf_str_show((struct gguf_str){f->n, f->str}, c));
            goto out;
        }
    }
    rc = 0;
out:
    json_free(doc);
    if (map)
        nib_unmap_file(map, size);
    free(ipath);
    return rc;
}

/* ---- binding tensors to views ---- */

struct binder {
    const struct hf_dir *d;
    const struct hf_config *c;
    const char *dir;
    char *err;
    size_t errlen;
};

static void fmt_shape(char *out, size_t n, const struct gguf_tensor *t)
{
    size_t at = (size_t)snprintf(out, n, "[");
    for (uint32_t d = t->n_dims; d-- > 0 && at < n;)
        at += (size_t)snprintf(out + at, n - at, "%llu%s", (unsigned long long)t->ne[d],
                               d ? ", " : "");
    if (at < n)
        snprintf(out + at, n - at, "]");
}

/* Bind tensor name, row-major [rows, cols] (rows 0: a vector [cols]), to
 * w as a view of its rows [row0, row0 + view_rows). */
static int bind_rows(struct binder *b, struct llama_weight *w, const char *name, uint32_t rows,
                     uint32_t cols, uint32_t row0, uint32_t view_rows, int required)
{
    memset(w, 0, sizeof *w);
    const struct gguf_tensor *t = find(b->d, name);
    if (!t)
        return required ? nib_fail(b->err, b->errlen, "%s: missing tensor '%s'", b->dir, name) : 0;
    uint64_t want[GGUF_MAX_DIMS] = {cols, rows ? rows : 1, 1, 1};
    if (t->n_dims != (rows ? 2u : 1u) || memcmp(t->ne, want, sizeof want)) {
        char got[128];
        fmt_shape(got, sizeof got, t);
        if (rows)
            return nib_fail(b->err, b->errlen,
                            "%s: tensor '%s' has shape %s; config.json makes it [%u, %u]", b->dir,
                            name, got, rows, cols);
        return nib_fail(b->err, b->errlen,
                        "%s: tensor '%s' has shape %s; config.json makes it [%u]", b->dir, name,
                        got, cols);
    }
    mark_bound(b->d, t);
    w->t = t;
    w->cols = cols;
    w->rows = rows ? view_rows : 1;
    w->row0 = row0;
    if (b->c->norm_add_one && !rows && strstr(name, "norm.weight"))
        w->add = 1.0f;
    return 0;
}

static int bind(struct binder *b, struct llama_weight *w, const char *name, uint32_t rows,
                uint32_t cols, int required)
{
    return bind_rows(b, w, name, rows, cols, 0, rows, required);
}

/* Hugging Face keeps Q and K in rotate-half order (see llama_import.h). */
static void neox(struct llama_weight *w, const struct hf_config *c)
{
    if (w->t) {
        w->neox_head = c->head_dim;
        w->neox_rope_dim = c->rope_dim;
    }
}

/* Tensors nibble has no place for: refused rather than silently dropped. */
static int refuse_extra(struct binder *b, uint32_t l)
{
    static const char *const parts[] = {"self_attn.o_proj.bias",   "mlp.gate_proj.bias",
                                        "mlp.up_proj.bias",        "mlp.down_proj.bias",
                                        "self_attn.qkv_proj.bias", "mlp.gate_up_proj.bias"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "model.layers.%u.%s", l, parts[i]);
        if (find(b->d, name))
            return nib_fail(b->err, b->errlen,
                            "%s: tensor '%s' is not supported (nibble has no bias "
                            "there)",
                            b->dir, name);
    }
    return 0;
}

static int bind_layer(struct binder *b, uint32_t l, struct llama_layer *L)
{
    const struct hf_config *c = b->c;
    uint32_t q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    char n[96];
#define NAME(part) (snprintf(n, sizeof n, "model.layers.%u.%s", l, part), n)
    if (refuse_extra(b, l) || bind(b, &L->attn_norm, NAME("input_layernorm.weight"), 0, c->dim, 1))
        return -1;
    if (c->arch == LLAMA_ARCH_PHI3) {
        const char *qkv = NAME("self_attn.qkv_proj.weight");
        char fused[96];
        snprintf(fused, sizeof fused, "%s", qkv);
        if (bind_rows(b, &L->wq, fused, q + 2 * kv, c->dim, 0, q, 1) ||
            bind_rows(b, &L->wk, fused, q + 2 * kv, c->dim, q, kv, 1) ||
            bind_rows(b, &L->wv, fused, q + 2 * kv, c->dim, q + kv, kv, 1))
            return -1;
        snprintf(fused, sizeof fused, "model.layers.%u.mlp.gate_up_proj.weight", l);
        if (bind_rows(b, &L->w_gate, fused, 2 * c->ffn_dim, c->dim, 0, c->ffn_dim, 1) ||
            bind_rows(b, &L->w_up, fused, 2 * c->ffn_dim, c->dim, c->ffn_dim, c->ffn_dim, 1))
            return -1;
    } else {
        if (bind(b, &L->wq, NAME("self_attn.q_proj.weight"), q, c->dim, 1) ||
            bind(b, &L->wk, NAME("self_attn.k_proj.weight"), kv, c->dim, 1) ||
            bind(b, &L->wv, NAME("self_attn.v_proj.weight"), kv, c->dim, 1) ||
            bind(b, &L->w_gate, NAME("mlp.gate_proj.weight"), c->ffn_dim, c->dim, 1) ||
            bind(b, &L->w_up, NAME("mlp.up_proj.weight"), c->ffn_dim, c->dim, 1))
            return -1;
        /* biases: qwen2 always has them; llama/mistral/qwen3 with attention_bias */
        int need = c->arch == LLAMA_ARCH_QWEN2;
        if (bind(b, &L->bq, NAME("self_attn.q_proj.bias"), 0, q, need) ||
            bind(b, &L->bk, NAME("self_attn.k_proj.bias"), 0, kv, need) ||
            bind(b, &L->bv, NAME("self_attn.v_proj.bias"), 0, kv, need))
            return -1;
        if ((L->bq.t != NULL) != (L->bk.t != NULL) || (L->bq.t != NULL) != (L->bv.t != NULL))
            return nib_fail(b->err, b->errlen,
                            "%s: layer %u has some of the q/k/v_proj biases but not all three",
                            b->dir, l);
    }
    if (bind(b, &L->wo, NAME("self_attn.o_proj.weight"), c->dim, q, 1) ||
        bind(b, &L->w_down, NAME("mlp.down_proj.weight"), c->dim, c->ffn_dim, 1))
        return -1;
    if (c->arch == LLAMA_ARCH_GEMMA2) {
        /* Gemma2: post_attention_layernorm normalizes the attention output;
         * pre_feedforward_layernorm is the FFN's input norm */
        if (bind(b, &L->post_attn_norm, NAME("post_attention_layernorm.weight"), 0, c->dim, 1) ||
            bind(b, &L->ffn_norm, NAME("pre_feedforward_layernorm.weight"), 0, c->dim, 1) ||
            bind(b, &L->post_ffn_norm, NAME("post_feedforward_layernorm.weight"), 0, c->dim, 1))
            return -1;
    } else if (bind(b, &L->ffn_norm, NAME("post_attention_layernorm.weight"), 0, c->dim, 1)) {
        return -1;
    }
    if (c->arch == LLAMA_ARCH_QWEN3 &&
        (bind(b, &L->q_norm, NAME("self_attn.q_norm.weight"), 0, c->head_dim, 1) ||
         bind(b, &L->k_norm, NAME("self_attn.k_norm.weight"), 0, c->head_dim, 1)))
        return -1;
#undef NAME
    neox(&L->wq, c);
    neox(&L->wk, c);
    neox(&L->bq, c);
    neox(&L->bk, c);
    neox(&L->q_norm, c);
    neox(&L->k_norm, c);
    L->window = c->window[l];
    return 0;
}

static int bind_all(struct binder *b, struct llama_model *m)
{
    const struct hf_config *c = b->c;
    int have_head = find(b->d, "lm_head.weight") != NULL;
    int have_embd = find(b->d, "model.embed_tokens.weight") != NULL;
    if (c->tie == 0 && !have_head)
        return nib_fail(b->err, b->errlen,
                        "%s: missing tensor 'lm_head.weight' (config.json tie_word_embeddings is "
                        "false)",
                        b->dir);
    int tied = c->tie == 1 || !have_head;
    /* a tied checkpoint may store the shared matrix under either name */
    const char *embd = have_embd || !tied ? "model.embed_tokens.weight" : "lm_head.weight";
    if (bind(b, &m->tok_embd, embd, c->vocab_size, c->dim, 1) ||
        bind(b, &m->output_norm, "model.norm.weight", 0, c->dim, 1))
        return -1;
    if (tied) {
        m->output = m->tok_embd;
        m->output_tied = 1;
    } else if (bind(b, &m->output, "lm_head.weight", c->vocab_size, c->dim, 1)) {
        return -1;
    }
    m->layers = calloc(c->n_layers, sizeof *m->layers);
    if (!m->layers)
        return nib_fail(b->err, b->errlen, "out of memory");
    for (uint32_t l = 0; l < c->n_layers; l++)
        if (bind_layer(b, l, &m->layers[l]))
            return -1;
    /* Every other tensor is one the forward pass has no place for (a norm
     * or bias of another architecture, layers past num_hidden_layers, ...):
     * refused rather than silently dropped. Exceptions: a tied checkpoint's
     * lm_head.weight, which transformers ignores, and the RoPE inverse
     * frequencies older checkpoints store (computed from config.json). */
    for (uint32_t i = 0; i < b->d->n; i++)
        for (uint32_t k = 0; k < b->d->s[i].st.n_tensors; k++) {
            struct gguf_str nm = b->d->s[i].st.tensors[k].name;
            const char *inv = "rotary_emb.inv_freq";
            if (b->d->s[i].bound[k] || (tied && gguf_str_eq(nm, "lm_head.weight")) ||
                (nm.len >= strlen(inv) && !memcmp(nm.ptr + nm.len - strlen(inv), inv, strlen(inv))))
                continue;
            char s[72];
            return nib_fail(b->err, b->errlen,
                            "%s: tensor '%s' has no place in a %s model (nibble does not run it)",
                            b->d->s[i].path, gguf_str_show(nm, s), llama_arch_name(c->arch));
        }
    return 0;
}

/* ---- the tokenizer ---- */

/* config.json's vocab_size counts the embedding rows, which may exceed the
 * tokenizer's tokens (padding for speed): the rest become unused tokens
 * "[PADn]", as llama.cpp's converter writes them. */
static int pad_vocab(struct tok_spec *t, uint32_t n, const char *dir, char *err, size_t errlen)
{
    if (t->n_vocab > n)
        return nib_fail(err, errlen,
                        "%s: tokenizer.json has %u tokens, more than config.json vocab_size %u",
                        dir, t->n_vocab, n);
    if (t->n_vocab == n)
        return 0;
    struct tok_spec_token *tk = realloc(t->tokens, (size_t)n * sizeof *tk);
    if (!tk)
        return nib_fail(err, errlen, "out of memory");
    t->tokens = tk;
    for (uint32_t i = t->n_vocab; i < n; i++) {
        char piece[32];
        int len = snprintf(piece, sizeof piece, "[PAD%u]", i);
        memset(&tk[i], 0, sizeof tk[i]);
        tk[i].type = NIB_TOK_UNUSED;
        if (tok_spec_set_piece(&tk[i], piece, (size_t)len)) {
            t->n_vocab = i;
            return nib_fail(err, errlen, "out of memory");
        }
    }
    t->n_vocab = n;
    return 0;
}

/* ---- import ---- */

static int read_config(const char *dir, struct hf_config *c, char *err, size_t errlen)
{
    char *p = join(dir, "config.json"), why[400];
    const uint8_t *map;
    size_t size;
    if (!p)
        return nib_fail(err, errlen, "out of memory");
    if (nib_map_file(p, &map, &size, why, sizeof why)) {
        nib_fail(err, errlen, "%s", why);
        free(p);
        return -1;
    }
    int rc = hf_config_parse((const char *)map, size, c, why, sizeof why);
    if (rc)
        nib_fail(err, errlen, "%s/%s", dir, why);
    nib_unmap_file(map, size);
    free(p);
    return rc;
}

static int fill_model(struct llama_model *m, const struct hf_config *c, const char *dir, char *err,
                      size_t errlen)
{
    struct nib_hparams *hp = &m->hp;
    hp->dim = c->dim;
    hp->n_layers = c->n_layers;
    hp->n_heads = c->n_heads;
    hp->n_kv_heads = c->n_kv_heads;
    hp->head_dim = c->head_dim;
    hp->ffn_dim = c->ffn_dim;
    hp->vocab_size = c->vocab_size;
    hp->ctx_len = c->ctx_len;
    hp->rope_dim = c->rope_dim;
    hp->rope_theta = c->rope_theta;
    hp->norm_eps = c->norm_eps;
    hp->arch = c->arch;
    m->arch = c->arch;
    m->ffn_act = c->ffn_act;
    m->embed_scale = c->embed_scale;
    m->attn_scale = c->attn_scale;
    m->attn_softcap = c->attn_softcap;
    m->final_softcap = c->final_softcap;
    if (c->rope_llama3 || c->rs_linear > 0) {
        m->rope_freq_factors = malloc(c->rope_dim / 2 * sizeof(float));
        if (!m->rope_freq_factors)
            return nib_fail(err, errlen, "out of memory");
        if (c->rope_llama3)
            hf_llama3_freq_factors(c, m->rope_freq_factors);
        else
            for (uint32_t i = 0; i < c->rope_dim / 2; i++)
                m->rope_freq_factors[i] = c->rs_linear;
    }
    if (hf_tokenizer_load(dir, &m->tok, err, errlen))
        return -1;
    if (pad_vocab(&m->tok, c->vocab_size, dir, err, errlen))
        return -1;
    /* hparams keep ids for the header; -1 (none) is stored as 0 with add_bos off */
    hp->bos_id = m->tok.bos_id >= 0 ? (uint32_t)m->tok.bos_id : 0;
    hp->eos_id = m->tok.eos_id >= 0 ? (uint32_t)m->tok.eos_id : 0;
    hp->add_bos = m->tok.bos_id >= 0 ? (uint32_t)m->tok.add_bos : 0;
    return 0;
}

int hf_import(struct hf_dir **out, struct llama_model *m, const char *dir, char *err, size_t errlen)
{
    *out = NULL;
    memset(m, 0, sizeof *m);
    struct hf_config *c = malloc(sizeof *c);
    struct hf_dir *d = calloc(1, sizeof *d);
    if (!c || !d) {
        free(c);
        free(d);
        return nib_fail(err, errlen, "out of memory");
    }
    int rc = -1;
    if (read_config(dir, c, err, errlen))
        goto out;
    if (exists(dir, "model.safetensors")) {
        if (add_shard(d, dir, "model.safetensors", err, errlen))
            goto out;
    } else if (exists(dir, "model.safetensors.index.json")) {
        if (open_sharded(d, dir, err, errlen))
            goto out;
    } else {
        nib_fail(err, errlen,
                 "%s: missing model.safetensors (or model.safetensors.index.json and its shards)%s",
                 dir,
                 exists(dir, "pytorch_model.bin")
                     ? "; pytorch_model.bin is not read: save the model as safetensors"
                     : "");
        goto out;
    }
    struct binder b = {d, c, dir, err, errlen};
    if (bind_all(&b, m) || fill_model(m, c, dir, err, errlen))
        goto out;
    rc = 0;
out:
    free(c);
    if (rc) {
        llama_model_free(m);
        hf_dir_close(d);
    } else {
        *out = d;
    }
    return rc;
}
