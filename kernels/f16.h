/* IEEE binary16 <-> binary32 in plain C (no F16C needed), the one
 * definition used by the kernels, the quantizers, the GGUF reader and
 * nib synth. */
#ifndef NIB_F16_H
#define NIB_F16_H

#include <stdint.h>
#include <string.h>

/* Exact: every half is a float. */
static inline float nib_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, NaN (payload kept) */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal half: normalise */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Round to nearest even; overflow gives inf; NaN stays a quiet NaN with
 * its payload's top bits (as F16C's vcvtps2ph). */
static inline uint16_t nib_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;

    if (ax >= 0x7f800000u) /* inf stays inf; NaN stays a quiet NaN */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) /* >= 65520: the halfway point to inf rounds up */
        return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) {
        /* Below 2^-14: a half subnormal, in units of 2^-24. */
        if (ax <= 0x33000000u) /* <= 2^-25 rounds to zero (the tie goes to even 0) */
            return sign;
        uint32_t m = (ax & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(ax >> 23); /* 14..24 */
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        q += (rem + half - 1 + (q & 1)) >> shift; /* +1 above half, or at half if odd */
        return (uint16_t)(sign | q); /* q == 0x400 is the smallest normal: still right */
    }
    /* Normal: rebias the exponent (127 -> 15) and round off 13 mantissa bits;
     * a carry out of the mantissa correctly bumps the exponent. The rounding
     * is arithmetic, not a branch: random weights would mispredict it. */
    uint32_t h = (ax >> 13) - (112u << 10), rem = ax & 0x1fffu;
    h += (rem + 0x0fffu + (h & 1)) >> 13;
    return (uint16_t)(sign | h);
}

#endif
