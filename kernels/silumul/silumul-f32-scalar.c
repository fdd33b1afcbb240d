/* SiLU-mul reference: out[i] = a[i] / (1 + nib_expf(-a[i])) * b[i]
 * (kernels/common/f32-math.h); every variant does these operations. */
#include "kernels/common/f32-math.h"

NIB_SILUMUL_DECL(nib_silumul_f32_scalar)
{
    nib_pre_rows(a, b, out, n);
    for (size_t i = 0; i < n; i++)
        out[i] = nib_silu_mul1(a[i], b[i]);
}
