/* Rewrites of the resolved graph that keep its results and shape it for
 * the runtime: BatchNormalization, and a per-channel Mul or Add,
 * folded into the Conv or ConvTranspose before it,
 * x*Clip(x+3,0,6)/6 and x*HardSigmoid(x) (1/6, 1/2) recognised as
 * HardSwish, an activation after a Conv moved into the Conv's epilogue
 * (and a scalar Mul or Add after that activation too),
 * and GlobalAveragePool -> Conv -> act -> Conv -> act -> Mul recognised
 * as one squeeze-excite node, and the ReduceMean/Sub/Pow/Sqrt/Div layer
 * norm (with its Mul and Add) as one LayerNorm node, and last an Add of
 * a Conv's output and another value of its shape as the Conv's residual
 * (with the activation after it). Each rewrite requires the intermediate
 * values to have no other consumer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/onnx/onnx_infer.h"
#include "tools/compiler/onnx/onnx_ir.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

/* The live node that makes tensor t, or NULL. */
static struct nx_node *producer(struct nx_graph *g, int32_t t)
{
    if (t < 0 || g->t[t].producer < 0)
        return NULL;
    struct nx_node *nd = &g->n[g->t[t].producer];
    return nd->op == NX_OP_DEAD ? NULL : nd;
}

static int single_use(const struct nx_graph *g, int32_t t)
{
    return t >= 0 && g->t[t].n_uses == 1 && !g->t[t].is_output;
}

static int const_scalar(const struct nx_graph *g, int32_t t, double want)
{
    if (t < 0 || !g->t[t].is_const || g->t[t].dtype != NX_F32 || nx_elems(&g->t[t]) != 1)
        return 0;
    return fabs(g->t[t].f[0] - want) <= 1e-6 * fabs(want);
}

static int const_f32(const struct nx_graph *g, int32_t t)
{
    return t >= 0 && g->t[t].is_const && g->t[t].dtype == NX_F32 && g->t[t].f;
}

/* A new constant tensor of the shape of tensor `like` (index), named
 * BASE.SUFFIX: its index, or -1. */
static int32_t new_const(struct nx_graph *g, int32_t like, const char *base, const char *suffix)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", base, suffix);
    int32_t t = nx_add_tensor(g, name);
    if (t < 0)
        return -1;
    struct nx_tensor *nt = &g->t[t], *lt = &g->t[like];
    nt->dtype = NX_F32;
    nt->rank = lt->rank;
    memcpy(nt->dims, lt->dims, sizeof nt->dims);
    nt->shape_known = nt->is_const = 1;
    return nx_alloc_data(nt) ? -1 : t;
}

/* A Conv or ConvTranspose whose weights and bias are constants and whose
 * epilogue is still empty: a node a per-channel affine folds into. */
static int foldable_conv(const struct nx_graph *g, const struct nx_node *cv)
{
    return cv && (cv->op == NX_OP_CONV || cv->op == NX_OP_CONV_T) && cv->a.act == NX_ACT_NONE &&
           const_f32(g, cv->in[1]) && (cv->n_in < 3 || cv->in[2] < 0 || const_f32(g, cv->in[2]));
}

/* The output channel weight element i of cv feeds: a Conv's weights are
 * M x C/group x kh x kw, a ConvTranspose's C x M/group x kh x kw (the
 * input channels of group g give output channels g * M/group ...). */
static int64_t weight_channel(const struct nx_node *cv, const struct nx_tensor *W, uint64_t i)
{
    const uint64_t per = nx_elems(W) / (uint64_t)W->dims[0];
    if (cv->op == NX_OP_CONV)
        return (int64_t)(i / per);
    const int64_t ocg = W->dims[1], icg = W->dims[0] / (cv->a.group > 0 ? cv->a.group : 1);
    const int64_t ic = (int64_t)(i / per), j = (int64_t)(i % per) / (int64_t)(per / ocg);
    return ic / icg * ocg + j;
}

