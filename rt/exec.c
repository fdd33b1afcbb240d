#include "rt/exec.h"

#include <math.h>
#include <string.h>

#include "kernels/common/f32-math.h"
#include "kernels/kernels.h"
#include "kernels/qkernels.h"
#include "model_blob/crc32c.h"
#include "rt/cpu_isa.h"
#include "rt/sample.h"
#include "proto/private/sync.h"
#include "proto/stats.h"
#include "rt/team.h"
#include "rt/vision_exec.h"

static float *f32_at(uint8_t *mem, uint64_t off)
{
    return (float *)(void *)(mem + off);
}

/* Row t of an f32 row operand. */
static float *row_at(uint8_t *mem, uint64_t off, uint32_t stride, uint32_t t)
{
    return f32_at(mem, off + (uint64_t)t * stride);
}

/* Every variant gives the same bits as the scalar reference
 * (kernels/qkernels.h), so the choice only changes speed. */
const struct nib_qkernels *nib_exec_kernels(uint32_t isa)
{
    const struct nib_qkernels *k = NULL;
    if (isa & NIB_ISA_AVX2)
        k = nib_qkernels_get(NIB_ISA_AVX2);
    if (!k && (isa & NIB_ISA_NEON_DOT))
        k = nib_qkernels_get(NIB_ISA_NEON_DOT);
    if (!k)
        k = nib_qkernels_get(NIB_ISA_SCALAR);
    return k;
}

/* The int8 activations at off: max_batch rows of k inputs. */
static struct nib_qact qact_at(const struct nib_blob_view *v, uint8_t *mem, uint64_t off,
                               uint32_t k, uint32_t block)
{
    struct nib_qact a;
    nib_qact_init(&a, mem + off, v->h->max_batch, k, block); /* checked at boot */
    return a;
}

/* A fused QKV with per-head Q/K norms: its shares and epilogue steps
 * cover whole heads (the norm is a reduction over the head). */
static int qk_normed(const struct nib_op *op)
{
    return (op->flags & NIB_EPI_ROPE_KV) && op->matmul.rope_kv.q_norm != UINT32_MAX;
}

/* Units an op is split in, and the block size of the split. */
static uint32_t op_units(const struct nib_op *op, uint32_t *block)
{
    *block = NIB_EXEC_ELEM_BLOCK;
    switch (op->code) {
    case NIB_OP_MATMUL:
        /* Whole quantization blocks of its outputs when gate|up quantizes
         * them; whole heads when the fused QKV normalizes its heads. */
        *block = (op->flags & NIB_OPF_QOUT) ? 2 * op->matmul.silu_mul.qblock
                 : qk_normed(op) ? nib_whole_heads(NIB_EXEC_ROW_BLOCK, op->matmul.rope_kv.head_dim)
                                 : NIB_EXEC_ROW_BLOCK;
        return op->n;
    case NIB_OP_ATTENTION:
        /* heads, in units that cover whole activation blocks when quantizing */
        *block = (op->flags & NIB_OPF_QOUT) ? op->attention.unit_heads : 1;
        return op->n;
    case NIB_OP_EMBED: return op->n; /* elements */
    case NIB_OP_NORM_ADD:
        /* elements: every worker normalizes whole rows itself (the same
         * bits on every worker) and adds its own elements */
        return op->n;
    default:
        if (op->code >= NIB_VOP_FIRST)
            return nib_vision_units(op, block);
        /* QUANT (a reduction over a whole row), and any op
         * without a split of its own: one share, worker 0's. */
        *block = UINT32_MAX;
        return op->n ? op->n : 1;
    }
}

void nib_exec_share(const struct nib_op *op, uint32_t w, uint32_t n, uint32_t *begin, uint32_t *end)
{
    uint32_t block, units = op_units(op, &block);
    if (block == UINT32_MAX) {
        *begin = 0;
        *end = w == 0 ? units : 0;
        return;
    }
    uint64_t nb = ((uint64_t)units + block - 1) / block;
    uint64_t b0 = nb * w / n * block, b1 = nb * (w + 1) / n * block;
    *begin = (uint32_t)(b0 < units ? b0 : units);
    *end = (uint32_t)(b1 < units ? b1 : units);
}

/* ---- matmul and its epilogues ---------------------------------------------- */

