/* Vision kernels: convolution (f32 and quantized), depthwise convolution,
 * pooling and resize, with their packed weight layouts (docs/kernels.md,
 * "Vision kernels").
 *
 * Layout: activations are NHWC, one image at a time (h x w x c floats or
 * int8, channel fastest), so SIMD lanes are channels: a lane repeats the
 * scalar reference's operations for one output channel, in the same order,
 * and every variant gives the same bits without horizontal sums.
 *
 * Work is split by output rows [oh_begin, oh_end): any split gives the same
 * bits. Kernels never allocate; scratch memory is passed in. */
#ifndef NIB_CONV_H
#define NIB_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "kernels/qkernels.h"

/* ---- shapes ---- */

/* One convolution (or pooling window) over one NHWC image. The output size
 * is given: pads at the bottom and right are whatever makes
 * nib_conv_out_dim() come out at oh, ow (taps that fall outside the input
 * are skipped, i.e. read as zero). */
struct nib_conv_shape {
    uint32_t h, w, c_in;         /* input */
    uint32_t oh, ow, c_out;      /* output */
    uint32_t groups;             /* c_in and c_out divisible by it */
    uint32_t kh, kw;             /* window */
    uint32_t stride_h, stride_w; /* >= 1 */
    uint32_t pad_top, pad_left;  /* the other two pads follow from oh, ow */
    uint32_t dil_h, dil_w;       /* >= 1 */
};

/* floor((in + pad0 + pad1 - dil * (k - 1) - 1) / stride) + 1, or 0 when the
 * window does not fit (ONNX's rule without ceil_mode). */
uint32_t nib_conv_out_dim(uint32_t in, uint32_t k, uint32_t stride, uint32_t pad0, uint32_t pad1,
                          uint32_t dil);

/* 1 when s is a shape the kernels accept: every dimension >= 1 and at most
 * 1<<16 (channels 1<<20), groups divide both channel counts, and the pads
 * are smaller than the dilated window (so every output sees the input). */
int nib_conv_shape_ok(const struct nib_conv_shape *s);

/* ---- epilogue ---- */

enum nib_act {
    NIB_ACT_NONE = 0,
    NIB_ACT_RELU,     /* v > 0 ? v : 0 */
    NIB_ACT_CLIP,     /* min(max(v, p0), p1) */
    NIB_ACT_HSIGMOID, /* clip(fma(p0, v, p1), 0, 1): ONNX HardSigmoid, alpha p0, beta p1 */
    NIB_ACT_HSWISH,   /* v * clip(fma(p0, v, p1), 0, 1): HardSwish is p0 = 1/6, p1 = 0.5 */
    NIB_ACT_COUNT
};

/* After the sum of products acc of an output: v = acc + bias (folded
 * BatchNorm); with res_first, v += res (ResNet: add, then ReLU); v =
 * act(v); without res_first, v += res (MobileNet: act, then add). */
struct nib_conv_epi {
    const float *bias; /* c_out, or NULL */
    uint32_t act;      /* enum nib_act */
    float p0, p1;      /* the activation's parameters */
    const float *res;  /* output-shaped residual (oh x ow x c_out), or NULL */
    uint32_t res_first;
};

/* ---- f32 convolution ----
 *
 * Packed weights (nib_conv_pack_f32): per group g, per block of 8 output
 * channels of the group (the last one zero-padded), the taps in the order
 * (ky, kx, ic) as rows of 8 floats, one per output channel:
 *   wp[((g * nb + b) * kh * kw * icg + (ky * kw + kx) * icg + ic) * 8 + j]
 *   = W[g * ocg + b * 8 + j][ic][ky][kx]   (OIHW, icg = c_in / groups,
 *   ocg = c_out / groups, nb = ceil(ocg / 8))
 * Each output is acc = 0, then acc = fma(x, w, acc) over the taps inside
 * the input in that order, then the epilogue. */
size_t nib_conv_packed_f32_size(const struct nib_conv_shape *s); /* floats */
void nib_conv_pack_f32(const struct nib_conv_shape *s, const float *w_oihw, float *wp);

#define NIB_CONV_F32_DECL(name)                                                                    \
    void name(const struct nib_conv_shape *s, const float *x, const float *wp,                     \
              const struct nib_conv_epi *e, float *y, uint32_t oh_begin, uint32_t oh_end)
typedef NIB_CONV_F32_DECL((*nib_conv_f32_fn));

