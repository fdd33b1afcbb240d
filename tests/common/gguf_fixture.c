/* Byte-level GGUF builder for tests. Deliberately independent of
 * tools/compiler/gguf.c and tools/compiler/gguf_write.c: it knows the format from the spec,
 * so a bug shared by reader and writer cannot hide. */
#include "tests/common/gguf_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml / gguf numbers, restated here on purpose (see above). */
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q8_0 = 8, T_BF16 = 30 };
enum { V_U32 = 4, V_I32 = 5, V_F32 = 6, V_BOOL = 7, V_STR = 8, V_ARR = 9 };

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "fixture: out of memory\n");
        abort();
    }
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "fixture: out of memory\n");
        abort();
    }
    return p;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

uint8_t *fx_dup(const uint8_t *p, size_t n)
{
    uint8_t *q = xmalloc(n);
    if (n)
        memcpy(q, p, n);
    return q;
}

void fx_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void fx_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- growable byte buffer ---- */

struct gb {
    uint8_t *p;
    size_t n, cap;
};

static void gb_bytes(struct gb *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = xrealloc(b->p, b->cap);
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void gb_u32(struct gb *b, uint32_t v)
{
    uint8_t t[4];
    fx_put_u32(t, v);
    gb_bytes(b, t, 4);
}

static void gb_u64(struct gb *b, uint64_t v)
{
    uint8_t t[8];
    fx_put_u64(t, v);
    gb_bytes(b, t, 8);
}

static void gb_f32(struct gb *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    gb_u32(b, u);
}

static void gb_str(struct gb *b, const char *s, size_t n)
{
    gb_u64(b, n);
    gb_bytes(b, s, n);
}

static void gb_pad(struct gb *b, size_t align)
{
    static const uint8_t zero[64];
    while (b->n % align)
        gb_bytes(b, zero, (align - b->n % align) < 64 ? align - b->n % align : 64);
}

/* ---- exact float encodings (abort when the value is not representable,
 * which would be a fixture bug) ---- */

static uint16_t enc_f16(float x)
{
    if (x == 0)
        return signbit(x) ? 0x8000 : 0;
    int e;
    float m = frexpf(fabsf(x), &e);  /* |x| = m * 2^e, m in [0.5, 1) */
    float frac = (m * 2 - 1) * 1024; /* normal f16: (1 + frac/1024) * 2^(e-1) */
    int be = e - 1 + 15;
    if (be < 1 || be > 30 || frac != floorf(frac)) {
        fprintf(stderr, "fixture: %g is not an exact normal f16\n", x);
        abort();
    }
    return (uint16_t)((x < 0 ? 0x8000 : 0) | be << 10 | (int)frac);
}

static uint16_t enc_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if (u & 0xffff) {
        fprintf(stderr, "fixture: %g is not an exact bf16\n", x);
        abort();
    }
    return (uint16_t)(u >> 16);
}

/* ---- generated payloads ---- */

static float block_d(uint64_t b, uint32_t seed)
{
    return 0.0625f * (float)(1 + (b + seed) % 4);
}

static int q8_of(uint64_t b, uint32_t seed, int j)
{
    return (int)((j * 5 + b * 3 + seed) % 255) - 127;
}

/* Nibble of element j (0..31) of block b. */
static int q4_of(uint64_t b, uint32_t seed, int j)
{
    int k = j % 16;
    return j < 16 ? (int)((k + b + seed) & 15) : (int)((k * 3 + b + seed) & 15);
}

float fx_value(uint32_t type, uint32_t seed, uint64_t i)
{
    uint64_t b = i / 32;
    int j = (int)(i % 32);
    switch (type) {
    case T_Q8_0: return (float)q8_of(b, seed, j) * block_d(b, seed);
    case T_Q4_0: return (float)(q4_of(b, seed, j) - 8) * block_d(b, seed);
    case T_Q4_1: return (float)q4_of(b, seed, j) * block_d(b, seed) - 0.5f;
    default: return (float)((int)((i * 7 + seed * 3) % 29) - 14) / 8.0f;
    }
}

static uint64_t n_elems(const struct fx_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims && d < 4; d++)
        n *= t->ne[d];
    return n;
}

