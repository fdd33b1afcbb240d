/* Quantized formats and kernels: layout arithmetic, f16 conversions, the
 * activation quantizer's contract, every SIMD variant of this build bitwise
 * equal to the scalar reference (tests/kernels/qcheck.c), int16 headroom,
 * the weight quantizers' error bounds, and exact repacking of the real
 * GGUF Q4_0 / Q8_0 models in ../shared/models. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/qkernels.h"
#include "tests/kernels/qcheck.h"
#include "tests/common/test_util.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/quant.h"
#include "tools/compiler/repack.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

static char msg[1024];

/* Check records every ck_assert it passes (a write to a file each time);
 * loops over many values use CHECK, which calls Check only on failure. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

/* The SIMD variant of this build, or NULL (announced once). */
static const struct nib_qkernels *simd(void)
{
    const struct nib_qkernels *k = nib_qkernels_get(NIB_ISA_AVX2);
    if (!k)
        k = nib_qkernels_get(NIB_ISA_NEON_DOT);
    if (!k)
        printf("SKIP: this build has no SIMD kernels; only the scalar references were tested\n");
    return k;
}

static const struct nib_qkernels *scalar(void)
{
    return nib_qkernels_get(NIB_ISA_SCALAR);
}

/* ---- formats ---- */

START_TEST(test_format_validity)
{
    static const struct {
        uint32_t dtype, group;
        int ok;
    } cases[] = {
        {NIB_DT_F32, 0, 1},   {NIB_DT_F32, 32, 0}, {NIB_DT_Q4, 32, 1},  {NIB_DT_Q4, 64, 1},
        {NIB_DT_Q4, 128, 1},  {NIB_DT_Q4, 0, 0},   {NIB_DT_Q4, 16, 0},  {NIB_DT_Q4, 256, 0},
        {NIB_DT_Q4A, 32, 1},  {NIB_DT_Q4A, 0, 0},  {NIB_DT_Q4C, 0, 1},  {NIB_DT_Q4C, 32, 0},
        {NIB_DT_Q8C, 0, 1},   {NIB_DT_Q8C, 32, 1}, {NIB_DT_Q8C, 48, 0}, {NIB_DT_COUNT, 0, 0},
        {NIB_DT_Q4F, 16, 1},  {NIB_DT_Q4F, 32, 1}, {NIB_DT_Q4F, 0, 0},  {NIB_DT_Q4F, 64, 0},
        {NIB_DT_Q8F, 16, 1},  {NIB_DT_Q8F, 32, 1}, {NIB_DT_Q8F, 0, 0},  {NIB_DT_Q8F, 128, 0},
        {NIB_DT_Q8C, 16, 0},  {NIB_DT_Q4, 16, 0},  {NIB_DT_Q4H, 32, 1}, {NIB_DT_Q4H, 64, 1},
        {NIB_DT_Q4H, 128, 1}, {NIB_DT_Q4H, 16, 0}, {NIB_DT_Q4H, 0, 0},  {NIB_DT_Q4H, 256, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(nib_qformat_valid(cases[i].dtype, cases[i].group), cases[i].ok);
        ck_assert_int_eq(nib_qformat_tile_n(cases[i].dtype, cases[i].group) != 0, cases[i].ok);
    }
    ck_assert_uint_eq(nib_qformat_tile_n(NIB_DT_Q4, 64), 8);
    ck_assert_uint_eq(nib_qformat_tile_k(NIB_DT_Q4, 64), 64);
    ck_assert_uint_eq(nib_qformat_tile_k(NIB_DT_Q4C, 0), 32);
    ck_assert_uint_eq(nib_qformat_tile_n(NIB_DT_F32, 0), 1);
    /* groups of 16 pad K in pairs: activation rows stay 32-byte aligned */
    ck_assert_uint_eq(nib_qformat_tile_k(NIB_DT_Q4F, 16), 32);
    ck_assert_uint_eq(nib_qformat_tile_k(NIB_DT_Q8F, 32), 32);
    ck_assert_uint_eq(nib_qformat_act_block(NIB_DT_Q8F, 16), 16);
    /* q4h: activations in blocks of 16 (its sub-blocks), K padded to the super-block */
    ck_assert_uint_eq(nib_qformat_act_block(NIB_DT_Q4H, 128), 16);
    ck_assert_uint_eq(nib_qformat_tile_k(NIB_DT_Q4H, 128), 128);
    ck_assert_uint_eq(nib_qformat_tile_k(NIB_DT_Q4H, 32), 32);
}
END_TEST

static void layout_covers(uint32_t dtype, uint32_t group);

START_TEST(test_format_sizes)
{
    /* stories260K's FFN gate: 172 inputs -> 6 groups of 32 (K padded to 192);
     * per group 8 rows x 32 nibbles = 128 bytes + 8 f16 scales. */
    struct nib_qlayout l;
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q4, 32, 172, 172), 0);
    ck_assert_uint_eq(l.k_pad, 192);
    ck_assert_uint_eq(l.n_pad, 176);
    ck_assert_uint_eq(l.n_sgroups, 6);
    ck_assert_uint_eq(l.sgroup_bytes, 128 + 16);
    ck_assert_uint_eq(l.size, 22 * 6 * 144);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q4A, 64, 8, 64), 256 + 16 + 8);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q4C, 0, 9, 33), 2 * (8 * 64 / 2 + 32));
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q8C, 0, 8, 100), 8 * 128 + 32);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q8C, 32, 8, 64), 2 * (256 + 16));
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_F32, 0, 3, 5), 60);
    /* 2048 x 2048 q4/32: 4.5 bits per weight */
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q4, 32, 2048, 2048), 2048ull * 2048 * 9 / 16);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q4, 48, 8, 64), 0);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q4, 32, 0, 64), 0);
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_F32, 0, 8, 8), -1);
    ck_assert_uint_eq(l.size, 0);
    /* int32 row sums: K up to 2^20 at 4 bits, 2^17 at 8 per channel */
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q4C, 0, 8, 1u << 20), 0);
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q8C, 0, 8, 1u << 17), 0);
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q8C, 0, 8, (1u << 17) + 1), -1);
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q8C, 32, 8, 1u << 20), 0);
    /* q4f and q8f: codes, 8 f32 scales, 8 f32 minimums per group; bytes per
     * weight 0.75 (q4f/32), 1.0 (q4f/16), 1.25 (q8f/32), 1.5 (q8f/16) */
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q4F, 32, 2048, 2048), 2048ull * 2048 * 3 / 4);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q4F, 16, 2048, 2048), 2048ull * 2048);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q8F, 32, 2048, 2048), 2048ull * 2048 * 5 / 4);
    ck_assert_uint_eq(nib_qformat_size(NIB_DT_Q8F, 16, 2048, 2048), 2048ull * 2048 * 3 / 2);
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q4F, 16, 9, 40), 0);
    ck_assert_uint_eq(l.k_pad, 64); /* 40 -> 64, not 48: groups of 16 in pairs */
    ck_assert_uint_eq(l.n_sgroups, 4);
    ck_assert_uint_eq(l.sgroup_bytes, 64 + 32 + 32);
    ck_assert_uint_eq(l.has_min, 1);
    ck_assert_uint_eq(l.scale_bytes, 4);
    ck_assert_uint_eq(l.size, 2 * 4 * 128);
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q8F, 16, 8, 16), 0);
    ck_assert_uint_eq(l.code_bits, 8);
    ck_assert_uint_eq(l.sgroup_bytes, 128 + 64);
    ck_assert_uint_eq(l.size, 2 * 192);
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q4, 32, 8, 8), 0);
    ck_assert_uint_eq(l.has_min, 0);
    /* every code of every row lands on a distinct byte/nibble inside the
     * tensor, and the scales, zero points and minimums use the rest */
    static const uint32_t layouts[][2] = {
        {NIB_DT_Q4A, 64}, {NIB_DT_Q4F, 16}, {NIB_DT_Q4F, 32}, {NIB_DT_Q8F, 16}, {NIB_DT_Q8F, 32}};
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++)
        layout_covers(layouts[li][0], layouts[li][1]);
}
END_TEST

