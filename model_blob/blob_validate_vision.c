/* Validation of a vision plan's ops (blob_format.h NIB_VOP_*), as hostile
 * input: every shape within the kernels' limits and consistent with its
 * weights, every operand inside runtime memory, no op's output overlapping
 * an input another worker may still read. */
#include "model_blob/blob_validate_vision.h"

#include <math.h>
#include <stdio.h>

#include "kernels/conv.h"     /* enum nib_pool, enum nib_resize_coord: the kernels' constants */
#include "kernels/qkernels.h" /* nib_qact_footprint (qact.c) and qformat.c: arithmetic only */

static const char *const vop_names[] = {"input",   "conv",    "pool",    "binary", "unary",
                                        "copy",    "vmatmul", "softmax", "resize", "layernorm",
                                        "bmatmul", "vquant",  "qconv"};

const char *nib_vop_name(uint32_t code)
{
    return code >= NIB_VOP_FIRST && code < NIB_VOP_END ? vop_names[code - NIB_VOP_FIRST]
                                                       : "unknown";
}

/* The shapes the convolution kernels take (kernels/conv.h
 * nib_conv_shape_ok's rule, checked here without linking the kernels):
 * dims 1..2^16, channels 1..2^20 divisible by groups, strides and
 * dilations 1..2^16, pads inside the window, the last output's window
 * starting inside the padded input. */
static int conv_shape_ok(const struct nib_vconv_params *p)
{
    const uint32_t dm = 1u << 16, cm = 1u << 20;
    const uint32_t d[] = {p->h,  p->w,        p->oh,       p->ow,    p->kh,
                          p->kw, p->stride_h, p->stride_w, p->dil_h, p->dil_w};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        if (d[i] == 0 || d[i] > dm)
            return 0;
    if (!p->c_in || !p->c_out || p->c_in > cm || p->c_out > cm || !p->groups ||
        p->c_in % p->groups || p->c_out % p->groups)
        return 0;
    if (p->pad_top >= (uint64_t)p->dil_h * (p->kh - 1) + 1 ||
        p->pad_left >= (uint64_t)p->dil_w * (p->kw - 1) + 1)
        return 0;
    return (uint64_t)(p->oh - 1) * p->stride_h < (uint64_t)p->h + p->pad_top &&
           (uint64_t)(p->ow - 1) * p->stride_w < (uint64_t)p->w + p->pad_left;
}

/* A transposed convolution (conv mode 1) gathers with bounds checks: dims,
 * strides, dilations and pads up to 2^16, channels divisible by groups. */
static int convt_shape_ok(const struct nib_vconv_params *p)
{
    const uint32_t dm = 1u << 16;
    const uint32_t d[] = {p->h,  p->w,        p->oh,       p->ow,    p->kh,
                          p->kw, p->stride_h, p->stride_w, p->dil_h, p->dil_w};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++)
        if (d[i] == 0 || d[i] > dm)
            return 0;
    return p->c_in && p->c_out && p->c_in <= (1u << 20) && p->c_out <= (1u << 20) && p->groups &&
           p->c_in % p->groups == 0 && p->c_out % p->groups == 0 && p->pad_top <= dm &&
           p->pad_left <= dm && !p->depthwise;
}

/* Floats of the packed weights (kernels/conv.h's two f32 layouts). */
static uint64_t packed_floats(const struct nib_vconv_params *p)
{
    uint64_t ocg8 = (p->c_out / p->groups + 7) / 8 * 8;
    if (p->depthwise)
        return (uint64_t)p->kh * p->kw * ((p->c_out + 7) / 8 * 8);
    return (uint64_t)p->groups * ocg8 * p->kh * p->kw * (p->c_in / p->groups);
}

/* An arena operand of len bytes at off (len > 0). */
static int in_mem(const struct nib_blob_view *v, uint64_t off, uint64_t len)
{
    return len > 0 && off % 4 == 0 && off <= v->mem_size && len <= v->mem_size - off;
}

