/* An imported ONNX graph (tools/compiler/onnx/onnx_ir.h) lowered to a
 * vision blob (blob_format.h NIB_MODEL_VISION): a flat list of vision ops
 * whose operands are buffers, the buffers placed in one arena by their
 * lifetimes, f32 weights packed for the kernels, and the io table.
 * vision_lower.c builds the plan; vision_blob.c places the buffers and
 * writes the blob. */
#ifndef NIB_VISION_PLAN_H
#define NIB_VISION_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "model_blob/blob_format.h"
#include "tools/compiler/onnx/onnx_ir.h"

#define VP_MAX_CHANNELS 16 /* --input-mean / --input-std values */

struct vision_opts {
    int input_u8;           /* --input-type u8: every 4-D input is u8 pixels */
    uint32_t n_mean, n_std; /* per channel, or 0: mean 0, std 1 */
    float mean[VP_MAX_CHANNELS], std[VP_MAX_CHANNELS];
};

/* One buffer of the arena: live from the op that first writes it to the
 * last op that reads it (inclusive); -1 / INT32_MAX for the run's edges. */
struct vp_buf {
    uint64_t bytes;
    int32_t first, last;
    uint64_t off; /* placed by vp_place */
};

/* An op whose arena operands are buffers plus byte offsets into them. */
struct vp_op {
    struct nib_op op;
    int32_t buf[4]; /* src0, src1, dst, aux: buffer ids, -1 for none */
    uint64_t add[4];
};

/* A weight tensor: f32 padded to rows x 256 floats, or a q4c/q8c matrix
 * of rows x cols packed as kernels/qformat.h lays it out (size bytes). */
struct vp_weight {
    char name[NIB_NAME_MAX];
    void *data;
    uint32_t dtype, rows, cols;
    uint64_t size;
};

/* How a lowering quantizes (vision_quant.h): per node of the graph the
 * bits of its weights (4, 8, or 0 = f32; only weighted nodes), per IR
 * tensor the int8 scale of a value quantized convolutions read. */
struct vq_capture;
struct vp_quant {
    const uint8_t *bits;          /* g->n_n entries */
    const float *act_scale;       /* g->n_t entries */
    const struct vq_capture *cap; /* kept values: 4-bit weights by gptq; NULL: by rtn */
};

struct vp_io {
    struct nib_io_rec rec;
    int32_t buf;
};

struct vision_plan {
    struct vp_op *ops;
    uint32_t n_ops, cap_ops;
    struct vp_buf *bufs;
    uint32_t n_bufs, cap_bufs;
    struct vp_weight *w;
    uint32_t n_w, cap_w;
    struct vp_io io[NIB_IO_MAX];
    uint32_t n_io;
    uint64_t arena;       /* bytes, after vp_place */
    uint32_t wscratch;    /* private scratch bytes a worker needs (0: none) */
    int32_t wscratch_buf; /* worker 0's scratch: a buffer alive for the whole run, or -1 */
    /* Per IR tensor: the buffer holding its f32 value (-1: none) and the
     * index of the op after which that value is complete (-1: before the
     * run). Calibration reads values there. */
    int32_t *t_buf, *t_done;
    uint32_t n_t;
};

/* Lower g (imported, fused) into p, quantized as q says (NULL: f32). 0,
 * or -1 with a message naming the node and the op that cannot be
 * lowered. */
int vp_lower(const struct nx_graph *g, const struct vision_opts *o, const struct vp_quant *q,
             struct vision_plan *p, char *err, size_t errlen);
/* Place every buffer in one arena: buffers whose lifetimes overlap never
 * share a byte. */
void vp_place(struct vision_plan *p);
/* Build the blob (after vp_place) in memory and validate it as the
 * runtime will: *blob malloc'd, *len bytes. 0, or -1 with a message. */
int vp_build_blob(const struct vision_plan *p, uint8_t **blob, uint64_t *len, char *err,
                  size_t errlen);
void vp_free(struct vision_plan *p);

/* --input-mean a,b,c: n floats. 0, or -1 with a message. */
int vp_parse_floats(const char *arg, float *out, uint32_t max, uint32_t *n, char *err,
                    size_t errlen);

#endif
