/* Which nodes a vision model quantizes, and their weights' codes
 * (vision_quant.h). */
#include <math.h>
#include <string.h>

#include "tools/compiler/vision_quant.h"
#include "tools/util/tool_util.h"

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

/* Round to nearest from the absmax scale, per row. */
void vq_quantize_rows(const float *w, uint32_t rows, uint32_t k, uint32_t bits, int8_t *q,
                      float *scale)
{
    const float qmax = bits == 4 ? 7.0f : 127.0f, qmin = bits == 4 ? -8.0f : -127.0f;
    for (uint32_t r = 0; r < rows; r++) {
        const float *wr = w + (size_t)r * k;
        float amax = 0.0f;
        for (uint32_t j = 0; j < k; j++)
            amax = fabsf(wr[j]) > amax ? fabsf(wr[j]) : amax;
        const float s = amax / qmax;
        scale[r] = s;
        for (uint32_t j = 0; j < k; j++) {
            float v = s > 0.0f ? rintf(wr[j] / s) : 0.0f;
            v = v < qmin ? qmin : v > qmax ? qmax : v;
            q[(size_t)r * k + j] = (int8_t)v;
        }
    }
}
