/* RMSNorm reference. Every variant: ss = nib_tree8 of lane sums of x*x
 * (kernels/common/f32-math.h), r = 1 / sqrt(ss / n + eps),
 * out[i] = w[i] * (x[i] * r). */
#include <math.h>

#include "kernels/common/f32-math.h"
#include "kernels/kernels.h"

void nib_rmsnorm_f32_scalar(const float *x, const float *weight, float *out, size_t n, float eps)
{
    float l[8];
    nib_dot_lanes(x, x, n, l);
    float r = 1.0f / sqrtf(nib_tree8(l) / (float)n + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = weight[i] * (x[i] * r);
}
