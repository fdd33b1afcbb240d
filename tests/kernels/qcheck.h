/* Checks of the quantized kernels that need no test framework, so the same
 * code runs in the Check suite (scalar vs AVX2, natively) and in the plain
 * NEON runner (scalar vs NEON, under qemu-aarch64). Each returns the
 * number of failures and describes the first one in msg. */
#ifndef NIB_TESTS_QCHECK_H
#define NIB_TESTS_QCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/qkernels.h"

/* Activation quantizer of var vs ref: q, scales and sums bitwise, on
 * random lengths (ragged included) and every block size. */
int qcheck_qact(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                char *msg, size_t len);

/* GEMM of var vs ref, every format and group, random N (1..37) and K
 * (172 and random, ragged), m 1..6, with and without add, full and split
 * row ranges: bitwise equal outputs, rows outside the range untouched. */
int qcheck_gemm(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                char *msg, size_t len);

/* kt's GEMM over m tokens equals m GEMVs bitwise. */
int qcheck_gemm_vs_gemv(const struct nib_qkernels *kt, uint64_t seed, char *msg, size_t len);

/* kt's GEMV against a double-precision sum over the dequantized weights
 * and activations (layout read through kernels/qformat.h, independently of
 * the kernels' chunk walk): relative error below 1e-5. */
int qcheck_vs_double(const struct nib_qkernels *kt, uint64_t seed, char *msg, size_t len);

/* Worst-case magnitudes (4-bit: every code 15 against activations all
 * -128 or all +127; 8-bit: codes -128 against +-127) at the deepest
 * accumulation each format uses: kt's result equals the exact integer. */
int qcheck_worst_case(const struct nib_qkernels *kt, char *msg, size_t len);

/* f32 GEMV, RMSNorm, SiLU-mul and RoPE of var vs ref: bitwise equal on random
 * lengths (ragged too), large inputs, a NaN, partial rotations and
 * ragged row ranges; and each against double precision. */
int qcheck_f32_ops(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                   char *msg, size_t len);

/* kt's quantizer writing a row in runs of blocks (nib_qact_blocks views)
 * gives bitwise the whole-row result. */
int qcheck_qact_blocks(const struct nib_qkernels *kt, uint64_t seed, char *msg, size_t len);

/* Attention of var vs ref: bitwise equal outputs on random head sizes
 * (ragged ones too), grouped-query heads, padded cache rows, positions,
 * head ranges, a peaky softmax and a NaN score; and each within 1e-5 of
 * a double-precision softmax. */
int qcheck_attention(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                     char *msg, size_t len);

/* nib_tanhf (kernels/common/f32-math.h) on every 4099th float of each
 * sign and special values: within 1.1 ulp of double tanh, odd (signed
 * zeros too), NaN stays NaN, and this build's SIMD form gives its bits. */
int qcheck_tanh(char *msg, size_t len);

/* GELU-mul of var vs ref: bitwise equal on random lengths, magnitudes from
 * subnormal to 1e20, +-0, +-FLT_MAX, +-inf and a NaN in every lane
 * position; and against double precision, both as x / (1 + exp(-2u)) and
 * as the tanh form 0.5 x (1 + tanh u) where that does not cancel. */
int qcheck_gelu_mul(const struct nib_qkernels *ref, const struct nib_qkernels *var, uint64_t seed,
                    char *msg, size_t len);

/* Attention over keys t0..pos (t0 = 0, t0 = pos, between, windows of 16)
 * with soft-caps 0, 50, 30, 0.5 (saturated) and random ones, of var vs
 * ref: bitwise equal, equal to the same rows passed as a cache starting
 * at t0, never reading a key outside the window (NaN there), and within
 * tolerance of a double-precision softmax of capped scores. */
int qcheck_attention_window(const struct nib_qkernels *ref, const struct nib_qkernels *var,
                            uint64_t seed, char *msg, size_t len);

#endif
