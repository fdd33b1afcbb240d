/* GELU-mul reference: out[i] = gelu(a[i]) * b[i], GELU's tanh form
 * computed as a / (1 + nib_expf(v)), v = a * fma(a * a, K1, K0) = -2u
 * (nib_gelu_mul1, kernels/common/f32-math.h); every variant does these
 * operations. */
#include "kernels/common/f32-math.h"

NIB_GELUMUL_DECL(nib_gelumul_f32_scalar)
{
    nib_pre_rows(a, b, out, n);
    for (size_t i = 0; i < n; i++)
        out[i] = nib_gelu_mul1(a[i], b[i]);
}
