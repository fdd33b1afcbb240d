/* Float arithmetic the f32 kernels share, written once in scalar C so that
 * every ISA variant can follow it operation for operation and give the
 * same bits (the scalar references use it; SIMD variants use it for their
 * loop tails and mirror it in registers).
 *
 * tree8: 8 lane partial sums added as ((0+4) + (2+6)) + ((1+5) + (3+7)),
 * the order an AVX2 (256 -> 128 -> 64 -> 32 bits) or NEON (2 x 128 bits)
 * reduction takes. A reduction over n inputs keeps lane j = inputs j,
 * j + 8, j + 16, ... (missing inputs count as +0).
 *
 * nib_expf: 2^n * p(r) with n = round(x / ln 2) (the 1.5 * 2^23 trick:
 * plain float adds), r = x - n ln 2 in two fma steps, p the degree-7
 * Taylor polynomial (|r| <= ln 2 / 2: truncation below 6e-9 relative).
 * x is clamped to [NIB_EXP_MIN, NIB_EXP_MAX]; below NIB_EXP_MIN, and for
 * NaN, the result is 0. The selects are written as x86's maxps/minps
 * define them (NaN or equal inputs give the second operand); NEON code
 * spells them out with compares, since its fmax/fmin treat NaN otherwise.
 *
 * nib_tanhf: a = |x|; for a >= 0.75, 1 - 2 / (nib_expf(2a) + 1) (2a is
 * exact; past a = 44 the exp clamps and the result is 1); below, the odd
 * polynomial fma(a * z, P(z), a), z = a * a, P of degree 5 in z (a
 * near-minimax fit of (tanh(a) - a) / a^3 on [0, 0.75^2], Horner with
 * fmas); then the sign bit of x is put back (tanh(-0) = -0, NaN stays
 * NaN). Within 1.05 ulp of tanh over every float (checked exhaustively
 * against double tanh; tests/kernels/opcheck.c samples it on every run).
 * nib_softcapf(s, c) = c * nib_tanhf(s / c) (attention and logit
 * soft-capping).
 *
 * nib_gelu_mul1: GELU's tanh form 0.5 a (1 + tanh(u)), u = sqrt(2/pi)
 * (a + 0.044715 a^3), computed as the identical a / (1 + exp(-2u))
 * (0.5 (1 + tanh u) is the logistic function of 2u), which keeps its
 * relative accuracy for negative a where 1 + tanh(u) would cancel:
 * v = a * fma(a * a, K1, K0) with K0 = -2 sqrt(2/pi), K1 = 0.044715 K0
 * (v = -2u), then a / (1 + nib_expf(v)) * b.
 * Include only from kernels/ (and the tests of kernels). */
#ifndef NIB_F32_MATH_H
#define NIB_F32_MATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/common/pre.h"
#include "kernels/kernels.h"

#define NIB_EXP_MIN (-87.0f)
#define NIB_EXP_MAX 88.0f
#define NIB_EXP_ROUND 12582912.0f /* 1.5 * 2^23 */
#define NIB_EXP_LOG2E 1.44269502162933349609375f
#define NIB_EXP_LN2_HI 0.693145751953125f
#define NIB_EXP_LN2_LO 1.428606765330187045e-06f

static const float nib_exp_c[8] = {
    1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f,
};

