/* Packed layouts of nibble's quantized weight formats (docs/blob-format.md
 * draws them). Pure arithmetic shared by the packer, the blob validator, the
 * kernels and the tests: one layout per format, the same for the scalar,
 * AVX2 and NEON kernels, so a blob is packed once.
 *
 * Every quantized format packs rows in N-blocks of NIB_Q_TILE_N = 8 rows.
 * An N-block is a run of "scale groups", each covering `gsize` inputs.
 * N-blocks come in pairs (0 and 1, 2 and 3, ...; a last block without a
 * partner stands alone) whose scale groups alternate:
 *
 *   pair p = [group 0 of block 2p][group 0 of block 2p+1][group 1 of 2p]...
 *
 * so a kernel computing 16 rows at once reads one sequential stream. Read
 * as two streams side by side (the blocks one after the other), the q4
 * decode GEMV from DRAM ran at 0.71-0.86 of a linear read of the same
 * bytes on a Zen 5 core; as one, at 0.91-0.95 (docs/kernels.md). With one
 * scale group per block (the per-channel formats) a pair is simply the two
 * blocks in order.
 *
 *
 *   scale group = [codes: 8 rows x gsize][8 scales][8 zero points (q4a only)]
 *                                                  [8 f32 minimums (q4f, q8f)]
 *
 * gsize is the format's group (q4, q4a, q8c with a group) or the whole
 * padded row (q4c, q8c per channel). Codes come in 32-byte chunks that
 * interleave the 8 rows so the kernel reads one sequential stream:
 *
 *   4-bit chunk (8 inputs x 8 rows): byte 4*r + i (r row, i = 0..3) holds
 *       input k0+i   of row r in its low nibble and
 *       input k0+4+i of row r in its high nibble,   code = q + 8 (0..15)
 *   8-bit chunk (4 inputs x 8 rows): byte 4*r + i holds input k0+i of row r
 *
 * so each 32-bit lane of a chunk (AVX2 vpmaddubsw+vpmaddwd, NEON sdot by
 * lane) sums 4 products of ONE row: no horizontal reductions.
 *
 * q4f and q8f (exact homes for GGUF's asymmetric and K-quant types): f32
 * scales and f32 minimums, groups of 16 or 32; a weight is
 * fmaf(scale, (float)code, min) with code 0..15 (q4f, unsigned: no +8) or
 * -128..127 (q8f). Padded codes are 0 with scale 0 and minimum 0.
 * Groups of 16 are padded in pairs: K is padded to a multiple of 32 (tile_k
 * 32), so activation rows stay 32-byte aligned.
 *
 * q4h (two-level scales, docs/accuracy.md): the scale group is a
 * super-block of G = 32, 64 or 128 inputs holding G / 16 sub-blocks of 16.
 * Codes as q4's (q + 8); then 8 f16 super-scales D (one per row); then
 * each sub-block's 6-bit signed sub-scale s (-32..31) per row, split as
 * Q6_K splits its codes: the low 4 bits of sub-block i's 8 rows in the
 * 32-bit word at +16 + 4i (row r in bits 4r..4r+3), the high 2 bits in
 * the 16-bit word at +16 + 4 (G / 16) + 2i (row r in bits 2r, 2r+1):
 *
 *   super-block = [codes: 8 rows x G][8 x f16 D][G/16 x u32 low][G/16 x u16 high]
 *
 * In a stored pair (blob format 13) the two blocks' super-blocks j share
 * one run: the codes as one stream of 64-byte steps, chunk c of block 0
 * then chunk c of block 1, then block 0's fields (D, low, high), then
 * block 1's:
 *
 *   pair super-block = [chunk 0 of b0][chunk 0 of b1][chunk 1 of b0]...
 *                      [fields of b0][fields of b1]
 *
 * so the 512-bit kernel, which takes a chunk of both blocks into one
 * register, loads it with one 64-byte load and reads the pair front to
 * back. With the blocks' super-blocks one after the other (format 12) it
 * read two streams 576 bytes apart in turn, and its matmuls took
 * 1.19-1.34 x a reference read of the same bytes; in this layout
 * 1.06-1.15 x (docs/benchmarks.md, "q4h pairs read front to back"). A
 * block without a partner is [codes][fields].
 *
 * A weight is (code - 8) * ws with ws = (float)s * D, exact in f32 (an
 * 11-bit by 6-bit product), so it is q4 with groups of 16 whose scales lie
 * on a grid: 4 + 6/16 + 16/G bits per weight (4.5 at G = 128, the bytes
 * of q4/32). Activations come in blocks of 16 (nib_qformat_act_block).
 *
 * Padding: rows up to a multiple of 8, inputs up to a multiple of the
 * format's tile_k. Padded codes are the format's zero (8 for q4/q4c, the
 * zero point for q4a, 0 for q8c) and padded rows have scale 0; padded
 * activations are 0, so padding never changes a result. */