static void gb_f16(struct gb *b, float x)
{
    uint16_t h = enc_f16(x);
    uint8_t t[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
    gb_bytes(b, t, 2);
}

static void gen_blocks(struct gb *b, uint32_t type, uint32_t seed, uint64_t n)
{
    for (uint64_t blk = 0; blk < n / 32; blk++) {
        gb_f16(b, block_d(blk, seed));
        if (type == T_Q4_1)
            gb_f16(b, -0.5f);
        uint8_t q[32];
        if (type == T_Q8_0) {
            for (int j = 0; j < 32; j++)
                q[j] = (uint8_t)(int8_t)q8_of(blk, seed, j);
            gb_bytes(b, q, 32);
        } else {
            for (int j = 0; j < 16; j++)
                q[j] = (uint8_t)(q4_of(blk, seed, j) | q4_of(blk, seed, j + 16) << 4);
            gb_bytes(b, q, 16);
        }
    }
}

static void gen_payload(struct gb *b, const struct fx_tensor *t)
{
    uint64_t n = n_elems(t);
    if (t->raw) {
        gb_bytes(b, t->raw, t->raw_len);
        return;
    }
    switch (t->type) {
    case T_F32:
        for (uint64_t i = 0; i < n; i++)
            gb_f32(b, fx_value(T_F32, t->seed, i));
        break;
    case T_F16:
        for (uint64_t i = 0; i < n; i++)
            gb_f16(b, fx_value(T_F16, t->seed, i));
        break;
    case T_BF16:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t h = enc_bf16(fx_value(T_BF16, t->seed, i));
            uint8_t x[2] = {(uint8_t)h, (uint8_t)(h >> 8)};
            gb_bytes(b, x, 2);
        }
        break;
    case T_Q8_0:
    case T_Q4_0:
    case T_Q4_1: gen_blocks(b, t->type, t->seed, n); break;
    default: /* a type the reader should reject: any bytes will do */
        for (uint64_t i = 0; i < n; i++)
            gb_bytes(b, "\x5a", 1);
    }
}

/* ---- vocabulary ---- */

const char *fx_piece(uint32_t id, char buf[32])
{
    static const char *const special[] = {"<unk>", "<s>", "</s>"};
    if (id < 3)
        return special[id];
    if (id < 6)
        snprintf(buf, 32, "<0x%02X>", id - 3);
    else
        snprintf(buf, 32, "\xe2\x96\x81w%u", id);
    return buf;
}

float fx_score(uint32_t id)
{
    return id < 3 ? 0.0f : -0.25f * (float)id;
}

uint32_t fx_tok_type(uint32_t id)
{
    if (id == 0)
        return 2; /* unknown */
    if (id < 3)
        return 3;          /* control */
    return id < 6 ? 6 : 1; /* byte : normal */
}

/* ---- model description ---- */

void fx_default_params(struct fx_params *p)
{
    *p = (struct fx_params){.version = 3,
                            .dim = 8,
                            .n_layers = 2,
                            .n_heads = 2,
                            .n_kv_heads = 1,
                            .ffn_dim = 16,
                            .vocab = 20,
                            .ctx = 64,
                            .rope_dim = 2,
                            .wtype = T_F32,
                            .ntype = T_F32};
}

void fx_arch_params(struct fx_params *p, const char *arch)
{
    fx_default_params(p);
    p->arch = arch;
    if (!strcmp(arch, "qwen2")) {
        p->qkv_bias = 1;
    } else if (!strcmp(arch, "qwen3")) {
        p->qk_norm = 1;
        p->head_dim = 6;
    } else if (!strcmp(arch, "phi3")) {
        p->fused_qkv = 1;
        p->fused_up = 1;
    } else if (!strcmp(arch, "gemma2")) {
        p->post_norms = 1;
        p->head_dim = 6;
        p->tied = 1;
    }
}

float fx_rope_freq(uint32_t i)
{
    return 1.0f + 0.5f * (float)i;
}

void fx_quant_params(struct fx_params *p, uint32_t wtype)
{
    fx_default_params(p);
    p->dim = 32;
    p->n_heads = 4;
    p->n_kv_heads = 2;
    p->ffn_dim = 64;
    p->rope_dim = 4;
    p->wtype = wtype;
}

