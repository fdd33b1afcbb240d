/* Static shapes, node by node, in topological order. Inputs that decide a
 * shape (Reshape's shape, Slice's bounds, Resize's scales, Clip's bounds
 * from opset 11, Squeeze/Unsqueeze axes from opset 13) must be constant
 * once the nodes before have been folded; their values move into the
 * node's attributes here, so the executor reads one place. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/compiler/onnx/onnx_infer.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)
#define NODE_FAIL(fmt, ...) FAIL("node '%s' (%s): " fmt, nd->name, nd->op_type, ##__VA_ARGS__)

static struct nx_tensor *in_t(struct nx_graph *g, const struct nx_node *nd, uint32_t i)
{
    return i < nd->n_in && nd->in[i] >= 0 ? &g->t[nd->in[i]] : NULL;
}

static int set_out(struct nx_graph *g, const struct nx_node *nd, uint32_t o, int32_t dtype,
                   uint32_t rank, const int64_t *dims, char *err, size_t errlen)
{
    if (o >= nd->n_out || nd->out[o] < 0)
        return 0;
    struct nx_tensor *t = &g->t[nd->out[o]];
    uint64_t n = 1;
    for (uint32_t d = 0; d < rank; d++) {
        if (dims[d] < 0 || dims[d] > NX_MAX_DIM)
            NODE_FAIL("output dim %u would be %lld", d, (long long)dims[d]);
        n *= (uint64_t)dims[d];
        if (n > NX_MAX_ELEMS)
            NODE_FAIL("output '%s' would have more than %llu elements", t->name,
                      (unsigned long long)NX_MAX_ELEMS);
    }
    t->dtype = dtype;
    t->rank = rank;
    memset(t->dims, 0, sizeof t->dims);
    memcpy(t->dims, dims, rank * sizeof *dims);
    t->shape_known = 1;
    return 0;
}

/* A constant int list (shape, axes, bounds): its values, at most max. */
static int const_ints(struct nx_graph *g, const struct nx_node *nd, uint32_t i, int64_t *dst,
                      uint32_t max, uint32_t *n, const char *what, char *err, size_t errlen)
{
    struct nx_tensor *t = in_t(g, nd, i);
    if (!t)
        NODE_FAIL("the %s input is missing", what);
    if (!t->is_const || t->dtype == NX_F32)
        NODE_FAIL("the %s input is not a constant int tensor once shapes are fixed", what);
    uint64_t c = nx_elems(t);
    if (t->rank > 1 || c > max)
        NODE_FAIL("the %s input has %llu values (at most %u)", what, (unsigned long long)c, max);
    for (uint64_t k = 0; k < c; k++)
        dst[k] = t->i[k];
    *n = (uint32_t)c;
    return 0;
}

static int norm_axis(int64_t axis, uint32_t rank, int64_t *out)
{
    if (axis < -(int64_t)rank || axis >= (int64_t)rank)
        return -1;
    *out = axis < 0 ? axis + rank : axis;
    return 0;
}

static int broadcast(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    int64_t dims[NX_MAX_RANK];
    uint32_t rank = 0;
    for (uint32_t i = 0; i < nd->n_in; i++) {
        struct nx_tensor *t = in_t(g, nd, i);
        if (t && t->rank > rank)
            rank = t->rank;
    }
    for (uint32_t d = 0; d < rank; d++)
        dims[d] = 1;
    for (uint32_t i = 0; i < nd->n_in; i++) {
        struct nx_tensor *t = in_t(g, nd, i);
        for (uint32_t d = 0; t && d < t->rank; d++) {
            int64_t v = t->dims[d], *o = &dims[rank - t->rank + d];
            if (v == *o || v == 1)
                continue;
            if (*o != 1)
                NODE_FAIL("shapes cannot broadcast (dim %u: %lld and %lld)", d, (long long)*o,
                          (long long)v);
            *o = v;
        }
    }
    return set_out(g, nd, 0, in_t(g, nd, 0)->dtype, rank, dims, err, errlen);
}