static int overlap(uint64_t a, uint64_t al, uint64_t b, uint64_t bl)
{
    return a < b + bl && b < a + al;
}

/* An int8 arena operand of len bytes at off (len > 0, any alignment). */
static int in_mem_s8(const struct nib_blob_view *v, uint64_t off, uint64_t len)
{
    return len > 0 && off <= v->mem_size && len <= v->mem_size - off;
}

/* Worker 0's private scratch is inside runtime memory: an op that works
 * there must not read or write its own operands there. */
static int in_scratch(const struct nib_blob_view *v, uint64_t off, uint64_t len)
{
    return overlap(off, len, v->h->wscratch_off, v->h->wscratch_size);
}

/* A q4c/q8c weight tensor of exactly rows x cols, per channel. */
static int qc_tensor(const struct nib_blob_view *v, uint32_t t, uint32_t rows, uint64_t cols)
{
    if (t >= v->h->n_tensors || cols > (1u << 20))
        return 0;
    const struct nib_tensor_rec *r = &v->tensors[t];
    uint64_t want = nib_qformat_size(r->dtype, 0, rows, (uint32_t)cols);
    return (r->dtype == NIB_DT_Q4C || r->dtype == NIB_DT_Q8C) && r->group == 0 && r->rows == rows &&
           r->cols == cols && want && r->size == want;
}

static uint64_t align64(uint64_t n)
{
    return (n + 63) & ~63ull;
}

/* An f32 weight tensor holding at least floats floats. */
static int f32_tensor(const struct nib_blob_view *v, uint32_t t, uint64_t floats)
{
    return t < v->h->n_tensors && v->tensors[t].dtype == NIB_DT_F32 &&
           v->tensors[t].size / 4 >= floats;
}

static int finite3(float a, float b, float c)
{
    return isfinite(a) && isfinite(b) && isfinite(c);
}

/* A convolution's residual (vconv.res): none, with src1 0; or an f32
 * value of the output's shape (out_f32 bytes) at src1, inside runtime
 * memory, apart from dst (dst_len bytes) and the worker scratch, added in
 * the kernel's epilogue (a direct convolution, an activation at most
 * hard-swish, no post). */
static int check_res(const struct nib_blob_view *v, const struct nib_op *op, uint64_t out_f32,
                     uint64_t dst_len, char *err, size_t errlen, uint32_t i)
{
    const struct nib_vconv_params *p = &op->vconv;
    const char *name = nib_vop_name(op->code);
    if (!p->res) {
        if (op->src1)
            return nib_blob_fail(err, errlen, "plan op %u (%s): src1 set without a residual", i,
                                 name);
        return 0;
    }
    if (p->res > 2 || op->code == NIB_VOP_POOL || p->mode || p->post || p->act > NIB_VACT_HSWISH)
        return nib_blob_fail(err, errlen,
                             "plan op %u (%s): residual %u with mode %u, act %u, post %u", i, name,
                             p->res, p->mode, p->act, p->post);
    if (!in_mem(v, op->src1, out_f32) || overlap(op->src1, out_f32, op->dst, dst_len) ||
        in_scratch(v, op->src1, out_f32))
        return nib_blob_fail(err, errlen,
                             "plan op %u (%s): residual outside runtime memory, overlapping dst "
                             "or in the worker scratch",
                             i, name);
    return 0;
}

/* The int8 copy of a convolution's output (qout 2) at aux, oh * ow * c_out
 * bytes: inside runtime memory, apart from the input (in bytes at src0),
 * the output (out bytes at dst) and the residual, and outside the worker
 * scratch; without one, aux is 0. */
