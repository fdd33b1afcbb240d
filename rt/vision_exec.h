/* The vision opcodes of a plan (model_blob/blob_format.h NIB_VOP_*), as
 * rt/exec.c dispatches them: the units a share is made of, one share's
 * work, and the bytes a share reads and writes (for the barrier plan). */
#ifndef NIB_VISION_EXEC_H
#define NIB_VISION_EXEC_H

#include <stdint.h>

#include "model_blob/blob_view.h"

struct nib_qkernels;

/* Bytes [begin, end) of runtime memory a share reads or writes (rt/exec.c
 * turns them into its struct nib_access). */
struct nib_vrange {
    uint64_t begin, end;
    uint32_t write;
};

/* Units op is split in (worker shares are whole blocks of them). */
uint32_t nib_vision_units(const struct nib_op *op, uint32_t *block);
/* Units [b, e) of op; wscratch is the worker's private scratch
 * (header wscratch_size bytes, 64-byte aligned: the quantized convolution
 * and matmul work there). */
void nib_vision_op(const struct nib_qkernels *qk, const struct nib_blob_view *v, uint8_t *mem,
                   uint8_t *wscratch, const struct nib_op *op, uint32_t b, uint32_t e);
/* What units [b, e) read and write; returns the count (<= 4). */
int nib_vision_access(const struct nib_op *op, uint32_t b, uint32_t e, struct nib_vrange *out);

/* One element-wise function (enum nib_vact). */
float nib_vact_apply(uint32_t act, float p0, float p1, float v);

#endif