static int conv(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *x = in_t(g, nd, 0), *w = in_t(g, nd, 1), *b = in_t(g, nd, 2);
    struct nx_attrs *a = &nd->a;
    if (!w || x->rank != 4 || w->rank != 4 || x->dtype != NX_F32 || w->dtype != NX_F32)
        NODE_FAIL("2-D float convolutions only (input rank %u, weight rank %u)", x->rank,
                  w ? w->rank : 0);
    for (uint32_t d = 0; d < 4; d++)
        if (x->dims[d] < 1 || w->dims[d] < 1)
            NODE_FAIL("an empty input or weight");
    int tr = nd->op == NX_OP_CONV_T;
    int64_t cin = tr ? w->dims[0] : w->dims[1] * a->group;
    int64_t cout = tr ? w->dims[1] * a->group : w->dims[0];
    if (x->dims[1] != cin || (tr ? w->dims[0] : w->dims[0]) % a->group)
        NODE_FAIL("input has %lld channels, the weights %lld at group %lld", (long long)x->dims[1],
                  (long long)cin, (long long)a->group);
    if (a->has_kernel && (a->kernel[0] != w->dims[2] || a->kernel[1] != w->dims[3]))
        NODE_FAIL("kernel_shape %lldx%lld, weights %lldx%lld", (long long)a->kernel[0],
                  (long long)a->kernel[1], (long long)w->dims[2], (long long)w->dims[3]);
    a->kernel[0] = w->dims[2];
    a->kernel[1] = w->dims[3];
    if (b && (b->rank != 1 || b->dims[0] != cout || b->dtype != NX_F32))
        NODE_FAIL("bias must be %lld floats", (long long)cout);
    int64_t od[4] = {x->dims[0], cout, 0, 0};
    for (int s = 0; s < 2; s++) {
        int64_t ext = a->dilations[s] * (a->kernel[s] - 1) + 1;
        int64_t padded = x->dims[2 + s] + a->pads[s] + a->pads[s + 2];
        od[2 + s] = tr ? a->strides[s] * (x->dims[2 + s] - 1) + a->out_pad[s] + ext - a->pads[s] -
                             a->pads[s + 2]
                       : (padded - ext) / a->strides[s] + 1;
        if (od[2 + s] < 1 || (!tr && padded < ext))
            NODE_FAIL("the kernel does not fit the input (spatial dim %d)", s);
    }
    return set_out(g, nd, 0, NX_F32, 4, od, err, errlen);
}

static int pool(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *x = in_t(g, nd, 0);
    struct nx_attrs *a = &nd->a;
    if (x->rank != 4 || x->dtype != NX_F32)
        NODE_FAIL("2-D float pooling only (input rank %u)", x->rank);
    if (nd->op == NX_OP_GAP) {
        int64_t od[4] = {x->dims[0], x->dims[1], 1, 1};
        return set_out(g, nd, 0, NX_F32, 4, od, err, errlen);
    }
    if (!a->has_kernel)
        NODE_FAIL("no kernel_shape");
    if (nd->n_out > 1)
        NODE_FAIL("the Indices output is not supported");
    int64_t od[4] = {x->dims[0], x->dims[1], 0, 0};
    for (int s = 0; s < 2; s++) {
        int64_t ext = a->dilations[s] * (a->kernel[s] - 1) + 1;
        int64_t padded = x->dims[2 + s] + a->pads[s] + a->pads[s + 2];
        if (padded < ext)
            NODE_FAIL("the kernel does not fit the input (spatial dim %d)", s);
        int64_t n = a->ceil_mode ? (padded - ext + a->strides[s] - 1) / a->strides[s] + 1
                                 : (padded - ext) / a->strides[s] + 1;
        /* the last window must start inside the input or its left pad */
        if (a->ceil_mode && (n - 1) * a->strides[s] >= x->dims[2 + s] + a->pads[s])
            n--;
        od[2 + s] = n;
    }
    return set_out(g, nd, 0, NX_F32, 4, od, err, errlen);
}