static int check_qcopy(const struct nib_blob_view *v, const struct nib_op *op, uint64_t in,
                       uint64_t out, char *err, size_t errlen, uint32_t i)
{
    const struct nib_vconv_params *p = &op->vconv;
    const uint64_t n_out = (uint64_t)p->oh * p->ow * p->c_out;
    if (p->qout == 2 ? !in_mem_s8(v, op->aux, n_out) || overlap(op->aux, n_out, op->src0, in) ||
                           overlap(op->aux, n_out, op->dst, out) ||
                           (p->res && overlap(op->aux, n_out, op->src1, n_out * 4)) ||
                           in_scratch(v, op->aux, n_out)
                     : op->aux != 0)
        return nib_blob_fail(err, errlen,
                             "plan op %u (%s): qout %u with its int8 copy (aux) outside runtime "
                             "memory, overlapping an operand or in the worker scratch",
                             i, nib_vop_name(op->code), p->qout);
    return 0;
}

static int check_conv(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                      size_t errlen, uint32_t i)
{
    const struct nib_vconv_params *p = &op->vconv;
    const char *name = nib_vop_name(op->code);
    const int convt = op->code == NIB_VOP_CONV && p->mode == 1;
    if (op->code == NIB_VOP_CONV && p->mode > 1)
        return nib_blob_fail(err, errlen, "plan op %u (conv): mode %u (0 direct, 1 transposed)", i,
                             p->mode);
    /* a convolution may keep an int8 copy of its output (qout 2, since format 9)
     * or write only that (qout 1, since format 10) */
    const int qcopy = op->code == NIB_VOP_CONV && (p->qout == 1 || p->qout == 2);
    if (p->x_scale != 0.0f || (p->qout && !qcopy) ||
        (qcopy ? !isfinite(p->y_scale) || !(p->y_scale > 0.0f) : p->y_scale != 0.0f))
        return nib_blob_fail(err, errlen, "plan op %u (%s): x_scale %g, qout %u or y_scale %g", i,
                             name, (double)p->x_scale, p->qout, (double)p->y_scale);
    if (convt ? !convt_shape_ok(p) : !conv_shape_ok(p))
        return nib_blob_fail(err, errlen, "plan op %u (%s): shape outside the kernels' limits", i,
                             name);
    if (op->code == NIB_VOP_POOL) {
        if (p->c_in != p->c_out || p->mode > NIB_POOL_AVG_INCLUDE_PAD || op->tensor != UINT32_MAX)
            return nib_blob_fail(err, errlen, "plan op %u (pool): channels, mode %u or weights", i,
                                 p->mode);
    } else {
        if (p->depthwise > 1 || (p->depthwise && (p->groups != p->c_in || p->c_in != p->c_out)))
            return nib_blob_fail(err, errlen, "plan op %u (conv): depthwise with groups %u", i,
                                 p->groups);
        uint64_t need =
            convt ? (uint64_t)p->c_in * p->kh * p->kw * ((p->c_out / p->groups + 7) / 8 * 8)
                  : packed_floats(p);
        if (!f32_tensor(v, op->tensor, need))
            return nib_blob_fail(err, errlen, "plan op %u (conv): weights are not %llu packed f32",
                                 i, (unsigned long long)need);
        if (p->bias != UINT32_MAX && !f32_tensor(v, p->bias, p->c_out))
            return nib_blob_fail(err, errlen, "plan op %u (conv): bias is not %u f32", i, p->c_out);
        if (p->act >= NIB_VACT_SQRT || p->post > 1 || !finite3(p->p0, p->p1, p->post_mul) ||
            !isfinite(p->post_add))
            return nib_blob_fail(err, errlen,
                                 "plan op %u (conv): epilogue %u/%u not known or not finite", i,
                                 p->act, p->post);
    }
    const int codes = qcopy && p->qout == 1; /* int8 dst; the f32 rows in the scratch */
    uint64_t in = (uint64_t)p->h * p->w * p->c_in * 4,
             out = (uint64_t)p->oh * p->ow * p->c_out * (codes ? 1 : 4);
    if (!in_mem(v, op->src0, in) ||
        !(codes ? in_mem_s8(v, op->dst, out) : in_mem(v, op->dst, out)) ||
        overlap(op->src0, in, op->dst, out))
        return nib_blob_fail(err, errlen,
                             "plan op %u (%s): operands outside runtime memory or overlapping", i,
                             name);
    if (op->code == NIB_VOP_CONV && check_qcopy(v, op, in, out, err, errlen, i))
        return -1;
    if (codes) {
        const uint64_t need = nib_vconv_codes_scratch(p);
        if (v->h->wscratch_size < need || in_scratch(v, op->src0, in) ||
            in_scratch(v, op->dst, out))
            return nib_blob_fail(err, errlen,
                                 "plan op %u (conv): qout 1 needs %llu bytes of worker scratch "
                                 "(header has %u) and operands outside it",
                                 i, (unsigned long long)need, v->h->wscratch_size);
    }
    return check_res(v, op, codes ? out * 4 : out, out, err, errlen, i);
}

