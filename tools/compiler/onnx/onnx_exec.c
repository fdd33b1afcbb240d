/* The reference executor of the IR: plain loops, float64 accumulation,
 * float32 storage between nodes (as the model's own runtime stores them).
 * It folds constants at import and is the independent reference the
 * quantised runtime will be measured against, so it is written for
 * clarity first; the convolution loops run along output rows so that the
 * 640x640 detector stays within seconds. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/onnx/onnx_ir.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)
#define NODE_FAIL(fmt, ...) FAIL("node '%s' (%s): " fmt, nd->name, nd->op_type, ##__VA_ARGS__)

static struct nx_tensor *IN(struct nx_graph *g, const struct nx_node *nd, uint32_t i)
{
    return i < nd->n_in && nd->in[i] >= 0 ? &g->t[nd->in[i]] : NULL;
}

static double act(double v, enum nx_act a, double p, double q)
{
    switch (a) {
    case NX_ACT_RELU: return v > 0 ? v : 0;
    case NX_ACT_CLIP: return v < p ? p : (v > q ? q : v);
    case NX_ACT_HSIGMOID: {
        double h = p * v + q;
        return h < 0 ? 0 : (h > 1 ? 1 : h);
    }
    case NX_ACT_HSWISH: {
        double h = v / 6.0 + 0.5;
        return v * (h < 0 ? 0 : (h > 1 ? 1 : h));
    }
    case NX_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    default: return v;
    }
}

/* Row-major strides of dims, and the same for an operand of lower rank
 * broadcast to rank r (0 where it repeats). */
static void bstrides(const struct nx_tensor *t, uint32_t r, const int64_t *od, int64_t *st)
{
    int64_t s = 1;
    for (uint32_t d = r; d-- > 0;) {
        int64_t td = d + t->rank >= r ? t->dims[d + t->rank - r] : 1;
        st[d] = (td == 1 && od[d] != 1) ? 0 : s;
        s *= td;
    }
}

static int binary(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y, char *err,
                  size_t errlen)
{
    struct nx_tensor *A = IN(g, nd, 0), *B = IN(g, nd, 1);
    int64_t sa[NX_MAX_RANK], sb[NX_MAX_RANK], idx[NX_MAX_RANK] = {0};
    uint32_t r = y->rank;
    bstrides(A, r, y->dims, sa);
    bstrides(B, r, y->dims, sb);
    uint64_t n = nx_elems(y);
    int64_t oa = 0, ob = 0;
    for (uint64_t k = 0; k < n; k++) {
        if (y->dtype == NX_F32) {
            double a = A->f[oa], b = B->dtype == NX_F32 ? B->f[ob] : (double)B->i[ob], v;
            switch (nd->op) {
            case NX_OP_ADD: v = a + b; break;
            case NX_OP_SUB: v = a - b; break;
            case NX_OP_MUL: v = a * b; break;
            case NX_OP_DIV: v = a / b; break;
            default: v = pow(a, b); break;
            }
            y->f[k] = (float)v;
        } else {
            int64_t a = A->i[oa], b = B->i[ob], v;
            switch (nd->op) {
            case NX_OP_ADD: v = (int64_t)((uint64_t)a + (uint64_t)b); break;
            case NX_OP_SUB: v = (int64_t)((uint64_t)a - (uint64_t)b); break;
            case NX_OP_MUL: v = (int64_t)((uint64_t)a * (uint64_t)b); break;
            default:
                if (b == 0 || (a == INT64_MIN && b == -1))
                    NODE_FAIL("integer division by zero or overflow");
                v = a / b;
                break;
            }
            y->i[k] = v;
        }
        for (uint32_t d = r; d-- > 0;) { /* next index; offsets follow */
            oa += sa[d];
            ob += sb[d];
            if (++idx[d] < y->dims[d])
                break;
            oa -= sa[d] * y->dims[d];
            ob -= sb[d] * y->dims[d];
            idx[d] = 0;
        }
    }
    return 0;
}