/* One matmul op's operands, resolved once per share. */
struct mm {
    const struct nib_op *op;
    const struct nib_tensor_rec *t;
    const float *w32;  /* f32 weights, or NULL */
    const uint8_t *in; /* f32 weights: the input rows, in_stride bytes apart */
    uint32_t in_stride;
    struct nib_qlayout l; /* quantized weights */
    struct nib_qact a;    /* their int8 input rows t0.. */
    uint8_t *mem;
    float *y; /* output rows (row t at y + t * ys floats) */
    uint32_t ys, t0, mt;
};

/* Rows [r0, r1) of the output rows t0..t0+mt-1 = W . src0 (+ src1). */
static void matmul_rows(const struct nib_qkernels *qk, const struct nib_blob_view *v,
                        const struct mm *c, uint32_t r0, uint32_t r1)
{
    const struct nib_op *op = c->op;
    const int add = (op->flags & NIB_EPI_ADD) != 0;
    if (c->w32) {
        for (uint32_t i = c->t0; i < c->t0 + c->mt; i++)
            qk->gemv_f32(c->w32, (const float *)(const void *)(c->in + (uint64_t)i * c->in_stride),
                         c->y + (uint64_t)i * c->ys,
                         add ? row_at(c->mem, op->src1, op->src1_stride, i) : NULL, r0, r1, op->k);
        return;
    }
    qk->gemm[c->l.dtype](
        &c->l, v->weights + c->t->offset, &c->a, c->mt, c->y + (uint64_t)c->t0 * c->ys, c->ys,
        add ? row_at(c->mem, op->src1, op->src1_stride, c->t0) : NULL, op->src1_stride / 4, r0, r1);
}

/* K or V rows [b, e) of one position (a share may start or end inside a
 * head) to the cache at c, KV head g's row head_stride bytes after g - 1's. */
static void kv_store(uint8_t *c, uint32_t head_stride, uint32_t hd, const float *y, uint32_t b,
                     uint32_t e)
{
    while (b < e) {
        uint32_t g = b / hd, d = b % hd, len = (e - b < hd - d ? e - b : hd - d);
        memcpy(c + (uint64_t)g * head_stride + d * 4ull, y + b, len * 4ull);
        b += len;
    }
}

/* Fused QKV epilogue on rows [r0, r1) of token row t at position pos. */
static void epi_rope_kv(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                        const struct nib_op *op, float *y, uint32_t pos, uint32_t r0, uint32_t r1)
{
    const struct nib_rope_kv_params *p = &op->matmul.rope_kv;
    const float *cs = nib_tensor_f32(v, p->table) + (uint64_t)pos * p->rope_dim;
    const uint32_t q_rows = p->q_rows, k_off = p->k_off, v_off = p->v_off, kv = p->kv_rows;
    const uint32_t hd = p->head_dim;
    const int normed = p->q_norm != UINT32_MAX;
    if (r0 < q_rows) {
        uint32_t e = r1 < q_rows ? r1 : q_rows;
        /* per-head RMSNorm before RoPE: r0 is a head boundary here (shares
         * and steps of whole heads), in place (element-wise after the sum) */
        for (uint32_t h = r0; normed && h < e; h += hd)
            qk->rmsnorm(y + h, nib_tensor_f32(v, p->q_norm), y + h, hd, p->qk_eps);
        qk->rope_rows(y, r0, e, hd, p->rope_dim, cs);
    }
    uint8_t *kc = mem + op->aux + (uint64_t)pos * op->aux_stride, *vc = kc + p->v_cache_off;
    if (r1 > k_off && r0 < k_off + kv) {
        uint32_t b = r0 > k_off ? r0 - k_off : 0, e = (r1 < k_off + kv ? r1 : k_off + kv) - k_off;
        for (uint32_t h = b; normed && h < e; h += hd)
            qk->rmsnorm(y + k_off + h, nib_tensor_f32(v, p->k_norm), y + k_off + h, hd, p->qk_eps);
        qk->rope_rows(y + k_off, b, e, hd, p->rope_dim, cs);
        kv_store(kc, p->head_stride, hd, y + k_off, b, e);
    }
    if (r1 > v_off && r0 < v_off + kv) {
        uint32_t b = r0 > v_off ? r0 - v_off : 0, e = (r1 < v_off + kv ? r1 : v_off + kv) - v_off;
        kv_store(vc, p->head_stride, hd, y + v_off, b, e);
    }
}

/* Fused gate|up epilogue: each 16 rows r.. hold gate rows 8j.. and up
 * rows 8j.. (j = r / 16); output 8j + i = silu(gate) * up, for the outputs
 * of rows [r0, r1) below n_out, written from h (output r0 / 2 at h[0]). */
