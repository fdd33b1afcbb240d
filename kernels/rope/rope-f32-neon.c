/* NEON RoPE: 2 pairs at a time within a head's rotated dims; the even
 * lanes' sine is negated (exact), so one multiply-add form gives
 * a c + b (-s) = a c - b s and b c + a s. */
#include "kernels/kernels.h"

#if defined(__aarch64__)
#include "kernels/common/f32-neon.h"

void nib_rope_rows_f32_neon(float *v, size_t r_begin, size_t r_end, size_t head_dim,
                            size_t rope_dim, const float *cs)
{
    const float32x4_t flip = {-1.0f, 1.0f, -1.0f, 1.0f};
    size_t r = r_begin;
    while (r + 1 < r_end) {
        size_t i = r % head_dim;
        if (i >= rope_dim) {
            r += head_dim - i;
            continue;
        }
        size_t end = r + (rope_dim - i);
        if (end > r_end)
            end = r_end;
        for (; r + 4 <= end; r += 4, i += 4) {
            float32x4_t x = vld1q_f32(v + r), t = vld1q_f32(cs + i);
            float32x4_t c = vtrn1q_f32(t, t), s = vmulq_f32(vtrn2q_f32(t, t), flip);
            float32x4_t xs = vrev64q_f32(x); /* b0 a0 b1 a1 */
            vst1q_f32(v + r, vaddq_f32(vmulq_f32(x, c), vmulq_f32(xs, s)));
        }
        for (; r + 1 < end; r += 2, i += 2)
            nib_rope_pair(v + r, cs[i], cs[i + 1]);
    }
}
#else
typedef int nib_rope_neon_unused;
#endif