/* Each code, scale, zero point and minimum of an 11 x 100 tensor has its
 * own place, inside the tensor, and no byte is left unused. */
static void layout_covers(uint32_t dtype, uint32_t group)
{
    struct nib_qlayout l;
    ck_assert_int_eq(nib_qlayout_get(&l, dtype, group, 11, 100), 0);
    uint8_t *seen = calloc(l.size * 2, 1);
    for (uint32_t r = 0; r < l.n_pad; r++)
        for (uint32_t k = 0; k < l.k_pad; k++) {
            unsigned sh;
            uint64_t off = nib_ql_code_off(&l, r, k, &sh);
            CHECK(off < l.size, "code (%u,%u) at %llu, outside", r, k, (unsigned long long)off);
            CHECK(seen[2 * off + sh / 4]++ == 0, "code (%u,%u) shares its place", r, k);
        }
    for (uint32_t r = 0; r < l.n_pad; r++)
        for (uint32_t j = 0; j < l.n_sgroups; j++) {
            uint64_t so = nib_ql_scale_off(&l, r, j);
            for (uint32_t b = 0; b < l.scale_bytes; b++)
                CHECK(seen[2 * (so + b)]++ == 0, "scale (%u,%u) overlaps", r, j);
            if (l.has_zp)
                CHECK(seen[2 * nib_ql_zp_off(&l, r, j)]++ == 0, "zero point (%u,%u) overlaps", r,
                      j);
            for (uint32_t b = 0; l.has_min && b < 4; b++)
                CHECK(seen[2 * (nib_ql_min_off(&l, r, j) + b)]++ == 0, "minimum (%u,%u) overlaps",
                      r, j);
        }
    for (uint64_t i = 0; i < l.size; i++) /* and nothing is left unused */
        CHECK(seen[2 * i] || seen[2 * i + 1], "dtype %u/%u: byte %llu unused", dtype, group,
              (unsigned long long)i);
    free(seen);
}

/* Weight (r, k) of a rows x cols tensor, decoded straight from the byte
 * layout docs/blob-format.md draws (not through kernels/qformat.h). */
static float doc_weight(uint32_t dtype, uint32_t group, uint32_t rows, uint32_t cols,
                        const uint8_t *w, uint32_t r, uint32_t k)
{
    const int fmin = dtype == NIB_DT_Q4F || dtype == NIB_DT_Q8F;
    const int bits = dtype == NIB_DT_Q8C || dtype == NIB_DT_Q8F ? 8 : 4;
    const uint32_t unit = group > 32 ? group : 32, k_pad = (cols + unit - 1) / unit * unit;
    const uint32_t g = group ? group : k_pad, sbytes = group && !fmin ? 2 : 4;
    const uint32_t code_bytes = 8 * g * bits / 8;
    const int q4h = dtype == NIB_DT_Q4H;
    const uint32_t sgb = code_bytes + 8 * sbytes + (dtype == NIB_DT_Q4A ? 8 : 0) + (fmin ? 32 : 0) +
                         (q4h ? 6 * (g / 16) : 0); /* 6 bits x 8 rows per sub-block of 16 */
    /* N-blocks in pairs, scale groups alternating; a last block alone */
    const uint32_t nb = r / 8, n_blocks = (rows + 7) / 8, nbb = (k_pad / g) * sgb;
    const int paired = (nb | 1) < n_blocks;
    const uint8_t *base =
        paired ? w + (uint64_t)(nb & ~1u) * nbb + (uint64_t)(k / g) * 2 * sgb + (nb & 1) * sgb
               : w + (uint64_t)nb * nbb + (uint64_t)(k / g) * sgb;
    /* q4h in a pair: both blocks' code chunks alternate (block 0's chunk c
     * at 64c, block 1's at 64c + 32), then block 0's fields, then block
     * 1's; `base` is then where the fields sit, minus code_bytes */
    const uint8_t *codes = base;
    uint32_t cstride = 32;
    if (q4h && paired) {
        const uint8_t *group = base - (nb & 1) * sgb;
        codes = group + (nb & 1) * 32;
        cstride = 64;
        base = group + 2 * code_bytes + (nb & 1) * (sgb - code_bytes) - code_bytes;
    }
    const uint32_t kk = k % g, rr = r % 8;
    int code;
    if (bits == 4) {
        uint8_t byte = codes[(kk / 8) * cstride + 4 * rr + kk % 4];
        code = kk % 8 >= 4 ? byte >> 4 : byte & 15;
    } else {
        code = (int8_t)base[(kk / 4) * 32 + 4 * rr + kk % 4];
    }
    float scale;
    if (sbytes == 2) {
        uint16_t h;
        memcpy(&h, base + code_bytes + 2 * rr, 2);
        scale = gguf_f16_to_f32(h); /* an independent f16 decoder */
        if (q4h) {                  /* field = low nibble | high pair << 4, minus 32 */
            const uint32_t i = kk / 16, ns = g / 16;
            const uint32_t lo =
                (uint32_t)base[code_bytes + 16 + 4 * i + rr / 2] >> (rr % 2 * 4) & 15;
            const uint32_t hi =
                (uint32_t)base[code_bytes + 16 + 4 * ns + 2 * i + rr / 4] >> (rr % 4 * 2) & 3;
            scale = (float)((int)(lo + 16 * hi) - 32) * scale;
        }
    } else {
        memcpy(&scale, base + code_bytes + 4 * rr, 4);
    }
    if (fmin) {
        float mn;
        memcpy(&mn, base + code_bytes + 32 + 4 * rr, 4);
        return fmaf(scale, (float)code, mn);
    }
    int zp = dtype == NIB_DT_Q4A ? base[code_bytes + 16 + rr] : bits == 4 ? 8 : 0;
    return (float)(code - zp) * scale;
}

/* The stored layout and whole N-blocks one after the other (how the
 * packer composes fused tensors) hold the same scale groups: unpairing
 * puts group j of block nb at nb x nblock_bytes + j x sgroup_bytes, in
 * place, pairing undoes it, for even and odd block counts and one group per
 * block (where the two layouts are the same bytes). */