/* BatchNormalization bn's scale for channel m: scale / sqrt(var + eps). */
static double bn_scale(const struct nx_graph *g, const struct nx_node *bn, int64_t m)
{
    return g->t[bn->in[1]].f[m] / sqrt((double)g->t[bn->in[4]].f[m] + bn->a.epsilon);
}

/* Conv (or ConvTranspose) -> BatchNormalization: w' = w * s, b' = (b -
 * mean) * s + beta with s = scale / sqrt(var + eps), per output channel. */
static int fold_bn(struct nx_graph *g, char *err, size_t errlen)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *bn = &g->n[g->order[k]];
        if (bn->op != NX_OP_BN)
            continue;
        struct nx_node *cv = producer(g, bn->in[0]);
        if (!foldable_conv(g, cv) || !single_use(g, bn->in[0]))
            continue;
        int ok = 1;
        for (uint32_t i = 1; i < 5; i++)
            ok &= const_f32(g, bn->in[i]);
        if (!ok)
            continue;
        int32_t w = cv->in[1], b = cv->n_in > 2 ? cv->in[2] : -1;
        int32_t nw = new_const(g, w, cv->name, "weight_bn");
        int32_t nb = nw < 0 ? -1 : new_const(g, bn->in[1], cv->name, "bias_bn");
        if (nb < 0)
            FAIL("out of memory folding node '%s'", bn->name);
        const struct nx_tensor *W = &g->t[w], *be = &g->t[bn->in[2]], *mu = &g->t[bn->in[3]];
        const int64_t M = g->t[bn->out[0]].dims[1];
        for (uint64_t i = 0; i < nx_elems(W); i++)
            g->t[nw].f[i] = (float)(W->f[i] * bn_scale(g, bn, weight_channel(cv, W, i)));
        for (int64_t m = 0; m < M; m++) {
            double s = bn_scale(g, bn, m);
            double bias = b >= 0 ? g->t[b].f[m] : 0;
            g->t[nb].f[m] = (float)((bias - mu->f[m]) * s + be->f[m]);
        }
        if (cv->n_in < 3) {
            int32_t *in = realloc(cv->in, 3 * sizeof *in);
            if (!in)
                FAIL("out of memory");
            cv->in = in;
            cv->n_in = 3;
        }
        cv->in[1] = nw;
        cv->in[2] = nb;
        cv->out[0] = bn->out[0];
        g->t[bn->out[0]].producer = (int32_t)(cv - g->n);
        bn->op = NX_OP_DEAD;
    }
    nx_compact(g);
    return 0;
}

/* A constant that broadcasts per output channel onto an N x M x H x W
 * tensor: a scalar, or M values on dim 1 (shape [M,1,1] or [1,M,1,1]).
 * Its value for channel m, through *stride (0 or 1); 0 when it is not. */
static int per_channel(const struct nx_graph *g, int32_t t, int64_t M, int *stride)
{
    if (!const_f32(g, t))
        return 0;
    const struct nx_tensor *c = &g->t[t];
    uint64_t n = nx_elems(c);
    if (n == 1) {
        *stride = 0;
        return c->rank <= 4;
    }
    if (n != (uint64_t)M || c->rank < 3 || c->rank > 4 || c->dims[c->rank - 3] != M)
        return 0;
    *stride = 1;
    return 1;
}

/* Conv -> Mul(c) and Conv -> Add(c) with c per channel fold into the
 * Conv's weights and bias (the exports of PP-LCNetV3's learnable affine
 * blocks): w' = w*c, b' = b*c for Mul; b' = b + c for Add. */