static void conv(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y, double *acc)
{
    const struct nx_tensor *x = IN(g, nd, 0), *w = IN(g, nd, 1), *b = IN(g, nd, 2);
    const struct nx_tensor *r = nd->a.res ? IN(g, nd, 3) : NULL;
    const struct nx_attrs *a = &nd->a;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t M = y->dims[1], OH = y->dims[2], OW = y->dims[3];
    int64_t KH = a->kernel[0], KW = a->kernel[1], G = a->group, CG = C / G, MG = M / G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            int64_t gi = m / MG;
            double bias = b ? b->f[m] : 0;
            for (int64_t k = 0; k < OH * OW; k++)
                acc[k] = bias;
            for (int64_t c = 0; c < CG; c++) {
                const float *xp = x->f + ((n * C + gi * CG + c) * H) * W;
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        double wv = w->f[((m * CG + c) * KH + ky) * KW + kx];
                        int64_t offx = kx * a->dilations[1] - a->pads[1];
                        /* ox range with 0 <= ox*sw + offx < W */
                        int64_t lo = offx >= 0 ? 0 : (-offx + a->strides[1] - 1) / a->strides[1];
                        int64_t hi = W - offx <= 0 ? 0 : (W - offx - 1) / a->strides[1] + 1;
                        if (hi > OW)
                            hi = OW;
                        for (int64_t oy = 0; oy < OH; oy++) {
                            int64_t iy = oy * a->strides[0] - a->pads[0] + ky * a->dilations[0];
                            if (iy < 0 || iy >= H)
                                continue;
                            const float *row = xp + iy * W + offx;
                            double *ar = acc + oy * OW;
                            for (int64_t ox = lo; ox < hi; ox++)
                                ar[ox] += wv * row[ox * a->strides[1]];
                        }
                    }
            }
            float *yp = y->f + (n * M + m) * OH * OW;
            const float *rp = r ? r->f + (n * M + m) * OH * OW : NULL;
            for (int64_t k = 0; k < OH * OW; k++) {
                if (!rp) {
                    yp[k] = (float)(act(acc[k], a->act, a->act_a, a->act_b) * a->post_mul +
                                    a->post_add);
                    continue;
                }
                /* a fused Add: f32 values on both sides, as the nodes it
                 * replaced stored them */
                float v = a->res == 1 ? (float)((double)(float)acc[k] + rp[k])
                                      : (float)act(acc[k], a->act, a->act_a, a->act_b);
                yp[k] = a->res == 1 ? (float)act(v, a->act, a->act_a, a->act_b)
                                    : (float)((double)v + rp[k]);
            }
        }
}

static void conv_t(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y, double *acc)
{
    const struct nx_tensor *x = IN(g, nd, 0), *w = IN(g, nd, 1), *b = IN(g, nd, 2);
    const struct nx_attrs *a = &nd->a;
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t M = y->dims[1], OH = y->dims[2], OW = y->dims[3];
    int64_t KH = a->kernel[0], KW = a->kernel[1], G = a->group, CG = C / G, MG = M / G;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < OH * OW; k++)
                acc[m * OH * OW + k] = b ? b->f[m] : 0;
        for (int64_t c = 0; c < C; c++) {
            int64_t gi = c / CG;
            const float *xp = x->f + (n * C + c) * H * W;
            for (int64_t mm = 0; mm < MG; mm++) {
                int64_t m = gi * MG + mm;
                for (int64_t ky = 0; ky < KH; ky++)
                    for (int64_t kx = 0; kx < KW; kx++) {
                        double wv = w->f[((c * MG + mm) * KH + ky) * KW + kx];
                        for (int64_t iy = 0; iy < H; iy++) {
                            int64_t oy = iy * a->strides[0] - a->pads[0] + ky * a->dilations[0];
                            if (oy < 0 || oy >= OH)
                                continue;
                            double *ar = acc + (m * OH + oy) * OW;
                            for (int64_t ix = 0; ix < W; ix++) {
                                int64_t ox = ix * a->strides[1] - a->pads[1] + kx * a->dilations[1];
                                if (ox >= 0 && ox < OW)
                                    ar[ox] += wv * xp[iy * W + ix];
                            }
                        }
                    }
            }
        }
        for (int64_t k = 0; k < M * OH * OW; k++)
            y->f[n * M * OH * OW + k] =
                (float)(act(acc[k], a->act, a->act_a, a->act_b) * a->post_mul + a->post_add);
    }
}

