/* Quantising a vision model (docs/vision.md, "Quantisation"): which
 * weighted nodes get 4-bit, 8-bit or f32 weights, the calibrated int8
 * scale of every value a quantized convolution reads, and the compile of
 * an imported graph into blob bytes in memory, which nib compile, nib
 * eval and --auto-precision share.
 *
 * A weighted node is a Conv that is neither depthwise nor grouped, or a
 * Gemm/MatMul by a constant matrix (vq_weighted). A quantized Conv reads
 * its input as int8 codes of one per-tensor scale measured on calibration
 * inputs (NIB_VOP_QUANT, then NIB_VOP_QCONV); a quantized matmul
 * quantizes its rows itself, per row (blob_format.h NIB_VOP_MATMUL). Every
 * other op stays f32. */
#ifndef NIB_VISION_QUANT_H
#define NIB_VISION_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/conv.h"
#include "tools/compiler/onnx/onnx_ir.h"
#include "tools/compiler/vision_plan.h"

#define VQ_MAX_OVERRIDES 512
#define VQ_CALIB_DEFAULT 16 /* calibration inputs used when calib_max is 0 */
/* gptq's Hessians come from the first calibration inputs: at most this
 * many (as many as the default calibration set holds: with 4, the
 * recogniser's late layers had fewer columns than a Hessian's rank, and
 * its text on 120 rendered lines agreed with f32 half as often), and only
 * as many as VQ_HESS_BYTES of kept values hold (>= 1). */
#define VQ_HESS_INPUTS VQ_CALIB_DEFAULT
#define VQ_HESS_BYTES (512ull << 20)

/* How 4-bit weights are rounded: per-channel scale search then nearest
 * (rtn), or the same scales with GPTQ's error feedback (gptq). */
enum vq_method { VQ_METHOD_DEFAULT = 0, VQ_METHOD_RTN, VQ_METHOD_GPTQ };

/* --precision NODE=q4|q8|f32: bits 4, 8, or 0 (f32). */
struct vq_override {
    char node[NIB_NAME_MAX];
    uint32_t bits;
};

struct vq_opts {
    uint32_t bits;         /* weighted nodes' default: 4 (nib compile's default), 8, 0 = f32 */
    int keep_ends;         /* 1: the first and the last weighted node at 8 bits (default) */
    const char *calib_dir; /* --calib DIR of input files; NULL: the built-in synthetic set */
    uint32_t calib_max;    /* use at most this many calibration inputs (0: the default) */
    const struct vq_override *over; /* applied last, by node name */
    uint32_t n_over;
    /* Calibrated scales to reuse (vq_calibrate's output, one per IR
     * tensor), or NULL: compiling calibrates. --auto-precision compiles
     * many times from one calibration. */
    const float *act_scale;
    int calib_absmax;      /* activation scales from the absmax (the default; kept for callers) */
    int calib_clip;        /* 1: activation scales from the least-error clip instead */
    enum vq_method method; /* 4-bit weights (VQ_METHOD_DEFAULT: vq_method_default) */
};

/* The method VQ_METHOD_DEFAULT stands for. */
enum vq_method vq_method_default(void);
/* "rtn" or "gptq": 0, else -1. */
int vq_method_parse(const char *s, enum vq_method *m);

/* The f32 values the 4-bit nodes read, kept from the first calibration
 * inputs (per IR tensor, in the f32 plan's layout: NHWC for a
 * convolution's input, rows for a matmul's). */
struct vq_capture {
    uint32_t n_img, n_t;
    float **x;       /* per IR tensor: n_img values one after the other, or NULL */
    uint64_t *elems; /* per IR tensor: floats of one value */
};
void vq_capture_free(struct vq_capture *cap);

/* 1 when node i of g is weighted (quantizable). */
int vq_weighted(const struct nx_graph *g, uint32_t i);

/* The first and the last weighted node in graph order when q keeps them
 * at 8 bits (q->keep_ends with a 4-bit default: the seed's advice, the
 * first layer sees raw pixels, the last one makes the answer), else -1
 * for both. --precision still overrides them; --auto-precision does not
 * measure them. */
void vq_kept_ends(const struct nx_graph *g, const struct vq_opts *q, int64_t *first, int64_t *last);
/* The bits each node gets under q (per node of g; 0 for f32 and for
 * nodes that are not weighted): defaults, ends, then overrides. -1 with a
 * message when an override names no weighted node. */
int vq_node_bits(const struct nx_graph *g, const struct vq_opts *q, uint8_t *bits, char *err,
                 size_t errlen);

/* Run the f32 model on the calibration inputs (q->calib_dir, or the
 * built-in set) and give each IR tensor that a weighted node reads its
 * int8 scale (> 0; 0 for tensors no weighted node reads). *scale is
 * malloc'd, g->n_t floats. 0, or -1 with a message. */
int vq_calibrate(const struct nx_graph *g, const struct vision_opts *o, const struct vq_opts *q,
                 float **scale, char *err, size_t errlen);
/* vq_calibrate that also keeps, in *cap, the values read by the nodes
 * whose bits[] is 4. scale may be NULL (not wanted). */
int vq_calibrate_capture(const struct nx_graph *g, const struct vision_opts *o,
                         const struct vq_opts *q, const uint8_t *bits, float **scale,
                         struct vq_capture *cap, char *err, size_t errlen);

/* H = sum of x x^T (k x k doubles, k = c_in * kh * kw) over the input
 * columns x of a convolution of shape s (columns in its weights' OIHW
 * order (ic, ky, kx); zeros where the window leaves the image) reading
 * the n_img NHWC values at x (a matmul: h rows of c_in, 1x1). At most
 * vq_hess_cols(k) output pixels, spread evenly over every input's
 * pixels, are summed, in a fixed order. */
void vq_hessian(const float *x, uint32_t n_img, const struct nib_conv_shape *s, double *h);
uint64_t vq_hess_cols(uint32_t k);
/* Per-output-channel codes of rows x k weights (row-major): q in [-8, 7]
 * (bits 4) or [-127, 127] (bits 8) and scale[r], w ~ scale[r] * q. */
void vq_quantize_rows(const float *w, uint32_t rows, uint32_t k, uint32_t bits, int8_t *q,
                      float *scale);

/* What a compile made. */
struct vision_compile_info {
    uint32_t n_ops, n_tensors, n_io;
    uint64_t weight_bytes, arena_bytes;
    uint32_t n_q4, n_q8, n_f32;             /* weighted nodes by precision */
    uint64_t bytes_f32, bytes_q4, bytes_q8; /* weight_bytes by dtype */
};

/* Lower g (imported) with options o, quantized as q says (NULL or bits 0
 * with no overrides: f32), place the buffers and build the blob in
 * memory, validated as the runtime will. *blob is malloc'd (64-byte
 * aligned), *len bytes. 0, or -1 with a message. */
int vision_compile_mem(const struct nx_graph *g, const struct vision_opts *o,
                       const struct vq_opts *q, uint8_t **blob, uint64_t *len,
                       struct vision_compile_info *info, char *err, size_t errlen);

#endif
