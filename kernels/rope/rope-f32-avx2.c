/* AVX2 RoPE: 4 pairs at a time within a head's rotated dims; addsub gives
 * a c - b s in the even lanes and b c + a s (= a s + b c) in the odd ones. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include "kernels/common/f32-avx2.h"

NIB_ROPE_DECL(nib_rope_f32_avx2)
{
    nib_pre_rope(v, r_begin, r_end, head_dim, rope_dim, cs);
    size_t r = r_begin, end;
    while ((end = nib_rope_run(&r, r_end, head_dim, rope_dim)) > r) {
        size_t i = r % head_dim;
        for (; r + 8 <= end; r += 8, i += 8) {
            __m256 x = _mm256_loadu_ps(v + r), t = _mm256_loadu_ps(cs + i);
            __m256 c = _mm256_moveldup_ps(t), s = _mm256_movehdup_ps(t);
            __m256 xs = _mm256_permute_ps(x, 0xB1); /* b0 a0 b1 a1 ... */
            _mm256_storeu_ps(v + r, _mm256_addsub_ps(_mm256_mul_ps(x, c), _mm256_mul_ps(xs, s)));
        }
        r = nib_rope_pairs(v, r, end, i, cs);
    }
}
#else
typedef int nib_rope_f32_avx2_unused;
#endif
