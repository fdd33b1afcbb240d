#include "rt/refloop.h"

#include <string.h>

#include "kernels/qformat.h"
#include "rt/team.h"

int nib_ref_spans(const struct nib_blob_view *v, const struct nib_op *op, uint32_t pos, uint32_t w,
                  uint32_t n, struct nib_ref_span *out)
{
    uint32_t b, e;
    nib_exec_share(op, w, n, &b, &e);
    if (b >= e)
        return 0;
    if (op->code == NIB_OP_MATMUL) {
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        uint64_t lo, hi;
        struct nib_qlayout l;
        if (t->dtype == NIB_DT_F32) { /* row-major rows of cols floats */
            lo = (uint64_t)b * t->cols * 4;
            hi = (uint64_t)e * t->cols * 4;
        } else if (nib_qlayout_get(&l, t->dtype, t->group, t->rows, t->cols) == 0) {
            /* the N-blocks (tiles of NIB_Q_TILE_N rows) holding rows [b, e);
             * shares split rows in whole pairs of them (NIB_EXEC_ROW_BLOCK),
             * so these are the pairs' bytes exactly; a share bound inside a
             * pair (a head size not a multiple of 16 rows) moves half a
             * pair's bytes between two workers, the total unchanged */
            lo = (uint64_t)(b / NIB_Q_TILE_N) * l.nblock_bytes;
            hi = (uint64_t)((e + NIB_Q_TILE_N - 1) / NIB_Q_TILE_N) * l.nblock_bytes;
        } else {
            return 0; /* nib_blob_open refuses such a tensor */
        }
        out[0] = (struct nib_ref_span){t->offset + lo, hi - lo, 0, 1, 1};
        return 1;
    }
    if (op->code == NIB_OP_ATTENTION) {
        const struct nib_attention_params *p = &op->attention;
        uint32_t group = op->n / p->n_kv_heads;
        uint32_t h0 = b / group, h1 = (e - 1) / group + 1; /* KV heads of query heads [b, e) */
        uint32_t t0 = p->window && pos + 1 > p->window ? pos + 1 - p->window : 0;
        uint64_t head = (uint64_t)op->k * 4, first = op->src1 + (uint64_t)t0 * p->cache_stride;
        if (p->cache_stride == head) /* head by head: each head one run */
            out[0] = (struct nib_ref_span){first + h0 * p->head_stride, (pos - t0 + 1) * head,
                                           p->head_stride, h1 - h0, 0};
        else /* heads side by side (the validator allows no third layout) */
            out[0] = (struct nib_ref_span){first + h0 * head, (h1 - h0) * head, p->cache_stride,
                                           pos - t0 + 1, 0};
        out[1] = out[0];
        out[1].off += p->v_cache_off;
        return 2;
    }
    return 0;
}

void nib_ref_bytes(const struct nib_blob_view *v, uint32_t pos, uint32_t n,
                   struct nib_ref_bytes *out)
{
    *out = (struct nib_ref_bytes){0, 0};
    for (uint32_t i = 0; i < v->h->n_ops; i++)
        for (uint32_t w = 0; w < n; w++) {
            struct nib_ref_span s[NIB_REF_SPANS_MAX];
            int k = nib_ref_spans(v, &v->ops[i], pos, w, n, s);
            for (int j = 0; j < k; j++)
                *(s[j].weights ? &out->weights : &out->kv) += s[j].len * s[j].count;
        }
}

/* Eight independent 32-byte accumulators: enough loads in flight that
 * the loop is bound by memory, not by its own dependency chain (nib
 * bench's stream read finds eight the best of 4, 8 and 16 here). */
typedef uint64_t u64x4 __attribute__((vector_size(32)));

static u64x4 load32(const uint8_t *p)
{
    u64x4 x;
    memcpy(&x, p, sizeof x);
    return x;
}

static uint64_t fold(const uint8_t *p, uint64_t len)
{
    /* named, not an array: GCC keeps these in registers */
    u64x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    uint64_t i = 0;
    for (; i + 256 <= len; i += 256) {
        a0 ^= load32(p + i);
        a1 += load32(p + i + 32);
        a2 ^= load32(p + i + 64);
        a3 += load32(p + i + 96);
        a4 ^= load32(p + i + 128);
        a5 += load32(p + i + 160);
        a6 ^= load32(p + i + 192);
        a7 += load32(p + i + 224);
    }
    for (; i + 32 <= len; i += 32)
        a0 += load32(p + i);
    uint64_t s = 0;
    for (; i < len; i++)
        s += p[i];
    a0 ^= a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
    return s + a0[0] + a0[1] + a0[2] + a0[3];
}

uint64_t nib_ref_op(const struct nib_exec *e, uint32_t i, uint32_t pos, uint32_t w, uint32_t n,
                    uint64_t *sink)
{
    const struct nib_blob_view *v = e->v;
    struct nib_ref_span s[NIB_REF_SPANS_MAX];
    int k = nib_ref_spans(v, &v->ops[i], pos, w, n, s);
    uint64_t bytes = 0, acc = *sink;
    for (int j = 0; j < k; j++) {
        const uint8_t *base = (s[j].weights ? v->weights : e->mem) + s[j].off;
        for (uint32_t c = 0; c < s[j].count; c++)
            acc += fold(base + (uint64_t)c * s[j].stride, s[j].len);
        bytes += s[j].len * s[j].count;
    }
    *sink = acc;
    return bytes;
}

/* Worker w's share of every op, with the executor's barriers unless the
 * loop runs free. */
static void ref_share(uint32_t w, void *arg)
{
    struct nib_ref *r = arg;
    const struct nib_exec *e = r->e;
    const uint32_t n = e->team ? nib_team_workers(e->team) : 1;
    uint64_t sink = r->slot[w].sink, bytes = 0;
    for (uint32_t i = 0; i < e->v->h->n_ops; i++) {
        if (n > 1 && !r->free_running && e->barrier_before[i])
            nib_team_barrier(e->team, w);
        bytes += nib_ref_op(e, i, r->pos, w, n, &sink);
    }
    r->slot[w].sink = sink;
    r->slot[w].bytes += bytes;
}

int nib_ref_iteration(struct nib_ref *r, uint32_t pos)
{
    if (pos >= r->e->v->h->hp.ctx_len)
        return -1;
    r->pos = pos;
    if (r->e->team)
        nib_team_run(r->e->team, ref_share, r);
    else
        ref_share(0, r);
    return 0;
}

uint64_t nib_ref_bytes_read(const struct nib_ref *r)
{
    uint64_t sum = 0;
    for (uint32_t w = 0; w < NIB_TEAM_MAX_WORKERS; w++)
        sum += r->slot[w].bytes;
    return sum;
}
