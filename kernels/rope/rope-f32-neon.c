/* NEON RoPE: 2 pairs at a time within a head's rotated dims; the even
 * lanes' sine is negated (exact), so one multiply-add form gives
 * a c + b (-s) = a c - b s and b c + a s. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include "kernels/common/f32-neon.h"

NIB_ROPE_DECL(nib_rope_f32_neon)
{
    nib_pre_rope(v, r_begin, r_end, head_dim, rope_dim, cs);
    const float32x4_t flip = {-1.0f, 1.0f, -1.0f, 1.0f};
    size_t r = r_begin, end;
    while ((end = nib_rope_run(&r, r_end, head_dim, rope_dim)) > r) {
        size_t i = r % head_dim;
        for (; r + 4 <= end; r += 4, i += 4) {
            float32x4_t x = vld1q_f32(v + r), t = vld1q_f32(cs + i);
            float32x4_t c = vtrn1q_f32(t, t), s = vmulq_f32(vtrn2q_f32(t, t), flip);
            float32x4_t xs = vrev64q_f32(x); /* b0 a0 b1 a1 */
            vst1q_f32(v + r, vaddq_f32(vmulq_f32(x, c), vmulq_f32(xs, s)));
        }
        r = nib_rope_pairs(v, r, end, i, cs);
    }
}
#else
typedef int nib_rope_f32_neon_unused;
#endif