static struct fx_kv *find_kv(struct fx_model *m, const char *key)
{
    for (size_t i = 0; i < m->n_kv; i++)
        if (!strcmp(m->kv[i].key, key))
            return &m->kv[i];
    return NULL;
}

void fx_add_raw(struct fx_model *m, const char *key, uint32_t type, const void *val, size_t len)
{
    m->kv = xrealloc(m->kv, (m->n_kv + 1) * sizeof *m->kv);
    m->kv[m->n_kv++] = (struct fx_kv){xstrdup(key), type, fx_dup(val, len), len};
}

void fx_set_raw(struct fx_model *m, const char *key, uint32_t type, const void *val, size_t len)
{
    struct fx_kv *kv = find_kv(m, key);
    if (!kv) {
        fx_add_raw(m, key, type, val, len);
        return;
    }
    free(kv->val);
    kv->type = type;
    kv->val = fx_dup(val, len);
    kv->val_len = len;
}

void fx_set_u32(struct fx_model *m, const char *key, uint32_t v)
{
    uint8_t b[4];
    fx_put_u32(b, v);
    fx_set_raw(m, key, V_U32, b, 4);
}

void fx_set_i32(struct fx_model *m, const char *key, int32_t v)
{
    uint8_t b[4];
    fx_put_u32(b, (uint32_t)v);
    fx_set_raw(m, key, V_I32, b, 4);
}

void fx_set_f32(struct fx_model *m, const char *key, float v)
{
    uint32_t u;
    uint8_t b[4];
    memcpy(&u, &v, 4);
    fx_put_u32(b, u);
    fx_set_raw(m, key, V_F32, b, 4);
}

void fx_set_bool(struct fx_model *m, const char *key, int v)
{
    uint8_t b = v ? 1 : 0;
    fx_set_raw(m, key, V_BOOL, &b, 1);
}

void fx_set_str(struct fx_model *m, const char *key, const char *v)
{
    struct gb b = {0};
    gb_str(&b, v, strlen(v));
    fx_set_raw(m, key, V_STR, b.p, b.n);
    free(b.p);
}

int fx_del(struct fx_model *m, const char *key)
{
    struct fx_kv *kv = find_kv(m, key);
    if (!kv)
        return 0;
    free(kv->key);
    free(kv->val);
    size_t i = (size_t)(kv - m->kv);
    memmove(kv, kv + 1, (m->n_kv - i - 1) * sizeof *kv);
    m->n_kv--;
    return 1;
}

struct fx_tensor *fx_tensor(struct fx_model *m, const char *name)
{
    for (size_t i = 0; i < m->n_t; i++)
        if (!strcmp(m->t[i].name, name))
            return &m->t[i];
    return NULL;
}

int fx_del_tensor(struct fx_model *m, const char *name)
{
    struct fx_tensor *t = fx_tensor(m, name);
    if (!t)
        return 0;
    free(t->name);
    free(t->raw);
    size_t i = (size_t)(t - m->t);
    memmove(t, t + 1, (m->n_t - i - 1) * sizeof *t);
    m->n_t--;
    return 1;
}

struct fx_tensor *fx_add_tensor(struct fx_model *m, const char *name, uint32_t type,
                                uint32_t n_dims, const uint64_t *ne)
{
    m->t = xrealloc(m->t, (m->n_t + 1) * sizeof *m->t);
    struct fx_tensor *t = &m->t[m->n_t];
    *t = (struct fx_tensor){.name = xstrdup(name),
                            .n_dims = n_dims,
                            .ne = {1, 1, 1, 1},
                            .type = type,
                            .seed = (uint32_t)m->n_t};
    for (uint32_t d = 0; d < n_dims && d < 4; d++)
        t->ne[d] = ne[d];
    m->n_t++;
    return t;
}

void fx_tensor_set_raw(struct fx_tensor *t, const void *data, size_t len)
{
    free(t->raw);
    t->raw = fx_dup(data, len);
    t->raw_len = len;
}

