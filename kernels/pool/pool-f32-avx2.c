/* AVX2 max and average pooling: one channel per lane, the reference's taps
 * in its order (maxps is the reference's v > m ? v : m); a last partial
 * block of channels is read and written with masks. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <math.h>

#include "kernels/common/conv-epi.h"
#include "kernels/common/f32-avx2.h"

/* Global pooling (nib_pool_is_global): 12 passes through the detector's
 * 9.8 MB map become one. */
static void pool_global_avx2(const struct nib_conv_shape *s, uint32_t mode, const float *x,
                             float *y)
{
    const uint32_t c = s->c_out, tail = c % 8;
    const size_t n = (size_t)s->h * s->w;
    const __m256i mask = nib_tail_mask_avx2(tail ? tail : 8), all = _mm256_set1_epi32(-1);
    const __m256 init = _mm256_set1_ps(mode == NIB_POOL_MAX ? -INFINITY : 0.0f);
    for (uint32_t c0 = 0; c0 < c; c0 += 8)
        _mm256_maskstore_ps(y + c0, c - c0 < 8 ? mask : all, init);
    for (size_t p = 0; p < n; p++) {
        const float *xp = x + p * c;
        uint32_t c0 = 0;
        for (; c0 + 8 <= c; c0 += 8) {
            __m256 v = _mm256_loadu_ps(xp + c0), acc = _mm256_loadu_ps(y + c0);
            acc = mode == NIB_POOL_MAX ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
            _mm256_storeu_ps(y + c0, acc);
        }
        if (tail) {
            __m256 v = _mm256_maskload_ps(xp + c0, mask), acc = _mm256_maskload_ps(y + c0, mask);
            acc = mode == NIB_POOL_MAX ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
            _mm256_maskstore_ps(y + c0, mask, acc);
        }
    }
    if (mode == NIB_POOL_MAX)
        return;
    const __m256 d = _mm256_set1_ps((float)n); /* every tap is inside: count = kh * kw */
    for (uint32_t c0 = 0; c0 < c; c0 += 8) {
        const __m256i m = c - c0 < 8 ? mask : all;
        _mm256_maskstore_ps(y + c0, m, _mm256_div_ps(_mm256_maskload_ps(y + c0, m), d));
    }
}

NIB_POOL_F32_DECL(nib_pool_f32_avx2)
{
    assert(nib_conv_shape_ok(s) && s->c_in == s->c_out && mode <= NIB_POOL_AVG_INCLUDE_PAD);
    assert(x && y && oh_begin <= oh_end && oh_end <= s->oh);
    uint32_t c = s->c_out;
    if (nib_pool_is_global(s)) {
        if (oh_begin < oh_end)
            pool_global_avx2(s, mode, x, y);
        return;
    }
    for (uint32_t oy = oh_begin; oy < oh_end; oy++)
        for (uint32_t ox = 0; ox < s->ow; ox++) {
            float *yp = y + ((size_t)oy * s->ow + ox) * c;
            for (uint32_t c0 = 0; c0 < c; c0 += 8) {
                __m256i mask = nib_tail_mask_avx2(c - c0 < 8 ? c - c0 : 8);
                int full = c - c0 >= 8;
                __m256 acc = _mm256_set1_ps(mode == NIB_POOL_MAX ? -INFINITY : 0.0f);
                uint32_t count = 0;
                for (uint32_t ky = 0; ky < s->kh; ky++) {
                    uint32_t iy;
                    if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy))
                        continue;
                    for (uint32_t kx = 0; kx < s->kw; kx++) {
                        uint32_t ix;
                        if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix))
                            continue;
                        const float *xp = x + ((size_t)iy * s->w + ix) * c + c0;
                        __m256 v = full ? _mm256_loadu_ps(xp) : _mm256_maskload_ps(xp, mask);
                        count++;
                        acc = mode == NIB_POOL_MAX ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
                    }
                }
                if (mode != NIB_POOL_MAX) {
                    float d =
                        mode == NIB_POOL_AVG_INCLUDE_PAD ? (float)(s->kh * s->kw) : (float)count;
                    acc = _mm256_div_ps(acc, _mm256_set1_ps(d));
                }
                if (full)
                    _mm256_storeu_ps(yp + c0, acc);
                else
                    _mm256_maskstore_ps(yp + c0, mask, acc);
            }
        }
}
#else
typedef int nib_pool_f32_avx2_unused;
#endif
