/* Quantized convolution (avx2): the implicit GEMM of kernels/qconv.c over
 * the avx2 q4c / q8c matmul kernels, whose bits every ISA shares, with the
 * epilogue 8 channels at a time: each lane runs nib_qconv_epi_px's
 * operations (kernels/common/conv-epi.h) for its channel
 * (common/conv-epi-avx2.h). */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "kernels/common/conv-epi-avx2.h"
#include "kernels/conv.h"

/* nib_requant_s8 per lane, 8 int8 to y. */
static inline void requant8(__m256 v, __m256 inv, int8_t *y)
{
    const __m256 round = _mm256_set1_ps(12582912.0f);
    __m256 r = _mm256_sub_ps(_mm256_fmadd_ps(v, inv, round), round);
    r = _mm256_max_ps(_mm256_set1_ps(-127.0f), r);         /* r < -127 ? -127 : r (NaN kept) */
    r = _mm256_min_ps(_mm256_set1_ps(127.0f), r);          /* r > 127 ? 127 : r (NaN kept) */
    r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN: 0 */
    __m256i i = _mm256_cvtps_epi32(r);                     /* whole numbers: exact */
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    __m128i b = _mm_packs_epi16(w, w);
    _mm_storel_epi64((__m128i *)(void *)y, b);
}

static NIB_QCONV_EPI_DECL(qconv_epi_avx2)
{
    const __m256 p0v = _mm256_set1_ps(e->p0), p1v = _mm256_set1_ps(e->p1);
    const __m256 rs = _mm256_set1_ps(e->res_scale);
    const __m256 inv = _mm256_set1_ps(e->y_q ? 1.0f / e->y_scale : 0.0f);
    uint32_t c8 = c_out & ~7u;
    for (uint32_t t = 0; t < m; t++) {
        const float *vt = v + (size_t)t * c_out;
        size_t base = (p0 + t) * c_out;
        for (uint32_t c = 0; c < c8; c += 8) {
            __m256 x = _mm256_loadu_ps(vt + c), r = _mm256_setzero_ps();
            if (e->res)
                r = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                    _mm_loadl_epi64((const __m128i *)(const void *)(e->res + base + c))));
            if (e->res && e->res_first)
                x = _mm256_fmadd_ps(rs, r, x);
            x = nib_act8_avx2(x, e->act, p0v, p1v);
            if (e->res && !e->res_first)
                x = _mm256_fmadd_ps(rs, r, x);
            if (e->y_q)
                requant8(x, inv, e->y_q + base + c);
            else
                _mm256_storeu_ps(e->y_f32 + base + c, x);
        }
        if (c8 < c_out)
            nib_qconv_epi_px(e, vt + c8, p0 + t, c_out, c8, c_out - c8);
    }
}

NIB_QCONV_DECL(nib_conv_s8_qcs8_avx2)
{
    assert(nib_conv_shape_ok(s) && wt && (wt->dtype == NIB_DT_Q4C || wt->dtype == NIB_DT_Q8C));
    nib_qconv_run_epi(wt->dtype == NIB_DT_Q4C ? nib_gemm_f32_q4cs8_n8_avx2
                                              : nib_gemm_f32_q8cs8_n8_avx2,
                      qconv_epi_avx2, s, x, x_scale, wt, e, scratch, oh_begin, oh_end);
}
#else
typedef int nib_conv_s8_qcs8_avx2_unused;
#endif
