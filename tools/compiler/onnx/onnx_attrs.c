/* Node attributes into struct nx_attrs: the op's table of accepted names,
 * defaults from the ONNX operator documents, every value range-checked.
 * Anything the table does not list is refused with node name and op. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "tools/compiler/onnx/onnx_ops.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

static const struct {
    const char *name;
    enum nx_op op;
    const char *attrs; /* accepted attribute names, each followed by ',' */
} op_table[] = {
    {"Conv", NX_OP_CONV, "kernel_shape,strides,pads,dilations,group,auto_pad,"},
    {"ConvTranspose", NX_OP_CONV_T,
     "kernel_shape,strides,pads,dilations,group,output_padding,auto_pad,"},
    {"BatchNormalization", NX_OP_BN, "epsilon,momentum,spatial,"},
    {"Relu", NX_OP_RELU, ""},
    {"Clip", NX_OP_CLIP, "min,max,"},
    {"HardSigmoid", NX_OP_HSIGMOID, "alpha,beta,"},
    {"HardSwish", NX_OP_HSWISH, ""},
    {"Sigmoid", NX_OP_SIGMOID, ""},
    {"Add", NX_OP_ADD, ""},
    {"Sub", NX_OP_SUB, ""},
    {"Mul", NX_OP_MUL, ""},
    {"Div", NX_OP_DIV, ""},
    {"Pow", NX_OP_POW, ""},
    {"Sqrt", NX_OP_SQRT, ""},
    {"ReduceMean", NX_OP_REDUCEMEAN, "axes,keepdims,"},
    {"MaxPool", NX_OP_MAXPOOL, "kernel_shape,strides,pads,dilations,ceil_mode,auto_pad,"},
    {"AveragePool", NX_OP_AVGPOOL,
     "kernel_shape,strides,pads,ceil_mode,count_include_pad,auto_pad,"},
    {"GlobalAveragePool", NX_OP_GAP, ""},
    {"Resize", NX_OP_RESIZE,
     "mode,coordinate_transformation_mode,nearest_mode,cubic_coeff_a,exclude_outside,"},
    {"Concat", NX_OP_CONCAT, "axis,"},
    {"Flatten", NX_OP_FLATTEN, "axis,"},
    {"Reshape", NX_OP_RESHAPE, "allowzero,"},
    {"Squeeze", NX_OP_SQUEEZE, "axes,"},
    {"Unsqueeze", NX_OP_UNSQUEEZE, "axes,"},
    {"Transpose", NX_OP_TRANSPOSE, "perm,"},
    {"Slice", NX_OP_SLICE, "starts,ends,axes,"},
    {"Shape", NX_OP_SHAPE, ""},
    {"Cast", NX_OP_CAST, "to,"},
    {"Gather", NX_OP_GATHER, "axis,"},
    {"Gemm", NX_OP_GEMM, "alpha,beta,transA,transB,"},
    {"MatMul", NX_OP_MATMUL, ""},
    {"Softmax", NX_OP_SOFTMAX, "axis,"},
    {"Constant", NX_OP_CONSTANT, "value,"},
    {"Identity", NX_OP_IDENTITY, ""},
};

static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *c = strchr(p, ',');
        if ((size_t)(c - p) == n && !strncmp(p, name, n))
            return 1;
        p = c + 1;
    }
    return 0;
}

static void defaults(struct nx_attrs *a, enum nx_op op, int64_t opset)
{
    memset(a, 0, sizeof *a);
    for (int k = 0; k < 2; k++)
        a->strides[k] = a->dilations[k] = 1;
    a->group = 1;
    a->alpha = op == NX_OP_HSIGMOID ? 0.2f : 1.0f;
    a->beta = op == NX_OP_HSIGMOID ? 0.5f : 1.0f;
    a->epsilon = 1e-5f;
    a->lo = -INFINITY;
    a->hi = INFINITY;
    a->keepdims = 1;
    a->post_mul = 1.0f;
    a->axis = op == NX_OP_SOFTMAX ? (opset >= 13 ? -1 : 1) : op == NX_OP_FLATTEN ? 1 : 0;
    a->coord_mode = opset >= 11 ? NX_COORD_HALF_PIXEL : NX_COORD_ASYMMETRIC;
    a->nearest_mode = opset >= 11 ? NX_NEAREST_ROUND_PREFER_FLOOR : NX_NEAREST_FLOOR;
}

static int ints(const Onnx__AttributeProto *at, int64_t *dst, uint32_t max, uint32_t *n,
                const struct nx_node *nd, char *err, size_t errlen)
{
    if (at->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS || at->n_ints > max)
        FAIL("node '%s' (%s): attribute '%s' must be a list of at most %u ints", nd->name,
             nd->op_type, at->name, max);
    for (size_t k = 0; k < at->n_ints; k++)
        dst[k] = at->ints[k];
    if (n)
        *n = (uint32_t)at->n_ints;
    return 0;
}

