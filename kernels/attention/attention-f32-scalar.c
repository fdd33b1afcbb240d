/* Attention reference. For each head, over the keys t = t0..pos (n =
 * pos - t0 + 1 of them; j = t - t0 indexes the scratch row), every variant
 * performs, per score, per softmax term and per output element, exactly
 * these IEEE operations in this order (kernels/common/f32-math.h has the
 * shared pieces):
 *   score  = nib_tree8(lanes) * scale, lane i = fma(q[d], k[d], lane i)
 *            over d = i, i + 8, ... (inputs past head_dim count as +0);
 *   capped = softcap * nib_tanhf(score / softcap) when softcap > 0
 *            (nib_softcapf), else score unchanged;
 *   max    = the largest capped score, NaNs ignored;
 *   term   = nib_expf(capped - max);
 *   sum    = nib_tree8(lanes), lane i = lane i + term over j = i, i + 8, ...
 *            (j counted from t0);
 *   out[d] = fma(term / sum, v[t][d], out[d]) over t = t0..pos in order,
 *            from +0. */
#include <math.h>

#include "kernels/common/f32-math.h"

NIB_ATTENTION_DECL(nib_attention_f32_scalar)
{
    nib_pre_attention(q, kc, vc, out, att, h_begin, h_end, head_dim, group, row_stride, head_stride,
                      t0, pos, ctx, softcap);
    const size_t n = pos - t0 + 1;
    const float *k0 = kc + t0 * row_stride, *v0 = vc + t0 * row_stride;
    for (size_t h = h_begin; h < h_end; h++) {
        const float *qh = q + h * head_dim;
        size_t kv_off = (h / group) * head_stride;
        float *a = att + h * ctx;
        float max = -INFINITY, l[8];
        for (size_t j = 0; j < n; j++) {
            nib_dot_lanes(qh, k0 + j * row_stride + kv_off, head_dim, l);
            float s = nib_tree8(l) * scale;
            if (softcap > 0.0f)
                s = nib_softcapf(s, softcap);
            a[j] = s;
            max = s > max ? s : max;
        }
        for (int i = 0; i < 8; i++)
            l[i] = 0.0f;
        for (size_t j = 0; j < n; j++) {
            a[j] = nib_expf(a[j] - max);
            l[j % 8] += a[j];
        }
        float sum = nib_tree8(l);
        float *o = out + h * head_dim;
        for (size_t i = 0; i < head_dim; i++)
            o[i] = 0.0f;
        for (size_t j = 0; j < n; j++) {
            const float *v = v0 + j * row_stride + kv_off;
            float w = a[j] / sum;
            for (size_t i = 0; i < head_dim; i++)
                o[i] = fmaf(w, v[i], o[i]);
        }
    }
}