static int resize(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *x = in_t(g, nd, 0);
    struct nx_tensor *sc = in_t(g, nd, g->opset >= 11 ? 2 : 1);
    struct nx_tensor *sz = g->opset >= 11 ? in_t(g, nd, 3) : NULL;
    int64_t od[NX_MAX_RANK];
    if (x->dtype != NX_F32 || x->rank != 4)
        NODE_FAIL("4-D float inputs only");
    if (sz && nx_elems(sz) > 0) {
        uint32_t n;
        if (const_ints(g, nd, 3, od, NX_MAX_RANK, &n, "sizes", err, errlen))
            return -1;
        if (n != x->rank)
            NODE_FAIL("sizes has %u values for rank %u", n, x->rank);
        for (uint32_t d = 0; d < n; d++)
            nd->a.scales[d] = (float)od[d] / (float)x->dims[d];
    } else {
        if (!sc || !sc->is_const || sc->dtype != NX_F32 || nx_elems(sc) != x->rank)
            NODE_FAIL("scales must be a constant of %u floats", x->rank);
        for (uint32_t d = 0; d < x->rank; d++) {
            float s = sc->f[d];
            if (!(s > 0) || s > 4096)
                NODE_FAIL("scale %g out of range", s);
            nd->a.scales[d] = s;
            od[d] = (int64_t)floor((double)x->dims[d] * s);
        }
    }
    if (od[0] != x->dims[0] || od[1] != x->dims[1])
        NODE_FAIL("only the two spatial dims may be resized");
    return set_out(g, nd, 0, NX_F32, x->rank, od, err, errlen);
}

static int slice(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *x = in_t(g, nd, 0);
    struct nx_attrs *a = &nd->a;
    int64_t st[NX_MAX_RANK], en[NX_MAX_RANK], ax[NX_MAX_RANK], sp[NX_MAX_RANK];
    uint32_t n, ne, na, ns;
    if (g->opset < 10) {
        n = a->n_starts, ne = a->n_ends;
        memcpy(st, a->starts, sizeof st);
        memcpy(en, a->ends, sizeof en);
        na = a->n_axes;
        memcpy(ax, a->axes, sizeof ax);
        ns = 0;
    } else {
        if (const_ints(g, nd, 1, st, NX_MAX_RANK, &n, "starts", err, errlen) ||
            const_ints(g, nd, 2, en, NX_MAX_RANK, &ne, "ends", err, errlen))
            return -1;
        na = ns = 0;
        if (in_t(g, nd, 3) && const_ints(g, nd, 3, ax, NX_MAX_RANK, &na, "axes", err, errlen))
            return -1;
        if (in_t(g, nd, 4) && const_ints(g, nd, 4, sp, NX_MAX_RANK, &ns, "steps", err, errlen))
            return -1;
    }
    if (n != ne || (na && na != n) || (ns && ns != n) || n > x->rank)
        NODE_FAIL("starts, ends, axes and steps disagree in length");
    int64_t od[NX_MAX_RANK];
    for (uint32_t d = 0; d < x->rank; d++) {
        a->starts[d] = 0;
        a->steps[d] = 1;
        od[d] = x->dims[d];
    }
    for (uint32_t k = 0; k < n; k++) {
        int64_t d = na ? ax[k] : k, step = ns ? sp[k] : 1, dim;
        if (norm_axis(d, x->rank, &d))
            NODE_FAIL("axis %lld out of range", (long long)(na ? ax[k] : k));
        if (step == 0 || step < -NX_MAX_DIM || step > NX_MAX_DIM)
            NODE_FAIL("step %lld", (long long)step);
        dim = x->dims[d];
        int64_t s = st[k], e = en[k];
        if (s < 0)
            s = s < -dim ? 0 : s + dim;
        if (e < 0)
            e = e < -dim ? -1 : e + dim;
        if (step > 0) {
            s = s > dim ? dim : s;
            e = e > dim ? dim : (e < 0 ? 0 : e);
            od[d] = e > s ? (e - s + step - 1) / step : 0;
        } else {
            s = s > dim - 1 ? dim - 1 : s;
            e = e > dim - 1 ? dim - 1 : e;
            od[d] = s > e ? (s - e - step - 1) / -step : 0;
        }
        a->starts[d] = s;
        a->steps[d] = step;
    }
    return set_out(g, nd, 0, x->dtype, x->rank, od, err, errlen);
}

