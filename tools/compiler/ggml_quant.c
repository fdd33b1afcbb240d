/* Round-to-nearest quantizers into ggml's block layouts (ggml_quant.h).
 * Each group's scale (and minimum) comes from its range; K-quant
 * sub-block scales are quantized against the block's f16 d (and dmin);
 * codes are then rounded against the DECODED scales, so each weight is
 * the nearest the stored fields allow. The bit layouts are those
 * tools/compiler/ggml_dequant.c reads (and ggml-common.h describes). */
#include "tools/compiler/ggml_quant.h"

#include <math.h>
#include <string.h>

#include "kernels/f16.h"
#include "tools/compiler/ggml_dequant.h"

#define QK_K 256

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8);
}

/* A half that must be finite: *bad is set when it is not. */
static float half(uint8_t *p, float v, int *bad)
{
    uint16_t h = nib_f32_to_f16(v);
    float f = nib_f16_to_f32(h);
    *bad |= !isfinite(f);
    put16(p, h);
    return f;
}

static int clampi(long v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

/* Round x / s to an integer in [lo, hi] (0 when s is 0, then clamped). */
static int rq(float x, float s, int lo, int hi)
{
    return clampi(s != 0.0f ? lrintf(x / s) : 0, lo, hi);
}

/* The value of largest magnitude (its sign kept), and min and max. */
static void range(const float *x, int n, float *big, float *mn, float *mx)
{
    float b = 0.0f, lo = x[0], hi = x[0];
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > fabsf(b))
            b = x[i];
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    *big = b, *mn = lo, *mx = hi;
}

static int nearest_book(float v)
{
    int best = 0;
    for (int k = 1; k < 16; k++)
        if (fabsf((float)ggml_iq4_values[k] - v) < fabsf((float)ggml_iq4_values[best] - v))
            best = k;
    return best;
}

/* ---- 32-element blocks: codes L[32] packed as nibbles (+ a high bit) ---- */

static void put_nibbles(uint8_t *qs, const int *L)
{
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((L[j] & 15) | (L[j + 16] & 15) << 4);
}

static void put_qh(uint8_t *qh, const int *L)
{
    uint32_t h = 0;
    for (int j = 0; j < 32; j++)
        h |= (uint32_t)((L[j] >> 4) & 1) << j;
    for (int i = 0; i < 4; i++)
        qh[i] = (uint8_t)(h >> (8 * i));
}

static int block32(uint32_t type, const float *x, uint8_t *o)
{
    int L[32], bad = 0;
    float big, mn, mx;
    range(x, 32, &big, &mn, &mx);
    switch (type) {
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q5_0: {
        int h = type == GGML_TYPE_Q4_0 ? 8 : 16;
        float d = half(o, big / (float)-h, &bad);
        for (int j = 0; j < 32; j++)
            L[j] = rq(x[j], d, -h, h - 1) + h;
        if (type == GGML_TYPE_Q4_0) {
            put_nibbles(o + 2, L);
        } else {
            put_qh(o + 2, L);
            put_nibbles(o + 6, L);
        }
        break;
    }
    case GGML_TYPE_Q4_1:
    case GGML_TYPE_Q5_1: {
        int top = type == GGML_TYPE_Q4_1 ? 15 : 31;
        float d = half(o, (mx - mn) / (float)top, &bad), m = half(o + 2, mn, &bad);
        for (int j = 0; j < 32; j++)
            L[j] = rq(x[j] - m, d, 0, top);
        if (type == GGML_TYPE_Q4_1) {
            put_nibbles(o + 4, L);
        } else {
            put_qh(o + 4, L);
            put_nibbles(o + 8, L);
        }
        break;
    }
    case GGML_TYPE_Q8_0: {
        float d = half(o, fabsf(big) / 127.0f, &bad);
        for (int j = 0; j < 32; j++)
            o[2 + j] = (uint8_t)(int8_t)rq(x[j], d, -127, 127);
        break;
    }
    case GGML_TYPE_IQ4_NL: {
        float d = half(o, big / -127.0f, &bad);
        for (int j = 0; j < 32; j++)
            L[j] = d != 0.0f ? nearest_book(x[j] / d) : 8;
        put_nibbles(o + 2, L);
        break;
    }
    default: return -1;
    }
    return bad ? -1 : 0;
}

/* ---- 256-element super-blocks ---- */

