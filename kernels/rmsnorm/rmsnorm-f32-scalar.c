/* RMSNorm reference. Every variant: ss = nib_tree8 of lane sums of x*x
 * (kernels/common/f32-math.h), r = 1 / sqrt(ss / n + eps),
 * out[i] = w[i] * (x[i] * r). */
#include <math.h>

#include "kernels/common/f32-math.h"

NIB_RMSNORM_DECL(nib_rmsnorm_f32_scalar)
{
    nib_pre_rows(x, weight, out, n);
    float r = 1.0f / sqrtf(nib_dot_scalar(x, x, n) / (float)n + eps);
    for (size_t i = 0; i < n; i++)
        out[i] = weight[i] * (x[i] * r);
}
