/* AVX2 RMSNorm: the scalar reference's operations, 8 lanes at a time. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <math.h>

#include "kernels/common/f32-avx2.h"

NIB_RMSNORM_DECL(nib_rmsnorm_f32_avx2)
{
    nib_pre_rows(x, weight, out, n);
    float r = 1.0f / sqrtf(nib_dot_avx2(x, x, n) / (float)n + eps);
    __m256 vr = _mm256_set1_ps(r);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(weight + i),
                                                _mm256_mul_ps(_mm256_loadu_ps(x + i), vr)));
    for (; i < n; i++)
        out[i] = weight[i] * (x[i] * r);
}
#else
typedef int nib_rmsnorm_f32_avx2_unused;
#endif
