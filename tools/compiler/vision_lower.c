/* Lowering an imported ONNX graph to vision ops (vision_plan.h). Every
 * runtime value is f32; a 4-D value with N = 1 lives as NHWC, anything
 * else row-major as ONNX lays it out. Element-wise ops, copies and layout
 * changes are four strided loops (struct nib_vew_params) over logical dims,
 * so broadcasting, transposes, slices and concatenation are all strides. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/conv.h"
#include "model_blob/blob_validate_vision.h"
#include "tools/compiler/vision_plan.h"
#include "tools/compiler/vision_gptq.h"
#include "tools/compiler/vision_quant.h"
#include "tools/util/tool_util.h"

#define W_COLS 256u /* floats per row of a weight tensor record */

struct lower {
    const struct nx_graph *g;
    struct vision_plan *p;
    int32_t *vbuf; /* per IR tensor: its buffer, or -1 */
    uint8_t *nhwc; /* per IR tensor: lives as NHWC */
    char *err;
    size_t errlen;
    const struct vp_quant *q; /* NULL: every weight f32 */
    int32_t *qbuf;            /* per IR tensor: its int8 codes' buffer (QUANT made), or -1 */
    float qout_scale;         /* > 0: the QCONV being emitted writes int8 of this scale */
    int32_t res_buf;          /* >= 0: the conv being emitted adds this f32 NHWC buffer */
    uint32_t res_mode;        /* its vconv.res: 1 before the activation, 2 after */
};