#ifndef NIB_QFORMAT_H
#define NIB_QFORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dtype.h"
#include "kernels/f16.h"

#define NIB_Q_TILE_N 8u   /* rows per N-block, every quantized format */
#define NIB_Q_CHUNK 32u   /* bytes per code chunk */
#define NIB_Q_KPAD_PC 32u /* K padding of the per-channel formats */

/* Everything a kernel or packer needs to address a packed tensor. */
struct nib_qlayout {
    uint32_t dtype, group; /* as in the tensor record (group 0 = per channel) */
    uint32_t rows, cols;   /* N, K */
    uint32_t tile_n;       /* NIB_Q_TILE_N */
    uint32_t tile_k;       /* K padding unit: group (at least 32), or 32 per channel */
    uint32_t n_pad, k_pad; /* padded N and K */
    uint32_t gsize;        /* inputs per scale group (group, or k_pad) */
    uint32_t n_sgroups;    /* scale groups per N-block: k_pad / gsize */
    uint32_t code_bits;    /* 4 or 8 */
    uint32_t code_bytes;   /* bytes of codes per scale group: 8*gsize*bits/8 */
    uint32_t scale_bytes;  /* 2 (f16) or 4 (f32) per scale */
    uint32_t has_zp;       /* q4a: 8 u8 zero points after the scales */
    uint32_t has_min;      /* q4f, q8f: 8 f32 minimums after the scales */
    uint32_t sub;          /* q4h: inputs per sub-scale (16); 0 otherwise */
    uint32_t sgroup_bytes; /* one scale group: codes + scales (+ zero points, minimums) */
    uint64_t nblock_bytes; /* one N-block: n_sgroups * sgroup_bytes */
    uint64_t size;         /* whole tensor: n_pad / 8 * nblock_bytes */
};

/* 1 when (dtype, group) is a format nibble packs and runs:
 *   F32 group 0; Q4, Q4A and Q4H groups 32, 64, 128; Q4C group 0;
 *   Q8C group 0 (per channel, f32 scale) or 32, 64, 128 (per group, f16
 *   scales: holds GGUF Q8_0 exactly); Q4F and Q8F groups 16, 32. */
int nib_qformat_valid(uint32_t dtype, uint32_t group);

/* Fill *l for a rows x cols tensor. 0, or -1 (and *l zeroed) when
 * (dtype, group) is not a valid quantized format (F32 included), a
 * dimension is 0, rows or cols > 1<<20. */
int nib_qlayout_get(struct nib_qlayout *l, uint32_t dtype, uint32_t group, uint32_t rows,
                    uint32_t cols);

/* Packed bytes of a tensor (F32 too: rows*cols*4); 0 when invalid. */
uint64_t nib_qformat_size(uint32_t dtype, uint32_t group, uint32_t rows, uint32_t cols);

/* Tile parameters recorded in the tensor record (F32: 1 x 1); 0 if invalid. */
uint32_t nib_qformat_tile_n(uint32_t dtype, uint32_t group);
uint32_t nib_qformat_tile_k(uint32_t dtype, uint32_t group);

/* The activation block a weight format consumes (see kernels/qkernels.h):
 * the group for per-group formats, 0 (= one block over the whole row) for
 * per-channel ones. */
uint32_t nib_qformat_act_block(uint32_t dtype, uint32_t group);

/* ---- addressing (used by the scalar kernels, packers and tests) ---- */

/* 1 when N-block nb has a partner (the pair is complete). */
static inline int nib_ql_paired(const struct nib_qlayout *l, uint32_t nb)
{
    return (nb | 1u) < l->n_pad / NIB_Q_TILE_N;
}

