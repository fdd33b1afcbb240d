#include <math.h>

#include "kernels/kernels.h"

void nib_rmsnorm_f32_scalar(const float *x, const float *weight, float *out, size_t n, float eps)
{
    float ss = 0.0f;
    for (size_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    ss /= (float)n;
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (size_t i = 0; i < n; i++)
        out[i] = weight[i] * (ss * x[i]);
}