/* ---- depthwise f32 convolution (groups == c_in == c_out) ----
 *
 * Packed weights (nib_dwconv_pack_f32): the taps in order (ky, kx), each a
 * row of c_pad = round_up(c, 8) floats (zero past c):
 *   wp[(ky * kw + kx) * c_pad + c] = W[c][0][ky][kx]
 * Each output: acc = 0, acc = fma(x, w, acc) over taps inside the input in
 * order (ky, kx), then the epilogue. */
size_t nib_dwconv_packed_f32_size(const struct nib_conv_shape *s); /* floats */
void nib_dwconv_pack_f32(const struct nib_conv_shape *s, const float *w_oihw, float *wp);

#define NIB_DWCONV_F32_DECL(name) NIB_CONV_F32_DECL(name)

/* ---- quantized convolution ----
 *
 * Activations: int8 NHWC, symmetric per tensor: x = scale * q, zero
 * point 0 (padding is q = 0), q in [-127, 127], never -128 (the matmul
 * kernels take what the activation quantizer makes). Weights: per output
 * channel, q4c (4 bits, u4 = q + 8) or q8c (8 bits), the matmul formats of
 * kernels/qformat.h, one packed matrix per group of ocg rows by
 * K = kh * kw * icg columns in the order (ky, kx, ic) (nib_qconv_pack).
 * The kernel is an implicit GEMM: up to NIB_QCONV_TILE output pixels'
 * input windows are gathered into an activation object (exact int8 copies
 * and zeros outside the input, sums for the +8 correction) and multiplied
 * by the ISA's matmul kernel with the bias as its add:
 *   v = fma((float)isum, ws * x_scale, bias)   (dequant + bias, exact sums)
 * then the epilogue as f32 (residual int8: v += res_scale * r as one fma;
 * residual f32: v += r, one addition),
 * and either requantized, q = clamp(rne(v * (1 / y_scale)), -127, 127)
 * (the rounding of the activation quantizer: fma with 1.5 * 2^23), or
 * stored as f32 (the last layer). */
#define NIB_QCONV_TILE 16u

struct nib_qconv_epi {
    const float *bias; /* c_out, or NULL */
    uint32_t act;      /* enum nib_act */
    float p0, p1;
    const int8_t *res; /* output-shaped int8 residual, or NULL */
    float res_scale;
    const float *res_f32; /* output-shaped f32 residual, or NULL (not both) */
    uint32_t res_first;
    float y_scale; /* int8 output's scale (y_q != NULL) */
    int8_t *y_q;   /* int8 output, or NULL */
    float *y_f32;  /* f32 output, or NULL; with y_q too, both are written: the int8
                    * codes of exactly the f32 values stored */
};

/* Per-channel weights of a quantized convolution: codes q (int8, in
 * [-8, 7] for q4c, [-127, 127] for q8c) OIHW, and one f32 scale per output
 * channel; w = scale * q. */
struct nib_qconv_weights {
    uint32_t dtype; /* NIB_DT_Q4C or NIB_DT_Q8C */
    const uint8_t *packed;
};
uint64_t nib_qconv_packed_size(const struct nib_conv_shape *s, uint32_t dtype);
/* Pack codes (OIHW) and scales into dst (nib_qconv_packed_size bytes). 0,
 * or -1 when dtype is not q4c/q8c or a code is out of its range. */
int nib_qconv_pack(const struct nib_conv_shape *s, uint32_t dtype, const int8_t *q_oihw,
                   const float *scale, uint8_t *dst);
/* The layout of one group's matrix (the same for every group); group g's
 * starts at byte g * l->size of the packed weights. 0, or -1 when dtype is
 * not q4c/q8c or K is over 1<<20 (q8c: 1<<17, nib_qlayout_get). */
int nib_qconv_layout(const struct nib_conv_shape *s, uint32_t dtype, struct nib_qlayout *l);

/* Caller scratch for one call (any row range): an activation object of
 * NIB_QCONV_TILE rows and the f32 products; 64-byte aligned, one per
 * concurrent caller (each worker its own). */
size_t nib_qconv_scratch_size(const struct nib_conv_shape *s, uint32_t dtype);

#define NIB_QCONV_DECL(name)                                                                       \
    void name(const struct nib_conv_shape *s, const int8_t *x, float x_scale,                      \
              const struct nib_qconv_weights *wt, const struct nib_qconv_epi *e, void *scratch,    \
              uint32_t oh_begin, uint32_t oh_end)
typedef NIB_QCONV_DECL((*nib_qconv_fn));

