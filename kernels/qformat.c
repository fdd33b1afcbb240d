#include "kernels/qformat.h"

/* Outputs of a quantized tensor: the largest vocabulary (NIB_MAX_VOCAB). */
#define NIB_Q_MAX_ROWS (1u << 20)
/* Inputs of a quantized tensor: the vocabulary can be a matmul's K (a tied
 * embedding used as input is never quantized, but stay generous). */
#define NIB_Q_MAX_COLS (1u << 20)
/* ... and of an 8-bit one per channel, whose row sums are int32: |sum| <=
 * K * 127 * 127 < 2^31 needs K <= 2^17 (4 bits: K * 15 * 127, or 2^20;
 * per group the sums are taken a group at a time). */
#define NIB_Q8C_MAX_COLS (1u << 17)

static int group_ok(uint32_t g)
{
    return g == 32 || g == 64 || g == 128;
}

int nib_qformat_valid(uint32_t dtype, uint32_t group)
{
    switch (dtype) {
    case NIB_DT_F32:
    case NIB_DT_Q4C: return group == 0;
    case NIB_DT_Q4:
    case NIB_DT_Q4A:
    case NIB_DT_Q4H: return group_ok(group);
    case NIB_DT_Q8C: return group == 0 || group_ok(group);
    case NIB_DT_Q4F:
    case NIB_DT_Q8F: return group == 16 || group == 32;
    default: return 0;
    }
}

/* K padding unit: the group, but never less than 32, so that every
 * activation row (k_pad bytes) starts 32-byte aligned and the AVX2 and
 * NEON steps read whole 32-input runs; groups of 16 therefore come in
 * pairs (k_pad / 16 is even). Per channel: 32. */
static uint32_t kpad_unit(uint32_t group)
{
    return group > NIB_Q_KPAD_PC ? group : NIB_Q_KPAD_PC;
}

int nib_qlayout_get(struct nib_qlayout *l, uint32_t dtype, uint32_t group, uint32_t rows,
                    uint32_t cols)
{
    memset(l, 0, sizeof *l);
    if (dtype == NIB_DT_F32 || !nib_qformat_valid(dtype, group) || rows == 0 || cols == 0 ||
        rows > NIB_Q_MAX_ROWS || cols > NIB_Q_MAX_COLS ||
        (dtype == NIB_DT_Q8C && group == 0 && cols > NIB_Q8C_MAX_COLS))
        return -1;
    l->dtype = dtype;
    l->group = group;
    l->rows = rows;
    l->cols = cols;
    l->tile_n = NIB_Q_TILE_N;
    l->tile_k = kpad_unit(group);
    l->n_pad = (rows + NIB_Q_TILE_N - 1) / NIB_Q_TILE_N * NIB_Q_TILE_N;
    l->k_pad = (cols + l->tile_k - 1) / l->tile_k * l->tile_k;
    l->gsize = group ? group : l->k_pad;
    l->n_sgroups = l->k_pad / l->gsize;
    l->code_bits = dtype == NIB_DT_Q8C || dtype == NIB_DT_Q8F ? 8 : 4;
    l->code_bytes = NIB_Q_TILE_N * l->gsize * l->code_bits / 8;
    l->has_min = dtype == NIB_DT_Q4F || dtype == NIB_DT_Q8F;
    /* f16 per group (q4, q4a, q8c/g); f32 per channel and for q4f, q8f */
    l->scale_bytes = group && !l->has_min ? 2 : 4;
    l->has_zp = dtype == NIB_DT_Q4A;
    l->sub = dtype == NIB_DT_Q4H ? 16 : 0;
    l->sgroup_bytes = l->code_bytes + NIB_Q_TILE_N * l->scale_bytes +
                      (l->has_zp ? NIB_Q_TILE_N : 0) + (l->has_min ? 4 * NIB_Q_TILE_N : 0) +
                      (l->sub ? 6 * (l->gsize / l->sub) : 0); /* q4h: 6 bits x 8 rows each */
    l->nblock_bytes = (uint64_t)l->n_sgroups * l->sgroup_bytes;
    l->size = (uint64_t)(l->n_pad / NIB_Q_TILE_N) * l->nblock_bytes;
    return 0;
}

uint64_t nib_qformat_size(uint32_t dtype, uint32_t group, uint32_t rows, uint32_t cols)
{
    if (dtype == NIB_DT_F32)
        return group == 0 ? (uint64_t)rows * cols * 4 : 0;
    struct nib_qlayout l;
    return nib_qlayout_get(&l, dtype, group, rows, cols) ? 0 : l.size;
}

uint32_t nib_qformat_tile_n(uint32_t dtype, uint32_t group)
{
    if (!nib_qformat_valid(dtype, group))
        return 0;
    return dtype == NIB_DT_F32 ? 1 : NIB_Q_TILE_N;
}

