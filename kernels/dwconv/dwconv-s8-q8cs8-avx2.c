/* AVX2 depthwise int8 convolution: 8 channels per register, int8 widened to
 * int32 and multiplied exactly (the sums are the reference's integers), a
 * last partial block through a zero-padded copy; then the shared epilogue. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <immintrin.h>
#include <string.h>

#include "kernels/common/conv-epi.h"

NIB_DWCONV_S8_DECL(nib_dwconv_s8_q8cs8_avx2)
{
    assert(nib_conv_shape_ok(s) && s->groups == s->c_in && s->c_in == s->c_out);
    assert(x && wq && w_scale && e && (e->y_q || e->y_f32) && oh_begin <= oh_end &&
           oh_end <= s->oh);
    uint32_t c = s->c_out, cp = (c + 7) & ~7u;
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            size_t p = (size_t)oy * s->ow + ox;
            for (uint32_t c0 = 0; c0 < c; c0 += 64) {
                uint32_t n = c - c0 < 64 ? c - c0 : 64;
                int32_t isum[64];
                for (uint32_t b = 0; b < n; b += 8) {
                    uint32_t nb = n - b < 8 ? n - b : 8;
                    __m256i acc = _mm256_setzero_si256();
                    for (uint32_t ky = 0; ky < s->kh; ky++) {
                        uint32_t iy;
                        if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                            continue;
                        for (uint32_t kx = 0; kx < s->kw; kx++) {
                            uint32_t ix;
                            if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                                continue;
                            const int8_t *xp = x + ((size_t)iy * s->w + ix) * c + c0 + b;
                            int8_t t[8] = {0};
                            if (nb < 8) {
                                memcpy(t, xp, nb);
                                xp = t;
                            }
                            const int8_t *wt = wq + ((size_t)ky * s->kw + kx) * cp + c0 + b;
                            __m256i xv = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)xp));
                            __m256i wv = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)wt));
                            acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(xv, wv));
                        }
                    }
                    int32_t o[8];
                    _mm256_storeu_si256((__m256i *)o, acc);
                    memcpy(isum + b, o, nb * sizeof(int32_t));
                }
                nib_dwconv_s8_epi(e, isum, w_scale, x_scale, p, c, c0, n);
            }
        }
}
#else
typedef int nib_dwconv_s8_q8cs8_avx2_unused;
#endif
