/* The quantized convolution's implicit GEMM (kernels/conv.h), the same
 * for every ISA: it lays output pixels' windows out as an activation
 * object and hands them to the ISA's q4c/q8c matmul kernel, whose bits
 * every ISA shares, then runs the epilogue (the shared scalar one, or an
 * ISA's vector one that repeats its operations lane by lane).
 *
 * Only the integer part has fast paths, and integer sums are exact, so
 * every path gives the same bits:
 *   - 1x1, stride 1, no groups, c_in a multiple of 32 (ResNet's 1x1
 *     layers): the NHWC input rows already are the matmul's rows, so the
 *     activation object points into the input and only the sums for the
 *     +8 correction are computed (no copy);
 *   - otherwise each window is gathered, with one copy per kernel row
 *     where the taps of a row are contiguous in the input (no groups, no
 *     horizontal dilation), its sum taken by the copies. */
#include <assert.h>
#include <string.h>

#include "kernels/common/conv-epi.h"
#include "kernels/common/isa.h"
#include "kernels/conv.h"

#if NIB_HAVE_AVX2
#include <immintrin.h>
#endif

static size_t align64(size_t n)
{
    return (n + 63u) & ~(size_t)63u;
}

/* Sum of n int8 codes, n a multiple of 32 (rows are padded with zeros to
 * k_pad). An exact integer, so every path gives the same value: on AVX2
 * the codes are offset to unsigned (x ^ 0x80 = x + 128) and summed 32 at a
 * time by vpsadbw, 128 * n taken off at the end; elsewhere 32 independent
 * lanes the compiler can keep in vectors. */
static int32_t sum_s8_32(const int8_t *p, size_t n)
{
    assert(n >= 32 && n % 32 == 0);
#if NIB_HAVE_AVX2
    const __m256i flip = _mm256_set1_epi8((char)0x80), zero = _mm256_setzero_si256();
    __m256i acc = zero; /* four u64 lanes: at most n * 255 each */
    for (size_t i = 0; i < n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_xor_si256(v, flip), zero));
    }
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    h = _mm_add_epi64(h, _mm_unpackhi_epi64(h, h));
    return (int32_t)((int64_t)_mm_cvtsi128_si64(h) - 128 * (int64_t)n);
#else
    int32_t lane[32];
    /* the first 32 set the lanes: zeroing them first compiled to a slow
     * rep stos, a tenth of the whole sum on short rows */
    for (uint32_t j = 0; j < 32; j++)
        lane[j] = p[j];
    for (size_t i = 32; i < n; i += 32)
        for (uint32_t j = 0; j < 32; j++)
            lane[j] += p[i + j];
    int32_t s = 0;
    for (uint32_t j = 0; j < 32; j++)
        s += lane[j];
    return s;
#endif
}

/* Copy n codes from src to dst and return their sum when with_sum (0
 * otherwise): one pass, so a window's sum costs no second read of its
 * row (the separate pass was 7 % of the detector, most of it in its 3x3
 * convolutions to 24 channels). An exact integer, as sum_s8_32. */
static int32_t copy_sum_s8(int8_t *dst, const int8_t *src, size_t n, int with_sum)
{
    if (!with_sum) {
        memcpy(dst, src, n);
        return 0;
    }
#if NIB_HAVE_AVX2
    size_t i = 0;
    int64_t total = 0;
    const __m256i flip = _mm256_set1_epi8((char)0x80), zero = _mm256_setzero_si256();
    __m256i acc = zero; /* four u64 lanes of sums of codes + 128 */
    for (; i + 32 <= n; i += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), v);
        acc = _mm256_add_epi64(acc, _mm256_sad_epu8(_mm256_xor_si256(v, flip), zero));
    }
    /* the rest by 16, 8 and 4 (a stem's runs are 9 bytes); the bytes past
     * a short load are zero and their flip is 0, so they add nothing */
    const __m128i flip16 = _mm256_castsi256_si128(flip), z16 = _mm256_castsi256_si128(zero);
    const __m128i flip8 = _mm_set_epi64x(0, (long long)0x8080808080808080ull);
    if (i + 16 <= n) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm_storeu_si128((__m128i *)(void *)(dst + i), v);
        acc = _mm256_add_epi64(acc,
                               _mm256_castsi128_si256(_mm_sad_epu8(_mm_xor_si128(v, flip16), z16)));
        i += 16;
    }
    if (i + 8 <= n) {
        __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)(src + i));
        _mm_storel_epi64((__m128i *)(void *)(dst + i), v);
        acc = _mm256_add_epi64(acc,
                               _mm256_castsi128_si256(_mm_sad_epu8(_mm_xor_si128(v, flip8), z16)));
        i += 8;
    }
    if (i + 4 <= n) {
        int32_t w;
        memcpy(&w, src + i, 4);
        memcpy(dst + i, &w, 4);
        __m128i v = _mm_cvtsi32_si128(w);
        acc =
            _mm256_add_epi64(acc, _mm256_castsi128_si256(_mm_sad_epu8(
                                      _mm_xor_si128(v, _mm_cvtsi32_si128((int)0x80808080u)), z16)));
        i += 4;
    }
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    h = _mm_add_epi64(h, _mm_unpackhi_epi64(h, h));
    total = (int64_t)_mm_cvtsi128_si64(h) - 128 * (int64_t)i;
    for (; i < n; i++) {
        dst[i] = src[i];
        total += src[i];
    }
    return (int32_t)total;
