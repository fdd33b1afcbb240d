/* Helpers shared by the NEON GEMM kernels (include only from them). An
 * 8-row N-block is two int32x4/float32x4 halves: rows 0-3 and rows 4-7
 * (nib_f32x8 = float32x4x2_t, .val[0] and .val[1]). */
#ifndef NIB_QGEMM_NEON_H
#define NIB_QGEMM_NEON_H

#include "kernels/common/isa.h"
#include "kernels/qkernels.h"

#if NIB_HAVE_NEON
#include <arm_neon.h>

typedef float32x4x2_t nib_f32x8; /* rows r0..r0+3, r0+4..r0+7 */
static inline nib_f32x8 nib_f32x8_load(const float *p)
{
    nib_f32x8 v = {{vld1q_f32(p), vld1q_f32(p + 4)}};
    return v;
}
static inline void nib_f32x8_store(float *p, nib_f32x8 v)
{
    vst1q_f32(p, v.val[0]);
    vst1q_f32(p + 4, v.val[1]);
}
static inline nib_f32x8 nib_f32x8_add(nib_f32x8 a, nib_f32x8 b)
{
    nib_f32x8 v = {{vaddq_f32(a.val[0], b.val[0]), vaddq_f32(a.val[1], b.val[1])}};
    return v;
}

#include "kernels/gemm/qgemm-driver.h"

/* Pin v in a register here (no instruction): keeps the compiler from
 * hoisting every load of an unrolled loop ahead of the dot products,
 * which needs more than 32 registers and spills. */
#define NIB_KEEP(v) __asm__("" : "+w"(v))

/* 4 f16 scales at p as floats (exact). */
static inline float32x4_t nib_ld_f16x4(const uint8_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

/* Two 4-bit chunks (16 inputs x 8 rows) at p and p + cs against the 16
 * activations at ak (+ t * kp for token t): acc[t][half] += per-row sums. */
#define NIB_DOT(acc, w, av, lane) acc = vdotq_laneq_s32(acc, vreinterpretq_s8_u8(w), av, lane)

static inline __attribute__((always_inline)) void nib_q4_two_chunks(const uint8_t *p, size_t cs,
                                                                    const int8_t *ak, size_t kp,
                                                                    const int M,
                                                                    int32x4_t (*acc)[2])
{
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    uint8x16_t w0 = vld1q_u8(p), w1 = vld1q_u8(p + 16), w2 = vld1q_u8(p + cs),
               w3 = vld1q_u8(p + cs + 16);
    uint8x16_t l0 = vandq_u8(w0, m4), h0 = vshrq_n_u8(w0, 4), l1 = vandq_u8(w1, m4),
               h1 = vshrq_n_u8(w1, 4);
    uint8x16_t l2 = vandq_u8(w2, m4), h2 = vshrq_n_u8(w2, 4), l3 = vandq_u8(w3, m4),
               h3 = vshrq_n_u8(w3, 4);
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        int8x16_t av = vld1q_s8(ak + t * kp);
        NIB_DOT(acc[t][0], l0, av, 0);
        NIB_DOT(acc[t][0], h0, av, 1);
        NIB_DOT(acc[t][1], l1, av, 0);
        NIB_DOT(acc[t][1], h1, av, 1);
        NIB_DOT(acc[t][0], l2, av, 2);
        NIB_DOT(acc[t][0], h2, av, 3);
        NIB_DOT(acc[t][1], l3, av, 2);
        NIB_DOT(acc[t][1], h3, av, 3);
        NIB_KEEP(acc[t][0]);
        NIB_KEEP(acc[t][1]);
    }
}

/* q8: acc[t][half] = integer sums over n_chunks (a multiple of 4) of
 * 8-bit chunks at p; 4 chunks use the 4 lanes of one activation load. */
static inline __attribute__((always_inline)) void nib_q8_dot(const uint8_t *p, const int8_t *ak,
                                                             size_t kp, uint32_t n_chunks,
                                                             const int M, int32x4_t (*acc)[2])
{
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc[t][0] = acc[t][1] = vdupq_n_s32(0);
    for (uint32_t c = 0; c < n_chunks; c += 4, p += 128) {
        int8x16_t w[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            w[i] = vld1q_s8((const int8_t *)(const void *)(p + 16 * i));
#pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            int8x16_t av = vld1q_s8(ak + t * kp + 4 * c);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[0], av, 0);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[1], av, 0);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[2], av, 1);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[3], av, 1);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[4], av, 2);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[5], av, 2);
            acc[t][0] = vdotq_laneq_s32(acc[t][0], w[6], av, 3);
            acc[t][1] = vdotq_laneq_s32(acc[t][1], w[7], av, 3);
        }
    }
}

