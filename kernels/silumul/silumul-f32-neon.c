/* NEON SiLU-mul: the scalar reference's operations, 4 lanes at a time. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include "kernels/common/f32-neon.h"

NIB_SILUMUL_DECL(nib_silumul_f32_neon)
{
    nib_pre_rows(a, b, out, n);
    const float32x4_t one = vdupq_n_f32(1.0f);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vld1q_f32(a + i);
        float32x4_t e = nib_exp4_neon(vnegq_f32(x));
        vst1q_f32(out + i, vmulq_f32(vdivq_f32(x, vaddq_f32(one, e)), vld1q_f32(b + i)));
    }
    for (; i < n; i++)
        out[i] = nib_silu_mul1(a[i], b[i]);
}
#else
typedef int nib_silumul_f32_neon_unused;
#endif
