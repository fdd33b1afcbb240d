/* Reference activation quantizer (contract in kernels/qkernels.h).
 * Rounding: fma(x, inv, 1.5*2^23) - 1.5*2^23 rounds x*inv (exact product)
 * to the nearest integer, ties to even, with one rounding; the SIMD
 * variants do the same fma, so every variant gives the same q. */
#include "kernels/common/pre.h"
#include "kernels/qkernels.h"

#define MAGIC 12582912.0f /* 1.5 * 2^23 */

static int8_t quant1(float x, float inv)
{
    float v = __builtin_fmaf(x, inv, MAGIC) - MAGIC;
    /* !(v >= -127) also catches NaN, like the SIMD clamp of INT_MIN. */
    if (!(v >= -127.0f))
        return -127;
    if (v > 127.0f)
        return 127;
    return (int8_t)(int)v;
}

NIB_QACT_DECL(nib_qact_s8_f32_scalar)
{
    nib_pre_qact(a, row, x);
    int8_t *q = a->q + (size_t)row * a->k_pad;
    float *scale = a->scale + (size_t)row * a->n_blocks;
    int32_t *sum = a->sum + (size_t)row * a->n_blocks;
    for (uint32_t b = 0; b < a->n_blocks; b++) {
        uint32_t k0 = b * a->block, k1 = k0 + a->block;
        uint32_t kr = k1 < a->k ? k1 : a->k; /* real inputs end here */
        float amax = 0.0f;
        for (uint32_t i = k0; i < kr; i++) {
            float ax = __builtin_fabsf(x[i]);
            amax = ax > amax ? ax : amax; /* a NaN never wins */
        }
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        int32_t s = 0;
        for (uint32_t i = k0; i < kr; i++) {
            q[i] = quant1(x[i], inv);
            s += q[i];
        }
        for (uint32_t i = kr > k0 ? kr : k0; i < k1; i++)
            q[i] = 0;
        scale[b] = amax / 127.0f;
        sum[b] = s;
    }
}
