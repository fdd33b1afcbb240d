#include "kernels/qformat.h"

/* Outputs of a quantized tensor: the largest vocabulary (NIB_MAX_VOCAB). */
#define NIB_Q_MAX_ROWS (1u << 20)
/* Inputs of a quantized tensor: the vocabulary can be a matmul's K (a tied
 * embedding used as input is never quantized, but stay generous). */
#define NIB_Q_MAX_COLS (1u << 20)

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
    case NIB_DT_Q4A: return group_ok(group);
    case NIB_DT_Q8C: return group == 0 || group_ok(group);
    default: return 0;
    }
}

int nib_qlayout_get(struct nib_qlayout *l, uint32_t dtype, uint32_t group, uint32_t rows,
                    uint32_t cols)
{
    memset(l, 0, sizeof *l);
    if (dtype == NIB_DT_F32 || !nib_qformat_valid(dtype, group) || rows == 0 || cols == 0 ||
        rows > NIB_Q_MAX_ROWS || cols > NIB_Q_MAX_COLS)
        return -1;
    l->dtype = dtype;
    l->group = group;
    l->rows = rows;
    l->cols = cols;
    l->tile_n = NIB_Q_TILE_N;
    l->tile_k = group ? group : NIB_Q_KPAD_PC;
    l->n_pad = (rows + NIB_Q_TILE_N - 1) / NIB_Q_TILE_N * NIB_Q_TILE_N;
    l->k_pad = (cols + l->tile_k - 1) / l->tile_k * l->tile_k;
    l->gsize = group ? group : l->k_pad;
    l->n_sgroups = l->k_pad / l->gsize;
    l->code_bits = dtype == NIB_DT_Q8C ? 8 : 4;
    l->code_bytes = NIB_Q_TILE_N * l->gsize * l->code_bits / 8;
    l->scale_bytes = group ? 2 : 4; /* f16 per group, f32 per channel */
    l->has_zp = dtype == NIB_DT_Q4A;
    l->sgroup_bytes =
        l->code_bytes + NIB_Q_TILE_N * l->scale_bytes + (l->has_zp ? NIB_Q_TILE_N : 0);
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
    return group ? group : NIB_Q_KPAD_PC;
}

uint32_t nib_qformat_act_block(uint32_t dtype, uint32_t group)
{
    return dtype == NIB_DT_F32 ? 0 : group;
}