static void add_vocab(struct fx_model *m, uint32_t n)
{
    struct gb b = {0};
    char buf[32];
    gb_u32(&b, V_STR);
    gb_u64(&b, n);
    for (uint32_t i = 0; i < n; i++) {
        const char *s = fx_piece(i, buf);
        gb_str(&b, s, strlen(s));
    }
    fx_set_raw(m, "tokenizer.ggml.tokens", V_ARR, b.p, b.n);
    b.n = 0;
    gb_u32(&b, V_F32);
    gb_u64(&b, n);
    for (uint32_t i = 0; i < n; i++)
        gb_f32(&b, fx_score(i));
    fx_set_raw(m, "tokenizer.ggml.scores", V_ARR, b.p, b.n);
    b.n = 0;
    gb_u32(&b, V_I32);
    gb_u64(&b, n);
    for (uint32_t i = 0; i < n; i++)
        gb_u32(&b, fx_tok_type(i));
    fx_set_raw(m, "tokenizer.ggml.token_type", V_ARR, b.p, b.n);
    free(b.p);
}

static void add_matrix(struct fx_model *m, const char *name, uint32_t type, uint64_t cols,
                       uint64_t rows)
{
    uint64_t ne[2] = {cols, rows};
    fx_add_tensor(m, name, type, 2, ne);
}

static void add_vector(struct fx_model *m, const char *name, uint32_t type, uint64_t n)
{
    uint64_t ne[1] = {n};
    fx_add_tensor(m, name, type, 1, ne);
}

static void add_tensors(struct fx_model *m)
{
    const struct fx_params *p = &m->p;
    uint64_t hd = p->head_dim ? p->head_dim : p->dim / p->n_heads, q = p->n_heads * hd,
             kv = p->n_kv_heads * hd;
    add_matrix(m, "token_embd.weight", p->wtype, p->dim, p->vocab);
    add_vector(m, "output_norm.weight", p->ntype, p->dim);
    if (!p->tied)
        add_matrix(m, "output.weight", p->wtype, p->dim, p->vocab);
    if (p->rope_freqs) {
        float f[64];
        for (uint32_t i = 0; i < p->rope_dim / 2 && i < 64; i++)
            f[i] = fx_rope_freq(i);
        add_vector(m, "rope_freqs.weight", T_F32, p->rope_dim / 2);
        fx_tensor_set_raw(&m->t[m->n_t - 1], f, p->rope_dim / 2 * sizeof(float));
    }
    for (uint32_t l = 0; l < p->n_layers; l++) {
        char n[64];
#define NAME(part) (snprintf(n, sizeof n, "blk.%u." part, l), n)
        add_vector(m, NAME("attn_norm.weight"), p->ntype, p->dim);
        if (p->fused_qkv) {
            add_matrix(m, NAME("attn_qkv.weight"), p->wtype, p->dim, q + 2 * kv);
            if (p->qkv_bias)
                add_vector(m, NAME("attn_qkv.bias"), T_F32, q + 2 * kv);
        } else {
            add_matrix(m, NAME("attn_q.weight"), p->wtype, p->dim, q);
            add_matrix(m, NAME("attn_k.weight"), p->wtype, p->dim, kv);
            add_matrix(m, NAME("attn_v.weight"), p->wtype, p->dim, kv);
            if (p->qkv_bias) {
                add_vector(m, NAME("attn_q.bias"), T_F32, q);
                add_vector(m, NAME("attn_k.bias"), T_F32, kv);
                add_vector(m, NAME("attn_v.bias"), T_F32, kv);
            }
        }
        if (p->qk_norm) {
            add_vector(m, NAME("attn_q_norm.weight"), p->ntype, hd);
            add_vector(m, NAME("attn_k_norm.weight"), p->ntype, hd);
        }
        add_matrix(m, NAME("attn_output.weight"), p->wtype, q, p->dim);
        if (p->post_norms)
            add_vector(m, NAME("post_attention_norm.weight"), p->ntype, p->dim);
        add_vector(m, NAME("ffn_norm.weight"), p->ntype, p->dim);
        if (p->fused_up) {
            add_matrix(m, NAME("ffn_up.weight"), p->wtype, p->dim, 2 * p->ffn_dim);
        } else {
            add_matrix(m, NAME("ffn_gate.weight"), p->wtype, p->dim, p->ffn_dim);
            add_matrix(m, NAME("ffn_up.weight"), p->wtype, p->dim, p->ffn_dim);
        }
        add_matrix(m, NAME("ffn_down.weight"), p->wtype, p->ffn_dim, p->dim);
        if (p->post_norms)
            add_vector(m, NAME("post_ffw_norm.weight"), p->ntype, p->dim);
#undef NAME
    }
}

