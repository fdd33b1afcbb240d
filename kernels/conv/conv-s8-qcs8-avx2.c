/* Quantized convolution (avx2): the implicit GEMM of kernels/qconv.c over
 * the avx2 q4c / q8c matmul kernels, whose bits every ISA shares, with the
 * epilogue 8 channels at a time (16 beside the AVX-512 matmuls): each lane
 * runs nib_qconv_epi_px's operations (kernels/common/conv-epi.h) for its
 * channel (common/conv-epi-avx2.h). */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <assert.h>
#include <cpuid.h>
#include <immintrin.h>
#include <string.h>

#include "kernels/common/conv-epi-avx2.h"
#include "kernels/conv.h"

/* The epilogue's constants: through e the compiler reloaded every field
 * and tested every branch per 8 channels (the stores may alias *e), 14 %
 * of a quantized ResNet-50, so they live in locals. */
struct epi_consts {
    uint32_t act;
    float p0, p1, rs, inv;
    const int8_t *res;
    const float *res_f32;
    int8_t *y_q;
    float *y_f32;
};

static inline __attribute__((always_inline)) struct epi_consts
epi_consts(const struct nib_qconv_epi *e, const int YQ)
{
    return (struct epi_consts){
        e->act, e->p0,      e->p1,  e->res_scale, YQ ? 1.0f / e->y_scale : 0.0f,
        e->res, e->res_f32, e->y_q, e->y_f32};
}

/* Channels c..c+7 of the pixel whose sums are vt and whose outputs start
 * at base, with the residual's kind (RES: 0 none, 1 int8, 2 f32), its
 * place (FIRST: before the activation) and the outputs (YQ: int8, YF:
 * f32, or both) constant. */
static inline __attribute__((always_inline)) void epi8(const struct epi_consts *k, const float *vt,
                                                       size_t base, uint32_t c, const int RES,
                                                       const int FIRST, const int YQ, const int YF)
{
    const __m256 p0v = _mm256_set1_ps(k->p0), p1v = _mm256_set1_ps(k->p1);
    const __m256 rs = _mm256_set1_ps(k->rs), inv = _mm256_set1_ps(k->inv);
    __m256 x = _mm256_loadu_ps(vt + c), r = _mm256_setzero_ps();
    if (RES == 1)
        r = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
            _mm_loadl_epi64((const __m128i *)(const void *)(k->res + base + c))));
    if (RES == 2)
        r = _mm256_loadu_ps(k->res_f32 + base + c);
    if (RES == 1 && FIRST)
        x = _mm256_fmadd_ps(rs, r, x);
    if (RES == 2 && FIRST)
        x = _mm256_add_ps(x, r);
    x = nib_act8_avx2(x, k->act, p0v, p1v);
    if (RES == 1 && !FIRST)
        x = _mm256_fmadd_ps(rs, r, x);
    if (RES == 2 && !FIRST)
        x = _mm256_add_ps(x, r);
    if (YQ)
        nib_requant8_avx2(x, inv, k->y_q + base + c);
    if (YF)
        _mm256_storeu_ps(k->y_f32 + base + c, x);
}

/* The epilogue's pixels, 8 channels at a time, then the rest one by one. */
static inline __attribute__((always_inline)) void
qconv_epi_rows(const struct nib_qconv_epi *e, const float *v, size_t p0, uint32_t m, uint32_t c_out,
               const int RES, const int FIRST, const int YQ, const int YF)
{
    const struct epi_consts k = epi_consts(e, YQ);
    const uint32_t c8 = c_out & ~7u;
    for (uint32_t t = 0; t < m; t++) {
        const float *vt = v + (size_t)t * c_out;
        const size_t base = (p0 + t) * c_out;
        for (uint32_t c = 0; c < c8; c += 8)
            epi8(&k, vt, base, c, RES, FIRST, YQ, YF);
        if (c8 < c_out)
            nib_qconv_epi_px(e, vt + c8, p0 + t, c_out, c8, c_out - c8);
    }
}

/* Calls ROWS (the 8- or 16-channel rows) with the residual's kind and
 * place and the outputs as constants. */