/* A quantized convolution: int8 NHWC in, q4c|q8c weights of c_out rows by
 * kh * kw * c_in, groups 1, f32 out with the convolution's epilogue or
 * int8 out (qout 1) with the activation in the kernel and no post, or
 * both (qout 2: f32 at dst, int8 at aux, the same restrictions); the
 * kernels/conv.h scratch (nib_qconv_scratch_size, recomputed here) in
 * every worker's private scratch. */
static int check_qconv(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                       size_t errlen, uint32_t i)
{
    const struct nib_vconv_params *p = &op->vconv;
    if (p->mode || p->groups != 1 || p->depthwise || !conv_shape_ok(p))
        return nib_blob_fail(err, errlen,
                             "plan op %u (qconv): shape outside the kernels' limits, mode %u, "
                             "groups %u or depthwise",
                             i, p->mode, p->groups);
    const uint64_t k = (uint64_t)p->kh * p->kw * p->c_in;
    if (!qc_tensor(v, op->tensor, p->c_out, k))
        return nib_blob_fail(err, errlen,
                             "plan op %u (qconv): weights are not q4c|q8c %u x %llu per channel", i,
                             p->c_out, (unsigned long long)k);
    if (p->bias != UINT32_MAX && !f32_tensor(v, p->bias, p->c_out))
        return nib_blob_fail(err, errlen, "plan op %u (qconv): bias is not %u f32", i, p->c_out);
    if (p->act >= NIB_VACT_SQRT || p->post > 1 || !finite3(p->p0, p->p1, p->post_mul) ||
        !isfinite(p->post_add))
        return nib_blob_fail(err, errlen,
                             "plan op %u (qconv): epilogue %u/%u not known or not finite", i,
                             p->act, p->post);
    if (!isfinite(p->x_scale) || !(p->x_scale > 0.0f))
        return nib_blob_fail(err, errlen, "plan op %u (qconv): x_scale %g", i, (double)p->x_scale);
    if (p->qout > 2 || (p->qout ? p->post || p->act > NIB_VACT_HSWISH || !isfinite(p->y_scale) ||
                                      !(p->y_scale > 0.0f)
                                : p->y_scale != 0.0f))
        return nib_blob_fail(err, errlen,
                             "plan op %u (qconv): qout %u with y_scale %g, act %u, post %u", i,
                             p->qout, (double)p->y_scale, p->act, p->post);
    const uint64_t in = (uint64_t)p->h * p->w * p->c_in;
    const uint64_t out = (uint64_t)p->oh * p->ow * p->c_out * (p->qout == 1 ? 1 : 4);
    if (check_qcopy(v, op, in, out, err, errlen, i))
        return -1;
    if (!in_mem_s8(v, op->src0, in) ||
        !(p->qout == 1 ? in_mem_s8(v, op->dst, out) : in_mem(v, op->dst, out)) ||
        overlap(op->src0, in, op->dst, out) || in_scratch(v, op->src0, in) ||
        in_scratch(v, op->dst, out))
        return nib_blob_fail(err, errlen,
                             "plan op %u (qconv): operands outside runtime memory, overlapping "
                             "or in the worker scratch",
                             i);
    if (check_res(v, op, (uint64_t)p->oh * p->ow * p->c_out * 4, out, err, errlen, i))
        return -1;
    const uint64_t need = align64(nib_qact_footprint(NIB_QCONV_TILE, (uint32_t)k, 0)) +
                          align64((uint64_t)NIB_QCONV_TILE * p->c_out * 4);
    if (need > v->h->wscratch_size)
        return nib_blob_fail(
            err, errlen, "plan op %u (qconv): needs %llu bytes of worker scratch, header has %u", i,
            (unsigned long long)need, v->h->wscratch_size);
    return 0;
}