#define NFAIL(nd, fmt, ...)                                                                        \
    nib_fail(L->err, L->errlen, "node '%s' (%s): " fmt, (nd)->name, (nd)->op_type, ##__VA_ARGS__)

static void *grow(void *a, uint32_t n, uint32_t *cap, size_t elem)
{
    if (n < *cap)
        return a;
    uint32_t c = *cap ? *cap * 2 : 64;
    void *b = realloc(a, (size_t)c * elem);
    if (b) {
        memset((char *)b + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
        *cap = c;
    }
    return b;
}

static int32_t new_buf(struct lower *L, uint64_t bytes)
{
    struct vision_plan *p = L->p;
    struct vp_buf *b = grow(p->bufs, p->n_bufs, &p->cap_bufs, sizeof *b);
    if (!b)
        return -1;
    p->bufs = b;
    b[p->n_bufs] = (struct vp_buf){bytes, INT32_MAX, -1, 0};
    return (int32_t)p->n_bufs++;
}

/* A new op reading src0/src1 and writing dst (buffer ids; byte offsets
 * into them in add). Lifetimes grow to cover it. */
static struct nib_op *new_op(struct lower *L, uint32_t code, int32_t s0, uint64_t a0, int32_t s1,
                             uint64_t a1, int32_t d, uint64_t ad)
{
    struct vision_plan *p = L->p;
    struct vp_op *o = grow(p->ops, p->n_ops, &p->cap_ops, sizeof *o);
    if (!o) {
        nib_fail(L->err, L->errlen, "out of memory");
        return NULL;
    }
    p->ops = o;
    struct vp_op *op = &o[p->n_ops];
    memset(op, 0, sizeof *op);
    op->op.code = code;
    op->op.tensor = UINT32_MAX;
    op->buf[0] = s0, op->buf[1] = s1, op->buf[2] = d, op->buf[3] = -1;
    op->add[0] = a0, op->add[1] = a1, op->add[2] = ad;
    int32_t i = (int32_t)p->n_ops++;
    for (int k = 0; k < 3; k++) {
        if (op->buf[k] < 0)
            continue;
        struct vp_buf *b = &p->bufs[op->buf[k]];
        if (i < b->first)
            b->first = i;
        if (i > b->last)
            b->last = i;
    }
    return &op->op;
}

/* A weight tensor of n floats (copied, zero-padded to whole rows). */
static uint32_t add_weight(struct lower *L, const char *name, const char *suffix, const float *d,
                           uint64_t n)
{
    struct vision_plan *p = L->p;
    struct vp_weight *w = grow(p->w, p->n_w, &p->cap_w, sizeof *w);
    if (!w)
        return UINT32_MAX;
    p->w = w;
    uint64_t rows = (n + W_COLS - 1) / W_COLS;
    if (rows == 0 || rows > NIB_MAX_VOCAB)
        return UINT32_MAX;
    float *data = calloc(rows * W_COLS, 4);
    if (!data)
        return UINT32_MAX;
    if (d)
        memcpy(data, d, n * 4);
    w[p->n_w].data = data;
    w[p->n_w].dtype = NIB_DT_F32;
    w[p->n_w].rows = (uint32_t)rows;
    w[p->n_w].cols = W_COLS;
    w[p->n_w].size = rows * W_COLS * 4;
    snprintf(w[p->n_w].name, NIB_NAME_MAX, "%.*s%s", (int)(NIB_NAME_MAX - 1 - strlen(suffix)), name,
             suffix);
    return p->n_w++;
}

/* A q4c/q8c weight matrix of rows x cols: codes (row-major, rows x cols,
 * the order kernels/conv.h's nib_qconv_pack reads as OIHW of a 1x1
 * convolution when s is NULL) and per-row scales, packed. */
static uint32_t add_qweight(struct lower *L, const char *name, const char *suffix, uint32_t dtype,
                            const struct nib_conv_shape *s, const int8_t *codes, const float *scale)
{
    struct vision_plan *p = L->p;
    struct vp_weight *w = grow(p->w, p->n_w, &p->cap_w, sizeof *w);
    if (!w)
        return UINT32_MAX;
    p->w = w;
    struct nib_qlayout l;
    if (nib_qconv_layout(s, dtype, &l) || s->groups != 1)
        return UINT32_MAX;
    uint8_t *data = calloc(l.size, 1);
    if (!data)
        return UINT32_MAX;
    if (nib_qconv_pack(s, dtype, codes, scale, data)) {
        free(data);
        return UINT32_MAX;
    }
    w[p->n_w].data = data;
    w[p->n_w].dtype = dtype;
    w[p->n_w].rows = l.rows;
    w[p->n_w].cols = l.cols;
    w[p->n_w].size = l.size;
    snprintf(w[p->n_w].name, NIB_NAME_MAX, "%.*s%s", (int)(NIB_NAME_MAX - 1 - strlen(suffix)), name,
             suffix);
    return p->n_w++;
}

/* GPTQ codes of 4-bit weights against the Hessian of the kept values of
 * xt read as hs says; 1 when there are none kept (plain rounding), -1
 * on failure (the message in L->err). */
static int gptq_weight(struct lower *L, int32_t xt, const struct nib_conv_shape *hs, const float *w,
                       uint32_t rows, uint32_t k, int8_t *codes, float *scale)
{
    const struct vq_capture *c = L->q->cap;
    if (!c || xt < 0 || (uint32_t)xt >= c->n_t || !c->x[xt] || !c->n_img ||
        c->elems[xt] != (uint64_t)hs->h * hs->w * hs->c_in || hs->c_in * hs->kh * hs->kw != k)
        return 1;
    double *h = malloc((size_t)k * k * sizeof *h);
    if (!h)
        return nib_fail(L->err, L->errlen, "out of memory for a %ux%u Hessian", k, k);
    vq_hessian(c->x[xt], c->n_img, hs, h);
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    const uint32_t nt = nc < 1 ? 1 : nc > 16 ? 16 : (uint32_t)nc;
    int rc = vq_gptq_rows(w, rows, k, h, nt, codes, scale, L->err, L->errlen);
    free(h);
    return rc;
}

/* Refuse weights that hold a NaN or an infinity: no scale quantizes them
 * (and the conversion of such a quotient to an integer is undefined). */
static int weights_finite(struct lower *L, const struct nx_node *nd, const float *w, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(w[i]))
            return NFAIL(nd,
                         "weight %llu is not a finite number, so it cannot be quantized "
                         "(--precision %s=f32 keeps it)",
                         (unsigned long long)i, nd->name);
    return 0;
}

/* Quantize rows x k weights of node nd to bits and pack them as the
 * weight of the convolution (or 1x1 matmul) s: 4 bits by gptq against
 * the values of xt (read as the convolution hs) when they were kept,
 * else vq_quantize_rows. UINT32_MAX on failure (a weight no code holds,
 * gptq, memory), with the message naming nd. */
static uint32_t quantize_weight(struct lower *L, const struct nx_node *nd, uint32_t bits,
                                const struct nib_conv_shape *s, const float *w, uint32_t rows,
                                uint32_t k, int32_t xt, const struct nib_conv_shape *hs)
{
    if (weights_finite(L, nd, w, (uint64_t)rows * k))
        return UINT32_MAX;
    int8_t *codes = malloc((size_t)rows * k + 1);
    float *scale = malloc((size_t)rows * 4 + 4);
    uint32_t t = UINT32_MAX;
    int rc = -2;
    if (codes && scale) {
        rc = bits == 4 ? gptq_weight(L, xt, hs, w, rows, k, codes, scale) : 1;
        if (rc == 1)
            vq_quantize_rows(w, rows, k, bits, codes, scale);
        if (rc >= 0)
            t = add_qweight(L, nd->name, ".w", bits == 4 ? NIB_DT_Q4C : NIB_DT_Q8C, s, codes,
                            scale);
    }
    free(codes);
    free(scale);
    if (rc == -1) { /* gptq's message: say whose weights, and the way round it */
        char why[256];
        snprintf(why, sizeof why, "%s", L->err);
        NFAIL(nd, "%s (--method rtn rounds these weights without it)", why);
    } else if (t == UINT32_MAX) {
        NFAIL(nd, "weights too large or out of memory");
    }
    return t;
}

static void need_scratch(struct lower *L, uint64_t bytes)
{
    bytes = (bytes + 63) / 64 * 64;
    if (bytes > L->p->wscratch)
        L->p->wscratch = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
}

/* The bits of node nd's weights (0: f32). */
static uint32_t node_bits(const struct lower *L, const struct nx_node *nd)
{
    return L->q && L->q->bits ? L->q->bits[nd - L->g->n] : 0;
}

/* Logical strides (elements) of a value in its runtime layout. */
static void lstrides(const struct nx_tensor *t, int nhwc, int64_t *s)
{
    if (nhwc) {
        int64_t C = t->dims[1], H = t->dims[2], W = t->dims[3];
        s[0] = H * W * C, s[1] = 1, s[2] = W * C, s[3] = C;
        return;
    }
    int64_t st = 1;
    for (uint32_t d = t->rank; d-- > 0;) {
        s[d] = st;
        st *= t->dims[d];
    }
}

/* A loop nest of four dims for an element-wise op or a copy: logical dims
 * (rank r <= 4) with each operand's logical strides, put into the order
 * the destination lies in (NHWC: n, h, w, c). */
struct nest {
    int64_t dims[4], s[3][NX_MAX_RANK]; /* operands: a, b, d */
};

static int nest_set(struct lower *L, const struct nx_node *nd, struct nest *n, uint32_t r,
                    const int64_t *dims, int nhwc_out, struct nib_vew_params *v)
{
    static const int order_nhwc[4] = {0, 2, 3, 1}, order_rm[4] = {0, 1, 2, 3};
    int64_t cd[NX_MAX_RANK];
    if (r > 4) { /* fewer loops: drop dims of 1, merge dims contiguous in every operand */
        uint32_t m = 0;
        for (uint32_t d = 0; d < r; d++) {
            if (dims[d] == 1)
                continue;
            int merge = m > 0;
            for (int k = 0; k < 3 && merge; k++)
                merge = n->s[k][m - 1] == n->s[k][d] * dims[d];
            if (merge) {
                cd[m - 1] *= dims[d];
                for (int k = 0; k < 3; k++)
                    n->s[k][m - 1] = n->s[k][d];
                continue;
            }
            cd[m] = dims[d];
            for (int k = 0; k < 3; k++)
                n->s[k][m] = n->s[k][d];
            m++;
        }
        if (m == 0)
            cd[m++] = 1;
        r = m, dims = cd, nhwc_out = 0;
    }
    if (r > 4)
        return NFAIL(nd, "rank %u: at most 4 dims at runtime after merging", r);
    int64_t D[4], S[3][4];
    uint32_t pad = 4 - r;
    for (uint32_t d = 0; d < 4; d++) {
        D[d] = d < pad ? 1 : dims[d - pad];
        for (int k = 0; k < 3; k++)
            S[k][d] = d < pad ? 0 : n->s[k][d - pad];
    }
    const int *ord = nhwc_out && r == 4 ? order_nhwc : order_rm;
    memset(v, 0, sizeof *v);
    for (int d = 0; d < 4; d++) {
        int e = ord[d];
        if (D[e] < 1 || D[e] > (1 << 30))
            return NFAIL(nd, "dimension out of range");
        v->dims[d] = (uint32_t)D[e];
        uint32_t *st[3] = {v->sa, v->sb, v->sd};
        for (int k = 0; k < 3; k++) {
            int64_t s = D[e] == 1 ? 0 : S[k][e];
            if (s < 0 || s > (1 << 28))
                return NFAIL(nd, "a stride out of range");
            st[k][d] = (uint32_t)s;
        }
    }
    v->a_tensor = v->b_tensor = UINT32_MAX;
    return 0;
}

static int is_nhwc(const struct nx_tensor *t)
{
    return t->rank == 4 && t->dims[0] == 1;
}

/* The buffer of a value an op reads (made when first needed: an input). */
static int32_t value_buf(struct lower *L, int32_t t)
{
    return L->vbuf[t];
}

/* A fresh buffer for a node's output t. */
static int32_t out_buf(struct lower *L, int32_t t)
{
    const struct nx_tensor *x = &L->g->t[t];
    int32_t b = new_buf(L, nx_elems(x) * 4);
    L->vbuf[t] = b;
    L->nhwc[t] = (uint8_t)is_nhwc(x);
    return b;
}

static int need_f32_value(struct lower *L, const struct nx_node *nd, int32_t t)
{
    if (t < 0 || L->g->t[t].is_const || L->g->t[t].dtype != NX_F32 || L->vbuf[t] < 0)
        return NFAIL(nd, "an input is not a float tensor computed at runtime");
    return 0;
}

/* ---- ops ---- */

static void act_params(enum nx_act a, float pa, float pb, uint32_t *act, float *p0, float *p1)
{
    *p0 = pa, *p1 = pb;
    switch (a) {
    case NX_ACT_RELU: *act = NIB_VACT_RELU; break;
    case NX_ACT_CLIP: *act = NIB_VACT_CLIP; break;
    case NX_ACT_HSIGMOID: *act = NIB_VACT_HSIGMOID; break;
    case NX_ACT_HSWISH: *act = NIB_VACT_HSWISH, *p0 = 1.0f / 6.0f, *p1 = 0.5f; break;
    case NX_ACT_SIGMOID: *act = NIB_VACT_SIGMOID; break;
    default: *act = NIB_VACT_NONE;
    }
}

/* A convolution of NHWC x (buffer xb) into buffer yb. */
static int emit_qconv(struct lower *L, const struct nx_node *nd, int32_t xt, uint32_t bits,
                      const struct nib_conv_shape *s, struct nib_vconv_params *c,
                      const float *w_oihw, int32_t yb);

/* A convolution of NHWC x (buffer xb; IR tensor xt, or -1) into buffer
 * yb; with bits 4 or 8, quantized (emit_qconv). */
static int emit_conv(struct lower *L, const struct nx_node *nd, const struct nx_tensor *x,
                     int32_t xt, uint32_t bits, int32_t xb, const struct nx_tensor *w,
                     const struct nx_tensor *bias, const struct nx_tensor *y, int32_t yb,
                     const struct nx_attrs *a, enum nx_act act, float pa, float pb, float post_mul,
                     float post_add, const char *suffix)
{
    struct nib_vconv_params c = {0};
    c.h = (uint32_t)x->dims[2], c.w = (uint32_t)x->dims[3], c.c_in = (uint32_t)x->dims[1];
    c.oh = (uint32_t)y->dims[2], c.ow = (uint32_t)y->dims[3], c.c_out = (uint32_t)y->dims[1];
    c.groups = (uint32_t)a->group, c.kh = (uint32_t)w->dims[2], c.kw = (uint32_t)w->dims[3];
    c.stride_h = (uint32_t)a->strides[0], c.stride_w = (uint32_t)a->strides[1];
    c.pad_top = (uint32_t)a->pads[0], c.pad_left = (uint32_t)a->pads[1];
    c.dil_h = (uint32_t)a->dilations[0], c.dil_w = (uint32_t)a->dilations[1];
    struct nib_conv_shape s = {c.h,        c.w,       c.c_in,     c.oh,    c.ow,
                               c.c_out,    c.groups,  c.kh,       c.kw,    c.stride_h,
                               c.stride_w, c.pad_top, c.pad_left, c.dil_h, c.dil_w};
    if (!is_nhwc(x) || !nib_conv_shape_ok(&s) || w->dims[0] != y->dims[1])
        return NFAIL(nd, "a convolution shape the kernels do not take");
    c.depthwise = c.groups == c.c_in && c.c_in == c.c_out && c.groups > 1;
    if (bits) {
        c.bias = bias ? add_weight(L, nd->name, ".b", bias->f, c.c_out) : UINT32_MAX;
        if (bias && c.bias == UINT32_MAX)
            return NFAIL(nd, "weights too large or out of memory");
        act_params(act, pa, pb, &c.act, &c.p0, &c.p1);
        c.post = post_mul != 1.0f || post_add != 0.0f;
        c.post_mul = post_mul, c.post_add = post_add;
        return emit_qconv(L, nd, xt, bits, &s, &c, w->f, yb);
    }
    uint64_t nw = c.depthwise ? nib_dwconv_packed_f32_size(&s) : nib_conv_packed_f32_size(&s);
    float *wp = calloc(nw ? nw : 1, 4);
    if (!wp)
        return nib_fail(L->err, L->errlen, "out of memory");
    (c.depthwise ? nib_dwconv_pack_f32 : nib_conv_pack_f32)(&s, w->f, wp);
    uint32_t wt = add_weight(L, nd->name, suffix, wp, nw);
    free(wp);
    c.bias = bias ? add_weight(L, nd->name, ".b", bias->f, c.c_out) : UINT32_MAX;
    if (wt == UINT32_MAX || (bias && c.bias == UINT32_MAX))
        return NFAIL(nd, "weights too large or out of memory");
    act_params(act, pa, pb, &c.act, &c.p0, &c.p1);
    c.post = post_mul != 1.0f || post_add != 0.0f;
    c.post_mul = post_mul, c.post_add = post_add;
    c.res = L->res_mode;
    struct nib_op *op = new_op(L, NIB_VOP_CONV, xb, 0, L->res_buf, 0, yb, 0);
    if (!op)
        return -1;
    op->tensor = wt;
    op->vconv = c;
    return 0;
}

/* The int8 codes of value xt at its calibrated scale: one QUANT per
 * value, made before its first quantized reader and shared by the rest. */
static int32_t quant_buf(struct lower *L, const struct nx_node *nd, int32_t xt, float *scale)
{
    *scale = L->q && L->q->act_scale ? L->q->act_scale[xt] : 0.0f;
    if (!(*scale > 0.0f) || !isfinite(*scale)) {
        NFAIL(nd, "no calibrated scale for its input '%s'", L->g->t[xt].name);
        return -1;
    }
    if (L->qbuf[xt] >= 0)
        return L->qbuf[xt];
    const uint64_t n = nx_elems(&L->g->t[xt]);
    int32_t qb = new_buf(L, n);
    struct nib_op *op = qb < 0 ? NULL : new_op(L, NIB_VOP_QUANT, L->vbuf[xt], 0, -1, 0, qb, 0);
    if (!op) {
        nib_fail(L->err, L->errlen, "out of memory");
        return -1;
    }
    op->vquant.n = n;
    op->vquant.scale = *scale;
    L->qbuf[xt] = qb;
    return qb;
}

/* A quantized convolution (groups 1): QUANT of its input (once per
 * value), then QCONV with per-output-channel q4c/q8c weights; f32 out. */
static int emit_qconv(struct lower *L, const struct nx_node *nd, int32_t xt, uint32_t bits,
                      const struct nib_conv_shape *s, struct nib_vconv_params *c,
                      const float *w_oihw, int32_t yb)
{
    if (xt < 0 || c->groups != 1 || c->depthwise)
        return NFAIL(nd, "only a convolution of groups 1 of a runtime value is quantized");
    const uint32_t k = c->c_in * c->kh * c->kw;
    uint32_t wt = quantize_weight(L, nd, bits, s, w_oihw, c->c_out, k, xt, s);
    if (wt == UINT32_MAX)
        return -1;
    float xs;
    int32_t qb = quant_buf(L, nd, xt, &xs);
    if (qb < 0)
        return -1;
    need_scratch(L, nib_qconv_scratch_size(s, bits == 4 ? NIB_DT_Q4C : NIB_DT_Q8C));
    c->x_scale = xs;
    if (L->qout_scale > 0.0f)
        c->qout = 1, c->y_scale = L->qout_scale;
    c->res = L->res_mode;
    struct nib_op *op = new_op(L, NIB_VOP_QCONV, qb, 0, L->res_buf, 0, yb, 0);
    if (!op)
        return -1;
    op->tensor = wt;
    op->vconv = *c;
    return 0;
}

/* ConvTranspose: conv mode 1, ONNX's weights W[ic][oc][ky][kx] packed
 * with the output channels of a group fastest, padded to 8
 * (blob_format.h, vconv.mode). */
static int emit_convt(struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const struct nx_tensor *x = &g->t[nd->in[0]], *w = &g->t[nd->in[1]], *y = &g->t[nd->out[0]];
    const struct nx_tensor *b = nd->n_in > 2 && nd->in[2] >= 0 ? &g->t[nd->in[2]] : NULL;
    const struct nx_attrs *a = &nd->a;
    if (need_f32_value(L, nd, nd->in[0]) || !is_nhwc(x) || !w->is_const || (b && !b->is_const))
        return NFAIL(nd, "an image input and constant weights only");
    struct nib_vconv_params c = {0};
    c.h = (uint32_t)x->dims[2], c.w = (uint32_t)x->dims[3], c.c_in = (uint32_t)x->dims[1];
    c.oh = (uint32_t)y->dims[2], c.ow = (uint32_t)y->dims[3], c.c_out = (uint32_t)y->dims[1];
    c.groups = (uint32_t)a->group, c.kh = (uint32_t)w->dims[2], c.kw = (uint32_t)w->dims[3];
    c.stride_h = (uint32_t)a->strides[0], c.stride_w = (uint32_t)a->strides[1];
    c.pad_top = (uint32_t)a->pads[0], c.pad_left = (uint32_t)a->pads[1];
    c.dil_h = (uint32_t)a->dilations[0], c.dil_w = (uint32_t)a->dilations[1];
    c.mode = 1;
    if (a->pads[0] < 0 || a->pads[1] < 0 || a->pads[0] > 65536 || a->pads[1] > 65536)
        return NFAIL(nd, "pads out of range");
    c.bias = b ? add_weight(L, nd->name, ".b", b->f, c.c_out) : UINT32_MAX;
    const uint64_t ocg = c.c_out / c.groups, ocg8 = (ocg + 7) / 8 * 8, taps = (uint64_t)c.kh * c.kw;
    float *wp = calloc(c.c_in * taps * ocg8, sizeof *wp);
    if (!wp)
        return nib_fail(L->err, L->errlen, "out of memory");
    for (uint64_t ic = 0; ic < c.c_in; ic++)
        for (uint64_t oc = 0; oc < ocg; oc++)
            for (uint64_t t = 0; t < taps; t++)
                wp[(ic * taps + t) * ocg8 + oc] = w->f[(ic * ocg + oc) * taps + t];
    uint32_t wt = add_weight(L, nd->name, ".w", wp, c.c_in * taps * ocg8);
    free(wp);
    if (wt == UINT32_MAX || (b && c.bias == UINT32_MAX))
        return NFAIL(nd, "weights too large or out of memory");
    act_params(a->act, a->act_a, a->act_b, &c.act, &c.p0, &c.p1);
    c.post = a->post_mul != 1.0f || a->post_add != 0.0f;
    c.post_mul = a->post_mul, c.post_add = a->post_add;
    int32_t xb = value_buf(L, nd->in[0]), yb = out_buf(L, nd->out[0]);
    struct nib_op *op = yb < 0 ? NULL : new_op(L, NIB_VOP_CONV, xb, 0, -1, 0, yb, 0);
    if (!op)
        return -1;
    op->tensor = wt;
    op->vconv = c;
    return 0;
}

/* y = a op b with numpy broadcasting; either may be a constant. */
static int emit_binary(struct lower *L, const struct nx_node *nd, uint32_t fn)
{
    const struct nx_graph *g = L->g;
    const struct nx_tensor *y = &g->t[nd->out[0]];
    struct nest n = {0};
    int32_t src[2] = {-1, -1};
    uint32_t tens[2] = {UINT32_MAX, UINT32_MAX};
    for (int k = 0; k < 2; k++) {
        const struct nx_tensor *t = &g->t[nd->in[k]];
        if (t->dtype != NX_F32)
            return NFAIL(nd, "float operands only");
        int64_t ls[NX_MAX_RANK];
        if (t->is_const) {
            lstrides(t, 0, ls);
            tens[k] = add_weight(L, nd->name, k ? ".b" : ".a", t->f, nx_elems(t));
            if (tens[k] == UINT32_MAX)
                return NFAIL(nd, "constant too large");
        } else {
            if (need_f32_value(L, nd, nd->in[k]))
                return -1;
            lstrides(t, L->nhwc[nd->in[k]], ls);
            src[k] = value_buf(L, nd->in[k]);
        }
        for (uint32_t d = 0; d < y->rank; d++) {
            int64_t td = d + t->rank >= y->rank ? t->dims[d + t->rank - y->rank] : 1;
            n.s[k][d] = td == 1 ? 0 : ls[d + t->rank - y->rank];
        }
    }
    if (src[0] < 0 && src[1] < 0)
        return NFAIL(nd, "both operands are constants");
    int32_t yb = out_buf(L, nd->out[0]);
    struct nib_vew_params v;
    if (yb < 0 || nest_set(L, nd, &n, y->rank, y->dims, L->nhwc[nd->out[0]], &v))
        return -1;
    v.fn = fn;
    v.a_tensor = tens[0], v.b_tensor = tens[1];
    struct nib_op *op = new_op(L, NIB_VOP_BINARY, src[0], 0, src[1], 0, yb, 0);
    if (!op)
        return -1;
    op->vew = v;
    return 0;
}

/* y = f(x) element-wise, same shape and layout. */
static int emit_unary(struct lower *L, const struct nx_node *nd, int32_t xt, int32_t yt,
                      uint32_t fn, float p0, float p1)
{
    const struct nx_tensor *x = &L->g->t[xt];
    if (need_f32_value(L, nd, xt))
        return -1;
    int32_t xb = value_buf(L, xt), yb = yt >= 0 ? out_buf(L, yt) : -1;
    struct nest n = {0};
    int64_t ls[NX_MAX_RANK];
    lstrides(x, L->nhwc[xt], ls);
    memcpy(n.s[0], ls, sizeof n.s[0]);
    struct nib_vew_params v;
    if (yb < 0 || nest_set(L, nd, &n, x->rank, x->dims, L->nhwc[xt], &v))
        return -1;
    v.fn = fn, v.p0 = p0, v.p1 = p1;
    struct nib_op *op = new_op(L, NIB_VOP_UNARY, xb, 0, -1, 0, yb, 0);
    if (!op)
        return -1;
    op->vew = v;
    return 0;
}

/* A strided copy: loop dims (rank r) with source and destination
 * logical strides, from xb + xoff to yb + yoff (bytes). */
static int emit_copy(struct lower *L, const struct nx_node *nd, uint32_t r, const int64_t *dims,
                     const int64_t *ss, const int64_t *ds, int dst_nhwc, int32_t xb, uint64_t xoff,
                     int32_t yb, uint64_t yoff)
{
    struct nest n = {0};
    memcpy(n.s[0], ss, r * sizeof *ss);
    memcpy(n.s[2], ds, r * sizeof *ds);
    struct nib_vew_params v;
    if (nest_set(L, nd, &n, r, dims, dst_nhwc, &v))
        return -1;
    struct nib_op *op = new_op(L, NIB_VOP_COPY, xb, xoff, -1, 0, yb, yoff);
    if (!op)
        return -1;
    op->vew = v;
    return 0;
}

/* A value moved to a destination of the same element order (row-major
 * logical order of x is that of y): Reshape, Flatten, Squeeze, Unsqueeze,
 * Identity, and the final copy of an output into its io bytes. */
static int emit_reshape(struct lower *L, const struct nx_node *nd, int32_t xt,
                        const struct nx_tensor *y, int y_nhwc, int32_t yb)
{
    const struct nx_tensor *x = &L->g->t[xt];
    int64_t xs[NX_MAX_RANK], ys[NX_MAX_RANK];
    int x_nhwc = L->nhwc[xt];
    if (x_nhwc && y_nhwc && memcmp(x->dims, y->dims, sizeof x->dims))
        return NFAIL(nd, "a reshape between two different NHWC images");
    if (!y_nhwc) { /* loop over x's logical dims; y is dense in that order */
        struct nx_tensor d = *x;
        lstrides(x, x_nhwc, xs);
        lstrides(&d, 0, ys);
        return emit_copy(L, nd, x->rank, x->dims, xs, ys, 0, value_buf(L, xt), 0, yb, 0);
    }
    struct nx_tensor d = *y; /* loop over y's dims; x read in row-major order */
    lstrides(&d, 0, xs);
    lstrides(y, 1, ys);
    if (x_nhwc)
        lstrides(x, 1, xs);
    return emit_copy(L, nd, y->rank, y->dims, xs, ys, 1, value_buf(L, xt), 0, yb, 0);
}

static int emit_pool(struct lower *L, const struct nx_node *nd)
{
    const struct nx_tensor *x = &L->g->t[nd->in[0]], *y = &L->g->t[nd->out[0]];
    if (need_f32_value(L, nd, nd->in[0]) || !is_nhwc(x))
        return NFAIL(nd, "pooling of a 4-D image with N = 1 only");
    struct nib_conv_shape s;
    const struct nx_attrs *a = &nd->a;
    uint32_t C = (uint32_t)x->dims[1];
    if (nd->op == NX_OP_GAP) {
        nib_pool_global_shape(&s, (uint32_t)x->dims[2], (uint32_t)x->dims[3], C);
    } else {
        s = (struct nib_conv_shape){(uint32_t)x->dims[2],
                                    (uint32_t)x->dims[3],
                                    C,
                                    (uint32_t)y->dims[2],
                                    (uint32_t)y->dims[3],
                                    C,
                                    1,
                                    (uint32_t)a->kernel[0],
                                    (uint32_t)a->kernel[1],
                                    (uint32_t)a->strides[0],
                                    (uint32_t)a->strides[1],
                                    (uint32_t)a->pads[0],
                                    (uint32_t)a->pads[1],
                                    (uint32_t)a->dilations[0],
                                    (uint32_t)a->dilations[1]};
    }
    if (!nib_conv_shape_ok(&s))
        return NFAIL(nd, "a pooling shape the kernels do not take");
    int32_t xb = value_buf(L, nd->in[0]), yb = out_buf(L, nd->out[0]);
    struct nib_op *op = yb < 0 ? NULL : new_op(L, NIB_VOP_POOL, xb, 0, -1, 0, yb, 0);
    if (!op)
        return -1;
    struct nib_vconv_params *c = &op->vconv;
    c->h = s.h, c->w = s.w, c->c_in = s.c_in, c->oh = s.oh, c->ow = s.ow, c->c_out = s.c_out;
    c->groups = s.groups, c->kh = s.kh, c->kw = s.kw, c->stride_h = s.stride_h;
    c->stride_w = s.stride_w, c->pad_top = s.pad_top, c->pad_left = s.pad_left;
    c->dil_h = s.dil_h, c->dil_w = s.dil_w;
    c->mode = nd->op == NX_OP_MAXPOOL                           ? NIB_POOL_MAX
              : nd->op == NX_OP_AVGPOOL && a->count_include_pad ? NIB_POOL_AVG_INCLUDE_PAD
                                                                : NIB_POOL_AVG;
    return 0;
}

/* Squeeze-excite: global average pool, two 1x1 convolutions, the product. */
static int emit_se(struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const struct nx_tensor *x = &g->t[nd->in[0]], *w1 = &g->t[nd->in[1]], *w2 = &g->t[nd->in[3]];
    const struct nx_tensor *b1 = nd->in[2] >= 0 ? &g->t[nd->in[2]] : NULL;
    const struct nx_tensor *b2 = nd->in[4] >= 0 ? &g->t[nd->in[4]] : NULL;
    if (need_f32_value(L, nd, nd->in[0]) || !is_nhwc(x))
        return NFAIL(nd, "squeeze-excite of a 4-D image with N = 1 only");
    const int64_t C = x->dims[1], R = w1->dims[0];
    int32_t xb = value_buf(L, nd->in[0]);
    int32_t mb = new_buf(L, C * 4), hb = new_buf(L, R * 4), eb = new_buf(L, C * 4);
    if (mb < 0 || hb < 0 || eb < 0)
        return nib_fail(L->err, L->errlen, "out of memory");
    struct nib_conv_shape s;
    nib_pool_global_shape(&s, (uint32_t)x->dims[2], (uint32_t)x->dims[3], (uint32_t)C);
    struct nib_op *op = new_op(L, NIB_VOP_POOL, xb, 0, -1, 0, mb, 0);
    if (!op)
        return -1;
    struct nib_vconv_params *c = &op->vconv;
    c->h = s.h, c->w = s.w, c->c_in = c->c_out = s.c_in, c->oh = c->ow = 1, c->groups = 1;
    c->kh = s.kh, c->kw = s.kw, c->stride_h = c->stride_w = c->dil_h = c->dil_w = 1;
    c->mode = NIB_POOL_AVG;
    struct nx_tensor m = {.rank = 4, .dims = {1, C, 1, 1}}, h = {.rank = 4, .dims = {1, R, 1, 1}};
    struct nx_attrs a1 = {.strides = {1, 1}, .dilations = {1, 1}, .group = 1};
    if (emit_conv(L, nd, &m, -1, 0, mb, w1, b1, &h, hb, &a1, nd->a.act, nd->a.act_a, nd->a.act_b,
                  1.0f, 0.0f, ".w1") ||
        emit_conv(L, nd, &h, -1, 0, hb, w2, b2, &m, eb, &a1, nd->a.act2, nd->a.act2_a, nd->a.act2_b,
                  1.0f, 0.0f, ".w2"))
        return -1;
    int32_t yb = out_buf(L, nd->out[0]);
    struct nest n = {0};
    int64_t xs[4];
    lstrides(x, 1, xs);
    memcpy(n.s[0], xs, sizeof xs);
    n.s[1][1] = 1; /* the excitation: one value per channel */
    struct nib_vew_params v;
    if (yb < 0 || nest_set(L, nd, &n, 4, x->dims, 1, &v))
        return -1;
    v.fn = NIB_VBIN_MUL;
    op = new_op(L, NIB_VOP_BINARY, xb, 0, eb, 0, yb, 0);
    if (!op)
        return -1;
    op->vew = v;
    return 0;
}

/* MatMul of two runtime values: up to two batch dims (broadcast as stride
 * 0), any layout of the operands; the result row-major. */
static int emit_bmatmul(struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const struct nx_tensor *y = &g->t[nd->out[0]];
    if (need_f32_value(L, nd, nd->in[0]) || need_f32_value(L, nd, nd->in[1]))
        return -1;
    const struct nx_tensor *A = &g->t[nd->in[0]], *B = &g->t[nd->in[1]];
    if (A->rank < 2 || B->rank < 2 || y->rank > 4 || y->rank < 2)
        return NFAIL(nd, "operands of rank 2 to 4 only");
    const uint32_t r = y->rank;
    struct nib_vbmm_params p = {1, 1, 0, 0, 0, {0}, {0}};
    p.m = (uint32_t)A->dims[A->rank - 2], p.k = (uint32_t)A->dims[A->rank - 1];
    p.n = (uint32_t)B->dims[B->rank - 1];
    if (B->dims[B->rank - 2] != (int64_t)p.k || y->dims[r - 2] != (int64_t)p.m ||
        y->dims[r - 1] != (int64_t)p.n)
        return NFAIL(nd, "inner dimensions differ");
    uint32_t *nb[2] = {&p.nb0, &p.nb1};
    for (uint32_t d = 0; d + 2 < r; d++)
        *nb[d + 4 - r] = (uint32_t)y->dims[d];
    for (int o = 0; o < 2; o++) {
        const struct nx_tensor *t = o ? B : A;
        uint32_t *st = o ? p.sb : p.sa;
        int64_t ls[NX_MAX_RANK];
        lstrides(t, L->nhwc[nd->in[o]], ls);
        for (uint32_t d = 0; d + 2 < r; d++) { /* batch dims, right-aligned */
            int64_t td = (int64_t)d + t->rank >= r ? (int64_t)(d + t->rank - r) : -1;
            st[d + 4 - r] = td < 0 || t->dims[td] == 1 ? 0 : (uint32_t)ls[td];
        }
        st[2] = (uint32_t)ls[t->rank - 2], st[3] = (uint32_t)ls[t->rank - 1];
    }
    int32_t yb = out_buf(L, nd->out[0]);
    L->nhwc[nd->out[0]] = 0;
    struct nib_op *op = yb < 0 ? NULL
                               : new_op(L, NIB_VOP_BMATMUL, value_buf(L, nd->in[0]), 0,
                                        value_buf(L, nd->in[1]), 0, yb, 0);
    if (!op)
        return -1;
    op->vbmm = p;
    return 0;
}

/* The fused LayerNorm over the last axis of a row-major value. */
static int emit_layernorm(struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const struct nx_tensor *x = &g->t[nd->in[0]];
    if (need_f32_value(L, nd, nd->in[0]))
        return -1;
    if (L->nhwc[nd->in[0]])
        return NFAIL(nd, "over the last axis of a row-major value only, not of an image");
    const int64_t n = x->dims[x->rank - 1];
    uint32_t t[2] = {UINT32_MAX, UINT32_MAX};
    for (int k = 0; k < 2; k++) {
        if (nd->n_in <= 1u + k || nd->in[1 + k] < 0)
            continue;
        const struct nx_tensor *c = &g->t[nd->in[1 + k]];
        const uint64_t ce = nx_elems(c);
        if (!c->is_const || c->dtype != NX_F32 || (ce != 1 && ce != (uint64_t)n))
            return NFAIL(nd, "a gamma or beta that is not a constant of 1 or %lld floats",
                         (long long)n);
        float *f = malloc((size_t)n * 4);
        if (!f)
            return nib_fail(L->err, L->errlen, "out of memory");
        for (int64_t i = 0; i < n; i++)
            f[i] = c->f[ce == 1 ? 0 : i];
        t[k] = add_weight(L, nd->name, k ? ".beta" : ".gamma", f, (uint64_t)n);
        free(f);
        if (t[k] == UINT32_MAX)
            return NFAIL(nd, "weights too large or out of memory");
    }
    int32_t xb = value_buf(L, nd->in[0]), yb = out_buf(L, nd->out[0]);
    L->nhwc[nd->out[0]] = 0;
    struct nib_op *op = yb < 0 ? NULL : new_op(L, NIB_VOP_LAYERNORM, xb, 0, -1, 0, yb, 0);
    if (!op)
        return -1;
    op->vnorm = (struct nib_vnorm_params){(uint32_t)(nx_elems(x) / (uint64_t)n), (uint32_t)n, t[0],
                                          t[1], nd->a.epsilon};
    return 0;
}

static int emit_matmul(struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const struct nx_tensor *A = &g->t[nd->in[0]], *B = &g->t[nd->in[1]];
    const struct nx_tensor *C =
        nd->op == NX_OP_GEMM && nd->n_in > 2 && nd->in[2] >= 0 ? &g->t[nd->in[2]] : NULL;
    const struct nx_attrs *a = &nd->a;
    const int gemm = nd->op == NX_OP_GEMM;
    if (!gemm && !B->is_const)
        return emit_bmatmul(L, nd);
    if (need_f32_value(L, nd, nd->in[0]) || L->nhwc[nd->in[0]] || !B->is_const || B->rank != 2 ||
        (gemm && a->trans_a) || A->rank < 2)
        return NFAIL(nd, "a row-major input times a constant 2-D matrix only");
    const int tb = gemm && a->trans_b;
    const int64_t K = A->dims[A->rank - 1], N = tb ? B->dims[0] : B->dims[1];
    const int64_t M = (int64_t)(nx_elems(A) / (uint64_t)K);
    if ((tb ? B->dims[1] : B->dims[0]) != K)
        return NFAIL(nd, "inner dimensions differ");
    const float alpha = gemm ? a->alpha : 1.0f, beta = gemm ? a->beta : 1.0f;
    float *w = malloc((size_t)(N * K) * 4), *bias = NULL;
    if (!w)
        return nib_fail(L->err, L->errlen, "out of memory");
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            w[n * K + k] = alpha * B->f[tb ? n * K + k : k * N + n];
    if (C) {
        if (!C->is_const ||
            (nx_elems(C) != 1 && !(nx_elems(C) == (uint64_t)N && C->dims[C->rank - 1] == N))) {
            free(w);
            return NFAIL(nd, "a bias that is not a constant scalar or row");
        }
        bias = malloc((size_t)N * 4);
        if (!bias) {
            free(w);
            return nib_fail(L->err, L->errlen, "out of memory");
        }
        for (int64_t n = 0; n < N; n++)
            bias[n] = beta * C->f[nx_elems(C) == 1 ? 0 : n];
    }
    const uint32_t bits = node_bits(L, nd);
    uint32_t wt;
    if (bits) { /* n x k codes as a 1x1 convolution of k channels into n */
        struct nib_conv_shape s1 = {1, 1, (uint32_t)K, 1, 1, (uint32_t)N, 1, 1,
                                    1, 1, 1,           0, 0, 1,           1};
        struct nib_conv_shape hs = {(uint32_t)M, 1, (uint32_t)K, (uint32_t)M, 1, (uint32_t)N, 1, 1,
                                    1,           1, 1,           0,           0, 1,           1};
        wt = quantize_weight(L, nd, bits, &s1, w, (uint32_t)N, (uint32_t)K, nd->in[0], &hs);
        if (wt == UINT32_MAX) {
            free(w);
            free(bias);
            return -1;
        }
        need_scratch(L, nib_qact_footprint((uint32_t)M, (uint32_t)K, 0));
    } else {
        wt = add_weight(L, nd->name, ".w", w, (uint64_t)(N * K));
    }
    uint32_t bt = bias ? add_weight(L, nd->name, ".b", bias, (uint64_t)N) : UINT32_MAX;
    free(w);
    free(bias);
    if (wt == UINT32_MAX || (C && bt == UINT32_MAX))
        return NFAIL(nd, "weights too large");
    int32_t xb = value_buf(L, nd->in[0]), yb = out_buf(L, nd->out[0]);
    struct nib_op *op = yb < 0 ? NULL : new_op(L, NIB_VOP_MATMUL, xb, 0, -1, 0, yb, 0);
    if (!op)
        return -1;
    op->tensor = wt;
    op->vmatmul = (struct nib_vmatmul_params){(uint32_t)M, (uint32_t)N, (uint32_t)K, bt};
    return 0;
}

static int emit_softmax(struct lower *L, const struct nx_node *nd)
{
    const struct nx_tensor *x = &L->g->t[nd->in[0]];
    if (need_f32_value(L, nd, nd->in[0]))
        return -1;
    const int64_t ax = nd->a.axis;
    uint64_t rows = 1, n = 1;
    if (L->nhwc[nd->in[0]]) {
        if (ax > 1 || (L->g->opset >= 13 && ax != 1))
            return NFAIL(nd, "over the channels of an image only");
        n = ax == 1 && L->g->opset >= 13 ? (uint64_t)x->dims[1] : nx_elems(x);
        rows = nx_elems(x) / n;
    } else {
        if (L->g->opset >= 13 && ax != (int64_t)x->rank - 1)
            return NFAIL(nd, "over the last axis only");
        for (int64_t d = 0; d < (int64_t)x->rank; d++)
            *(d < ax ? &rows : &n) *= (uint64_t)x->dims[d];
    }
    int32_t xb = value_buf(L, nd->in[0]), yb = out_buf(L, nd->out[0]);
    L->nhwc[nd->out[0]] = L->nhwc[nd->in[0]];
    struct nib_op *op = yb < 0 ? NULL : new_op(L, NIB_VOP_SOFTMAX, xb, 0, -1, 0, yb, 0);
    if (!op)
        return -1;
    op->vrows.rows = (uint32_t)rows, op->vrows.n = (uint32_t)n;
    return 0;
}

static int emit_resize(struct lower *L, const struct nx_node *nd)
{
    static const uint32_t coord[] = {[NX_COORD_HALF_PIXEL] = NIB_RESIZE_HALF_PIXEL,
                                     [NX_COORD_ASYMMETRIC] = NIB_RESIZE_ASYMMETRIC,
                                     [NX_COORD_ALIGN_CORNERS] = NIB_RESIZE_ALIGN_CORNERS,
                                     [NX_COORD_PYTORCH_HALF_PIXEL] = NIB_RESIZE_PYTORCH_HALF_PIXEL};
    const struct nx_tensor *x = &L->g->t[nd->in[0]], *y = &L->g->t[nd->out[0]];
    const struct nx_attrs *a = &nd->a;
    if (need_f32_value(L, nd, nd->in[0]) || !is_nhwc(x) || y->dims[1] != x->dims[1] ||
        a->coord_mode < 0 || a->coord_mode > NX_COORD_PYTORCH_HALF_PIXEL)
        return NFAIL(nd, "spatial resize of a 4-D image with N = 1 only");
    struct nib_vresize_params r = {(uint32_t)x->dims[2], (uint32_t)x->dims[3],
                                   (uint32_t)x->dims[1], (uint32_t)y->dims[2],
                                   (uint32_t)y->dims[3], a->scales[2],
                                   a->scales[3],         (uint32_t)a->resize_linear,
                                   coord[a->coord_mode], (uint32_t)a->nearest_mode};
    struct nib_resize k = {r.h,       r.w,       r.c,      r.oh,    r.ow,
                           r.scale_h, r.scale_w, r.linear, r.coord, r.nearest_mode};
    if (!nib_resize_ok(&k))
        return NFAIL(nd, "a resize the kernels do not take");
    int32_t xb = value_buf(L, nd->in[0]), yb = out_buf(L, nd->out[0]);
    struct nib_op *op = yb < 0 ? NULL : new_op(L, NIB_VOP_RESIZE, xb, 0, -1, 0, yb, 0);
    if (!op)
        return -1;
    op->vresize = r;
    return 0;
}

static int emit_concat(struct lower *L, const struct nx_node *nd)
{
    const struct nx_tensor *y = &L->g->t[nd->out[0]];
    const int64_t ax = nd->a.axis;
    int32_t yb = out_buf(L, nd->out[0]);
    if (yb < 0)
        return -1;
    int64_t ys[NX_MAX_RANK], xs[NX_MAX_RANK], at = 0;
    lstrides(y, L->nhwc[nd->out[0]], ys);
    for (uint32_t i = 0; i < nd->n_in; i++) {
        const struct nx_tensor *x = &L->g->t[nd->in[i]];
        if (need_f32_value(L, nd, nd->in[i]))
            return -1;
        lstrides(x, L->nhwc[nd->in[i]], xs);
        if (nx_elems(x) && emit_copy(L, nd, x->rank, x->dims, xs, ys, L->nhwc[nd->out[0]],
                                     value_buf(L, nd->in[i]), 0, yb, (uint64_t)(at * ys[ax]) * 4))
            return -1;
        at += x->dims[ax];
    }
    return 0;
}

static int emit_transpose_slice(struct lower *L, const struct nx_node *nd)
{
    const struct nx_tensor *x = &L->g->t[nd->in[0]], *y = &L->g->t[nd->out[0]];
    if (need_f32_value(L, nd, nd->in[0]))
        return -1;
    int64_t xs[NX_MAX_RANK], ys[NX_MAX_RANK], ss[NX_MAX_RANK], base = 0;
    lstrides(x, L->nhwc[nd->in[0]], xs);
    int32_t yb = out_buf(L, nd->out[0]);
    if (yb < 0)
        return -1;
    lstrides(y, L->nhwc[nd->out[0]], ys);
    for (uint32_t d = 0; d < y->rank; d++) {
        if (nd->op == NX_OP_TRANSPOSE) {
            ss[d] = xs[nd->a.perm[d]];
        } else {
            if (nd->a.steps[d] < 1)
                return NFAIL(nd, "negative steps are not supported");
            ss[d] = xs[d] * nd->a.steps[d];
            base += nd->a.starts[d] * xs[d];
        }
    }
    if (!nx_elems(y))
        return NFAIL(nd, "an empty result");
    return emit_copy(L, nd, y->rank, y->dims, ss, ys, L->nhwc[nd->out[0]], value_buf(L, nd->in[0]),
                     (uint64_t)base * 4, yb, 0);
}

/* BatchNormalization left standing: y = x * s + t per channel. */
static int emit_bn(struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const struct nx_tensor *x = &g->t[nd->in[0]];
    if (need_f32_value(L, nd, nd->in[0]))
        return -1;
    if (x->rank < 2 || nd->n_in < 5)
        return NFAIL(nd, "an input of rank 2 or more and four statistics");
    for (int k = 1; k < 5; k++)
        if (!g->t[nd->in[k]].is_const || nx_elems(&g->t[nd->in[k]]) != (uint64_t)x->dims[1])
            return NFAIL(nd, "statistics that are not constants of one value per channel");
    const int64_t C = x->dims[1];
    float *st = malloc((size_t)C * 8);
    if (!st)
        return nib_fail(L->err, L->errlen, "out of memory");
    for (int64_t c = 0; c < C; c++) {
        double s = g->t[nd->in[1]].f[c] / sqrt((double)g->t[nd->in[4]].f[c] + nd->a.epsilon);
        st[c] = (float)s;
        st[C + c] = (float)(g->t[nd->in[2]].f[c] - g->t[nd->in[3]].f[c] * s);
    }
    uint32_t sw = add_weight(L, nd->name, ".s", st, (uint64_t)C);
    uint32_t tw = add_weight(L, nd->name, ".t", st + C, (uint64_t)C);
    free(st);
    int32_t xb = value_buf(L, nd->in[0]), mb = new_buf(L, nx_elems(x) * 4);
    if (sw == UINT32_MAX || tw == UINT32_MAX || mb < 0)
        return NFAIL(nd, "out of memory");
    int nh = L->nhwc[nd->in[0]];
    int64_t xs[NX_MAX_RANK];
    lstrides(x, nh, xs);
    for (int k = 0; k < 2; k++) {
        struct nest n = {0};
        memcpy(n.s[0], xs, sizeof n.s[0]);
        n.s[1][1] = 1;
        struct nib_vew_params v;
        int32_t yb = k ? out_buf(L, nd->out[0]) : mb;
        if (yb < 0 || nest_set(L, nd, &n, x->rank, x->dims, nh, &v))
            return -1;
        v.fn = k ? NIB_VBIN_ADD : NIB_VBIN_MUL;
        v.b_tensor = k ? tw : sw;
        struct nib_op *op = new_op(L, NIB_VOP_BINARY, k ? mb : xb, 0, -1, 0, yb, 0);
        if (!op)
            return -1;
        op->vew = v;
    }
    return 0;
}

/* The scale of a quantized convolution's int8 output when every reader
 * of it is a quantized convolution (its input, not a weight) and nothing
 * else reads it (not a graph output): then that convolution writes int8
 * itself and no QUANT is needed. 0 otherwise, or when its epilogue cannot
 * end in int8 (an affine after the activation, a sigmoid). */
static float qout_scale(const struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const int32_t y = nd->out[0];
    if (nd->n_out != 1 || y < 0 || g->t[y].is_output || !is_nhwc(&g->t[y]) ||
        nd->a.post_mul != 1.0f || nd->a.post_add != 0.0f || nd->a.act == NX_ACT_SIGMOID ||
        !L->q->act_scale || !(L->q->act_scale[y] > 0.0f) || !isfinite(L->q->act_scale[y]))
        return 0.0f;
    uint32_t readers = 0;
    for (uint32_t k = 0; k < g->n_order; k++) {
        const struct nx_node *m = &g->n[g->order[k]];
        for (uint32_t i = 0; i < m->n_in; i++) {
            if (m->in[i] != y)
                continue;
            if (i != 0 || m->op != NX_OP_CONV || !node_bits(L, m) || !vq_weighted(g, g->order[k]))
                return 0.0f;
            readers++;
        }
    }
    return readers ? L->q->act_scale[y] : 0.0f;
}

/* The fused residual of Conv nd (input 3) as an f32 NHWC buffer for the
 * conv about to be emitted (L->res_buf, L->res_mode): the value's own
 * buffer, or an NHWC copy of a row-major one. The buffer, or -1. */
static int32_t res_value(struct lower *L, const struct nx_node *nd)
{
    const int32_t rt = nd->in[3];
    if (need_f32_value(L, nd, rt))
        return -1;
    int32_t rb = value_buf(L, rt);
    if (!L->nhwc[rt]) {
        rb = new_buf(L, nx_elems(&L->g->t[rt]) * 4);
        if (rb < 0 || emit_reshape(L, nd, rt, &L->g->t[rt], 1, rb))
            return -1;
    }
    L->res_buf = rb, L->res_mode = (uint32_t)nd->a.res;
    return rb;
}

static int lower_node(struct lower *L, const struct nx_node *nd)
{
    const struct nx_graph *g = L->g;
    const struct nx_attrs *a = &nd->a;
    for (uint32_t k = 0; k < nd->n_out; k++)
        if (g->t[nd->out[k]].dtype != NX_F32)
            return NFAIL(nd, "an output that is not float at runtime");
    const int image_op = nd->op == NX_OP_CONV || nd->op == NX_OP_CONV_T || nd->op == NX_OP_SE ||
                         nd->op == NX_OP_MAXPOOL || nd->op == NX_OP_AVGPOOL ||
                         nd->op == NX_OP_GAP || nd->op == NX_OP_RESIZE;
    if (image_op && nd->n_in > 0 && nd->in[0] >= 0 && L->vbuf[nd->in[0]] >= 0 &&
        !L->nhwc[nd->in[0]])
        return NFAIL(nd, "an image input that is not laid out as NHWC");
    switch (nd->op) {
    case NX_OP_CONV: {
        const struct nx_tensor *x = &g->t[nd->in[0]], *w = &g->t[nd->in[1]];
        const struct nx_tensor *b = nd->n_in > 2 && nd->in[2] >= 0 ? &g->t[nd->in[2]] : NULL;
        const uint32_t bits = node_bits(L, nd);
        const int int8_in = bits && L->vbuf[nd->in[0]] < 0 && L->qbuf[nd->in[0]] >= 0;
        if ((!int8_in && need_f32_value(L, nd, nd->in[0])) || !w->is_const || (b && !b->is_const))
            return NFAIL(nd, "weights that are not constants");
        const float qs = bits ? qout_scale(L, nd) : 0.0f;
        int32_t xb = value_buf(L, nd->in[0]), yb;
        if (qs > 0.0f) { /* int8 out, read as is by every consumer (no QUANT) */
            yb = new_buf(L, nx_elems(&g->t[nd->out[0]]));
            L->qbuf[nd->out[0]] = yb;
            L->nhwc[nd->out[0]] = 1;
        } else {
            yb = out_buf(L, nd->out[0]);
        }
        if (yb < 0 || (a->res && res_value(L, nd) < 0))
            return -1;
        L->qout_scale = qs;
        int rc = emit_conv(L, nd, x, nd->in[0], bits, xb, w, b, &g->t[nd->out[0]], yb, a, a->act,
                           a->act_a, a->act_b, a->post_mul, a->post_add, ".w");
        L->qout_scale = 0.0f;
        L->res_buf = -1, L->res_mode = 0;
        return rc;
    }
    case NX_OP_CONV_T: return emit_convt(L, nd);
    case NX_OP_SE: return emit_se(L, nd);
    case NX_OP_BN: return emit_bn(L, nd);
    case NX_OP_ADD: return emit_binary(L, nd, NIB_VBIN_ADD);
    case NX_OP_SUB: return emit_binary(L, nd, NIB_VBIN_SUB);
    case NX_OP_MUL: return emit_binary(L, nd, NIB_VBIN_MUL);
    case NX_OP_DIV: return emit_binary(L, nd, NIB_VBIN_DIV);
    case NX_OP_POW: return emit_binary(L, nd, NIB_VBIN_POW);
    case NX_OP_RELU: return emit_unary(L, nd, nd->in[0], nd->out[0], NIB_VACT_RELU, 0, 0);
    case NX_OP_CLIP: return emit_unary(L, nd, nd->in[0], nd->out[0], NIB_VACT_CLIP, a->lo, a->hi);
    case NX_OP_HSIGMOID:
        return emit_unary(L, nd, nd->in[0], nd->out[0], NIB_VACT_HSIGMOID, a->alpha, a->beta);
    case NX_OP_HSWISH:
        return emit_unary(L, nd, nd->in[0], nd->out[0], NIB_VACT_HSWISH, 1.0f / 6.0f, 0.5f);
    case NX_OP_SIGMOID: return emit_unary(L, nd, nd->in[0], nd->out[0], NIB_VACT_SIGMOID, 0, 0);
    case NX_OP_SQRT: return emit_unary(L, nd, nd->in[0], nd->out[0], NIB_VACT_SQRT, 0, 0);
    case NX_OP_MAXPOOL:
    case NX_OP_AVGPOOL:
    case NX_OP_GAP: return emit_pool(L, nd);
    case NX_OP_GEMM:
    case NX_OP_MATMUL: return emit_matmul(L, nd);
    case NX_OP_SOFTMAX: return emit_softmax(L, nd);
    case NX_OP_RESIZE: return emit_resize(L, nd);
    case NX_OP_CONCAT: return emit_concat(L, nd);
    case NX_OP_TRANSPOSE:
    case NX_OP_SLICE: return emit_transpose_slice(L, nd);
    case NX_OP_FLATTEN:
    case NX_OP_RESHAPE:
    case NX_OP_SQUEEZE:
    case NX_OP_UNSQUEEZE:
    case NX_OP_IDENTITY: {
        if (need_f32_value(L, nd, nd->in[0]))
            return -1;
        int32_t yb = out_buf(L, nd->out[0]);
        if (yb < 0)
            return -1;
        return emit_reshape(L, nd, nd->in[0], &g->t[nd->out[0]], L->nhwc[nd->out[0]], yb);
    }
    case NX_OP_LAYERNORM: return emit_layernorm(L, nd);
    default: return NFAIL(nd, "not supported in a compiled blob yet");
    }
}

/* The io record of graph value t at buffer b. */
static int add_io(struct lower *L, const struct nx_tensor *t, uint32_t dir, uint32_t dtype,
                  int32_t b)
{
    struct vision_plan *p = L->p;
    if (p->n_io == NIB_IO_MAX)
        return nib_fail(L->err, L->errlen, "more than %u inputs and outputs", NIB_IO_MAX);
    if (t->rank < 1 || t->rank > NIB_IO_MAX_RANK || strlen(t->name) >= NIB_NAME_MAX || !t->name[0])
        return nib_fail(L->err, L->errlen, "'%s': a name of 1..%d bytes and rank 1..%d only",
                        t->name, NIB_NAME_MAX - 1, NIB_IO_MAX_RANK);
    struct vp_io *io = &p->io[p->n_io++];
    memset(io, 0, sizeof *io);
    strcpy(io->rec.name, t->name);
    io->rec.dir = dir, io->rec.dtype = dtype, io->rec.rank = t->rank;
    for (uint32_t d = 0; d < t->rank; d++)
        io->rec.dims[d] = (uint32_t)t->dims[d];
    io->rec.bytes = nx_elems(t) * nib_io_elem_size(dtype);
    io->buf = b;
    return 0;
}

static int lower_inputs(struct lower *L, const struct vision_opts *o)
{
    const struct nx_graph *g = L->g;
    for (uint32_t k = 0; k < g->n_inputs; k++) {
        int32_t ti = g->inputs[k];
        const struct nx_tensor *t = &g->t[ti];
        const int img = is_nhwc(t);
        if (t->dtype != NX_F32 || (o->input_u8 && !img))
            return nib_fail(L->err, L->errlen, "input '%s': float, and u8 only for an image",
                            t->name);
        uint32_t dtype = o->input_u8 ? NIB_IO_U8 : NIB_IO_F32;
        int32_t ib = new_buf(L, nx_elems(t) * nib_io_elem_size(dtype));
        if (ib < 0 || add_io(L, t, NIB_IO_INPUT, dtype, ib))
            return -1;
        L->p->bufs[ib].first = -1; /* written before the run */
        L->p->bufs[ib].last = 0;
        if (!img) {
            L->vbuf[ti] = ib;
            continue;
        }
        const uint32_t C = (uint32_t)t->dims[1];
        if ((o->n_mean && o->n_mean != C) || (o->n_std && o->n_std != C))
            return nib_fail(L->err, L->errlen,
                            "input '%s' has %u channels: --input-mean and "
                            "--input-std need one value each",
                            t->name, C);
        float *st = malloc(C * 8ull);
        if (!st)
            return nib_fail(L->err, L->errlen, "out of memory");
        for (uint32_t c = 0; c < C; c++) {
            /* y = (x / 255 - mean) / std for pixels, (x - mean) / std for floats */
            double mean = o->n_mean ? o->mean[c] : 0, sd = o->n_std ? o->std[c] : 1;
            double sc = (o->input_u8 ? 1.0 / 255.0 : 1.0) / sd;
            st[c] = (float)sc;
            st[C + c] = (float)(-mean / sd);
        }
        uint32_t wt = add_weight(L, t->name, ".in", st, 2ull * C);
        free(st);
        int32_t yb = out_buf(L, ti);
        struct nib_op *op =
            wt == UINT32_MAX || yb < 0 ? NULL : new_op(L, NIB_VOP_INPUT, ib, 0, -1, 0, yb, 0);
        if (!op)
            return nib_fail(L->err, L->errlen, "out of memory");
        op->tensor = wt;
        op->vrows.c = C, op->vrows.h = (uint32_t)t->dims[2], op->vrows.w = (uint32_t)t->dims[3];
        op->vrows.u8 = (uint32_t)o->input_u8;
    }
    return 0;
}

static int lower_outputs(struct lower *L)
{
    const struct nx_graph *g = L->g;
    for (uint32_t k = 0; k < g->n_outputs; k++) {
        int32_t ti = g->outputs[k];
        const struct nx_tensor *t = &g->t[ti];
        if (t->is_const || t->dtype != NX_F32 || L->vbuf[ti] < 0)
            return nib_fail(L->err, L->errlen, "output '%s': only float values computed at runtime",
                            t->name);
        int32_t ob = new_buf(L, nx_elems(t) * 4);
        if (ob < 0 || add_io(L, t, NIB_IO_OUTPUT, NIB_IO_F32, ob))
            return -1;
        struct nx_node fake = {.name = t->name, .op_type = "output"};
        if (emit_reshape(L, &fake, ti, t, 0, ob))
            return -1;
        L->p->bufs[ob].last = INT32_MAX; /* read after the run */
    }
    return 0;
}

/* Where each IR tensor's f32 value is and when it is complete. */
static void note_values(struct lower *L, const int32_t *ts, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        if (ts[k] < 0)
            continue;
        L->p->t_buf[ts[k]] = L->vbuf[ts[k]];
        L->p->t_done[ts[k]] = (int32_t)L->p->n_ops - 1;
    }
}

