/* Helpers shared by the AVX2 GEMM kernels (include only from them): the
 * 8-lane row vector the driver needs, register pins, prefetch, the 4-bit
 * inner step, the per-group 4-bit block (q4 and q4a) and the per-channel
 * epilogue (q4c and q8c). */
#ifndef NIB_QGEMM_AVX2_H
#define NIB_QGEMM_AVX2_H

#include "kernels/common/isa.h"
#include "kernels/qkernels.h"

#if NIB_HAVE_AVX2
#include <immintrin.h>
#include <string.h>

typedef __m256 nib_f32x8; /* rows r0..r0+7 of an N-block */
static inline nib_f32x8 nib_f32x8_load(const float *p)
{
    return _mm256_loadu_ps(p);
}
static inline void nib_f32x8_store(float *p, nib_f32x8 v)
{
    _mm256_storeu_ps(p, v);
}
static inline nib_f32x8 nib_f32x8_add(nib_f32x8 a, nib_f32x8 b)
{
    return _mm256_add_ps(a, b);
}

#include "kernels/gemm/qgemm-driver.h"

/* Pin v in a register here (no instruction). Used in the multi-token
 * loops: without it the compiler reassociates the unrolled integer adds
 * into a tree that keeps every product alive at once and spills registers
 * (GEMM of 4 tokens: 3.0M -> 2.5M instructions per 2048x2048 call). */
#define NIB_KEEP(v) __asm__("" : "+x"(v))

/* One prefetch per 64-byte line of [q, q + bytes); a prefetch never
 * faults, so q may lie past the end of the tensor. */
static inline void nib_prefetch_lines(uintptr_t q, uint32_t bytes)
{
#pragma GCC unroll 16
    for (uint32_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)(q + o), _MM_HINT_T0);
}

/* Prefetch the lines nib_prefetch_bytes past [p, p + bytes). The
 * hardware prefetcher alone left q4/32 GEMV from DRAM at 0.63-0.77 of the
 * stream read; prefetching ahead gave 0.87-0.99 at the machine's best
 * distance (docs/kernels.md). */
static inline void nib_prefetch(const uint8_t *p, uint32_t bytes)
{
    nib_prefetch_lines((uintptr_t)p + __atomic_load_n(&nib_prefetch_bytes, __ATOMIC_RELAXED),
                       bytes);
}

/* The same for a walk that reads NB blocks' bytes per step (a stored
 * N-block pair read as one stream): NB x nib_prefetch_bytes ahead, so the
 * lookahead in time stays what the distance gives one block's stream
 * (the two streams it replaced each ran that far ahead). At the plain
 * distance, the pair stream of a K = 5632 q4/32 GEMV from DRAM ran at
 * 0.7 of the stream read; at twice it, 15 % faster than the two streams
 * (docs/benchmarks.md, "N-block pairs stored as one stream"). */
static inline void nib_prefetch_nb(const uint8_t *p, uint32_t bytes, const int NB)
{
    nib_prefetch_lines((uintptr_t)p +
                           (uintptr_t)NB * __atomic_load_n(&nib_prefetch_bytes, __ATOMIC_RELAXED),
                       bytes);
}

static inline int32_t nib_ld32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline long long nib_ld64(const void *p)
{
    long long v;
    memcpy(&v, p, 8);
    return v;
}

/* acc32[t] += per-row sums of 8 * NC inputs of 4-bit codes (NC constant,
 * at most 4): NC chunks at p (8 rows x 8 inputs each) against the
 * activations at ak + t * kp; nib_q4_block32 is NC = 4.
 * int16 headroom: a vpmaddubsw lane is at most 2 * 15 * 128 = 3840 in
 * magnitude, and 8 of them (2 per chunk) sum to <= 30720 < 32767, so
 * the int16 accumulator is widened (vpmaddwd with 1) only after the 4th. */
static inline __attribute__((always_inline)) void nib_q4_chunks(const uint8_t *p, size_t cs,
                                                                const int8_t *ak, size_t kp,
                                                                const int NC, const int M,
                                                                __m256i *acc32)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    __m256i acc16[4];
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc16[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) {
        __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(p + c * cs));
        __m256i lo = _mm256_and_si256(wv, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);
