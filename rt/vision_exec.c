/* The vision opcodes of a plan (blob_format.h NIB_VOP_*): each op split
 * among workers by a fixed rule (output rows of a convolution, pooling,
 * resize and input conversion; blocks of elements of element-wise ops and
 * copies; blocks of output columns of a matmul; rows of a softmax), every
 * output element computed by the same instructions whoever computes it, so
 * the bits are the same for any worker count. The convolution, pooling and
 * resize kernels of every ISA give the same bits (kernels/conv.h); the rest
 * is one scalar implementation. */
#include "rt/vision_exec.h"

/* The element-wise loops here are written to vectorise (each element one
 * IEEE operation, no reductions, so vectors give the same bits); GCC's
 * -O2 cost model ("very cheap") vectorises only loops that need neither
 * an alias check nor a remainder loop, which none of these is. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#include <math.h>
#include <string.h>

#include "kernels/common/conv-epi.h"
#include "kernels/common/isa.h"
#include "kernels/common/f32-math.h"
#if NIB_HAVE_AVX2
#include "kernels/common/conv-epi-avx2.h"
#include "kernels/common/f32-avx2.h"
#endif
#include "kernels/conv.h"
#include "kernels/qkernels.h"
#include "model_blob/blob_validate_vision.h"
#include "rt/vision_convt.h"

/* The convolution kernels of the ISA whose matmul kernels the run uses. */
static const struct nib_conv_kernels *conv_kernels(const struct nib_qkernels *qk)
{
    static const uint32_t isas[] = {NIB_ISA_AVX2, NIB_ISA_NEON_DOT};
    for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
        if (qk && qk == nib_qkernels_get(isas[i]) && nib_conv_kernels_get(isas[i]))
            return nib_conv_kernels_get(isas[i]);
    return nib_conv_kernels_get(NIB_ISA_SCALAR);
}

static float *f32_at(uint8_t *mem, uint64_t off)
{
    return (float *)(void *)(mem + off);
}

uint32_t nib_vision_units(const struct nib_op *op, uint32_t *block)
{
    *block = 1;
    switch (op->code) {
    case NIB_VOP_INPUT: return op->vrows.h;
    case NIB_VOP_CONV:
    case NIB_VOP_QCONV:
    case NIB_VOP_POOL: return op->vconv.oh;
    case NIB_VOP_QUANT: *block = 64; return (uint32_t)op->vquant.n; /* <= 2^30: checked */
    case NIB_VOP_RESIZE: return op->vresize.oh;
    case NIB_VOP_SOFTMAX: return op->vrows.rows;
    case NIB_VOP_LAYERNORM: return op->vnorm.rows;
    case NIB_VOP_BMATMUL: return op->vbmm.nb0 * op->vbmm.nb1 * op->vbmm.m; /* < 2^28: checked */
    case NIB_VOP_MATMUL: *block = 16; return op->vmatmul.n;
    case NIB_VOP_BINARY:
    case NIB_VOP_UNARY:
    case NIB_VOP_COPY: *block = 64; return (uint32_t)nib_vew_elems(&op->vew); /* < 2^31: checked */
    default: *block = UINT32_MAX; return 1;
    }
}

/* Inlined where act is a constant, so each of vact_map's loops is one
 * straight expression the compiler vectorises. */
static inline __attribute__((always_inline)) float vact_one(uint32_t act, float p0, float p1,
                                                            float v)
{
    switch (act) {
    case NIB_VACT_RELU: return v > 0.0f ? v : 0.0f;
    case NIB_VACT_CLIP: v = v > p0 ? v : p0; return v < p1 ? v : p1;
    case NIB_VACT_HSIGMOID: {
        float t = __builtin_fmaf(p0, v, p1);
        t = t > 0.0f ? t : 0.0f;
        return t < 1.0f ? t : 1.0f;
    }
    case NIB_VACT_HSWISH: {
        float t = __builtin_fmaf(p0, v, p1);
        t = t > 0.0f ? t : 0.0f;
        return v * (t < 1.0f ? t : 1.0f);
    }
    case NIB_VACT_SIGMOID: return 1.0f / (1.0f + nib_expf(-v));
    case NIB_VACT_SQRT: return sqrtf(v);
    default: return v;
    }
}

float nib_vact_apply(uint32_t act, float p0, float p1, float v)
{
    return vact_one(act, p0, p1, v);
}

/* y[i] = sigmoid(x[i]) for i < n (y may be x): the exp of a lane at a
 * time did not vectorise, and was most of the detector's last op;
 * nib_exp8_avx2 repeats nib_expf operation for operation, so the bits
 * stay (elsewhere the scalar loop). */
static void sigmoid_map(const float *x, float *y, uint64_t n)
{
    uint64_t i = 0;
#if NIB_HAVE_AVX2
    const __m256 one = _mm256_set1_ps(1.0f), neg = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 e = nib_exp8_avx2(_mm256_xor_ps(_mm256_loadu_ps(x + i), neg));
        _mm256_storeu_ps(y + i, _mm256_div_ps(one, _mm256_add_ps(one, e)));
    }
#endif
    for (; i < n; i++)
        y[i] = vact_one(NIB_VACT_SIGMOID, 0.0f, 0.0f, x[i]);
}