#else
    /* two loops the compiler vectorizes (int32 lanes for the sum) */
    memcpy(dst, src, n);
    int32_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += src[i];
    return total;
#endif
}

/* Gather the window of output pixel p for group g into row t of a
 * (codes in the order (ky, kx, ic), zeros outside the input) with its sum
 * when the matmul reads it (with_sum: q4c's +8 correction, AVX-512's
 * q8c; the other q8c kernels never read a->sum, and the sums were a
 * tenth of the detector's 3x3 q8c head, so it is 0 there). */
static void qconv_gather(const struct nib_conv_shape *s, const int8_t *x, float x_scale, uint32_t g,
                         size_t p, const struct nib_qact *a, uint32_t t, int with_sum)
{
    uint32_t icg = s->c_in / s->groups, oy = (uint32_t)(p / s->ow), ox = (uint32_t)(p % s->ow);
    int8_t *row = a->q + (size_t)t * a->k_pad;
    int32_t sum = 0; /* of the codes copied (the zeros add nothing) */
    /* the taps of one kernel row are one run of the input when the pixels
     * are adjacent (dil_w 1) and hold nothing but this group (groups 1) */
    int runs = s->groups == 1 && s->dil_w == 1;
    size_t k = 0;
    uint32_t wy0, wy1, wx0, wx1;
    int inside = runs && nib_tap_in(oy, 0, s->stride_h, s->pad_top, s->dil_h, s->h, &wy0) &&
                 nib_tap_in(oy, s->kh - 1, s->stride_h, s->pad_top, s->dil_h, s->h, &wy1) &&
                 nib_tap_in(ox, 0, s->stride_w, s->pad_left, 1, s->w, &wx0) &&
                 nib_tap_in(ox, s->kw - 1, s->stride_w, s->pad_left, 1, s->w, &wx1);
    if (inside) {
        /* the first and last taps inside, so all of them (most pixels):
         * one copy per kernel row and no test per tap, which were most of
         * a 7x7 stem's time over 3 input channels */
        size_t run = (size_t)s->kw * icg;
        for (uint32_t ky = 0; ky < s->kh; ky++, k += run)
            sum += copy_sum_s8(row + k, x + ((size_t)(wy0 + ky * s->dil_h) * s->w + wx0) * s->c_in,
                               run, with_sum);
    }
    for (uint32_t ky = 0; ky < s->kh && !inside; ky++) {
        uint32_t iy;
        if (!nib_tap_in(oy, ky, s->stride_h, s->pad_top, s->dil_h, s->h, &iy)) {
            memset(row + k, 0, (size_t)s->kw * icg);
            k += (size_t)s->kw * icg;
            continue;
        }
        if (runs) {
            uint32_t kx0 = s->kw, kx1 = 0, ix0 = 0, ix;
            for (uint32_t kx = 0; kx < s->kw; kx++)
                if (nib_tap_in(ox, kx, s->stride_w, s->pad_left, 1, s->w, &ix)) {
                    if (kx0 == s->kw)
                        kx0 = kx, ix0 = ix;
                    kx1 = kx + 1;
                }
            if (kx0 == s->kw)
                kx0 = kx1 = 0;
            if (kx0) /* an edge pixel; calls of length 0 were a few % of a detector */
                memset(row + k, 0, (size_t)kx0 * icg);
            sum += copy_sum_s8(row + k + (size_t)kx0 * icg, x + ((size_t)iy * s->w + ix0) * s->c_in,
                               (size_t)(kx1 - kx0) * icg, with_sum);
            if (kx1 < s->kw)
                memset(row + k + (size_t)kx1 * icg, 0, (size_t)(s->kw - kx1) * icg);
            k += (size_t)s->kw * icg;
            continue;
        }
        for (uint32_t kx = 0; kx < s->kw; kx++, k += icg) {
            uint32_t ix;
            if (!nib_tap_in(ox, kx, s->stride_w, s->pad_left, s->dil_w, s->w, &ix)) {
                memset(row + k, 0, icg);
                continue;
            }
            sum += copy_sum_s8(row + k, x + ((size_t)iy * s->w + ix) * s->c_in + (size_t)g * icg,
                               icg, with_sum);
        }
    }
    if (a->k_pad > k) /* the row's padding to a multiple of 32 */
        memset(row + k, 0, a->k_pad - k);
    a->scale[t] = x_scale;
    a->sum[t] = sum;
}

/* 1 when output pixel p reads input pixel p alone (a pointwise
 * convolution): its window is its own c_in codes. */
