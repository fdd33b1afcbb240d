/* SiLU-mul reference: out[i] = a[i] / (1 + nib_expf(-a[i])) * b[i]
 * (kernels/common/f32-math.h); every variant does these operations. */
#include "kernels/common/f32-math.h"
#include "kernels/kernels.h"

void nib_silu_mul_f32_scalar(const float *a, const float *b, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = nib_silu_mul1(a[i], b[i]);
}
