/* NEON RMSNorm: the scalar reference's operations, 4 lanes at a time. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <math.h>

#include "kernels/common/f32-neon.h"

NIB_RMSNORM_DECL(nib_rmsnorm_f32_neon)
{
    nib_pre_rows(x, weight, out, n);
    float r = 1.0f / sqrtf(nib_dot_neon(x, x, n) / (float)n + eps);
    float32x4_t vr = vdupq_n_f32(r);
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vmulq_f32(vld1q_f32(weight + i), vmulq_f32(vld1q_f32(x + i), vr)));
    for (; i < n; i++)
        out[i] = weight[i] * (x[i] * r);
}
#else
typedef int nib_rmsnorm_f32_neon_unused;
#endif