static int fold_affine(struct nx_graph *g, char *err, size_t errlen)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *op = &g->n[g->order[k]];
        if ((op->op != NX_OP_MUL && op->op != NX_OP_ADD) || op->n_in != 2)
            continue;
        for (int s = 0; s < 2; s++) {
            struct nx_node *cv = producer(g, op->in[s]);
            if (!foldable_conv(g, cv) || !single_use(g, op->in[s]))
                continue;
            const struct nx_tensor *y = &g->t[op->in[s]], *o = &g->t[op->out[0]];
            int64_t M = y->dims[1];
            int stride;
            if (!per_channel(g, op->in[!s], M, &stride) || o->rank != 4 ||
                memcmp(o->dims, y->dims, sizeof o->dims))
                continue;
            int32_t w = cv->in[1], b = cv->n_in > 2 ? cv->in[2] : -1, c = op->in[!s];
            int32_t nw = op->op == NX_OP_MUL ? new_const(g, w, cv->name, "weight_affine") : w;
            int32_t nb = -1;
            if (nw >= 0) { /* a bias of M values, made like the BN fold's */
                char name[512];
                snprintf(name, sizeof name, "%s.bias_affine", cv->name);
                nb = nx_add_tensor(g, name);
                if (nb >= 0) {
                    struct nx_tensor *bt = &g->t[nb];
                    bt->dtype = NX_F32;
                    bt->rank = 1;
                    bt->dims[0] = M;
                    bt->shape_known = bt->is_const = 1;
                    if (nx_alloc_data(bt))
                        nb = -1;
                }
            }
            if (nb < 0)
                FAIL("out of memory folding node '%s'", op->name);
            const struct nx_tensor *W = &g->t[w], *C = &g->t[c];
            if (op->op == NX_OP_MUL)
                for (uint64_t i = 0; i < nx_elems(W); i++)
                    g->t[nw].f[i] = W->f[i] * C->f[weight_channel(cv, W, i) * stride];
            for (int64_t m = 0; m < M; m++) {
                float cm = C->f[m * stride], bias = b >= 0 ? g->t[b].f[m] : 0.0f;
                g->t[nb].f[m] = op->op == NX_OP_MUL ? bias * cm : bias + cm;
            }
            if (cv->n_in < 3) {
                int32_t *in = realloc(cv->in, 3 * sizeof *in);
                if (!in)
                    FAIL("out of memory");
                cv->in = in;
                cv->n_in = 3;
            }
            cv->in[1] = nw;
            cv->in[2] = nb;
            cv->out[0] = op->out[0];
            g->t[op->out[0]].producer = (int32_t)(cv - g->n);
            op->op = NX_OP_DEAD;
            break;
        }
    }
    nx_compact(g);
    return 0;
}

/* The operand of a two-input node that is not `t`, or -1 when neither
 * or both are. */
static int32_t other(const struct nx_node *nd, int32_t t)
{
    if (nd->n_in != 2)
        return -1;
    if (nd->in[0] == t && nd->in[1] != t)
        return nd->in[1];
    if (nd->in[1] == t && nd->in[0] != t)
        return nd->in[0];
    return -1;
}

static void become_hswish(struct nx_node *last, int32_t x)
{
    last->op = NX_OP_HSWISH;
    last->in[0] = x;
    last->n_in = 1;
}