static void pool(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y)
{
    const struct nx_tensor *x = IN(g, nd, 0);
    const struct nx_attrs *a = &nd->a;
    int64_t NC = x->dims[0] * x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t OH = y->dims[2], OW = y->dims[3];
    for (int64_t p = 0; p < NC; p++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                double s = 0, mx = -INFINITY;
                int64_t cnt = 0, padcnt = 0;
                for (int64_t ky = 0; ky < a->kernel[0]; ky++)
                    for (int64_t kx = 0; kx < a->kernel[1]; kx++) {
                        int64_t iy = oy * a->strides[0] - a->pads[0] + ky * a->dilations[0];
                        int64_t ix = ox * a->strides[1] - a->pads[1] + kx * a->dilations[1];
                        /* count_include_pad counts the pads, not what ceil_mode adds past them */
                        if (iy < H + a->pads[2] && ix < W + a->pads[3])
                            padcnt++;
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                            continue;
                        double v = x->f[(p * H + iy) * W + ix];
                        s += v;
                        mx = v > mx ? v : mx;
                        cnt++;
                    }
                double v = nd->op == NX_OP_MAXPOOL
                               ? mx
                               : s / (double)(a->count_include_pad ? padcnt : (cnt ? cnt : 1));
                y->f[(p * OH + oy) * OW + ox] = (float)v;
            }
}

static double resize_coord(const struct nx_attrs *a, int64_t o, int64_t in, int64_t out,
                           float scale)
{
    switch (a->coord_mode) {
    case NX_COORD_ASYMMETRIC: return o / (double)scale;
    case NX_COORD_ALIGN_CORNERS: return out == 1 ? 0 : o * (double)(in - 1) / (double)(out - 1);
    case NX_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (o + 0.5) / scale - 0.5 : 0;
    default: return (o + 0.5) / scale - 0.5;
    }
}

static int64_t nearest(const struct nx_attrs *a, double c, int64_t in)
{
    double r;
    switch (a->nearest_mode) {
    case NX_NEAREST_FLOOR: r = floor(c); break;
    case NX_NEAREST_CEIL: r = ceil(c); break;
    case NX_NEAREST_ROUND_PREFER_CEIL: r = floor(c + 0.5); break;
    default: r = (c - floor(c) == 0.5) ? floor(c) : floor(c + 0.5); break;
    }
    int64_t k = (int64_t)r;
    return k < 0 ? 0 : (k >= in ? in - 1 : k);
}

static void resize(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y)
{
    const struct nx_tensor *x = IN(g, nd, 0);
    const struct nx_attrs *a = &nd->a;
    int64_t NC = x->dims[0] * x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t OH = y->dims[2], OW = y->dims[3];
    for (int64_t p = 0; p < NC; p++)
        for (int64_t oy = 0; oy < OH; oy++) {
            double cy = resize_coord(a, oy, H, OH, a->scales[2]);
            for (int64_t ox = 0; ox < OW; ox++) {
                double cx = resize_coord(a, ox, W, OW, a->scales[3]);
                const float *xp = x->f + p * H * W;
                double v;
                if (!a->resize_linear) {
                    v = xp[nearest(a, cy, H) * W + nearest(a, cx, W)];
                } else {
                    double yy = cy < 0 ? 0 : (cy > H - 1 ? H - 1 : cy);
                    double xx = cx < 0 ? 0 : (cx > W - 1 ? W - 1 : cx);
                    int64_t y0 = (int64_t)yy, x0 = (int64_t)xx;
                    int64_t y1 = y0 + 1 < H ? y0 + 1 : y0, x1 = x0 + 1 < W ? x0 + 1 : x0;
                    double fy = yy - y0, fx = xx - x0;
                    v = (1 - fy) * ((1 - fx) * xp[y0 * W + x0] + fx * xp[y0 * W + x1]) +
                        fy * ((1 - fx) * xp[y1 * W + x0] + fx * xp[y1 * W + x1]);
                }
                y->f[(p * OH + oy) * OW + ox] = (float)v;
            }
        }
}

/* Copy with a general index map: y[idx] = x[sum idx[d] * st[d] + base]. */
static void strided_copy(const struct nx_tensor *x, struct nx_tensor *y, const int64_t *st,
                         int64_t base)
{
    int64_t idx[NX_MAX_RANK] = {0}, off = base;
    uint64_t n = nx_elems(y);
    for (uint64_t k = 0; k < n; k++) {
        if (y->dtype == NX_F32)
            y->f[k] = x->f[off];
        else
            y->i[k] = x->i[off];
        for (uint32_t d = y->rank; d-- > 0;) {
            off += st[d];
            if (++idx[d] < y->dims[d])
                break;
            off -= st[d] * y->dims[d];
            idx[d] = 0;
        }
    }
}

