/* A .onnx file into struct nx_graph through protobuf-c (the schema is
 * Debian's onnx.proto, compiled at build time). The bytes are untrusted:
 * every count, rank, dimension and data size is checked before use, with
 * products that cannot overflow, and external data is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "tools/compiler/onnx/onnx_ir.h"
#include "tools/compiler/onnx/onnx_ops.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

uint64_t nx_elems(const struct nx_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->rank; d++)
        n *= (uint64_t)t->dims[d];
    return n;
}

/* The element count of dims, or -1 when a dimension is negative or too
 * large or the product passes NX_MAX_ELEMS. */
static int64_t checked_elems(const int64_t *dims, size_t rank)
{
    uint64_t n = 1;
    for (size_t d = 0; d < rank; d++) {
        if (dims[d] < 0 || dims[d] > NX_MAX_DIM)
            return -1;
        n *= (uint64_t)dims[d]; /* both <= 2^28 before the check below */
        if (n > NX_MAX_ELEMS)
            return -1;
    }
    return (int64_t)n;
}

int32_t nx_add_tensor(struct nx_graph *g, const char *name)
{
    if (g->n_t == g->cap_t) {
        uint32_t cap = g->cap_t ? g->cap_t * 2 : 256;
        if (cap > NX_MAX_TENSORS)
            cap = NX_MAX_TENSORS;
        if (cap == g->n_t)
            return -1;
        struct nx_tensor *t = realloc(g->t, cap * sizeof *t);
        if (!t)
            return -1;
        g->t = t;
        g->cap_t = cap;
    }
    struct nx_tensor *t = &g->t[g->n_t];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    t->producer = -1;
    t->dtype = NX_F32;
    if (!t->name)
        return -1;
    return (int32_t)g->n_t++;
}

/* Names to tensor indices while loading: open addressing, FNV-1a, so a
 * model with many values costs linear time, not quadratic. */
struct name_index {
    uint32_t *slot; /* tensor index + 1; 0: empty */
    uint32_t mask;
};

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static int32_t find_tensor(const struct nx_graph *g, const struct name_index *ix, const char *name)
{
    for (uint32_t h = name_hash(name) & ix->mask;; h = (h + 1) & ix->mask) {
        uint32_t v = ix->slot[h];
        if (!v)
            return -1;
        if (!strcmp(g->t[v - 1].name, name))
            return (int32_t)(v - 1);
    }
}

/* A new tensor named name, entered in the index (which has room: it is
 * sized for every name the graph declares). */
static int32_t add_named(struct nx_graph *g, struct name_index *ix, const char *name)
{
    int32_t t = nx_add_tensor(g, name);
    if (t < 0)
        return -1;
    uint32_t h = name_hash(name) & ix->mask;
    while (ix->slot[h])
        h = (h + 1) & ix->mask;
    ix->slot[h] = (uint32_t)t + 1;
    return t;
}

int nx_alloc_data(struct nx_tensor *t)
{
    uint64_t n = nx_elems(t);
    size_t sz = (size_t)(n ? n : 1);
    if (t->dtype == NX_F32) {
        free(t->f);
        t->f = calloc(sz, sizeof(float));
        return t->f ? 0 : -1;
    }
    free(t->i);
    t->i = calloc(sz, sizeof(int64_t));
    return t->i ? 0 : -1;
}

void nx_free_data(struct nx_tensor *t)
{
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
}

/* A TensorProto's data into t (dims already set): exactly one source, raw
 * or typed, of exactly the declared size. */