/* Who writes and reads each buffer: writer[b] the op writing it (-1
 * none, -2 more than one), readers[b] how many operand slots read it, an
 * io buffer counting as a reader that stays. */
struct buf_use {
    int32_t *writer;
    uint32_t *readers;
};

static int buf_use(const struct vision_plan *p, struct buf_use *u)
{
    u->writer = malloc(p->n_bufs * sizeof *u->writer + 1);
    u->readers = calloc(p->n_bufs + 1, sizeof *u->readers);
    if (!u->writer || !u->readers)
        return -1;
    for (uint32_t b = 0; b < p->n_bufs; b++)
        u->writer[b] = -1;
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const struct vp_op *o = &p->ops[i];
        for (int k = 0; k < 2; k++)
            if (o->buf[k] >= 0)
                u->readers[o->buf[k]]++;
        if (o->buf[2] >= 0)
            u->writer[o->buf[2]] = u->writer[o->buf[2]] == -1 ? (int32_t)i : -2;
    }
    for (uint32_t k = 0; k < p->n_io; k++)
        if (p->io[k].buf >= 0)
            u->readers[p->io[k].buf]++;
    return 0;
}

static void buf_use_free(struct buf_use *u)
{
    free(u->writer);
    free(u->readers);
}

/* Buffer b is no longer written or read: it takes no arena bytes, and no
 * IR value lives there any more. */
