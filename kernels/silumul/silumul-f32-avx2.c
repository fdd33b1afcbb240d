/* AVX2 SiLU-mul: the scalar reference's operations, 8 lanes at a time. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include "kernels/common/f32-avx2.h"

NIB_SILUMUL_DECL(nib_silumul_f32_avx2)
{
    nib_pre_rows(a, b, out, n);
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(a + i);
        __m256 e = nib_exp8_avx2(_mm256_xor_ps(x, sign)); /* -a: a sign flip, as in C */
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)),
                                                _mm256_loadu_ps(b + i)));
    }
    for (; i < n; i++)
        out[i] = nib_silu_mul1(a[i], b[i]);
}
#else
typedef int nib_silumul_f32_avx2_unused;
#endif
