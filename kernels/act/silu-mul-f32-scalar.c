#include <math.h>

#include "kernels/kernels.h"

void nib_silu_mul_f32_scalar(const float *a, const float *b, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = a[i];
        v *= 1.0f / (1.0f + expf(-v));
        out[i] = v * b[i];
    }
}