/* f32 -> int8 with one calibrated scale. */
static int check_quant(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                       size_t errlen, uint32_t i)
{
    const struct nib_vquant_params *p = &op->vquant;
    if (!p->n || p->n > (1u << 30) || !isfinite(p->scale) || !(p->scale > 0.0f) ||
        op->tensor != UINT32_MAX)
        return nib_blob_fail(err, errlen,
                             "plan op %u (vquant): %llu elements, scale %g or a tensor", i,
                             (unsigned long long)p->n, (double)p->scale);
    if (!in_mem(v, op->src0, p->n * 4) || !in_mem_s8(v, op->dst, p->n) ||
        overlap(op->src0, p->n * 4, op->dst, p->n))
        return nib_blob_fail(
            err, errlen, "plan op %u (vquant): operands outside runtime memory or overlapping", i);
    return 0;
}

/* Matmul: f32 weights, or q4c|q8c ones with every worker's m rows of
 * activations quantized in its private scratch. */
static int check_matmul(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                        size_t errlen, uint32_t i)
{
    const struct nib_vmatmul_params *p = &op->vmatmul;
    uint64_t in = (uint64_t)p->m * p->k * 4, out = (uint64_t)p->m * p->n * 4;
    const int quant = op->tensor < v->h->n_tensors && v->tensors[op->tensor].dtype != NIB_DT_F32;
    if (!p->m || !p->n || !p->k || p->m > (1u << 20) || p->n > (1u << 20) || p->k > (1u << 20) ||
        !(quant ? qc_tensor(v, op->tensor, p->n, p->k)
                : f32_tensor(v, op->tensor, (uint64_t)p->n * p->k)) ||
        (p->bias != UINT32_MAX && !f32_tensor(v, p->bias, p->n)))
        return nib_blob_fail(err, errlen, "plan op %u (vmatmul): %ux%ux%u and its weights", i, p->m,
                             p->n, p->k);
    if (!in_mem(v, op->src0, in) || !in_mem(v, op->dst, out) ||
        overlap(op->src0, in, op->dst, out) ||
        (quant && (in_scratch(v, op->src0, in) || in_scratch(v, op->dst, out))))
        return nib_blob_fail(err, errlen,
                             "plan op %u (vmatmul): operands outside memory, overlapping or in the "
                             "worker scratch",
                             i);
    if (quant) {
        const uint64_t need = nib_qact_footprint(p->m, p->k, 0);
        if (!need || need > v->h->wscratch_size)
            return nib_blob_fail(err, errlen,
                                 "plan op %u (vmatmul): needs %llu bytes of worker scratch (%u "
                                 "rows), header has %u",
                                 i, (unsigned long long)need, p->m, v->h->wscratch_size);
    }
    return 0;
}