/* Start of scale group 0 of N-block nb. */
static inline uint64_t nib_ql_block_off(const struct nib_qlayout *l, uint32_t nb)
{
    const uint64_t pair = (uint64_t)(nb & ~1u) * l->nblock_bytes;
    return nib_ql_paired(l, nb) ? pair + (nb & 1u) * (uint64_t)l->sgroup_bytes
                                : (uint64_t)nb * l->nblock_bytes;
}

/* Bytes from one scale group of N-block nb to its next. */
static inline uint32_t nib_ql_group_stride(const struct nib_qlayout *l, uint32_t nb)
{
    return nib_ql_paired(l, nb) ? 2 * l->sgroup_bytes : l->sgroup_bytes;
}

/* Start of scale group j of N-block nb. */
static inline uint64_t nib_ql_sgroup_off(const struct nib_qlayout *l, uint32_t nb, uint32_t j)
{
    return nib_ql_block_off(l, nb) + (uint64_t)j * nib_ql_group_stride(l, nb);
}

/* q4h: where super-block j of a block keeps its codes (32-byte chunks
 * nib_q4h_chunk_stride apart) and its fields (D, then the sub-scales),
 * relative to the block's start as nib_ql_block_off gives it (pair start
 * + b x sgroup_bytes, b = nb & 1), gs = nib_ql_group_stride: a stored
 * pair (gs = 2 x sgroup_bytes) interleaves its blocks' chunks. */
static inline int nib_q4h_paired_gs(const struct nib_qlayout *l, uint32_t gs)
{
    return gs == 2 * l->sgroup_bytes;
}
static inline uint32_t nib_q4h_chunk_stride(const struct nib_qlayout *l, uint32_t gs)
{
    return nib_q4h_paired_gs(l, gs) ? 2 * NIB_Q_CHUNK : NIB_Q_CHUNK;
}
static inline int64_t nib_q4h_codes_rel(const struct nib_qlayout *l, uint32_t gs, uint32_t b,
                                        uint32_t j)
{
    const int64_t g = (int64_t)j * gs;
    return nib_q4h_paired_gs(l, gs) ? g - (int64_t)b * l->sgroup_bytes + b * NIB_Q_CHUNK : g;
}
static inline int64_t nib_q4h_fields_rel(const struct nib_qlayout *l, uint32_t gs, uint32_t b,
                                         uint32_t j)
{
    const int64_t g = (int64_t)j * gs;
    return nib_q4h_paired_gs(l, gs) ? g - (int64_t)b * l->sgroup_bytes + 2 * l->code_bytes +
                                          (int64_t)b * (l->sgroup_bytes - l->code_bytes)
                                    : g + l->code_bytes;
}
/* The same as offsets into the tensor, N-block nb. */
static inline uint64_t nib_q4h_codes_off(const struct nib_qlayout *l, uint32_t nb, uint32_t j)
{
    return (uint64_t)((int64_t)nib_ql_block_off(l, nb) +
                      nib_q4h_codes_rel(l, nib_ql_group_stride(l, nb), nb & 1u, j));
}
static inline uint64_t nib_q4h_fields_off(const struct nib_qlayout *l, uint32_t nb, uint32_t j)
{
    return (uint64_t)((int64_t)nib_ql_block_off(l, nb) +
                      nib_q4h_fields_rel(l, nib_ql_group_stride(l, nb), nb & 1u, j));
}

/* A tensor, in place, between the stored layout (pairs interleaved) and
 * one with every N-block whole, one after the other (how the packer
 * composes a fused tensor from its sources). scratch holds
 * 2 x l->nblock_bytes. */
void nib_ql_pair_blocks(const struct nib_qlayout *l, uint8_t *w, uint8_t *scratch);
void nib_ql_unpair_blocks(const struct nib_qlayout *l, uint8_t *w, uint8_t *scratch);

/* Byte holding code (r, k), r and k within the padded tensor; for 4-bit
 * codes *shift is 0 (low nibble) or 4 (high nibble). */
