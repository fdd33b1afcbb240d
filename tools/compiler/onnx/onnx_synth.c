/* ResNet-50 v1.5 with random weights, as an ONNX ModelProto (onnx_synth.h).
 *
 * Weights are He-uniform (variance 2/fan_in), so each conv keeps the scale
 * of its input through a ReLU; BatchNormalization has running statistics
 * near 0 and 1 and a gamma near 1, except the last BN of each bottleneck,
 * whose gamma is near 0.3 so that sixteen residual additions do not
 * compound into huge activations. Each initializer is one stream of the
 * counter-based generator (synth_rand.h), in the order they are made. */
#include "tools/compiler/onnx/onnx_synth.h"
#include "tools/compiler/synth_rand.h"

#include "onnx.pb-c.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 256
#define MAX_INITS 512
#define MAX_KEEP 8192

/* Everything the model points to is allocated here and freed at once. */
struct builder {
    uint64_t seed;
    uint32_t n_tensors; /* stream index of the next initializer */
    Onnx__NodeProto *nodes[MAX_NODES];
    size_t n_nodes;
    Onnx__TensorProto *inits[MAX_INITS];
    size_t n_inits;
    void *keep[MAX_KEEP];
    size_t n_keep;
    int failed;
};

static void *alloc(struct builder *b, size_t size)
{
    void *p = b->n_keep < MAX_KEEP ? calloc(1, size ? size : 1) : NULL;
    if (!p) {
        b->failed = 1;
        return NULL;
    }
    b->keep[b->n_keep++] = p;
    return p;
}

static char *fmt(struct builder *b, const char *f, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, f);
    vsnprintf(tmp, sizeof tmp, f, ap);
    va_end(ap);
    char *s = alloc(b, strlen(tmp) + 1);
    if (s)
        memcpy(s, tmp, strlen(tmp) + 1);
    return s;
}

enum fill { F_HE, F_GAMMA, F_GAMMA_RES, F_BETA, F_MEAN, F_VAR, F_FC };

static float value(enum fill k, float fan_in, uint64_t key, uint64_t i)
{
    float u = nib_synth_uniform(key, i);
    switch (k) {
    case F_HE: return sqrtf(6.0f / fan_in) * u;
    case F_GAMMA: return 1.0f + 0.2f * u;
    case F_GAMMA_RES: return 0.3f + 0.1f * u;
    case F_BETA: return 0.1f * u;
    case F_MEAN: return 0.1f * u;
    case F_VAR: return 1.0f + 0.5f * u;
    default: return u / sqrtf(fan_in); /* PyTorch's Linear init */
    }
}

/* A float initializer named name, dims given, filled by kind. */
static const char *init(struct builder *b, const char *name, const int64_t *dims, size_t n_dims,
                        enum fill kind, float fan_in)
{
    Onnx__TensorProto *t = alloc(b, sizeof *t);
    int64_t *d = alloc(b, n_dims * sizeof *d);
    size_t n = 1;
    for (size_t k = 0; k < n_dims; k++)
        n *= (size_t)dims[k];
    uint8_t *raw = alloc(b, n * 4);
    if (!t || !d || !raw || b->n_inits == MAX_INITS) {
        b->failed = 1;
        return name;
    }
    onnx__tensor_proto__init(t);
    memcpy(d, dims, n_dims * sizeof *d);
    uint64_t key = nib_synth_stream_key(b->seed, b->n_tensors++);
    for (size_t i = 0; i < n; i++) {
        float v = value(kind, fan_in, key, i);
        uint32_t bits;
        memcpy(&bits, &v, 4);
        for (int j = 0; j < 4; j++) /* little-endian, as ONNX stores raw_data */
            raw[4 * i + (size_t)j] = (uint8_t)(bits >> (8 * j));
    }
    t->name = (char *)name;
    t->n_dims = n_dims;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->has_raw_data = 1;
    t->raw_data.len = n * 4;
    t->raw_data.data = raw;
    b->inits[b->n_inits++] = t;
    return name;
}

/* An attribute of one type, named; the caller sets its value. */
static Onnx__AttributeProto *attr_new(struct builder *b, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = alloc(b, sizeof *a);
    if (!a)
        return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    return a;
}