uint32_t nib_qformat_tile_k(uint32_t dtype, uint32_t group)
{
    if (!nib_qformat_valid(dtype, group))
        return 0;
    if (dtype == NIB_DT_F32)
        return 1;
    return kpad_unit(group);
}

uint32_t nib_qformat_act_block(uint32_t dtype, uint32_t group)
{
    return dtype == NIB_DT_F32 ? 0 : dtype == NIB_DT_Q4H ? 16 : group;
}

/* One run of n bytes between the whole-block layout (at li) and the
 * stored one (at st), in the direction asked. */
static void move_run(uint8_t *pair, const uint8_t *scratch, uint64_t st, uint64_t li, uint64_t n,
                     int to_stored)
{
    memcpy(pair + (to_stored ? st : li), scratch + (to_stored ? li : st), n);
}

/* In place, one complete pair at a time through scratch: group j of
 * block b of the pair between b x nblock_bytes + j x sgroup_bytes (whole
 * blocks) and j x 2 sgroup_bytes + b x sgroup_bytes (stored); q4h's
 * stored pair super-block interleaves the two blocks' code chunks and
 * then holds their fields (kernels/qformat.h). A last block without a
 * partner is the same bytes in both layouts. */
static void move_groups(const struct nib_qlayout *l, uint8_t *w, uint8_t *scratch, int to_stored)
{
    const uint64_t nbb = l->nblock_bytes, sgb = l->sgroup_bytes, cb = l->code_bytes;
    for (uint32_t nb = 0; nib_ql_paired(l, nb); nb += 2) {
        uint8_t *pair = w + (uint64_t)nb * nbb;
        memcpy(scratch, pair, 2 * nbb);
        for (uint32_t b = 0; b < 2; b++)
            for (uint32_t j = 0; j < l->n_sgroups; j++) {
                const uint64_t g = (uint64_t)j * 2 * sgb, li = b * nbb + j * sgb;
                if (!l->sub) {
                    move_run(pair, scratch, g + b * sgb, li, sgb, to_stored);
                    continue;
                }
                for (uint64_t c = 0; c < cb / NIB_Q_CHUNK; c++)
                    move_run(pair, scratch, g + 2 * NIB_Q_CHUNK * c + NIB_Q_CHUNK * b,
                             li + NIB_Q_CHUNK * c, NIB_Q_CHUNK, to_stored);
                move_run(pair, scratch, g + 2 * cb + b * (sgb - cb), li + cb, sgb - cb, to_stored);
            }
    }
}

void nib_ql_pair_blocks(const struct nib_qlayout *l, uint8_t *w, uint8_t *scratch)
{
    move_groups(l, w, scratch, 1);
}

void nib_ql_unpair_blocks(const struct nib_qlayout *l, uint8_t *w, uint8_t *scratch)
{
    move_groups(l, w, scratch, 0);
}

void nib_qrow_f32(const struct nib_qlayout *l, const uint8_t *w, uint32_t r, uint32_t c0,
                  uint32_t c1, float *out)
{
    for (uint32_t c = c0; c < c1;) {
        const uint32_t j = c / l->gsize, end = (j + 1) * l->gsize < c1 ? (j + 1) * l->gsize : c1;
        const uint64_t so = nib_ql_scale_off(l, r, j);
        float s, mn = 0.0f;
        int zp = l->code_bits == 4 ? 8 : 0; /* q4, q4c: code = q + 8; q8c: 0 */
        if (l->scale_bytes == 2) {
            uint16_t h;
            memcpy(&h, w + so, 2);
            s = nib_f16_to_f32(h);
        } else {
            memcpy(&s, w + so, 4);
        }
        if (l->has_zp)
            zp = w[nib_ql_zp_off(l, r, j)];
        const float D = s; /* q4h: the super-scale */
        if (l->has_min) {
            memcpy(&mn, w + nib_ql_min_off(l, r, j), 4);
            zp = 0; /* raw codes: q4f 0..15, q8f -128..127 */
        }
        for (; c < end; c++, out++) {
            unsigned shift;
            const uint64_t off = nib_ql_code_off(l, r, c, &shift);
            const int code = l->code_bits == 8 ? (int8_t)w[off] : (w[off] >> shift) & 15;
            if (l->sub) /* q4h: the sub-block's scale, (float)s * D, exact */
                s = (float)nib_q4h_sub(w + nib_q4h_fields_off(l, r / NIB_Q_TILE_N, j), l,
                                       c % l->gsize / l->sub, r % NIB_Q_TILE_N) *
                    D;
            /* one fmaf (q4f, q8f) or one IEEE multiply (the rest) */
            *out = l->has_min ? __builtin_fmaf(s, (float)code, mn) : (float)(code - zp) * s;
        }
    }
}