static int qconv_pointwise(const struct nib_conv_shape *s)
{
    return s->kh == 1 && s->kw == 1 && s->stride_h == 1 && s->stride_w == 1 && s->pad_top == 0 &&
           s->pad_left == 0 && s->groups == 1 && s->oh == s->h && s->ow == s->w;
}

/* 1 when the input's rows are the matmul's rows as they stand. */
static int qconv_direct(const struct nib_conv_shape *s, const int8_t *x,
                        const struct nib_qlayout *l)
{
    return qconv_pointwise(s) && l->k_pad == s->c_in && ((uintptr_t)x & 31) == 0;
}

/* Rows t < m of a for the pixels from p0 of a pointwise convolution whose
 * rows are padded (c_in not a multiple of 32): one copy each; the padding
 * was zeroed once per call (nothing else writes it). The general gather's
 * tests per pixel were a third of a 16-channel layer's time. */
static void qconv_gather_pointwise(const int8_t *x, uint32_t c_in, float x_scale, size_t p0,
                                   uint32_t m, const struct nib_qact *a, int with_sum)
{
    for (uint32_t t = 0; t < m; t++) {
        a->sum[t] = copy_sum_s8(a->q + (size_t)t * a->k_pad, x + (p0 + t) * c_in, c_in, with_sum);
        a->scale[t] = x_scale;
    }
}

static NIB_QCONV_EPI_DECL(qconv_epi_scalar)
{
    for (uint32_t t = 0; t < m; t++)
        nib_qconv_epi_px(e, v + (size_t)t * c_out, p0 + t, c_out, 0, c_out);
}

void nib_qconv_run_epi(nib_qgemm_fn gemm, nib_qconv_epi_fn epi, int sums,
                       const struct nib_conv_shape *s, const int8_t *x, float x_scale,
                       const struct nib_qconv_weights *wt, const struct nib_qconv_epi *e,
                       void *scratch, uint32_t oh_begin, uint32_t oh_end)
{
    struct nib_qlayout l;
    int rc = nib_qconv_layout(s, wt->dtype, &l);
    assert(rc == 0 && x && wt->packed && e && scratch && ((uintptr_t)scratch & 63) == 0);
    assert(oh_begin <= oh_end && oh_end <= s->oh && (e->y_q || e->y_f32));
    (void)rc;
    struct nib_qact a;
    rc = nib_qact_init(&a, scratch, NIB_QCONV_TILE, l.cols, 0);
    assert(rc == 0);
    float *v =
        (float *)((uint8_t *)scratch + align64(nib_qact_footprint(NIB_QCONV_TILE, l.cols, 0)));
    uint32_t ocg = s->c_out / s->groups;
    size_t p_end = (size_t)oh_end * s->ow;
    const int direct = qconv_direct(s, x, &l), pointwise = !direct && qconv_pointwise(s);
    assert(sums || wt->dtype != NIB_DT_Q4C);
    for (uint32_t t = 0; pointwise && t < NIB_QCONV_TILE; t++)
        memset(a.q + (size_t)t * a.k_pad + s->c_in, 0, a.k_pad - s->c_in);
    for (size_t p0 = (size_t)oh_begin * s->ow; p0 < p_end; p0 += NIB_QCONV_TILE) {
        uint32_t m = (uint32_t)(p_end - p0 < NIB_QCONV_TILE ? p_end - p0 : NIB_QCONV_TILE);
        if (direct) {
            struct nib_qact d = a;
            d.q = (int8_t *)(uintptr_t)(x + p0 * s->c_in); /* read only by the matmul */
            for (uint32_t t = 0; t < m; t++) {
                d.scale[t] = x_scale;
                d.sum[t] = sums ? sum_s8_32(d.q + (size_t)t * s->c_in, s->c_in) : 0;
            }
            gemm(&l, wt->packed, &d, m, v, s->c_out, e->bias, 0, 0, ocg);
        } else if (pointwise) {
            qconv_gather_pointwise(x, s->c_in, x_scale, p0, m, &a, sums);
            gemm(&l, wt->packed, &a, m, v, s->c_out, e->bias, 0, 0, ocg);
        } else {
            for (uint32_t g = 0; g < s->groups; g++) {
                for (uint32_t t = 0; t < m; t++)
                    qconv_gather(s, x, x_scale, g, p0 + t, &a, t, sums);
                gemm(&l, wt->packed + (size_t)g * l.size, &a, m, v + (size_t)g * ocg, s->c_out,
                     e->bias ? e->bias + (size_t)g * ocg : NULL, 0, 0, ocg);
            }
        }
        epi(e, v, p0, m, s->c_out);
    }
}

void nib_qconv_run(nib_qgemm_fn gemm, const struct nib_conv_shape *s, const int8_t *x,
                   float x_scale, const struct nib_qconv_weights *wt, const struct nib_qconv_epi *e,
                   void *scratch, uint32_t oh_begin, uint32_t oh_end)
{
    nib_qconv_run_epi(gemm, qconv_epi_scalar, wt->dtype == NIB_DT_Q4C, s, x, x_scale, wt, e,
                      scratch, oh_begin, oh_end);
}
