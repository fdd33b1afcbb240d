/* Row dequantization of every ggml tensor type nibble reads, value for
 * value what ggml's reference (ggml-quants.c, dequantize_row_*) computes.
 *
 * Why the bits agree: ggml evaluates each weight in f32 as a product of a
 * half-precision scale (11 significant bits, subnormals included: every
 * half is a normal float) with small integers, then at most one add or
 * subtract. Every such product has at most 11 + the integers' bits <= 24
 * significant bits and lies far inside f32's range (|x| < 2^29, and no
 * nonzero product is below 2^-24), so it is EXACT, whatever the order of
 * the factors. The only rounding is the final add/subtract (Q4_1, Q5_1,
 * Q2_K, Q4_K, Q5_K), which rounds the exact value p - m once; a compiler
 * contracting it into an fma rounds the same exact value once too. So
 * writing the same expressions here gives the same floats, and a nibble
 * format computing fmaf(scale, code, min) with scale and min equal to
 * ggml's f32 intermediates gives them as well (tools/compiler/repack.c).
 * Per type, the bit count of the largest product is stated below. */
#include "tools/compiler/ggml_dequant.h"

#include "kernels/f16.h"

#include <string.h>

#define QK_K 256

static const struct ggml_type_info infos[] = {
    [GGML_TYPE_F32] = {"f32", 1, 4},         [GGML_TYPE_F16] = {"f16", 1, 2},
    [GGML_TYPE_Q4_0] = {"q4_0", 32, 18},     [GGML_TYPE_Q4_1] = {"q4_1", 32, 20},
    [GGML_TYPE_Q5_0] = {"q5_0", 32, 22},     [GGML_TYPE_Q5_1] = {"q5_1", 32, 24},
    [GGML_TYPE_Q8_0] = {"q8_0", 32, 34},     [GGML_TYPE_Q2_K] = {"q2_K", QK_K, 84},
    [GGML_TYPE_Q3_K] = {"q3_K", QK_K, 110},  [GGML_TYPE_Q4_K] = {"q4_K", QK_K, 144},
    [GGML_TYPE_Q5_K] = {"q5_K", QK_K, 176},  [GGML_TYPE_Q6_K] = {"q6_K", QK_K, 210},
    [GGML_TYPE_IQ4_NL] = {"iq4_nl", 32, 18}, [GGML_TYPE_IQ4_XS] = {"iq4_xs", QK_K, 136},
    [GGML_TYPE_BF16] = {"bf16", 1, 2},
};

const struct ggml_type_info *ggml_type_info(uint32_t type)
{
    if (type >= sizeof infos / sizeof infos[0] || !infos[type].name)
        return NULL;
    return &infos[type];
}

const char *ggml_supported_types(void)
{
    return "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, "
           "iq4_nl, iq4_xs";
}

/* The IQ4_NL / IQ4_XS codebook (non-linear 4-bit values). */
const int8_t ggml_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

static uint32_t le32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- 32-element blocks ---- */

/* Q4_0 (d f16, 16 bytes of nibbles): byte j holds element j (low nibble)
 * and j + 16 (high); x = (q - 8) * d. Product: 11 + 4 bits. */
static void row_q4_0(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 18, y += 32) {
        float d = ggml_f16_at(p);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)((p[2 + j] & 15) - 8) * d;
            y[j + 16] = (float)((p[2 + j] >> 4) - 8) * d;
        }
    }
}

/* Q4_1 (d, m f16, nibbles as Q4_0): x = q * d + m (one rounding). */
static void row_q4_1(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 20, y += 32) {
        float d = ggml_f16_at(p), m = ggml_f16_at(p + 2);
        for (int j = 0; j < 16; j++) {
            y[j] = (float)(p[4 + j] & 15) * d + m;
            y[j + 16] = (float)(p[4 + j] >> 4) * d + m;
        }
    }
}

/* The 5-bit code of element j of a Q5_0/Q5_1 block: its nibble (low for
 * j < 16, high for j >= 16, of byte j % 16) plus bit j of qh as 16. */
