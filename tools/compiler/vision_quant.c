/* Which nodes a vision model quantizes, and their weights' codes
 * (vision_quant.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/vision_quant.h"
#include "tools/util/tool_util.h"

enum vq_method vq_method_default(void)
{
    return VQ_METHOD_GPTQ;
}

int vq_method_parse(const char *s, enum vq_method *m)
{
    if (!strcmp(s, "rtn"))
        *m = VQ_METHOD_RTN;
    else if (!strcmp(s, "gptq"))
        *m = VQ_METHOD_GPTQ;
    else
        return -1;
    return 0;
}

int vq_weighted(const struct nx_graph *g, uint32_t i)
{
    const struct nx_node *nd = &g->n[i];
    if (nd->n_in < 2 || nd->in[1] < 0 || !g->t[nd->in[1]].is_const)
        return 0;
    if (nd->op == NX_OP_CONV)
        return nd->a.group == 1;
    if (nd->op == NX_OP_GEMM)
        return !nd->a.trans_a;
    return nd->op == NX_OP_MATMUL && g->t[nd->in[1]].rank == 2;
}

void vq_kept_ends(const struct nx_graph *g, const struct vq_opts *q, int64_t *first, int64_t *last)
{
    *first = *last = -1;
    if (!q || !q->keep_ends || q->bits != 4)
        return;
    for (uint32_t k = 0; k < g->n_order; k++)
        if (vq_weighted(g, g->order[k])) {
            if (*first < 0)
                *first = g->order[k];
            *last = g->order[k];
        }
}

int vq_node_bits(const struct nx_graph *g, const struct vq_opts *q, uint8_t *bits, char *err,
                 size_t errlen)
{
    memset(bits, 0, g->n_n);
    const uint32_t def = q ? q->bits : 0;
    if (def != 0 && def != 4 && def != 8)
        return nib_fail(err, errlen, "weight bits %u: 4, 8 or 0 (f32)", def);
    for (uint32_t k = 0; k < g->n_order; k++)
        if (vq_weighted(g, g->order[k]))
            bits[g->order[k]] = (uint8_t)def;
    int64_t first, last;
    vq_kept_ends(g, q, &first, &last);
    if (first >= 0)
        bits[first] = bits[last] = 8;
    for (uint32_t o = 0; q && o < q->n_over; o++) {
        const struct vq_override *v = &q->over[o];
        if (v->bits != 0 && v->bits != 4 && v->bits != 8)
            return nib_fail(err, errlen, "--precision %s: q4, q8 or f32", v->node);
        int found = 0;
        for (uint32_t k = 0; k < g->n_order && !found; k++) {
            uint32_t i = g->order[k];
            if (!strcmp(g->n[i].name, v->node)) {
                if (!vq_weighted(g, i))
                    return nib_fail(err, errlen,
                                    "--precision %s: node '%s' (%s) has no weights that are "
                                    "quantized (a Conv of groups 1 or a Gemm/MatMul by a "
                                    "constant matrix)",
                                    v->node, v->node, g->n[i].op_type);
                bits[i] = (uint8_t)v->bits;
                found = 1;
            }
        }
        for (uint32_t i = 0; i < g->n_n && !found; i++)
            if (g->n[i].name && !strcmp(g->n[i].name, v->node))
                return nib_fail(err, errlen,
                                "--precision %s: node '%s' (%s) was folded or fused into "
                                "another node on import (nib onnx-run --graph shows the graph)",
                                v->node, v->node, g->n[i].op_type);
        if (!found)
            return nib_fail(err, errlen, "--precision %s: the model has no node named '%s'",
                            v->node, v->node);
    }
    return 0;
}

/* Codes of row w[0..k) at scale s, and their squared error (double: every
 * product of a float and a small integer is exact). */
static double row_codes(const float *w, uint32_t k, float s, float qmin, float qmax, int8_t *q)
{
    double e = 0.0;
    for (uint32_t j = 0; j < k; j++) {
        float v = rintf(w[j] / s);
        v = v < qmin ? qmin : v > qmax ? qmax : v;
        q[j] = (int8_t)v;
        double d = (double)w[j] - (double)s * v;
        e += d * d;
    }
    return e;
}

/* Per row, the scale with the least squared error: candidates
 * amax * f / d for f = 1, 63/64, ..., 32/64 and d = qmax (and 8 for 4
 * bits, the code -8 for the largest weight), each followed by one least
 * squares step (s = sum(w q) / sum(q q) for the codes it gave). The first
 * candidate is round-to-nearest absmax, so the result is never worse. */
void vq_quantize_rows(const float *w, uint32_t rows, uint32_t k, uint32_t bits, int8_t *q,
                      float *scale)
{
    const float qmax = bits == 4 ? 7.0f : 127.0f, qmin = bits == 4 ? -8.0f : -127.0f;
    int8_t *tmp = malloc(k ? k : 1);
    for (uint32_t r = 0; r < rows; r++) {
        const float *wr = w + (size_t)r * k;
        int8_t *qr = q + (size_t)r * k;
        float amax = 0.0f;
        for (uint32_t j = 0; j < k; j++)
            amax = fabsf(wr[j]) > amax ? fabsf(wr[j]) : amax;
        if (!(amax > 0.0f) || !isfinite(amax)) {
            scale[r] = 0.0f;
            memset(qr, 0, k);
            continue;
        }
        float best_s = amax / qmax;
        double best = row_codes(wr, k, best_s, qmin, qmax, qr);
        const uint32_t n_d = bits == 4 ? 2 : 1;
        for (uint32_t di = 0; di < n_d && tmp; di++) { /* no memory: absmax */
            const float d = di ? -qmin : qmax;
            for (int f = 64; f >= 32; f--) {
                float s = amax * ((float)f / 64.0f) / d;
                for (int step = 0; step < 2 && s > 0.0f && isfinite(s); step++) {
                    double e = row_codes(wr, k, s, qmin, qmax, tmp);
                    if (e < best) {
                        best = e, best_s = s;
                        memcpy(qr, tmp, k);
                    }
                    double wq = 0.0, qq = 0.0;
                    for (uint32_t j = 0; j < k; j++)
                        wq += (double)wr[j] * tmp[j], qq += (double)tmp[j] * tmp[j];
                    if (!(qq > 0.0))
                        break;
                    s = (float)(wq / qq);
                }
            }
        }
        scale[r] = best_s;
    }
    free(tmp);
}