static void epi_silu_mul(nib_silu_mul_fn act_mul, const float *gu, float *h, uint32_t n_out,
                         uint32_t r0, uint32_t r1)
{
    for (uint32_t r = r0; r + 2 * NIB_Q_TILE_N <= r1; r += 2 * NIB_Q_TILE_N) {
        uint32_t o = r / 2, cnt = o + NIB_Q_TILE_N <= n_out ? NIB_Q_TILE_N : n_out - o;
        if (o < n_out)
            act_mul(gu + r, gu + r + NIB_Q_TILE_N, h + (o - r0 / 2), cnt);
    }
}

/* NIB_EPI_BIAS: y[r] += bias[r] on rows [r0, r1). */
static void epi_bias(const float *bias, float *y, uint32_t r0, uint32_t r1)
{
    for (uint32_t r = r0; r < r1; r++)
        y[r] += bias[r];
}

/* NIB_EPI_SOFTCAP: y[r] = c * tanh(y[r] / c) on rows [r0, r1), with
 * nibble's tanh (the same bits on every ISA). */
static void epi_softcap(float c, float *y, uint32_t r0, uint32_t r1)
{
    for (uint32_t r = r0; r < r1; r++)
        y[r] = nib_softcapf(y[r], c);
}

/* Largest non-NaN value of y[r0, r1) and its first index. */
static void epi_argmax(const float *y, uint32_t r0, uint32_t r1, struct nib_argmax_block *out)
{
    struct nib_argmax_block b = {-INFINITY, r0};
    for (uint32_t r = r0; r < r1; r++)
        if (y[r] > b.value)
            b = (struct nib_argmax_block){y[r], r};
    *out = b;
}

/* Rows per epilogue step for mt tokens: a multiple of 4 row blocks
 * (whole gate|up tile pairs, whole argmax blocks) whose outputs (rows x
 * tokens floats, at most 16 KiB) are still in L1 when the epilogue reads
 * them back. Each step is one kernel call over its rows' stretch of the
 * weight stream: for a decode step (up to four tokens) 1024 rows, since
 * at 64 rows a call tinyllama-1.1b's gate|up ran at 1.24-1.27 x the
 * reference loop's time, at 1024 rows 1.06-1.10 (docs/benchmarks.md,
 * "Shorter key blocks and longer epilogue steps"); for more tokens
 * (prefill) 64 rows as before, where longer steps were not shown to help. */
static uint32_t epi_rows(uint32_t mt)
{
    return (mt <= 4 ? 64 : 4) * NIB_EXEC_ROW_BLOCK;
}

/* NIB_OPF_NORM_IN: rows t0..t0+mt-1 of src0 normalized into this worker's
 * scratch (and quantized there for a quantized tensor): every worker does
 * the same few thousand operations instead of waiting for one at a barrier. */
static void norm_in(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                    uint8_t *ws, const struct nib_op *op, struct mm *c)
{
    const uint32_t stride = (op->k * 4 + 63) & ~63u;
    for (uint32_t t = c->t0; t < c->t0 + c->mt; t++)
        qk->rmsnorm(row_at(mem, op->src0, op->src0_stride, t),
                    nib_tensor_f32(v, op->matmul.norm.tensor),
                    (float *)(void *)(ws + (uint64_t)t * stride), op->k, op->matmul.norm.eps);
    c->in = ws;
    c->in_stride = stride;
    if (c->w32)
        return;
    struct nib_qact a;
    nib_qact_init(&a, ws + (uint64_t)v->h->max_batch * stride, v->h->max_batch, op->k,
                  nib_qformat_act_block(c->t->dtype, c->t->group)); /* sizes checked at boot */
    for (uint32_t t = c->t0; t < c->t0 + c->mt; t++)
        qk->qact(&a, t, (const float *)(const void *)(ws + (uint64_t)t * stride));
    c->a = nib_qact_rows(&a, c->t0, c->mt);
}