static inline float nib_tree8(const float l[8])
{
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

static inline float nib_expf(float x)
{
    float xc = x > NIB_EXP_MIN ? x : NIB_EXP_MIN;
    xc = xc < NIB_EXP_MAX ? xc : NIB_EXP_MAX;
    float n = (xc * NIB_EXP_LOG2E + NIB_EXP_ROUND) - NIB_EXP_ROUND;
    float r = __builtin_fmaf(n, -NIB_EXP_LN2_HI, xc);
    r = __builtin_fmaf(n, -NIB_EXP_LN2_LO, r);
    float p = nib_exp_c[0];
    for (int i = 1; i < 8; i++)
        p = __builtin_fmaf(p, r, nib_exp_c[i]);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    float y = p * scale;
    return x >= NIB_EXP_MIN ? y : 0.0f;
}

#define NIB_TANH_SMALL 0.75f /* below: the polynomial */

/* P(z), highest degree first (Horner order). */
static const float nib_tanh_c[6] = {
    0x1.f4908ap-10f, -0x1.03f99ap-7f, 0x1.622538p-6f,
    -0x1.b9d7aep-5f, 0x1.111042p-3f,  -0x1.555554p-2f,
};

static inline float nib_tanhf(float x)
{
    uint32_t bx, ba, br;
    memcpy(&bx, &x, 4);
    ba = bx & 0x7fffffffu;
    float a, r;
    memcpy(&a, &ba, 4);
    if (a >= NIB_TANH_SMALL) {
        r = 1.0f - 2.0f / (nib_expf(a + a) + 1.0f);
    } else { /* NaN too */
        float z = a * a, p = nib_tanh_c[0];
        for (int i = 1; i < 6; i++)
            p = __builtin_fmaf(p, z, nib_tanh_c[i]);
        r = __builtin_fmaf(a * z, p, a);
    }
    memcpy(&br, &r, 4);
    br |= bx & 0x80000000u;
    memcpy(&r, &br, 4);
    return r;
}

/* Soft-capping with cap c > 0: c * tanh(s / c). */
static inline float nib_softcapf(float s, float c)
{
    return c * nib_tanhf(s / c);
}

#define NIB_GELU_K0 (-0x1.988454p+0f) /* -2 sqrt(2/pi) */
#define NIB_GELU_K1 (-0x1.2444f2p-4f) /* -2 sqrt(2/pi) 0.044715 */

/* gelu(a) * b, one element. */
static inline float nib_gelu_mul1(float a, float b)
{
    float v = a * __builtin_fmaf(a * a, NIB_GELU_K1, NIB_GELU_K0);
    return a / (1.0f + nib_expf(v)) * b;
}

/* x[0..width) of which the first n are real (n > 0): x itself when
 * n >= width, else a zero-padded copy in tmp, so no read goes past the
 * caller's data. */
static inline const float *nib_f32_padded(const float *x, size_t n, size_t width, float *tmp)
{
    if (n >= width)
        return x;
    for (size_t i = 0; i < width; i++)
        tmp[i] = i < n ? x[i] : 0.0f;
    return tmp;
}

/* Lane sums of a[i] * b[i] (see above), before the tree. */
static inline void nib_dot_lanes(const float *a, const float *b, size_t n, float l[8])
{
    for (int j = 0; j < 8; j++)
        l[j] = 0.0f;
    for (size_t i = 0; i < n; i += 8)
        for (size_t j = 0; j < 8; j++) {
            float x = i + j < n ? a[i + j] : 0.0f, y = i + j < n ? b[i + j] : 0.0f;
            l[j] = __builtin_fmaf(x, y, l[j]);
        }
}

/* nib_dot_lanes + nib_tree8. */
static inline float nib_dot_scalar(const float *a, const float *b, size_t n)
{
    float l[8];
    nib_dot_lanes(a, b, n, l);
    return nib_tree8(l);
}

/* Defines the f32 GEMV `name` on the dot product `dot` (nib_dot_<isa>):
 * y[r] = dot(w[r], x) (+ add[r]). */
#define NIB_GEMV_F32_KERNEL(name, dot)                                                             \
    NIB_GEMV_F32_DECL(name)                                                                        \
    {                                                                                              \
        nib_pre_gemv_f32(w, x, y, n_begin, n_end, k);                                              \
        for (size_t r = n_begin; r < n_end; r++) {                                                 \
            float d = dot(w + r * k, x, k);                                                        \
            y[r] = add ? d + add[r] : d;                                                           \
        }                                                                                          \
    }

/* RoPE: the next run of rotated rows at or after *r and below r_end
 * (skipping the unrotated dims of each head): moves *r to its start and
 * returns its end, or returns *r when none is left. */
static inline size_t nib_rope_run(size_t *r, size_t r_end, size_t head_dim, size_t rope_dim)
{
    while (*r + 1 < r_end) {
        size_t i = *r % head_dim;
        if (i < rope_dim) {
            size_t end = *r + (rope_dim - i); /* end of this head's rotated dims */
            return end < r_end ? end : r_end;
        }
        *r += head_dim - i; /* the rest of this head is not rotated */
    }
    return *r;
}

/* Attention, after a SIMD variant has exponentiated terms [0, t) of a and
 * summed them into lanes: the remaining terms (stored back into a) and
 * the sum. */
static inline float nib_softmax_tail_sum(float *a, size_t t, size_t n, float max, float lanes[8])
{
    for (; t < n; t++) {
        a[t] = nib_expf(a[t] - max);
        lanes[t % 8] += a[t];
    }
    return nib_tree8(lanes);
}

/* nib_softmax_tail_sum, then the weights term / sum (stored back into a). */
static inline void nib_softmax_finish(float *a, size_t t, size_t n, float max, float lanes[8])
{
    const float sum = nib_softmax_tail_sum(a, t, n, max, lanes);
    for (t = 0; t < n; t++)
        a[t] = a[t] / sum;
}

/* Attention output dims [i, head_dim) one at a time: o[i] = sum over
 * positions t in order of fma(w[t], v[t][i], .). */
static inline void nib_att_out_dims(const float *w, const float *vc, size_t row_stride, float *o,
                                    size_t i, size_t head_dim, size_t n)
{
    for (; i < head_dim; i++) {
        float acc = 0.0f;
        for (size_t t = 0; t < n; t++)
            acc = __builtin_fmaf(w[t], vc[t * row_stride + i], acc);
        o[i] = acc;
    }
}

/* silu(a) * b, one element. */
static inline float nib_silu_mul1(float a, float b)
{
    return a / (1.0f + nib_expf(-a)) * b;
}

/* RoPE of the pair (v[0], v[1]) by (c, s). */
static inline void nib_rope_pair(float *v, float c, float s)
{
    float a = v[0], b = v[1];
    v[0] = a * c - b * s;
    v[1] = a * s + b * c;
}

/* The pairs of a run one at a time, from row r (dim i of its head) to
 * end; returns the row after the last pair (end: runs are even). */
static inline size_t nib_rope_pairs(float *v, size_t r, size_t end, size_t i, const float *cs)
{
    for (; r + 1 < end; r += 2, i += 2)
        nib_rope_pair(v + r, cs[i], cs[i + 1]);
    return r;
}

#endif