/* y[i] = act(x[i]) for i < n (y may be x): the switch outside the loop. */
static void vact_map(uint32_t act, float p0, float p1, const float *x, float *y, uint64_t n)
{
    if (act == NIB_VACT_SIGMOID) {
        sigmoid_map(x, y, n);
        return;
    }
#define VACT_LOOP(A)                                                                               \
    for (uint64_t i = 0; i < n; i++)                                                               \
        y[i] = vact_one(A, p0, p1, x[i]);                                                          \
    break;
    switch (act) {
    case NIB_VACT_RELU: VACT_LOOP(NIB_VACT_RELU)
    case NIB_VACT_CLIP: VACT_LOOP(NIB_VACT_CLIP)
    case NIB_VACT_HSIGMOID: VACT_LOOP(NIB_VACT_HSIGMOID)
    case NIB_VACT_HSWISH: VACT_LOOP(NIB_VACT_HSWISH)
    case NIB_VACT_SQRT: VACT_LOOP(NIB_VACT_SQRT)
    default: VACT_LOOP(NIB_VACT_NONE)
    }
#undef VACT_LOOP
}

static float binary(uint32_t fn, float a, float b)
{
    switch (fn) {
    case NIB_VBIN_ADD: return a + b;
    case NIB_VBIN_SUB: return a - b;
    case NIB_VBIN_MUL: return a * b;
    case NIB_VBIN_DIV: return a / b;
    case NIB_VBIN_MULADD: return a + a * b; /* two roundings: -ffp-contract=off */
    default: return b == 2.0f ? a * a : powf(a, b);
    }
}

/* The four indices of flat element i of dims. */
static void unflatten(const uint32_t *dims, uint64_t i, uint32_t *ix)
{
    for (int d = 3; d >= 0; d--) {
        ix[d] = (uint32_t)(i % dims[d]);
        i /= dims[d];
    }
}

static uint64_t offset_of(const uint32_t *ix, const uint32_t *s)
{
    return (uint64_t)ix[0] * s[0] + (uint64_t)ix[1] * s[1] + (uint64_t)ix[2] * s[2] +
           (uint64_t)ix[3] * s[3];
}

static void next_index(const uint32_t *dims, uint32_t *ix)
{
    for (int d = 3; d >= 0; d--) {
        if (++ix[d] < dims[d])
            return;
        ix[d] = 0;
    }
}

static const float *operand(const struct nib_blob_view *v, uint8_t *mem, uint64_t off,
                            uint32_t tensor)
{
    return tensor == UINT32_MAX ? f32_at(mem, off) : nib_tensor_f32(v, tensor);
}

/* Element-wise ops whose operands are dense (or, for b, one value per
 * element of the last dim: a per-channel constant of an NHWC image), in
 * flat loops the compiler vectorises: each element gets the same IEEE
 * operations as in the strided loops of ew_f32 (muladd's two included),
 * so the bits are the same.
 * 0 when the op is not of that form. */
static int exec_ew_dense(const struct nib_vew_params *p, uint32_t code, const float *a,
                         const float *bb, float *y, uint32_t b, uint32_t e)
{
    if (!nib_vew_dense(p->dims, p->sa))
        return 0;
    if (code == NIB_VOP_UNARY) {
        vact_map(p->fn, p->p0, p->p1, a + b, y + b, e - b);
        return 1;
    }
    const uint32_t n = p->dims[3];
    const int b_dense = nib_vew_dense(p->dims, p->sb);
    const int row = p->sb[0] == 0 && p->sb[1] == 0 && p->sb[2] == 0 && (p->sb[3] == 1 || n == 1);
    if (code != NIB_VOP_BINARY || p->fn == NIB_VBIN_POW || (!b_dense && !row))
        return 0;
    if (b_dense) {
        switch (p->fn) {
        case NIB_VBIN_ADD:
            for (uint32_t i = b; i < e; i++)
                y[i] = a[i] + bb[i];
            break;
        case NIB_VBIN_SUB:
            for (uint32_t i = b; i < e; i++)
                y[i] = a[i] - bb[i];
            break;
        case NIB_VBIN_MUL:
            for (uint32_t i = b; i < e; i++)
                y[i] = a[i] * bb[i];
            break;
        case NIB_VBIN_MULADD:
            for (uint32_t i = b; i < e; i++)
                y[i] = a[i] + a[i] * bb[i];
            break;
        default:
            for (uint32_t i = b; i < e; i++)
                y[i] = a[i] / bb[i];
        }
        return 1;
    }
    /* b one value per channel (or one value): runs of up to n elements
     * against bb[c..], each a loop the compiler vectorises */
#define EW_ROWS(F)                                                                                 \
    for (uint32_t i = b, c = n == 1 ? 0 : b % n; i < e; c = 0) {                                   \
        const uint32_t m = n == 1 ? e - i : (e - i < n - c ? e - i : n - c);                       \
        const float *bc = bb + c, *ai = a + i;                                                     \
        float *yi = y + i;                                                                         \
        if (n == 1)                                                                                \
            for (size_t k = 0; k < m; k++)                                                         \
                yi[k] = F(ai[k], bc[0]);                                                           \
        else                                                                                       \
            for (size_t k = 0; k < m; k++)                                                         \
                yi[k] = F(ai[k], bc[k]);                                                           \
        i += m;                                                                                    \
    }
#define EW_ADD(x, s) ((x) + (s))
#define EW_SUB(x, s) ((x) - (s))
#define EW_MUL(x, s) ((x) * (s))
#define EW_DIV(x, s) ((x) / (s))
#define EW_MULADD(x, s) ((x) + (x) * (s))
    switch (p->fn) {
    case NIB_VBIN_ADD: EW_ROWS(EW_ADD) break;
    case NIB_VBIN_SUB: EW_ROWS(EW_SUB) break;
    case NIB_VBIN_MUL: EW_ROWS(EW_MUL) break;
    case NIB_VBIN_MULADD: EW_ROWS(EW_MULADD) break;
    default: EW_ROWS(EW_DIV)
    }
#undef EW_ADD
#undef EW_SUB
#undef EW_MUL
#undef EW_DIV
#undef EW_MULADD
#undef EW_ROWS
    return 1;
}

