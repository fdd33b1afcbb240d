/* NEON (armv8.2-a dotprod) GEMM for q4 / q4a. The layout is the AVX2 one:
 * a 32-byte chunk is two 16-byte halves (rows 0-3, rows 4-7), each 32-bit
 * lane one row. Nibbles 0..15 are valid signed bytes, so sdot by lane
 * multiplies them straight against 4 activations and accumulates in int32
 * (no int16 stage, nothing to saturate). */
#include "kernels/qkernels.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#include "kernels/qgemm/qgemm-neon.h"

static inline __attribute__((always_inline)) void
q4g_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a, uint32_t t0,
          const int M, const uint32_t G, const int ASYM, float32x4_t (*out)[2])
{
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    float32x4_t accf[4][2];
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        accf[t][0] = accf[t][1] = vdupq_n_f32(0.0f);
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        const uint8_t *p = blk + (size_t)j * l->sgroup_bytes;
        int32x4_t acc[4][2];
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++)
            acc[t][0] = acc[t][1] = vdupq_n_s32(0);
        #pragma GCC unroll 2
        for (uint32_t c = 0; c < G / 8; c += 2)
            nib_q4_two_chunks(p + c * 32, aq + (size_t)j * G + c * 8, kp, M, acc);
        const uint8_t *sp = p + l->code_bytes;
        float32x4_t ws0 = nib_ld_f16x4(sp), ws1 = nib_ld_f16x4(sp + 8);
        int32x4_t zp0 = vdupq_n_s32(8), zp1 = zp0;
        if (ASYM) {
            uint16x8_t z = vmovl_u8(vld1_u8(sp + 16));
            zp0 = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(z)));
            zp1 = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(z)));
        }
        #pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            int32_t s = as[t * nbk + j];
            float sat = sa[t * nbk + j];
            float32x4_t f0 = vcvtq_f32_s32(vsubq_s32(acc[t][0], vmulq_n_s32(zp0, s)));
            float32x4_t f1 = vcvtq_f32_s32(vsubq_s32(acc[t][1], vmulq_n_s32(zp1, s)));
            accf[t][0] = vfmaq_f32(accf[t][0], f0, vmulq_n_f32(ws0, sat));
            accf[t][1] = vfmaq_f32(accf[t][1], f1, vmulq_n_f32(ws1, sat));
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        out[t][0] = accf[t][0];
        out[t][1] = accf[t][1];
    }
}

#define Q4G_CASES(G, ASYM)                                                                         \
    switch (M) {                                                                                   \
    case 1: q4g_block(blk, l, a, t0, 1, G, ASYM, out); break;                                      \
    case 2: q4g_block(blk, l, a, t0, 2, G, ASYM, out); break;                                      \
    case 3: q4g_block(blk, l, a, t0, 3, G, ASYM, out); break;                                      \
    default: q4g_block(blk, l, a, t0, 4, G, ASYM, out); break;                                     \
    }

static void q4g(const struct nib_qlayout *l, const uint8_t *w, const struct nib_qact *a, uint32_t m,
                float *y, size_t y_stride, const float *add, size_t add_stride, uint32_t n_begin,
                uint32_t n_end, int asym)
{
    for (uint32_t nb = n_begin / NIB_Q_TILE_N; nb * NIB_Q_TILE_N < n_end; nb++) {
        const uint8_t *blk = w + (size_t)nb * l->nblock_bytes;
        for (uint32_t t0 = 0; t0 < m; t0 += 4) {
            int M = m - t0 < 4 ? (int)(m - t0) : 4;
            float32x4_t out[4][2];
            if (!asym) {
                switch (l->gsize) {
                case 32: Q4G_CASES(32, 0) break;
                case 64: Q4G_CASES(64, 0) break;
                default: Q4G_CASES(128, 0) break;
                }
            } else {
                switch (l->gsize) {
                case 32: Q4G_CASES(32, 1) break;
                case 64: Q4G_CASES(64, 1) break;
                default: Q4G_CASES(128, 1) break;
                }
            }
            for (int t = 0; t < M; t++)
                nib_neon_store_acc_add(out[t], y + (t0 + t) * y_stride,
                                       add ? add + (t0 + t) * add_stride : NULL, nb * NIB_Q_TILE_N,
                                       n_begin, n_end);
        }
    }
}

NIB_QGEMM_DECL(nib_gemm_q4s8_n8_neon)
{
    q4g(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 0);
}

NIB_QGEMM_DECL(nib_gemm_q4as8_n8_neon)
{
    q4g(l, w, a, m, y, y_stride, add, add_stride, n_begin, n_end, 1);
}
#else
typedef int nib_gemm_q4s8_neon_unused;
#endif