/* acc[t][half] = integer sums of scale group j (G inputs, codes at p: BITS
 * 4, raw codes 0..15, a two-chunk step at a time; 8, int8) against the
 * activations of group j of aq, for M tokens. */
static inline __attribute__((always_inline)) void nib_group_dot(const uint8_t *p, const int8_t *aq,
                                                                uint32_t j, size_t kp, const int M,
                                                                const uint32_t G, const int BITS,
                                                                int32x4_t (*acc)[2])
{
    if (BITS == 8) {
        nib_q8_dot(p, aq + (size_t)j * G, kp, G / 4, M, acc);
    } else {
#pragma GCC unroll 8
        for (int t = 0; t < M; t++)
            acc[t][0] = acc[t][1] = vdupq_n_s32(0);
#pragma GCC unroll 2
        for (uint32_t c = 0; c < G / 8; c += 2)
            nib_q4_two_chunks(p + c * 32, NIB_Q_CHUNK, aq + (size_t)j * G + c * 8, kp, M, acc);
    }
}

/* Both kinds of per-group rows, see qgemm-driver.h; one walk over the
 * groups of NB blocks, the kind a constant. MIN 0, the per-group formats
 * (q4, q4a, q8c/g): per group the integer sums, minus zero point x
 * activation sum, converted, times ws * sa, one fma into the row's
 * accumulator. MIN 1, the formats with a minimum (q4f, q8f): the integer
 * sums of the raw codes, converted, one fma with ws * sa, then the
 * activation block sum, converted, one fma with wm * sa (a group of 16
 * 4-bit codes is one two-chunk step, of 8-bit codes one 4-chunk one). */
static inline __attribute__((always_inline)) void
nib_group_walk(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l,
               const struct nib_qact *a, uint32_t t0, const int M, const int NB, const uint32_t G,
               const int BITS, const int ZP, const int MIN, nib_f32x8 *out)
{
    const int ASYM = ZP == NIB_ZP_STORED;
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        out[i].val[0] = out[i].val[1] = vdupq_n_f32(0.0f);
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
#pragma GCC unroll 2
        for (int b = 0; b < NB; b++) {
            const uint8_t *p = blk + (size_t)j * gs + (size_t)b * l->sgroup_bytes;
            nib_f32x8 *o = out + b * M;
            int32x4_t acc[4][2];
            nib_group_dot(p, aq, j, kp, M, G, BITS, acc);
            if (MIN) {
                const float *sp = (const float *)(const void *)(p + l->code_bytes);
                float32x4_t ws0 = vld1q_f32(sp), ws1 = vld1q_f32(sp + 4);
                float32x4_t wm0 = vld1q_f32(sp + 8), wm1 = vld1q_f32(sp + 12);
#pragma GCC unroll 8
                for (int t = 0; t < M; t++) {
                    float sat = sa[t * nbk + j];
                    float32x4_t fs = vdupq_n_f32((float)as[t * nbk + j]);
                    o[t].val[0] =
                        vfmaq_f32(o[t].val[0], vcvtq_f32_s32(acc[t][0]), vmulq_n_f32(ws0, sat));
                    o[t].val[1] =
                        vfmaq_f32(o[t].val[1], vcvtq_f32_s32(acc[t][1]), vmulq_n_f32(ws1, sat));
                    o[t].val[0] = vfmaq_f32(o[t].val[0], fs, vmulq_n_f32(wm0, sat));
                    o[t].val[1] = vfmaq_f32(o[t].val[1], fs, vmulq_n_f32(wm1, sat));
                }
                continue;
            }
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
                if (ZP != NIB_ZP_NONE) {
                    acc[t][0] = vsubq_s32(acc[t][0], vmulq_n_s32(zp0, s));
                    acc[t][1] = vsubq_s32(acc[t][1], vmulq_n_s32(zp1, s));
                }
                float32x4_t f0 = vcvtq_f32_s32(acc[t][0]), f1 = vcvtq_f32_s32(acc[t][1]);
                o[t].val[0] = vfmaq_f32(o[t].val[0], f0, vmulq_n_f32(ws0, sat));
                o[t].val[1] = vfmaq_f32(o[t].val[1], f1, vmulq_n_f32(ws1, sat));
            }
        }
    }
}

static inline __attribute__((always_inline)) void
nib_qg_group(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const uint32_t G, const int BITS, const int ZP,
             nib_f32x8 *out)
{
    nib_group_walk(blk, gs, l, a, t0, M, NB, G, BITS, ZP, 0, out);
}

static inline __attribute__((always_inline)) void
nib_qf_group(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const uint32_t G, const int BITS,
             nib_f32x8 *out)
{
    nib_group_walk(blk, gs, l, a, t0, M, NB, G, BITS, NIB_ZP_NONE, 1, out);
}