/* n f32 values to int8 codes, as the convolution's epilogue requantizes
 * (8 at a time as the AVX2 epilogue does, the same per-lane operations:
 * the compiler's own vectorisation of the scalar loop narrowed to int8
 * with masks and was three times slower). */
static void quant_run(const float *x, int8_t *q, float scale, uint64_t n)
{
    const float inv = 1.0f / scale;
    uint64_t i = 0;
#if NIB_HAVE_AVX2
    const __m256 iv = _mm256_set1_ps(inv);
    for (; i + 8 <= n; i += 8)
        nib_requant8_avx2(_mm256_loadu_ps(x + i), iv, q + i);
#endif
    for (; i < n; i++)
        q[i] = nib_requant_s8(x[i], inv);
}

/* Binary and unary ops over flat output elements [b, e), in f32. */
static void ew_f32(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op, uint32_t b,
                   uint32_t e)
{
    const struct nib_vew_params *p = &op->vew;
    const float *a = operand(v, mem, op->src0, p->a_tensor);
    const float *bb = op->code == NIB_VOP_BINARY ? operand(v, mem, op->src1, p->b_tensor) : NULL;
    float *y = f32_at(mem, op->dst);
    if (exec_ew_dense(p, op->code, a, bb, y, b, e))
        return;
    /* strided: runs along the last dim, each run's offsets computed once */
    const uint64_t sa = p->sa[3], sb = p->sb[3];
    uint32_t ix[4];
    unflatten(p->dims, b, ix);
    for (uint32_t i = b; i < e;) {
        const uint32_t m = p->dims[3] - ix[3] < e - i ? p->dims[3] - ix[3] : e - i;
        const float *ar = a + offset_of(ix, p->sa);
        if (op->code == NIB_VOP_BINARY) {
            const float *br = bb + offset_of(ix, p->sb);
            for (uint32_t k = 0; k < m; k++)
                y[i + k] = binary(p->fn, ar[k * sa], br[k * sb]);
        } else {
            for (uint32_t k = 0; k < m; k++)
                y[i + k] = nib_vact_apply(p->fn, p->p0, p->p1, ar[k * sa]);
        }
        i += m;
        ix[3] += m - 1; /* the last element of the run, then on to the next run */
        next_index(p->dims, ix);
    }
}

/* A copy over flat elements [b, e): the floats at dst (qout 0, 2) and
 * their codes at the same element offsets (qout 2 at aux, qout 1 at dst
 * instead of the floats), rounded from the source: a copy changes no
 * value, so they are the codes a QUANT of the destination would give. */
static void exec_copy(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op,
                      uint32_t b, uint32_t e)
{
    const struct nib_vew_params *p = &op->vew;
    const float *a = operand(v, mem, op->src0, p->a_tensor);
    float *y = p->qout == 1 ? NULL : f32_at(mem, op->dst);
    int8_t *q = p->qout == 1   ? (int8_t *)(mem + op->dst)
                : p->qout == 2 ? (int8_t *)(mem + op->aux)
                               : NULL;
    if (nib_vew_dense(p->dims, p->sa) && nib_vew_dense(p->dims, p->sd)) {
        if (y)
            memcpy(y + b, a + b, (size_t)(e - b) * 4);
        if (q)
            quant_run(a + b, q + b, p->y_scale, e - b);
        return;
    }
    const uint64_t sa = p->sa[3], sd = p->sd[3];
    const float inv = q ? 1.0f / p->y_scale : 0.0f;
    uint32_t ix[4];
    unflatten(p->dims, b, ix);
    for (uint32_t i = b; i < e;) {
        const uint32_t m = p->dims[3] - ix[3] < e - i ? p->dims[3] - ix[3] : e - i;
        const float *ar = a + offset_of(ix, p->sa);
        const uint64_t o = offset_of(ix, p->sd);
        if (y && sa == 1 && sd == 1)
            memcpy(y + o, ar, (size_t)m * 4);
        else if (y)
            for (uint32_t k = 0; k < m; k++)
                y[o + k * sd] = ar[k * sa];
        if (q && sa == 1 && sd == 1)
            quant_run(ar, q + o, p->y_scale, m);
        else if (q)
            for (uint32_t k = 0; k < m; k++)
                q[o + k * sd] = nib_requant_s8(ar[k * sa], inv);
        i += m;
        ix[3] += m - 1;
        next_index(p->dims, ix);
    }
}

/* Element-wise ops and copies over flat output elements [b, e). With an
 * int8 copy (qout 2), a chunk at a time, so the quantizer reads values
 * still in cache (chunks split any way give the same bits). */
static void exec_ew(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op,
                    uint32_t b, uint32_t e)
{
    const struct nib_vew_params *p = &op->vew;
    if (op->code == NIB_VOP_COPY) {
        exec_copy(v, mem, op, b, e);
        return;
    }
    if (!p->qout) {
        ew_f32(v, mem, op, b, e);
        return;
    }
    for (uint32_t r = b; r < e; r += NIB_VCONV_CHUNK_FLOATS) {
        const uint32_t re = e - r < NIB_VCONV_CHUNK_FLOATS ? e : r + NIB_VCONV_CHUNK_FLOATS;
        ew_f32(v, mem, op, r, re);
        quant_run(f32_at(mem, op->dst) + r, (int8_t *)(mem + op->aux) + r, p->y_scale, re - r);
    }
}

