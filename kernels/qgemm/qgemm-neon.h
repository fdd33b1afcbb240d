/* Helpers shared by the NEON GEMM kernels (include only from them). An
 * 8-row N-block is two int32x4/float32x4 halves: rows 0-3 and rows 4-7. */
#ifndef NIB_QGEMM_NEON_H
#define NIB_QGEMM_NEON_H

#include <arm_neon.h>

/* Pin v in a register here (no instruction): keeps the compiler from
 * hoisting every load of an unrolled loop ahead of the dot products,
 * which needs more than 32 registers and spills. */
#define NIB_KEEP(v) __asm__("" : "+w"(v))

/* 4 f16 scales at p as floats (exact). */
static inline float32x4_t nib_ld_f16x4(const uint8_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

/* Rows r0..r0+7 of y from v[0..1] (+ add: per-group epilogue y = acc + add),
 * only rows in [n_begin, n_end). */
static inline void nib_neon_store_acc_add(const float32x4_t *v, float *y, const float *add,
                                          uint32_t r0, uint32_t n_begin, uint32_t n_end)
{
    if (r0 >= n_begin && r0 + 8 <= n_end) {
        float32x4_t v0 = v[0], v1 = v[1];
        if (add) {
            v0 = vaddq_f32(v0, vld1q_f32(add + r0));
            v1 = vaddq_f32(v1, vld1q_f32(add + r0 + 4));
        }
        vst1q_f32(y + r0, v0);
        vst1q_f32(y + r0 + 4, v1);
        return;
    }
    float tmp[8];
    vst1q_f32(tmp, v[0]);
    vst1q_f32(tmp + 4, v[1]);
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t r = r0 + i;
        if (r >= n_begin && r < n_end)
            y[r] = add ? tmp[i] + add[r] : tmp[i];
    }
}

/* Rows r0..r0+7 of add as two halves (0 when absent or outside the range). */
static inline void nib_neon_load_add(float32x4_t *b, const float *add, uint32_t r0, uint32_t n_begin,
                                     uint32_t n_end)
{
    float tmp[8];
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t r = r0 + i;
        tmp[i] = add && r >= n_begin && r < n_end ? add[r] : 0.0f;
    }
    b[0] = vld1q_f32(tmp);
    b[1] = vld1q_f32(tmp + 4);
}

static inline void nib_neon_store_rows(const float32x4_t *v, float *y, uint32_t r0, uint32_t n_begin,
                                       uint32_t n_end)
{
    float tmp[8];
    vst1q_f32(tmp, v[0]);
    vst1q_f32(tmp + 4, v[1]);
    for (uint32_t i = 0; i < 8; i++) {
        uint32_t r = r0 + i;
        if (r >= n_begin && r < n_end)
            y[r] = tmp[i];
    }
}

/* Two 4-bit chunks (16 inputs x 8 rows) at p against the 16 activations
 * at ak (+ t * kp for token t): acc[t][half] += per-row sums. */
#define NIB_DOT(acc, w, av, lane) acc = vdotq_laneq_s32(acc, vreinterpretq_s8_u8(w), av, lane)

static inline __attribute__((always_inline)) void
nib_q4_two_chunks(const uint8_t *p, const int8_t *ak, size_t kp, const int M, int32x4_t (*acc)[2])
{
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    uint8x16_t w0 = vld1q_u8(p), w1 = vld1q_u8(p + 16), w2 = vld1q_u8(p + 32), w3 = vld1q_u8(p + 48);
    uint8x16_t l0 = vandq_u8(w0, m4), h0 = vshrq_n_u8(w0, 4), l1 = vandq_u8(w1, m4), h1 = vshrq_n_u8(w1, 4);
    uint8x16_t l2 = vandq_u8(w2, m4), h2 = vshrq_n_u8(w2, 4), l3 = vandq_u8(w3, m4), h3 = vshrq_n_u8(w3, 4);
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

#endif
