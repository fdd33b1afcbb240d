/* NEON GELU-mul: the scalar reference's operations, 4 lanes at a time. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include "kernels/common/f32-neon.h"

NIB_GELUMUL_DECL(nib_gelumul_f32_neon)
{
    nib_pre_rows(a, b, out, n);
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, nib_gelu_mul4_neon(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; i++)
        out[i] = nib_gelu_mul1(a[i], b[i]);
}
#else
typedef int nib_gelumul_f32_neon_unused;
#endif