static void row_strides(const struct nx_tensor *t, int64_t *st)
{
    int64_t s = 1;
    for (uint32_t d = t->rank; d-- > 0;) {
        st[d] = s;
        s *= t->dims[d];
    }
}

static void matmul(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y, double *acc)
{
    const struct nx_tensor *A = IN(g, nd, 0), *B = IN(g, nd, 1);
    uint32_t r = y->rank;
    int64_t M = y->dims[r - 2], N = y->dims[r - 1], K = A->dims[A->rank - 1];
    uint64_t batches = M > 0 && N > 0 ? nx_elems(y) / (uint64_t)(M * N) : 0;
    for (uint64_t bt = 0; bt < batches; bt++) {
        /* the batch index in y's batch dims, mapped onto A's and B's */
        int64_t oa = 0, ob = 0, rem = (int64_t)bt, sa = M * K, sb = K * N;
        for (uint32_t d = r - 2; d-- > 0;) {
            int64_t i = rem % y->dims[d];
            rem /= y->dims[d];
            int64_t da = d + A->rank >= r ? A->dims[d + A->rank - r] : 1;
            int64_t db = d + B->rank >= r ? B->dims[d + B->rank - r] : 1;
            oa += (da == 1 ? 0 : i) * sa;
            ob += (db == 1 ? 0 : i) * sb;
            sa *= da;
            sb *= db;
        }
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++)
                acc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                double av = A->f[oa + i * K + k];
                const float *bp = B->f + ob + k * N;
                for (int64_t j = 0; j < N; j++)
                    acc[j] += av * bp[j];
            }
            for (int64_t j = 0; j < N; j++)
                y->f[(bt * M + i) * N + j] = (float)acc[j];
        }
    }
}

static void gemm(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y)
{
    const struct nx_tensor *A = IN(g, nd, 0), *B = IN(g, nd, 1), *C = IN(g, nd, 2);
    const struct nx_attrs *a = &nd->a;
    int64_t M = y->dims[0], N = y->dims[1], K = A->dims[!a->trans_a];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)A->f[a->trans_a ? k * M + i : i * K + k] *
                     B->f[a->trans_b ? j * K + k : k * N + j];
            double c = 0;
            if (C) {
                int64_t ci = C->rank == 2 && C->dims[0] != 1 ? i : 0;
                int64_t cj = C->rank >= 1 && C->dims[C->rank - 1] != 1 ? j : 0;
                c = C->f[ci * (C->rank >= 1 ? C->dims[C->rank - 1] : 1) + cj];
            }
            y->f[i * N + j] = (float)(a->alpha * s + a->beta * c);
        }
}

