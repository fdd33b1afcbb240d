/* nib inspect on a vision blob: the header, the io table, the tensor table,
 * the plan with each vision op's shape and scales, and the weight bytes by
 * format (resident: the whole weights section; every image reads all of
 * it). --json prints the same facts, without the plan, as one object. */
#include <inttypes.h>
#include <stdio.h>

#include "model_blob/blob_view.h"
#include "tools/cli/cli.h"

static void dims_str(const struct nib_io_rec *r, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = 0;
    for (uint32_t d = 0; d < r->rank && d < NIB_IO_MAX_RANK && k + 12 < cap; d++)
        k += (size_t)snprintf(out + k, cap - k, "%s%u", d ? "x" : "", r->dims[d]);
}

/* A name from the blob, control bytes shown as '?'. */
static void print_name(const char *s, size_t max)
{
    for (size_t i = 0; i < max && s[i]; i++)
        putchar((unsigned char)s[i] < 0x20 || (unsigned char)s[i] == 0x7f ? '?' : s[i]);
}

/* An op's int8 output: 1 instead of its floats, 2 beside them (at aux). */
static void print_qout(uint32_t qout, float y_scale)
{
    printf("%s", qout == 1 ? " int8-out" : qout == 2 ? " f32-and-int8-out" : "");
    if (qout)
        printf(" y_scale=%g", (double)y_scale);
}

static void print_vparams(const struct nib_op *op)
{
    const struct nib_vconv_params *c = &op->vconv;
    switch (op->code) {
    case NIB_VOP_CONV:
    case NIB_VOP_QCONV:
    case NIB_VOP_POOL:
        printf(" %ux%ux%u -> %ux%ux%u k%ux%u s%u,%u p%u,%u d%u,%u g%u", c->h, c->w, c->c_in, c->oh,
               c->ow, c->c_out, c->kh, c->kw, c->stride_h, c->stride_w, c->pad_top, c->pad_left,
               c->dil_h, c->dil_w, c->groups);
        if (op->code == NIB_VOP_POOL) {
            printf(" mode=%u", c->mode);
            break;
        }
        printf("%s%s act=%u", c->depthwise ? " depthwise" : "", c->mode ? " transposed" : "",
               c->act);
        if (c->res)
            printf(" residual=%s", c->res == 1 ? "before-act" : "after-act");
        if (op->code == NIB_VOP_QCONV)
            printf(" x_scale=%g", (double)c->x_scale);
        print_qout(c->qout, c->y_scale);
        break;
    case NIB_VOP_QUANT:
        printf(" n=%" PRIu64 " scale=%g", (uint64_t)op->vquant.n, (double)op->vquant.scale);
        break;
    case NIB_VOP_MATMUL:
        printf(" m=%u n=%u k=%u", op->vmatmul.m, op->vmatmul.n, op->vmatmul.k);
        break;
    case NIB_VOP_BINARY:
    case NIB_VOP_UNARY:
    case NIB_VOP_COPY:
        printf(" dims=%ux%ux%ux%u fn=%u", op->vew.dims[0], op->vew.dims[1], op->vew.dims[2],
               op->vew.dims[3], op->vew.fn);
        if (op->code == NIB_VOP_BINARY && op->vew.fn == NIB_VBIN_MULADD)
            printf(" (a+a*b)");
        print_qout(op->vew.qout, op->vew.y_scale);
        break;
    default: break;
    }
}

/* Bytes of the weights section by tensor format. */
static void bytes_by_dtype(const struct nib_blob_view *v, uint64_t *by)
{
    for (uint32_t i = 0; i < NIB_DT_COUNT; i++)
        by[i] = 0;
    for (uint32_t i = 0; i < v->h->n_tensors; i++)
        if (v->tensors[i].dtype < NIB_DT_COUNT)
            by[v->tensors[i].dtype] += v->tensors[i].size;
}

