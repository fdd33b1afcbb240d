#include "kernels/kernels.h"

/* Eight independent partial sums: the compiler can keep them in one vector
 * register, and the summation order is fixed by this code, not by the
 * compiler or the thread count. */
static float dot_f32(const float *w, const float *x, size_t k)
{
    float s[8] = {0};
    size_t j = 0;
    for (; j + 8 <= k; j += 8)
        for (int l = 0; l < 8; l++)
            s[l] += w[j + l] * x[j + l];
    for (int l = 0; j < k; j++, l++)
        s[l] += w[j] * x[j];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void nib_gemv_f32_scalar(const float *w, const float *x, float *y, const float *add,
                         size_t n_begin, size_t n_end, size_t k)
{
    for (size_t r = n_begin; r < n_end; r++) {
        float d = dot_f32(w + r * k, x, k);
        y[r] = add ? d + add[r] : d;
    }
}
