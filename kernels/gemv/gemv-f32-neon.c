/* NEON f32 GEMV: the scalar reference's operations, 2 x 4 lanes. */
#include "kernels/kernels.h"

#if defined(__aarch64__)
#include "kernels/common/f32-neon.h"

void nib_gemv_f32_neon(const float *w, const float *x, float *y, const float *add, size_t n_begin,
                       size_t n_end, size_t k)
{
    for (size_t r = n_begin; r < n_end; r++) {
        float d = nib_dot_neon(w + r * k, x, k);
        y[r] = add ? d + add[r] : d;
    }
}
#else
typedef int nib_gemv_f32_neon_unused;
#endif