START_TEST(test_pair_blocks)
{
    static const uint32_t shapes[][4] = {
        {NIB_DT_Q4, 32, 16, 96},  {NIB_DT_Q4, 64, 40, 128}, {NIB_DT_Q4F, 16, 9, 64},
        {NIB_DT_Q8C, 32, 24, 64}, {NIB_DT_Q4C, 0, 24, 64},  {NIB_DT_Q4A, 128, 8, 256},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        struct nib_qlayout l;
        ck_assert_int_eq(
            nib_qlayout_get(&l, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]), 0);
        uint8_t *st = malloc(l.size), *li = malloc(l.size), *scratch = malloc(2 * l.nblock_bytes);
        for (uint64_t b = 0; b < l.size; b++)
            st[b] = (uint8_t)(b * 2654435761u >> 11);
        memcpy(li, st, l.size);
        nib_ql_unpair_blocks(&l, li, scratch);
        for (uint32_t nb = 0; nb < l.n_pad / 8; nb++)
            for (uint32_t j = 0; j < l.n_sgroups; j++)
                ck_assert_msg(memcmp(li + nb * l.nblock_bytes + j * l.sgroup_bytes,
                                     st + nib_ql_sgroup_off(&l, nb, j), l.sgroup_bytes) == 0,
                              "shape %zu block %u group %u", i, nb, j);
        ck_assert_int_eq(memcmp(li, st, l.size) == 0, l.n_sgroups == 1 || l.n_pad == 8);
        nib_ql_pair_blocks(&l, li, scratch);
        ck_assert_int_eq(memcmp(li, st, l.size), 0);
        free(st);
        free(li);
        free(scratch);
    }
}
END_TEST

/* nib_qrow_f32 on random bytes (every code, scale and minimum bit
 * pattern), ranges of columns anywhere in the row: bitwise the documented
 * formula; and nib_dequantize_row is the same function. */
START_TEST(test_qrow_f32)
{
    static const uint32_t fmts[][2] = {
        {NIB_DT_Q4, 32},  {NIB_DT_Q4, 128}, {NIB_DT_Q4A, 64},  {NIB_DT_Q4C, 0},  {NIB_DT_Q8C, 0},
        {NIB_DT_Q8C, 32}, {NIB_DT_Q4F, 16}, {NIB_DT_Q4F, 32},  {NIB_DT_Q8F, 16}, {NIB_DT_Q8F, 32},
        {NIB_DT_Q4H, 32}, {NIB_DT_Q4H, 64}, {NIB_DT_Q4H, 128},
    };
    const int nf = (int)(sizeof fmts / sizeof fmts[0]);
    uint64_t s = 99;
    for (int it = 0; it < 20 * nf; it++) {
        uint32_t dt = fmts[it % nf][0], g = fmts[it % nf][1];
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t rows = 1 + (uint32_t)(s >> 40) % 20, cols = 1 + (uint32_t)(s >> 20) % 300;
        struct nib_qlayout l;
        ck_assert_int_eq(nib_qlayout_get(&l, dt, g, rows, cols), 0);
        uint8_t *w = malloc(l.size);
        for (uint64_t i = 0; i < l.size; i++)
            w[i] = (uint8_t)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 56);
        float *out = malloc(l.k_pad * sizeof *out), *all = malloc(cols * sizeof *all);
        for (uint32_t r = 0; r < rows; r++) {
            uint32_t c0 = (uint32_t)(s >> 13) % cols,
                     c1 = c0 + (uint32_t)(s >> 29) % (cols - c0 + 1);
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            nib_qrow_f32(&l, w, r, c0, c1, out);
            for (uint32_t k = c0; k < c1; k++) {
                float want = doc_weight(dt, g, rows, cols, w, r, k);
                CHECK(memcmp(&want, &out[k - c0], 4) == 0 || (isnan(want) && isnan(out[k - c0])),
                      "format %u/%u row %u col %u: %a, the documented formula gives %a", dt, g, r,
                      k, (double)out[k - c0], (double)want);
            }
            nib_dequantize_row(&l, w, r, all);
            nib_qrow_f32(&l, w, r, 0, cols, out);
            CHECK(memcmp(all, out, cols * sizeof *out) == 0, "dequantize_row != qrow_f32");
        }
        free(w), free(out), free(all);
    }
    /* extremes of q4f and q8f: codes 0/15 and -128/127, negative, huge,
     * tiny scales and minimums, against fmaf */
    struct nib_qlayout l;
    static const float params[] = {0.0f, -0.0f, 1.0f, -3.5f, 3e38f, -3e38f, 1e-45f, 1e-30f};
    static const int codes[2][2] = {{0, 15}, {-128, 127}};
    for (int q8 = 0; q8 < 2; q8++) {
        ck_assert_int_eq(nib_qlayout_get(&l, q8 ? NIB_DT_Q8F : NIB_DT_Q4F, 16, 8, 32), 0);
        uint8_t *w = calloc(l.size, 1);
        for (size_t a = 0; a < 8; a++)
            for (size_t b = 0; b < 8; b++)
                for (int ci = 0; ci < 2; ci++) {
                    float sc = params[a], mn = params[b], got;
                    memcpy(w + nib_ql_scale_off(&l, 3, 1), &sc, 4);
                    memcpy(w + nib_ql_min_off(&l, 3, 1), &mn, 4);
                    unsigned sh;
                    uint64_t off = nib_ql_code_off(&l, 3, 21, &sh);
                    w[off] = q8 ? (uint8_t)(int8_t)codes[1][ci] : (uint8_t)(codes[0][ci] << sh);
                    nib_qrow_f32(&l, w, 3, 21, 22, &got);
                    float want = fmaf(sc, (float)codes[q8][ci], mn);
                    CHECK(memcmp(&got, &want, 4) == 0, "q%df scale %g min %g code %d: %a, fmaf %a",
                          q8 ? 8 : 4, (double)sc, (double)mn, codes[q8][ci], (double)got,
                          (double)want);
                }
        free(w);
    }
}
END_TEST

START_TEST(test_f16)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = nib_f16_to_f32((uint16_t)h);
        float g = gguf_f16_to_f32((uint16_t)h); /* an independent decoder */
        CHECK(memcmp(&f, &g, 4) == 0 || (isnan(f) && isnan(g)), "half 0x%04x: %g vs %g", h,
              (double)f, (double)g);
        if (isnan(f))
            CHECK(isnan(nib_f16_to_f32(nib_f32_to_f16(f))), "NaN 0x%04x lost", h);
        else
            CHECK(nib_f32_to_f16(f) == h, "half 0x%04x does not round-trip", h);
    }
    ck_assert_uint_eq(nib_f32_to_f16(65520.0f), 0x7c00); /* rounds to inf */
    ck_assert_uint_eq(nib_f32_to_f16(65519.0f), 0x7bff);
    ck_assert_uint_eq(nib_f32_to_f16(0x1p-25f), 0); /* tie to even: 0 */
    ck_assert_uint_eq(nib_f32_to_f16(0x1.8p-25f), 1);
#if defined(__F16C__)
    /* round to nearest even, as the hardware does, on many floats */
    uint64_t s = 42;
    for (int i = 0; i < 200000; i++) {
        float f = tu_random_f32_bits(&s);
        if (isnan(f))
            continue;
        CHECK(nib_f32_to_f16(f) == _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT),
              "%a: 0x%04x, F16C gives 0x%04x", (double)f, nib_f32_to_f16(f),
              _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
    }
#endif
}
END_TEST

/* ---- activation quantizer ---- */