static void hard_swish(struct nx_graph *g)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *nd = &g->n[g->order[k]];
        if (nd->op == NX_OP_MUL) { /* x * HardSigmoid(x, 1/6, 1/2) */
            for (int s = 0; s < 2; s++) {
                struct nx_node *hs = producer(g, nd->in[s]);
                if (hs && hs->op == NX_OP_HSIGMOID && single_use(g, nd->in[s]) &&
                    hs->in[0] == nd->in[!s] && fabsf(hs->a.alpha - 1.0f / 6) < 1e-6f &&
                    hs->a.beta == 0.5f) {
                    int32_t x = hs->in[0];
                    hs->op = NX_OP_DEAD;
                    become_hswish(nd, x);
                    break;
                }
            }
            continue;
        }
        if (nd->op != NX_OP_DIV || !const_scalar(g, nd->in[1], 6.0))
            continue;
        /* Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6) */
        struct nx_node *mul = producer(g, nd->in[0]);
        if (!mul || mul->op != NX_OP_MUL || !single_use(g, nd->in[0]))
            continue;
        for (int s = 0; s < 2; s++) {
            struct nx_node *clip = producer(g, mul->in[s]);
            if (!clip || clip->op != NX_OP_CLIP || !single_use(g, mul->in[s]) ||
                clip->a.lo != 0.0f || clip->a.hi != 6.0f)
                continue;
            struct nx_node *add = producer(g, clip->in[0]);
            int32_t x = mul->in[!s];
            if (!add || add->op != NX_OP_ADD || !single_use(g, clip->in[0]) ||
                !const_scalar(g, other(add, x), 3.0))
                continue;
            /* shapes must be x's: the constants broadcast, never x */
            const struct nx_tensor *xt = &g->t[x], *yt = &g->t[nd->out[0]];
            if (xt->rank != yt->rank || memcmp(xt->dims, yt->dims, sizeof xt->dims))
                continue;
            add->op = clip->op = mul->op = NX_OP_DEAD;
            become_hswish(nd, x);
            break;
        }
    }
    nx_compact(g);
}

static enum nx_act as_act(const struct nx_node *nd, float *p, float *q)
{
    *p = *q = 0;
    switch (nd->op) {
    case NX_OP_RELU: return NX_ACT_RELU;
    case NX_OP_CLIP: *p = nd->a.lo, *q = nd->a.hi; return NX_ACT_CLIP;
    case NX_OP_HSIGMOID: *p = nd->a.alpha, *q = nd->a.beta; return NX_ACT_HSIGMOID;
    case NX_OP_HSWISH: return NX_ACT_HSWISH;
    case NX_OP_SIGMOID: return NX_ACT_SIGMOID;
    default: return NX_ACT_NONE;
    }
}

/* An activation after a Conv (or, once a residual is fused, after its
 * Add: then only one the convolution kernels run in their epilogue). */
static void fuse_act(struct nx_graph *g)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *ac = &g->n[g->order[k]];
        float p, q;
        enum nx_act a = as_act(ac, &p, &q);
        struct nx_node *cv = a != NX_ACT_NONE ? producer(g, ac->in[0]) : NULL;
        if (!cv || (cv->op != NX_OP_CONV && cv->op != NX_OP_CONV_T) || cv->a.act != NX_ACT_NONE ||
            !single_use(g, ac->in[0]) || (cv->a.res && a == NX_ACT_SIGMOID))
            continue;
        cv->a.act = a;
        cv->a.act_a = p;
        cv->a.act_b = q;
        cv->out[0] = ac->out[0];
        g->t[ac->out[0]].producer = (int32_t)(cv - g->n);
        ac->op = NX_OP_DEAD;
    }
    nx_compact(g);
}

/* Conv+act -> Mul(scalar) / Add(scalar): an affine after the activation
 * (PP-LCNetV3's learnable affine blocks) joins the epilogue. */
static void fuse_post_affine(struct nx_graph *g)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *op = &g->n[g->order[k]];
        if ((op->op != NX_OP_MUL && op->op != NX_OP_ADD) || op->n_in != 2)
            continue;
        for (int s = 0; s < 2; s++) {
            struct nx_node *cv = producer(g, op->in[s]);
            int32_t c = op->in[!s];
            if (!cv || (cv->op != NX_OP_CONV && cv->op != NX_OP_CONV_T) ||
                cv->a.act == NX_ACT_NONE || !single_use(g, op->in[s]) || !const_f32(g, c) ||
                nx_elems(&g->t[c]) != 1 || g->t[c].rank > g->t[op->in[s]].rank)
                continue;
            float v = g->t[c].f[0];
            if (op->op == NX_OP_MUL) {
                cv->a.post_mul *= v;
                cv->a.post_add *= v;
            } else {
                cv->a.post_add += v;
            }
            cv->out[0] = op->out[0];
            g->t[op->out[0]].producer = (int32_t)(cv - g->n);
            op->op = NX_OP_DEAD;
            break;
        }
    }
    nx_compact(g);
}

