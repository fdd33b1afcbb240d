#include "rt/exec.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

static float *f32_at(uint8_t *mem, uint64_t off)
{
    return (float *)(void *)(mem + off);
}

static void run_op(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op,
                   uint32_t token, uint32_t pos)
{
    const uint32_t ctx = v->h->hp.ctx_len;
    switch (op->code) {
    case NIB_OP_EMBED: {
        const float *row = nib_tensor_f32(v, op->tensor) + (uint64_t)token * op->n;
        memcpy(f32_at(mem, op->dst), row, (size_t)op->n * 4);
        break;
    }
    case NIB_OP_RMSNORM:
        nib_rmsnorm_f32_scalar(f32_at(mem, op->src0), nib_tensor_f32(v, op->tensor),
                               f32_at(mem, op->dst), op->n, op->f0);
        break;
    case NIB_OP_MATMUL:
        nib_gemv_f32_scalar(nib_tensor_f32(v, op->tensor), f32_at(mem, op->src0),
                            f32_at(mem, op->dst),
                            (op->p0 & NIB_EPI_ADD) ? f32_at(mem, op->src1) : NULL, 0, op->n,
                            op->k);
        break;
    case NIB_OP_ROPE:
        nib_rope_f32_scalar(f32_at(mem, op->src0), op->p0, op->k, op->p1,
                            nib_tensor_f32(v, op->tensor) + (uint64_t)pos * op->p1);
        break;
    case NIB_OP_KV_STORE:
        memcpy(mem + op->dst + (uint64_t)pos * op->p0, f32_at(mem, op->src0), (size_t)op->n * 4);
        memcpy(mem + op->dst + op->p1 + (uint64_t)pos * op->p0, f32_at(mem, op->src1),
               (size_t)op->n * 4);
        break;
    case NIB_OP_ATTENTION:
        nib_attention_f32_scalar(f32_at(mem, op->src0), f32_at(mem, op->src1),
                                 f32_at(mem, op->src1 + op->p2), f32_at(mem, op->dst),
                                 f32_at(mem, op->scratch), 0, op->n, op->k, op->n / op->p0,
                                 op->p1 / 4, pos, ctx, op->f0);
        break;
    case NIB_OP_SILU_MUL:
        nib_silu_mul_f32_scalar(f32_at(mem, op->src0), f32_at(mem, op->src1),
                                f32_at(mem, op->dst), op->n);
        break;
    }
}

const float *nib_exec_token(struct nib_exec *e, uint32_t token, uint32_t pos)
{
    const struct nib_blob_view *v = e->v;
    if (token >= v->h->hp.vocab_size || pos >= v->h->hp.ctx_len)
        return NULL;
    memcpy(e->mem + v->h->token_slot_off, &token, 4);
    memcpy(e->mem + v->h->pos_slot_off, &pos, 4);
    for (uint32_t i = 0; i < v->h->n_ops; i++)
        run_op(v, e->mem, &v->ops[i], token, pos);
    return f32_at(e->mem, v->h->logits_off);
}