static void exec_matmul(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                        uint8_t *ws, const struct nib_op *op, uint32_t m, uint32_t pos, uint32_t b,
                        uint32_t e)
{
    const uint32_t epi = op->flags & (NIB_EPI_ROPE_KV | NIB_EPI_SILU_MUL | NIB_EPI_ARGMAX |
                                      NIB_EPI_BIAS | NIB_EPI_SOFTCAP);
    /* The kernel's output: dst, or the raw gate|up rows at aux. */
    const int raw_to_aux = (epi & NIB_EPI_SILU_MUL) != 0;
    const int qout = (op->flags & NIB_OPF_QOUT) != 0;
    struct mm c = {.op = op, .t = &v->tensors[op->tensor], .mem = mem};
    c.t0 = (op->flags & NIB_OPF_LAST_ROW) ? m - 1 : 0;
    c.mt = (op->flags & NIB_OPF_LAST_ROW) ? 1 : m;
    c.y = f32_at(mem, raw_to_aux ? op->aux : op->dst);
    c.ys = (raw_to_aux ? op->aux_stride : op->dst_stride) / 4;
    if (c.t->dtype == NIB_DT_F32) {
        c.w32 = nib_tensor_f32(v, op->tensor);
        c.in = mem + op->src0;
        c.in_stride = op->src0_stride;
    } else {
        nib_qlayout_get(&c.l, c.t->dtype, c.t->group, c.t->rows, c.t->cols);
    }
    if (op->flags & NIB_OPF_NORM_IN) {
        norm_in(qk, v, mem, ws, op, &c);
    } else if (!c.w32) {
        struct nib_qact a =
            qact_at(v, mem, op->src0, op->k, nib_qformat_act_block(c.t->dtype, c.t->group));
        c.a = nib_qact_rows(&a, c.t0, c.mt);
    }
    if (!epi) {
        matmul_rows(qk, v, &c, b, e);
        return;
    }
    /* Epilogues run step by step, right after the kernel wrote the step's
     * rows, by the worker that wrote them, in the order bias, soft-cap,
     * RoPE/KV, gated activation, argmax. A quantizing gate|up steps by
     * whole blocks of outputs (2 x qblock rows: its shares start there)
     * and quantizes them one at a time; a fused QKV with per-head norms
     * steps by whole heads. */
    const struct nib_silu_mul_params *sm = &op->matmul.silu_mul;
    const uint32_t rows = epi_rows(c.mt);
    const uint32_t step =
        qout            ? 2 * sm->qblock * (rows > 2 * sm->qblock ? rows / (2 * sm->qblock) : 1)
        : qk_normed(op) ? nib_whole_heads(rows, op->matmul.rope_kv.head_dim)
                        : rows;
    const nib_silu_mul_fn act_mul = sm->act == 1 ? qk->gelu_mul : qk->silu_mul;
    const float *bias = (epi & NIB_EPI_BIAS) ? nib_tensor_f32(v, op->matmul.bias) : NULL;
    struct nib_qact qa;
    if (qout)
        qa = qact_at(v, mem, op->dst, sm->n_out, sm->qblock);
    for (uint32_t r0 = b; r0 < e; r0 += step) {
        uint32_t r1 = r0 + step < e ? r0 + step : e;
        matmul_rows(qk, v, &c, r0, r1);
        for (uint32_t t = c.t0; t < c.t0 + c.mt; t++) {
            float *yt = c.y + (uint64_t)t * c.ys;
            if (bias)
                epi_bias(bias, yt, r0, r1);
            if (epi & NIB_EPI_SOFTCAP)
                epi_softcap(op->matmul.softcap, yt, r0, r1);
            if (epi & NIB_EPI_ROPE_KV)
                epi_rope_kv(qk, v, mem, op, yt, pos + t, r0, r1);
            if ((epi & NIB_EPI_SILU_MUL) && !qout)
                epi_silu_mul(act_mul, yt, row_at(mem, op->dst, op->dst_stride, t) + r0 / 2,
                             sm->n_out, r0, r1);
            if ((epi & NIB_EPI_SILU_MUL) && qout)
                for (uint32_t q0 = r0; q0 < r1 && q0 / 2 < sm->n_out; q0 += 2 * sm->qblock) {
                    const uint32_t q1 = q0 + 2 * sm->qblock < r1 ? q0 + 2 * sm->qblock : r1;
                    float h[NIB_QACT_MAX_BLOCK]; /* one block of outputs, never in memory as f32 */
                    epi_silu_mul(act_mul, yt, h, sm->n_out, q0, q1);
                    struct nib_qact blk =
                        nib_qact_blocks(&qa, t, q0 / 2 / sm->qblock, q0 / 2 / sm->qblock + 1);
                    qk->qact(&blk, 0, h);
                }
            if (epi & NIB_EPI_ARGMAX) {
                struct nib_argmax_block *am =
                    (struct nib_argmax_block *)(void *)(mem + v->h->argmax_off);
                for (uint32_t q = r0; q < r1; q += NIB_ARGMAX_BLOCK)
                    epi_argmax(yt, q, q + NIB_ARGMAX_BLOCK < r1 ? q + NIB_ARGMAX_BLOCK : r1,
                               am + q / NIB_ARGMAX_BLOCK);
            }
        }
    }
}

