/* NEON activation quantizer: the same operations as the scalar reference,
 * 16 inputs at a time. */
#include "kernels/common/isa.h"
#include "kernels/common/pre.h"
#include "kernels/qkernels.h"

#if NIB_HAVE_NEON
#include "kernels/common/f32-neon.h"

static int32x4_t quant4(float32x4_t x, float32x4_t inv)
{
    const float32x4_t magic = vdupq_n_f32(12582912.0f);
    float32x4_t v = vsubq_f32(vfmaq_f32(magic, x, inv), magic);
    /* NaN -> -127 as in the scalar code: v >= -127 is false for NaN. */
    v = vbslq_f32(vcgeq_f32(v, vdupq_n_f32(-127.0f)), v, vdupq_n_f32(-127.0f));
    v = vminq_f32(v, vdupq_n_f32(127.0f));
    return vcvtq_s32_f32(v); /* v is integral: exact */
}

NIB_QACT_DECL(nib_qact_s8_f32_neon)
{
    nib_pre_qact(a, row, x);
    int8_t *q = a->q + (size_t)row * a->k_pad;
    float *scale = a->scale + (size_t)row * a->n_blocks;
    int32_t *sum = a->sum + (size_t)row * a->n_blocks;
    float tmp[16];
    for (uint32_t b = 0; b < a->n_blocks; b++) {
        uint32_t k0 = b * a->block, k1 = k0 + a->block;
        uint32_t kr = k1 < a->k ? k1 : a->k;
        float32x4_t m = vdupq_n_f32(0.0f);
        for (uint32_t i = k0; i < kr; i += 16) {
            const float *c = nib_f32_padded(x + i, kr - i, 16, tmp);
            for (int j = 0; j < 4; j++) {
                float32x4_t ax = vabsq_f32(vld1q_f32(c + 4 * j));
                m = vbslq_f32(vcgtq_f32(ax, m), ax, m); /* a NaN never wins */
            }
        }
        float amax = vmaxvq_f32(m);
        float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        float32x4_t vinv = vdupq_n_f32(inv);
        int32x4_t s = vdupq_n_s32(0);
        uint32_t i = k0;
        for (; i < kr; i += 16) {
            const float *c = nib_f32_padded(x + i, kr - i, 16, tmp);
            int32x4_t q0 = quant4(vld1q_f32(c), vinv), q1 = quant4(vld1q_f32(c + 4), vinv);
            int32x4_t q2 = quant4(vld1q_f32(c + 8), vinv), q3 = quant4(vld1q_f32(c + 12), vinv);
            s = vaddq_s32(s, vaddq_s32(vaddq_s32(q0, q1), vaddq_s32(q2, q3)));
            int16x8_t h0 = vcombine_s16(vmovn_s32(q0), vmovn_s32(q1));
            int16x8_t h1 = vcombine_s16(vmovn_s32(q2), vmovn_s32(q3));
            vst1q_s8(q + i, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
        }
        for (; i < k1; i += 16)
            vst1q_s8(q + i, vdupq_n_s8(0));
        scale[b] = amax / 127.0f;
        sum[b] = vaddvq_s32(s);
    }
}
#else
typedef int nib_qact_s8_f32_neon_unused;
#endif
