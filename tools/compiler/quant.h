/* Weight quantizers (offline): f32 rows -> nibble's packed formats
 * (kernels/qformat.h), and the inverse (dequantize, for tests and `nib
 * eval`). Exact repacking of GGUF tensors is in tools/compiler/repack.h.
 *
 * Every dequantized weight is what nib_qrow_f32 defines: (float)(code -
 * zero) * scale, one IEEE multiply, or fmaf(scale, code, minimum) for q4f
 * and q8f. Results do not depend on the compiler contracting a*b+c: every
 * sum that could be contracted is exact in double, and the q4f/q8f
 * candidates are measured through explicit fmaf (see quant.c). */
#ifndef NIB_QUANT_H
#define NIB_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/qformat.h"
#include "tools/compiler/llama_import.h"

struct nib_qspec {
    uint32_t dtype; /* enum nib_dtype */
    uint32_t group; /* 0 = per channel */
};

/* "f32", "q4" (group 32), "q4/64", "q4a", "q4a/128", "q4c", "q8c",
 * "q8c/32", "q4f" (group 32), "q4f/16", "q8f" (group 32), "q8f/16" ... 0,
 * or -1 with a message naming the problem. */
int nib_qspec_parse(const char *s, struct nib_qspec *spec, char *err, size_t errlen);
/* "q4/32", "q4c", ... into buf (>= 16 bytes); returns buf. */
const char *nib_qspec_str(struct nib_qspec spec, char *buf, size_t len);

/* Row source: out[0..cols) = row r; 0, or -1 on failure. */
typedef int (*nib_row_fn)(void *ctx, uint32_t r, float *out);

/* Quantize rows x cols into out (nib_qformat_size() bytes, fully written,
 * padding included). Scales (and q4a zero points) per group/row are
 * chosen by a small search that minimises the squared error, starting
 * from the classic choice (Q4_0's max/-8, min/max, absmax/127), so the
 * error is never worse than that choice. Non-finite weights are refused.
 * 0, or -1 with a message. */
int nib_quantize(struct nib_qspec spec, uint32_t rows, uint32_t cols, nib_row_fn row, void *ctx,
                 uint8_t *out, char *err, size_t errlen);
/* The same from a dense row-major matrix. */
int nib_quantize_f32(struct nib_qspec spec, uint32_t rows, uint32_t cols, const float *w,
                     uint8_t *out, char *err, size_t errlen);

/* Row r of a packed tensor as floats, out[0..cols): nib_qrow_f32
 * (kernels/qformat.h), the value every kernel's arithmetic stands for. */
void nib_dequantize_row(const struct nib_qlayout *l, const uint8_t *packed, uint32_t r, float *out);

#endif