/* The implicit GEMM every ISA's quantized convolution runs, over that
 * ISA's matmul kernel (kernels/qconv.c). */
void nib_qconv_run(nib_qgemm_fn gemm, const struct nib_conv_shape *s, const int8_t *x,
                   float x_scale, const struct nib_qconv_weights *wt, const struct nib_qconv_epi *e,
                   void *scratch, uint32_t oh_begin, uint32_t oh_end);

/* The epilogue of m consecutive output pixels p0.. from their dequantized
 * sums v (bias added; pixel t's c_out values at v + t * c_out): each
 * output goes through nib_qconv_epi_px's operations (common/conv-epi.h),
 * in scalar C or one channel per SIMD lane. */
#define NIB_QCONV_EPI_DECL(name)                                                                   \
    void name(const struct nib_qconv_epi *e, const float *v, size_t p0, uint32_t m, uint32_t c_out)
typedef NIB_QCONV_EPI_DECL((*nib_qconv_epi_fn));

/* nib_qconv_run with an ISA's epilogue (nib_qconv_run: the scalar one);
 * sums 1 when the matmul reads the activation rows' sums (a->sum: every
 * q4c kernel, for its +8 correction, and AVX-512's q8c), 0 when it never
 * does (they are then not computed). */
void nib_qconv_run_epi(nib_qgemm_fn gemm, nib_qconv_epi_fn epi, int sums,
                       const struct nib_conv_shape *s, const int8_t *x, float x_scale,
                       const struct nib_qconv_weights *wt, const struct nib_qconv_epi *e,
                       void *scratch, uint32_t oh_begin, uint32_t oh_end);

/* ---- depthwise int8 convolution ----
 *
 * Weights int8 per channel (q8c): packed as the f32 depthwise layout with
 * int8 codes, wq[(ky * kw + kx) * c_pad + c], and scales[c]. Each output:
 * isum = sum of w * x over the taps inside the input (exact int32), then
 * v = fma((float)isum, ws * x_scale, bias) and the quantized epilogue. */
size_t nib_dwconv_packed_s8_size(const struct nib_conv_shape *s); /* bytes */
void nib_dwconv_pack_s8(const struct nib_conv_shape *s, const int8_t *q_oihw, int8_t *wq);

#define NIB_DWCONV_S8_DECL(name)                                                                   \
    void name(const struct nib_conv_shape *s, const int8_t *x, float x_scale, const int8_t *wq,    \
              const float *w_scale, const struct nib_qconv_epi *e, uint32_t oh_begin,              \
              uint32_t oh_end)
typedef NIB_DWCONV_S8_DECL((*nib_dwconv_s8_fn));

/* ---- pooling (f32, NHWC; the shape's c_in == c_out, groups unused) ----
 *
 * max: m = -inf, then m = (v > m ? v : m) over the taps inside the input
 * in order (ky, kx) (x86 maxps's rule: a NaN tap is skipped). avg: acc =
 * 0, acc += v over the taps inside the input, in order, then acc / count,
 * count = the taps inside (NIB_POOL_AVG: 0/0 = NaN when there are none) or
 * kh * kw (NIB_POOL_AVG_INCLUDE_PAD). Global average pooling is avg with
 * the whole image as the window (nib_pool_global_shape). */
enum nib_pool { NIB_POOL_MAX = 0, NIB_POOL_AVG, NIB_POOL_AVG_INCLUDE_PAD };
void nib_pool_global_shape(struct nib_conv_shape *s, uint32_t h, uint32_t w, uint32_t c);

#define NIB_POOL_F32_DECL(name)                                                                    \
    void name(const struct nib_conv_shape *s, uint32_t mode, const float *x, float *y,             \
              uint32_t oh_begin, uint32_t oh_end)
typedef NIB_POOL_F32_DECL((*nib_pool_f32_fn));

/* ---- resize (f32, NHWC) ----
 *
 * ONNX Resize on the two spatial axes. The source coordinate of output x
 * (scale = the axis' scale, out / in when sizes were given):
 *   half_pixel:          (x + 0.5) / scale - 0.5
 *   pytorch_half_pixel:  the same, or 0 when the output length is 1
 *   asymmetric:          x / scale
 *   align_corners:       x * (in - 1) / (out - 1), or 0 when out is 1
 * nearest: index by nearest_mode (round_prefer_floor, round_prefer_ceil,
 * floor, ceil), clamped to [0, in - 1]. linear: the coordinate clamped to
 * [0, in - 1], i0 = floor, i1 = min(i0 + 1, in - 1), f = coord - i0, and
 * out = a * (1-fy)(1-fx), then fma by (1-fy) fx, fy (1-fx), fy fx for b,
 * c, d (the four weights as products computed once per coordinate). The
 * coordinate tables are computed in shared scalar code (nib_resize_axis). */
