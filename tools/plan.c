#include "tools/plan.h"

#include "model_blob/blob_view.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct builder {
    struct nib_plan *p;
    uint32_t cap_t, cap_o;
    uint64_t act; /* next free activation byte */
    int oom;
};

static uint64_t act_alloc(struct builder *b, uint64_t bytes)
{
    uint64_t off = b->act;
    b->act += (bytes + 63) & ~63ull; /* every buffer on its own cache lines */
    return off;
}

static uint32_t add_tensor(struct builder *b, const char *name, enum plan_tensor_kind kind,
                           uint32_t rows, uint32_t cols, const struct llama_weight *s0,
                           const struct llama_weight *s1, const struct llama_weight *s2)
{
    struct nib_plan *p = b->p;
    if (p->n_tensors == b->cap_t) {
        b->cap_t = b->cap_t ? 2 * b->cap_t : 64;
        void *n = realloc(p->tensors, b->cap_t * sizeof *p->tensors);
        if (!n) {
            b->oom = 1;
            return 0;
        }
        p->tensors = n;
    }
    struct plan_tensor *t = &p->tensors[p->n_tensors];
    memset(t, 0, sizeof *t);
    snprintf(t->rec.name, NIB_NAME_MAX, "%s", name);
    t->rec.dtype = NIB_DT_F32;
    t->rec.rows = rows;
    t->rec.cols = cols;
    t->rec.tile_n = 1;
    t->rec.tile_k = 1;
    t->kind = kind;
    t->src[0] = s0;
    t->src[1] = s1;
    t->src[2] = s2;
    t->n_src = s2 ? 3 : s1 ? 2 : s0 ? 1 : 0;
    return p->n_tensors++;
}

static struct nib_op *add_op(struct builder *b, uint32_t code, uint32_t tensor)
{
    struct nib_plan *p = b->p;
    static struct nib_op dummy;
    if (p->n_ops == b->cap_o) {
        b->cap_o = b->cap_o ? 2 * b->cap_o : 256;
        void *n = realloc(p->ops, b->cap_o * sizeof *p->ops);
        if (!n) {
            b->oom = 1;
            return &dummy;
        }
        p->ops = n;
    }
    struct nib_op *op = &p->ops[p->n_ops++];
    memset(op, 0, sizeof *op);
    op->code = code;
    op->tensor = tensor;
    return op;
}

static void matmul(struct builder *b, uint32_t t, uint64_t src, uint64_t dst, uint32_t n,
                   uint32_t k, int residual)
{
    struct nib_op *op = add_op(b, NIB_OP_MATMUL, t);
    op->src0 = src;
    op->dst = dst;
    op->n = n;
    op->k = k;
    if (residual) {
        op->p0 = NIB_EPI_ADD;
        op->src1 = dst; /* y = W x + y: each output reads only its own old value */
    }
}

static void rmsnorm(struct builder *b, uint32_t t, uint64_t src, uint64_t dst, uint32_t n,
                    float eps)
{
    struct nib_op *op = add_op(b, NIB_OP_RMSNORM, t);
    op->src0 = src;
    op->dst = dst;
    op->n = n;
    op->f0 = eps;
}