void nib_exec_op(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                 uint8_t *wscratch, const struct nib_op *op, uint32_t m, uint32_t pos, uint32_t w,
                 uint32_t n)
{
    const uint32_t ctx = v->h->hp.ctx_len;
    const uint32_t t0 = (op->flags & NIB_OPF_LAST_ROW) ? m - 1 : 0;
    uint32_t b, e;
    nib_exec_share(op, w, n, &b, &e);
    if (b >= e)
        return;
    if (op->code >= NIB_VOP_FIRST) {
        nib_vision_op(qk, v, mem, wscratch, op, b, e);
        return;
    }
    switch (op->code) {
    case NIB_OP_EMBED: {
        const uint32_t *tokens = (const uint32_t *)(const void *)(mem + v->h->token_slot_off);
        const float scale = op->embed.scale;
        const struct nib_tensor_rec *tr = &v->tensors[op->tensor];
        struct nib_qlayout l;
        const int quantized = tr->dtype != NIB_DT_F32;
        if (quantized) /* the one row each token reads, dequantized exactly */
            nib_qlayout_get(&l, tr->dtype, tr->group, tr->rows, tr->cols);
        for (uint32_t t = t0; t < m; t++) {
            float *d = row_at(mem, op->dst, op->dst_stride, t) + b;
            if (quantized)
                nib_qrow_f32(&l, v->weights + tr->offset, tokens[t], b, e, d);
            else
                memcpy(d, nib_tensor_f32(v, op->tensor) + (uint64_t)tokens[t] * op->n + b,
                       (size_t)(e - b) * 4);
            if (scale != 1.0f)
                for (uint32_t i = 0; i < e - b; i++)
                    d[i] *= scale;
        }
        break;
    }
    case NIB_OP_NORM_ADD: {
        /* every worker normalizes the whole row into its scratch (the same
         * bits whoever does it), then adds its own elements */
        float *nrm = (float *)(void *)wscratch;
        for (uint32_t t = t0; t < m; t++) {
            float *d = row_at(mem, op->dst, op->dst_stride, t);
            qk->rmsnorm(row_at(mem, op->src0, op->src0_stride, t), nib_tensor_f32(v, op->tensor),
                        nrm, op->n, op->norm_add.eps);
            for (uint32_t i = b; i < e; i++)
                d[i] += nrm[i];
        }
        break;
    }
    case NIB_OP_MATMUL: exec_matmul(qk, v, mem, wscratch, op, m, pos, b, e); break;
    case NIB_OP_QUANT: {
        struct nib_qact a = qact_at(v, mem, op->dst, op->n, op->quant.block);
        for (uint32_t t = t0; t < m; t++)
            qk->qact(&a, t, row_at(mem, op->src0, op->src0_stride, t));
        break;
    }
    case NIB_OP_ATTENTION: {
        /* With QOUT each worker quantizes the blocks of its own heads. */
        const int qout = (op->flags & NIB_OPF_QOUT) != 0;
        const struct nib_attention_params *p = &op->attention;
        struct nib_qact a;
        if (qout)
            a = qact_at(v, mem, op->dst, op->n * op->k, p->qblock);
        for (uint32_t t = t0; t < m; t++) {
            float *out = qout ? row_at(mem, op->aux, op->aux_stride, t)
                              : row_at(mem, op->dst, op->dst_stride, t);
            qk->attention(row_at(mem, op->src0, op->src0_stride, t), f32_at(mem, op->src1),
                          f32_at(mem, op->src1 + p->v_cache_off), out, f32_at(mem, p->scratch), b,
                          e, op->k, op->n / p->n_kv_heads, p->cache_stride / 4, p->head_stride / 4,
                          p->window && pos + t + 1 > p->window ? pos + t + 1 - p->window : 0,
                          pos + t, ctx, p->scale, p->softcap);
            if (qout) { /* b * k is a block boundary; the last unit may end in a partial block */
                uint32_t b0 = b * op->k / p->qblock, b1 = (e * op->k + p->qblock - 1) / p->qblock;
                struct nib_qact blk = nib_qact_blocks(&a, t, b0, b1);
                qk->qact(&blk, 0, out + (uint64_t)b * op->k);
            }
        }
        break;
    }
    }
}

