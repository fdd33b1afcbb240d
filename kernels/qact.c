/* Layout of quantized activations in caller memory:
 *   [q: m x k_pad int8][scale: m x n_blocks f32][sum: m x n_blocks i32]
 * each array starting on a NIB_QACT_ALIGN boundary. */
#include "kernels/qkernels.h"

#define QACT_MAX_K (1u << 20)

static size_t align_up(size_t x)
{
    return (x + NIB_QACT_ALIGN - 1) & ~(size_t)(NIB_QACT_ALIGN - 1);
}

/* k_pad and n_blocks for (k, block); 0 when invalid. */
static uint32_t qact_kpad(uint32_t k, uint32_t block, uint32_t *n_blocks)
{
    if (k == 0 || k > QACT_MAX_K ||
        !(block == 0 || block == 16 || block == 32 || block == 64 || block == 128))
        return 0;
    /* k_pad as the weights pad K (kernels/qformat.c): the block, at least
     * 32, so every row starts 32-byte aligned (blocks of 16 come in pairs). */
    uint32_t unit = block > NIB_Q_KPAD_PC ? block : NIB_Q_KPAD_PC;
    uint32_t k_pad = (k + unit - 1) / unit * unit;
    *n_blocks = block ? k_pad / block : 1;
    return k_pad;
}

size_t nib_qact_align(void)
{
    return NIB_QACT_ALIGN;
}

size_t nib_qact_footprint(uint32_t m, uint32_t k, uint32_t block)
{
    uint32_t nb;
    uint32_t k_pad = qact_kpad(k, block, &nb);
    if (!k_pad || m == 0 || m > (1u << 16))
        return 0;
    return align_up((size_t)m * k_pad) + 2 * align_up((size_t)m * nb * 4);
}

int nib_qact_init(struct nib_qact *a, void *mem, uint32_t m, uint32_t k, uint32_t block)
{
    uint32_t nb;
    uint32_t k_pad = qact_kpad(k, block, &nb);
    if (!k_pad || m == 0 || m > (1u << 16) || ((uintptr_t)mem & (NIB_QACT_ALIGN - 1)))
        return -1;
    uint8_t *p = mem;
    a->q = (int8_t *)p;
    p += align_up((size_t)m * k_pad);
    a->scale = (float *)(void *)p;
    p += align_up((size_t)m * nb * 4);
    a->sum = (int32_t *)(void *)p;
    a->m = m;
    a->k = k;
    a->k_pad = k_pad;
    a->block = block ? block : k_pad;
    a->n_blocks = nb;
    return 0;
}

struct nib_qact nib_qact_blocks(const struct nib_qact *a, uint32_t row, uint32_t b0, uint32_t b1)
{
    /* blocks of 16: the last block of a row can be padding only (k_pad
     * rounds to 32); the view that reaches the row's last input takes it
     * along, so producers splitting by blocks need not know it exists */
    if (b1 * a->block >= a->k)
        b1 = a->n_blocks;
    struct nib_qact v = *a;
    v.q += (size_t)row * a->k_pad + (size_t)b0 * a->block;
    v.scale += (size_t)row * a->n_blocks + b0;
    v.sum += (size_t)row * a->n_blocks + b0;
    v.m = 1;
    v.n_blocks = b1 - b0;
    v.k_pad = v.n_blocks * a->block;
    /* a view of padding only has k = 0 and quantizes to zeros */
    uint32_t end = b1 * a->block < a->k ? b1 * a->block : a->k;
    v.k = end > b0 * a->block ? end - b0 * a->block : 0;
    return v;
}

struct nib_qact nib_qact_rows(const struct nib_qact *a, uint32_t r0, uint32_t m)
{
    struct nib_qact v = *a;
    v.q += (size_t)r0 * a->k_pad;
    v.scale += (size_t)r0 * a->n_blocks;
    v.sum += (size_t)r0 * a->n_blocks;
    v.m = m;
    return v;
}