static void conv_shape(const struct nib_vconv_params *p, struct nib_conv_shape *s)
{
    *s = (struct nib_conv_shape){p->h,        p->w,       p->c_in,     p->oh,    p->ow,
                                 p->c_out,    p->groups,  p->kh,       p->kw,    p->stride_h,
                                 p->stride_w, p->pad_top, p->pad_left, p->dil_h, p->dil_w};
}

/* The epilogue of output rows [b, e) the kernel left without one: the
 * activation unless the kernel applied it (or there is none), then the
 * post affine. */
static void conv_epilogue(const struct nib_vconv_params *p, float *y, int in_kernel, uint32_t b,
                          uint32_t e)
{
    const uint64_t row = (uint64_t)p->ow * p->c_out;
    if (!in_kernel && p->act != NIB_VACT_NONE)
        vact_map(p->act, p->p0, p->p1, y + b * row, y + b * row, (e - b) * row);
    if (in_kernel || p->post) { /* loops the compiler vectorises */
        const float mul = p->post_mul, add = p->post_add;
        for (uint64_t i = b * row; i < e * row; i++)
            y[i] = y[i] * mul + add; /* two roundings: -ffp-contract=off */
    }
}

static void exec_convt(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op,
                       float *y, uint32_t b, uint32_t e)
{
    const struct nib_vconv_params *p = &op->vconv;
    nib_vision_convt(p, f32_at(mem, op->src0), nib_tensor_f32(v, op->tensor),
                     p->bias == UINT32_MAX ? NULL : nib_tensor_f32(v, p->bias), y, b, e);
    conv_epilogue(p, y, 0, b, e);
}

/* Output rows [b, e) into y (the whole output's base: row r at y + r x
 * ow x c_out). */
static void conv_rows(const struct nib_conv_kernels *ck, const struct nib_blob_view *v,
                      uint8_t *mem, const struct nib_op *op, float *y, uint32_t b, uint32_t e)
{
    const struct nib_vconv_params *p = &op->vconv;
    if (p->mode == 1) {
        exec_convt(v, mem, op, y, b, e);
        return;
    }
    struct nib_conv_shape s;
    conv_shape(p, &s);
    const int in_kernel = p->act <= NIB_VACT_HSWISH;
    struct nib_conv_epi epi = {p->bias == UINT32_MAX ? NULL : nib_tensor_f32(v, p->bias),
                               in_kernel ? p->act : NIB_ACT_NONE,
                               p->p0,
                               p->p1,
                               p->res ? f32_at(mem, op->src1) : NULL,
                               p->res == 1};
    (p->depthwise ? ck->dwconv_f32 : ck->conv_f32)(&s, f32_at(mem, op->src0),
                                                   nib_tensor_f32(v, op->tensor), &epi, y, b, e);
    if (!in_kernel || p->post)
        conv_epilogue(p, y, in_kernel, b, e);
}

/* A convolution over output rows [b, e). With an int8 output or
 * transposed (its activation a pass of its own), a few rows at a time, so
 * the quantizer and the activation read values still in cache (the rows
 * split any way give the same bits). With qout 1 the rows are made in the
 * worker's private scratch (the validator saw it hold a chunk) and only
 * their codes reach dst: y is set so that the chunk's first row lands at
 * the scratch's start (integer arithmetic: the base itself lies outside
 * any object, only rows [r, re) are touched). */
static void exec_conv(const struct nib_conv_kernels *ck, const struct nib_blob_view *v,
                      uint8_t *mem, uint8_t *wscratch, const struct nib_op *op, uint32_t b,
                      uint32_t e)
{
    const struct nib_vconv_params *p = &op->vconv;
    float *y = f32_at(mem, op->dst);
    if (!p->qout && p->mode != 1) {
        conv_rows(ck, v, mem, op, y, b, e);
        return;
    }
    const uint64_t row = (uint64_t)p->ow * p->c_out;
    const uint32_t step =
        row >= NIB_VCONV_CHUNK_FLOATS ? 1 : (uint32_t)(NIB_VCONV_CHUNK_FLOATS / row);
    int8_t *q = (int8_t *)(mem + (p->qout == 1 ? op->dst : op->aux));
    for (uint32_t r = b; r < e; r += step) {
        const uint32_t re = e - r < step ? e : r + step;
        if (p->qout == 1)
            y = (float *)(uintptr_t)((uintptr_t)wscratch - (uintptr_t)(r * row * 4));
        conv_rows(ck, v, mem, op, y, r, re);
        if (p->qout)
            quant_run(y + r * row, q + r * row, p->y_scale, (re - r) * row);
    }
}

/* Quantized convolution over output rows [b, e), in the worker's private
 * scratch. f32 out: the epilogue rules of a plain convolution; int8 out:
 * the activation in the kernel (the validator allows no other), no post. */
