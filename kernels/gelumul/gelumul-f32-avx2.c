/* AVX2 GELU-mul: the scalar reference's operations, 8 lanes at a time. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include "kernels/common/f32-avx2.h"

NIB_GELUMUL_DECL(nib_gelumul_f32_avx2)
{
    nib_pre_rows(a, b, out, n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i,
                         nib_gelu_mul8_avx2(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        out[i] = nib_gelu_mul1(a[i], b[i]);
}
#else
typedef int nib_gelumul_f32_avx2_unused;
#endif
