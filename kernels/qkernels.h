/* Quantized matmul kernels: int8 activations x packed int4/int8 weights
 * (layouts in kernels/qformat.h, drawn in docs/blob-format.md; the design
 * and the proofs in docs/kernels.md).
 *
 * Every kernel has a scalar reference and AVX2 / NEON-dotprod variants with
 * the same signature. The variants give BITWISE the same results as the
 * scalar reference: integer sums are exact, and the few float operations
 * are the same IEEE operations in the same order in every variant (fused
 * multiply-adds are written as explicit fmas everywhere, so no compiler
 * contraction can change them). GEMM over m tokens gives bitwise the same
 * rows as m GEMVs. Kernels never allocate and call nothing but memcpy. */
#ifndef NIB_QKERNELS_H
#define NIB_QKERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/qformat.h"

/* ---- activations: f32 -> int8, quantized once per token ----
 *
 * m rows of k inputs, in blocks of `block` inputs (16, 32, 64 or 128: the
 * weight group), or one block over the whole row (block 0, for the
 * per-channel formats). Per row and block b:
 *   amax = max |x| over the block,  scale[b] = amax / 127,
 *   q = round-half-even(x * (127 / amax)), in [-127, 127] (never -128),
 *   sum[b] = sum of the block's q (the +8 / zero-point correction).
 * Inputs past k up to k_pad are 0 (so are their q). Non-finite inputs give
 * unspecified (but defined, identical in every variant) values. */
struct nib_qact {
    int8_t *q;         /* m x k_pad; row t at q + t * k_pad (32-byte aligned) */
    float *scale;      /* m x n_blocks */
    int32_t *sum;      /* m x n_blocks */
    uint32_t m, k;     /* rows (tokens), inputs */
    uint32_t block;    /* inputs per block (k_pad when per channel) */
    uint32_t k_pad;    /* k rounded up to the block, at least to 32 */
    uint32_t n_blocks; /* k_pad / block */
};

#define NIB_QACT_ALIGN 64u
#define NIB_QACT_MAX_BLOCK 128u /* largest block (besides a whole row) */

size_t nib_qact_align(void);
/* Bytes of caller memory for m rows of k inputs; 0 when the parameters are
 * invalid (m or k 0, k > 1<<20, block not 0/16/32/64/128). k_pad is k
 * rounded up to the block, but to at least 32 (blocks of 16 come in pairs,
 * as the weights of groups of 16 pad K: kernels/qformat.h). */
size_t nib_qact_footprint(uint32_t m, uint32_t k, uint32_t block);
/* Lay the arrays out in mem (NIB_QACT_ALIGN-aligned, footprint bytes) and
 * fill *a. 0, or -1 when the parameters are invalid or mem is misaligned. */
int nib_qact_init(struct nib_qact *a, void *mem, uint32_t m, uint32_t k, uint32_t block);
/* The view of rows [r0, r0 + m) of a (same memory). */
struct nib_qact nib_qact_rows(const struct nib_qact *a, uint32_t r0, uint32_t m);

/* The view of blocks [b0, b1) of row `row` of a, as one row (same
 * memory; b0 < b1 <= n_blocks): quantizing
 * x + b0 * block into it fills exactly those blocks, with the bits a
 * whole-row quantization gives them. Lets a producer split by blocks
 * (attention heads, FFN row blocks) quantize its own part. With blocks
 * of 16 the last block of a row may lie wholly in the padding (k_pad
 * rounds up to 32): a view reaching the row's last input (b1 * block >=
 * k) extends to the row's end and so writes that block's zeros too; a
 * view of the padding block alone has k = 0. */
struct nib_qact nib_qact_blocks(const struct nib_qact *a, uint32_t row, uint32_t b0, uint32_t b1);

/* Quantize x[0..k) into row `row` of a. */
#define NIB_QACT_DECL(name) void name(const struct nib_qact *a, uint32_t row, const float *x)
typedef NIB_QACT_DECL((*nib_qact_fn));