static int reshape(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *x = in_t(g, nd, 0);
    int64_t sh[NX_MAX_RANK];
    uint32_t n;
    if (const_ints(g, nd, 1, sh, NX_MAX_RANK, &n, "shape", err, errlen))
        return -1;
    int64_t known = 1;
    int infer = -1;
    for (uint32_t d = 0; d < n; d++) {
        if (sh[d] == 0) {
            if (d >= x->rank)
                NODE_FAIL("0 in shape at dim %u beyond the input's rank", d);
            sh[d] = x->dims[d];
        }
        if (sh[d] == -1) {
            if (infer >= 0)
                NODE_FAIL("more than one -1 in shape");
            infer = (int)d;
            continue;
        }
        if (sh[d] < 0 || sh[d] > NX_MAX_DIM)
            NODE_FAIL("shape dim %u is %lld", d, (long long)sh[d]);
        known *= sh[d];
        if (known > (int64_t)NX_MAX_ELEMS)
            NODE_FAIL("shape too large");
    }
    int64_t total = (int64_t)nx_elems(x);
    if (infer >= 0) {
        if (known == 0 || total % known)
            NODE_FAIL("%lld elements cannot take that shape", (long long)total);
        sh[infer] = total / known;
    } else if (known != total) {
        NODE_FAIL("%lld elements cannot take a shape of %lld", (long long)total, (long long)known);
    }
    return set_out(g, nd, 0, x->dtype, n, sh, err, errlen);
}

static int squeeze(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *x = in_t(g, nd, 0);
    struct nx_attrs *a = &nd->a;
    int unsq = nd->op == NX_OP_UNSQUEEZE;
    if (g->opset >= 13 && in_t(g, nd, 1)) {
        if (const_ints(g, nd, 1, a->axes, NX_MAX_RANK, &a->n_axes, "axes", err, errlen))
            return -1;
        a->has_axes = 1;
    }
    int64_t od[NX_MAX_RANK];
    uint32_t r = 0;
    if (unsq) {
        uint32_t out_rank = x->rank + a->n_axes;
        if (!a->n_axes || out_rank > NX_MAX_RANK)
            NODE_FAIL("axes missing or rank above %d", NX_MAX_RANK);
        int mark[NX_MAX_RANK] = {0};
        for (uint32_t k = 0; k < a->n_axes; k++) {
            int64_t ax;
            if (norm_axis(a->axes[k], out_rank, &ax) || mark[ax])
                NODE_FAIL("axis %lld out of range or repeated", (long long)a->axes[k]);
            mark[ax] = 1;
        }
        uint32_t src = 0;
        for (uint32_t d = 0; d < out_rank; d++)
            od[d] = mark[d] ? 1 : x->dims[src++];
        r = out_rank;
    } else {
        int drop[NX_MAX_RANK] = {0};
        for (uint32_t k = 0; k < a->n_axes; k++) {
            int64_t ax;
            if (norm_axis(a->axes[k], x->rank, &ax) || x->dims[ax] != 1)
                NODE_FAIL("axis %lld is out of range or not of size 1", (long long)a->axes[k]);
            drop[ax] = 1;
        }
        for (uint32_t d = 0; d < x->rank; d++)
            if (!(a->has_axes ? drop[d] : x->dims[d] == 1))
                od[r++] = x->dims[d];
    }
    return set_out(g, nd, 0, x->dtype, r, od, err, errlen);
}

static int matmul(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *A = in_t(g, nd, 0), *B = in_t(g, nd, 1);
    if (A->rank < 2 || B->rank < 2 || A->dtype != NX_F32 || B->dtype != NX_F32)
        NODE_FAIL("float operands of rank 2 or more only");
    if (A->dims[A->rank - 1] != B->dims[B->rank - 2])
        NODE_FAIL("inner dims %lld and %lld differ", (long long)A->dims[A->rank - 1],
                  (long long)B->dims[B->rank - 2]);
    uint32_t r = A->rank > B->rank ? A->rank : B->rank;
    int64_t od[NX_MAX_RANK];
    for (uint32_t d = 0; d + 2 < r; d++) {
        int64_t da = d + A->rank >= r ? A->dims[d + A->rank - r] : 1;
        int64_t db = d + B->rank >= r ? B->dims[d + B->rank - r] : 1;
        if (da != db && da != 1 && db != 1)
            NODE_FAIL("batch dims %lld and %lld cannot broadcast", (long long)da, (long long)db);
        od[d] = da == 1 ? db : da;
    }
    od[r - 2] = A->dims[A->rank - 2];
    od[r - 1] = B->dims[B->rank - 1];
    return set_out(g, nd, 0, NX_F32, r, od, err, errlen);
}