#define EPI_OUT(ROWS, RES, FIRST)                                                                  \
    (!e->y_q    ? ROWS(e, v, p0, m, c_out, RES, FIRST, 0, 1)                                       \
     : e->y_f32 ? ROWS(e, v, p0, m, c_out, RES, FIRST, 1, 1)                                       \
                : ROWS(e, v, p0, m, c_out, RES, FIRST, 1, 0))
#define EPI_DISPATCH(ROWS)                                                                         \
    const int res = e->res ? 1 : e->res_f32 ? 2 : 0, first = res && e->res_first;                  \
    switch (res * 2 + first) {                                                                     \
    case 2: EPI_OUT(ROWS, 1, 0); break;                                                            \
    case 3: EPI_OUT(ROWS, 1, 1); break;                                                            \
    case 4: EPI_OUT(ROWS, 2, 0); break;                                                            \
    case 5: EPI_OUT(ROWS, 2, 1); break;                                                            \
    default: EPI_OUT(ROWS, 0, 0); break;                                                           \
    }

static NIB_QCONV_EPI_DECL(qconv_epi_avx2)
{
    EPI_DISPATCH(qconv_epi_rows)
}

/* ---- the same epilogue 16 channels at a time (AVX-512 F and BW) ----
 *
 * Each lane runs the operations of the 8-lane code above for its channel:
 * maxps/minps, fma, the 1.5 * 2^23 rounding and the NaN zeroing are the
 * same instructions at twice the width; the int8 packing saturates
 * values already clamped to [-127, 127], so it changes none. Used with the
 * AVX-512 matmuls, where the CPU has them. */
#define AVX512 __attribute__((target("avx512f,avx512bw")))

static inline __attribute__((always_inline)) AVX512 __m512 act16(__m512 v, uint32_t act, __m512 p0,
                                                                 __m512 p1)
{
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    __m512 t;
    switch (act) {
    case NIB_ACT_RELU: return _mm512_max_ps(v, zero);
    case NIB_ACT_CLIP: return _mm512_min_ps(p1, _mm512_max_ps(p0, v));
    case NIB_ACT_HSIGMOID:
    case NIB_ACT_HSWISH:
        t = _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(p0, v, p1), zero), one);
        return act == NIB_ACT_HSWISH ? _mm512_mul_ps(v, t) : t;
    default: return v;
    }
}

static inline __attribute__((always_inline)) AVX512 void requant16(__m512 v, __m512 inv, int8_t *y)
{
    const __m512 round = _mm512_set1_ps(12582912.0f);
    __m512 r = _mm512_sub_ps(_mm512_fmadd_ps(v, inv, round), round);
    r = _mm512_min_ps(_mm512_set1_ps(127.0f), _mm512_max_ps(_mm512_set1_ps(-127.0f), r));
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r); /* NaN: 0 */
    _mm_storeu_si128((__m128i *)(void *)y, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(r)));
}

static inline __attribute__((always_inline)) AVX512 void
epi16(const struct epi_consts *k, const float *vt, size_t base, uint32_t c, const int RES,
      const int FIRST, const int YQ, const int YF)
{
    const __m512 p0v = _mm512_set1_ps(k->p0), p1v = _mm512_set1_ps(k->p1);
    const __m512 rs = _mm512_set1_ps(k->rs), inv = _mm512_set1_ps(k->inv);
    __m512 x = _mm512_loadu_ps(vt + c), r = _mm512_setzero_ps();
    if (RES == 1)
        r = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_loadu_si128((const __m128i *)(const void *)(k->res + base + c))));
    if (RES == 2)
        r = _mm512_loadu_ps(k->res_f32 + base + c);
    if (RES == 1 && FIRST)
        x = _mm512_fmadd_ps(rs, r, x);
    if (RES == 2 && FIRST)
        x = _mm512_add_ps(x, r);
    x = act16(x, k->act, p0v, p1v);
    if (RES == 1 && !FIRST)
        x = _mm512_fmadd_ps(rs, r, x);
    if (RES == 2 && !FIRST)
        x = _mm512_add_ps(x, r);
    if (YQ)
        requant16(x, inv, k->y_q + base + c);
    if (YF)
        _mm512_storeu_ps(k->y_f32 + base + c, x);
}