static void exec_qconv(const struct nib_conv_kernels *ck, const struct nib_blob_view *v,
                       uint8_t *mem, uint8_t *wscratch, const struct nib_op *op, uint32_t b,
                       uint32_t e)
{
    const struct nib_vconv_params *p = &op->vconv;
    const struct nib_tensor_rec *tr = &v->tensors[op->tensor];
    struct nib_conv_shape s;
    conv_shape(p, &s);
    const int in_kernel = p->qout || p->act <= NIB_VACT_HSWISH;
    const struct nib_qconv_weights wt = {.dtype = tr->dtype, .packed = v->weights + tr->offset};
    const struct nib_qconv_epi epi = {.bias =
                                          p->bias == UINT32_MAX ? NULL : nib_tensor_f32(v, p->bias),
                                      .act = in_kernel ? p->act : NIB_ACT_NONE,
                                      .p0 = p->p0,
                                      .p1 = p->p1,
                                      .res_f32 = p->res ? f32_at(mem, op->src1) : NULL,
                                      .res_first = p->res == 1,
                                      .y_scale = p->y_scale,
                                      .y_q = p->qout == 1   ? (int8_t *)(mem + op->dst)
                                             : p->qout == 2 ? (int8_t *)(mem + op->aux)
                                                            : NULL,
                                      .y_f32 = p->qout == 1 ? NULL : f32_at(mem, op->dst)};
    ck->conv_s8(&s, (const int8_t *)(mem + op->src0), p->x_scale, &wt, &epi, wscratch, b, e);
    if (!p->qout && (!in_kernel || p->post))
        conv_epilogue(p, f32_at(mem, op->dst), in_kernel, b, e);
}

/* f32 elements [b, e) to int8 codes. */
static void exec_quant(uint8_t *mem, const struct nib_op *op, uint32_t b, uint32_t e)
{
    quant_run(f32_at(mem, op->src0) + b, (int8_t *)(mem + op->dst) + b, op->vquant.scale, e - b);
}

/* Matmul by q4c/q8c weights, output columns [b, e): every worker
 * quantizes all m rows into its own scratch (the same bits on each), then
 * its columns, the bias as the kernel's add. */
static void exec_qmatmul(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                         uint8_t *wscratch, const struct nib_op *op, uint32_t b, uint32_t e)
{
    const struct nib_vmatmul_params *p = &op->vmatmul;
    const struct nib_tensor_rec *tr = &v->tensors[op->tensor];
    struct nib_qlayout l;
    struct nib_qact a;
    nib_qlayout_get(&l, tr->dtype, tr->group, tr->rows, tr->cols);
    nib_qact_init(&a, wscratch, p->m, p->k, 0);
    const float *x = f32_at(mem, op->src0);
    for (uint32_t t = 0; t < p->m; t++)
        qk->qact(&a, t, x + (uint64_t)t * p->k);
    qk->gemm[tr->dtype](&l, v->weights + tr->offset, &a, p->m, f32_at(mem, op->dst), p->n,
                        p->bias == UINT32_MAX ? NULL : nib_tensor_f32(v, p->bias), 0, b, e);
}

static void exec_input(uint8_t *mem, const struct nib_blob_view *v, const struct nib_op *op,
                       uint32_t b, uint32_t e)
{
    const struct nib_vrows_params *p = &op->vrows;
    const float *sc = nib_tensor_f32(v, op->tensor), *sh = sc + p->c;
    const uint64_t plane = (uint64_t)p->h * p->w;
    float *y = f32_at(mem, op->dst);
    /* one channel's row at a time: each plane is read in order (the
     * channel-innermost order read three planes and tested u8 per value) */
    for (uint64_t r = b; r < e; r++)
        for (uint64_t c = 0; c < p->c; c++) {
            const uint64_t src = c * plane + r * p->w;
            const float a = sc[c], d = sh[c];
            float *yr = y + r * p->w * p->c + c;
            if (p->u8) {
                const uint8_t *xr = mem + op->src0 + src;
                for (uint64_t x = 0; x < p->w; x++)
                    yr[x * p->c] = __builtin_fmaf((float)xr[x], a, d);
            } else {
                const float *xr = f32_at(mem, op->src0) + src;
                for (uint64_t x = 0; x < p->w; x++)
                    yr[x * p->c] = __builtin_fmaf(xr[x], a, d);
            }
        }
}

/* Output columns in blocks of MM_NB: each output is still one fma chain
 * over k in order (the same bits), but MM_NB independent chains run side
 * by side (one chain alone waits on the fma's latency), and a block's
 * weight rows stay in cache while every row of x passes over them. */
#define MM_NB 8

#if NIB_HAVE_AVX2
/* A whole block on AVX2, the columns in the lanes: K in chunks of MM_KC
 * whose weights, transposed so that the block's 8 weights at one k are
 * one vector, fit on the stack (8 KiB); MM_MR rows of x at a time, so
 * MM_MR chains share each weight vector and none waits on another. */
#define MM_KC 256
#define MM_MR 8

/* Lane j of y's row r (8 floats at y + r * n) is column j's chain: the
 * same fmas as the scalar loop (fmaf(x[r][k], w[j][k], acc), k ascending
 * from +0), so the same bits. Between chunks a row's partial sums wait in
 * y, an exact store and reload (the validator keeps y apart from x). */
static void matmul_block_avx2(const float *x, const float *wb, float *y, uint64_t m, uint64_t n,
                              uint64_t K)
{
    float wt[MM_KC * MM_NB] __attribute__((aligned(32)));
    for (uint64_t k0 = 0; k0 < K; k0 += MM_KC) {
        const uint64_t kc = K - k0 < MM_KC ? K - k0 : MM_KC;
        for (uint64_t j = 0; j < MM_NB; j++)
            for (uint64_t k = 0; k < kc; k++)
                wt[k * MM_NB + j] = wb[j * K + k0 + k];
        uint64_t r = 0;
        for (; r + MM_MR <= m; r += MM_MR) {
            const float *xr = x + r * K + k0;
            __m256 acc[MM_MR];
#pragma GCC unroll 8
            for (int i = 0; i < MM_MR; i++)
                acc[i] = k0 ? _mm256_loadu_ps(y + (r + i) * n) : _mm256_setzero_ps();
            for (uint64_t k = 0; k < kc; k++) {
                const __m256 wk = _mm256_load_ps(wt + k * MM_NB);
#pragma GCC unroll 8
                for (int i = 0; i < MM_MR; i++)
                    acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(xr + i * K + k), wk, acc[i]);
            }
#pragma GCC unroll 8
            for (int i = 0; i < MM_MR; i++)
                _mm256_storeu_ps(y + (r + i) * n, acc[i]);
        }
        for (; r < m; r++) {
            const float *xr = x + r * K + k0;
            __m256 acc = k0 ? _mm256_loadu_ps(y + r * n) : _mm256_setzero_ps();
            for (uint64_t k = 0; k < kc; k++)
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(xr + k), _mm256_load_ps(wt + k * MM_NB),
                                      acc);
            _mm256_storeu_ps(y + r * n, acc);
        }
    }
}
#endif

