/* AVX2 resize: the reference's operations with one channel per lane (8 at
 * a time); a last partial block of channels with masks. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include "kernels/common/f32-avx2.h"
#include "kernels/resize/resize-walk.h"

static inline void blend_avx2(float *yp, const float *const src[4], const float w[4], uint32_t c)
{
    const __m256 w0 = _mm256_set1_ps(w[0]), w1 = _mm256_set1_ps(w[1]), w2 = _mm256_set1_ps(w[2]),
                 w3 = _mm256_set1_ps(w[3]);
    for (uint32_t c0 = 0; c0 < c; c0 += 8) {
        const __m256i m = nib_tail_mask_avx2(c - c0 < 8 ? c - c0 : 8);
        const int full = c - c0 >= 8;
#define LD(i) (full ? _mm256_loadu_ps(src[i] + c0) : _mm256_maskload_ps(src[i] + c0, m))
        __m256 v = _mm256_mul_ps(LD(0), w0);
        v = _mm256_fmadd_ps(LD(1), w1, v);
        v = _mm256_fmadd_ps(LD(2), w2, v);
        v = _mm256_fmadd_ps(LD(3), w3, v);
#undef LD
        if (full)
            _mm256_storeu_ps(yp + c0, v);
        else
            _mm256_maskstore_ps(yp + c0, m, v);
    }
}

NIB_RESIZE_F32_DECL(nib_resize_f32_avx2)
{
    nib_resize_walk(r, x, y, oh_begin, oh_end, blend_avx2);
}
#else
typedef int nib_resize_f32_avx2_unused;
#endif