static void softmax(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y)
{
    const struct nx_tensor *x = IN(g, nd, 0);
    int64_t ax = nd->a.axis, outer = 1, n = 1, inner = 1;
    for (int64_t d = 0; d < ax; d++)
        outer *= x->dims[d];
    for (uint32_t d = (uint32_t)ax; d < x->rank; d++) {
        /* before opset 13 the input is flattened at axis: one softmax over all the rest */
        if (g->opset < 13 || d == ax)
            n *= x->dims[d];
        else
            inner *= x->dims[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const float *xp = x->f + o * n * inner + in;
            float *yp = y->f + o * n * inner + in;
            double mx = -INFINITY, s = 0;
            for (int64_t k = 0; k < n; k++)
                mx = xp[k * inner] > mx ? xp[k * inner] : mx;
            for (int64_t k = 0; k < n; k++)
                s += exp(xp[k * inner] - mx);
            for (int64_t k = 0; k < n; k++)
                yp[k * inner] = (float)(exp(xp[k * inner] - mx) / s);
        }
}

static void reduce_mean(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y,
                        double *acc)
{
    const struct nx_tensor *x = IN(g, nd, 0);
    int64_t st[NX_MAX_RANK], idx[NX_MAX_RANK] = {0}, s = 1, off = 0;
    /* y's offset stride for each of x's dims (0 for a reduced one) */
    for (uint32_t d = x->rank; d-- > 0;) {
        st[d] = nd->a.perm[d] ? 0 : s;
        s *= nd->a.perm[d] ? 1 : x->dims[d];
    }
    uint64_t ny = nx_elems(y), nx = nx_elems(x);
    for (uint64_t k = 0; k < ny; k++)
        acc[k] = 0;
    for (uint64_t k = 0; k < nx; k++) {
        acc[off] += x->f[k];
        for (uint32_t d = x->rank; d-- > 0;) {
            off += st[d];
            if (++idx[d] < x->dims[d])
                break;
            off -= st[d] * x->dims[d];
            idx[d] = 0;
        }
    }
    double cnt = (double)nx / (double)(ny ? ny : 1);
    for (uint64_t k = 0; k < ny; k++)
        y->f[k] = (float)(acc[k] / cnt);
}

static void squeeze_excite(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y,
                           double *acc)
{
    const struct nx_tensor *x = IN(g, nd, 0), *w1 = IN(g, nd, 1), *b1 = IN(g, nd, 2);
    const struct nx_tensor *w2 = IN(g, nd, 3), *b2 = IN(g, nd, 4);
    const struct nx_attrs *a = &nd->a;
    int64_t N = x->dims[0], C = x->dims[1], HW = x->dims[2] * x->dims[3], R = w1->dims[0];
    double *mean = acc, *mid = acc + C, *ex = acc + C + R;
    for (int64_t n = 0; n < N; n++) {
        const float *xp = x->f + n * C * HW;
        for (int64_t c = 0; c < C; c++) {
            double s = 0;
            for (int64_t k = 0; k < HW; k++)
                s += xp[c * HW + k];
            mean[c] = (float)(s / (double)HW); /* GlobalAveragePool's f32 output */
        }
        for (int64_t r = 0; r < R; r++) {
            double s = b1 ? b1->f[r] : 0;
            for (int64_t c = 0; c < C; c++)
                s += (double)w1->f[r * C + c] * mean[c];
            mid[r] = (float)act(s, a->act, a->act_a, a->act_b);
        }
        for (int64_t c = 0; c < C; c++) {
            double s = b2 ? b2->f[c] : 0;
            for (int64_t r = 0; r < R; r++)
                s += (double)w2->f[c * R + r] * mid[r];
            ex[c] = (float)act(s, a->act2, a->act2_a, a->act2_b);
        }
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < HW; k++)
                y->f[(n * C + c) * HW + k] = (float)((double)xp[c * HW + k] * ex[c]);
    }
}

static void layer_norm(struct nx_graph *g, const struct nx_node *nd, struct nx_tensor *y)
{
    const struct nx_tensor *x = IN(g, nd, 0), *ga = IN(g, nd, 1), *be = IN(g, nd, 2);
    int64_t n = x->dims[x->rank - 1], rows = n ? (int64_t)(nx_elems(x) / (uint64_t)n) : 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *xp = x->f + r * n;
        double mean = 0, var = 0;
        for (int64_t k = 0; k < n; k++)
            mean += xp[k];
        mean /= (double)n;
        for (int64_t k = 0; k < n; k++)
            var += (xp[k] - mean) * (xp[k] - mean);
        double inv = 1.0 / sqrt(var / (double)n + nd->a.epsilon);
        for (int64_t k = 0; k < n; k++) {
            double v = (xp[k] - mean) * inv;
            if (ga)
                v *= ga->f[nx_elems(ga) == 1 ? 0 : k];
            if (be)
                v += be->f[nx_elems(be) == 1 ? 0 : k];
            y->f[r * n + k] = (float)v;
        }
    }
}

/* Scratch (float64) a node needs, in elements. */
static uint64_t scratch_elems(struct nx_graph *g, const struct nx_node *nd,
                              const struct nx_tensor *y)
{
    switch (nd->op) {
    case NX_OP_CONV: return (uint64_t)(y->dims[2] * y->dims[3]);
    case NX_OP_CONV_T: return nx_elems(y) / (uint64_t)y->dims[0];
    case NX_OP_MATMUL: return (uint64_t)y->dims[y->rank - 1];
    case NX_OP_REDUCEMEAN: return nx_elems(y);
    case NX_OP_SE: return (uint64_t)(2 * IN(g, nd, 0)->dims[1] + IN(g, nd, 1)->dims[0]);
    default: return 0;
    }
}