static void drop_buf(struct vision_plan *p, int32_t b)
{
    p->bufs[b] = (struct vp_buf){0, INT32_MAX, -1, 0};
    for (uint32_t t = 0; t < p->n_t; t++)
        if (p->t_buf[t] == b)
            p->t_buf[t] = -1;
}

/* Remove the ops marked in gone, renumbering the rest: a removed op's
 * place in lifetimes and t_done goes to the op before it (its reads end
 * there; whatever it wrote was moved to an earlier op by the caller). */
static int drop_ops(struct vision_plan *p, const uint8_t *gone)
{
    int32_t *map = malloc(p->n_ops * sizeof *map + 1);
    if (!map)
        return -1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < p->n_ops; i++) {
        if (gone[i]) {
            map[i] = n ? (int32_t)n - 1 : 0;
            continue;
        }
        map[i] = (int32_t)n;
        p->ops[n++] = p->ops[i];
    }
    p->n_ops = n;
    for (uint32_t b = 0; b < p->n_bufs; b++) {
        struct vp_buf *f = &p->bufs[b];
        if (f->first >= 0 && f->first < INT32_MAX)
            f->first = map[f->first];
        if (f->last >= 0 && f->last < INT32_MAX)
            f->last = map[f->last];
    }
    for (uint32_t t = 0; t < p->n_t; t++)
        if (p->t_done[t] >= 0)
            p->t_done[t] = map[p->t_done[t]];
    free(map);
    return 0;
}

