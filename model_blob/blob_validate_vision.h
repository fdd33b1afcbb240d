/* Validation of the vision opcodes of a plan (blob_format.h NIB_VOP_*),
 * called by nib_blob_open for each op of a vision blob. */
#ifndef NIB_BLOB_VALIDATE_VISION_H
#define NIB_BLOB_VALIDATE_VISION_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"

/* 0, or -1 with the problem in err. */
int nib_check_vision_op(const struct nib_blob_view *v, uint32_t i, char *err, size_t errlen);
const char *nib_vop_name(uint32_t code);

/* Both validators' one error path: the message into err, -1 returned. */
int nib_blob_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Bytes from an element-wise operand's offset to the end of its last
 * element, for dims (each >= 1) and element strides s. */
static inline uint64_t nib_vew_span(const uint32_t *dims, const uint32_t *s)
{
    uint64_t last = 0;
    for (int d = 0; d < 4; d++)
        last += (uint64_t)(dims[d] - 1) * s[d];
    return (last + 1) * 4;
}

/* Elements an element-wise op runs over. */
static inline uint64_t nib_vew_elems(const struct nib_vew_params *p)
{
    return (uint64_t)p->dims[0] * p->dims[1] * p->dims[2] * p->dims[3];
}

/* Bytes of worker scratch a convolution writing only its codes (CONV
 * qout 1) makes its f32 rows in: a chunk, or one row when a row is more. */
static inline uint64_t nib_vconv_codes_scratch(const struct nib_vconv_params *p)
{
    const uint64_t row = (uint64_t)p->ow * p->c_out;
    return 4 * (row > NIB_VCONV_CHUNK_FLOATS ? row : NIB_VCONV_CHUNK_FLOATS);
}

/* 1 when strides s address dims densely in row-major order: element i
 * of the loops is element i of the operand (dims of 1 take any stride). */
static inline int nib_vew_dense(const uint32_t *dims, const uint32_t *s)
{
    uint64_t want = 1;
    for (int d = 3; d >= 0; d--) {
        if (dims[d] > 1 && s[d] != want)
            return 0;
        want *= dims[d];
    }
    return 1;
}

#endif