START_TEST(test_qact_contract)
{
    static const uint32_t blocks[] = {0, 32, 64, 128, 16};
    uint64_t s = 7;
    for (int it = 0; it < 200; it++) {
        uint32_t k =
            it < 4 ? 172 : 1 + (uint32_t)((s = s * 6364136223846793005ull + 1) >> 33) % 300;
        uint32_t block = blocks[it % 5];
        size_t fp = nib_qact_footprint(1, k, block);
        ck_assert_uint_gt(fp, 0);
        void *mem = aligned_alloc(64, (fp + 63) & ~(size_t)63);
        memset(mem, 0x7f, fp);
        struct nib_qact a;
        ck_assert_int_eq(nib_qact_init(&a, mem, 1, k, block), 0);
        ck_assert_uint_eq(a.k_pad % 32, 0);
        ck_assert_uint_eq(a.n_blocks * a.block, a.k_pad);
        float *x = malloc(k * sizeof *x);
        for (uint32_t i = 0; i < k; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((int32_t)(s >> 32)) / 2147483648.0f * (1 + (i % 7) * 3.0f);
        }
        if (it % 5 == 0)
            for (uint32_t i = 0; i < k && i < 40; i++)
                x[i] = 0.0f; /* an all-zero block */
        nib_qact_s8_f32_scalar(&a, 0, x);
        for (uint32_t b = 0; b < a.n_blocks; b++) {
            float amax = 0;
            int32_t sum = 0;
            for (uint32_t i = b * a.block; i < (b + 1) * a.block; i++) {
                CHECK(a.q[i] >= -127, "q[%u] = -128 (the q8 kernels rely on never seeing it)", i);
                if (i >= k) {
                    CHECK(a.q[i] == 0, "padding q[%u] = %d", i, a.q[i]);
                    continue;
                }
                amax = fmaxf(amax, fabsf(x[i]));
                sum += a.q[i];
            }
            CHECK(a.sum[b] == sum, "block %u sum %d, expected %d", b, a.sum[b], sum);
            CHECK(a.scale[b] == amax / 127.0f, "block %u scale %g, expected %g", b,
                  (double)a.scale[b], (double)(amax / 127.0f));
            for (uint32_t i = b * a.block; i < (b + 1) * a.block && i < k; i++) {
                float err = fabsf(x[i] - a.q[i] * a.scale[b]);
                CHECK(err <= 0.5001f * a.scale[b], "x=%g q=%d scale=%g", (double)x[i], a.q[i],
                      (double)a.scale[b]);
                if (fabsf(x[i]) == amax && amax > 0) /* the extreme maps to +-127 */
                    CHECK(abs(a.q[i]) == 127, "extreme %g became %d", (double)x[i], a.q[i]);
            }
        }
        free(x);
        free(mem);
    }
    /* invalid parameters */
    struct nib_qact a;
    ck_assert_uint_eq(nib_qact_footprint(1, 0, 32), 0);
    ck_assert_uint_eq(nib_qact_footprint(1, 64, 48), 0);
    ck_assert_uint_eq(nib_qact_footprint(0, 64, 32), 0);
    static _Alignas(64) uint8_t buf[1024];
    ck_assert_int_eq(nib_qact_init(&a, buf + 1, 1, 64, 32), -1);
    ck_assert_int_eq(nib_qact_init(&a, buf, 1, 64, 32), 0);
    ck_assert_uint_eq(nib_qact_footprint(1, 64, 8), 0);
    /* blocks of 16 pad K to 32, as the weights do */
    ck_assert_int_eq(nib_qact_init(&a, buf, 2, 40, 16), 0);
    ck_assert_uint_eq(a.k_pad, 64);
    ck_assert_uint_eq(a.n_blocks, 4);
    ck_assert_uint_eq(a.block, 16);
    struct nib_qlayout l;
    ck_assert_int_eq(nib_qlayout_get(&l, NIB_DT_Q4F, 16, 8, 40), 0);
    ck_assert(nib_qact_fits(&a, &l));
    /* a view of a block wholly in the padding quantizes to zeros */
    struct nib_qact v = nib_qact_blocks(&a, 1, 3, 4);
    ck_assert_uint_eq(v.k, 0);
    memset(a.q, 0x55, 128);
    a.scale[7] = 1.0f, a.sum[7] = 5;
    float none[1] = {0};
    nib_qact_s8_f32_scalar(&v, 0, none);
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(a.q[64 + 48 + i], 0);
    ck_assert(a.scale[7] == 0.0f && a.sum[7] == 0);
    ck_assert_int_eq(a.q[64 + 47], 0x55); /* the block before is not touched */
    /* the view that reaches the last input takes the padding block along */
    v = nib_qact_blocks(&a, 0, 2, 3);
    ck_assert_uint_eq(v.n_blocks, 2);
    ck_assert_uint_eq(v.k, 8);
    float eight[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    a.scale[3] = 1.0f, a.sum[3] = 5;
    nib_qact_s8_f32_scalar(&v, 0, eight);
    ck_assert_int_eq(a.q[32], 16); /* 1 * 127 / 8, rounded */
    ck_assert_int_eq(a.q[39], -127);
    for (int i = 40; i < 64; i++)
        ck_assert_int_eq(a.q[i], 0);
    ck_assert(a.scale[3] == 0.0f && a.sum[3] == 0);
    ck_assert_int_eq(a.q[31], 0x55);
}
END_TEST

START_TEST(test_qact_simd)
{
    const struct nib_qkernels *v = simd();
    if (!v)
        return;
    for (uint64_t seed = 1; seed <= 3; seed++)
        ck_assert_msg(qcheck_qact(scalar(), v, seed, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

/* ---- GEMM / GEMV ---- */

START_TEST(test_gemm_simd_equals_scalar)
{
    const struct nib_qkernels *v = simd();
    if (!v)
        return;
    for (uint64_t seed = 1; seed <= 3; seed++)
        ck_assert_msg(qcheck_gemm(scalar(), v, seed, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

/* The AVX2 table's q4 and q4h GEMMs run 512-bit VNNI kernels where the CPU has
 * AVX-512 VNNI: each variant is checked by itself, in a copy of the table
 * that holds it, against the scalar reference (bits, worst-case
 * magnitudes, GEMM = GEMVs, double precision); and NIB_AVX512=0's switch
 * turns the 512-bit choice off and back on. */
START_TEST(test_gemm_q4_avx512)
{
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    const int cpu = nib_avx512vnni_available();
    nib_avx512vnni_allow(0);
    ck_assert_int_eq(nib_avx512vnni_available(), 0);
    nib_avx512vnni_allow(1);
    ck_assert_int_eq(nib_avx512vnni_available(), cpu);
    struct nib_qkernels t = *nib_qkernels_get(NIB_ISA_AVX2);
    const nib_qgemm_fn variants[] = {nib_gemm_f32_q4s8_n8_avx2plain,
                                     nib_gemm_f32_q4s8_n16_avx512vnni};
    const nib_qgemm_fn q4h[] = {nib_gemm_f32_q4hs8_n8_avx2plain, nib_gemm_f32_q4hs8_n16_avx512vnni};
    for (int i = 0; i < (cpu ? 2 : 1); i++) {
        t.gemm[NIB_DT_Q4] = variants[i];
        t.gemm[NIB_DT_Q4H] = q4h[i];
        for (uint64_t seed = 1; seed <= 3; seed++)
            ck_assert_msg(qcheck_gemm(scalar(), &t, seed, msg, sizeof msg) == 0, "%d: %s", i, msg);
        ck_assert_msg(qcheck_worst_case(&t, msg, sizeof msg) == 0, "%d: %s", i, msg);
        ck_assert_msg(qcheck_gemm_vs_gemv(&t, 5, msg, sizeof msg) == 0, "%d: %s", i, msg);
        ck_assert_msg(qcheck_vs_double(&t, 5, msg, sizeof msg) == 0, "%d: %s", i, msg);
    }
    if (!cpu)
        fprintf(stderr, "qkernels: this CPU has no AVX-512 VNNI: the 512-bit q4 GEMM was not "
                        "run (the AVX2 one was)\n");
#else
    printf("SKIP: not an AVX2 build: no AVX-512 q4 GEMM to check\n");
#endif
}
END_TEST

/* The prefetch distance is the machine's tuning: any valid one gives the
 * same bits, and a bad one is refused without changing the current one. */
START_TEST(test_prefetch_distance)
{
    const uint32_t before = nib_prefetch_bytes;
    ck_assert_int_eq(nib_prefetch_set(100), -1);
    ck_assert_int_eq(nib_prefetch_set(NIB_PREFETCH_MAX + 64), -1);
    ck_assert_uint_eq(nib_prefetch_bytes, before);
    const struct nib_qkernels *v = simd();
    const uint32_t dist[] = {0, 64, 8192, NIB_PREFETCH_MAX};
    for (size_t i = 0; i < sizeof dist / sizeof dist[0]; i++) {
        ck_assert_int_eq(nib_prefetch_set(dist[i]), 0);
        ck_assert_uint_eq(nib_prefetch_bytes, dist[i]);
        if (v)
            ck_assert_msg(qcheck_gemm(scalar(), v, 7, msg, sizeof msg) == 0, "prefetch %u: %s",
                          dist[i], msg);
    }
    ck_assert_int_eq(nib_prefetch_set(before), 0);
}
END_TEST

START_TEST(test_f32_ops_simd_equals_scalar)
{
    ck_assert_msg(qcheck_f32_ops(scalar(), scalar(), 1, msg, sizeof msg) == 0, "%s", msg);
    const struct nib_qkernels *v = simd();
    if (!v)
        return;
    for (uint64_t seed = 2; seed <= 4; seed++)
        ck_assert_msg(qcheck_f32_ops(scalar(), v, seed, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

START_TEST(test_qact_by_blocks)
{
    ck_assert_msg(qcheck_qact_blocks(scalar(), 1, msg, sizeof msg) == 0, "%s", msg);
    const struct nib_qkernels *v = simd();
    if (v)
        ck_assert_msg(qcheck_qact_blocks(v, 2, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

typedef int (*attention_check_fn)(const struct nib_qkernels *ref, const struct nib_qkernels *var,
                                  uint64_t seed, char *msg, size_t len);

/* The SIMD table's attention against the scalar reference (seeds 2..4):
 * with its 512-bit steps where the CPU has AVX-512, then the AVX2 kernel
 * alone (nib_avx512vnni_allow). */
static void attention_both_widths(attention_check_fn check)
{
    const struct nib_qkernels *v = simd();
    if (!v)
        return;
    if (!nib_avx512vnni_available())
        fprintf(stderr, "qkernels: this CPU has no AVX-512: the 512-bit attention steps were not "
                        "checked\n");
    for (int wide = 1; wide >= 0; wide--) {
        nib_avx512vnni_allow(wide);
        for (uint64_t seed = 2; seed <= 4; seed++)
            ck_assert_msg(check(scalar(), v, seed, msg, sizeof msg) == 0, "512-bit steps %s: %s",
                          wide ? "allowed" : "off", msg);
    }
    nib_avx512vnni_allow(1);
}

START_TEST(test_attention_simd_equals_scalar)
{
    /* The scalar reference against double precision (and itself) always. */
    ck_assert_msg(qcheck_attention(scalar(), scalar(), 1, msg, sizeof msg) == 0, "%s", msg);
    attention_both_widths(qcheck_attention);
}
END_TEST

START_TEST(test_tanh)
{
    ck_assert_msg(qcheck_tanh(msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

START_TEST(test_gelu_mul_simd_equals_scalar)
{
    ck_assert_msg(qcheck_gelu_mul(scalar(), scalar(), 1, msg, sizeof msg) == 0, "%s", msg);
    const struct nib_qkernels *v = simd();
    if (!v)
        return;
    for (uint64_t seed = 2; seed <= 4; seed++)
        ck_assert_msg(qcheck_gelu_mul(scalar(), v, seed, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

START_TEST(test_attention_window_softcap)
{
    ck_assert_msg(qcheck_attention_window(scalar(), scalar(), 1, msg, sizeof msg) == 0, "%s", msg);
    attention_both_widths(qcheck_attention_window);
}
END_TEST

START_TEST(test_gemm_equals_gemvs)
{
    ck_assert_msg(qcheck_gemm_vs_gemv(scalar(), 5, msg, sizeof msg) == 0, "%s", msg);
    const struct nib_qkernels *v = simd();
    if (v)
        ck_assert_msg(qcheck_gemm_vs_gemv(v, 6, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

START_TEST(test_gemv_vs_double)
{
    ck_assert_msg(qcheck_vs_double(scalar(), 8, msg, sizeof msg) == 0, "%s", msg);
    const struct nib_qkernels *v = simd();
    if (v)
        ck_assert_msg(qcheck_vs_double(v, 9, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

/* The AVX2 kernels add 8 vpmaddubsw results (4 chunks) into each int16
 * lane before widening. Each is at most 2 * 15 * 128 = 3840 in magnitude:
 * 8 fit (30720 <= 32767), 9 would not (34560) - so 8 is the deepest safe
 * depth, and the kernels, fed the worst case, must give the exact sum. */
START_TEST(test_int16_headroom)
{
    const int lane_max = 2 * 15 * 128, depth = 8;
    ck_assert_int_le(depth * lane_max, 32767);
    ck_assert_int_gt((depth + 1) * lane_max, 32767);
    int16_t wrapped = (int16_t)(uint16_t)(-(depth + 1) * lane_max & 0xffff);
    ck_assert_int_ne(wrapped, -(depth + 1) * lane_max); /* one more would wrap */
    /* q8: one vpmaddubsw lane of |w| <= 128 times |a| <= 127 */
    ck_assert_int_le(2 * 128 * 127, 32767);
    ck_assert_int_gt(2 * 2 * 128 * 127, 32767); /* so it is widened at once */
    ck_assert_msg(qcheck_worst_case(scalar(), msg, sizeof msg) == 0, "%s", msg);
    const struct nib_qkernels *v = simd();
    if (v)
        ck_assert_msg(qcheck_worst_case(v, msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

START_TEST(test_dispatch)
{
    const struct nib_qkernels *k = scalar();
    ck_assert_ptr_nonnull(k);
    ck_assert_ptr_null(k->gemm[NIB_DT_F32]);
    for (uint32_t d = NIB_DT_Q4; d < NIB_DT_COUNT; d++)
        ck_assert_ptr_nonnull(k->gemm[d]);
    /* no table of its own: the AVX2 table's q4 GEMM takes it (test_gemm_q4_avx512) */
    ck_assert_ptr_null(nib_qkernels_get(NIB_ISA_AVX512VNNI));
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    ck_assert_ptr_nonnull(nib_qkernels_get(NIB_ISA_AVX2));
#endif
    /* every table (generated from one list) has every kernel */
    static const uint32_t isas[] = {NIB_ISA_SCALAR, NIB_ISA_AVX2, NIB_ISA_NEON_DOT};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const struct nib_qkernels *t = nib_qkernels_get(isas[i]);
        if (!t)
            continue;
        ck_assert_uint_eq(t->isa, isas[i]);
        ck_assert(t->name && t->qact && t->attention && t->rmsnorm && t->rope_rows && t->silu_mul &&
                  t->gemv_f32);
        ck_assert_ptr_nonnull(t->gelu_mul);
        for (uint32_t d = NIB_DT_Q4; d < NIB_DT_COUNT; d++)
            ck_assert_ptr_nonnull(t->gemm[d]);
    }
}
END_TEST

/* Preconditions are asserted at kernel entry (kernels/common/pre.h): a
 * GEMM handed weights of another format aborts instead of reading them
 * wrongly, in every variant (Check runs each in a forked child). Release
 * builds (NDEBUG) compile the asserts out: the test raises the signal itself. */
static void precondition_abort(const struct nib_qkernels *kt)
{
    struct nib_qlayout l;
    nib_qlayout_get(&l, NIB_DT_Q4, 32, 8, 64);
    static _Alignas(64) uint8_t mem[4096], w[4096];
    struct nib_qact a;
    nib_qact_init(&a, mem, 1, 64, 32);
    float y[8];
    kt->gemm[NIB_DT_Q8C](&l, w, &a, 1, y, 0, NULL, 0, 0, 8); /* q4 weights, q8c kernel */
}

START_TEST(test_precondition_asserts)
{
#ifndef NDEBUG
    const struct nib_qkernels *kt = _i == 0 ? scalar() : simd();
    if (!kt)
        abort(); /* no SIMD variant here: the signal the test expects */
    precondition_abort(kt);
#else
    (void)precondition_abort;
    raise(SIGABRT);
#endif
}
END_TEST

/* ---- weight quantizers ---- */

static float *gaussianish(uint32_t n, uint64_t seed, float scale)
{
    float *w = malloc(n * sizeof *w);
    for (uint32_t i = 0; i < n; i++) {
        float v = 0;
        for (int j = 0; j < 4; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            v += (float)((int32_t)(seed >> 32)) / 2147483648.0f;
        }
        w[i] = v * scale * (i % 53 == 0 ? 4.0f : 1.0f); /* a few outliers */
    }
    return w;
}

/* Q4_0's own choice for one group: d = m / -8 (m the largest-magnitude
 * value), rounded to f16, codes clamped to -8..7. Its squared error. */
/* Plain min/max for w = fmaf(s, code, m), code lo..hi: s = range /
 * (hi - lo), the minimum on code lo (Q4_1's choice, with f32 s and m). */
static double minmax_sse(const float *x, uint32_t n, int lo, int hi)
{
    float mn = x[0], mx = x[0];
    for (uint32_t i = 1; i < n; i++)
        mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
    float s = (mx - mn) / (float)(hi - lo), m = mn - (float)lo * s;
    double sse = 0;
    for (uint32_t i = 0; i < n; i++) {
        float q = s != 0.0f ? rintf((x[i] - m) / s) : 0.0f;
        q = q < (float)lo ? (float)lo : q > (float)hi ? (float)hi : q;
        double e = (double)x[i] - fmaf(s, q, m);
        sse += e * e;
    }
    return sse;
}

static double q4_0_sse(const float *x, uint32_t n)
{
    float m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (fabsf(x[i]) > fabsf(m))
            m = x[i];
    float d = nib_f16_to_f32(nib_f32_to_f16(m / -8.0f));
    double sse = 0;
    for (uint32_t i = 0; i < n; i++) {
        long q = d != 0 ? lrintf(x[i] / d) : 0;
        q = q < -8 ? -8 : q > 7 ? 7 : q;
        double e = (double)x[i] - (double)d * q;
        sse += e * e;
    }
    return sse;
}

START_TEST(test_quantize_error)
{
    static const struct {
        const char *spec;
        double max_rel_rmse;
    } cases[] = {
        /* measured: 0.107 0.131 0.152 0.085 0.120 0.173 0.0114 0.0067,
         * q4f 0.078 0.059, q8f 0.0046 0.0036 */
        {"q4", 0.12},      {"q4/64", 0.15},  {"q4/128", 0.17}, {"q4a", 0.10},
        {"q4a/128", 0.14}, {"q4c", 0.20},    {"q8c", 0.013},   {"q8c/32", 0.008},
        {"q4f", 0.09},     {"q4f/16", 0.07}, {"q8f", 0.006},   {"q8f/16", 0.005},
    };
    const uint32_t rows = 19, cols = 172;
    float *w = gaussianish(rows * cols, 3, 0.02f), *back = malloc(cols * sizeof *back);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct nib_qspec spec;
        char err[256];
        ck_assert_int_eq(nib_qspec_parse(cases[c].spec, &spec, err, sizeof err), 0);
        struct nib_qlayout l;
        ck_assert_int_eq(nib_qlayout_get(&l, spec.dtype, spec.group, rows, cols), 0);
        uint8_t *p = malloc(l.size);
        ck_assert_int_eq(nib_quantize_f32(spec, rows, cols, w, p, err, sizeof err), 0);
        double se = 0, ss = 0;
        for (uint32_t r = 0; r < rows; r++) {
            nib_dequantize_row(&l, p, r, back);
            for (uint32_t j = 0; j * l.gsize < cols; j++) { /* groups of padding only: below */
                uint32_t k0 = j * l.gsize, n = cols - k0 < l.gsize ? cols - k0 : l.gsize;
                const float *x = w + r * cols + k0;
                double gse = 0;
                float amax = 0;
                for (uint32_t i = 0; i < n; i++)
                    amax = fmaxf(amax, fabsf(x[i]));
                for (uint32_t i = 0; i < n; i++) {
                    double e = (double)x[i] - back[k0 + i];
                    gse += e * e;
                    /* no weight is off by more than 1/5 of its group's range... */
                    CHECK(fabs(e) <= 0.2 * amax + 1e-12 || fabs(e) <= 0.2 * fabsf(x[i]),
                          "%s row %u col %u: %g -> %g", cases[c].spec, r, k0 + i, (double)x[i],
                          (double)back[k0 + i]);
                    ss += (double)x[i] * x[i];
                }
                se += gse;
                /* ...and symmetric 4-bit is never worse than Q4_0's choice */
                if (spec.dtype == NIB_DT_Q4 && spec.group == 32)
                    CHECK(gse <= q4_0_sse(x, n) * (1 + 1e-9), "row %u group %u: %g > Q4_0 %g", r, j,
                          gse, q4_0_sse(x, n));
                /* ...and q4f/q8f never worse than plain min/max (Q4_1's choice) */
                if (l.has_min) {
                    int lo = l.code_bits == 8 ? -128 : 0, hi = l.code_bits == 8 ? 127 : 15;
                    CHECK(gse <= minmax_sse(x, n, lo, hi) * (1 + 1e-6),
                          "%s row %u group %u: %g > min/max %g", cases[c].spec, r, j, gse,
                          minmax_sse(x, n, lo, hi));
                }
            }
        }
        double rel = sqrt(se / ss);
        printf("quantize %-8s relative rms error %.4f\n", cases[c].spec, rel);
        ck_assert_msg(rel < cases[c].max_rel_rmse, "%s: relative rms error %.4f >= %.4f",
                      cases[c].spec, rel, cases[c].max_rel_rmse);
        /* padding: codes past K and rows past N are the format's zero (q4f,
         * q8f: code 0, and scale and minimum 0 in groups of padding only) */
        float *pad = malloc(l.k_pad * sizeof *pad);
        struct nib_qlayout lp = l;
        lp.cols = l.k_pad; /* dequantize the padded columns too */
        for (uint32_t r = 0; r < l.n_pad; r++) {
            nib_dequantize_row(&lp, p, r, pad);
            for (uint32_t k = r < rows ? cols : 0; k < l.k_pad; k++) {
                unsigned sh;
                uint64_t off = nib_ql_code_off(&l, r, k, &sh);
                int code = (p[off] >> sh) & (l.code_bits == 8 ? 0xff : 0xf);
                if (l.has_min && r < rows && k / l.gsize * l.gsize < cols)
                    CHECK(code == 0, "%s: padding code at row %u col %u is %d", cases[c].spec, r, k,
                          code);
                else
                    CHECK(pad[k] == 0.0f, "%s: padding at row %u col %u is %g", cases[c].spec, r, k,
                          (double)pad[k]);
            }
        }
        free(pad);
        free(p);
    }
    free(w);
    free(back);
}
END_TEST

/* End to end: quantized weights x quantized activations through each
 * kernel stay close to the f32 matmul. */
START_TEST(test_quantized_gemv_close_to_f32)
{
    static const char *specs[] = {"q4",     "q4/128", "q4a/64", "q4c", "q8c",
                                  "q8c/32", "q4f",    "q4f/16", "q8f", "q8f/16"};
    const uint32_t rows = 37, cols = 172;
    float *w = gaussianish(rows * cols, 11, 0.05f), *x = gaussianish(cols, 12, 1.0f);
    float yf[37], yq[37];
    nib_gemv_f32_scalar(w, x, yf, NULL, 0, rows, cols);
    double ref = 0;
    for (uint32_t r = 0; r < rows; r++)
        ref += (double)yf[r] * yf[r];
    ref = sqrt(ref / rows);
    for (size_t c = 0; c < sizeof specs / sizeof specs[0]; c++) {
        struct nib_qspec spec;
        char err[256];
        ck_assert_int_eq(nib_qspec_parse(specs[c], &spec, err, sizeof err), 0);
        struct nib_qlayout l;
        nib_qlayout_get(&l, spec.dtype, spec.group, rows, cols);
        uint8_t *p = malloc(l.size);
        ck_assert_int_eq(nib_quantize_f32(spec, rows, cols, w, p, err, sizeof err), 0);
        struct nib_qact a;
        uint32_t block = nib_qformat_act_block(spec.dtype, spec.group);
        void *mem = aligned_alloc(64, (nib_qact_footprint(1, cols, block) + 63) & ~(size_t)63);
        ck_assert_int_eq(nib_qact_init(&a, mem, 1, cols, block), 0);
        ck_assert(nib_qact_fits(&a, &l));
        nib_qact_s8_f32_scalar(&a, 0, x);
        nib_qgemv(scalar(), &l, p, &a, yq, NULL, 0, rows);
        double e = 0;
        for (uint32_t r = 0; r < rows; r++)
            e += ((double)yq[r] - yf[r]) * ((double)yq[r] - yf[r]);
        e = sqrt(e / rows) / ref;
        printf("gemv %-7s vs f32: relative rms error %.4f\n", specs[c], e);
        ck_assert_msg(e < (l.code_bits == 8 ? 0.02 : 0.15), "%s: relative error %.4f", specs[c], e);
        free(mem);
        free(p);
    }
    free(w);
    free(x);
}
END_TEST

START_TEST(test_quantize_rejects)
{
    struct nib_qspec spec;
    char err[256];
    ck_assert_int_eq(nib_qspec_parse("q4/48", &spec, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "group"));
    ck_assert_int_eq(nib_qspec_parse("q5", &spec, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "unknown format"));
    ck_assert_int_eq(nib_qspec_parse("q4c/32", &spec, err, sizeof err), -1);
    ck_assert_int_eq(nib_qspec_parse("q4/", &spec, err, sizeof err), -1);
    ck_assert_int_eq(nib_qspec_parse("q8c/64", &spec, err, sizeof err), 0);
    ck_assert_uint_eq(spec.dtype, NIB_DT_Q8C);
    ck_assert_uint_eq(spec.group, 64);
    char b[16];
    ck_assert_str_eq(nib_qspec_str(spec, b, sizeof b), "q8c/64");
    static const struct {
        const char *s;
        uint32_t dtype, group;
    } fs[] = {{"q4f", NIB_DT_Q4F, 32}, {"q4f/16", NIB_DT_Q4F, 16}, {"q4f/32", NIB_DT_Q4F, 32},
              {"q8f", NIB_DT_Q8F, 32}, {"q8f/16", NIB_DT_Q8F, 16}, {"q8f/32", NIB_DT_Q8F, 32}};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        ck_assert_int_eq(nib_qspec_parse(fs[i].s, &spec, err, sizeof err), 0);
        ck_assert_uint_eq(spec.dtype, fs[i].dtype);
        ck_assert_uint_eq(spec.group, fs[i].group);
        ck_assert_ptr_nonnull(
            strstr(nib_qspec_str(spec, b, sizeof b), fs[i].s[1] == '4' ? "q4f/" : "q8f/"));
    }
    ck_assert_int_eq(nib_qspec_parse("q4f/64", &spec, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "16 or 32") != NULL, "%s", err);
    ck_assert_int_eq(nib_qspec_parse("q8f/0", &spec, err, sizeof err), -1);
    ck_assert_int_eq(nib_qspec_parse("q4/16", &spec, err, sizeof err), -1);
    float w[64] = {0};
    uint8_t out[1024];
    w[5] = NAN;
    ck_assert_int_eq(nib_qspec_parse("q4", &spec, err, sizeof err), 0);
    ck_assert_int_eq(nib_quantize_f32(spec, 1, 64, w, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "not a finite number") != NULL, "%s", err);
    w[5] = 1e9f; /* scale 1.25e8 does not fit f16 */
    ck_assert_int_eq(nib_quantize_f32(spec, 1, 64, w, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "f16") != NULL, "%s", err);
    spec.dtype = NIB_DT_Q4C, spec.group = 0; /* f32 scale: fine */
    ck_assert_int_eq(nib_quantize_f32(spec, 1, 64, w, out, err, sizeof err), 0);
    /* q4f/q8f: f32 scale and minimum hold +-1e38, not a range beyond a
     * float; constant groups are exact */
    struct nib_qlayout l;
    float back[64];
    for (int q8 = 0; q8 < 2; q8++) {
        spec = (struct nib_qspec){q8 ? NIB_DT_Q8F : NIB_DT_Q4F, 16};
        ck_assert_int_eq(nib_qlayout_get(&l, spec.dtype, spec.group, 1, 64), 0);
        ck_assert_uint_le(l.size, sizeof out);
        memset(w, 0, sizeof w);
        w[0] = 1e38f, w[1] = -1e38f, w[20] = 7.0f; /* group 1 constant 0 but one 7 */
        for (int i = 32; i < 48; i++)
            w[i] = -2.5f; /* a constant group: exact */
        ck_assert_msg(nib_quantize_f32(spec, 1, 64, w, out, err, sizeof err) == 0, "%s", err);
        nib_dequantize_row(&l, out, 0, back);
        for (int i = 0; i < 2; i++) /* within one step of the 2e38 range */
            ck_assert_msg(fabs((double)back[i] - w[i]) <= 2e38 / 15, "q%df: %g became %g",
                          q8 ? 8 : 4, (double)w[i], (double)back[i]);
        ck_assert(back[20] == 7.0f && back[21] == 0.0f);
        for (int i = 32; i < 48; i++)
            ck_assert(back[i] == -2.5f);
        w[1] = -3e38f, w[0] = 3e38f;
        ck_assert_int_eq(nib_quantize_f32(spec, 1, 64, w, out, err, sizeof err), -1);
        ck_assert_msg(strstr(err, "float's range") != NULL, "%s", err);
    }
}
END_TEST

/* ---- exact repacking of the real models ---- */

static void check_repack(const char *file, uint32_t want_type, int want_tensors)
{
    const char *dir = getenv("NIB_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", dir ? dir : "../shared", file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("SKIP: %s not found; the exact-repack check for it did not run\n", path);
        return;
    }
    fclose(f);
    size_t size;
    uint8_t *buf = tu_read_file(path, &size);
    struct gguf_file g;
    struct llama_model m;
    char err[512];
    ck_assert_msg(gguf_open(&g, buf, size, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(llama_import(&m, &g, err, sizeof err) == 0, "%s", err);
    const struct nib_qkernels *kt = simd() ? simd() : scalar();
    int n = 0;
    for (uint32_t li = 0; li <= m.hp.n_layers; li++) {
        const struct llama_layer *L = li < m.hp.n_layers ? &m.layers[li] : NULL;
        const struct llama_weight *ws[] = {
            L ? &L->wq : &m.tok_embd, L ? &L->wk : (m.output_tied ? NULL : &m.output),
            L ? &L->wv : NULL,        L ? &L->wo : NULL,
            L ? &L->w_gate : NULL,    L ? &L->w_up : NULL,
            L ? &L->w_down : NULL};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            const struct llama_weight *w = ws[i];
            if (!w || !w->t || w->t->type != want_type)
                continue;
            struct nib_qspec spec;
            ck_assert_int_eq(nib_repack_spec(w->t->type, &spec), 0);
            struct nib_qlayout l;
            ck_assert_int_eq(nib_qlayout_get(&l, spec.dtype, spec.group, w->rows, w->cols), 0);
            uint8_t *p = malloc(l.size);
            ck_assert_msg(nib_repack_gguf(w, p, err, sizeof err) == 0, "%s", err);
            float *src = malloc(w->cols * sizeof *src), *dst = malloc(w->cols * sizeof *dst);
            for (uint32_t r = 0; r < w->rows; r++) {
                CHECK(llama_weight_row_f32(w, r, src) == 0, "row %u unreadable", r);
                nib_dequantize_row(&l, p, r, dst);
                for (uint32_t k = 0; k < w->cols; k++)
                    CHECK(memcmp(&src[k], &dst[k], 4) == 0,
                          "%.*s row %u col %u: %.9g repacked as %.9g", (int)w->t->name.len,
                          w->t->name.ptr, r, k, (double)src[k], (double)dst[k]);
            }
            /* and the kernel on the repacked weights matches the f32 matmul */
            float *x = gaussianish(w->cols, (uint64_t)n + 100, 1.0f), *yf = malloc(w->rows * 4),
                  *yq = malloc(w->rows * 4);
            float *wf = malloc((size_t)w->rows * w->cols * 4);
            for (uint32_t r = 0; r < w->rows; r++)
                nib_dequantize_row(&l, p, r, wf + (size_t)r * w->cols);
            nib_gemv_f32_scalar(wf, x, yf, NULL, 0, w->rows, w->cols);
            struct nib_qact a;
            void *mem = aligned_alloc(64, (nib_qact_footprint(1, w->cols, 32) + 63) & ~(size_t)63);
            ck_assert_int_eq(nib_qact_init(&a, mem, 1, w->cols, 32), 0);
            kt->qact(&a, 0, x);
            nib_qgemv(kt, &l, p, &a, yq, NULL, 0, w->rows);
            double e = 0, s = 0;
            for (uint32_t r = 0; r < w->rows; r++) {
                e += ((double)yq[r] - yf[r]) * ((double)yq[r] - yf[r]);
                s += (double)yf[r] * yf[r];
            }
            ck_assert_msg(sqrt(e / s) < 0.02, "%.*s: kernel vs f32 relative error %g",
                          (int)w->t->name.len, w->t->name.ptr, sqrt(e / s));
            free(x), free(yf), free(yq), free(wf), free(mem);
            free(src), free(dst), free(p);
            n++;
        }
    }
    printf("%s: %d %s tensors repacked exactly\n", file, n, ggml_type_name(want_type));
    ck_assert_int_eq(n, want_tensors);
    llama_model_free(&m);
    gguf_close(&g);
    free(buf);
}

START_TEST(test_repack_q4_0)
{
    /* 5 layers x (q, k, v, o, gate, up) + token_embd + output; ffn_down is F16 */
    check_repack("stories260K-q4_0.gguf", GGML_TYPE_Q4_0, 32);
}
END_TEST

START_TEST(test_repack_q8_0)
{
    /* 2 layers x 7 + token_embd (tied output) */
    check_repack("TinyStories-656K-Q8_0.gguf", GGML_TYPE_Q8_0, 15);
}
END_TEST

START_TEST(test_repack_rejects)
{
    struct nib_qspec spec;
    ck_assert_int_eq(nib_repack_spec(GGML_TYPE_F16, &spec), -1);
    struct gguf_tensor t = {.name = {3, "w.0"}, .type = GGML_TYPE_F32, .nbytes = 64};
    struct llama_weight w = {.t = &t, .rows = 4, .cols = 4};
    char err[256];
    uint8_t out[1024];
    ck_assert_int_eq(nib_repack_gguf(&w, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "Q4_0") != NULL, "%s", err);
    t.type = GGML_TYPE_Q8_0; /* 8 rows of 32 need 8 * 34 bytes */
    w.rows = 8, w.cols = 32, t.nbytes = 100;
    ck_assert_int_eq(nib_repack_gguf(&w, out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "does not fit") != NULL, "%s", err);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("qkernels");
    TU_CASE(s, "format", NULL, NULL, 60, test_format_validity, test_format_sizes, test_pair_blocks,
            test_f16, test_qrow_f32);
    TU_CASE(s, "kernels", NULL, NULL, 120, test_qact_contract, test_qact_simd,
            test_gemm_simd_equals_scalar, test_gemm_q4_avx512, test_prefetch_distance,
            test_gemm_equals_gemvs, test_attention_simd_equals_scalar, test_qact_by_blocks,
            test_f32_ops_simd_equals_scalar, test_gemv_vs_double, test_int16_headroom,
            test_dispatch);
    TU_CASE(s, "ops", NULL, NULL, 120, test_tanh, test_gelu_mul_simd_equals_scalar,
            test_attention_window_softcap);
    TCase *pre = tcase_create("preconditions");
    tcase_add_loop_test_raise_signal(pre, test_precondition_asserts, SIGABRT, 0, 2);
    suite_add_tcase(s, pre);
    TU_CASE(s, "quant", NULL, NULL, 120, test_quantize_error, test_quantized_gemv_close_to_f32,
            test_quantize_rejects, test_repack_q4_0, test_repack_q8_0, test_repack_rejects);
    return s;
}