static int tensor_data(struct nx_tensor *t, const Onnx__TensorProto *p, const char *what, char *err,
                       size_t errlen)
{
    if (p->n_external_data ||
        (p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        FAIL("%s '%s': external data (weights in a separate file) is not supported; "
             "save the model with its weights inside the .onnx file",
             what, t->name);
    if (!p->has_data_type)
        FAIL("%s '%s': no data type", what, t->name);
    int32_t dt = p->data_type;
    size_t esz;
    size_t typed;
    switch (dt) {
    case NX_F32: esz = 4, typed = p->n_float_data; break;
    case NX_I32: esz = 4, typed = p->n_int32_data; break;
    case NX_BOOL: esz = 1, typed = p->n_int32_data; break;
    case NX_I64: esz = 8, typed = p->n_int64_data; break;
    default:
        FAIL("%s '%s': element type %d is not supported (float, int32, int64, bool are)", what,
             t->name, (int)dt);
    }
    t->dtype = dt;
    uint64_t n = nx_elems(t);
    int has_raw = p->has_raw_data && p->raw_data.len > 0;
    if (has_raw && typed)
        FAIL("%s '%s': both raw_data and typed data", what, t->name);
    if (p->n_double_data || p->n_uint64_data || p->n_string_data ||
        (dt != NX_F32 && p->n_float_data) || (dt != NX_I64 && p->n_int64_data) ||
        (dt != NX_I32 && dt != NX_BOOL && p->n_int32_data))
        FAIL("%s '%s': a data field that does not match its type %d", what, t->name, (int)dt);
    if (has_raw && p->raw_data.len != n * esz)
        FAIL("%s '%s': raw_data holds %zu bytes, its dims need %llu", what, t->name,
             p->raw_data.len, (unsigned long long)(n * esz));
    if (!has_raw && typed != n)
        FAIL("%s '%s': %zu values, its dims need %llu", what, t->name, typed,
             (unsigned long long)n);
    if (nx_alloc_data(t))
        FAIL("%s '%s': out of memory", what, t->name);
    const uint8_t *raw = p->raw_data.data;
    for (uint64_t k = 0; k < n; k++) {
        if (dt == NX_F32) {
            float v;
            if (has_raw)
                memcpy(&v, raw + k * 4, 4); /* little-endian, as ONNX stores it */
            else
                v = p->float_data[k];
            t->f[k] = v;
        } else if (dt == NX_I64) {
            int64_t v;
            if (has_raw)
                memcpy(&v, raw + k * 8, 8);
            else
                v = p->int64_data[k];
            t->i[k] = v;
        } else if (dt == NX_I32) {
            int32_t v;
            if (has_raw)
                memcpy(&v, raw + k * 4, 4);
            else
                v = p->int32_data[k];
            t->i[k] = v;
        } else {
            t->i[k] = has_raw ? (raw[k] != 0) : (p->int32_data[k] != 0);
        }
    }
    t->is_const = 1;
    t->shape_known = 1;
    return 0;
}

int nx_tensor_proto(struct nx_tensor *t, const void *proto, const char *what, char *err,
                    size_t errlen)
{
    const Onnx__TensorProto *p = proto;
    if (p->n_dims > NX_MAX_RANK)
        FAIL("%s '%s': rank %zu (at most %d)", what, t->name, p->n_dims, NX_MAX_RANK);
    if (checked_elems(p->dims, p->n_dims) < 0)
        FAIL("%s '%s': dimensions negative or too large (at most %llu elements)", what, t->name,
             (unsigned long long)NX_MAX_ELEMS);
    t->rank = (uint32_t)p->n_dims;
    for (size_t d = 0; d < p->n_dims; d++)
        t->dims[d] = p->dims[d];
    return tensor_data(t, p, what, err, errlen);
}

/* A graph input's declared type: element type, and dims where fixed
 * (0 marks a dynamic one until --input fixes it). */
static int value_info(struct nx_tensor *t, const Onnx__ValueInfoProto *v, char *err, size_t errlen)
{
    const Onnx__TypeProto *tp = v->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        FAIL("graph input '%s': not a tensor", t->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt->has_elem_type || tt->elem_type != NX_F32)
        FAIL("graph input '%s': element type %d (float inputs only)", t->name,
             tt->has_elem_type ? (int)tt->elem_type : 0);
    t->dtype = NX_F32;
    if (!tt->shape)
        return 0; /* rank unknown: --input must give it */
    if (tt->shape->n_dim > NX_MAX_RANK)
        FAIL("graph input '%s': rank %zu (at most %d)", t->name, tt->shape->n_dim, NX_MAX_RANK);
    t->rank = (uint32_t)tt->shape->n_dim;
    t->shape_known = 1;
    for (uint32_t d = 0; d < t->rank; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (dim->dim_value < 1 || dim->dim_value > NX_MAX_DIM)
                FAIL("graph input '%s': dimension %u is %lld", t->name, d,
                     (long long)dim->dim_value);
            t->dims[d] = dim->dim_value;
        } else {
            t->dims[d] = 0;
            t->shape_known = 0;
        }
    }
    return 0;
}

static int load_graph(struct nx_graph *g, struct name_index *ix, const Onnx__GraphProto *gp,
                      char *err, size_t errlen)
{
    if (gp->n_node > NX_MAX_NODES)
        FAIL("graph: %zu nodes (at most %u)", gp->n_node, NX_MAX_NODES);
    if (gp->n_sparse_initializer)
        FAIL("graph: sparse initializers are not supported");
    if (gp->n_initializer + gp->n_input > NX_MAX_TENSORS)
        FAIL("graph: %zu initializers and inputs (at most %u)", gp->n_initializer + gp->n_input,
             NX_MAX_TENSORS);
    for (size_t k = 0; k < gp->n_initializer; k++) {
        const Onnx__TensorProto *p = gp->initializer[k];
        if (!p->name || !p->name[0])
            FAIL("initializer %zu has no name", k);
        if (find_tensor(g, ix, p->name) >= 0)
            FAIL("initializer '%s' defined twice", p->name);
        int32_t ti = add_named(g, ix, p->name);
        if (ti < 0)
            FAIL("out of memory");
        if (nx_tensor_proto(&g->t[ti], p, "initializer", err, errlen))
            return -1;
    }
    g->inputs = calloc(gp->n_input + 1, sizeof *g->inputs);
    g->outputs = calloc(gp->n_output + 1, sizeof *g->outputs);
    if (!g->inputs || !g->outputs)
        FAIL("out of memory");
    for (size_t k = 0; k < gp->n_input; k++) {
        const Onnx__ValueInfoProto *v = gp->input[k];
        if (!v->name || !v->name[0])
            FAIL("graph input %zu has no name", k);
        if (find_tensor(g, ix, v->name) >= 0)
            continue; /* an initializer listed as an input (older exporters) */
        int32_t ti = add_named(g, ix, v->name);
        if (ti < 0)
            FAIL("out of memory");
        g->t[ti].is_input = 1;
        if (value_info(&g->t[ti], v, err, errlen))
            return -1;
        g->inputs[g->n_inputs++] = ti;
    }
    if (!g->n_inputs)
        FAIL("graph: no input that is not an initializer");
    g->n = calloc(gp->n_node + 1, sizeof *g->n);
    if (!g->n)
        FAIL("out of memory");
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        struct nx_node *nd = &g->n[g->n_n++];
        char idx[32];
        snprintf(idx, sizeof idx, "#%zu", k);
        nd->name = strdup(np->name && np->name[0] ? np->name : idx);
        nd->op_type = strdup(np->op_type ? np->op_type : "");
        if (!nd->name || !nd->op_type)
            FAIL("out of memory");
        if (np->domain && np->domain[0] && strcmp(np->domain, "ai.onnx"))
            FAIL("node '%s' (%s): operator domain '%s' is not supported", nd->name, nd->op_type,
                 np->domain);
        if (np->n_input > NX_MAX_NODE_IO || np->n_output > NX_MAX_NODE_IO || !np->n_output)
            FAIL("node '%s' (%s): %zu inputs, %zu outputs", nd->name, nd->op_type, np->n_input,
                 np->n_output);
        nd->in = calloc(np->n_input + 1, sizeof *nd->in);
        nd->out = calloc(np->n_output, sizeof *nd->out);
        if (!nd->in || !nd->out)
            FAIL("out of memory");
        nd->n_in = (uint32_t)np->n_input;
        nd->n_out = (uint32_t)np->n_output;
        /* Inputs are bound after every output exists, so that a node may
         * name a value made later (the topological sort orders them). */
        for (size_t o = 0; o < np->n_output; o++) {
            const char *nm = np->output[o];
            if (!nm || !nm[0]) {
                nd->out[o] = -1;
                continue;
            }
            int32_t ti = find_tensor(g, ix, nm);
            if (ti >= 0)
                FAIL("node '%s' (%s): output '%s' is already defined", nd->name, nd->op_type, nm);
            ti = add_named(g, ix, nm);
            if (ti < 0)
                FAIL("graph: too many values (at most %u)", NX_MAX_TENSORS);
            g->t[ti].producer = (int32_t)k;
            g->t[ti].dtype = 0; /* set by shape resolution */
            nd->out[o] = ti;
        }
        if (nx_parse_attrs(g, nd, np->n_attribute, (const void *const *)np->attribute, err, errlen))
            return -1;
    }
    for (size_t k = 0; k < gp->n_node; k++) {
        const Onnx__NodeProto *np = gp->node[k];
        struct nx_node *nd = &g->n[k];
        for (size_t i = 0; i < np->n_input; i++) {
            const char *nm = np->input[i];
            if (!nm || !nm[0]) {
                nd->in[i] = -1;
                continue;
            }
            int32_t ti = find_tensor(g, ix, nm);
            if (ti < 0)
                FAIL("node '%s' (%s): input '%s' is not defined anywhere", nd->name, nd->op_type,
                     nm);
            nd->in[i] = ti;
        }
    }
    if (!gp->n_output)
        FAIL("graph: no output");
    for (size_t k = 0; k < gp->n_output; k++) {
        const char *nm = gp->output[k]->name;
        int32_t ti = nm ? find_tensor(g, ix, nm) : -1;
        if (ti < 0)
            FAIL("graph output '%s' is not produced", nm ? nm : "");
        g->t[ti].is_output = 1;
        g->outputs[g->n_outputs++] = ti;
    }
    return 0;
}

