/* The arithmetic every attention variant shares, written once in scalar C
 * (the scalar reference uses it throughout; the SIMD variants use it for
 * the tails of their loops), so that every variant gives the same bits.
 *
 * A variant must perform, per score, per softmax term and per output
 * element, exactly these IEEE operations in exactly this order:
 *   score  = tree8(lanes) * scale, lane j = fma(q[i], k[i], lane j) over
 *            i = j, j + 8, ... (inputs past head_dim count as +0);
 *   term   = nib_att_exp(score - max);
 *   sum    = tree8(lanes), lane j = lane j + term over t = j, j + 8, ...;
 *   out[i] = fma(term / sum, v[t][i], out[i]) over t = 0..pos in order.
 * tree8 adds lanes as ((0+4) + (2+6)) + ((1+5) + (3+7)): the order an
 * AVX2 (256 -> 128 -> 64 -> 32 bits) or NEON (2 x 128 bits) reduction
 * takes. Include only from kernels/attention/. */
#ifndef NIB_ATTENTION_COMMON_H
#define NIB_ATTENTION_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float nib_att_tree8(const float l[8])
{
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* exp(x) for the softmax, x <= 0 in practice: 2^n * p(r) with
 * n = round(x / ln 2), r = x - n ln 2 (in two parts) and p the degree-7
 * Taylor polynomial (|r| <= ln2 / 2, truncation < 6e-9 relative). Below
 * NIB_ATT_EXP_MIN, and for NaN, the result is 0. Rounding to an integer
 * uses the 1.5 * 2^23 trick: plain float adds, the same on every ISA. */
#define NIB_ATT_EXP_MIN (-87.0f)
#define NIB_ATT_ROUND 12582912.0f      /* 1.5 * 2^23 */
#define NIB_ATT_LOG2E 1.44269502162933349609375f
#define NIB_ATT_LN2_HI 0.693145751953125f
#define NIB_ATT_LN2_LO 1.428606765330187045e-06f

static const float nib_att_exp_c[8] = {
    1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f,
};

static inline float nib_att_exp(float x)
{
    /* The selects are written as x86's maxps/minps define them (NaN and
     * equal inputs give the second operand); NEON spells them out. */
    float xc = x > NIB_ATT_EXP_MIN ? x : NIB_ATT_EXP_MIN;
    xc = xc < 0.0f ? xc : 0.0f;
    float n = (xc * NIB_ATT_LOG2E + NIB_ATT_ROUND) - NIB_ATT_ROUND;
    float r = fmaf(n, -NIB_ATT_LN2_HI, xc);
    r = fmaf(n, -NIB_ATT_LN2_LO, r);
    float p = nib_att_exp_c[0];
    for (int i = 1; i < 8; i++)
        p = fmaf(p, r, nib_att_exp_c[i]);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    float y = p * scale;
    return x >= NIB_ATT_EXP_MIN ? y : 0.0f;
}

/* Lane-wise dot product of n floats (see above), before the tree. */
static inline void nib_att_dot_lanes(const float *a, const float *b, size_t n, float l[8])
{
    for (int j = 0; j < 8; j++)
        l[j] = 0.0f;
    for (size_t i = 0; i < n; i += 8)
        for (size_t j = 0; j < 8; j++) {
            float x = i + j < n ? a[i + j] : 0.0f, y = i + j < n ? b[i + j] : 0.0f;
            l[j] = fmaf(x, y, l[j]);
        }
}

#endif
