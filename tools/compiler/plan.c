#include "tools/compiler/plan.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "tools/compiler/repack.h"

/* Quantized activation buffers, one per (K, block) pair, shared by every
 * op that needs that shape (the plan is sequential per token). */
struct qbuf {
    uint32_t k, block;
    uint64_t off;
};

struct builder {
    struct nib_plan *p;
    struct qbuf qbufs[16];
    int n_qbufs;
    const struct llama_model *m;
    const struct plan_opts *o;
    uint32_t cap_t, cap_o;
    uint64_t act;       /* next free activation byte */
    uint64_t wscratch;  /* private scratch a worker needs (NIB_OPF_NORM_IN, NORM_ADD) */
    uint32_t row_align; /* add_tensor: quantized sources start on multiples of this
                         * (0: NIB_Q_TILE_N) */
    int oom;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct builder *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, b->errlen, fmt, ap);
    va_end(ap);
    b->failed = 1;
}

static uint64_t act_alloc(struct builder *b, uint64_t bytes)
{
    uint64_t off = b->act;
    b->act += (bytes + 63) & ~63ull; /* every buffer on its own cache lines */
    return off;
}

int nib_plan_opts_quant(struct plan_opts *o, const char *quant, char *err, size_t errlen)
{
    struct nib_qspec f32 = {NIB_DT_F32, 0};
    o->matrix = o->output = f32;
    o->source = 0;
    o->ragged_q8c = o->head_rule = 0;
    if (!strcmp(quant, "f32"))
        return 0;
    if (!strcmp(quant, "source")) {
        o->source = 1;
        return 0;
    }
    if (!strcmp(quant, "q4")) {
        /* The default: q4h (super-blocks of 128, sub-scales per 16: at
         * q4/32's 4.5 bits, about three quarters of q4/32's mean KL with
         * the same rounding, docs/accuracy.md) for the layers; the LM
         * head, the most sensitive matrix, in int8 per channel unless
         * that would cost the model more than NIB_HEAD_Q8C_MAX_BITS
         * (head_rule). */
        o->matrix = (struct nib_qspec){NIB_DT_Q4H, 128};
        o->output = (struct nib_qspec){NIB_DT_Q8C, 0};
        o->ragged_q8c = 1;
        o->head_rule = 1;
        return 0;
    }
    if (nib_qspec_parse(quant, &o->matrix, err, errlen))
        return -1;
    o->output = o->matrix;
    return 0;
}

/* Rank formats by precision, to merge the requests of a fused tensor's parts. */
static int precision_rank(struct nib_qspec s)
{
    switch (s.dtype) {
    case NIB_DT_F32: return 1000;
    case NIB_DT_Q8F: return 950 - (int)s.group; /* f32 scale and minimum per 16 or 32 */
    case NIB_DT_Q8C: return 900 - (int)s.group;
    case NIB_DT_Q4F: return 550 - (int)s.group;
    case NIB_DT_Q4H: return 510 - (int)s.group / 16; /* finer than q4a/32 (docs/accuracy.md) */
    case NIB_DT_Q4A: return 500 - (int)s.group;
    case NIB_DT_Q4: return 400 - (int)s.group;
    default: return 100;
    }
}

/* Apply the --precision patterns to one name (GGUF tensor name or nibble's). */
static int apply_precision(struct builder *b, const char *name, struct nib_qspec *spec)
{
    const char *list = b->o->precision;
    int hit = 0;
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t n = end ? (size_t)(end - list) : strlen(list);
        char item[160];
        if (n >= sizeof item) {
            fail(b, "--precision entry too long: '%.*s'", (int)n, list);
            return 0;
        }
        memcpy(item, list, n);
        item[n] = 0;
        char *eq = strchr(item, '=');
        if (!eq || eq == item || !eq[1]) {
            fail(b, "--precision entry '%s' is not PATTERN=FORMAT", item);
            return 0;
        }
        *eq = 0;
        struct nib_qspec s;
        char why[200];
        if (nib_qspec_parse(eq + 1, &s, why, sizeof why)) {
            fail(b, "--precision '%s': %s", item, why);
            return 0;
        }
        char bare[NIB_NAME_MAX + 16];
        snprintf(bare, sizeof bare, "%s", name);
        char *dot = strstr(bare, ".weight");
        if (dot && !dot[7])
            *dot = 0;
        if (fnmatch(item, name, 0) == 0 || fnmatch(item, bare, 0) == 0) {
            *spec = s;
            hit = 1;
        }
        list = end ? end + 1 : NULL;
    }
    return hit;
}