int nx_exec_node(struct nx_graph *g, const struct nx_node *nd, char *err, size_t errlen)
{
    struct nx_tensor *x = IN(g, nd, 0), *y = &g->t[nd->out[0]];
    for (uint32_t i = 0; i < nd->n_in; i++) {
        struct nx_tensor *t = IN(g, nd, i);
        if (t && !(t->dtype == NX_F32 ? (void *)t->f : (void *)t->i) && nd->op != NX_OP_SHAPE)
            NODE_FAIL("input '%s' holds no data", t->name);
    }
    if (nx_alloc_data(y))
        NODE_FAIL("out of memory for '%s'", y->name);
    uint64_t n = nx_elems(y), ns = scratch_elems(g, nd, y);
    double *acc = ns ? malloc(ns * sizeof *acc) : NULL;
    if (ns && !acc)
        NODE_FAIL("out of memory");
    const struct nx_attrs *a = &nd->a;
    int64_t st[NX_MAX_RANK];
    int rc = 0;
    switch (nd->op) {
    case NX_OP_CONV: conv(g, nd, y, acc); break;
    case NX_OP_CONV_T: conv_t(g, nd, y, acc); break;
    case NX_OP_SE: squeeze_excite(g, nd, y, acc); break;
    case NX_OP_LAYERNORM: layer_norm(g, nd, y); break;
    case NX_OP_BN: {
        const float *sc = IN(g, nd, 1)->f, *bb = IN(g, nd, 2)->f, *mu = IN(g, nd, 3)->f,
                    *var = IN(g, nd, 4)->f;
        int64_t C = x->dims[1], inner = (int64_t)(n / (uint64_t)(x->dims[0] * C));
        for (uint64_t k = 0; k < n; k++) {
            int64_t c = (int64_t)(k / (uint64_t)inner) % C;
            y->f[k] =
                (float)(((double)x->f[k] - mu[c]) / sqrt((double)var[c] + a->epsilon) * sc[c] +
                        bb[c]);
        }
        break;
    }
    case NX_OP_RELU:
    case NX_OP_CLIP:
    case NX_OP_HSIGMOID:
    case NX_OP_HSWISH:
    case NX_OP_SIGMOID:
    case NX_OP_SQRT:
        for (uint64_t k = 0; k < n; k++) {
            double v = x->f[k];
            switch (nd->op) {
            case NX_OP_RELU: v = act(v, NX_ACT_RELU, 0, 0); break;
            case NX_OP_CLIP: v = act(v, NX_ACT_CLIP, a->lo, a->hi); break;
            case NX_OP_HSIGMOID: v = act(v, NX_ACT_HSIGMOID, a->alpha, a->beta); break;
            case NX_OP_HSWISH: v = act(v, NX_ACT_HSWISH, 0, 0); break;
            case NX_OP_SIGMOID: v = act(v, NX_ACT_SIGMOID, 0, 0); break;
            default: v = sqrt(v); break;
            }
            y->f[k] = (float)v;
        }
        break;
    case NX_OP_ADD:
    case NX_OP_SUB:
    case NX_OP_MUL:
    case NX_OP_DIV:
    case NX_OP_POW: rc = binary(g, nd, y, err, errlen); break;
    case NX_OP_REDUCEMEAN: reduce_mean(g, nd, y, acc); break;
    case NX_OP_MAXPOOL:
    case NX_OP_AVGPOOL: pool(g, nd, y); break;
    case NX_OP_GAP: {
        int64_t HW = x->dims[2] * x->dims[3];
        for (uint64_t p = 0; p < n; p++) {
            double s = 0;
            for (int64_t k = 0; k < HW; k++)
                s += x->f[p * HW + k];
            y->f[p] = (float)(s / (double)HW);
        }
        break;
    }
    case NX_OP_RESIZE: resize(g, nd, y); break;
    case NX_OP_CONCAT: {
        int64_t outer = 1, yinner = 1, done = 0;
        for (int64_t d = 0; d < a->axis; d++)
            outer *= y->dims[d];
        for (uint32_t d = (uint32_t)a->axis; d < y->rank; d++)
            yinner *= y->dims[d];
        for (uint32_t i = 0; i < nd->n_in; i++) {
            const struct nx_tensor *t = IN(g, nd, i);
            int64_t inner = (int64_t)nx_elems(t) / (outer ? outer : 1);
            for (int64_t o = 0; o < outer && inner; o++) {
                if (y->dtype == NX_F32)
                    memcpy(y->f + o * yinner + done, t->f + o * inner, (size_t)inner * 4);
                else
                    memcpy(y->i + o * yinner + done, t->i + o * inner, (size_t)inner * 8);
            }
            done += inner;
        }
        break;
    }
    case NX_OP_FLATTEN:
    case NX_OP_RESHAPE:
    case NX_OP_SQUEEZE:
    case NX_OP_UNSQUEEZE:
    case NX_OP_IDENTITY:
        if (y->dtype == NX_F32)
            memcpy(y->f, x->f, n * 4);
        else
            memcpy(y->i, x->i, n * 8);
        break;
    case NX_OP_TRANSPOSE: {
        int64_t xs[NX_MAX_RANK];
        row_strides(x, xs);
        for (uint32_t d = 0; d < y->rank; d++)
            st[d] = xs[a->perm[d]];
        strided_copy(x, y, st, 0);
        break;
    }
    case NX_OP_SLICE: {
        int64_t xs[NX_MAX_RANK], base = 0;
        row_strides(x, xs);
        for (uint32_t d = 0; d < y->rank; d++) {
            st[d] = xs[d] * a->steps[d];
            base += a->starts[d] * xs[d];
        }
        if (n)
            strided_copy(x, y, st, base);
        break;
    }
    case NX_OP_SHAPE:
        for (uint32_t d = 0; d < x->rank; d++)
            y->i[d] = x->dims[d];
        break;
    case NX_OP_CAST:
        for (uint64_t k = 0; k < n; k++) {
            if (x->dtype == NX_F32 && y->dtype == NX_F32) {
                y->f[k] = x->f[k];
            } else if (x->dtype == NX_F32) {
                double v = x->f[k];
                if (y->dtype == NX_BOOL)
                    y->i[k] = v != 0;
                else if (!(v > -9.2e18 && v < 9.2e18))
                    NODE_FAIL("value %g does not fit an integer", v);
                else
                    y->i[k] = (int64_t)v; /* toward zero, as C and onnxruntime cast */
                if (y->dtype == NX_I32)
                    y->i[k] = (int32_t)y->i[k];
            } else if (y->dtype == NX_F32) {
                y->f[k] = (float)x->i[k];
            } else {
                int64_t v = x->i[k];
                y->i[k] = y->dtype == NX_BOOL ? v != 0 : y->dtype == NX_I32 ? (int32_t)v : v;
            }
        }
        break;
    case NX_OP_GATHER: {
        const struct nx_tensor *ix = IN(g, nd, 1);
        int64_t outer = 1, inner = 1, dim = x->dims[a->axis], ni = (int64_t)nx_elems(ix);
        for (int64_t d = 0; d < a->axis; d++)
            outer *= x->dims[d];
        for (uint32_t d = (uint32_t)a->axis + 1; d < x->rank; d++)
            inner *= x->dims[d];
        for (int64_t j = 0; j < ni; j++) {
            int64_t v = ix->i[j];
            if (v < -dim || v >= dim)
                NODE_FAIL("index %lld out of range for dim %lld", (long long)v, (long long)dim);
            if (v < 0)
                v += dim;
            for (int64_t o = 0; o < outer; o++)
                for (int64_t k = 0; k < inner; k++) {
                    int64_t src = (o * dim + v) * inner + k, dst = (o * ni + j) * inner + k;
                    if (y->dtype == NX_F32)
                        y->f[dst] = x->f[src];
                    else
                        y->i[dst] = x->i[src];
                }
        }
        break;
    }
    case NX_OP_GEMM: gemm(g, nd, y); break;
    case NX_OP_MATMUL: matmul(g, nd, y, acc); break;
    case NX_OP_SOFTMAX: softmax(g, nd, y); break;
    default: free(acc); NODE_FAIL("cannot be executed");
    }
    free(acc);
    return rc;
}

int nx_run(struct nx_graph *g, char *err, size_t errlen)
{
    nx_count_uses(g);
    uint32_t *left = calloc(g->n_t + 1, sizeof *left);
    if (!left)
        FAIL("out of memory");
    for (uint32_t t = 0; t < g->n_t; t++)
        left[t] = g->t[t].n_uses;
    int rc = 0;
    for (uint32_t k = 0; k < g->n_order && !rc; k++) {
        const struct nx_node *nd = &g->n[g->order[k]];
        rc = nx_exec_node(g, nd, err, errlen);
        for (uint32_t i = 0; i < nd->n_in && !rc; i++) {
            int32_t t = nd->in[i];
            if (t >= 0 && --left[t] == 0 && !g->t[t].is_const && !g->t[t].is_input &&
                !g->t[t].is_output)
                nx_free_data(&g->t[t]);
        }
    }
    free(left);
    return rc;
}