/* ---- what each share touches (nib_exec_plan_barriers places barriers from it) */

static void acc(struct nib_access *out, int *n, uint64_t base, uint64_t b, uint64_t e,
                uint32_t write)
{
    if (b >= e)
        return;
    out[*n].begin = base + b;
    out[*n].end = base + e;
    out[*n].write = write;
    (*n)++;
}

/* Bytes [b, e) of every row of an f32 row operand, for up to rows rows:
 * the span from row 0's part to the last row's. */
static void acc_rows(struct nib_access *out, int *n, uint64_t base, uint32_t stride, uint32_t rows,
                     uint64_t b, uint64_t e, uint32_t write)
{
    acc(out, n, base, b, (uint64_t)(rows - 1) * stride + e, write);
}

int nib_exec_access(const struct nib_blob_view *v, const struct nib_op *op, uint32_t w, uint32_t n,
                    struct nib_access *out)
{
    const uint64_t ctx = v->h->hp.ctx_len;
    const uint32_t M = v->h->max_batch;
    uint32_t b, e;
    int c = 0;
    nib_exec_share(op, w, n, &b, &e);
    if (b >= e)
        return 0;
    switch (op->code) {
    case NIB_OP_EMBED:
        acc(out, &c, v->h->token_slot_off, 0, M * 4ull, 0);
        acc_rows(out, &c, op->dst, op->dst_stride, M, b * 4ull, e * 4ull, 1);
        break;
    case NIB_OP_MATMUL: {
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        if (t->dtype == NIB_DT_F32 || (op->flags & NIB_OPF_NORM_IN))
            acc_rows(out, &c, op->src0, op->src0_stride, M, 0, op->k * 4ull, 0);
        else
            acc(out, &c, op->src0, 0,
                nib_qact_footprint(M, op->k, nib_qformat_act_block(t->dtype, t->group)), 0);
        if (op->flags & NIB_EPI_ADD)
            acc_rows(out, &c, op->src1, op->src1_stride, M, b * 4ull, e * 4ull, 0);
        if (op->flags & NIB_EPI_SILU_MUL) {
            const struct nib_silu_mul_params *sm = &op->matmul.silu_mul;
            uint32_t hb = b / 2, he = e / 2 < sm->n_out ? e / 2 : sm->n_out;
            acc_rows(out, &c, op->aux, op->aux_stride, M, b * 4ull, e * 4ull, 1);
            if (op->flags & NIB_OPF_QOUT)
                acc(out, &c, op->dst, 0, nib_qact_footprint(M, sm->n_out, sm->qblock), 1);
            else
                acc_rows(out, &c, op->dst, op->dst_stride, M, hb * 4ull, he * 4ull, 1);
        } else {
            acc_rows(out, &c, op->dst, op->dst_stride, M, b * 4ull, e * 4ull, 1);
        }
        if (op->flags & NIB_EPI_ROPE_KV) { /* which cache rows depends on the position */
            const struct nib_rope_kv_params *p = &op->matmul.rope_kv;
            acc(out, &c, op->aux, 0,
                p->v_cache_off + nib_kv_cache_bytes(p->kv_rows / p->head_dim, p->head_dim, ctx,
                                                    op->aux_stride, p->head_stride),
                1);
        }
        if (op->flags & NIB_EPI_ARGMAX)
            acc(out, &c, v->h->argmax_off, b / NIB_ARGMAX_BLOCK * sizeof(struct nib_argmax_block),
                ((e + NIB_ARGMAX_BLOCK - 1) / NIB_ARGMAX_BLOCK) * sizeof(struct nib_argmax_block),
                1);
        break;
    }
    case NIB_OP_NORM_ADD: /* whole rows read, own elements written */
        acc_rows(out, &c, op->src0, op->src0_stride, M, 0, op->n * 4ull, 0);
        acc_rows(out, &c, op->dst, op->dst_stride, M, b * 4ull, e * 4ull, 1);
        break;
    case NIB_OP_QUANT:
        acc_rows(out, &c, op->src0, op->src0_stride, M, 0, op->n * 4ull, 0);
        acc(out, &c, op->dst, 0, nib_qact_footprint(M, op->n, op->quant.block), 1);
        break;
    case NIB_OP_ATTENTION:
        acc_rows(out, &c, op->src0, op->src0_stride, M, (uint64_t)b * op->k * 4,
                 (uint64_t)e * op->k * 4, 0);
        acc(out, &c, op->src1, 0,
            op->attention.v_cache_off + nib_kv_cache_bytes(op->attention.n_kv_heads, op->k, ctx,
                                                           op->attention.cache_stride,
                                                           op->attention.head_stride),
            0);
        if (op->flags & NIB_OPF_QOUT) {
            acc_rows(out, &c, op->aux, op->aux_stride, M, (uint64_t)b * op->k * 4,
                     (uint64_t)e * op->k * 4, 1);
            acc(out, &c, op->dst, 0, nib_qact_footprint(M, op->n * op->k, op->attention.qblock), 1);
        } else {
            acc_rows(out, &c, op->dst, op->dst_stride, M, (uint64_t)b * op->k * 4,
                     (uint64_t)e * op->k * 4, 1);
        }
        acc(out, &c, op->attention.scratch, b * ctx * 4, e * ctx * 4, 1);
        break;
    default:
        if (op->code >= NIB_VOP_FIRST && op->code < NIB_VOP_END) {
            struct nib_vrange r[4];
            int k = nib_vision_access(op, b, e, r);
            for (int j = 0; j < k; j++)
                acc(out, &c, 0, r[j].begin, r[j].end, r[j].write);
            break;
        }
        /* An op this table does not describe: all of runtime memory, so the
         * team puts barriers on both sides of it. Add an exact case with
         * every new opcode. */
        acc(out, &c, 0, 0, v->mem_size, 1);
        break;
    }
    return c;
}

