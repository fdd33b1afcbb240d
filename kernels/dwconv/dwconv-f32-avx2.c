/* AVX2 depthwise f32 convolution: one channel per lane, the reference's
 * taps in its order; a last partial block of channels is read and written
 * with masks. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include "kernels/common/conv-epi.h"
#include "kernels/common/f32-avx2.h"

NIB_DWCONV_F32_DECL(nib_dwconv_f32_avx2)
{
    assert(nib_conv_shape_ok(s) && s->groups == s->c_in && s->c_in == s->c_out);
    assert(x && wp && e && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t c = s->c_out, cp = (c + 7) & ~7u;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            float *yp = y + p * c;
            for (uint32_t c0 = 0; c0 < c; c0 += 8) {
                __m256i mask = nib_tail_mask_avx2(c - c0 < 8 ? c - c0 : 8);
                int full = c - c0 >= 8;
                __m256 acc = _mm256_setzero_ps();
                for (uint32_t ky = 0; ky < s->kh; ky++) {
                    uint32_t iy;
                    if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                        continue;
                    for (uint32_t kx = 0; kx < s->kw; kx++) {
                        uint32_t ix;
                        if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                            continue;
                        const float *xp = x + ((size_t)iy * s->w + ix) * c + c0;
                        __m256 xv = full ? _mm256_loadu_ps(xp) : _mm256_maskload_ps(xp, mask);
                        acc = _mm256_fmadd_ps(
                            xv, _mm256_loadu_ps(wp + ((size_t)ky * s->kw + kx) * cp + c0), acc);
                    }
                }
                if (full)
                    _mm256_storeu_ps(yp + c0, acc);
                else
                    _mm256_maskstore_ps(yp + c0, mask, acc);
            }
            nib_conv_epi_f32(e, yp, e->res ? e->res + p * c : NULL, 0, c);
        }
}
#else
typedef int nib_dwconv_f32_avx2_unused;
#endif
