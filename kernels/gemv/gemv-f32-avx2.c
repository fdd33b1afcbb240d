/* AVX2 f32 GEMV: the scalar reference's operations, 8 lanes at a time. */
#include "kernels/kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include "kernels/common/f32-avx2.h"

void nib_gemv_f32_avx2(const float *w, const float *x, float *y, const float *add, size_t n_begin,
                       size_t n_end, size_t k)
{
    for (size_t r = n_begin; r < n_end; r++) {
        float d = nib_dot_avx2(w + r * k, x, k);
        y[r] = add ? d + add[r] : d;
    }
}
#else
typedef int nib_gemv_f32_avx2_unused;
#endif