static void exec_matmul(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op,
                        uint32_t b, uint32_t e)
{
    const struct nib_vmatmul_params *p = &op->vmatmul;
    const float *x = f32_at(mem, op->src0), *w = nib_tensor_f32(v, op->tensor);
    const float *bias = p->bias == UINT32_MAX ? NULL : nib_tensor_f32(v, p->bias);
    float *y = f32_at(mem, op->dst);
    const uint64_t K = p->k;
    for (uint64_t n0 = b; n0 < e; n0 += MM_NB) {
        const uint64_t nb = e - n0 < MM_NB ? e - n0 : MM_NB;
        const float *wb = w + n0 * K;
#if NIB_HAVE_AVX2
        if (nb == MM_NB) {
            matmul_block_avx2(x, wb, y + n0, p->m, p->n, K);
            if (bias)
                for (uint64_t m = 0; m < p->m; m++)
                    for (uint64_t j = 0; j < MM_NB; j++)
                        y[m * p->n + n0 + j] += bias[n0 + j];
            continue;
        }
#endif
        for (uint64_t m = 0; m < p->m; m++) {
            const float *xr = x + m * K;
            float acc[MM_NB] = {0.0f};
            if (nb == MM_NB) { /* a constant trip count: acc stays in registers */
                for (uint64_t k = 0; k < K; k++)
                    for (uint64_t j = 0; j < MM_NB; j++)
                        acc[j] = __builtin_fmaf(xr[k], wb[j * K + k], acc[j]);
            } else {
                for (uint64_t k = 0; k < K; k++)
                    for (uint64_t j = 0; j < nb; j++)
                        acc[j] = __builtin_fmaf(xr[k], wb[j * K + k], acc[j]);
            }
            for (uint64_t j = 0; j < nb; j++)
                y[m * p->n + n0 + j] = bias ? acc[j] + bias[n0 + j] : acc[j];
        }
    }
}

/* A softmax row's first steps: y[i] = exp(x[i] - max) (x may be y). The
 * max is the same value in any order (a NaN never wins; of a +0 and a -0
 * either may, and x - max and its exp are the same for both), so it is
 * taken 8 lanes at a time. */
static void softmax_exps(const float *x, float *y, uint64_t n)
{
    float mx = -INFINITY;
    uint64_t i = 0;
#if NIB_HAVE_AVX2 /* nib_exp8_avx2 is nib_expf operation for operation */
    if (n >= 8) {
        __m256 vmax = _mm256_set1_ps(-INFINITY);
        for (; i + 8 <= n; i += 8)
            vmax = _mm256_max_ps(_mm256_loadu_ps(x + i), vmax); /* a NaN x: vmax */
        float lanes[8];
        _mm256_storeu_ps(lanes, vmax);
        for (int j = 0; j < 8; j++)
            mx = lanes[j] > mx ? lanes[j] : mx;
    }
#endif
    for (; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
    i = 0;
#if NIB_HAVE_AVX2
    const __m256 vm = _mm256_set1_ps(mx);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, nib_exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
#endif
    for (; i < n; i++)
        y[i] = nib_expf(x[i] - mx);
}

#if NIB_HAVE_AVX2
/* sum[j] = the sum of row y[j]'s n values, in order, for 8 rows at once:
 * each 8 x 8 tile transposed so that lane j of step k holds y[j][i + k],
 * and added step after step, so every lane adds its row in order (one
 * row's sum alone waits on each add's latency). */
static void softmax_sums8_avx2(float *const *y, uint64_t n, float *sum)
{
    __m256 acc = _mm256_setzero_ps();
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 r[8], t[8];
        for (int j = 0; j < 8; j++)
            r[j] = _mm256_loadu_ps(y[j] + i);
        for (int j = 0; j < 8; j += 2) {
            t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
            t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
        }
        for (int j = 0; j < 8; j += 4) { /* rows j..j+3, steps {0,4} {1,5} {2,6} {3,7} */
            r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
            r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xee);
            r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
            r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xee);
        }
        for (int k = 0; k < 4; k++) { /* step k from the low halves, k + 4 the high */
            t[k] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x20);
            t[k + 4] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x31);
        }
        for (int k = 0; k < 8; k++)
            acc = _mm256_add_ps(acc, t[k]);
    }
    _mm256_storeu_ps(sum, acc);
    for (int j = 0; j < 8; j++)
        for (uint64_t k = i; k < n; k++)
            sum[j] += y[j][k];
}
#endif

/* Softmax of rows [b, e): the exps, one sum per row in order, then each
 * value divided by it. */
