#include "kernels/attention/attention-common.h"
#include "kernels/kernels.h"

void nib_attention_f32_scalar(const float *q, const float *kc, const float *vc, float *out,
                              float *att, size_t h_begin, size_t h_end, size_t head_dim,
                              size_t group, size_t row_stride, size_t pos, size_t ctx,
                              float scale)
{
    for (size_t h = h_begin; h < h_end; h++) {
        const float *qh = q + h * head_dim;
        size_t kv_off = (h / group) * head_dim;
        float *a = att + h * ctx;
        float max = -INFINITY, l[8];
        for (size_t t = 0; t <= pos; t++) {
            nib_att_dot_lanes(qh, kc + t * row_stride + kv_off, head_dim, l);
            float s = nib_att_tree8(l) * scale;
            a[t] = s;
            max = s > max ? s : max;
        }
        for (int j = 0; j < 8; j++)
            l[j] = 0.0f;
        for (size_t t = 0; t <= pos; t++) {
            a[t] = nib_att_exp(a[t] - max);
            l[t % 8] += a[t];
        }
        float sum = nib_att_tree8(l);
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