/* --quant source: the most compact format that holds every source of a
 * fused tensor exactly (each source's own exact format, or a wider one:
 * q8f/16 holds every GGUF quantized type). 0, or -1 when a source is not
 * quantized. */
static int exact_common(const struct llama_weight *const *src, uint32_t n_src,
                        struct nib_qspec *out)
{
    struct nib_qspec cand[6];
    uint32_t nc = 0;
    for (uint32_t i = 0; i < n_src; i++)
        if (nib_repack_spec(src[i]->t->type, &cand[nc++]))
            return -1;
    cand[nc++] = (struct nib_qspec){NIB_DT_Q4F, 16};
    cand[nc++] = (struct nib_qspec){NIB_DT_Q8F, 32};
    cand[nc++] = (struct nib_qspec){NIB_DT_Q8F, 16};
    uint64_t best = UINT64_MAX;
    for (uint32_t c = 0; c < nc; c++) {
        int all = 1;
        for (uint32_t i = 0; i < n_src && all; i++)
            all = nib_repack_holds(src[i]->t->type, cand[c]);
        uint64_t size = nib_qformat_size(cand[c].dtype, cand[c].group, 8, 512);
        if (all && size < best) {
            best = size;
            *out = cand[c];
        }
    }
    return best == UINT64_MAX ? -1 : 0;
}

double nib_plan_head_q8c_bits(const struct llama_model *m)
{
    const struct llama_weight *out = m->output_tied ? &m->tok_embd : &m->output;
    double layers = 0, head = (double)out->rows * out->cols;
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        const struct llama_layer *y = &m->layers[l];
        const struct llama_weight *w[] = {&y->wq,     &y->wk,   &y->wv,    &y->wo,
                                          &y->w_gate, &y->w_up, &y->w_down};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++)
            layers += (double)w[i]->rows * w[i]->cols;
    }
    return head > 0 ? head / (layers + head) * (8.2 - 4.5) : 0;
}

uint32_t nib_plan_q4h_group(uint32_t group, uint32_t cols)
{
    uint32_t best = group;
    uint64_t best_size = nib_qformat_size(NIB_DT_Q4H, group, NIB_Q_TILE_N, cols);
    for (uint32_t g = group / 2; g >= 32; g /= 2) {
        const uint64_t size = nib_qformat_size(NIB_DT_Q4H, g, NIB_Q_TILE_N, cols);
        if (size < best_size) {
            best = g;
            best_size = size;
        }
    }
    return best;
}

/* The format of a matrix made of the given sources. */
static struct nib_qspec choose_spec(struct builder *b, const char *fused_name, int is_output,
                                    const struct llama_weight *const *src, uint32_t n_src)
{
    struct nib_qspec base = is_output ? b->o->output : b->o->matrix;
    if (is_output && b->o->head_rule && nib_plan_head_q8c_bits(b->m) > NIB_HEAD_Q8C_MAX_BITS)
        base = b->o->matrix;
    if (base.dtype == NIB_DT_Q4H && n_src)
        base.group = nib_plan_q4h_group(base.group, src[0]->cols);
    /* ragged: rows that the smallest group would pad (q4h's is 32) */
    const uint32_t unit = base.dtype == NIB_DT_Q4H ? 32 : base.group;
    if (b->o->ragged_q8c && !is_output && unit && n_src && src[0]->cols % unit)
        base = (struct nib_qspec){NIB_DT_Q8C, 0};
    struct nib_qspec best = {0, 0}, common;
    int best_rank = -1;
    const int exact = b->o->source && exact_common(src, n_src, &common) == 0;
    for (uint32_t i = 0; i < n_src; i++) {
        struct nib_qspec s = base, r;
        if (b->o->source && nib_repack_spec(src[i]->t->type, &r) == 0)
            s = exact ? common : r;
        char gname[NIB_NAME_MAX + 16];
        snprintf(gname, sizeof gname, "%.*s", (int)src[i]->t->name.len, src[i]->t->name.ptr);
        apply_precision(b, gname, &s);
        apply_precision(b, fused_name, &s);
        if (precision_rank(s) > best_rank) {
            best = s;
            best_rank = precision_rank(s);
        }
    }
    return best;
}