static int int1(const Onnx__AttributeProto *at, int64_t *dst, const struct nx_node *nd, char *err,
                size_t errlen)
{
    if (at->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        FAIL("node '%s' (%s): attribute '%s' must be an int", nd->name, nd->op_type, at->name);
    *dst = at->i;
    return 0;
}

static int float1(const Onnx__AttributeProto *at, float *dst, const struct nx_node *nd, char *err,
                  size_t errlen)
{
    if (at->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT || isnan(at->f))
        FAIL("node '%s' (%s): attribute '%s' must be a float", nd->name, nd->op_type, at->name);
    *dst = at->f;
    return 0;
}

/* A string attribute compared with one of the accepted values: its index,
 * or -1 after a message. */
static int choice(const Onnx__AttributeProto *at, const char *const *vals, int n,
                  const struct nx_node *nd, char *err, size_t errlen)
{
    if (at->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
        FAIL("node '%s' (%s): attribute '%s' must be a string", nd->name, nd->op_type, at->name);
    for (int k = 0; k < n; k++)
        if (strlen(vals[k]) == at->s.len && !memcmp(vals[k], at->s.data, at->s.len))
            return k;
    FAIL("node '%s' (%s): attribute %s='%.*s' is not supported", nd->name, nd->op_type, at->name,
         (int)(at->s.len > 64 ? 64 : at->s.len), (const char *)at->s.data);
}

static int one(struct nx_graph *g, struct nx_node *nd, const Onnx__AttributeProto *at, char *err,
               size_t errlen)
{
    struct nx_attrs *a = &nd->a;
    const char *n = at->name;
    uint32_t cnt;
    int64_t v;
    if (!strcmp(n, "kernel_shape")) {
        if (ints(at, a->kernel, 2, &cnt, nd, err, errlen))
            return -1;
        if (cnt != 2 || a->kernel[0] < 1 || a->kernel[1] < 1 || a->kernel[0] > 4096 ||
            a->kernel[1] > 4096)
            FAIL("node '%s' (%s): kernel_shape must be two dims in 1..4096 (2-D only)", nd->name,
                 nd->op_type);
        a->has_kernel = 1;
    } else if (!strcmp(n, "strides") || !strcmp(n, "dilations")) {
        int64_t *d = n[0] == 's' ? a->strides : a->dilations;
        if (ints(at, d, 2, &cnt, nd, err, errlen))
            return -1;
        if (cnt != 2 || d[0] < 1 || d[1] < 1 || d[0] > 4096 || d[1] > 4096)
            FAIL("node '%s' (%s): %s must be two values in 1..4096", nd->name, nd->op_type, n);
    } else if (!strcmp(n, "pads")) {
        if (ints(at, a->pads, 4, &cnt, nd, err, errlen))
            return -1;
        for (int k = 0; k < 4; k++)
            if (cnt != 4 || a->pads[k] < 0 || a->pads[k] > 4096)
                FAIL("node '%s' (%s): pads must be four values in 0..4096", nd->name, nd->op_type);
    } else if (!strcmp(n, "output_padding")) {
        if (ints(at, a->out_pad, 2, &cnt, nd, err, errlen))
            return -1;
        if (cnt != 2 || a->out_pad[0] < 0 || a->out_pad[1] < 0 || a->out_pad[0] > 4096 ||
            a->out_pad[1] > 4096)
            FAIL("node '%s' (%s): output_padding must be two values in 0..4096", nd->name,
                 nd->op_type);
    } else if (!strcmp(n, "group")) {
        if (int1(at, &a->group, nd, err, errlen))
            return -1;
        if (a->group < 1 || a->group > NX_MAX_DIM)
            FAIL("node '%s' (%s): group %lld", nd->name, nd->op_type, (long long)a->group);
    } else if (!strcmp(n, "auto_pad")) {
        static const char *const v2[] = {"NOTSET", "VALID"};
        if (choice(at, v2, 2, nd, err, errlen) < 0)
            return -1;
    } else if (!strcmp(n, "ceil_mode") || !strcmp(n, "count_include_pad") ||
               !strcmp(n, "keepdims") || !strcmp(n, "transA") || !strcmp(n, "transB") ||
               !strcmp(n, "spatial") || !strcmp(n, "allowzero") || !strcmp(n, "exclude_outside")) {
        if (int1(at, &v, nd, err, errlen))
            return -1;
        if (v != 0 && v != 1)
            FAIL("node '%s' (%s): %s must be 0 or 1", nd->name, nd->op_type, n);
        if (!strcmp(n, "ceil_mode"))
            a->ceil_mode = (int)v;
        else if (!strcmp(n, "count_include_pad"))
            a->count_include_pad = (int)v;
        else if (!strcmp(n, "keepdims"))
            a->keepdims = (int)v;
        else if (!strcmp(n, "transA"))
            a->trans_a = (int)v;
        else if (!strcmp(n, "transB"))
            a->trans_b = (int)v;
        else if (!strcmp(n, "spatial") && v != 1)
            FAIL("node '%s' (%s): spatial=0 is not supported", nd->name, nd->op_type);
        else if ((!strcmp(n, "allowzero") || !strcmp(n, "exclude_outside")) && v != 0)
            FAIL("node '%s' (%s): %s=1 is not supported", nd->name, nd->op_type, n);
    } else if (!strcmp(n, "alpha")) {
        return float1(at, &a->alpha, nd, err, errlen);
    } else if (!strcmp(n, "beta")) {
        return float1(at, &a->beta, nd, err, errlen);
    } else if (!strcmp(n, "epsilon")) {
        if (float1(at, &a->epsilon, nd, err, errlen))
            return -1;
        if (!(a->epsilon >= 0))
            FAIL("node '%s' (%s): epsilon < 0", nd->name, nd->op_type);
    } else if (!strcmp(n, "momentum") || !strcmp(n, "cubic_coeff_a")) {
        float ignored; /* training-only, or a mode nibble refuses anyway */
        return float1(at, &ignored, nd, err, errlen);
    } else if (!strcmp(n, "min")) {
        return float1(at, &a->lo, nd, err, errlen);
    } else if (!strcmp(n, "max")) {
        return float1(at, &a->hi, nd, err, errlen);
    } else if (!strcmp(n, "axis")) {
        if (int1(at, &a->axis, nd, err, errlen))
            return -1;
        if (a->axis < -NX_MAX_RANK || a->axis >= NX_MAX_RANK)
            FAIL("node '%s' (%s): axis %lld out of range", nd->name, nd->op_type,
                 (long long)a->axis);
    } else if (!strcmp(n, "perm")) {
        return ints(at, a->perm, NX_MAX_RANK, &a->n_perm, nd, err, errlen);
    } else if (!strcmp(n, "axes")) {
        a->has_axes = 1;
        return ints(at, a->axes, NX_MAX_RANK, &a->n_axes, nd, err, errlen);
    } else if (!strcmp(n, "starts")) {
        return ints(at, a->starts, NX_MAX_RANK, &a->n_starts, nd, err, errlen);
    } else if (!strcmp(n, "ends")) {
        return ints(at, a->ends, NX_MAX_RANK, &a->n_ends, nd, err, errlen);
    } else if (!strcmp(n, "to")) {
        if (int1(at, &v, nd, err, errlen))
            return -1;
        if (v != NX_F32 && v != NX_I32 && v != NX_I64 && v != NX_BOOL)
            FAIL("node '%s' (%s): to=%lld is not supported (float, int32, int64, bool are)",
                 nd->name, nd->op_type, (long long)v);
        a->to = (int32_t)v;
    } else if (!strcmp(n, "mode")) {
        static const char *const modes[] = {"nearest", "linear"};
        int k = choice(at, modes, 2, nd, err, errlen);
        if (k < 0)
            return -1;
        a->resize_linear = k;
    } else if (!strcmp(n, "coordinate_transformation_mode")) {
        static const char *const modes[] = {"half_pixel", "asymmetric", "align_corners",
                                            "pytorch_half_pixel"};
        int k = choice(at, modes, 4, nd, err, errlen);
        if (k < 0)
            return -1;
        a->coord_mode = k;
    } else if (!strcmp(n, "nearest_mode")) {
        static const char *const modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil"};
        int k = choice(at, modes, 4, nd, err, errlen);
        if (k < 0)
            return -1;
        a->nearest_mode = k;
    } else if (!strcmp(n, "value")) {
        if (at->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR || !at->t)
            FAIL("node '%s' (%s): attribute 'value' must be a tensor", nd->name, nd->op_type);
        if (nd->n_out != 1 || nd->out[0] < 0)
            FAIL("node '%s' (%s): one output expected", nd->name, nd->op_type);
        struct nx_tensor *t = &g->t[nd->out[0]];
        if (nx_tensor_proto(t, at->t, "Constant", err, errlen))
            return -1;
    }
    return 0;
}

int nx_parse_attrs(struct nx_graph *g, struct nx_node *nd, size_t n_attr, const void *const *attr,
                   char *err, size_t errlen)
{
    size_t k;
    for (k = 0; k < sizeof op_table / sizeof op_table[0]; k++)
        if (!strcmp(op_table[k].name, nd->op_type))
            break;
    if (k == sizeof op_table / sizeof op_table[0])
        FAIL("node '%s': op '%s' is not supported", nd->name, nd->op_type);
    nd->op = op_table[k].op;
    defaults(&nd->a, nd->op, g->opset);
    int have_value = 0;
    for (size_t i = 0; i < n_attr; i++) {
        const Onnx__AttributeProto *at = attr[i];
        if (!at->name || !listed(op_table[k].attrs, at->name))
            FAIL("node '%s' (%s): attribute '%s' is not supported", nd->name, nd->op_type,
                 at->name ? at->name : "");
        have_value |= !strcmp(at->name, "value");
        if (one(g, nd, at, err, errlen))
            return -1;
    }
    if (nd->op == NX_OP_CONSTANT && !have_value)
        FAIL("node '%s' (%s): no 'value' attribute", nd->name, nd->op_type);
    if (nd->op == NX_OP_CAST && !nd->a.to)
        FAIL("node '%s' (%s): no 'to' attribute", nd->name, nd->op_type);
    return 0;
}
