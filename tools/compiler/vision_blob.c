/* A lowered vision plan (vision_plan.h) placed in one arena and written
 * as a blob (blob_format.h, NIB_MODEL_VISION), then validated by the
 * runtime's own nib_blob_open before it is kept. */
#include <stdlib.h>
#include <string.h>

#include "kernels/qformat.h"
#include "model_blob/blob_view.h"
#include "tools/compiler/vision_plan.h"
#include "tools/util/tool_util.h"

#define BUF_ALIGN 64u

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static int32_t last_of(const struct vp_buf *b)
{
    return b->last > b->first ? b->last : b->first;
}

static int lifetimes_overlap(const struct vp_buf *a, const struct vp_buf *b)
{
    return a->first <= last_of(b) && b->first <= last_of(a);
}

static const struct vision_plan *sort_plan;

static int by_size_desc(const void *x, const void *y)
{
    const struct vp_buf *a = &sort_plan->bufs[*(const uint32_t *)x];
    const struct vp_buf *b = &sort_plan->bufs[*(const uint32_t *)y];
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

struct span {
    uint64_t off, end;
};

static int by_off(const void *x, const void *y)
{
    const struct span *a = x, *b = y;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Largest buffers first, each at the lowest offset where no buffer placed
 * before it and alive at the same time lies. */
void vp_place(struct vision_plan *p)
{
    uint32_t n = p->n_bufs, *order = malloc((n + 1) * sizeof *order), n_placed = 0;
    struct span *busy = malloc((n + 1) * sizeof *busy);
    uint32_t *placed = malloc((n + 1) * sizeof *placed);
    p->arena = BUF_ALIGN;
    if (!order || !busy || !placed) { /* no reuse at all: every buffer its own bytes */
        uint64_t at = 0;
        for (uint32_t i = 0; i < n; i++) {
            p->bufs[i].off = at;
            at = align_up(at + p->bufs[i].bytes, BUF_ALIGN);
        }
        p->arena = at > BUF_ALIGN ? at : BUF_ALIGN;
        free(order), free(busy), free(placed);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    sort_plan = p;
    qsort(order, n, sizeof *order, by_size_desc);
    for (uint32_t k = 0; k < n; k++) {
        struct vp_buf *b = &p->bufs[order[k]];
        uint32_t nb = 0;
        for (uint32_t j = 0; j < n_placed; j++) {
            const struct vp_buf *o = &p->bufs[placed[j]];
            if (lifetimes_overlap(b, o))
                busy[nb++] = (struct span){o->off, o->off + o->bytes};
        }
        qsort(busy, nb, sizeof *busy, by_off);
        uint64_t at = 0;
        for (uint32_t j = 0; j < nb; j++) {
            if (busy[j].off >= at + b->bytes)
                break;
            if (busy[j].end > at)
                at = align_up(busy[j].end, BUF_ALIGN);
        }
        b->off = at;
        placed[n_placed++] = order[k];
        if (align_up(at + b->bytes, BUF_ALIGN) > p->arena)
            p->arena = align_up(at + b->bytes, BUF_ALIGN);
    }
    free(order), free(busy), free(placed);
}

int vp_build_blob(const struct vision_plan *p, uint8_t **blob, uint64_t *len, char *err,
                  size_t errlen)
{
    struct nib_blob_header h = {0};
    memcpy(h.magic, NIB_BLOB_MAGIC, 8);
    h.version = NIB_BLOB_VERSION;
    h.header_size = sizeof h;
    h.model_kind = NIB_MODEL_VISION;
    h.n_io = p->n_io;
    h.n_tensors = p->n_w;
    h.n_ops = p->n_ops;
    h.max_batch = 1;
    h.act_size = p->arena;
    h.wscratch_size = p->wscratch;
    h.wscratch_off = p->wscratch_buf >= 0 ? p->bufs[p->wscratch_buf].off : 0;
    h.tensors.offset = align_up(sizeof h, NIB_SECTION_ALIGN);
    h.tensors.size = (uint64_t)p->n_w * sizeof(struct nib_tensor_rec);
    h.plan.offset = align_up(h.tensors.offset + h.tensors.size, NIB_SECTION_ALIGN);
    h.plan.size = (uint64_t)p->n_ops * sizeof(struct nib_op);
    h.tokenizer.offset = align_up(h.plan.offset + h.plan.size, NIB_SECTION_ALIGN);
    h.tokenizer.size = (uint64_t)p->n_io * sizeof(struct nib_io_rec);
    h.weights.offset = align_up(h.tokenizer.offset + h.tokenizer.size, NIB_WEIGHT_ALIGN);
    uint64_t wsize = 0;
    for (uint32_t i = 0; i < p->n_w; i++)
        wsize = align_up(wsize + p->w[i].size, NIB_SECTION_ALIGN);
    h.weights.size = wsize;
    h.blob_size = h.weights.offset + wsize;
    uint8_t *b = aligned_alloc(NIB_SECTION_ALIGN, align_up(h.blob_size, NIB_SECTION_ALIGN));
    if (!b)
        return nib_fail(err, errlen, "out of memory for a blob of %llu bytes",
                        (unsigned long long)h.blob_size);
    memset(b, 0, h.blob_size);
    struct nib_tensor_rec *tr = (struct nib_tensor_rec *)(void *)(b + h.tensors.offset);
    uint64_t at = 0;
    for (uint32_t i = 0; i < p->n_w; i++) {
        const struct vp_weight *w = &p->w[i];
        memcpy(tr[i].name, w->name, NIB_NAME_MAX);
        tr[i].name[NIB_NAME_MAX - 1] = 0;
        tr[i].dtype = w->dtype;
        tr[i].rows = w->rows;
        tr[i].cols = w->cols;
        if (w->dtype != NIB_DT_F32) { /* f32 records keep 0 x 0, as before */
            tr[i].tile_n = nib_qformat_tile_n(w->dtype, 0);
            tr[i].tile_k = nib_qformat_tile_k(w->dtype, 0);
        }
        tr[i].offset = at;
        tr[i].size = w->size;
        memcpy(b + h.weights.offset + at, w->data, tr[i].size);
        at = align_up(at + tr[i].size, NIB_SECTION_ALIGN);
    }
    struct nib_op *ops = (struct nib_op *)(void *)(b + h.plan.offset);
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const struct vp_op *o = &p->ops[i];
        ops[i] = o->op;
        uint64_t *dst[4] = {&ops[i].src0, &ops[i].src1, &ops[i].dst, &ops[i].aux};
        for (int k = 0; k < 4; k++)
            *dst[k] = o->buf[k] < 0 ? 0 : p->bufs[o->buf[k]].off + o->add[k];
    }
    struct nib_io_rec *io = (struct nib_io_rec *)(void *)(b + h.tokenizer.offset);
    for (uint32_t i = 0; i < p->n_io; i++) {
        io[i] = p->io[i].rec;
        io[i].off = p->bufs[p->io[i].buf].off;
    }
    memcpy(b, &h, sizeof h);
    ((struct nib_blob_header *)(void *)b)->crc32c = nib_blob_crc(b, h.blob_size);
    struct nib_blob_view v;
    char why[400];
    if (nib_blob_open(&v, b, h.blob_size, 1, why, sizeof why)) {
        free(b);
        return nib_fail(err, errlen, "the blob does not validate (a compiler bug): %s", why);
    }
    *blob = b;
    *len = h.blob_size;
    return 0;
}
