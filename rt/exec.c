#include "rt/exec.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "kernels/qkernels.h"
#include "model_blob/crc32c.h"
#include "rt/cpu_isa.h"
#include "rt/stats.h"
#include "rt/team.h"

static float *f32_at(uint8_t *mem, uint64_t off)
{
    return (float *)(void *)(mem + off);
}

/* Quantized kernels: every variant gives the same bits as the scalar
 * reference (kernels/qkernels.h), so the choice only changes speed. */
static const struct nib_qkernels *qk;

const char *nib_exec_select_kernels(uint32_t isa)
{
    const struct nib_qkernels *k = NULL;
    if (isa & NIB_ISA_AVX2)
        k = nib_qkernels_get(NIB_ISA_AVX2);
    if (!k && (isa & NIB_ISA_NEON_DOT))
        k = nib_qkernels_get(NIB_ISA_NEON_DOT);
    if (!k)
        k = nib_qkernels_get(NIB_ISA_SCALAR);
    qk = k;
    return k->name;
}

/* The int8 activations a quant op wrote at off (one row). */
static struct nib_qact qact_at(uint8_t *mem, uint64_t off, uint32_t k, uint32_t block)
{
    struct nib_qact a;
    nib_qact_init(&a, mem + off, 1, k, block); /* offsets checked at boot */
    return a;
}

/* Units an op is split in, and the block size of the split. */
static uint32_t op_units(const struct nib_op *op, uint32_t *block)
{
    *block = NIB_EXEC_ELEM_BLOCK;
    switch (op->code) {
    case NIB_OP_MATMUL:
        *block = NIB_EXEC_ROW_BLOCK;
        return op->n;
    case NIB_OP_ROPE:
        *block = 1;
        return op->p0; /* heads */
    case NIB_OP_ATTENTION:
        *block = 1;
        return op->n; /* heads */
    case NIB_OP_EMBED:
    case NIB_OP_KV_STORE:
    case NIB_OP_SILU_MUL:
        return op->n; /* elements */
    default:
        /* RMSNORM (a reduction), and any op without a split of its own:
         * one share, worker 0's. */
        *block = UINT32_MAX;
        return op->n ? op->n : 1;
    }
}

void nib_exec_share(const struct nib_op *op, uint32_t w, uint32_t n, uint32_t *begin,
                    uint32_t *end)
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

void nib_exec_op(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op,
                 uint32_t token, uint32_t pos, uint32_t w, uint32_t n)
{
    const uint32_t ctx = v->h->hp.ctx_len;
    uint32_t b, e;
    nib_exec_share(op, w, n, &b, &e);
    if (b >= e)
        return;
    switch (op->code) {
    case NIB_OP_EMBED: {
        const float *row = nib_tensor_f32(v, op->tensor) + (uint64_t)token * op->n;
        memcpy(f32_at(mem, op->dst) + b, row + b, (size_t)(e - b) * 4);
        break;
    }
    case NIB_OP_RMSNORM:
        nib_rmsnorm_f32_scalar(f32_at(mem, op->src0), nib_tensor_f32(v, op->tensor),
                               f32_at(mem, op->dst), op->n, op->f0);
        break;
    case NIB_OP_MATMUL: {
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        const float *add = (op->p0 & NIB_EPI_ADD) ? f32_at(mem, op->src1) : NULL;
        if (t->dtype == NIB_DT_F32) {
            nib_gemv_f32_scalar(nib_tensor_f32(v, op->tensor), f32_at(mem, op->src0),
                                f32_at(mem, op->dst), add, b, e, op->k);
            break;
        }
        struct nib_qlayout l;
        nib_qlayout_get(&l, t->dtype, t->group, t->rows, t->cols);
        struct nib_qact a = qact_at(mem, op->src0, op->k, nib_qformat_act_block(t->dtype, t->group));
        nib_qgemv(qk, &l, v->weights + t->offset, &a, f32_at(mem, op->dst), add, b, e);
        break;
    }
    case NIB_OP_QUANT: {
        struct nib_qact a = qact_at(mem, op->dst, op->n, op->p0);
        qk->qact(&a, 0, f32_at(mem, op->src0));
        break;
    }
    case NIB_OP_ROPE:
        nib_rope_f32_scalar(f32_at(mem, op->src0) + (uint64_t)b * op->k, e - b, op->k, op->p1,
                            nib_tensor_f32(v, op->tensor) + (uint64_t)pos * op->p1);
        break;
    case NIB_OP_KV_STORE: {
        uint8_t *k = mem + op->dst + (uint64_t)pos * op->p0, *vv = k + op->p1;
        memcpy(k + b * 4ull, f32_at(mem, op->src0) + b, (size_t)(e - b) * 4);
        memcpy(vv + b * 4ull, f32_at(mem, op->src1) + b, (size_t)(e - b) * 4);
        break;
    }
    case NIB_OP_ATTENTION:
        nib_attention_f32_scalar(f32_at(mem, op->src0), f32_at(mem, op->src1),
                                 f32_at(mem, op->src1 + op->p2), f32_at(mem, op->dst),
                                 f32_at(mem, op->scratch), b, e, op->k, op->n / op->p0,
                                 op->p1 / 4, pos, ctx, op->f0);
        break;
    case NIB_OP_SILU_MUL:
        nib_silu_mul_f32_scalar(f32_at(mem, op->src0) + b, f32_at(mem, op->src1) + b,
                                f32_at(mem, op->dst) + b, e - b);
        break;
    }
}

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