/* ---- GEMM / GEMV ----
 *
 * For tokens t < m and rows r in [n_begin, n_end):
 *   y[t * y_stride + r] = W[r] . a[t]  (+ add[t * add_stride + r] if add)
 * where a's rows 0..m-1 were quantized with block nib_qformat_act_block()
 * and k = l->cols. Row ranges should start at multiples of 8 (a thread
 * split by N-blocks); any range is correct, an unaligned start only wastes
 * work. Exactly, with isum the exact integer dot product of the codes
 * minus the zero point (8 for q4/q4c, the stored one for q4a, 0 for q8c)
 * times the activation block sum:
 *   per group (q4, q4a, q8c/group):
 *     acc = 0;  for each group j: acc = fma((float)isum_j, ws_j * sa_j, acc)
 *     y = acc (+ add)
 *   per group with a minimum (q4f, q8f): isum_j is the dot product of the
 *   raw codes (q4f: 0..15, q8f: -128..127), asum_j the activation block sum:
 *     acc = 0;  for each group j:
 *       acc = fma((float)isum_j, ws_j * sa_j, acc);
 *       acc = fma((float)asum_j, wm_j * sa_j, acc)   (wm: the f32 minimum)
 *     y = acc (+ add)
 *   per channel (q4c, q8c/0):
 *     y = fma((float)isum, ws * sa, add ? add : +0)
 * (ws: the weight scale, as float; sa: the activation block scale.) */
#define NIB_QGEMM_DECL(name)                                                                       \
    void name(const struct nib_qlayout *l, const uint8_t *w, const struct nib_qact *a, uint32_t m, \
              float *y, size_t y_stride, const float *add, size_t add_stride, uint32_t n_begin,    \
              uint32_t n_end)
typedef NIB_QGEMM_DECL((*nib_qgemm_fn));

/* One line per quantized weight format: X(dtype, types, isa) is the kernel
 * nib_gemm_f32_<types>_n8_<isa> (kernels/gemm/gemm-f32-<types>-n8-<isa>.c:
 * f32 out, <weights><activations> in, 8-row tile). */
#define NIB_QGEMM_FORMATS(X, isa)                                                                  \
    X(NIB_DT_Q4, q4s8, isa)   /* q4: symmetric per group */                                        \
    X(NIB_DT_Q4A, q4as8, isa) /* q4a: zero point per group */                                      \
    X(NIB_DT_Q4C, q4cs8, isa) /* q4c: per channel */                                               \
    X(NIB_DT_Q8C, q8cs8, isa) /* q8c: per channel or per group */                                  \
    X(NIB_DT_Q4F, q4fs8, isa) /* q4f: f32 scale and minimum per group */                           \
    X(NIB_DT_Q8F, q8fs8, isa) /* q8f: f32 scale and minimum per group */                           \
    X(NIB_DT_Q4H, q4hs8, isa) /* q4h: 6-bit sub-scales per 16, f16 scale per super-block */