/* The position of node index i in g->order. */
static uint32_t order_pos(const struct nx_graph *g, uint32_t i)
{
    uint32_t k = 0;
    while (k < g->n_order && g->order[k] != i)
        k++;
    return k;
}

/* A Conv whose output only an Add reads, whose epilogue can take a
 * residual (no affine after the activation, an activation the kernels run
 * in their epilogue, none fused yet), and r: a runtime value of the
 * Conv's output shape. */
static int residual_ok(const struct nx_graph *g, const struct nx_node *cv, int32_t y, int32_t r)
{
    const struct nx_tensor *yt = &g->t[y], *rt = &g->t[r];
    return cv->op == NX_OP_CONV && !cv->a.res && cv->a.act != NX_ACT_SIGMOID &&
           cv->a.post_mul == 1.0f && cv->a.post_add == 0.0f && single_use(g, y) && r != y &&
           !rt->is_const && rt->dtype == NX_F32 && yt->rank == 4 && rt->rank == 4 &&
           yt->dims[0] == 1 && !memcmp(yt->dims, rt->dims, sizeof yt->dims);
}

/* Conv (+act) -> Add(other value of its shape): the Add joins the Conv's
 * epilogue as a residual (ResNet's add before the ReLU, which fuse_act
 * then takes in; MobileNet's add after the activation). The Conv takes
 * the Add's place in the order, where the residual exists; of two Convs
 * the later one is chosen, so the least moves. The sum is the same f32
 * addition either way: the fused graph gives the same bits. */
static int fuse_residual(struct nx_graph *g, char *err, size_t errlen)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *add = &g->n[g->order[k]];
        if (add->op != NX_OP_ADD || add->n_in != 2)
            continue;
        struct nx_node *cv = NULL;
        uint32_t best = 0;
        int side = 0;
        for (int s = 0; s < 2; s++) {
            struct nx_node *c = producer(g, add->in[s]);
            if (!c || !residual_ok(g, c, add->in[s], add->in[!s]))
                continue;
            uint32_t pos = order_pos(g, (uint32_t)(c - g->n));
            if (!cv || pos > best)
                cv = c, best = pos, side = s;
        }
        if (!cv)
            continue;
        int32_t *in = realloc(cv->in, 4 * sizeof *in);
        if (!in)
            FAIL("out of memory");
        cv->in = in;
        for (uint32_t i = cv->n_in; i < 3; i++)
            in[i] = -1;
        in[3] = add->in[!side];
        cv->n_in = 4;
        cv->a.res = cv->a.act == NX_ACT_NONE ? 1 : 2;
        cv->out[0] = add->out[0];
        g->t[add->out[0]].producer = (int32_t)(cv - g->n);
        g->order[best] = g->order[k]; /* the Add, dead, where the Conv was */
        g->order[k] = (uint32_t)(cv - g->n);
        add->op = NX_OP_DEAD;
    }
    nx_compact(g);
    return 0;
}

static int pointwise(const struct nx_graph *g, const struct nx_node *cv)
{
    const struct nx_attrs *a = &cv->a;
    return cv->op == NX_OP_CONV && a->group == 1 && a->post_mul == 1.0f && a->post_add == 0.0f &&
           a->kernel[0] == 1 && a->kernel[1] == 1 && a->strides[0] == 1 && a->strides[1] == 1 &&
           !a->pads[0] && !a->pads[1] && !a->pads[2] && !a->pads[3] && const_f32(g, cv->in[1]) &&
           (cv->n_in < 3 || cv->in[2] < 0 || const_f32(g, cv->in[2]));
}