static int q5_code(const uint8_t *qs, uint32_t qh, int j)
{
    int lo = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    return lo | (int)((qh >> j) & 1) << 4;
}

/* Q5_0 (d f16, qh u32 LE, nibbles): x = (q - 16) * d. Product: 11 + 5 bits. */
static void row_q5_0(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 22, y += 32) {
        float d = ggml_f16_at(p);
        uint32_t qh = le32_at(p + 2);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(q5_code(p + 6, qh, j) - 16) * d;
    }
}

/* Q5_1 (d, m f16, qh, nibbles): x = q * d + m (one rounding). */
static void row_q5_1(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 24, y += 32) {
        float d = ggml_f16_at(p), m = ggml_f16_at(p + 2);
        uint32_t qh = le32_at(p + 4);
        for (int j = 0; j < 32; j++)
            y[j] = (float)q5_code(p + 8, qh, j) * d + m;
    }
}

/* Q8_0 (d f16, 32 int8): x = q * d. Product: 11 + 8 bits. */
static void row_q8_0(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 34, y += 32) {
        float d = ggml_f16_at(p);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)p[2 + j] * d;
    }
}

/* IQ4_NL (d f16, nibbles as Q4_0): x = d * codebook[q]. Product: 11 + 7 bits. */
static void row_iq4_nl(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 18, y += 32) {
        float d = ggml_f16_at(p);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)ggml_iq4_values[p[2 + j] & 15];
            y[j + 16] = d * (float)ggml_iq4_values[p[2 + j] >> 4];
        }
    }
}

/* ---- 256-element super-blocks (K-quants) ---- */

/* Q2_K (scales[16], qs[64], d, dmin f16): sub-block s of 16 elements has
 * scale d*(scales[s] & 15) and min dmin*(scales[s] >> 4) (11 + 4 bits,
 * exact); element e's 2-bit code is bits 2*((e%128)/32) of byte
 * qs[32*(e/128) + e%32]. x = scale * q - min (11 + 4 + 2 bits exact; one
 * rounding). */
void ggml_q2_k_sub(const uint8_t *blk, int s, float *scale, float *min)
{
    float d = ggml_f16_at(blk + 80), dmin = ggml_f16_at(blk + 82);
    *scale = d * (float)(blk[s] & 15);
    *min = dmin * (float)(blk[s] >> 4);
}

int ggml_q2_k_code(const uint8_t *blk, int e)
{
    return blk[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32)) & 3;
}

static void row_q2_k(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 84, y += QK_K)
        for (int s = 0; s < 16; s++) {
            float dl, ml;
            ggml_q2_k_sub(p, s, &dl, &ml);
            for (int l = 0; l < 16; l++)
                y[16 * s + l] = dl * (float)ggml_q2_k_code(p, 16 * s + l) - ml;
        }
}

/* Q3_K (hmask[32], qs[64], scales[12], d f16): sixteen 6-bit scales,
 * stored as low nibbles in scales[0..7] (sub-blocks 0..7 low nibble,
 * 8..15 high nibble) and high 2-bit pairs in scales[8..11] (sub-block s:
 * bits 2*(s/4) of scales[8 + s%4]); a sub-block's scale is d * (sc - 32)
 * (11 + 6 bits). Element e: low 2 bits as Q2_K's codes (qs at offset 32),
 * high bit = bit (e/32) of hmask[e%32]; a clear high bit subtracts 4. So
 * x = scale * q3s with q3s = low + 4*hbit - 4 in -4..3 (17 + 3 bits,
 * exact: no rounding at all). */
int ggml_q3_k_scale6(const uint8_t *blk, int s)
{
    const uint8_t *sc = blk + 96;
    int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;
    int hi = sc[8 + s % 4] >> (2 * (s / 4)) & 3;
    return lo | hi << 4;
}

float ggml_q3_k_scale(const uint8_t *blk, int s)
{
    return ggml_f16_at(blk + 108) * (float)(ggml_q3_k_scale6(blk, s) - 32);
}

