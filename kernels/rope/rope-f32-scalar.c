#include "kernels/kernels.h"

void nib_rope_rows_f32_scalar(float *v, size_t r_begin, size_t r_end, size_t head_dim,
                              size_t rope_dim, const float *cs)
{
    for (size_t r = r_begin; r + 1 < r_end; r += 2) {
        size_t i = r % head_dim;
        if (i >= rope_dim)
            continue;
        float c = cs[i], s = cs[i + 1];
        float a = v[r], b = v[r + 1];
        v[r] = a * c - b * s;
        v[r + 1] = a * s + b * c;
    }
}