/* ---- placing barriers ---------------------------------------------------------
 * A barrier precedes an op only when some worker's share of it touches bytes
 * another worker wrote (or read, for a write) since the last barrier
 * (nib_exec_access); one more ends every pass. */

/* An access by worker w since the last barrier. Two conflict when they are
 * by different workers, overlap, and at least one writes. */
struct tagged {
    uint64_t begin, end;
    uint32_t w, write;
};

#define EPOCH_MAX 1024

uint32_t nib_exec_plan_barriers(const struct nib_blob_view *v, uint32_t W, uint8_t *before)
{
    struct tagged epoch[EPOCH_MAX];
    uint32_t n_epoch = 0, n_barriers = 0;
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        int need = 0;
        uint32_t n_new = 0;
        for (uint32_t w = 0; w < W; w++) {
            struct nib_access a[NIB_ACCESS_MAX];
            int na = nib_exec_access(v, op, w, W, a);
            n_new += (uint32_t)na;
            for (int k = 0; k < na && !need; k++)
                for (uint32_t j = 0; j < n_epoch && !need; j++) {
                    const struct tagged *b = &epoch[j];
                    need = b->w != w && (a[k].write || b->write) && a[k].begin < b->end &&
                           b->begin < a[k].end;
                }
        }
        /* An epoch that cannot hold this op's accesses ends here too (and a
         * team too big to list one op's accesses barriers before every op). */
        if (W > 1 && (need || n_epoch + n_new > EPOCH_MAX || W * NIB_ACCESS_MAX > EPOCH_MAX)) {
            before[i] = 1;
            n_barriers++;
            n_epoch = 0;
        } else {
            before[i] = 0;
        }
        for (uint32_t w = 0; w < W && n_epoch + NIB_ACCESS_MAX <= EPOCH_MAX; w++) {
            struct nib_access a[NIB_ACCESS_MAX];
            int na = nib_exec_access(v, op, w, W, a);
            for (int k = 0; k < na; k++)
                epoch[n_epoch++] = (struct tagged){a[k].begin, a[k].end, w, a[k].write};
        }
    }
    return W > 1 ? n_barriers + 1 : 0; /* + the one that ends every pass */
}

/* Per-worker scratch stride: whole pages, so no two workers share a line. */
static uint64_t scratch_stride(const struct nib_blob_view *v)
{
    return ((uint64_t)v->h->wscratch_size + 4095) & ~4095ull;
}

static uint64_t map_bytes(const struct nib_blob_view *v)
{
    return ((uint64_t)v->h->n_ops + 4095) & ~4095ull;
}

uint64_t nib_exec_team_footprint(uint32_t n_workers, const struct nib_blob_view *v)
{
    return map_bytes(v) + (n_workers > 1 ? (uint64_t)(n_workers - 1) * scratch_stride(v) : 0);
}