static int squeeze_excite(struct nx_graph *g, char *err, size_t errlen)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *mul = &g->n[g->order[k]];
        if (mul->op != NX_OP_MUL)
            continue;
        for (int s = 0; s < 2; s++) {
            int32_t x = mul->in[!s];
            struct nx_node *c2 = producer(g, mul->in[s]);
            if (!c2 || !pointwise(g, c2) || !single_use(g, mul->in[s]))
                continue;
            struct nx_node *c1 = producer(g, c2->in[0]);
            if (!c1 || !pointwise(g, c1) || !single_use(g, c2->in[0]))
                continue;
            struct nx_node *gap = producer(g, c1->in[0]);
            if (!gap || gap->op != NX_OP_GAP || gap->in[0] != x || !single_use(g, c1->in[0]))
                continue;
            const struct nx_tensor *xt = &g->t[x], *yt = &g->t[mul->out[0]];
            if (xt->rank != 4 || memcmp(xt->dims, yt->dims, sizeof xt->dims))
                continue;
            int32_t *in = realloc(mul->in, 5 * sizeof *in);
            if (!in)
                FAIL("out of memory");
            mul->in = in;
            mul->n_in = 5;
            in[0] = x;
            in[1] = c1->in[1];
            in[2] = c1->n_in > 2 ? c1->in[2] : -1;
            in[3] = c2->in[1];
            in[4] = c2->n_in > 2 ? c2->in[2] : -1;
            mul->op = NX_OP_SE;
            mul->a.act = c1->a.act, mul->a.act_a = c1->a.act_a, mul->a.act_b = c1->a.act_b;
            mul->a.act2 = c2->a.act, mul->a.act2_a = c2->a.act_a, mul->a.act2_b = c2->a.act_b;
            gap->op = c1->op = c2->op = NX_OP_DEAD;
            break;
        }
    }
    nx_compact(g);
    return 0;
}

/* The one live node that reads t, when t has exactly one use (uses[]:
 * each tensor's last reader, taken before the pass; rewrites keep the
 * edges they do not remove). */
static struct nx_node *consumer(struct nx_graph *g, const int32_t *reader, int32_t t)
{
    if (!single_use(g, t) || reader[t] < 0)
        return NULL;
    struct nx_node *nd = &g->n[reader[t]];
    return nd->op == NX_OP_DEAD ? NULL : nd;
}

/* ReduceMean over the last axis only, keeping it. */
static int mean_last(const struct nx_graph *g, const struct nx_node *nd)
{
    if (!nd || nd->op != NX_OP_REDUCEMEAN || !nd->a.keepdims)
        return 0;
    const struct nx_tensor *x = &g->t[nd->in[0]];
    for (uint32_t d = 0; d < x->rank; d++)
        if (nd->a.perm[d] != (d + 1 == x->rank))
            return 0;
    return x->rank > 0;
}

/* A constant of one value or one per element of the last axis (n). */
static int per_last(const struct nx_graph *g, int32_t t, int64_t n)
{
    if (!const_f32(g, t))
        return 0;
    const struct nx_tensor *c = &g->t[t];
    uint64_t e = nx_elems(c);
    return e == 1 || (e == (uint64_t)n && c->rank >= 1 && c->dims[c->rank - 1] == n);
}

/* d = x - ReduceMean(x); Div(d, Sqrt(ReduceMean(Pow(d, 2)) + eps)), then
 * optionally Mul(gamma) and Add(beta), all over the last axis: one
 * LayerNorm node (the recogniser's transformer blocks). */