int nib_exec_access(const struct nib_blob_view *v, const struct nib_op *op, uint32_t w, uint32_t n,
                    struct nib_access *out)
{
    const uint64_t ctx = v->h->hp.ctx_len;
    uint32_t b, e;
    int c = 0;
    nib_exec_share(op, w, n, &b, &e);
    if (b >= e)
        return 0;
    switch (op->code) {
    case NIB_OP_EMBED:
        acc(out, &c, op->dst, b * 4ull, e * 4ull, 1);
        break;
    case NIB_OP_RMSNORM:
        acc(out, &c, op->src0, 0, op->n * 4ull, 0);
        acc(out, &c, op->dst, 0, op->n * 4ull, 1);
        break;
    case NIB_OP_MATMUL: {
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        uint64_t in = t->dtype == NIB_DT_F32
                          ? op->k * 4ull
                          : nib_qact_footprint(1, op->k, nib_qformat_act_block(t->dtype, t->group));
        acc(out, &c, op->src0, 0, in, 0);
        acc(out, &c, op->dst, b * 4ull, e * 4ull, 1);
        if (op->p0 & NIB_EPI_ADD)
            acc(out, &c, op->src1, b * 4ull, e * 4ull, 0);
        break;
    }
    case NIB_OP_QUANT:
        acc(out, &c, op->src0, 0, op->n * 4ull, 0);
        acc(out, &c, op->dst, 0, nib_qact_footprint(1, op->n, op->p0), 1);
        break;
    case NIB_OP_ROPE:
        acc(out, &c, op->src0, (uint64_t)b * op->k * 4, (uint64_t)e * op->k * 4, 1);
        break;
    case NIB_OP_KV_STORE:
        acc(out, &c, op->src0, b * 4ull, e * 4ull, 0);
        acc(out, &c, op->src1, b * 4ull, e * 4ull, 0);
        /* Which row depends on the position: the whole layer's cache. */
        acc(out, &c, op->dst, 0, op->p1 + ctx * op->p0, 1);
        break;
    case NIB_OP_ATTENTION:
        acc(out, &c, op->src0, (uint64_t)b * op->k * 4, (uint64_t)e * op->k * 4, 0);
        acc(out, &c, op->src1, 0, op->p2 + ctx * op->p1, 0);
        acc(out, &c, op->dst, (uint64_t)b * op->k * 4, (uint64_t)e * op->k * 4, 1);
        acc(out, &c, op->scratch, b * ctx * 4, e * ctx * 4, 1);
        break;
    case NIB_OP_SILU_MUL:
        acc(out, &c, op->src0, b * 4ull, e * 4ull, 0);
        acc(out, &c, op->src1, b * 4ull, e * 4ull, 0);
        acc(out, &c, op->dst, b * 4ull, e * 4ull, 1);
        break;
    default:
        /* An op this table does not describe: all of runtime memory, so the
         * team puts barriers on both sides of it. Add an exact case with
         * every new opcode. */
        acc(out, &c, 0, 0, v->mem_size, 1);
        break;
    }
    return c;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const float *nib_exec_token(struct nib_exec *e, uint32_t token, uint32_t pos)
{
    const struct nib_blob_view *v = e->v;
    if (token >= v->h->hp.vocab_size || pos >= v->h->hp.ctx_len)
        return NULL;
    if (!qk)
        nib_exec_select_kernels(NIB_ISA_SCALAR);
    uint64_t t0 = e->stats ? now_ns() : 0;
    memcpy(e->mem + v->h->token_slot_off, &token, 4);
    memcpy(e->mem + v->h->pos_slot_off, &pos, 4);
    if (e->team) {
        nib_team_run(e->team, token, pos);
    } else {
        for (uint32_t i = 0; i < v->h->n_ops; i++)
            nib_exec_op(v, e->mem, &v->ops[i], token, pos, 0, 1);
    }
    const float *logits = f32_at(e->mem, v->h->logits_off);
    if (e->digest) {
        e->digest_crc = nib_crc32c(e->digest_crc, logits, (size_t)v->h->hp.vocab_size * 4);
        if (e->stats)
            e->stats->logits_digest = e->digest_crc;
    }
    if (e->stats)
        nib_stats_token(e->stats, now_ns() - t0);
    return logits;
}