/* Operand k of an element-wise op: the same arena bytes read the same way
 * as operand kk of another with the same dims. */
static int same_operand(const struct vp_op *a, int k, const struct vp_op *b, int kk)
{
    const uint32_t *sa = k ? a->op.vew.sb : a->op.vew.sa, *sb = kk ? b->op.vew.sb : b->op.vew.sa;
    return a->buf[k] >= 0 && a->buf[k] == b->buf[kk] && a->add[k] == b->add[kk] &&
           (k ? a->op.vew.b_tensor : a->op.vew.a_tensor) == UINT32_MAX &&
           (kk ? b->op.vew.b_tensor : b->op.vew.a_tensor) == UINT32_MAX &&
           !memcmp(a->op.vew.dims, b->op.vew.dims, sizeof a->op.vew.dims) &&
           !memcmp(sa, sb, 4 * sizeof *sa);
}

/* y = x + x * s, written by the graph as a Mul whose only reader is an
 * Add of the same x (squeeze-excite in the PaddleOCR networks), becomes
 * one NIB_VBIN_MULADD op: the same two roundings per element, one pass
 * over memory instead of two and no buffer for the product. The Mul's x
 * becomes its first operand (a * b is b * a, bit for bit), dense as the
 * flat loops want it. */
static void fold_scale_adds(struct vision_plan *p, const struct buf_use *u, uint8_t *gone)
{
    for (uint32_t j = 0; j < p->n_ops; j++) {
        struct vp_op *add = &p->ops[j];
        if (add->op.code != NIB_VOP_BINARY || add->op.vew.fn != NIB_VBIN_ADD || add->op.vew.qout)
            continue;
        for (int k = 0; k < 2; k++) {
            const int32_t m = add->buf[k], i = m >= 0 ? u->writer[m] : -1;
            struct vp_op *mul = i >= 0 && i < (int32_t)j && !gone[i] ? &p->ops[i] : NULL;
            if (!mul || mul->op.code != NIB_VOP_BINARY || mul->op.vew.fn != NIB_VBIN_MUL ||
                mul->op.vew.qout || u->readers[m] != 1 || add->add[k] || mul->add[2] ||
                (k ? add->op.vew.b_tensor : add->op.vew.a_tensor) != UINT32_MAX ||
                memcmp(mul->op.vew.dims, add->op.vew.dims, sizeof mul->op.vew.dims) ||
                !nib_vew_dense(add->op.vew.dims, k ? add->op.vew.sb : add->op.vew.sa))
                continue;
            int kk = same_operand(mul, 0, add, 1 - k)   ? 0
                     : same_operand(mul, 1, add, 1 - k) ? 1
                                                        : -1;
            if (kk < 0 || !nib_vew_dense(mul->op.vew.dims, kk ? mul->op.vew.sb : mul->op.vew.sa))
                continue;
            struct nib_vew_params *v = &mul->op.vew;
            if (kk) { /* x first */
                uint32_t t[4];
                memcpy(t, v->sa, sizeof t), memcpy(v->sa, v->sb, sizeof t),
                    memcpy(v->sb, t, sizeof t);
                uint32_t tt = v->a_tensor;
                v->a_tensor = v->b_tensor, v->b_tensor = tt;
                int32_t tb = mul->buf[0];
                mul->buf[0] = mul->buf[1], mul->buf[1] = tb;
                uint64_t ta = mul->add[0];
                mul->add[0] = mul->add[1], mul->add[1] = ta;
            }
            v->fn = NIB_VBIN_MULADD;
            mul->buf[2] = add->buf[2];
            mul->add[2] = add->add[2];
            struct vp_buf *d = &p->bufs[add->buf[2]];
            if (d->first > i)
                d->first = i;
            drop_buf(p, m);
            gone[j] = 1;
            break;
        }
    }
}