int nib_plan_build(struct nib_plan *p, const struct llama_model *m, const struct plan_opts *o,
                   char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    if (o->dtype != NIB_DT_F32) {
        snprintf(err, errlen, "weight format %s is not supported by this version (f32 only)",
                 nib_dtype_name(o->dtype));
        return -1;
    }
    struct builder b = {.p = p};
    struct nib_hparams hp = m->hp;
    uint32_t cap = o->max_ctx ? o->max_ctx : 2048;
    if (hp.ctx_len > cap)
        hp.ctx_len = cap;
    p->hp = hp;
    const uint32_t dim = hp.dim, hd = hp.head_dim, ffn = hp.ffn_dim, ctx = hp.ctx_len;
    const uint32_t q_dim = hp.n_heads * hd, kv_dim = hp.n_kv_heads * hd;
    const uint32_t qkv_dim = q_dim + 2 * kv_dim;

    /* Activation buffers. */
    uint64_t x = act_alloc(&b, dim * 4ull);
    uint64_t xb = act_alloc(&b, (dim > q_dim ? dim : q_dim) * 4ull);
    uint64_t qkv = act_alloc(&b, qkv_dim * 4ull);
    uint64_t att_out = act_alloc(&b, q_dim * 4ull);
    uint64_t hb = act_alloc(&b, 2ull * ffn * 4ull);
    uint64_t scores = act_alloc(&b, (uint64_t)hp.n_heads * ctx * 4ull);
    p->logits_off = act_alloc(&b, hp.vocab_size * 4ull);
    p->token_off = act_alloc(&b, 4);
    p->pos_off = act_alloc(&b, 4);
    p->act_size = b.act;
    /* KV cache after the activations: per layer, ctx rows of K then ctx rows of V. */
    const uint64_t row = kv_dim * 4ull, layer_kv = 2ull * ctx * row;
    p->kv_size = layer_kv * hp.n_layers;

    uint32_t t_embd = add_tensor(&b, "token_embd", PT_ROWS, hp.vocab_size, dim, &m->tok_embd, NULL, NULL);
    uint32_t t_rope = add_tensor(&b, "rope_cos_sin", PT_ROPE_TABLE, ctx, hp.rope_dim, NULL, NULL, NULL);
    struct nib_op *op = add_op(&b, NIB_OP_EMBED, t_embd);
    op->dst = x;
    op->n = dim;

    for (uint32_t l = 0; l < hp.n_layers; l++) {
        const struct llama_layer *L = &m->layers[l];
        char name[NIB_NAME_MAX];
        uint64_t kc = p->act_size + l * layer_kv;

        snprintf(name, sizeof name, "blk.%u.attn_norm", l);
        uint32_t t_an = add_tensor(&b, name, PT_ROWS, 1, dim, &L->attn_norm, NULL, NULL);
        snprintf(name, sizeof name, "blk.%u.attn_qkv", l);
        uint32_t t_qkv = add_tensor(&b, name, PT_ROWS, qkv_dim, dim, &L->wq, &L->wk, &L->wv);
        snprintf(name, sizeof name, "blk.%u.attn_output", l);
        uint32_t t_o = add_tensor(&b, name, PT_ROWS, dim, q_dim, &L->wo, NULL, NULL);
        snprintf(name, sizeof name, "blk.%u.ffn_norm", l);
        uint32_t t_fn = add_tensor(&b, name, PT_ROWS, 1, dim, &L->ffn_norm, NULL, NULL);
        snprintf(name, sizeof name, "blk.%u.ffn_gate_up", l);
        uint32_t t_gu = add_tensor(&b, name, PT_ROWS, 2 * ffn, dim, &L->w_gate, &L->w_up, NULL);
        snprintf(name, sizeof name, "blk.%u.ffn_down", l);
        uint32_t t_d = add_tensor(&b, name, PT_ROWS, dim, ffn, &L->w_down, NULL, NULL);

        rmsnorm(&b, t_an, x, xb, dim, hp.norm_eps);
        matmul(&b, t_qkv, xb, qkv, qkv_dim, dim, 0);
        op = add_op(&b, NIB_OP_ROPE, t_rope); /* Q and K heads are adjacent: one pass */
        op->src0 = qkv;
        op->n = q_dim + kv_dim;
        op->k = hd;
        op->p0 = hp.n_heads + hp.n_kv_heads;
        op->p1 = hp.rope_dim;
        op = add_op(&b, NIB_OP_KV_STORE, UINT32_MAX);
        op->src0 = qkv + q_dim * 4ull;
        op->src1 = qkv + (q_dim + kv_dim) * 4ull;
        op->dst = kc;
        op->n = kv_dim;
        op->p0 = (uint32_t)row;
        op->p1 = (uint32_t)(ctx * row);
        op = add_op(&b, NIB_OP_ATTENTION, UINT32_MAX);
        op->src0 = qkv;
        op->src1 = kc;
        op->dst = att_out;
        op->n = hp.n_heads;
        op->k = hd;
        op->p0 = hp.n_kv_heads;
        op->p1 = (uint32_t)row;
        op->p2 = (uint32_t)(ctx * row);
        op->f0 = 1.0f / sqrtf((float)hd);
        op->scratch = scores;
        matmul(&b, t_o, att_out, x, dim, q_dim, 1);
        rmsnorm(&b, t_fn, x, xb, dim, hp.norm_eps);
        matmul(&b, t_gu, xb, hb, 2 * ffn, dim, 0);
        op = add_op(&b, NIB_OP_SILU_MUL, UINT32_MAX);
        op->src0 = hb;
        op->src1 = hb + ffn * 4ull;
        op->dst = hb;
        op->n = ffn;
        matmul(&b, t_d, hb, x, dim, ffn, 1);
    }
    uint32_t t_on = add_tensor(&b, "output_norm", PT_ROWS, 1, dim, &m->output_norm, NULL, NULL);
    uint32_t t_out = m->output_tied
                         ? t_embd
                         : add_tensor(&b, "output", PT_ROWS, hp.vocab_size, dim, &m->output, NULL, NULL);
    rmsnorm(&b, t_on, x, xb, dim, hp.norm_eps);
    matmul(&b, t_out, xb, p->logits_off, hp.vocab_size, dim, 0);
    if (ctx * row > UINT32_MAX) {
        snprintf(err, errlen, "KV cache of one layer (%llu bytes) exceeds 4 GiB; lower --ctx",
                 (unsigned long long)(ctx * row));
        nib_plan_free(p);
        return -1;
    }
    if (b.oom) {
        snprintf(err, errlen, "out of memory while planning");
        nib_plan_free(p);
        return -1;
    }
    return 0;
}

void nib_plan_free(struct nib_plan *p)
{
    free(p->tensors);
    free(p->ops);
    memset(p, 0, sizeof *p);
}