static int check_ew(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                    size_t errlen, uint32_t i)
{
    const struct nib_vew_params *p = &op->vew;
    const char *name = nib_vop_name(op->code);
    uint64_t n = 1;
    for (int d = 0; d < 4; d++) {
        if (p->dims[d] == 0 || p->dims[d] > (1u << 30))
            return nib_blob_fail(err, errlen, "plan op %u (%s): dimension %d is %u", i, name, d,
                                 p->dims[d]);
        n *= p->dims[d];
        if (p->sa[d] > (1u << 28) || p->sb[d] > (1u << 28) || p->sd[d] > (1u << 28))
            return nib_blob_fail(err, errlen, "plan op %u (%s): a stride over 2^28", i, name);
        if (n > (1u << 30))
            return nib_blob_fail(err, errlen, "plan op %u (%s): more than 2^30 elements", i, name);
    }
    const int bin = op->code == NIB_VOP_BINARY, copy = op->code == NIB_VOP_COPY;
    if ((bin && p->fn >= NIB_VBIN_COUNT) ||
        (op->code == NIB_VOP_UNARY && p->fn >= NIB_VACT_COUNT) || (copy && p->fn) ||
        !finite3(p->p0, p->p1, 0.0f))
        return nib_blob_fail(err, errlen, "plan op %u (%s): function %u is unknown", i, name,
                             p->fn);
    /* the int8 codes of the output (since format 10): 2 beside the floats
     * at aux, 1 (copy only) instead of them at dst */
    if (p->qout > 2 || (p->qout == 1 && !copy) ||
        (p->qout ? !isfinite(p->y_scale) || !(p->y_scale > 0.0f) : p->y_scale != 0.0f))
        return nib_blob_fail(err, errlen, "plan op %u (%s): qout %u or y_scale %g", i, name,
                             p->qout, (double)p->y_scale);
    uint64_t dst = copy ? nib_vew_span(p->dims, p->sd) : n * 4;
    if (p->qout == 1)
        dst /= 4;
    if (!(p->qout == 1 ? in_mem_s8(v, op->dst, dst) : in_mem(v, op->dst, dst)))
        return nib_blob_fail(err, errlen, "plan op %u (%s): destination outside runtime memory", i,
                             name);
    for (int s = 0; s < 1 + bin; s++) {
        const uint32_t *st = s ? p->sb : p->sa, t = s ? p->b_tensor : p->a_tensor;
        const uint64_t off = s ? op->src1 : op->src0, span = nib_vew_span(p->dims, st);
        if (t != UINT32_MAX ? !f32_tensor(v, t, span / 4)
                            : !in_mem(v, off, span) || overlap(off, span, op->dst, dst))
            return nib_blob_fail(err, errlen,
                                 "plan op %u (%s): source %d outside its memory or overlapping "
                                 "the destination",
                                 i, name, s);
    }
    if (!bin && p->b_tensor != UINT32_MAX)
        return nib_blob_fail(err, errlen, "plan op %u (%s): a second source", i, name);
    const uint64_t codes = (copy ? nib_vew_span(p->dims, p->sd) : n * 4) / 4;
    int bad_aux = p->qout == 2
                      ? !in_mem_s8(v, op->aux, codes) || overlap(op->aux, codes, op->dst, dst) ||
                            in_scratch(v, op->aux, codes)
                      : op->aux != 0;
    for (int s = 0; s < 1 + bin && p->qout == 2; s++) {
        const uint32_t *st = s ? p->sb : p->sa, t = s ? p->b_tensor : p->a_tensor;
        if (t == UINT32_MAX &&
            overlap(op->aux, codes, s ? op->src1 : op->src0, nib_vew_span(p->dims, st)))
            bad_aux = 1;
    }
    if (bad_aux)
        return nib_blob_fail(err, errlen,
                             "plan op %u (%s): qout %u with its int8 copy (aux) outside runtime "
                             "memory, overlapping an operand or in the worker scratch",
                             i, name, p->qout);
    return 0;
}