static int gemm(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *A = in_t(g, nd, 0), *B = in_t(g, nd, 1), *C = in_t(g, nd, 2);
    if (A->rank != 2 || B->rank != 2 || A->dtype != NX_F32 || B->dtype != NX_F32)
        NODE_FAIL("float 2-D operands only");
    int64_t m = A->dims[nd->a.trans_a], k = A->dims[!nd->a.trans_a];
    int64_t k2 = B->dims[nd->a.trans_b], n = B->dims[!nd->a.trans_b];
    if (k != k2)
        NODE_FAIL("inner dims %lld and %lld differ", (long long)k, (long long)k2);
    if (C && (C->dtype != NX_F32 || C->rank > 2 ||
              (C->rank >= 1 && C->dims[C->rank - 1] != n && C->dims[C->rank - 1] != 1) ||
              (C->rank == 2 && C->dims[0] != m && C->dims[0] != 1)))
        NODE_FAIL("C does not broadcast to %lldx%lld", (long long)m, (long long)n);
    int64_t od[2] = {m, n};
    return set_out(g, nd, 0, NX_F32, 2, od, err, errlen);
}

static const struct {
    uint8_t lo, hi;
} arity[] = {
    [NX_OP_CONV] = {2, 3},      [NX_OP_CONV_T] = {2, 3},   [NX_OP_BN] = {5, 5},
    [NX_OP_RELU] = {1, 1},      [NX_OP_CLIP] = {1, 3},     [NX_OP_HSIGMOID] = {1, 1},
    [NX_OP_HSWISH] = {1, 1},    [NX_OP_SIGMOID] = {1, 1},  [NX_OP_ADD] = {2, 2},
    [NX_OP_SUB] = {2, 2},       [NX_OP_MUL] = {2, 2},      [NX_OP_DIV] = {2, 2},
    [NX_OP_POW] = {2, 2},       [NX_OP_SQRT] = {1, 1},     [NX_OP_REDUCEMEAN] = {1, 2},
    [NX_OP_MAXPOOL] = {1, 1},   [NX_OP_AVGPOOL] = {1, 1},  [NX_OP_GAP] = {1, 1},
    [NX_OP_RESIZE] = {2, 4},    [NX_OP_CONCAT] = {1, 255}, [NX_OP_FLATTEN] = {1, 1},
    [NX_OP_RESHAPE] = {2, 2},   [NX_OP_SQUEEZE] = {1, 2},  [NX_OP_UNSQUEEZE] = {1, 2},
    [NX_OP_TRANSPOSE] = {1, 1}, [NX_OP_SLICE] = {1, 5},    [NX_OP_SHAPE] = {1, 1},
    [NX_OP_CAST] = {1, 1},      [NX_OP_GATHER] = {2, 2},   [NX_OP_GEMM] = {2, 3},
    [NX_OP_MATMUL] = {2, 2},    [NX_OP_SOFTMAX] = {1, 1},  [NX_OP_IDENTITY] = {1, 1},
};

