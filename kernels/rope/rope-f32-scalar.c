/* RoPE reference: each pair (r, r+1), r even, in the first rope_dim dims
 * of its head becomes (a c - b s, a s + b c) (nib_rope_pair in
 * kernels/common/f32-math.h); every variant does these operations. */
#include "kernels/common/f32-math.h"
#include "kernels/kernels.h"

void nib_rope_rows_f32_scalar(float *v, size_t r_begin, size_t r_end, size_t head_dim,
                              size_t rope_dim, const float *cs)
{
    for (size_t r = r_begin; r + 1 < r_end; r += 2) {
        size_t i = r % head_dim;
        if (i < rope_dim)
            nib_rope_pair(v + r, cs[i], cs[i + 1]);
    }
}
