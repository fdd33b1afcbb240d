/* AVX2 RoPE: 4 pairs at a time within a head's rotated dims; addsub gives
 * a c - b s in the even lanes and b c + a s (= a s + b c) in the odd ones. */
#include "kernels/kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include "kernels/common/f32-avx2.h"

void nib_rope_rows_f32_avx2(float *v, size_t r_begin, size_t r_end, size_t head_dim,
                            size_t rope_dim, const float *cs)
{
    size_t r = r_begin;
    while (r + 1 < r_end) {
        size_t i = r % head_dim;
        if (i >= rope_dim) { /* the rest of this head is not rotated */
            r += head_dim - i;
            continue;
        }
        size_t end = r + (rope_dim - i); /* end of this head's rotated dims */
        if (end > r_end)
            end = r_end;
        for (; r + 8 <= end; r += 8, i += 8) {
            __m256 x = _mm256_loadu_ps(v + r), t = _mm256_loadu_ps(cs + i);
            __m256 c = _mm256_moveldup_ps(t), s = _mm256_movehdup_ps(t);
            __m256 xs = _mm256_permute_ps(x, 0xB1); /* b0 a0 b1 a1 ... */
            _mm256_storeu_ps(v + r, _mm256_addsub_ps(_mm256_mul_ps(x, c), _mm256_mul_ps(xs, s)));
        }
        for (; r + 1 < end; r += 2, i += 2)
            nib_rope_pair(v + r, cs[i], cs[i + 1]);
    }
}
#else
typedef int nib_rope_avx2_unused;
#endif
