/* Attention reference. Every variant performs, per score, per softmax term
 * and per output element, exactly these IEEE operations in this order
 * (kernels/common/f32-math.h has the shared pieces):
 *   score  = nib_tree8(lanes) * scale, lane j = fma(q[i], k[i], lane j)
 *            over i = j, j + 8, ... (inputs past head_dim count as +0);
 *   max    = the largest score, NaNs ignored;
 *   term   = nib_expf(score - max);
 *   sum    = nib_tree8(lanes), lane j = lane j + term over t = j, j + 8, ...;
 *   out[i] = fma(term / sum, v[t][i], out[i]) over t = 0..pos in order. */
#include <math.h>

#include "kernels/common/f32-math.h"

NIB_ATTENTION_DECL(nib_attention_f32_scalar)
{
    nib_pre_attention(q, kc, vc, out, att, h_begin, h_end, head_dim, group, row_stride, pos, ctx);
    (void)t0; /* the sliding window and soft-capping: issue 11, in progress */
    (void)softcap;
    for (size_t h = h_begin; h < h_end; h++) {
        const float *qh = q + h * head_dim;
        size_t kv_off = (h / group) * head_dim;
        float *a = att + h * ctx;
        float max = -INFINITY, l[8];
        for (size_t t = 0; t <= pos; t++) {
            nib_dot_lanes(qh, kc + t * row_stride + kv_off, head_dim, l);
            float s = nib_tree8(l) * scale;
            a[t] = s;
            max = s > max ? s : max;
        }
        for (int j = 0; j < 8; j++)
            l[j] = 0.0f;
        for (size_t t = 0; t <= pos; t++) {
            a[t] = nib_expf(a[t] - max);
            l[t % 8] += a[t];
        }
        float sum = nib_tree8(l);
        float *o = out + h * head_dim;
        for (size_t i = 0; i < head_dim; i++)
            o[i] = 0.0f;
        for (size_t t = 0; t <= pos; t++) {
            const float *v = vc + t * row_stride + kv_off;
            float w = a[t] / sum;
            for (size_t i = 0; i < head_dim; i++)
                o[i] = fmaf(w, v[i], o[i]);
        }
    }
}