#pragma GCC unroll 8
        for (int t = 0; t < M; t++) {
            const int8_t *at = ak + t * kp + c * 8;
            __m256i a0 = _mm256_set1_epi32(nib_ld32(at)), a1 = _mm256_set1_epi32(nib_ld32(at + 4));
            acc16[t] = _mm256_add_epi16(acc16[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, a0),
                                                                   _mm256_maddubs_epi16(hi, a1)));
            if (M > 1)
                NIB_KEEP(acc16[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc32[t] = _mm256_add_epi32(acc32[t], _mm256_madd_epi16(acc16[t], ones));
}

static inline __attribute__((always_inline)) void
nib_q4_block32(const uint8_t *p, const int8_t *ak, size_t kp, const int M, __m256i *acc32)
{
    nib_q4_chunks(p, NIB_Q_CHUNK, ak, kp, 4, M, acc32);
}

/* q8: acc[t] += the products of one chunk (8 rows x 4 inputs) at p.
 * vpmaddubsw needs one unsigned operand: it multiplies |w| (u8, up to 128)
 * by a * sign(w) (s8; exact because activations are never -128), so a
 * pair sums to at most 2 * 128 * 127 = 32512 and cannot saturate; each
 * result is widened at once with vpmaddwd (two would overflow int16). */
static inline __attribute__((always_inline)) void nib_q8_chunk(const uint8_t *p, const int8_t *ak,
                                                               size_t kp, const int M, __m256i *acc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i wa = _mm256_abs_epi8(wv);
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        __m256i av = _mm256_set1_epi32(nib_ld32(ak + t * kp));
        __m256i pr = _mm256_maddubs_epi16(wa, _mm256_sign_epi8(av, wv));
        acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(pr, ones));
        if (M > 1)
            NIB_KEEP(acc[t]);
    }
}

/* Integer sums of chunks [0, n_chunks) of one scale group (n_chunks even).
 * The codes are prefetched twice the distance ahead, the lead the q4 and
 * q4h pair walks take (nib_prefetch_nb with NB = 2), to which the
 * appliance's measured distance is fitted: at the plain distance the LM
 * head (q8c per channel, one block after the other) ran at 1.17-1.37 x
 * the reference loop's read of its bytes, at twice it 1.03-1.17 in six
 * alternated rounds (docs/benchmarks.md, "The LM head's prefetch lead"). */
static inline __attribute__((always_inline)) void nib_q8_dot(const uint8_t *p, const int8_t *ak,
                                                             size_t kp, uint32_t n_chunks,
                                                             const int M, __m256i *acc)
{
#pragma GCC unroll 8
    for (int t = 0; t < M; t++)
        acc[t] = _mm256_setzero_si256();
    for (uint32_t c = 0; c < n_chunks; c += 2, p += 64, ak += 8) {
        nib_prefetch_nb(p, 64, 2);
        nib_q8_chunk(p, ak, kp, M, acc);
        nib_q8_chunk(p + 32, ak + 4, kp, M, acc);
    }
}

/* The per-group formats (q4, q4a, q8c/g): M tokens (1..4) of NB blocks
 * (qgemm-driver.h), groups of G inputs (32/64/128), BITS (4 or 8) and ZP
 * (NIB_ZP_*) all constant. Per group: the integer sums, minus zero point
 * x activation sum (4-bit: 8, or the stored u8), converted, times ws *
 * sa, one fma into the row's accumulator. */