static void exec_softmax(uint8_t *mem, const struct nib_op *op, uint32_t b, uint32_t e)
{
    const uint64_t n = op->vrows.n;
    const float *x0 = f32_at(mem, op->src0);
    float *y0 = f32_at(mem, op->dst);
    uint64_t r = b;
#if NIB_HAVE_AVX2
    for (; r + 8 <= e; r += 8) {
        float *y[8], sum[8];
        for (int j = 0; j < 8; j++) {
            y[j] = y0 + (r + j) * n;
            softmax_exps(x0 + (r + j) * n, y[j], n);
        }
        softmax_sums8_avx2(y, n, sum);
        for (int j = 0; j < 8; j++)
            for (uint64_t i = 0; i < n; i++)
                y[j][i] /= sum[j];
    }
#endif
    for (; r < e; r++) {
        float *y = y0 + r * n, sum = 0.0f;
        softmax_exps(x0 + r * n, y, n);
        for (uint64_t i = 0; i < n; i++) /* one sum, in order */
            sum += y[i];
        for (uint64_t i = 0; i < n; i++)
            y[i] /= sum;
    }
}

/* Layer norm of rows [b, e): the mean, then the mean of squared
 * deviations, sequential f32 sums. */
static void exec_layernorm(const struct nib_blob_view *v, uint8_t *mem, const struct nib_op *op,
                           uint32_t b, uint32_t e)
{
    const struct nib_vnorm_params *p = &op->vnorm;
    const uint64_t n = p->n;
    const float *ga = p->gamma == UINT32_MAX ? NULL : nib_tensor_f32(v, p->gamma);
    const float *be = p->beta == UINT32_MAX ? NULL : nib_tensor_f32(v, p->beta);
    for (uint64_t r = b; r < e; r++) {
        const float *x = f32_at(mem, op->src0) + r * n;
        float *y = f32_at(mem, op->dst) + r * n;
        float sum = 0.0f, var = 0.0f;
        for (uint64_t i = 0; i < n; i++)
            sum += x[i];
        const float mean = sum / (float)n;
        for (uint64_t i = 0; i < n; i++) {
            float d = x[i] - mean;
            var = __builtin_fmaf(d, d, var);
        }
        const float inv = 1.0f / sqrtf(var / (float)n + p->eps);
        for (uint64_t i = 0; i < n; i++) {
            float t = (x[i] - mean) * inv;
            t = ga ? t * ga[i] : t;
            y[i] = be ? t + be[i] : t;
        }
    }
}

/* Batched matmul, output rows [b, e) of nb0 x nb1 x m; the columns of a
 * row MM_NB at a time, each its own fma chain over k (as exec_matmul). */
static void exec_bmatmul(uint8_t *mem, const struct nib_op *op, uint32_t b, uint32_t e)
{
    const struct nib_vbmm_params *p = &op->vbmm;
    const float *A = f32_at(mem, op->src0), *B = f32_at(mem, op->src1);
    float *y = f32_at(mem, op->dst);
    for (uint64_t r = b; r < e; r++) {
        const uint64_t i = r % p->m, bb = r / p->m, b1 = bb % p->nb1, b0 = bb / p->nb1;
        const float *ar = A + b0 * p->sa[0] + b1 * p->sa[1] + i * p->sa[2];
        const float *bm = B + b0 * p->sb[0] + b1 * p->sb[1];
        for (uint64_t j0 = 0; j0 < p->n; j0 += MM_NB) {
            const uint64_t nb = p->n - j0 < MM_NB ? p->n - j0 : MM_NB;
            float acc[MM_NB] = {0.0f};
            for (uint64_t k = 0; k < p->k; k++) {
                const float a = ar[k * p->sa[3]];
                const float *bk = bm + k * p->sb[2] + j0 * p->sb[3];
                for (uint64_t j = 0; j < nb; j++)
                    acc[j] = __builtin_fmaf(a, bk[j * p->sb[3]], acc[j]);
            }
            for (uint64_t j = 0; j < nb; j++)
                y[r * p->n + j0 + j] = acc[j];
        }
    }
}

void nib_vision_op(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                   uint8_t *wscratch, const struct nib_op *op, uint32_t b, uint32_t e)
{
    const struct nib_conv_kernels *ck = conv_kernels(qk);
    switch (op->code) {
    case NIB_VOP_INPUT: exec_input(mem, v, op, b, e); break;
    case NIB_VOP_CONV: exec_conv(ck, v, mem, wscratch, op, b, e); break;
    case NIB_VOP_QCONV: exec_qconv(ck, v, mem, wscratch, op, b, e); break;
    case NIB_VOP_QUANT: exec_quant(mem, op, b, e); break;
    case NIB_VOP_POOL: {
        struct nib_conv_shape s;
        conv_shape(&op->vconv, &s);
        ck->pool_f32(&s, op->vconv.mode, f32_at(mem, op->src0), f32_at(mem, op->dst), b, e);
        break;
    }
    case NIB_VOP_RESIZE: {
        const struct nib_vresize_params *p = &op->vresize;
        struct nib_resize r = {p->h,       p->w,       p->c,      p->oh,    p->ow,
                               p->scale_h, p->scale_w, p->linear, p->coord, p->nearest_mode};
        ck->resize_f32(&r, f32_at(mem, op->src0), f32_at(mem, op->dst), b, e);
        break;
    }
    case NIB_VOP_BINARY:
    case NIB_VOP_UNARY:
    case NIB_VOP_COPY: exec_ew(v, mem, op, b, e); break;
    case NIB_VOP_MATMUL:
        if (v->tensors[op->tensor].dtype == NIB_DT_F32)
            exec_matmul(v, mem, op, b, e);
        else
            exec_qmatmul(qk, v, mem, wscratch, op, b, e);
        break;
    case NIB_VOP_SOFTMAX: exec_softmax(mem, op, b, e); break;
    case NIB_VOP_LAYERNORM: exec_layernorm(v, mem, op, b, e); break;
    case NIB_VOP_BMATMUL: exec_bmatmul(mem, op, b, e); break;
    default: break;
    }
}