/* "<arch>.<suffix>" */
static const char *akey(const struct fx_params *p, const char *suffix, char buf[96])
{
    snprintf(buf, 96, "%s.%s", p->arch ? p->arch : "llama", suffix);
    return buf;
}

void fx_model_init(struct fx_model *m, const struct fx_params *p)
{
    char k[96];
    memset(m, 0, sizeof *m);
    m->p = *p;
    fx_set_str(m, "general.architecture", p->arch ? p->arch : "llama");
    fx_set_str(m, "general.name", "nibble fixture");
    if (p->alignment)
        fx_set_u32(m, "general.alignment", p->alignment);
    fx_set_u32(m, akey(p, "context_length", k), p->ctx);
    fx_set_u32(m, akey(p, "embedding_length", k), p->dim);
    fx_set_u32(m, akey(p, "block_count", k), p->n_layers);
    fx_set_u32(m, akey(p, "feed_forward_length", k), p->ffn_dim);
    fx_set_u32(m, akey(p, "attention.head_count", k), p->n_heads);
    fx_set_u32(m, akey(p, "attention.head_count_kv", k), p->n_kv_heads);
    if (p->head_dim) {
        fx_set_u32(m, akey(p, "attention.key_length", k), p->head_dim);
        fx_set_u32(m, akey(p, "attention.value_length", k), p->head_dim);
    }
    fx_set_u32(m, akey(p, "rope.dimension_count", k), p->rope_dim);
    fx_set_f32(m, akey(p, "rope.freq_base", k), 500000.0f);
    fx_set_f32(m, akey(p, "attention.layer_norm_rms_epsilon", k), 1e-5f);
    fx_set_str(m, "tokenizer.ggml.model", "llama");
    add_vocab(m, p->vocab);
    fx_set_u32(m, "tokenizer.ggml.bos_token_id", 1);
    fx_set_u32(m, "tokenizer.ggml.eos_token_id", 2);
    fx_set_bool(m, "tokenizer.ggml.add_bos_token", 0);
    add_tensors(m);
}

void fx_model_free(struct fx_model *m)
{
    for (size_t i = 0; i < m->n_kv; i++) {
        free(m->kv[i].key);
        free(m->kv[i].val);
    }
    for (size_t i = 0; i < m->n_t; i++) {
        free(m->t[i].name);
        free(m->t[i].raw);
    }
    free(m->kv);
    free(m->t);
    memset(m, 0, sizeof *m);
}

/* ---- serialization ---- */

static uint64_t payload_size(const struct fx_tensor *t)
{
    uint64_t n = n_elems(t);
    if (t->raw)
        return t->raw_len;
    switch (t->type) {
    case T_F32: return n * 4;
    case T_F16:
    case T_BF16: return n * 2;
    case T_Q8_0: return n / 32 * 34;
    case T_Q4_0: return n / 32 * 18;
    case T_Q4_1: return n / 32 * 20;
    default: return n;
    }
}

/* Alignment the file will declare; invalid values lay out with 32 (the
 * reader is expected to reject them anyway). */