int ggml_q3_k_code(const uint8_t *blk, int e) /* 0..7: x = scale * (code - 4) */
{
    int lo = blk[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32)) & 3;
    int hi = blk[e % 32] >> (e / 32) & 1;
    return lo | hi << 2;
}

static void row_q3_k(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 110, y += QK_K)
        for (int s = 0; s < 16; s++) {
            float dl = ggml_q3_k_scale(p, s);
            for (int l = 0; l < 16; l++)
                y[16 * s + l] = dl * (float)(ggml_q3_k_code(p, 16 * s + l) - 4);
        }
}

/* Q4_K / Q5_K scales[12]: eight 6-bit scales and eight 6-bit mins. For
 * j < 4: scale = scales[j] & 63, min = scales[j+4] & 63; for j >= 4: the
 * low 4 bits from scales[j+4] (scale: low nibble, min: high nibble), the
 * high 2 bits from the top bits of scales[j-4] (scale) / scales[j] (min). */
void ggml_k_scale_min6(const uint8_t *sc, int j, int *scale, int *min)
{
    if (j < 4) {
        *scale = sc[j] & 63;
        *min = sc[j + 4] & 63;
    } else {
        *scale = (sc[j + 4] & 15) | (sc[j - 4] >> 6) << 4;
        *min = (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
    }
}

/* Sub-block j (32 elements) of a Q4_K or Q5_K block: scale d*sc, min
 * dmin*m (11 + 6 bits each, exact). */
void ggml_k_sub(const uint8_t *blk, int j, float *scale, float *min)
{
    int sc, m;
    ggml_k_scale_min6(blk + 4, j, &sc, &m);
    *scale = ggml_f16_at(blk) * (float)sc;
    *min = ggml_f16_at(blk + 2) * (float)m;
}

/* Q4_K (d, dmin f16, scales[12], qs[128]): element e of sub-block j =
 * e/32 is the low (j even) or high (j odd) nibble of qs[32*(j/2) + e%32].
 * x = scale * q - min (17 + 4 bits exact; one rounding). */
int ggml_q4_k_code(const uint8_t *blk, int e)
{
    int j = e / 32;
    uint8_t v = blk[16 + 32 * (j / 2) + e % 32];
    return j % 2 ? v >> 4 : v & 15;
}

static void row_q4_k(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 144, y += QK_K)
        for (int j = 0; j < 8; j++) {
            float dl, ml;
            ggml_k_sub(p, j, &dl, &ml);
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = dl * (float)ggml_q4_k_code(p, 32 * j + l) - ml;
        }
}

/* Q5_K (d, dmin, scales[12], qh[32], qs[128]): Q4_K's nibble plus bit j
 * (the sub-block) of qh[e%32] as 16. x = scale * q - min (17 + 5 bits
 * exact; one rounding). */
int ggml_q5_k_code(const uint8_t *blk, int e)
{
    int j = e / 32;
    uint8_t v = blk[48 + 32 * (j / 2) + e % 32];
    int lo = j % 2 ? v >> 4 : v & 15;
    return lo | (blk[16 + e % 32] >> j & 1) << 4;
}

static void row_q5_k(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 176, y += QK_K)
        for (int j = 0; j < 8; j++) {
            float dl, ml;
            ggml_k_sub(p, j, &dl, &ml);
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = dl * (float)ggml_q5_k_code(p, 32 * j + l) - ml;
        }
}

/* Q6_K (ql[128], qh[64], scales[16] int8, d f16): element e, in half
 * n = e/128, position i = e%128, quarter k = i/32, l = i%32: low 4 bits
 * are the low (k < 2) or high (k >= 2) nibble of ql[64n + l + 32*(k%2)],
 * high 2 bits are bits 2k of qh[32n + l]; code = q - 32 (-32..31).
 * Sub-block s = e/16 has scale d * scales[s]. ggml computes d * sc * q
 * left to right: 11 + 7 bits, then + 5 more = 23 bits: exact. */