enum nib_resize_coord {
    NIB_RESIZE_HALF_PIXEL = 0,
    NIB_RESIZE_PYTORCH_HALF_PIXEL,
    NIB_RESIZE_ASYMMETRIC,
    NIB_RESIZE_ALIGN_CORNERS,
};
enum nib_resize_nearest {
    NIB_NEAREST_ROUND_PREFER_FLOOR = 0,
    NIB_NEAREST_ROUND_PREFER_CEIL,
    NIB_NEAREST_FLOOR,
    NIB_NEAREST_CEIL,
};
struct nib_resize {
    uint32_t h, w, c, oh, ow;
    float scale_h, scale_w;
    uint32_t linear; /* 0: nearest */
    uint32_t coord;  /* enum nib_resize_coord */
    uint32_t nearest_mode;
};
/* Source index pair and weight of one output coordinate along one axis. */
struct nib_resize_tap {
    uint32_t i0, i1;
    float f; /* weight of i1 (nearest: 0, i0 == i1) */
};
void nib_resize_axis(const struct nib_resize *r, int vertical, uint32_t o,
                     struct nib_resize_tap *t);
int nib_resize_ok(const struct nib_resize *r);

#define NIB_RESIZE_F32_DECL(name)                                                                  \
    void name(const struct nib_resize *r, const float *x, float *y, uint32_t oh_begin,             \
              uint32_t oh_end)
typedef NIB_RESIZE_F32_DECL((*nib_resize_f32_fn));

/* Every variant: nib_conv_f32_<isa>, nib_dwconv_f32_<isa>,
 * nib_conv_s8_qcs8_<isa>, nib_dwconv_s8_q8cs8_<isa>, nib_pool_f32_<isa>,
 * nib_resize_f32_<isa>. */
#define NIB_CONV_KERNELS_DECLARE(isa)                                                              \
    NIB_CONV_F32_DECL(nib_conv_f32_##isa);                                                         \
    NIB_DWCONV_F32_DECL(nib_dwconv_f32_##isa);                                                     \
    NIB_QCONV_DECL(nib_conv_s8_qcs8_##isa);                                                        \
    NIB_DWCONV_S8_DECL(nib_dwconv_s8_q8cs8_##isa);                                                 \
    NIB_POOL_F32_DECL(nib_pool_f32_##isa);                                                         \
    NIB_RESIZE_F32_DECL(nib_resize_f32_##isa);
NIB_ISA_SUFFIXES(NIB_CONV_KERNELS_DECLARE)

/* x86 builds with AVX2: the quantized convolution over VNNI matmuls
 * (vpdpbusd, kernels/conv/conv-s8-qcs8-avx2.c; the same bits), which the
 * AVX2 table's conv_s8 is. It takes the best the CPU has: 512-bit AVX-512
 * VNNI matmuls (two N-blocks per register,
 * kernels/gemm/gemm-f32-qcs8-n16-avx512vnni.c, q4c and q8c) where
 * nib_avx512vnni_available, else the 256-bit AVX-VNNI ones where
 * nib_conv_s8_avxvnni_available, else nib_conv_s8_qcs8_avx2.
 * nib_conv_s8_qcs8_avxvnni is the 256-bit choice alone (tests). */
NIB_QCONV_DECL(nib_conv_s8_qcs8_avx2vnni);
NIB_QCONV_DECL(nib_conv_s8_qcs8_avxvnni);
int nib_conv_s8_avxvnni_available(void);
NIB_QGEMM_DECL(nib_gemm_f32_q4cs8_n16_avx512vnni);
NIB_QGEMM_DECL(nib_gemm_f32_q8cs8_n16_avx512vnni);

/* The vision kernels of one ISA (NULL when this build has none). */
struct nib_conv_kernels {
    const char *name;
    nib_conv_f32_fn conv_f32;
    nib_conv_f32_fn dwconv_f32;
    nib_qconv_fn conv_s8;
    nib_dwconv_s8_fn dwconv_s8;
    nib_pool_f32_fn pool_f32;
    nib_resize_f32_fn resize_f32;
};
const struct nib_conv_kernels *nib_conv_kernels_get(uint32_t isa);

#endif