static inline __attribute__((always_inline)) AVX512 void
qconv_epi_rows16(const struct nib_qconv_epi *e, const float *v, size_t p0, uint32_t m,
                 uint32_t c_out, const int RES, const int FIRST, const int YQ, const int YF)
{
    const struct epi_consts k = epi_consts(e, YQ);
    const uint32_t c16 = c_out & ~15u, c8 = c_out & ~7u;
    for (uint32_t t = 0; t < m; t++) {
        const float *vt = v + (size_t)t * c_out;
        const size_t base = (p0 + t) * c_out;
        for (uint32_t c = 0; c < c16; c += 16)
            epi16(&k, vt, base, c, RES, FIRST, YQ, YF);
        if (c16 < c8)
            epi8(&k, vt, base, c16, RES, FIRST, YQ, YF);
        if (c8 < c_out)
            nib_qconv_epi_px(e, vt + c8, p0 + t, c_out, c8, c_out - c8);
    }
}

static AVX512 NIB_QCONV_EPI_DECL(qconv_epi_avx512)
{
    EPI_DISPATCH(qconv_epi_rows16)
}
#undef EPI_DISPATCH
#undef EPI_OUT

/* ---- AVX-VNNI matmuls for the convolution ----
 *
 * The q4c and q8c (per channel) matmuls of kernels/gemm with vpdpbusd
 * (u8 x s8, 4 products summed into each int32 lane without an int16
 * step) in place of vpmaddubsw + vpmaddwd: the same layouts, the same
 * exact integer sums (|sum| <= K * 15 * 127 or K * 127 * 127 < 2^31 for
 * K <= 2^20 at q4c, 2^17 at q8c), then the same per-channel finish, so
 * the same bits. q4c: the unsigned codes (q + 8) times the activations,
 * minus 8 x the row's sum;
 * q8c: |w| times a * sign(w), as the AVX2 kernel does. Used only where
 * the CPU reports AVX-VNNI (CPUID.(7,1):EAX bit 4). */
#include "kernels/gemm/qgemm-avx2.h"

#define VNNI __attribute__((target("avxvnni")))

/* Two accumulators per token (the low and the high nibbles' inputs):
 * vpdpbusd's latency is 5 cycles, and one chain per token would leave its
 * two ports idle. */
static inline __attribute__((always_inline)) VNNI void
q4c_vnni_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
               uint32_t t0, const int M, const struct nib_qrows *e, __m256 *out)
{
    const size_t kp = a->k_pad;
    const int8_t *ak = a->q + t0 * kp;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i acc[4], acc2[4];
#pragma GCC unroll 4
    for (int t = 0; t < M; t++)
        acc[t] = acc2[t] = _mm256_setzero_si256();
    const uint8_t *p = blk;
    for (uint32_t k = 0; k < l->k_pad; k += 32, p += 128, ak += 32) {
        nib_prefetch(p, 128);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(p + c * 32));
            __m256i lo = _mm256_and_si256(wv, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
#pragma GCC unroll 4
            for (int t = 0; t < M; t++) {
                const int8_t *at = ak + t * kp + c * 8;
                acc[t] = _mm256_dpbusd_avx_epi32(acc[t], lo, _mm256_set1_epi32(nib_ld32(at)));
                acc2[t] = _mm256_dpbusd_avx_epi32(acc2[t], hi, _mm256_set1_epi32(nib_ld32(at + 4)));
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < M; t++)
        acc[t] = _mm256_sub_epi32(_mm256_add_epi32(acc[t], acc2[t]),
                                  _mm256_set1_epi32(8 * a->sum[t0 + t]));
    nib_qc_finish_avx2(blk, l, a, t0, M, e, acc, out);
}

/* Two accumulators per token too (even and odd chunks). */
static inline __attribute__((always_inline)) VNNI void
q8c_vnni_block(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
               uint32_t t0, const int M, const struct nib_qrows *e, __m256 *out)
{
    const size_t kp = a->k_pad;
    const int8_t *ak = a->q + t0 * kp;
    __m256i acc[2][4];
#pragma GCC unroll 4
    for (int t = 0; t < M; t++)
        acc[0][t] = acc[1][t] = _mm256_setzero_si256();
    const uint8_t *p = blk;
    for (uint32_t k = 0; k < l->k_pad; k += 8, p += 64, ak += 8) {
        nib_prefetch(p, 64);
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++) {
            __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(p + c * 32));
            __m256i wa = _mm256_abs_epi8(wv);
#pragma GCC unroll 4
            for (int t = 0; t < M; t++) {
                __m256i av = _mm256_set1_epi32(nib_ld32(ak + t * kp + c * 4));
                acc[c][t] = _mm256_dpbusd_avx_epi32(acc[c][t], wa, _mm256_sign_epi8(av, wv));
            }
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < M; t++)
        acc[0][t] = _mm256_add_epi32(acc[0][t], acc[1][t]);
    nib_qc_finish_avx2(blk, l, a, t0, M, e, acc[0], out);
}