static int check_rows(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                      size_t errlen, uint32_t i)
{
    const struct nib_vrows_params *p = &op->vrows;
    if (op->code == NIB_VOP_SOFTMAX) {
        uint64_t bytes = (uint64_t)p->rows * p->n * 4;
        if (!p->rows || !p->n || bytes > (1ull << 32) || !in_mem(v, op->src0, bytes) ||
            !in_mem(v, op->dst, bytes) ||
            (op->src0 != op->dst && overlap(op->src0, bytes, op->dst, bytes)))
            return nib_blob_fail(err, errlen, "plan op %u (softmax): %u rows of %u outside memory",
                                 i, p->rows, p->n);
        return 0;
    }
    uint64_t n = (uint64_t)p->c * p->h * p->w;
    if (!p->c || !p->h || !p->w || p->c > (1u << 16) || p->h > (1u << 16) || p->w > (1u << 16) ||
        n > (1u << 28) || p->u8 > 1)
        return nib_blob_fail(err, errlen, "plan op %u (input): %ux%ux%u", i, p->c, p->h, p->w);
    if (!f32_tensor(v, op->tensor, 2ull * p->c))
        return nib_blob_fail(err, errlen, "plan op %u (input): scales are not 2 x %u f32", i, p->c);
    uint64_t in = n * (p->u8 ? 1 : 4);
    if (!(op->src0 <= v->mem_size && in <= v->mem_size - op->src0) || (!p->u8 && op->src0 % 4) ||
        !in_mem(v, op->dst, n * 4) || overlap(op->src0, in, op->dst, n * 4))
        return nib_blob_fail(err, errlen,
                             "plan op %u (input): operands outside memory or overlapping", i);
    return 0;
}

static int check_layernorm(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                           size_t errlen, uint32_t i)
{
    const struct nib_vnorm_params *p = &op->vnorm;
    uint64_t bytes = (uint64_t)p->rows * p->n * 4;
    if (!p->rows || !p->n || p->n > (1u << 24) || bytes > (1ull << 32) || !isfinite(p->eps) ||
        p->eps < 0.0f || op->tensor != UINT32_MAX)
        return nib_blob_fail(err, errlen, "plan op %u (layernorm): %u rows of %u, eps or a tensor",
                             i, p->rows, p->n);
    if ((p->gamma != UINT32_MAX && !f32_tensor(v, p->gamma, p->n)) ||
        (p->beta != UINT32_MAX && !f32_tensor(v, p->beta, p->n)))
        return nib_blob_fail(err, errlen, "plan op %u (layernorm): gamma or beta is not %u f32", i,
                             p->n);
    if (!in_mem(v, op->src0, bytes) || !in_mem(v, op->dst, bytes) ||
        (op->src0 != op->dst && overlap(op->src0, bytes, op->dst, bytes)))
        return nib_blob_fail(err, errlen,
                             "plan op %u (layernorm): operands outside memory or overlapping", i);
    return 0;
}

/* Batched matmul: every dim 1..2^20, at most 2^28 output rows and 2^30
 * output elements, strides up to 2^28, sources inside memory and apart
 * from the destination. */
static int check_bmatmul(const struct nib_blob_view *v, const struct nib_op *op, char *err,
                         size_t errlen, uint32_t i)
{
    const struct nib_vbmm_params *p = &op->vbmm;
    const uint32_t d[5] = {p->nb0, p->nb1, p->m, p->n, p->k};
    for (int k = 0; k < 5; k++)
        if (d[k] == 0 || d[k] > (1u << 20))
            return nib_blob_fail(err, errlen, "plan op %u (bmatmul): dimension %d is %u", i, k,
                                 d[k]);
    for (int k = 0; k < 4; k++)
        if (p->sa[k] > (1u << 28) || p->sb[k] > (1u << 28))
            return nib_blob_fail(err, errlen, "plan op %u (bmatmul): a stride over 2^28", i);
    const uint64_t rows = (uint64_t)p->nb0 * p->nb1 * p->m, out = rows * p->n * 4;
    if (rows > (1u << 28) || rows * p->n > (1u << 30) || op->tensor != UINT32_MAX)
        return nib_blob_fail(err, errlen, "plan op %u (bmatmul): too many outputs or a tensor", i);
    const uint32_t da[4] = {p->nb0, p->nb1, p->m, p->k}, db[4] = {p->nb0, p->nb1, p->k, p->n};
    const uint64_t sa = nib_vew_span(da, p->sa), sb = nib_vew_span(db, p->sb);
    if (!in_mem(v, op->dst, out) || !in_mem(v, op->src0, sa) || !in_mem(v, op->src1, sb) ||
        overlap(op->src0, sa, op->dst, out) || overlap(op->src1, sb, op->dst, out))
        return nib_blob_fail(err, errlen,
                             "plan op %u (bmatmul): operands outside memory or overlapping", i);
    return 0;
}