/* A QUANT of an f32 value becomes the int8 copy of the op that wrote it
 * (qout 2), rounded exactly as the QUANT would have rounded it, so no bit
 * changes and one pass over the value goes:
 *   - a quantized convolution (its activation in the kernel) rounds in its
 *     epilogue: ResNet's block outputs are such values, the next block's
 *     residual (f32) and its first convolution's input (int8);
 *   - an f32 convolution (since format 9) rounds each few rows after its
 *     epilogue, while they are in cache: the depthwise convolutions before
 *     the PaddleOCR networks' quantized 1x1 ones; when nothing else reads
 *     its floats (since format 10) it makes them in the worker's scratch
 *     and writes only the codes (qout 1), and its f32 buffer is gone;
 *   - an element-wise op or copy (since format 10) rounds each chunk it
 *     wrote: the detector's FPN sums and squeeze-excite outputs;
 *   - the copies that assemble a concat read by nothing but the QUANT
 *     write the codes instead of the floats (qout 1), and the f32 concat
 *     is gone: the detector's head input.
 * Ops are renumbered; each buffer's lifetime follows (the int8 copy's
 * starts at its first writer). */
static void fold_quants(struct vision_plan *p, const struct buf_use *u, uint8_t *gone)
{
    for (uint32_t i = 0; i < p->n_ops; i++) {
        const struct vp_op *q = &p->ops[i];
        const int32_t b = q->buf[0];
        if (q->op.code != NIB_VOP_QUANT || q->add[0] != 0 || b < 0)
            continue;
        const uint64_t n = q->op.vquant.n;
        const int32_t j = u->writer[b];
        struct vp_op *c = j >= 0 && j < (int32_t)i ? &p->ops[j] : NULL;
        const struct nib_vconv_params *cp = c ? &c->op.vconv : NULL;
        const uint32_t code = c ? c->op.code : 0;
        const int qconv = code == NIB_VOP_QCONV && !cp->post && cp->act <= NIB_VACT_HSWISH,
                  conv = code == NIB_VOP_CONV, /* direct or transposed */
            ew = code == NIB_VOP_BINARY || code == NIB_VOP_UNARY || code == NIB_VOP_COPY;
        if (conv && !cp->qout && c->add[2] == 0 && c->buf[3] < 0 && u->readers[b] == 1 &&
            (uint64_t)cp->oh * cp->ow * cp->c_out == n) {
            /* nothing reads its floats: only the codes, made in the scratch */
            const uint64_t need = nib_vconv_codes_scratch(cp);
            c->op.vconv.qout = 1;
            c->op.vconv.y_scale = q->op.vquant.scale;
            if (p->wscratch < need)
                p->wscratch = (uint32_t)((need + 63) & ~(uint64_t)63);
            c->buf[2] = q->buf[2];
            c->add[2] = q->add[2];
            struct vp_buf *d = &p->bufs[q->buf[2]];
            if (d->first > j)
                d->first = j;
            drop_buf(p, b);
            gone[i] = 1;
            continue;
        } else if ((qconv || conv) && !cp->qout && c->add[2] == 0 && c->buf[3] < 0 &&
                   (uint64_t)cp->oh * cp->ow * cp->c_out == n) {
            c->op.vconv.qout = 2;
            c->op.vconv.y_scale = q->op.vquant.scale;
        } else if (ew && !c->op.vew.qout && c->add[2] == 0 && c->buf[3] < 0 &&
                   nib_vew_elems(&c->op.vew) == n &&
                   (code != NIB_VOP_COPY || nib_vew_span(c->op.vew.dims, c->op.vew.sd) == n * 4)) {
            c->op.vew.qout = 2;
            c->op.vew.y_scale = q->op.vquant.scale;
        } else if (j == -2 && u->readers[b] == 1 && p->bufs[b].bytes == n * 4) {
            /* every writer a plain copy into 4-byte places, before the QUANT,
             * the parts adding up to the whole */
            uint64_t cover = 0;
            for (uint32_t k = 0; k < i; k++) {
                const struct vp_op *w = &p->ops[k];
                if (w->buf[2] != b)
                    continue;
                if (w->op.code != NIB_VOP_COPY || w->op.vew.qout || w->buf[3] >= 0 ||
                    w->add[2] % 4) {
                    cover = UINT64_MAX;
                    break;
                }
                cover += nib_vew_elems(&w->op.vew);
            }
            if (cover != n)
                continue;
            struct vp_buf *d = &p->bufs[q->buf[2]];
            for (uint32_t k = 0; k < i; k++) {
                struct vp_op *w = &p->ops[k];
                if (w->buf[2] != b)
                    continue;
                w->op.vew.qout = 1;
                w->op.vew.y_scale = q->op.vquant.scale;
                w->buf[2] = q->buf[2];
                w->add[2] = q->add[2] + w->add[2] / 4;
                if (d->first > (int32_t)k)
                    d->first = (int32_t)k;
            }
            drop_buf(p, b);
            gone[i] = 1;
            continue;
        } else {
            continue;
        }
        c->buf[3] = q->buf[2];
        c->add[3] = q->add[2];
        struct vp_buf *d = &p->bufs[q->buf[2]];
        if (d->first > j)
            d->first = j;
        gone[i] = 1;
    }
}