static uint32_t add_tensor(struct builder *b, const char *name, enum plan_tensor_kind kind,
                           uint32_t rows, uint32_t cols, struct nib_qspec spec,
                           const struct llama_weight *const *src, uint32_t n_src)
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
    t->kind = kind == PT_TILE_PAIRS ? PT_ROWS : kind;
    t->n_src = n_src;
    /* Quantized rows are packed in blocks of NIB_Q_TILE_N: each source
     * starts on a block so fused sources pack (and repack) independently.
     * Tile pairs (gate|up) interleave two sources' 8-row tiles, so every
     * 16-row block holds matching gate and up rows, for f32 too. */
    uint32_t align = spec.dtype == NIB_DT_F32 ? 1 : b->row_align ? b->row_align : NIB_Q_TILE_N;
    uint32_t r = 0;
    t->tile_pairs = kind == PT_TILE_PAIRS;
    for (uint32_t i = 0; i < n_src; i++) {
        t->src[i] = src[i];
        t->row_off[i] = r;
        r += i + 1 < n_src ? (src[i]->rows + align - 1) / align * align : src[i]->rows;
    }
    if (t->tile_pairs)
        r = 2 * ((src[0]->rows + NIB_Q_TILE_N - 1) / NIB_Q_TILE_N * NIB_Q_TILE_N);
    t->rec.rows = n_src ? r : rows;
    t->rec.cols = cols;
    t->rec.dtype = spec.dtype;
    t->rec.group = spec.group;
    t->rec.tile_n = nib_qformat_tile_n(spec.dtype, spec.group);
    t->rec.tile_k = nib_qformat_tile_k(spec.dtype, spec.group);
    if (!nib_qformat_valid(spec.dtype, spec.group) || t->rec.tile_n == 0)
        fail(b, "tensor '%s': format %s/%u is not supported", name, nib_dtype_name(spec.dtype),
             spec.group);
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

static uint64_t qact_buf(struct builder *b, uint32_t k, uint32_t block)
{
    for (int i = 0; i < b->n_qbufs; i++)
        if (b->qbufs[i].k == k && b->qbufs[i].block == block)
            return b->qbufs[i].off;
    if (b->n_qbufs == (int)(sizeof b->qbufs / sizeof b->qbufs[0])) {
        fail(b, "too many activation shapes");
        return 0;
    }
    uint64_t off = act_alloc(b, nib_qact_footprint(b->p->h.max_batch, k, block));
    b->qbufs[b->n_qbufs++] = (struct qbuf){k, block, off};
    return off;
}

/* An f32 buffer of max_batch rows of n floats; *stride gets the bytes
 * between rows (whole cache lines, so two rows never share one). */
static uint64_t rows_alloc(struct builder *b, uint64_t n, uint32_t *stride)
{
    *stride = (uint32_t)((n * 4 + 63) & ~63ull);
    return act_alloc(b, (uint64_t)*stride * b->p->h.max_batch);
}

/* The activation block a quantized per-group tensor t reads (32, 64, 128),
 * or 0: f32, or per channel (one scale over a whole row, which no op split
 * by rows or heads can compute alone). */
static uint32_t block_of(struct builder *b, uint32_t t)
{
    const struct nib_tensor_rec *r = &b->p->tensors[t].rec;
    return r->dtype == NIB_DT_F32 ? 0 : nib_qformat_act_block(r->dtype, r->group);
}

/* Where a matmul with tensor t reads its input: the f32 rows themselves, or
 * the int8 activation buffer its format consumes. */
static uint64_t input_of(struct builder *b, uint32_t t, uint64_t f32_rows, uint32_t k)
{
    const struct nib_tensor_rec *r = &b->p->tensors[t].rec;
    if (r->dtype == NIB_DT_F32)
        return f32_rows;
    return qact_buf(b, k, nib_qformat_act_block(r->dtype, r->group));
}

/* The input of consumer t from f32 rows (at src, stride) that no producer
 * could quantize itself: a quant op when t is quantized. */
