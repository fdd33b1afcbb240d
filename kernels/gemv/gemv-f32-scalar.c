/* f32 GEMV reference: each row's dot product in 8 lanes combined by
 * nib_tree8 (kernels/common/f32-math.h), so the order is fixed by this code,
 * not by the compiler, the thread count or the ISA; then + add[r]. */
#include "kernels/common/f32-math.h"
#include "kernels/kernels.h"

void nib_gemv_f32_scalar(const float *w, const float *x, float *y, const float *add,
                         size_t n_begin, size_t n_end, size_t k)
{
    float l[8];
    for (size_t r = n_begin; r < n_end; r++) {
        nib_dot_lanes(w + r * k, x, k, l);
        float d = nib_tree8(l);
        y[r] = add ? d + add[r] : d;
    }
}