static Onnx__AttributeProto *attr_ints(struct builder *b, const char *name, const int64_t *v,
                                       size_t n)
{
    Onnx__AttributeProto *a = attr_new(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *c = alloc(b, n * sizeof *c);
    if (!a || !c)
        return NULL;
    memcpy(c, v, n * sizeof *c);
    a->n_ints = n;
    a->ints = c;
    return a;
}

static Onnx__AttributeProto *attr_int(struct builder *b, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr_new(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a)
        return NULL;
    a->has_i = 1;
    a->i = v;
    return a;
}

static Onnx__AttributeProto *attr_float(struct builder *b, const char *name, float v)
{
    Onnx__AttributeProto *a = attr_new(b, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a)
        return NULL;
    a->has_f = 1;
    a->f = v;
    return a;
}

/* A node with up to 5 inputs and attributes; its output is named after it. */
static const char *node(struct builder *b, const char *op, const char *name, const char *const *in,
                        size_t n_in, Onnx__AttributeProto *const *attrs, size_t n_attrs)
{
    Onnx__NodeProto *n = alloc(b, sizeof *n);
    char **ins = alloc(b, n_in * sizeof *ins);
    char **out = alloc(b, sizeof *out);
    Onnx__AttributeProto **at = alloc(b, n_attrs * sizeof *at);
    if (!n || !ins || !out || !at || b->n_nodes == MAX_NODES) {
        b->failed = 1;
        return name;
    }
    onnx__node_proto__init(n);
    for (size_t k = 0; k < n_in; k++)
        ins[k] = (char *)in[k];
    for (size_t k = 0; k < n_attrs; k++) {
        if (!attrs[k])
            b->failed = 1;
        at[k] = attrs[k];
    }
    out[0] = (char *)name;
    n->op_type = (char *)op;
    n->name = (char *)name;
    n->n_input = n_in;
    n->input = ins;
    n->n_output = 1;
    n->output = out;
    n->n_attribute = n_attrs;
    n->attribute = at;
    b->nodes[b->n_nodes++] = n;
    return name;
}

/* Conv (no bias) then BatchNormalization, named as torchvision names them:
 * PREFIX.convK / PREFIX.bnK, or PREFIX.downsample.0 / .1. */
static const char *conv_bn(struct builder *b, const char *x, const char *conv_name,
                           const char *bn_name, int64_t c_in, int64_t c_out, int64_t k,
                           int64_t stride, int residual_gamma)
{
    int64_t wd[4] = {c_out, c_in, k, k}, cd[1] = {c_out};
    int64_t ks[2] = {k, k}, st[2] = {stride, stride}, p = k / 2, pads[4] = {p, p, p, p};
    const char *w = init(b, fmt(b, "%s.weight", conv_name), wd, 4, F_HE, (float)(c_in * k * k));
    Onnx__AttributeProto *ca[3] = {attr_ints(b, "kernel_shape", ks, 2),
                                   attr_ints(b, "strides", st, 2), attr_ints(b, "pads", pads, 4)};
    const char *cin[2] = {x, w};
    const char *y = node(b, "Conv", conv_name, cin, 2, ca, 3);
    const char *bin[5] = {
        y, init(b, fmt(b, "%s.weight", bn_name), cd, 1, residual_gamma ? F_GAMMA_RES : F_GAMMA, 1),
        init(b, fmt(b, "%s.bias", bn_name), cd, 1, F_BETA, 1),
        init(b, fmt(b, "%s.running_mean", bn_name), cd, 1, F_MEAN, 1),
        init(b, fmt(b, "%s.running_var", bn_name), cd, 1, F_VAR, 1)};
    Onnx__AttributeProto *ba[1] = {attr_float(b, "epsilon", 1e-5f)};
    return node(b, "BatchNormalization", bn_name, bin, 5, ba, 1);
}

static const char *relu(struct builder *b, const char *x, const char *name)
{
    return node(b, "Relu", name, &x, 1, NULL, 0);
}

/* torchvision's Bottleneck (v1.5: the stride is on the 3x3 conv). */
static const char *bottleneck(struct builder *b, const char *x, int layer, int block, int64_t c_in,
                              int64_t width, int64_t stride)
{
    const char *p = fmt(b, "layer%d.%d", layer, block);
    int64_t c_out = width * 4;
    const char *y = conv_bn(b, x, fmt(b, "%s.conv1", p), fmt(b, "%s.bn1", p), c_in, width, 1, 1, 0);
    y = relu(b, y, fmt(b, "%s.relu1", p));
    y = conv_bn(b, y, fmt(b, "%s.conv2", p), fmt(b, "%s.bn2", p), width, width, 3, stride, 0);
    y = relu(b, y, fmt(b, "%s.relu2", p));
    y = conv_bn(b, y, fmt(b, "%s.conv3", p), fmt(b, "%s.bn3", p), width, c_out, 1, 1, 1);
    const char *id = x;
    if (stride != 1 || c_in != c_out)
        id = conv_bn(b, x, fmt(b, "%s.downsample.0", p), fmt(b, "%s.downsample.1", p), c_in, c_out,
                     1, stride, 0);
    const char *sum[2] = {y, id};
    y = node(b, "Add", fmt(b, "%s.add", p), sum, 2, NULL, 0);
    return relu(b, y, fmt(b, "%s.relu3", p));
}

static Onnx__ValueInfoProto *value_info(struct builder *b, const char *name, const int64_t *dims,
                                        size_t n_dims)
{
    Onnx__ValueInfoProto *v = alloc(b, sizeof *v);
    Onnx__TypeProto *tp = alloc(b, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = alloc(b, sizeof *tt);
    Onnx__TensorShapeProto *sh = alloc(b, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dd = alloc(b, n_dims * sizeof *dd);
    if (!v || !tp || !tt || !sh || !dd)
        return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (size_t k = 0; k < n_dims; k++) {
        dd[k] = alloc(b, sizeof *dd[k]);
        if (!dd[k])
            return NULL;
        onnx__tensor_shape_proto__dimension__init(dd[k]);
        dd[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dd[k]->dim_value = dims[k];
    }
    sh->n_dim = n_dims;
    sh->dim = dd;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->name = (char *)name;
    v->type = tp;
    return v;
}

static void build_resnet50(struct builder *b)
{
    /* Stem: 7x7/2 conv, BN, ReLU, 3x3/2 max pool. */
    const char *x = conv_bn(b, "input", "conv1", "bn1", 3, 64, 7, 2, 0);
    x = relu(b, x, "relu");
    int64_t ks[2] = {3, 3}, st[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
    Onnx__AttributeProto *ma[3] = {attr_ints(b, "kernel_shape", ks, 2),
                                   attr_ints(b, "strides", st, 2), attr_ints(b, "pads", pads, 4)};
    x = node(b, "MaxPool", "maxpool", &x, 1, ma, 3);
    /* Stages of 3, 4, 6, 3 bottlenecks; widths 64..512, outputs 4x. */
    static const int blocks[4] = {3, 4, 6, 3};
    int64_t c = 64;
    for (int s = 0; s < 4; s++) {
        int64_t width = 64 << s;
        for (int k = 0; k < blocks[s]; k++) {
            x = bottleneck(b, x, s + 1, k, c, width, (s > 0 && k == 0) ? 2 : 1);
            c = width * 4;
        }
    }
    x = node(b, "GlobalAveragePool", "avgpool", &x, 1, NULL, 0);
    Onnx__AttributeProto *fa[1] = {attr_int(b, "axis", 1)};
    x = node(b, "Flatten", "flatten", &x, 1, fa, 1);
    int64_t wd[2] = {1000, 2048}, bd[1] = {1000};
    const char *gin[3] = {x, init(b, "fc.weight", wd, 2, F_FC, 2048),
                          init(b, "fc.bias", bd, 1, F_FC, 2048)};
    Onnx__AttributeProto *ga[1] = {attr_int(b, "transB", 1)};
    node(b, "Gemm", "logits", gin, 3, ga, 1);
}

/* protobuf-c's output buffer, appending to a FILE. */
struct file_buffer {
    ProtobufCBuffer base;
    FILE *f;
    int failed;
};

static void file_append(ProtobufCBuffer *buf, size_t len, const uint8_t *data)
{
    struct file_buffer *fb = (struct file_buffer *)buf;
    if (!fb->failed && fwrite(data, 1, len, fb->f) != len)
        fb->failed = 1;
}

int nx_synth_resnet50(FILE *out, uint64_t seed, char *err, size_t errlen)
{
    struct builder *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    b->seed = seed;
    build_resnet50(b);

    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    int64_t in_dims[4] = {1, 3, 224, 224}, out_dims[2] = {1, 1000};
    Onnx__ValueInfoProto *in = value_info(b, "input", in_dims, 4);
    Onnx__ValueInfoProto *outv = value_info(b, "logits", out_dims, 2);
    int rc = -1;
    if (b->failed || !in || !outv) {
        snprintf(err, errlen, "out of memory building the model");
        goto done;
    }
    graph.name = "resnet50";
    graph.n_node = b->n_nodes;
    graph.node = b->nodes;
    graph.n_initializer = b->n_inits;
    graph.initializer = b->inits;
    graph.n_input = 1;
    graph.input = &in;
    graph.n_output = 1;
    graph.output = &outv;
    opset.domain = "";
    opset.has_version = 1;
    opset.version = 13;
    model.has_ir_version = 1;
    model.ir_version = 7; /* the IR of opset 13 */
    model.n_opset_import = 1;
    model.opset_import = opsets;
    model.producer_name = "nib synth";
    model.graph = &graph;

    struct file_buffer fb = {{file_append}, out, 0};
    onnx__model_proto__pack_to_buffer(&model, &fb.base);
    if (fb.failed || fflush(out) != 0) {
        snprintf(err, errlen, "writing failed: %s", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    for (size_t k = 0; k < b->n_keep; k++)
        free(b->keep[k]);
    free(b);
    return rc;
}