static void print_text(const struct nib_blob_view *v, int show_plan)
{
    const struct nib_blob_header *h = v->h;
    printf("blob: format version %u, %" PRIu64 " bytes, crc32c %08x, isa 0x%x\n", h->version,
           (uint64_t)h->blob_size, h->crc32c, h->isa_required);
    printf("model: vision, %u ops, %u tensors, %u inputs and outputs\n", h->n_ops, h->n_tensors,
           v->n_io);
    printf("runtime memory: %" PRIu64 " bytes (arena, io bytes included; worker scratch %u)\n",
           (uint64_t)h->act_size, h->wscratch_size);
    printf("\nio:\n");
    for (uint32_t i = 0; i < v->n_io; i++) {
        const struct nib_io_rec *r = &v->io[i];
        char d[160];
        dims_str(r, d, sizeof d);
        printf("  %-6s ", r->dir == NIB_IO_INPUT ? "input" : "output");
        print_name(r->name, sizeof r->name);
        printf(" %s %s  @%" PRIu64 "  %" PRIu64 " bytes\n", r->dtype == NIB_IO_U8 ? "u8" : "f32", d,
               (uint64_t)r->off, (uint64_t)r->bytes);
    }
    printf("\ntensors (%u):\n", h->n_tensors);
    for (uint32_t i = 0; i < h->n_tensors; i++) {
        const struct nib_tensor_rec *t = &v->tensors[i];
        printf("  %3u ", i);
        print_name(t->name, sizeof t->name);
        printf("  %s %u x %u  %" PRIu64 " bytes\n", nib_dtype_name(t->dtype), t->rows, t->cols,
               (uint64_t)t->size);
    }
    if (show_plan) {
        printf("\nplan (%u ops):\n", h->n_ops);
        for (uint32_t i = 0; i < h->n_ops; i++) {
            const struct nib_op *op = &v->ops[i];
            printf("  %4u %-9s t=%-4d src0=%-9" PRIu64 " src1=%-9" PRIu64 " dst=%-9" PRIu64, i,
                   nib_op_name(op->code), op->tensor == UINT32_MAX ? -1 : (int)op->tensor,
                   (uint64_t)op->src0, (uint64_t)op->src1, (uint64_t)op->dst);
            print_vparams(op);
            printf("\n");
        }
    }
    uint64_t by[NIB_DT_COUNT];
    bytes_by_dtype(v, by);
    printf("\nweights: resident %" PRIu64 " bytes (%.1f MiB: the weights section, every image "
           "reads all of it)\n        ",
           (uint64_t)h->weights.size, h->weights.size / 1048576.0);
    for (uint32_t d = 0; d < NIB_DT_COUNT; d++)
        if (by[d])
            printf(" %s %" PRIu64, nib_dtype_name(d), by[d]);
    printf(" (tensor bytes, alignment apart)\n\nchecksum: ok\n");
}

static void print_json(const struct nib_blob_view *v)
{
    const struct nib_blob_header *h = v->h;
    uint64_t by[NIB_DT_COUNT];
    bytes_by_dtype(v, by);
    printf("{\"format_version\": %u, \"blob_bytes\": %" PRIu64 ", \"crc32c\": \"%08x\", "
           "\"checksum_ok\": true, \"model_kind\": \"vision\", \"n_ops\": %u,\n",
           h->version, (uint64_t)h->blob_size, h->crc32c, h->n_ops);
    printf(" \"runtime_bytes\": %" PRIu64 ", \"worker_scratch_bytes\": %u,\n",
           (uint64_t)h->act_size, h->wscratch_size);
    printf(" \"weights\": {\"resident_bytes\": %" PRIu64, (uint64_t)h->weights.size);
    for (uint32_t d = 0; d < NIB_DT_COUNT; d++)
        printf(", \"%s_bytes\": %" PRIu64, nib_dtype_name(d), by[d]);
    printf("},\n \"io\": [");
    for (uint32_t i = 0; i < v->n_io; i++) {
        const struct nib_io_rec *r = &v->io[i];
        printf("%s\n  {\"dir\": \"%s\", \"name\": \"", i ? "," : "",
               r->dir == NIB_IO_INPUT ? "input" : "output");
        for (size_t k = 0; k < sizeof r->name && r->name[k]; k++) {
            unsigned char ch = (unsigned char)r->name[k];
            printf(ch == '"' || ch == '\\'   ? "\\%c"
                   : ch < 0x20 || ch >= 0x7f ? "\\u%04x"
                                             : "%c",
                   ch);
        }
        printf("\", \"dtype\": \"%s\", \"dims\": [", r->dtype == NIB_IO_U8 ? "u8" : "f32");
        for (uint32_t d = 0; d < r->rank && d < NIB_IO_MAX_RANK; d++)
            printf("%s%u", d ? ", " : "", r->dims[d]);
        printf("], \"bytes\": %" PRIu64 "}", (uint64_t)r->bytes);
    }
    printf("]}\n");
}

void nib_inspect_vision(const struct nib_blob_view *v, int show_plan, int json)
{
    if (json)
        print_json(v);
    else
        print_text(v, show_plan);
}