int nx_infer(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_attrs *a = &nd->a;
    if (nd->op >= sizeof arity / sizeof arity[0] || nd->n_in < arity[nd->op].lo ||
        (nd->n_in > arity[nd->op].hi && nd->op != NX_OP_CONCAT))
        NODE_FAIL("%u inputs", nd->n_in);
    if (nd->op == NX_OP_CONCAT && nd->n_in > NX_MAX_NODE_IO)
        NODE_FAIL("%u inputs", nd->n_in);
    if (nd->n_out != 1 && nd->op != NX_OP_BN && nd->op != NX_OP_MAXPOOL)
        NODE_FAIL("%u outputs (one expected)", nd->n_out);
    if (nd->op == NX_OP_BN && nd->n_out != 1)
        NODE_FAIL("training-mode outputs are not supported");
    for (uint32_t i = 0; i < arity[nd->op].lo; i++) /* Resize's roi may be left out */
        if (!in_t(g, nd, i) && !(nd->op == NX_OP_RESIZE && i == 1))
            NODE_FAIL("input %u is missing", i);
    if (nd->out[0] < 0)
        NODE_FAIL("the first output has no name");
    for (uint32_t i = 0; i < nd->n_in; i++) {
        struct nx_tensor *t = in_t(g, nd, i);
        if (t && !t->shape_known)
            NODE_FAIL("input '%s' has no known shape", t->name);
    }
    struct nx_tensor *x = in_t(g, nd, 0);
    int64_t od[NX_MAX_RANK];
    switch (nd->op) {
    case NX_OP_CONV:
    case NX_OP_CONV_T: return conv(g, nd, err, errlen);
    case NX_OP_MAXPOOL:
    case NX_OP_AVGPOOL:
    case NX_OP_GAP: return pool(g, nd, err, errlen);
    case NX_OP_BN:
        if (x->rank < 2 || x->dtype != NX_F32 || !nx_elems(x))
            NODE_FAIL("non-empty float input of rank 2 or more only");
        for (uint32_t i = 1; i < 5; i++) {
            struct nx_tensor *p = in_t(g, nd, i);
            if (!p || p->rank != 1 || p->dims[0] != x->dims[1] || p->dtype != NX_F32)
                NODE_FAIL("parameter %u must be %lld floats", i, (long long)x->dims[1]);
        }
        return set_out(g, nd, 0, NX_F32, x->rank, x->dims, err, errlen);
    case NX_OP_CLIP:
        for (uint32_t i = 1; i < nd->n_in && i < 3; i++) {
            struct nx_tensor *b = in_t(g, nd, i);
            if (!b)
                continue;
            if (!b->is_const || b->dtype != NX_F32 || nx_elems(b) != 1)
                NODE_FAIL("bound %u must be a constant float scalar", i);
            *(i == 1 ? &a->lo : &a->hi) = b->f[0];
        }
        /* fall through */
    case NX_OP_RELU:
    case NX_OP_HSIGMOID:
    case NX_OP_HSWISH:
    case NX_OP_SIGMOID:
    case NX_OP_SQRT:
        if (x->dtype != NX_F32)
            NODE_FAIL("float input only");
        /* fall through */
    case NX_OP_IDENTITY: return set_out(g, nd, 0, x->dtype, x->rank, x->dims, err, errlen);
    case NX_OP_ADD:
    case NX_OP_SUB:
    case NX_OP_MUL:
    case NX_OP_DIV:
    case NX_OP_POW:
        if (nd->op != NX_OP_POW && (in_t(g, nd, 1)->dtype == NX_F32) != (x->dtype == NX_F32))
            NODE_FAIL("operands of different element types");
        if (nd->op == NX_OP_POW && x->dtype != NX_F32)
            NODE_FAIL("float base only");
        return broadcast(g, nd, err, errlen);
    case NX_OP_REDUCEMEAN: {
        if (x->dtype != NX_F32)
            NODE_FAIL("float input only");
        if (in_t(g, nd, 1)) {
            if (const_ints(g, nd, 1, a->axes, NX_MAX_RANK, &a->n_axes, "axes", err, errlen))
                return -1;
            a->has_axes = 1;
        }
        int red[NX_MAX_RANK] = {0};
        for (uint32_t k = 0; k < a->n_axes; k++) {
            int64_t ax;
            if (norm_axis(a->axes[k], x->rank, &ax))
                NODE_FAIL("axis %lld out of range", (long long)a->axes[k]);
            red[ax] = 1;
        }
        uint32_t r = 0;
        for (uint32_t d = 0; d < x->rank; d++) {
            int rd = a->has_axes ? red[d] : 1;
            a->perm[d] = rd; /* the executor reads which dims are reduced from perm */
            if (!rd)
                od[r++] = x->dims[d];
            else if (a->keepdims)
                od[r++] = 1;
        }
        return set_out(g, nd, 0, NX_F32, r, od, err, errlen);
    }
    case NX_OP_RESIZE: return resize(g, nd, err, errlen);
    case NX_OP_CONCAT: {
        int64_t ax;
        if (norm_axis(a->axis, x->rank, &ax))
            NODE_FAIL("axis %lld out of range", (long long)a->axis);
        a->axis = ax;
        memcpy(od, x->dims, sizeof od);
        od[ax] = 0;
        for (uint32_t i = 0; i < nd->n_in; i++) {
            struct nx_tensor *t = in_t(g, nd, i);
            if (!t || t->rank != x->rank || (t->dtype == NX_F32) != (x->dtype == NX_F32))
                NODE_FAIL("input %u differs in rank or type", i);
            for (uint32_t d = 0; d < x->rank; d++)
                if (d != ax && t->dims[d] != x->dims[d])
                    NODE_FAIL("input %u differs at dim %u", i, d);
            od[ax] += t->dims[ax];
        }
        return set_out(g, nd, 0, x->dtype, x->rank, od, err, errlen);
    }
    case NX_OP_FLATTEN: {
        int64_t ax = a->axis < 0 ? a->axis + x->rank : a->axis;
        if (ax < 0 || ax > (int64_t)x->rank)
            NODE_FAIL("axis %lld out of range", (long long)a->axis);
        od[0] = od[1] = 1;
        for (uint32_t d = 0; d < x->rank; d++)
            od[d >= ax] *= x->dims[d];
        return set_out(g, nd, 0, x->dtype, 2, od, err, errlen);
    }
    case NX_OP_RESHAPE: return reshape(g, nd, err, errlen);
    case NX_OP_SQUEEZE:
    case NX_OP_UNSQUEEZE: return squeeze(g, nd, err, errlen);
    case NX_OP_TRANSPOSE: {
        if (!a->n_perm) {
            a->n_perm = x->rank;
            for (uint32_t d = 0; d < x->rank; d++)
                a->perm[d] = x->rank - 1 - d;
        }
        if (a->n_perm != x->rank)
            NODE_FAIL("perm has %u entries for rank %u", a->n_perm, x->rank);
        int seen[NX_MAX_RANK] = {0};
        for (uint32_t d = 0; d < x->rank; d++) {
            if (a->perm[d] < 0 || a->perm[d] >= x->rank || seen[a->perm[d]]++)
                NODE_FAIL("perm is not a permutation");
            od[d] = x->dims[a->perm[d]];
        }
        return set_out(g, nd, 0, x->dtype, x->rank, od, err, errlen);
    }
    case NX_OP_SLICE: return slice(g, nd, err, errlen);
    case NX_OP_SHAPE: od[0] = x->rank; return set_out(g, nd, 0, NX_I64, 1, od, err, errlen);
    case NX_OP_CAST: return set_out(g, nd, 0, a->to, x->rank, x->dims, err, errlen);
    case NX_OP_GATHER: {
        struct nx_tensor *ix = in_t(g, nd, 1);
        int64_t ax;
        if (norm_axis(a->axis, x->rank, &ax) || ix->dtype == NX_F32 ||
            x->rank + ix->rank > NX_MAX_RANK + 1)
            NODE_FAIL("axis out of range, float indices, or rank too high");
        a->axis = ax;
        uint32_t r = 0;
        for (uint32_t d = 0; d < ax; d++)
            od[r++] = x->dims[d];
        for (uint32_t d = 0; d < ix->rank; d++)
            od[r++] = ix->dims[d];
        for (uint32_t d = (uint32_t)ax + 1; d < x->rank; d++)
            od[r++] = x->dims[d];
        return set_out(g, nd, 0, x->dtype, r, od, err, errlen);
    }
    case NX_OP_GEMM: return gemm(g, nd, err, errlen);
    case NX_OP_MATMUL: return matmul(g, nd, err, errlen);
    case NX_OP_SOFTMAX: {
        int64_t ax;
        if (x->dtype != NX_F32 || norm_axis(a->axis, x->rank, &ax))
            NODE_FAIL("float input and an axis in range only");
        a->axis = ax;
        return set_out(g, nd, 0, NX_F32, x->rank, x->dims, err, errlen);
    }
    default: NODE_FAIL("cannot be resolved");
    }
}