static uint64_t quantized_input(struct builder *b, uint32_t t, uint64_t src, uint32_t stride,
                                uint32_t k)
{
    uint64_t in = input_of(b, t, src, k);
    if (in == src)
        return src;
    const struct nib_tensor_rec *r = &b->p->tensors[t].rec;
    struct nib_op *q = add_op(b, NIB_OP_QUANT, UINT32_MAX);
    q->src0 = src;
    q->src0_stride = stride;
    q->dst = in;
    q->n = k;
    q->quant.block = nib_qformat_act_block(r->dtype, r->group);
    return in;
}

/* dst rows = W . in (in: f32 rows of stride in_stride, or int8 activations). */
static struct nib_op *matmul(struct builder *b, uint32_t t, uint64_t in, uint32_t in_stride,
                             uint64_t dst, uint32_t dst_stride, uint32_t k)
{
    struct nib_op *op = add_op(b, NIB_OP_MATMUL, t);
    op->src0 = in;
    op->src0_stride = b->p->tensors[t].rec.dtype == NIB_DT_F32 ? in_stride : 0;
    op->dst = dst;
    op->dst_stride = dst_stride;
    op->n = b->p->tensors[t].rec.rows;
    op->k = k;
    return op;
}

/* dst rows = W . RMSNorm(x rows) with the norm inside the matmul
 * (NIB_OPF_NORM_IN): each worker normalizes (and quantizes) the rows itself
 * in its private scratch, whose size the plan tracks. */
static struct nib_op *norm_matmul(struct builder *b, uint32_t norm, uint32_t t, uint64_t x,
                                  uint32_t x_stride, uint64_t dst, uint32_t dst_stride, uint32_t k,
                                  float eps)
{
    const struct nib_tensor_rec *r = &b->p->tensors[t].rec;
    uint64_t need = (uint64_t)b->p->h.max_batch * ((k * 4ull + 63) & ~63ull);
    if (r->dtype != NIB_DT_F32)
        need += nib_qact_footprint(b->p->h.max_batch, k, nib_qformat_act_block(r->dtype, r->group));
    if (need > b->wscratch)
        b->wscratch = need;
    struct nib_op *op = matmul(b, t, x, x_stride, dst, dst_stride, k);
    op->src0_stride = x_stride;
    op->flags = NIB_OPF_NORM_IN;
    op->matmul.norm = (struct nib_norm_in_params){norm, eps};
    return op;
}

static const struct nib_qspec f32_spec = {NIB_DT_F32, 0};

/* A norm weight or other vector: one f32 row. */
static uint32_t add_vector(struct builder *b, const char *name, const struct llama_weight *w,
                           uint32_t n)
{
    const struct llama_weight *src[1] = {w};
    return add_tensor(b, name, PT_ROWS, 1, n, f32_spec, src, 1);
}

static uint32_t add_matrix(struct builder *b, const char *name, enum plan_tensor_kind kind,
                           int is_output, uint32_t cols, const struct llama_weight *s0,
                           const struct llama_weight *s1, const struct llama_weight *s2)
{
    const struct llama_weight *src[3] = {s0, s1, s2};
    uint32_t n = s2 ? 3 : s1 ? 2 : 1;
    struct nib_qspec spec = choose_spec(b, name, is_output, src, n);
    return add_tensor(b, name, kind, 0, cols, spec, src, n);
}

/* One layer's tensors, by role (UINT32_MAX: the layer has none). */
struct layer_tensors {
    uint32_t attn_norm, wqkv, wo;
    uint32_t ffn_norm, gate_up, down;
    uint32_t qkv_bias, q_norm, k_norm, post_attn_norm, post_ffn_norm;
};

/* One f32 row holding the bias vectors of a fused QKV (any may be
 * absent: zeros) at the rows their matrices occupy in it. */
static uint32_t add_fused_bias(struct builder *b, const char *name, uint32_t fused,
                               const struct llama_weight *bq, const struct llama_weight *bk,
                               const struct llama_weight *bv)
{
    const struct llama_weight *src[3] = {bq->t ? bq : NULL, bk->t ? bk : NULL, bv->t ? bv : NULL};
    uint32_t t = add_tensor(b, name, PT_ROWS, 1, b->p->tensors[fused].rec.rows, f32_spec, NULL, 0);
    if (b->failed || b->oom)
        return t;
    struct plan_tensor *pt = &b->p->tensors[t], *f = &b->p->tensors[fused];
    pt->kind = PT_ROW_CAT;
    pt->n_src = 3;
    for (int i = 0; i < 3; i++) {
        pt->src[i] = src[i];
        pt->row_off[i] = f->row_off[i];
        if (src[i] && src[i]->cols != f->src[i]->rows)
            fail(b, "%s: bias of %u elements for %u rows", name, src[i]->cols, f->src[i]->rows);
    }
    return t;
}

