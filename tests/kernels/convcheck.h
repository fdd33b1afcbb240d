/* Checks of the vision kernels (kernels/conv.h) that need no test
 * framework, so the same code runs in the Check suite (scalar vs AVX2) and
 * in the plain NEON runner (scalar vs NEON under qemu-aarch64). Each
 * returns the number of failures and describes the first one in msg.
 * Shapes are random: odd sizes, every edge, strides, dilations, pads and
 * groups (depthwise included). */
#ifndef NIB_TESTS_CONVCHECK_H
#define NIB_TESTS_CONVCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/conv.h"

/* f32 convolution and depthwise convolution: var (its rows split in two
 * calls) bitwise equal to ref, and ref within float rounding of a float64
 * convolution of the unpacked OIHW weights with every epilogue. */
int ccheck_conv_f32(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                    uint64_t seed, char *msg, size_t len);
int ccheck_dwconv_f32(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                      uint64_t seed, char *msg, size_t len);

/* Quantized convolution (q4c and q8c weights) and depthwise int8: ref and
 * var each equal, bit for bit, an exact integer reference (int64 sums over
 * the OIHW codes) followed by the documented float epilogue, for int8 and
 * f32 outputs, with and without bias and int8 residual. */
int ccheck_conv_s8(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                   uint64_t seed, char *msg, size_t len);
int ccheck_dwconv_s8(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                     uint64_t seed, char *msg, size_t len);

/* Max, average (with and without the pads counted) and global average
 * pooling; resize nearest (4 rounding modes) and bilinear under the four
 * coordinate modes: var bitwise equal to ref, ref against float64. */
int ccheck_pool(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                uint64_t seed, char *msg, size_t len);
int ccheck_resize(const struct nib_conv_kernels *ref, const struct nib_conv_kernels *var,
                  uint64_t seed, char *msg, size_t len);

/* Shapes and codes the kernels must refuse. */
int ccheck_rejects(char *msg, size_t len);

#endif