/* One fold over the plan: f marks the ops it makes redundant (having
 * moved what they did onto others), and they are dropped. 0, or -1
 * (memory). */
static int fold(struct vision_plan *p,
                void (*f)(struct vision_plan *, const struct buf_use *, uint8_t *))
{
    struct buf_use u = {0};
    uint8_t *gone = calloc(p->n_ops + 1, 1);
    int rc = !gone || buf_use(p, &u) ? -1 : 0;
    if (!rc) {
        f(p, &u, gone);
        rc = drop_ops(p, gone);
    }
    free(gone);
    buf_use_free(&u);
    return rc;
}

int vp_lower(const struct nx_graph *g, const struct vision_opts *o, const struct vp_quant *q,
             struct vision_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->wscratch_buf = -1;
    struct lower L = {g,
                      p,
                      malloc(g->n_t * sizeof(int32_t) + 1),
                      calloc(g->n_t + 1, 1),
                      err,
                      errlen,
                      q,
                      malloc(g->n_t * sizeof(int32_t) + 1),
                      0.0f,
                      -1,
                      0};
    p->t_buf = malloc(g->n_t * sizeof(int32_t) + 1);
    p->t_done = malloc(g->n_t * sizeof(int32_t) + 1);
    p->n_t = g->n_t;
    int rc = -1;
    if (!L.vbuf || !L.nhwc || !L.qbuf || !p->t_buf || !p->t_done) {
        nib_fail(err, errlen, "out of memory");
        goto out;
    }
    for (uint32_t t = 0; t < g->n_t; t++)
        L.vbuf[t] = L.qbuf[t] = p->t_buf[t] = p->t_done[t] = -1;
    if (lower_inputs(&L, o))
        goto out;
    note_values(&L, g->inputs, g->n_inputs);
    for (uint32_t k = 0; k < g->n_order; k++) {
        const struct nx_node *nd = &g->n[g->order[k]];
        if (lower_node(&L, nd))
            goto out;
        note_values(&L, nd->out, nd->n_out);
    }
    if (lower_outputs(&L))
        goto out;
    if (fold(p, fold_scale_adds) || fold(p, fold_quants)) {
        nib_fail(err, errlen, "out of memory");
        goto out;
    }
    if (p->wscratch) { /* worker 0's private scratch lives in the arena for the whole run */
        p->wscratch_buf = new_buf(&L, p->wscratch);
        if (p->wscratch_buf < 0) {
            nib_fail(err, errlen, "out of memory");
            goto out;
        }
        p->bufs[p->wscratch_buf].first = -1;
        p->bufs[p->wscratch_buf].last = INT32_MAX;
    }
    rc = 0;
out:
    free(L.vbuf);
    free(L.nhwc);
    free(L.qbuf);
    if (rc)
        vp_free(p);
    return rc;
}

void vp_free(struct vision_plan *p)
{
    for (uint32_t i = 0; i < p->n_w; i++)
        free(p->w[i].data);
    free(p->w);
    free(p->ops);
    free(p->bufs);
    free(p->t_buf);
    free(p->t_done);
    memset(p, 0, sizeof *p);
}

int vp_parse_floats(const char *arg, float *out, uint32_t max, uint32_t *n, char *err,
                    size_t errlen)
{
    *n = 0;
    for (const char *s = arg;;) {
        char *end;
        float v = strtof(s, &end);
        if (end == s || !isfinite(v) || *n == max)
            return nib_fail(err, errlen, "'%s': expected up to %u numbers separated by commas", arg,
                            max);
        out[(*n)++] = v;
        if (*end == 0)
            return 0;
        if (*end != ',')
            return nib_fail(err, errlen, "'%s': expected numbers separated by commas", arg);
        s = end + 1;
    }
}
