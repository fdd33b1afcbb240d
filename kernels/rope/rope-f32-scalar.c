/* RoPE reference: each pair (r, r+1), r even, in the first rope_dim dims
 * of its head becomes (a c - b s, a s + b c) (nib_rope_pair in
 * kernels/common/f32-math.h); every variant does these operations. */
#include "kernels/common/f32-math.h"

NIB_ROPE_DECL(nib_rope_f32_scalar)
{
    nib_pre_rope(v, r_begin, r_end, head_dim, rope_dim, cs);
    for (size_t r = r_begin; r + 1 < r_end; r += 2) {
        size_t i = r % head_dim;
        if (i < rope_dim)
            nib_rope_pair(v + r, cs[i], cs[i + 1]);
    }
}
