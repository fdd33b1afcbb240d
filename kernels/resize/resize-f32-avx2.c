/* AVX2 resize: the reference's operations with one channel per lane (8 at
 * a time); a last partial block of channels with masks. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <string.h>

#include "kernels/common/conv-epi.h"
#include "kernels/common/f32-avx2.h"

NIB_RESIZE_F32_DECL(nib_resize_f32_avx2)
{
    assert(nib_resize_ok(r) && x && y && oh_begin <= oh_end && oh_end <= r->oh);
    uint32_t c = r->c;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++) {
        struct nib_resize_tap ty;
        nib_resize_axis(r, 1, oy, &ty);
        for (uint32_t ox = 0; ox < r->ow; ox++) {
            struct nib_resize_tap tx;
            nib_resize_axis(r, 0, ox, &tx);
            float *yp = y + ((size_t)oy * r->ow + ox) * c;
            const float *a = x + ((size_t)ty.i0 * r->w + tx.i0) * c;
            if (!r->linear) {
                memcpy(yp, a, c * sizeof(float));
                continue;
            }
            const float *b = x + ((size_t)ty.i0 * r->w + tx.i1) * c;
            const float *cc = x + ((size_t)ty.i1 * r->w + tx.i0) * c;
            const float *d = x + ((size_t)ty.i1 * r->w + tx.i1) * c;
            float y0 = 1.0f - ty.f, x0 = 1.0f - tx.f;
            __m256 w00 = _mm256_set1_ps(y0 * x0), w01 = _mm256_set1_ps(y0 * tx.f);
            __m256 w10 = _mm256_set1_ps(ty.f * x0), w11 = _mm256_set1_ps(ty.f * tx.f);
            for (uint32_t c0 = 0; c0 < c; c0 += 8) {
                __m256i m = nib_tail_mask_avx2(c - c0 < 8 ? c - c0 : 8);
                int full = c - c0 >= 8;
#define LD(p) (full ? _mm256_loadu_ps((p) + c0) : _mm256_maskload_ps((p) + c0, m))
                __m256 v = _mm256_mul_ps(LD(a), w00);
                v = _mm256_fmadd_ps(LD(b), w01, v);
                v = _mm256_fmadd_ps(LD(cc), w10, v);
                v = _mm256_fmadd_ps(LD(d), w11, v);
#undef LD
                if (full)
                    _mm256_storeu_ps(yp + c0, v);
                else
                    _mm256_maskstore_ps(yp + c0, m, v);
            }
        }
    }
}
#else
typedef int nib_resize_f32_avx2_unused;
#endif