static size_t layout_alignment(const struct fx_model *m)
{
    for (size_t i = 0; i < m->n_kv; i++) {
        const struct fx_kv *kv = &m->kv[i];
        if (!strcmp(kv->key, "general.alignment") && kv->type == V_U32 && kv->val_len == 4) {
            uint32_t a = (uint32_t)kv->val[0] | (uint32_t)kv->val[1] << 8 |
                         (uint32_t)kv->val[2] << 16 | (uint32_t)kv->val[3] << 24;
            if (a && !(a & (a - 1)) && a <= (1u << 20))
                return a;
        }
    }
    return 32;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static size_t *offsets(size_t n)
{
    return xmalloc(n * sizeof(size_t));
}

static void collect_bounds(struct fx_file *f)
{
    size_t k = 0;
    f->bounds = offsets(3 + f->n_kv + 3 * f->n_t + 1);
    f->bounds[k++] = f->header_end;
    for (size_t i = 0; i < f->n_kv; i++)
        f->bounds[k++] = f->kv_end[i];
    for (size_t i = 0; i < f->n_t; i++) {
        f->bounds[k++] = f->ti_end[i];
        f->bounds[k++] = f->t_start[i];
        f->bounds[k++] = f->t_end[i];
    }
    f->bounds[k++] = f->data_start;
    f->bounds[k++] = f->size;
    qsort(f->bounds, k, sizeof(size_t), cmp_size);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (!u || f->bounds[u - 1] != f->bounds[i])
            f->bounds[u++] = f->bounds[i];
    f->n_bounds = u;
}

void fx_build(const struct fx_model *m, struct fx_file *f)
{
    struct gb b = {0};
    size_t align = layout_alignment(m);
    memset(f, 0, sizeof *f);
    f->n_kv = m->n_kv;
    f->n_t = m->n_t;
    f->kv_start = offsets(m->n_kv + 1), f->kv_type_at = offsets(m->n_kv + 1),
    f->kv_end = offsets(m->n_kv + 1);
    f->ti_start = offsets(m->n_t + 1), f->ti_ndims_at = offsets(m->n_t + 1),
    f->ti_type_at = offsets(m->n_t + 1);
    f->ti_offset_at = offsets(m->n_t + 1), f->ti_end = offsets(m->n_t + 1);
    f->t_start = offsets(m->n_t + 1), f->t_end = offsets(m->n_t + 1);

    gb_bytes(&b, "GGUF", 4);
    gb_u32(&b, m->p.version);
    gb_u64(&b, m->n_t);
    gb_u64(&b, m->n_kv);
    f->header_end = b.n;
    for (size_t i = 0; i < m->n_kv; i++) {
        f->kv_start[i] = b.n;
        gb_str(&b, m->kv[i].key, strlen(m->kv[i].key));
        f->kv_type_at[i] = b.n;
        gb_u32(&b, m->kv[i].type);
        gb_bytes(&b, m->kv[i].val, m->kv[i].val_len);
        f->kv_end[i] = b.n;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < m->n_t; i++) {
        const struct fx_tensor *t = &m->t[i];
        f->ti_start[i] = b.n;
        gb_str(&b, t->name, strlen(t->name));
        f->ti_ndims_at[i] = b.n;
        gb_u32(&b, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims && d < 4; d++)
            gb_u64(&b, t->ne[d]);
        f->ti_type_at[i] = b.n;
        gb_u32(&b, t->type);
        f->ti_offset_at[i] = b.n;
        gb_u64(&b, off);
        f->ti_end[i] = b.n;
        off = (off + payload_size(t) + align - 1) / align * align;
    }
    gb_pad(&b, align);
    f->data_start = b.n;
    for (size_t i = 0; i < m->n_t; i++) {
        gb_pad(&b, align);
        f->t_start[i] = b.n;
        gen_payload(&b, &m->t[i]);
        f->t_end[i] = b.n;
    }
    f->buf = xrealloc(b.p, b.n); /* exact size, so ASan sees any over-read */
    f->size = b.n;
    collect_bounds(f);
}

void fx_build_default(struct fx_file *f, const struct fx_params *p)
{
    struct fx_params def;
    struct fx_model m;
    if (!p) {
        fx_default_params(&def);
        p = &def;
    }
    fx_model_init(&m, p);
    fx_build(&m, f);
    fx_model_free(&m);
}

void fx_file_free(struct fx_file *f)
{
    free(f->buf);
    free(f->kv_start), free(f->kv_type_at), free(f->kv_end);
    free(f->ti_start), free(f->ti_ndims_at), free(f->ti_type_at), free(f->ti_offset_at),
        free(f->ti_end);
    free(f->t_start), free(f->t_end), free(f->bounds);
    memset(f, 0, sizeof *f);
}
