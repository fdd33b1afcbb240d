#include "kernels/kernels.h"

void nib_rope_f32_scalar(float *v, size_t n_heads, size_t head_dim, size_t rope_dim,
                         const float *cs)
{
    for (size_t h = 0; h < n_heads; h++) {
        float *x = v + h * head_dim;
        for (size_t i = 0; i < rope_dim; i += 2) {
            float c = cs[i], s = cs[i + 1];
            float a = x[i], b = x[i + 1];
            x[i] = a * c - b * s;
            x[i + 1] = a * s + b * c;
        }
    }
}