uint32_t nib_exec_set_team(struct nib_exec *e, struct nib_team *t, void *tmem)
{
    e->team = t;
    e->barrier_before = tmem;
    e->wscratch = (uint8_t *)tmem + map_bytes(e->v);
    return nib_exec_plan_barriers(e->v, nib_team_workers(t), tmem);
}

uint8_t *nib_exec_worker_scratch(const struct nib_exec *e, uint32_t w)
{
    const struct nib_blob_view *v = e->v;
    return w ? e->wscratch + (uint64_t)(w - 1) * scratch_stride(v) : e->mem + v->h->wscratch_off;
}

/* ---- a pass ------------------------------------------------------------------ */

/* One pass, as every worker sees it (on the leader's stack until the pass
 * ends: nib_team_run returns after the last barrier). */
struct pass {
    const struct nib_exec *e;
    const struct nib_qkernels *qk;
    uint32_t m, pos, n;
};

/* Worker w's share of every op of the pass, with the planned barriers. */
static void run_share(uint32_t w, void *arg)
{
    const struct pass *p = arg;
    const struct nib_exec *e = p->e;
    const struct nib_blob_view *v = e->v;
    uint8_t *ws = nib_exec_worker_scratch(e, w);
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        if (p->n > 1 && e->barrier_before[i])
            nib_team_barrier(e->team, w);
        nib_exec_op(p->qk, v, e->mem, ws, &v->ops[i], p->m, p->pos, w, p->n);
    }
}

const float *nib_exec_tokens(struct nib_exec *e, const uint32_t *tokens, uint32_t m, uint32_t pos)
{
    const struct nib_blob_view *v = e->v;
    const struct nib_hparams *hp = &v->h->hp;
    if (m == 0 || m > v->h->max_batch || pos >= hp->ctx_len || m > hp->ctx_len - pos)
        return NULL;
    for (uint32_t t = 0; t < m; t++)
        if (tokens[t] >= hp->vocab_size)
            return NULL;
    struct pass p = {e, e->qk ? e->qk : nib_qkernels_get(NIB_ISA_SCALAR), m, pos,
                     e->team ? nib_team_workers(e->team) : 1};
    uint64_t t0 = e->stats ? nib_now_ns() : 0;
    memcpy(e->mem + v->h->token_slot_off, tokens, (size_t)m * 4);
    memcpy(e->mem + v->h->pos_slot_off, &pos, 4);
    if (e->team)
        nib_team_run(e->team, run_share, &p);
    else
        run_share(0, &p);
    const float *logits = f32_at(e->mem, v->h->logits_off);
    if (e->digest) {
        e->digest_crc = nib_crc32c(e->digest_crc, logits, (size_t)hp->vocab_size * 4);
        if (e->stats)
            e->stats->logits_digest = e->digest_crc;
    }
    if (e->stats && m == 1)
        nib_stats_token(e->stats, nib_now_ns() - t0);
    return logits;
}

int nib_exec_run(struct nib_exec *e)
{
    const struct nib_blob_view *v = e->v;
    if (v->h->model_kind != NIB_MODEL_VISION)
        return -1;
    struct pass p = {e, e->qk ? e->qk : nib_qkernels_get(NIB_ISA_SCALAR), 1, 0,
                     e->team ? nib_team_workers(e->team) : 1};
    uint64_t t0 = e->stats ? nib_now_ns() : 0;
    if (e->team)
        nib_team_run(e->team, run_share, &p);
    else
        run_share(0, &p);
    if (e->stats)
        nib_stats_token(e->stats, nib_now_ns() - t0);
    return 0;
}

const float *nib_exec_token(struct nib_exec *e, uint32_t token, uint32_t pos)
{
    return nib_exec_tokens(e, &token, 1, pos);
}

uint32_t nib_exec_argmax(const struct nib_exec *e)
{
    const struct nib_blob_header *h = e->v->h;
    if (!h->argmax_blocks)
        return nib_argmax(f32_at(e->mem, h->logits_off), h->hp.vocab_size);
    const struct nib_argmax_block *blk = (const void *)(e->mem + h->argmax_off);
    struct nib_argmax_block best = {-INFINITY, 0};
    for (uint32_t i = 0; i < h->argmax_blocks; i++)
        if (blk[i].value > best.value)
            best = blk[i];
    return best.index;
}