static inline __attribute__((always_inline)) void
nib_qg_group(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const uint32_t G, const int BITS, const int ZP,
             __m256 *out)
{
    const int ASYM = ZP == NIB_ZP_STORED;
    const uint32_t nsg = l->n_sgroups, sgb = l->sgroup_bytes, cb = l->code_bytes;
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    __m256 accf[4];
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        accf[i] = _mm256_setzero_ps();
    for (uint32_t j = 0; j < nsg; j++) {
        const int8_t *ak = aq + (size_t)j * G;
        if (BITS == 4) /* the NB groups: NB x sgb, as a constant */
            nib_prefetch_nb(blk + (size_t)j * gs, NB * (4 * G + 16 + (ASYM ? 8 : 0)), NB);
#pragma GCC unroll 2
        for (int b = 0; b < NB; b++) {
            const uint8_t *p = blk + (size_t)j * gs + (size_t)b * sgb;
            __m256i acc32[4];
            if (BITS == 8) {
                nib_q8_dot(p, ak, kp, G / 4, M, acc32);
            } else {
#pragma GCC unroll 8
                for (int t = 0; t < M; t++)
                    acc32[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (uint32_t c4 = 0; c4 < G / 32; c4++)
                    nib_q4_block32(p + c4 * 128, ak + c4 * 32, kp, M, acc32);
            }
            __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p + cb)));
            __m256i zp = _mm256_set1_epi32(8);
            if (ASYM)
                zp = _mm256_cvtepu8_epi32(
                    _mm_loadl_epi64((const __m128i *)(const void *)(p + cb + 16)));
#pragma GCC unroll 8
            for (int t = 0; t < M; t++) {
                /* zero point x activation sum: one vector multiply per row
                 * for q4a; for q4 (zero point 8 in every row) a shift. */
                __m256i corr = ASYM ? _mm256_mullo_epi32(zp, _mm256_set1_epi32(as[t * nbk + j]))
                                    : _mm256_set1_epi32((int32_t)((uint32_t)as[t * nbk + j] << 3));
                __m256 f = _mm256_cvtepi32_ps(ZP == NIB_ZP_NONE ? acc32[t]
                                                                : _mm256_sub_epi32(acc32[t], corr));
                __m256 s = _mm256_mul_ps(ws, _mm256_set1_ps(sa[t * nbk + j]));
                accf[b * M + t] = _mm256_fmadd_ps(f, s, accf[b * M + t]);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        out[i] = accf[i];
}

/* The formats with a minimum (q4f, q8f): M tokens of NB blocks, groups of
 * G (16 or 32) inputs, BITS 4 (raw codes 0..15) or 8 (int8), all
 * constant. Per group: the integer sums, converted, one fma with ws * sa,
 * then the activation block sum, converted, one fma with wm * sa
 * (qgemm-scalar.h, nib_qmin_row). A group of 16 4-bit codes is 2 chunks,
 * of 8-bit codes 4. */
static inline __attribute__((always_inline)) void
nib_qf_group(const uint8_t *blk, uint32_t gs, const struct nib_qlayout *l, const struct nib_qact *a,
             uint32_t t0, const int M, const int NB, const uint32_t G, const int BITS, __m256 *out)
{
    const uint32_t nsg = l->n_sgroups, sgb = l->sgroup_bytes, cb = l->code_bytes;
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    __m256 accf[4];
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        accf[i] = _mm256_setzero_ps();
    for (uint32_t j = 0; j < nsg; j++) {
        const int8_t *ak = aq + (size_t)j * G;
        if (BITS == 4) /* the NB groups: NB x sgb, as a constant */
            nib_prefetch_nb(blk + (size_t)j * gs, NB * (4 * G + 64), NB);
#pragma GCC unroll 2
        for (int b = 0; b < NB; b++) {
            const uint8_t *p = blk + (size_t)j * gs + (size_t)b * sgb;
            __m256i acc32[4];
            if (BITS == 8) {
                nib_prefetch(p + G * 8, 64); /* scales, minimums; the dot prefetches the codes */
                nib_q8_dot(p, ak, kp, G / 4, M, acc32);
            } else {
#pragma GCC unroll 8
                for (int t = 0; t < M; t++)
                    acc32[t] = _mm256_setzero_si256();
                nib_q4_chunks(p, NIB_Q_CHUNK, ak, kp, (int)(G / 8), M, acc32);
            }
            __m256 ws = _mm256_loadu_ps((const float *)(const void *)(p + cb));
            __m256 wm = _mm256_loadu_ps((const float *)(const void *)(p + cb + 32));
#pragma GCC unroll 8
            for (int t = 0; t < M; t++) {
                __m256 sat = _mm256_set1_ps(sa[t * nbk + j]);
                __m256 *acc = &accf[b * M + t];
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc32[t]), _mm256_mul_ps(ws, sat), *acc);
                *acc = _mm256_fmadd_ps(_mm256_set1_ps((float)as[t * nbk + j]),
                                       _mm256_mul_ps(wm, sat), *acc);
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        out[i] = accf[i];
}

/* q4h: the 6-bit sub-scales of one super-block's 8 rows, decoded all at
 * once with byte arithmetic into s8[8 i + r] = s - 32 (sub-block i, row
 * r; kernels/qformat.h), ns = G / 16 sub-blocks (ns <= 8; the rest of
 * s8 is zeros minus 32, never read). Per sub-block the kernel then needs
 * one widening load: decoded one sub-block at a time (a broadcast and two
 * variable shifts per field) it cost about 12 instructions per sub-block
 * and 8-row block, a third of a one-token GEMV's work. */
static inline __attribute__((always_inline)) void nib_q4h_subs_s8(const uint8_t *super,
                                                                  uint32_t lo_off, uint32_t hi_off,
                                                                  const uint32_t ns, int8_t *s8)
{
    /* Only the fields' own bytes are read (the tensor may end there). */
    uint8_t lo_b[32] = {0}, hi_b[16] = {0};
    memcpy(lo_b, super + lo_off, 4 * ns);
    memcpy(hi_b, super + hi_off, 2 * ns);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i lw = _mm256_loadu_si256((const __m256i *)(const void *)lo_b);
    /* Low fields: byte 4i + k holds rows 2k (low nibble) and 2k + 1. */
    const __m256i ev = _mm256_and_si256(lw, m4);
    const __m256i od = _mm256_and_si256(_mm256_srli_epi16(lw, 4), m4);
    /* High fields: byte 2i + k holds rows 4k..4k+3, 2 bits each; f_j has
     * rows j (byte 2i) and 4 + j (byte 2i + 1). */
    const __m128i hw = _mm_loadu_si128((const __m128i *)(const void *)hi_b), m2 = _mm_set1_epi8(3);
    const __m128i f0 = _mm_and_si128(hw, m2), f1 = _mm_and_si128(_mm_srli_epi16(hw, 2), m2);
    const __m128i f2 = _mm_and_si128(_mm_srli_epi16(hw, 4), m2);
    const __m128i f3 = _mm_and_si128(_mm_srli_epi16(hw, 6), m2);
    /* Interleaved f0, f2 (f1, f3): byte 4i + k holds row 2k's (2k + 1's)
     * high field, as ev (od) holds its low one; subs 0..3 in the low lane. */
    const __m256i he = _mm256_set_m128i(_mm_unpackhi_epi8(f0, f2), _mm_unpacklo_epi8(f0, f2));
    const __m256i ho = _mm256_set_m128i(_mm_unpackhi_epi8(f1, f3), _mm_unpacklo_epi8(f1, f3));
    const __m256i e = _mm256_or_si256(ev, _mm256_slli_epi16(he, 4)); /* no carry: he <= 3 */
    const __m256i o = _mm256_or_si256(od, _mm256_slli_epi16(ho, 4));
    /* Rows in order: subs 0, 1 | 4, 5 and 2, 3 | 6, 7; then sub-major. */
    const __m256i c32 = _mm256_set1_epi8(32);
    const __m256i x0 = _mm256_sub_epi8(_mm256_unpacklo_epi8(e, o), c32);
    const __m256i x1 = _mm256_sub_epi8(_mm256_unpackhi_epi8(e, o), c32);
    _mm256_storeu_si256((__m256i *)(void *)s8, _mm256_permute2x128_si256(x0, x1, 0x20));
    _mm256_storeu_si256((__m256i *)(void *)(s8 + 32), _mm256_permute2x128_si256(x0, x1, 0x31));
}

/* q4h: M tokens of NB blocks, super-blocks of G (32, 64, 128) inputs,
 * all constant. Per sub-block of 16: the integer sums of 2 chunks minus 8
 * x the activation block sum, converted, times ws * sa with ws = (float)s
 * x D (the super-block's s decoded once per 8-row block by
 * nib_q4h_subs_s8), one fma (nib_q4h_row). */
static inline __attribute__((always_inline)) void
nib_qh_group(const uint8_t *blk, uint32_t gs, uint32_t bf, const struct nib_qlayout *l,
             const struct nib_qact *a, uint32_t t0, const int M, const int NB, const uint32_t G,
             __m256 *out)
{
    const uint32_t ns = G / 16, sgb = l->sgroup_bytes, cs = nib_q4h_chunk_stride(l, gs);
    const size_t kp = a->k_pad, nbk = a->n_blocks;
    const int8_t *aq = a->q + t0 * kp;
    const float *sa = a->scale + t0 * nbk;
    const int32_t *as = a->sum + t0 * nbk;
    __m256 accf[4];
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        accf[i] = _mm256_setzero_ps();
    for (uint32_t j = 0; j < l->n_sgroups; j++) {
        nib_prefetch_nb(blk + (size_t)j * gs, NB * (4 * G + 16 + 6 * ns), NB);
#pragma GCC unroll 2
        for (int b = 0; b < NB; b++) {
            const uint8_t *bb = blk + (size_t)b * sgb;
            const uint8_t *p = bb + nib_q4h_codes_rel(l, gs, bf + b, j);
            const uint8_t *fl = bb + nib_q4h_fields_rel(l, gs, bf + b, j);
            const __m256 D = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)fl));
            int8_t s8[64];
            nib_q4h_subs_s8(fl, nib_q4h_lo_off(l, 0), nib_q4h_hi_off(l, 0), ns, s8);
            for (uint32_t i = 0; i < ns; i++) {
                const uint32_t bi = j * ns + i;
                if (bi >= nbk) /* the rest of the super-block: padding */
                    break;
                __m256i acc32[4];
#pragma GCC unroll 8
                for (int t = 0; t < M; t++)
                    acc32[t] = _mm256_setzero_si256();
                nib_q4_chunks(p + 2 * i * cs, cs, aq + (size_t)bi * 16, kp, 2, M, acc32);
                const __m256i sv = _mm256_cvtepi8_epi32(
                    _mm_loadl_epi64((const __m128i *)(const void *)(s8 + 8 * i)));
                const __m256 ws = _mm256_mul_ps(_mm256_cvtepi32_ps(sv), D);
#pragma GCC unroll 8
                for (int t = 0; t < M; t++) {
                    __m256i corr = _mm256_set1_epi32((int32_t)((uint32_t)as[t * nbk + bi] << 3));
                    __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc32[t], corr));
                    __m256 sc = _mm256_mul_ps(ws, _mm256_set1_ps(sa[t * nbk + bi]));
                    accf[b * M + t] = _mm256_fmadd_ps(f, sc, accf[b * M + t]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NB * M; i++)
        out[i] = accf[i];
}

/* Per-channel epilogue (q4c, q8c/0): out[t] = fma(isum[t], ws * sa, add
 * or +0), ws the 8 f32 row scales after the codes. */
static inline __attribute__((always_inline)) void
nib_qc_finish_avx2(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
                   uint32_t t0, const int M, const struct nib_qrows *e, const __m256i *isum,
                   __m256 *out)
{
    __m256 ws = _mm256_loadu_ps((const float *)(const void *)(blk + l->code_bytes));
#pragma GCC unroll 8
    for (int t = 0; t < M; t++) {
        __m256 s = _mm256_mul_ps(ws, _mm256_set1_ps(a->scale[t0 + t]));
        out[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), s, nib_qrows_add(e, t0 + t));
    }
}

/* Per-channel q8c: the 8-bit step over the whole row, one fma with the add. */
static inline __attribute__((always_inline)) void
nib_q8c_channel(const uint8_t *blk, const struct nib_qlayout *l, const struct nib_qact *a,
                uint32_t t0, const int M, const struct nib_qrows *e, __m256 *out)
{
    __m256i isum[4];
    nib_q8_dot(blk, a->q + t0 * (size_t)a->k_pad, a->k_pad, l->k_pad / 4, M, isum);
    nib_qc_finish_avx2(blk, l, a, t0, M, e, isum, out);
}

#endif
#endif