/* nib_qact_s8_f32_<isa> and nib_gemm_f32_<types>_n8_<isa> for every ISA. */
#define NIB_QGEMM_DECLARE1(dt, types, isa) NIB_QGEMM_DECL(nib_gemm_f32_##types##_n8_##isa);
#define NIB_QKERNELS_DECLARE(isa)                                                                  \
    NIB_QACT_DECL(nib_qact_s8_f32_##isa);                                                          \
    NIB_QGEMM_FORMATS(NIB_QGEMM_DECLARE1, isa)
NIB_ISA_SUFFIXES(NIB_QKERNELS_DECLARE)

/* x86 builds with AVX2: the AVX2 table's q4 GEMM (nib_gemm_f32_q4s8_n8_avx2)
 * runs the 512-bit VNNI kernel (two N-blocks per register, the same bits)
 * where nib_avx512vnni_available(): CPUID reports AVX-512 F, BW and VNNI
 * and the OS enables the zmm state. nib_gemm_f32_q4s8_n8_avx2plain is the
 * AVX2 kernel alone (tests, and CPUs without AVX-512). */
NIB_QGEMM_DECL(nib_gemm_f32_q4s8_n8_avx2plain);
NIB_QGEMM_DECL(nib_gemm_f32_q4s8_n16_avx512vnni);
NIB_QGEMM_DECL(nib_gemm_f32_q4hs8_n8_avx2plain); /* q4h, the same way */
NIB_QGEMM_DECL(nib_gemm_f32_q4hs8_n16_avx512vnni);
int nib_avx512vnni_available(void);
/* on = 0: nib_avx512vnni_available() says 0 from now on, so every kernel
 * takes its AVX2 (or AVX-VNNI) variant; on = 1: the CPU decides again.
 * Changes speed only (nib's NIB_AVX512=0, to compare the two). */
void nib_avx512vnni_allow(int on);

/* ---- dispatch ---- */

/* The kernels of one ISA: the quantized ones, and the f32 ones of
 * kernels/kernels.h, whose variants also give the same bits. */
struct nib_qkernels {
    const char *name; /* "scalar", "avx2", "neon-dot" */
    uint32_t isa;     /* enum nib_isa bits the variant needs */
    nib_qact_fn qact;
    nib_qgemm_fn gemm[NIB_DT_COUNT]; /* by dtype; NULL for F32 */
    nib_attention_fn attention;
    nib_rmsnorm_fn rmsnorm;
    nib_rope_rows_fn rope_rows;
    nib_silu_mul_fn silu_mul;
    nib_silu_mul_fn gelu_mul; /* NIB_GELUMUL_DECL */
    nib_gemv_f32_fn gemv_f32;
};

/* How far ahead of the line being read the AVX2 and AVX-512 kernels
 * prefetch their weight stream, in bytes (docs/kernels.md, "Prefetch").
 * The best distance is the machine's: 2 KiB on one VM, 8 KiB on another.
 * The appliance sets it at boot from its topology table, nib from
 * NIB_PREFETCH; kernels only read it. It changes no bit of any result,
 * so a kernel that reads a stale value (relaxed atomics on both sides:
 * nothing is published through it) only runs at another speed. */
#ifndef NIB_PF_DIST /* -DNIB_PF_DIST=N: another build default */
#define NIB_PF_DIST 2048
#endif
#define NIB_PREFETCH_MAX 65536
extern uint32_t nib_prefetch_bytes;
/* A distance the kernels take: a multiple of 64 in 0..NIB_PREFETCH_MAX
 * (0 prefetches the line being read: none ahead). */
static inline int nib_prefetch_valid(uint32_t bytes)
{
    return bytes % 64 == 0 && bytes <= NIB_PREFETCH_MAX;
}
/* 0, or -1 (nothing changed) when !nib_prefetch_valid(bytes). */
int nib_prefetch_set(uint32_t bytes);

/* The kernels for one ISA (NIB_ISA_SCALAR, NIB_ISA_AVX2, NIB_ISA_NEON_DOT);
 * NULL when this build has no such variant. AVX-512 VNNI has
 * no table of its own: the AVX2 table takes its kernels where the CPU has it. */
const struct nib_qkernels *nib_qkernels_get(uint32_t isa);
/* What runs for k, for logs: its name, and where the AVX2 table takes
 * the 512-bit VNNI kernels, says so. */
const char *nib_qkernels_label(const struct nib_qkernels *k);

/* One token: m = 1. */
static inline void nib_qgemv(const struct nib_qkernels *kt, const struct nib_qlayout *l,
                             const uint8_t *w, const struct nib_qact *a, float *y, const float *add,
                             uint32_t n_begin, uint32_t n_end)
{
    kt->gemm[l->dtype](l, w, a, 1, y, 0, add, 0, n_begin, n_end);
}

/* 1 when a was laid out for weights l (same padded K and block). */
static inline int nib_qact_fits(const struct nib_qact *a, const struct nib_qlayout *l)
{
    /* q4h: activations in blocks of 16 pad K to 32, its weights to the
     * super-block; the kernels stop at the activations' last block (the
     * weights' codes past it are padding, worth 0) */
    return a->k == l->cols && a->block == nib_ql_qgroup(l) &&
           a->k_pad == (l->sub ? (l->cols + 31) / 32 * 32 : l->k_pad);
}

#endif