/* A vector that may be absent: its tensor, or UINT32_MAX. */
static uint32_t add_opt_vector(struct builder *b, const char *fmt, uint32_t l,
                               const struct llama_weight *w, uint32_t n)
{
    if (!w->t)
        return UINT32_MAX;
    char name[NIB_NAME_MAX];
    snprintf(name, sizeof name, fmt, l);
    if (w->cols != n)
        fail(b, "%s has %u elements, expected %u", name, w->cols, n);
    return add_vector(b, name, w, n);
}

/* dst rows += RMSNorm(src rows) * the weight (gemma2's post-norms): an op
 * of its own (a reduction over the whole row, after a barrier); each
 * worker normalizes whole rows in its scratch. */
static void norm_add(struct builder *b, uint32_t norm, uint64_t src, uint32_t src_stride,
                     uint64_t dst, uint32_t dst_stride, uint32_t n, float eps)
{
    uint64_t need = (n * 4ull + 63) & ~63ull;
    if (need > b->wscratch)
        b->wscratch = need;
    struct nib_op *op = add_op(b, NIB_OP_NORM_ADD, norm);
    op->src0 = src;
    op->src0_stride = src_stride;
    op->dst = dst;
    op->dst_stride = dst_stride;
    op->n = n;
    op->norm_add.eps = eps;
}