static int layer_norm(struct nx_graph *g, char *err, size_t errlen)
{
    int32_t *reader = malloc((g->n_t + 1) * sizeof *reader);
    if (!reader)
        FAIL("out of memory");
    for (uint32_t t = 0; t < g->n_t; t++)
        reader[t] = -1;
    for (uint32_t k = 0; k < g->n_order; k++)
        for (uint32_t i = 0; i < g->n[g->order[k]].n_in; i++)
            if (g->n[g->order[k]].in[i] >= 0)
                reader[g->n[g->order[k]].in[i]] = (int32_t)g->order[k];
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *div = &g->n[g->order[k]];
        if (div->op != NX_OP_DIV)
            continue;
        struct nx_node *sub = producer(g, div->in[0]), *sq = producer(g, div->in[1]);
        if (!sub || sub->op != NX_OP_SUB || !sq || sq->op != NX_OP_SQRT ||
            !single_use(g, div->in[1]) || g->t[div->in[0]].n_uses != 2)
            continue;
        int32_t x = sub->in[0], d = div->in[0];
        struct nx_node *mu = producer(g, sub->in[1]), *ad = producer(g, sq->in[0]);
        if (!mean_last(g, mu) || mu->in[0] != x || !single_use(g, sub->in[1]) || !ad ||
            ad->op != NX_OP_ADD || !single_use(g, sq->in[0]))
            continue;
        struct nx_node *var = NULL;
        int32_t eps_t = -1;
        for (int s = 0; s < 2 && !var; s++) {
            struct nx_node *v = producer(g, ad->in[s]);
            if (mean_last(g, v) && single_use(g, ad->in[s]) && const_f32(g, ad->in[!s]) &&
                nx_elems(&g->t[ad->in[!s]]) == 1)
                var = v, eps_t = ad->in[!s];
        }
        struct nx_node *pw = var ? producer(g, var->in[0]) : NULL;
        if (!pw || pw->op != NX_OP_POW || pw->in[0] != d || !const_scalar(g, pw->in[1], 2.0) ||
            !single_use(g, var->in[0]))
            continue;
        const struct nx_tensor *xt = &g->t[x], *yt = &g->t[div->out[0]];
        float eps = g->t[eps_t].f[0];
        if (xt->dtype != NX_F32 || xt->rank != yt->rank ||
            memcmp(xt->dims, yt->dims, sizeof xt->dims) || !(eps >= 0))
            continue;
        int64_t n = xt->dims[xt->rank - 1];
        int32_t *in = realloc(div->in, 3 * sizeof *in);
        if (!in) {
            free(reader);
            FAIL("out of memory");
        }
        div->in = in;
        div->n_in = 3;
        in[0] = x;
        in[1] = in[2] = -1;
        div->op = NX_OP_LAYERNORM;
        div->a.epsilon = eps;
        mu->op = sub->op = pw->op = var->op = ad->op = sq->op = NX_OP_DEAD;
        /* gamma, then beta, when they follow */
        for (int step = 1; step <= 2; step++) {
            struct nx_node *nx = consumer(g, reader, div->out[0]);
            if (!nx || nx->op != (step == 1 ? NX_OP_MUL : NX_OP_ADD) || nx->n_in != 2)
                break;
            int s = nx->in[0] == div->out[0] ? 1 : 0;
            const struct nx_tensor *o = &g->t[nx->out[0]];
            if (!per_last(g, nx->in[s], n) || o->rank != yt->rank ||
                memcmp(o->dims, yt->dims, sizeof o->dims))
                break;
            div->in[step] = nx->in[s];
            div->out[0] = nx->out[0];
            g->t[nx->out[0]].producer = (int32_t)(div - g->n);
            nx->op = NX_OP_DEAD;
        }
    }
    free(reader);
    nx_compact(g);
    return 0;
}

int nx_fuse(struct nx_graph *g, char *err, size_t errlen)
{
    /* BN, affine, then BN again: a bias Add between a ConvTranspose and its
     * BatchNormalization (the PaddleOCR detector's head) folds first */
    if (fold_bn(g, err, errlen) || fold_affine(g, err, errlen) || fold_bn(g, err, errlen))
        return -1;
    hard_swish(g);
    fuse_act(g);
    fuse_post_affine(g);
    if (squeeze_excite(g, err, errlen) || layer_norm(g, err, errlen) ||
        fuse_residual(g, err, errlen))
        return -1;
    fuse_act(g); /* an activation after a fused Add */
    return 0;
}