/* Counts the names first: too many values are refused before any is
 * made, and the index is sized once. */
static int load_model_graph(struct nx_graph *g, const Onnx__GraphProto *gp, char *err,
                            size_t errlen)
{
    uint64_t names = (uint64_t)gp->n_initializer + gp->n_input;
    if (gp->n_node > NX_MAX_NODES)
        FAIL("graph: %zu nodes (at most %u)", gp->n_node, NX_MAX_NODES);
    for (size_t k = 0; k < gp->n_node; k++)
        names += gp->node[k]->n_output;
    if (names > NX_MAX_TENSORS)
        FAIL("graph: %llu values (at most %u)", (unsigned long long)names, NX_MAX_TENSORS);
    struct name_index ix;
    uint32_t cap = 16;
    while (cap < 2 * names + 16) /* load factor <= 1/2 */
        cap *= 2;
    ix.slot = calloc(cap, sizeof *ix.slot);
    ix.mask = cap - 1;
    if (!ix.slot)
        FAIL("out of memory");
    int rc = load_graph(g, &ix, gp, err, errlen);
    free(ix.slot);
    return rc;
}

int nx_load(struct nx_graph *g, const uint8_t *buf, size_t size, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    if (size > NX_MAX_FILE)
        FAIL("model: %zu bytes (at most %llu)", size, (unsigned long long)NX_MAX_FILE);
    if (size == 0)
        FAIL("model: empty file");
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, buf);
    if (!m)
        FAIL("model: not a valid ONNX protobuf (truncated, or not an ONNX file)");
    int rc = -1;
    g->opset = -1;
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[k];
        if ((!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) && o->has_version)
            g->opset = o->version;
    }
    if (!m->graph)
        snprintf(err, errlen, "model: no graph");
    else if (g->opset < 7 || g->opset > 22)
        snprintf(err, errlen, "model: default opset %lld (7 to 22 are supported)",
                 (long long)g->opset);
    else
        rc = load_model_graph(g, m->graph, err, errlen);
    onnx__model_proto__free_unpacked(m, NULL);
    return rc;
}

void nx_free(struct nx_graph *g)
{
    for (uint32_t k = 0; k < g->n_t; k++) {
        free(g->t[k].name);
        nx_free_data(&g->t[k]);
    }
    for (uint32_t k = 0; k < g->n_n; k++) {
        free(g->n[k].name);
        free(g->n[k].op_type);
        free(g->n[k].in);
        free(g->n[k].out);
    }
    free(g->t);
    free(g->n);
    free(g->order);
    free(g->inputs);
    free(g->outputs);
    memset(g, 0, sizeof *g);
}