static inline uint64_t nib_ql_code_off(const struct nib_qlayout *l, uint32_t r, uint32_t k,
                                       unsigned *shift)
{
    uint32_t j = k / l->gsize, kk = k % l->gsize, rr = r % NIB_Q_TILE_N, nb = r / NIB_Q_TILE_N;
    uint64_t base = nib_ql_sgroup_off(l, nb, j);
    uint32_t cs = NIB_Q_CHUNK;
    if (l->sub) { /* q4h: chunks interleaved in a stored pair */
        base = nib_q4h_codes_off(l, nb, j);
        cs = nib_q4h_chunk_stride(l, nib_ql_group_stride(l, nb));
    }
    if (l->code_bits == 4) {
        *shift = (kk & 4) ? 4 : 0;
        return base + (kk / 8) * cs + 4 * rr + (kk & 3);
    }
    *shift = 0;
    return base + (kk / 4) * NIB_Q_CHUNK + 4 * rr + (kk & 3);
}

static inline uint64_t nib_ql_scale_off(const struct nib_qlayout *l, uint32_t r, uint32_t j)
{
    if (l->sub) /* q4h: the super-scale D, first of the fields */
        return nib_q4h_fields_off(l, r / NIB_Q_TILE_N, j) + (uint64_t)(r % NIB_Q_TILE_N) * 2;
    return nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, j) + l->code_bytes +
           (uint64_t)(r % NIB_Q_TILE_N) * l->scale_bytes;
}

/* The f32 minimum of row r, group j (q4f, q8f). */
static inline uint64_t nib_ql_min_off(const struct nib_qlayout *l, uint32_t r, uint32_t j)
{
    return nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, j) + l->code_bytes +
           NIB_Q_TILE_N * l->scale_bytes + (uint64_t)(r % NIB_Q_TILE_N) * 4;
}

/* Columns [c0, c1) of row r of a packed tensor as floats (out[0] is column
 * c0): each weight exactly as the format defines it (the dequantized value
 * every kernel's integer arithmetic stands for: one IEEE multiply, or one
 * fmaf for q4f and q8f), so one scalar function serves every ISA; the EMBED
 * op reads quantized embedding rows through it. r < n_pad and
 * c0 <= c1 <= k_pad (padding reads as what is stored there). */
void nib_qrow_f32(const struct nib_qlayout *l, const uint8_t *w, uint32_t r, uint32_t c0,
                  uint32_t c1, float *out);

/* The quantizer's group: the inputs that share one scale (q4h's
 * sub-block; gsize otherwise), and how many of them a padded row has. */
static inline uint32_t nib_ql_qgroup(const struct nib_qlayout *l)
{
    return l->sub ? l->sub : l->gsize;
}
static inline uint32_t nib_ql_n_qgroups(const struct nib_qlayout *l)
{
    return l->k_pad / nib_ql_qgroup(l);
}

/* q4h: the bytes of sub-block i's 8 low-bit fields (a little-endian u32,
 * row r at bits 4r) and 8 high-bit fields (u16, row r at bits 2r), from
 * the start of a super-block's fields (nib_q4h_fields_off: D first); and
 * the sub-scale of row rr from them. */
static inline uint32_t nib_q4h_lo_off(const struct nib_qlayout *l, uint32_t i)
{
    (void)l;
    return 2 * NIB_Q_TILE_N + 4 * i;
}
static inline uint32_t nib_q4h_hi_off(const struct nib_qlayout *l, uint32_t i)
{
    return 2 * NIB_Q_TILE_N + 4 * (l->gsize / l->sub) + 2 * i;
}
static inline int nib_q4h_sub(const uint8_t *fields, const struct nib_qlayout *l, uint32_t i,
                              uint32_t rr)
{
    const uint8_t lo = fields[nib_q4h_lo_off(l, i) + rr / 2] >> (4 * (rr & 1)) & 15;
    const uint8_t hi = fields[nib_q4h_hi_off(l, i) + rr / 4] >> (2 * (rr & 3)) & 3;
    return (int)(lo | hi << 4) - 32;
}

static inline uint64_t nib_ql_zp_off(const struct nib_qlayout *l, uint32_t r, uint32_t j)
{
    return nib_ql_sgroup_off(l, r / NIB_Q_TILE_N, j) + l->code_bytes +
           NIB_Q_TILE_N * l->scale_bytes + r % NIB_Q_TILE_N;
}

#endif