/* Codes L[256] of 2 bits as four planes: byte 32h + l holds elements
 * 128h + l + 32i in bits 2i. */
static void put_2bit(uint8_t *qs, const int *L)
{
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++)
            qs[32 * h + l] =
                (uint8_t)((L[128 * h + l] & 3) | (L[128 * h + l + 32] & 3) << 2 |
                          (L[128 * h + l + 64] & 3) << 4 | (L[128 * h + l + 96] & 3) << 6);
}

/* Q4_K / Q5_K scale bytes from eight 6-bit scales and mins. */
static void put_k_scales(uint8_t *s, const int *sc, const int *mn)
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] |= (uint8_t)sc[j];
            s[j + 4] |= (uint8_t)mn[j];
        } else {
            s[j + 4] = (uint8_t)((sc[j] & 15) | (mn[j] & 15) << 4);
            s[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            s[j] |= (uint8_t)((mn[j] >> 4) << 6);
        }
    }
}

/* Asymmetric K-quants (Q2_K: 16 groups of 16, codes 0..3, 4-bit scales;
 * Q4_K/Q5_K: 8 groups of 32, codes 0..15/0..31, 6-bit scales): weight =
 * (d*sc) * q - dmin*m with each group's minimum clipped to <= 0. */
static int kquant_asym(uint32_t type, const float *x, uint8_t *o)
{
    const int g = type == GGML_TYPE_Q2_K ? 16 : 32, ng = QK_K / g;
    const int top = type == GGML_TYPE_Q2_K ? 3 : type == GGML_TYPE_Q4_K ? 15 : 31;
    const int smax = type == GGML_TYPE_Q2_K ? 15 : 63;
    float scale[16], mval[16], ms = 0.0f, mm = 0.0f;
    for (int j = 0; j < ng; j++) {
        float big, mn, mx;
        range(x + g * j, g, &big, &mn, &mx);
        mn = mn < 0.0f ? mn : 0.0f;
        scale[j] = (mx - mn) / (float)top;
        mval[j] = -mn;
        ms = scale[j] > ms ? scale[j] : ms;
        mm = mval[j] > mm ? mval[j] : mm;
    }
    int bad = 0, sc[16], mn[16], L[QK_K];
    uint8_t *dp = type == GGML_TYPE_Q2_K ? o + 80 : o;
    float d = half(dp, ms / (float)smax, &bad), dmin = half(dp + 2, mm / (float)smax, &bad);
    for (int j = 0; j < ng; j++) {
        sc[j] = rq(scale[j], d, 0, smax);
        mn[j] = rq(mval[j], dmin, 0, smax);
        float S = d * (float)sc[j], M = dmin * (float)mn[j];
        for (int l = 0; l < g; l++)
            L[g * j + l] = rq(x[g * j + l] + M, S, 0, top);
    }
    if (type == GGML_TYPE_Q2_K) {
        for (int j = 0; j < 16; j++)
            o[j] = (uint8_t)(sc[j] | mn[j] << 4);
        put_2bit(o + 16, L);
    } else if (type == GGML_TYPE_Q4_K) {
        put_k_scales(o + 4, sc, mn);
        for (int j = 0; j < QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                o[16 + j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    } else {
        uint8_t *qh = o + 16, *ql = o + 48;
        put_k_scales(o + 4, sc, mn);
        memset(qh, 0, 32);
        for (int n = 0; n < QK_K; n += 64, ql += 32)
            for (int l = 0; l < 32; l++) {
                int l1 = L[n + l], l2 = L[n + l + 32];
                qh[l] |= (uint8_t)((l1 >> 4) << (n / 32) | (l2 >> 4) << (n / 32 + 1));
                ql[l] = (uint8_t)((l1 & 15) | (l2 & 15) << 4);
            }
    }
    return bad ? -1 : 0;
}

/* Symmetric K-quants: Q3_K (16 groups of 16, codes -4..3, 6-bit signed
 * scales sc - 32), Q6_K (16 of 16, codes -32..31, int8 scales), IQ4_XS
 * (8 of 32, codebook values, 6-bit signed scales ls - 32). */
static int kquant_sym(uint32_t type, const float *x, uint8_t *o)
{
    const int g = type == GGML_TYPE_IQ4_XS ? 32 : 16, ng = QK_K / g;
    const float toward = type == GGML_TYPE_Q3_K ? -4.0f : type == GGML_TYPE_Q6_K ? -32.0f : -127.0f;
    const int slo = type == GGML_TYPE_Q6_K ? -128 : -32, shi = type == GGML_TYPE_Q6_K ? 127 : 31;
    float s[16], sa = 0.0f;
    for (int j = 0; j < ng; j++) {
        float big, mn, mx;
        range(x + g * j, g, &big, &mn, &mx);
        s[j] = big / toward; /* the largest magnitude maps to the most negative code */
        sa = fabsf(s[j]) > sa ? fabsf(s[j]) : sa;
    }
    int bad = 0, sc[16], L[QK_K];
    uint8_t *dp = type == GGML_TYPE_Q3_K ? o + 108 : type == GGML_TYPE_Q6_K ? o + 208 : o;
    float d = half(dp, sa / (float)shi, &bad);
    for (int j = 0; j < ng; j++) {
        sc[j] = rq(s[j], d, slo, shi);
        float S = d * (float)sc[j];
        for (int l = 0; l < g; l++) {
            float v = x[g * j + l];
            if (type == GGML_TYPE_Q3_K)
                L[g * j + l] = rq(v, S, -4, 3) + 4;
            else if (type == GGML_TYPE_Q6_K)
                L[g * j + l] = rq(v, S, -32, 31) + 32;
            else
                L[g * j + l] = S != 0.0f ? nearest_book(v / S) : 8;
        }
    }
    if (type == GGML_TYPE_Q3_K) {
        uint8_t *hm = o, *sb = o + 96;
        memset(hm, 0, 32);
        memset(sb, 0, 12);
        for (int j = 0; j < 16; j++) {
            int u = sc[j] + 32;
            if (j < 8)
                sb[j] |= (uint8_t)(u & 15);
            else
                sb[j - 8] |= (uint8_t)((u & 15) << 4);
            sb[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
        }
        for (int e = 0; e < QK_K; e++)
            if (L[e] > 3) {
                hm[e % 32] |= (uint8_t)(1 << (e / 32));
                L[e] -= 4;
            }
        put_2bit(o + 32, L);
    } else if (type == GGML_TYPE_Q6_K) {
        uint8_t *ql = o, *qh = o + 128;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((L[j + l] & 15) | (L[j + l + 64] & 15) << 4);
                ql[l + 32] = (uint8_t)((L[j + l + 32] & 15) | (L[j + l + 96] & 15) << 4);
                qh[l] = (uint8_t)(L[j + l] >> 4 | (L[j + l + 32] >> 4) << 2 |
                                  (L[j + l + 64] >> 4) << 4 | (L[j + l + 96] >> 4) << 6);
            }
        for (int j = 0; j < 16; j++)
            o[192 + j] = (uint8_t)(int8_t)sc[j];
    } else {
        uint16_t sh = 0;
        memset(o + 4, 0, 4);
        for (int j = 0; j < 8; j++) {
            int u = sc[j] + 32;
            o[4 + j / 2] |= (uint8_t)((u & 15) << (4 * (j % 2)));
            sh |= (uint16_t)((u >> 4) << (2 * j));
            put_nibbles(o + 8 + 16 * j, L + 32 * j);
        }
        put16(o + 2, sh);
    }
    return bad ? -1 : 0;
}

int ggml_quantize_row(uint32_t type, const float *x, uint64_t n, uint8_t *out)
{
    const struct ggml_type_info *ti = ggml_type_info(type);
    if (!ti || n % ti->blck)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return -1;
    for (uint64_t b = 0; b < n / ti->blck; b++) {
        const float *xb = x + b * ti->blck;
        uint8_t *o = out + b * ti->bytes;
        int rc = 0;
        switch (type) {
        case GGML_TYPE_F32: memcpy(o, xb, 4); break; /* little-endian host */
        case GGML_TYPE_F16: put16(o, nib_f32_to_f16(xb[0])); break;
        case GGML_TYPE_BF16: {
            uint32_t u;
            memcpy(&u, xb, 4);
            put16(o, (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16));
            break;
        }
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K: rc = kquant_asym(type, xb, o); break;
        case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ4_XS: rc = kquant_sym(type, xb, o); break;
        default: rc = block32(type, xb, o); break;
        }
        if (rc)
            return -1;
    }
    return 0;
}
