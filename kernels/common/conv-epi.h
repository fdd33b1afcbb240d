/* The vision kernels' epilogues (kernels/conv.h), written once in scalar C
 * and run by every ISA variant on the sums its lanes produced, so they give
 * the same bits by construction. Every multiply-add is an explicit fma;
 * selects are compares, so NaN goes where the reference sends it. */
#ifndef NIB_CONV_EPI_H
#define NIB_CONV_EPI_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/conv.h"

static inline float nib_act_f32(float v, uint32_t act, float p0, float p1)
{
    float t;
    switch (act) {
    case NIB_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case NIB_ACT_CLIP: v = v < p0 ? p0 : v; return v > p1 ? p1 : v;
    case NIB_ACT_HSIGMOID:
    case NIB_ACT_HSWISH:
        t = __builtin_fmaf(p0, v, p1);
        t = t > 0.0f ? t : 0.0f; /* NaN: 0 */
        t = t < 1.0f ? t : 1.0f;
        return act == NIB_ACT_HSWISH ? v * t : t;
    default: return v;
    }
}

/* Outputs y[0..n) of channels c0.. of one pixel (res: the residual at the
 * same place, or NULL). */
static inline void nib_conv_epi_f32(const struct nib_conv_epi *e, float *y, const float *res,
                                    uint32_t c0, uint32_t n)
{
    for (uint32_t j = 0; j < n; j++) {
        float v = y[j];
        if (e->bias)
            v += e->bias[c0 + j];
        if (res && e->res_first)
            v += res[j];
        v = nib_act_f32(v, e->act, e->p0, e->p1);
        if (res && !e->res_first)
            v += res[j];
        y[j] = v;
    }
}

/* round-half-even(v / y_scale) clamped to [-127, 127], as the activation
 * quantizer rounds (fma with 1.5 * 2^23); NaN gives 0. */
static inline int8_t nib_requant_s8(float v, float inv_scale)
{
    const float round = 12582912.0f; /* 1.5 * 2^23 */
    float r = __builtin_fmaf(v, inv_scale, round) - round;
    /* selects only (a NaN passes both clamps, then becomes 0), so loops
     * over it vectorise */
    r = r < -127.0f ? -127.0f : r;
    r = r > 127.0f ? 127.0f : r;
    r = r == r ? r : 0.0f;
    return (int8_t)r;
}

/* Quantized epilogue of outputs [c0, c0 + n) of output pixel p, from the
 * dequantized sums v[0..n) (bias already added): residual (int8 or f32),
 * activation, then int8 or f32 out, or both. */
static inline void nib_qconv_epi_px(const struct nib_qconv_epi *e, const float *v, size_t p,
                                    uint32_t c_out, uint32_t c0, uint32_t n)
{
    size_t base = p * c_out + c0;
    float inv = e->y_q ? 1.0f / e->y_scale : 0.0f;
    for (uint32_t j = 0; j < n; j++) {
        float t = v[j];
        if (e->res && e->res_first)
            t = __builtin_fmaf(e->res_scale, (float)e->res[base + j], t);
        if (e->res_f32 && e->res_first)
            t += e->res_f32[base + j];
        t = nib_act_f32(t, e->act, e->p0, e->p1);
        if (e->res && !e->res_first)
            t = __builtin_fmaf(e->res_scale, (float)e->res[base + j], t);
        if (e->res_f32 && !e->res_first)
            t += e->res_f32[base + j];
        if (e->y_q)
            e->y_q[base + j] = nib_requant_s8(t, inv);
        if (e->y_f32)
            e->y_f32[base + j] = t;
    }
}

/* The depthwise int8 float part: v = fma((float)isum, ws * x_scale, bias or
 * +0) for channels [c0, c0 + n) of pixel p, then nib_qconv_epi_px. */
static inline void nib_dwconv_s8_epi(const struct nib_qconv_epi *e, const int32_t *isum,
                                     const float *w_scale, float x_scale, size_t p, uint32_t c_out,
                                     uint32_t c0, uint32_t n)
{
    float v[64];
    assert(n <= 64);
    for (uint32_t j = 0; j < n; j++)
        v[j] = __builtin_fmaf((float)isum[j], w_scale[c0 + j] * x_scale,
                              e->bias ? e->bias[c0 + j] : 0.0f);
    nib_qconv_epi_px(e, v, p, c_out, c0, n);
}

/* The first input row/column of output o's window and whether tap t of it
 * lies inside [0, in). */
static inline int nib_tap_in(uint32_t o, uint32_t t, uint32_t stride, uint32_t pad, uint32_t dil,
                             uint32_t in, uint32_t *pos)
{
    int64_t v = (int64_t)o * stride - pad + (int64_t)t * dil;
    *pos = (uint32_t)v;
    return v >= 0 && v < (int64_t)in;
}

/* A pool whose one output pixel's window is the whole unpadded image: its
 * taps are the pixels in memory order, so the SIMD kernels keep each
 * channel's running value in y and read the image once, front to back (a
 * pass per block of channels would stride through it c / block times). */
static inline int nib_pool_is_global(const struct nib_conv_shape *s)
{
    return s->oh == 1 && s->ow == 1 && s->kh == s->h && s->kw == s->w && !s->pad_top &&
           !s->pad_left && s->dil_h == 1 && s->dil_w == 1;
}

#endif
