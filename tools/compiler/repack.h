/* Exact repacking of GGUF quantized tensors into nibble's formats: every
 * weight the packed tensor stands for (nib_qrow_f32, the kernels' own
 * definition) equals the weight ggml's dequantization gives
 * (tools/compiler/ggml_dequant.c). No rounding happens: codes are copied,
 * scales and minimums are ggml's own f32 intermediates.
 *
 *   GGUF type  ggml's weight (exact f32 products)     nibble format
 *   Q4_0       d * (q - 8)                            q4/32   code q, f16 scale d
 *   Q8_0       d * q                                  q8c/32  code q, f16 scale d
 *   Q5_0       d * (q - 16)                           q8c/32  code q - 16
 *   IQ4_NL     d * book[q]                            q8c/32  code book[q]
 *   Q4_1       d * q + m                              q4f/32  scale d, min m
 *   Q4_K       (d*sc) * q - dmin*m                    q4f/32  scale d*sc, min -(dmin*m)
 *   Q2_K       (d*sc) * q - dmin*m  (groups of 16)    q4f/16
 *   Q3_K       (d*(sc-32)) * (q3 - 4)  (16)           q4f/16  code q3, min -4*scale
 *   Q5_1       d * q + m                              q8f/32
 *   Q5_K       (d*sc) * q - dmin*m                    q8f/32
 *   Q6_K       (d*sc) * (q - 32)  (16)                q8f/16  code q - 32, min -0
 *   IQ4_XS     (d*(ls-32)) * book[q]                  q8f/32  code book[q], min -0
 *
 * fmaf(scale, code, min) rounds the exact scale*code + min once, as ggml's
 * scale*code - m rounds once (x - y is x + (-y) in IEEE arithmetic). A
 * minimum of -0.0 makes fmaf(s, c, -0.0) equal s*c bit for bit. The one
 * difference a repack allows is the sign of a zero weight: Q3_K in q4f
 * (and any source whose signed codes are shifted to unsigned ones) gives
 * s*c + s*lo = +0 where ggml's s*0 is -0 for a negative s; no dot product
 * sees it. Everything else is equal bit for bit. */
#ifndef NIB_REPACK_H
#define NIB_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "tools/compiler/llama_import.h"
#include "tools/compiler/quant.h"

/* The format a GGUF tensor type repacks into without rounding (the table
 * above). 0, or -1 for a type with none (f32, f16, bf16, unknown). */
int nib_repack_spec(uint32_t ggml_type, struct nib_qspec *spec);

/* 1 when every tensor of this GGUF type repacks exactly into `target`
 * (whatever its values, a non-finite scale aside): the target's group
 * divides the type's scale group, its codes hold the type's codes (after
 * one constant shift for q4f), and its scale holds the type's (q4 and
 * q8c keep f16 scales: only types whose scale is the block's f16 d).
 * For example Q4_0 -> q8c/32, q4f/16, q8f/32; Q4_K -> q8f/16. */
int nib_repack_holds(uint32_t ggml_type, struct nib_qspec target);

/* Repack view w (rows x cols, its rows read through
 * llama_weight_src_row) into `target`, writing nib_qformat_size() bytes
 * (padding included) to out. Succeeds when every weight comes out equal
 * (checked, weight by weight, against ggml's dequantization; a zero's sign
 * aside, see above): always when nib_repack_holds says so; for other
 * targets when the values allow it (e.g. a Q6_K scale that happens to be a
 * half). 0, or -1 with a message naming the tensor, and the row and
 * column that cannot be held. */
int nib_repack_into(const struct llama_weight *w, struct nib_qspec target, uint8_t *out, char *err,
                    size_t errlen);

/* nib_repack_into the format nib_repack_spec gives. */
int nib_repack_gguf(const struct llama_weight *w, uint8_t *out, char *err, size_t errlen);

#endif