/* q4h: M tokens of NB blocks, super-blocks of G (32, 64, 128) inputs,
 * all constant. Per sub-block of 16 (one two-chunk step): the integer
 * sums minus 8 x the activation block sum, converted, times ws * sa with
 * ws = (float)s x D, one fma (nib_q4h_row). */
static inline __attribute__((always_inline)) void
nib_qh_group(const uint8_t *blk, uint32_t gs, uint32_t bf, const struct nib_qlayout *l,
             const struct nib_qact *a, uint32_t t0, const int M, const int NB, const uint32_t G,
             nib_f32x8 *out)
{
    const uint32_t ns = G / 16, cs = nib_q4h_chunk_stride(l, gs);
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        out[i].val[0] = out[i].val[1] = vdupq_n_f32(0.0f);
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
#pragma GCC unroll 2
        for (int b = 0; b < NB; b++) {
            const uint8_t *bb = blk + (size_t)b * l->sgroup_bytes;
            const uint8_t *p = bb + nib_q4h_codes_rel(l, gs, bf + b, j);
            const uint8_t *fl = bb + nib_q4h_fields_rel(l, gs, bf + b, j);
            nib_f32x8 *o = out + b * M;
            const float32x4_t D0 = nib_ld_f16x4(fl), D1 = nib_ld_f16x4(fl + 8);
            for (uint32_t i = 0; i < ns; i++) {
                const uint32_t bi = j * ns + i;
                if (bi >= nbk) /* the rest of the super-block: padding */
                    break;
                int32_t s[8];
                for (uint32_t r = 0; r < 8; r++)
                    s[r] = nib_q4h_sub(fl, l, i, r);
                const float32x4_t ws0 = vmulq_f32(vcvtq_f32_s32(vld1q_s32(s)), D0),
                                  ws1 = vmulq_f32(vcvtq_f32_s32(vld1q_s32(s + 4)), D1);
                int32x4_t acc[4][2];
#pragma GCC unroll 8
                for (int t = 0; t < M; t++)
                    acc[t][0] = acc[t][1] = vdupq_n_s32(0);
                nib_q4_two_chunks(p + 2 * i * cs, cs, aq + (size_t)bi * 16, kp, M, acc);
#pragma GCC unroll 8
                for (int t = 0; t < M; t++) {
                    int32x4_t c = vdupq_n_s32(8 * as[t * nbk + bi]);
                    float sat = sa[t * nbk + bi];
                    float32x4_t f0 = vcvtq_f32_s32(vsubq_s32(acc[t][0], c)),
                                f1 = vcvtq_f32_s32(vsubq_s32(acc[t][1], c));
                    o[t].val[0] = vfmaq_f32(o[t].val[0], f0, vmulq_n_f32(ws0, sat));
                    o[t].val[1] = vfmaq_f32(o[t].val[1], f1, vmulq_n_f32(ws1, sat));
                }
            }
        }
    }
}

/* Per-channel epilogue (q4c, q8c/0): out[t] = fma(isum[t] - corr[t],
 * ws * sa, add or +0), ws the 8 f32 row scales after the codes. */
static inline __attribute__((always_inline)) void
nib_qc_finish_neon(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
                   uint32_t t0, const int M, const struct nib_qrows *e, int32x4_t (*isum)[2],
                   const int32_t *corr, nib_f32x8 *out)
{
    const float *wsp = (const float *)(const void *)(blk + l->code_bytes);
    float32x4_t ws0 = vld1q_f32(wsp), ws1 = vld1q_f32(wsp + 4);
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        int32x4_t c = vdupq_n_s32(corr[t]);
        float sat = a->scale[t0 + t];
        nib_f32x8 base = nib_qrows_add(e, t0 + t);
        out[t].val[0] =
            vfmaq_f32(base.val[0], vcvtq_f32_s32(vsubq_s32(isum[t][0], c)), vmulq_n_f32(ws0, sat));
        out[t].val[1] =
            vfmaq_f32(base.val[1], vcvtq_f32_s32(vsubq_s32(isum[t][1], c)), vmulq_n_f32(ws1, sat));
    }
}

/* Per-channel q8c: the 8-bit step over the whole row, one fma with the add. */
static inline __attribute__((always_inline)) void
nib_q8c_channel(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
                uint32_t t0, const int M, const struct nib_qrows *e, nib_f32x8 *out)
{
    static const int32_t no_corr[4] = {0};
    int32x4_t acc[4][2];
    nib_q8_dot(blk, a->q + t0 * (size_t)a->k_pad, a->k_pad, l->k_pad / 4, M, acc);
    nib_qc_finish_neon(blk, l, a, t0, M, e, acc, no_corr, out);
}

#endif
#endif