/* ---- what a share touches ---- */

static void acc(struct nib_vrange *out, int *n, uint64_t b, uint64_t e, uint32_t write)
{
    if (b >= e)
        return;
    out[*n] = (struct nib_vrange){.begin = b, .end = e, .write = write};
    (*n)++;
}

int nib_vision_access(const struct nib_op *op, uint32_t b, uint32_t e, struct nib_vrange *out)
{
    int c = 0;
    switch (op->code) {
    case NIB_VOP_INPUT: {
        const struct nib_vrows_params *p = &op->vrows;
        const uint64_t bytes = (uint64_t)p->c * p->h * p->w * (p->u8 ? 1 : 4);
        const uint64_t row = (uint64_t)p->w * p->c * 4;
        acc(out, &c, op->src0, op->src0 + bytes, 0);
        acc(out, &c, op->dst + b * row, op->dst + e * row, 1);
        break;
    }
    case NIB_VOP_CONV:
    case NIB_VOP_QCONV:
    case NIB_VOP_POOL: {
        const struct nib_vconv_params *p = &op->vconv;
        const int q = op->code == NIB_VOP_QCONV; /* int8 src0; int8 dst with qout 1 */
        const uint64_t row = (uint64_t)p->ow * p->c_out * (p->qout == 1 ? 1 : 4);
        acc(out, &c, op->src0, op->src0 + (uint64_t)p->h * p->w * p->c_in * (q ? 1 : 4), 0);
        acc(out, &c, op->dst + b * row, op->dst + e * row, 1);
        if (op->code != NIB_VOP_POOL && p->res) /* the f32 residual at dst's places */
            acc(out, &c, op->src1 + b * (uint64_t)p->ow * p->c_out * 4,
                op->src1 + e * (uint64_t)p->ow * p->c_out * 4, 0);
        if (op->code != NIB_VOP_POOL && p->qout == 2) /* the int8 copy, one byte per value */
            acc(out, &c, op->aux + b * (row / 4), op->aux + e * (row / 4), 1);
        break;
    }
    case NIB_VOP_QUANT:
        acc(out, &c, op->src0 + b * 4ull, op->src0 + e * 4ull, 0);
        acc(out, &c, op->dst + b, op->dst + e, 1);
        break;
    case NIB_VOP_RESIZE: {
        const struct nib_vresize_params *p = &op->vresize;
        const uint64_t row = (uint64_t)p->ow * p->c * 4;
        acc(out, &c, op->src0, op->src0 + (uint64_t)p->h * p->w * p->c * 4, 0);
        acc(out, &c, op->dst + b * row, op->dst + e * row, 1);
        break;
    }
    case NIB_VOP_LAYERNORM:
    case NIB_VOP_SOFTMAX: {
        const uint64_t row =
            (uint64_t)(op->code == NIB_VOP_SOFTMAX ? op->vrows.n : op->vnorm.n) * 4;
        acc(out, &c, op->src0 + b * row, op->src0 + e * row, 0);
        acc(out, &c, op->dst + b * row, op->dst + e * row, 1);
        break;
    }
    case NIB_VOP_MATMUL: {
        const struct nib_vmatmul_params *p = &op->vmatmul;
        acc(out, &c, op->src0, op->src0 + (uint64_t)p->m * p->k * 4, 0);
        acc(out, &c, op->dst + b * 4ull, op->dst + ((uint64_t)(p->m - 1) * p->n + e) * 4, 1);
        break;
    }
    case NIB_VOP_BMATMUL: {
        const struct nib_vbmm_params *p = &op->vbmm;
        const uint32_t da[4] = {p->nb0, p->nb1, p->m, p->k}, db[4] = {p->nb0, p->nb1, p->k, p->n};
        acc(out, &c, op->src0, op->src0 + nib_vew_span(da, p->sa), 0);
        acc(out, &c, op->src1, op->src1 + nib_vew_span(db, p->sb), 0);
        acc(out, &c, op->dst + b * (uint64_t)p->n * 4, op->dst + e * (uint64_t)p->n * 4, 1);
        break;
    }
    case NIB_VOP_BINARY:
    case NIB_VOP_UNARY:
    case NIB_VOP_COPY: {
        const struct nib_vew_params *p = &op->vew;
        if (p->a_tensor == UINT32_MAX)
            acc(out, &c, op->src0, op->src0 + nib_vew_span(p->dims, p->sa), 0);
        if (op->code == NIB_VOP_BINARY && p->b_tensor == UINT32_MAX)
            acc(out, &c, op->src1, op->src1 + nib_vew_span(p->dims, p->sb), 0);
        if (op->code == NIB_VOP_COPY) { /* the whole destination: strides may interleave */
            const uint64_t span = nib_vew_span(p->dims, p->sd);
            acc(out, &c, op->dst, op->dst + (p->qout == 1 ? span / 4 : span), 1);
            if (p->qout == 2)
                acc(out, &c, op->aux, op->aux + span / 4, 1);
        } else {
            acc(out, &c, op->dst + b * 4ull, op->dst + e * 4ull, 1);
            if (p->qout == 2) /* the int8 copy, one byte per value */
                acc(out, &c, op->aux + b, op->aux + e, 1);
        }
        break;
    }
    default: break;
    }
    return c;
}
