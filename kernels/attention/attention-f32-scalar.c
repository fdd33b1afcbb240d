#include <math.h>

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
        float max = -INFINITY;
        for (size_t t = 0; t <= pos; t++) {
            const float *k = kc + t * row_stride + kv_off;
            float s = 0.0f;
            for (size_t i = 0; i < head_dim; i++)
                s += qh[i] * k[i];
            s *= scale;
            a[t] = s;
            if (s > max)
                max = s;
        }
        float sum = 0.0f;
        for (size_t t = 0; t <= pos; t++) {
            a[t] = expf(a[t] - max);
            sum += a[t];
        }
        float *o = out + h * head_dim;
        for (size_t i = 0; i < head_dim; i++)
            o[i] = 0.0f;
        for (size_t t = 0; t <= pos; t++) {
            const float *v = vc + t * row_stride + kv_off;
            float w = a[t] / sum;
            for (size_t i = 0; i < head_dim; i++)
                o[i] += w * v[i];
        }
    }
}