int ggml_q6_k_code(const uint8_t *blk, int e) /* -32..31 */
{
    int n = e / 128, i = e % 128, k = i / 32, l = i % 32;
    uint8_t v = blk[64 * n + l + 32 * (k % 2)];
    int lo = k < 2 ? v & 15 : v >> 4;
    int hi = blk[128 + 32 * n + l] >> (2 * k) & 3;
    return (lo | hi << 4) - 32;
}

float ggml_q6_k_scale(const uint8_t *blk, int s)
{
    return ggml_f16_at(blk + 208) * (float)(int8_t)blk[192 + s];
}

static void row_q6_k(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 210, y += QK_K)
        for (int s = 0; s < 16; s++) {
            float dl = ggml_q6_k_scale(p, s);
            for (int l = 0; l < 16; l++)
                y[16 * s + l] = dl * (float)ggml_q6_k_code(p, 16 * s + l);
        }
}

/* IQ4_XS (d f16, scales_h u16 LE, scales_l[4], qs[128]): sub-block j of
 * 32 has the 6-bit ls = (nibble j%2 of scales_l[j/2]) | (bits 2j of
 * scales_h) << 4 and scale d * (ls - 32) (11 + 6 bits); its 16 bytes
 * qs[16j ..] hold element l (low nibble) and l + 16 (high) as codebook
 * indices. x = scale * codebook[q] (17 + 7 bits: exact). */
float ggml_iq4_xs_scale(const uint8_t *blk, int j)
{
    unsigned sh = (unsigned)(blk[2] | blk[3] << 8);
    int ls = (blk[4 + j / 2] >> (4 * (j % 2)) & 15) | (int)((sh >> (2 * j)) & 3) << 4;
    return ggml_f16_at(blk) * (float)(ls - 32);
}

int ggml_iq4_xs_index(const uint8_t *blk, int e)
{
    int j = e / 32, l = e % 32;
    uint8_t v = blk[8 + 16 * j + l % 16];
    return l < 16 ? v & 15 : v >> 4;
}

static void row_iq4_xs(const uint8_t *p, uint64_t nb, float *y)
{
    for (uint64_t b = 0; b < nb; b++, p += 136, y += QK_K)
        for (int j = 0; j < 8; j++) {
            float dl = ggml_iq4_xs_scale(p, j);
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = dl * (float)ggml_iq4_values[ggml_iq4_xs_index(p, 32 * j + l)];
        }
}

int ggml_dequant_row(uint32_t type, const uint8_t *p, uint64_t n, float *out)
{
    const struct ggml_type_info *ti = ggml_type_info(type);
    if (!ti || n % ti->blck)
        return -1;
    uint64_t nb = n / ti->blck;
    switch (type) {
    case GGML_TYPE_F32: memcpy(out, p, (size_t)n * 4); return 0; /* little-endian host */
    case GGML_TYPE_F16:
        for (uint64_t i = 0; i < n; i++)
            out[i] = ggml_f16_at(p + 2 * i);
        return 0;
    case GGML_TYPE_BF16:
        for (uint64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &u, 4);
        }
        return 0;
    case GGML_TYPE_Q4_0: row_q4_0(p, nb, out); return 0;
    case GGML_TYPE_Q4_1: row_q4_1(p, nb, out); return 0;
    case GGML_TYPE_Q5_0: row_q5_0(p, nb, out); return 0;
    case GGML_TYPE_Q5_1: row_q5_1(p, nb, out); return 0;
    case GGML_TYPE_Q8_0: row_q8_0(p, nb, out); return 0;
    case GGML_TYPE_Q2_K: row_q2_k(p, nb, out); return 0;
    case GGML_TYPE_Q3_K: row_q3_k(p, nb, out); return 0;
    case GGML_TYPE_Q4_K: row_q4_k(p, nb, out); return 0;
    case GGML_TYPE_Q5_K: row_q5_k(p, nb, out); return 0;
    case GGML_TYPE_Q6_K: row_q6_k(p, nb, out); return 0;
    case GGML_TYPE_IQ4_NL: row_iq4_nl(p, nb, out); return 0;
    case GGML_TYPE_IQ4_XS: row_iq4_xs(p, nb, out); return 0;
    default: return -1;
    }
}