int nib_plan_build(struct nib_plan *p, const struct llama_model *m, const struct plan_opts *o,
                   char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    struct builder b = {.p = p, .m = m, .o = o, .err = err, .errlen = errlen};
    p->h.max_batch = o->max_batch ? o->max_batch : NIB_PLAN_DEFAULT_BATCH;
    p->source = o->source;
    p->method = o->method;
    p->calib = o->calib;
    if (p->h.max_batch > NIB_MAX_BATCH) {
        snprintf(err, errlen, "batch %u is more than %u rows", p->h.max_batch, NIB_MAX_BATCH);
        return -1;
    }
    struct nib_hparams hp = m->hp;
    uint32_t cap = o->max_ctx ? o->max_ctx : 2048;
    if (hp.ctx_len > cap)
        hp.ctx_len = cap;
    p->h.hp = hp;
    const uint32_t dim = hp.dim, hd = hp.head_dim, ffn = hp.ffn_dim, ctx = hp.ctx_len;
    const uint32_t q_dim = hp.n_heads * hd, kv_dim = hp.n_kv_heads * hd;
    const uint64_t row = kv_dim * 4ull, layer_kv = 2ull * ctx * row;
    /* The KV cache head by head: one KV head's rows of every position
     * together (hd x 4 bytes apart), so attention streams each head's keys
     * and values in address order (docs/blob-format.md "The KV cache"). */
    const uint32_t kv_pos = hd * 4u, kv_head = (uint32_t)(ctx * (uint64_t)kv_pos);
    if (ctx * row > UINT32_MAX) {
        snprintf(err, errlen, "KV cache of one layer (%llu bytes) exceeds 4 GiB; lower --ctx",
                 (unsigned long long)(ctx * row));
        return -1;
    }

    p->h.hp.arch = m->arch;

    /* Tensors first (their packed row counts size the buffers). The
     * embedding table takes the matrices' format (or the source's exact
     * one): the EMBED op dequantizes the one row each token reads. */
    const struct llama_weight *embd_src[1] = {&m->tok_embd};
    /* A tied table is the LM head too: one copy, in the head's format. */
    struct nib_qspec embd_spec = m->output_tied ? choose_spec(&b, "output", 1, embd_src, 1)
                                                : choose_spec(&b, "token_embd", 0, embd_src, 1);
    uint32_t t_embd = add_tensor(&b, "token_embd", PT_ROWS, 0, dim, embd_spec, embd_src, 1);
    uint32_t t_rope =
        add_tensor(&b, "rope_cos_sin", PT_ROPE_TABLE, ctx, hp.rope_dim, f32_spec, NULL, 0);
    struct layer_tensors *lt = calloc(hp.n_layers ? hp.n_layers : 1, sizeof *lt);
    if (!lt) {
        snprintf(err, errlen, "out of memory while planning");
        return -1;
    }
    for (uint32_t l = 0; l < hp.n_layers; l++) {
        const struct llama_layer *L = &m->layers[l];
        char name[NIB_NAME_MAX];
        struct layer_tensors *t = &lt[l];
        snprintf(name, sizeof name, "blk.%u.attn_norm", l);
        t->attn_norm = add_vector(&b, name, &L->attn_norm, dim);
        snprintf(name, sizeof name, "blk.%u.attn_qkv", l);
        /* per-head Q/K norms: K starts on a head so shares of whole heads fit */
        b.row_align = L->q_norm.t ? nib_whole_heads(NIB_Q_TILE_N, hd) : 0;
        t->wqkv = add_matrix(&b, name, PT_ROWS, 0, dim, &L->wq, &L->wk, &L->wv);
        b.row_align = 0;
        t->qkv_bias = UINT32_MAX;
        if (L->bq.t || L->bk.t || L->bv.t) {
            snprintf(name, sizeof name, "blk.%u.attn_qkv_bias", l);
            t->qkv_bias = add_fused_bias(&b, name, t->wqkv, &L->bq, &L->bk, &L->bv);
        }
        t->q_norm = add_opt_vector(&b, "blk.%u.attn_q_norm", l, &L->q_norm, hd);
        t->k_norm = add_opt_vector(&b, "blk.%u.attn_k_norm", l, &L->k_norm, hd);
        if ((t->q_norm == UINT32_MAX) != (t->k_norm == UINT32_MAX))
            fail(&b, "layer %u has a per-head norm for only one of Q and K", l);
        t->post_attn_norm =
            add_opt_vector(&b, "blk.%u.post_attention_norm", l, &L->post_attn_norm, dim);
        t->post_ffn_norm = add_opt_vector(&b, "blk.%u.post_ffw_norm", l, &L->post_ffn_norm, dim);
        snprintf(name, sizeof name, "blk.%u.attn_output", l);
        t->wo = add_matrix(&b, name, PT_ROWS, 0, q_dim, &L->wo, NULL, NULL);
        snprintf(name, sizeof name, "blk.%u.ffn_norm", l);
        t->ffn_norm = add_vector(&b, name, &L->ffn_norm, dim);
        snprintf(name, sizeof name, "blk.%u.ffn_gate_up", l);
        t->gate_up = add_matrix(&b, name, PT_TILE_PAIRS, 0, dim, &L->w_gate, &L->w_up, NULL);
        snprintf(name, sizeof name, "blk.%u.ffn_down", l);
        t->down = add_matrix(&b, name, PT_ROWS, 0, ffn, &L->w_down, NULL, NULL);
    }
    uint32_t t_on = add_vector(&b, "output_norm", &m->output_norm, dim);
    const struct llama_weight *out_w = m->output_tied ? &m->tok_embd : &m->output;
    const struct llama_weight *out_src[1] = {out_w};
    struct nib_qspec out_spec = choose_spec(&b, "output", 1, out_src, 1);
    /* A tied head in the embedding table's format reads the table itself;
     * otherwise it is a tensor of its own (a packed copy in its format). */
    uint32_t t_out =
        (m->output_tied && out_spec.dtype == embd_spec.dtype && out_spec.group == embd_spec.group)
            ? t_embd
            : add_tensor(&b, "output", PT_ROWS, 0, dim, out_spec, out_src, 1);
    if (b.failed || b.oom)
        goto fail;

    /* Activation buffers: max_batch rows each. */
    const struct plan_tensor *qkv_t = &p->tensors[lt[0].wqkv];
    uint32_t k_off = qkv_t->row_off[1], v_off = qkv_t->row_off[2];
    uint32_t max_qkv = 0, max_gu = 0;
    for (uint32_t l = 0; l < hp.n_layers; l++) {
        const struct plan_tensor *a = &p->tensors[lt[l].wqkv], *g = &p->tensors[lt[l].gate_up];
        if (a->row_off[1] != k_off || a->row_off[2] != v_off) {
            /* Layers in different formats pack their sources at different
             * offsets; one layout keeps the plan simple. */
            fail(&b, "layers must share one format per fused projection (layer %u differs)", l);
            goto fail;
        }
        if (a->rec.rows > max_qkv)
            max_qkv = a->rec.rows;
        if (g->rec.rows > max_gu)
            max_gu = g->rec.rows;
    }
    uint32_t x_s, qkv_s, att_s, gu_s, h_s = 0;
    uint64_t x = rows_alloc(&b, dim, &x_s);
    uint64_t qkv = rows_alloc(&b, max_qkv, &qkv_s);
    uint64_t att_out = rows_alloc(&b, q_dim, &att_s);
    uint64_t gu = rows_alloc(&b, max_gu, &gu_s);
    uint64_t hb = UINT64_MAX; /* f32 FFN rows: only for a down projection that cannot
                               * have gate|up quantize for it (allocated when first needed) */
    uint64_t po = UINT64_MAX; /* f32 rows of an output projection before its post-norm */
    uint32_t po_s = 0;
    uint64_t scores = act_alloc(&b, (uint64_t)hp.n_heads * ctx * 4ull);
    p->h.logits_off = act_alloc(&b, p->tensors[t_out].rec.rows * 4ull);
    p->h.argmax_blocks = (hp.vocab_size + NIB_ARGMAX_BLOCK - 1) / NIB_ARGMAX_BLOCK;
    p->h.argmax_off = act_alloc(&b, p->h.argmax_blocks * (uint64_t)sizeof(struct nib_argmax_block));
    p->h.token_slot_off = act_alloc(&b, p->h.max_batch * 4ull);
    p->h.pos_slot_off = act_alloc(&b, 4);
    if (p->tensors[t_out].rec.rows != hp.vocab_size) {
        fail(&b, "LM head has %u rows, vocabulary %u", p->tensors[t_out].rec.rows, hp.vocab_size);
        goto fail;
    }

    struct nib_op *op = add_op(&b, NIB_OP_EMBED, t_embd);
    op->dst = x;
    op->dst_stride = x_s;
    op->n = dim;
    op->embed.scale = m->embed_scale > 0.0f ? m->embed_scale : 1.0f;
    for (uint32_t l = 0; l < hp.n_layers; l++) {
        const struct layer_tensors *t = &lt[l];
        /* attention block: norm + QKV with RoPE and the KV write */
        op = norm_matmul(&b, t->attn_norm, t->wqkv, x, x_s, qkv, qkv_s, dim, hp.norm_eps);
        op->flags |= NIB_EPI_ROPE_KV;
        op->matmul.rope_kv = (struct nib_rope_kv_params){
            .table = t_rope,
            .q_rows = q_dim,
            .k_off = k_off,
            .v_off = v_off,
            .kv_rows = kv_dim,
            .head_dim = hd,
            .rope_dim = hp.rope_dim,
            .v_cache_off = (uint32_t)(ctx * row),
            .q_norm = t->q_norm,
            .k_norm = t->k_norm,
            .qk_eps = t->q_norm != UINT32_MAX ? hp.norm_eps : 0.0f,
            .head_stride = kv_head,
        };
        if (t->qkv_bias != UINT32_MAX) {
            op->flags |= NIB_EPI_BIAS;
            op->matmul.bias = t->qkv_bias;
        }
        op->aux = l * layer_kv; /* relative to the KV cache for now */
        op->aux_stride = kv_pos;
        op = add_op(&b, NIB_OP_ATTENTION, UINT32_MAX);
        op->src0 = qkv;
        op->src0_stride = qkv_s;
        op->src1 = l * layer_kv;
        op->dst = att_out;
        op->dst_stride = att_s;
        op->n = hp.n_heads;
        op->k = hd;
        op->attention = (struct nib_attention_params){
            .n_kv_heads = hp.n_kv_heads,
            .cache_stride = kv_pos,
            .v_cache_off = (uint32_t)(ctx * row),
            .scale = m->attn_scale > 0.0f ? m->attn_scale : 1.0f / sqrtf((float)hd),
            .scratch = scores,
            .window = m->layers[l].window < ctx ? m->layers[l].window : 0,
            .softcap = m->attn_softcap,
            .head_stride = kv_head,
        };
        uint32_t blk = block_of(&b, t->wo);
        uint64_t in;
        if (blk) {
            /* attention quantizes its own heads for the output projection,
             * split in units of heads that cover whole blocks */
            uint32_t g = nib_gcd_u32(hd, blk);
            op->flags = NIB_OPF_QOUT;
            op->aux = att_out;
            op->aux_stride = att_s;
            op->dst = in = qact_buf(&b, q_dim, blk);
            op->dst_stride = 0;
            op->attention.qblock = blk;
            /* heads per unit: blk / gcd(hd, blk), at most all */
            op->attention.unit_heads = blk / g < hp.n_heads ? blk / g : hp.n_heads;
        } else {
            in = quantized_input(&b, t->wo, att_out, att_s, q_dim);
        }
        if (t->post_attn_norm != UINT32_MAX) {
            /* x += RMSNorm(Wo a) * w: the projection to its own rows, then the norm */
            if (po == UINT64_MAX)
                po = rows_alloc(&b, dim, &po_s);
            matmul(&b, t->wo, in, att_s, po, po_s, q_dim);
            norm_add(&b, t->post_attn_norm, po, po_s, x, x_s, dim, hp.norm_eps);
        } else {
            op = matmul(&b, t->wo, in, att_s, x, x_s, q_dim);
            op->flags = NIB_EPI_ADD;
            op->src1 = x; /* x = Wo a + x: each output reads only its own old value */
            op->src1_stride = x_s;
        }
        /* FFN block: norm + gate|up with SiLU-mul (quantizing), down + residual */
        blk = block_of(&b, t->down);
        if (!blk && hb == UINT64_MAX)
            hb = rows_alloc(&b, ffn, &h_s);
        op = norm_matmul(&b, t->ffn_norm, t->gate_up, x, x_s, blk ? qact_buf(&b, ffn, blk) : hb,
                         blk ? 0 : h_s, dim, hp.norm_eps);
        op->flags |= NIB_EPI_SILU_MUL;
        op->aux = gu;
        op->aux_stride = gu_s;
        op->matmul.silu_mul.n_out = ffn;
        op->matmul.silu_mul.act = m->ffn_act;
        if (blk) {
            /* gate|up quantizes its outputs for the down projection */
            op->flags |= NIB_OPF_QOUT;
            op->matmul.silu_mul.qblock = blk;
            in = op->dst;
        } else {
            in = quantized_input(&b, t->down, hb, h_s, ffn);
        }
        if (t->post_ffn_norm != UINT32_MAX) {
            if (po == UINT64_MAX)
                po = rows_alloc(&b, dim, &po_s);
            matmul(&b, t->down, in, h_s, po, po_s, ffn);
            norm_add(&b, t->post_ffn_norm, po, po_s, x, x_s, dim, hp.norm_eps);
        } else {
            op = matmul(&b, t->down, in, h_s, x, x_s, ffn);
            op->flags = NIB_EPI_ADD;
            op->src1 = x;
            op->src1_stride = x_s;
        }
    }
    /* Head: final norm + LM head + argmax in one op, the last row only. */
    op = norm_matmul(&b, t_on, t_out, x, x_s, p->h.logits_off, 0, dim, hp.norm_eps);
    op->flags |= NIB_OPF_LAST_ROW | NIB_EPI_ARGMAX;
    if (m->final_softcap > 0.0f) {
        /* logits -> c tanh(l / c) before the argmax (gemma2) */
        op->flags |= NIB_EPI_SOFTCAP;
        op->matmul.softcap = m->final_softcap;
    }
    if (b.failed || b.oom)
        goto fail;
    p->h.wscratch_size = (uint32_t)b.wscratch;
    p->h.wscratch_off = act_alloc(&b, b.wscratch);

    /* The KV cache follows the activations: relocate its offsets. */
    p->h.act_size = b.act;
    p->h.kv_size = layer_kv * hp.n_layers;
    for (uint32_t i = 0; i < p->n_ops; i++) {
        if (p->ops[i].flags & NIB_EPI_ROPE_KV)
            p->ops[i].aux += p->h.act_size;
        else if (p->ops[i].code == NIB_OP_ATTENTION)
            p->ops[i].src1 += p->h.act_size;
    }
    free(lt);
    return 0;
fail:
    if (b.oom && !b.failed)
        snprintf(err, errlen, "out of memory while planning");
    free(lt);
    nib_plan_free(p);
    return -1;
}

void nib_plan_free(struct nib_plan *p)
{
    free(p->tensors);
    free(p->ops);
    memset(p, 0, sizeof *p);
}