/* clang-format off */
static VNNI NIB_QGEMM_KERNEL(qconv_gemm_q4c_vnni, NIB_DT_Q4C, q4c_vnni_block)
static VNNI NIB_QGEMM_KERNEL(qconv_gemm_q8c_vnni, NIB_DT_Q8C, q8c_vnni_block)
typedef int nib_qconv_vnni_end; /* ends the macros' definitions for clang-format */
/* clang-format on */

/* 1 when this CPU has AVX-VNNI (the OS's YMM state is AVX2's premise). */
static int cpu_has_avxvnni(void)
{
    /* workers racing on the first call all store the same answer */
    static int known = -1;
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        unsigned int a = 0, b = 0, c = 0, d = 0;
        k = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}

NIB_QCONV_DECL(nib_conv_s8_qcs8_avx2vnni)
{
    assert(nib_conv_shape_ok(s) && wt && (wt->dtype == NIB_DT_Q4C || wt->dtype == NIB_DT_Q8C));
    if (nib_avx512vnni_available()) {
        /* both 512-bit matmuls read the row sums (q8c: kernels/gemm) */
        nib_qconv_run_epi(wt->dtype == NIB_DT_Q4C ? nib_gemm_f32_q4cs8_n16_avx512vnni
                                                  : nib_gemm_f32_q8cs8_n16_avx512vnni,
                          qconv_epi_avx512, 1, s, x, x_scale, wt, e, scratch, oh_begin, oh_end);
        return;
    }
    nib_conv_s8_qcs8_avxvnni(s, x, x_scale, wt, e, scratch, oh_begin, oh_end);
}

NIB_QCONV_DECL(nib_conv_s8_qcs8_avxvnni)
{
    assert(nib_conv_shape_ok(s) && wt && (wt->dtype == NIB_DT_Q4C || wt->dtype == NIB_DT_Q8C));
    if (!cpu_has_avxvnni()) {
        nib_conv_s8_qcs8_avx2(s, x, x_scale, wt, e, scratch, oh_begin, oh_end);
        return;
    }
    nib_qconv_run_epi(wt->dtype == NIB_DT_Q4C ? qconv_gemm_q4c_vnni : qconv_gemm_q8c_vnni,
                      qconv_epi_avx2, wt->dtype == NIB_DT_Q4C, s, x, x_scale, wt, e, scratch,
                      oh_begin, oh_end);
}

int nib_conv_s8_avxvnni_available(void)
{
    return cpu_has_avxvnni();
}

NIB_QCONV_DECL(nib_conv_s8_qcs8_avx2)
{
    assert(nib_conv_shape_ok(s) && wt && (wt->dtype == NIB_DT_Q4C || wt->dtype == NIB_DT_Q8C));
    nib_qconv_run_epi(
        wt->dtype == NIB_DT_Q4C ? nib_gemm_f32_q4cs8_n8_avx2 : nib_gemm_f32_q8cs8_n8_avx2,
        qconv_epi_avx2, wt->dtype == NIB_DT_Q4C, s, x, x_scale, wt, e, scratch, oh_begin, oh_end);
}
#else
typedef int nib_conv_s8_qcs8_avx2_unused;
#endif