int nib_check_vision_op(const struct nib_blob_view *v, uint32_t i, char *err, size_t errlen)
{
    const struct nib_op *op = &v->ops[i];
    const int vision = v->h->model_kind == NIB_MODEL_VISION;
    if (op->code < NIB_VOP_FIRST || op->code >= NIB_VOP_END) {
        if (vision && op->code >= 1 && op->code < NIB_OP_COUNT)
            return nib_blob_fail(
                err, errlen, "plan op %u: opcode %u does not belong to a vision plan", i, op->code);
        return nib_blob_fail(err, errlen, "plan op %u: unknown opcode %u", i, op->code);
    }
    if (!vision)
        return nib_blob_fail(err, errlen, "plan op %u: vision opcode %u (%s) in a decoder plan", i,
                             op->code, nib_vop_name(op->code));
    if (op->flags)
        return nib_blob_fail(err, errlen, "plan op %u (%s): flags 0x%x", i, nib_vop_name(op->code),
                             op->flags);
    switch (op->code) {
    case NIB_VOP_CONV:
    case NIB_VOP_POOL: return check_conv(v, op, err, errlen, i);
    case NIB_VOP_BINARY:
    case NIB_VOP_UNARY:
    case NIB_VOP_COPY: return check_ew(v, op, err, errlen, i);
    case NIB_VOP_INPUT:
    case NIB_VOP_SOFTMAX: return check_rows(v, op, err, errlen, i);
    case NIB_VOP_MATMUL: return check_matmul(v, op, err, errlen, i);
    case NIB_VOP_QCONV: return check_qconv(v, op, err, errlen, i);
    case NIB_VOP_QUANT: return check_quant(v, op, err, errlen, i);
    case NIB_VOP_LAYERNORM: return check_layernorm(v, op, err, errlen, i);
    case NIB_VOP_BMATMUL: return check_bmatmul(v, op, err, errlen, i);
    case NIB_VOP_RESIZE: {
        const struct nib_vresize_params *p = &op->vresize;
        const uint32_t dm = 1u << 16;
        int ok = p->h && p->w && p->c && p->oh && p->ow && p->h <= dm && p->w <= dm &&
                 p->oh <= dm && p->ow <= dm && p->c <= (1u << 20) && p->scale_h > 0.0f &&
                 p->scale_w > 0.0f && p->scale_h <= 1e6f && p->scale_w <= 1e6f &&
                 p->coord <= NIB_RESIZE_ALIGN_CORNERS && p->nearest_mode <= NIB_NEAREST_CEIL &&
                 p->linear <= 1;
        uint64_t in = (uint64_t)p->h * p->w * p->c * 4, out = (uint64_t)p->oh * p->ow * p->c * 4;
        if (!ok || !in_mem(v, op->src0, in) || !in_mem(v, op->dst, out) ||
            overlap(op->src0, in, op->dst, out))
            return nib_blob_fail(err, errlen, "plan op %u (resize): shape or operands", i);
        return 0;
    }
    }
    return nib_blob_fail(err, errlen, "plan op %u: unknown opcode %u", i, op->code);
}
