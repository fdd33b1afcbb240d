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

/* How codes and scales are chosen (docs/accuracy.md, "Rounding methods"):
 *   rtn     round to nearest from the classic scale (Q4_0's max/-8, Q4_1's
 *           min/max, Q8_0's absmax/127), bit for bit llama.cpp's reference
 *           rounding of those types; no calibration;
 *   search  per group, the scale (and zero point or minimum) with the least
 *           squared error weighted by calibration importance (the mean x^2
 *           of each input channel), over a grid of candidates each refined
 *           by weighted least squares; never worse than rtn's choice;
 *   gptq    columns quantized in order, each one's error pushed onto the
 *           columns not yet quantized through the inverse of the
 *           calibration Hessian X*X^T (tools/compiler/gptq.h); group scales
 *           chosen as search does, from the updated weights. */
enum nib_qmethod { NIB_QM_SEARCH = 0, NIB_QM_RTN = 1, NIB_QM_GPTQ = 2 };
/* nib compile's and nib eval's default (zeroed options mean search) */
#define NIB_QM_DEFAULT NIB_QM_GPTQ

/* "rtn", "search", "gptq": 0, or -1 with a message. */
int nib_qmethod_parse(const char *s, enum nib_qmethod *m, char *err, size_t errlen);
const char *nib_qmethod_name(enum nib_qmethod m);

/* One scale group's parameters, as the layout stores them. */
struct nib_qgroup {
    float scale;   /* the value the kernels use */
    uint16_t bits; /* its f16 bits (layouts with f16 scales) */
    int zp;        /* q4a: the zero point */
    float min;     /* q4f, q8f: the minimum */
};

/* Choose the parameters of one group x[0..n) (n <= l->gsize) of layout l
 * by method rtn or search (imp[0..n): importance of each element, NULL =
 * all equal; rtn ignores it), and its codes (codes[0..n), may be NULL).
 * 0, or -1 with a message when the values cannot be held (a scale beyond
 * f16, a range beyond a float). */
int nib_qgroup_choose(const struct nib_qlayout *l, enum nib_qmethod m, const float *x,
                      const float *imp, uint32_t n, struct nib_qgroup *g, int *codes, char *err,
                      size_t errlen);
/* q4h: the f16 bits of the super-scale D of a super-block x[0..n): the
 * largest magnitude / (8 x 31), so the sub-scale 31 gives that value's
 * Q4_0 scale. nib_qgroup_choose takes q4h's groups as sub-blocks of 16
 * (nib_ql_qgroup) with D in g->bits on entry, and gives g->zp = the
 * sub-scale s (-32..31), g->scale = (float)s * D. */
uint16_t nib_q4h_super(const float *x, uint32_t n);

/* The nearest code of x in group g (rounded, clamped to the format's
 * range), and in *deq the value it dequantizes to (nib_qrow_f32's). */
int nib_qgroup_code(const struct nib_qlayout *l, const struct nib_qgroup *g, float x, float *deq);
/* Write group j of row r into out: codes[0..n), then the format's zero
 * code up to gsize, and g. */
void nib_qgroup_put(const struct nib_qlayout *l, uint8_t *out, uint32_t r, uint32_t j,
                    const struct nib_qgroup *g, const int *codes, uint32_t n);

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
/* nib_quantize by method rtn or search, with imp[0..cols) the importance
 * of each input column (NULL: all equal). nib_quantize is search without
 * importance. */
int nib_quantize_m(struct nib_qspec spec, enum nib_qmethod m, const float *imp, uint32_t rows,
                   uint32_t cols, nib_row_fn row, void *ctx, uint8_t *out, char *err,
                   size_t errlen);
/* nib_quantize_m on threads worker threads (rows split among them): the
 * same bytes for any count; rows must be readable concurrently. */
int nib_quantize_mt(struct nib_qspec spec, enum nib_qmethod m, const float *imp, uint32_t rows,
                    uint32_t cols, nib_row_fn row, void *ctx, uint8_t *out, uint32_t threads,
                    char *err, size_t errlen);
/* The same from a dense row-major matrix. */
int nib_quantize_m_f32(struct nib_qspec spec, enum nib_qmethod m, const float *imp, uint32_t rows,
                       uint32_t cols, const float *w, uint8_t *out, char *err, size_t errlen);
int nib_quantize_f32(struct nib_qspec spec, uint32_t rows, uint32_t cols, const float *w,
                     uint8_t *out, char *err, size_t errlen);

/* Row r of a packed tensor as floats, out[0..cols): nib_qrow_f32
 * (kernels/qformat.h), the value every kernel's arithmetic stands for. */
void nib_dequantize_row(const struct nib_qlayout *l, const uint8_t *packed, uint32_t r, float *out);

#endif
