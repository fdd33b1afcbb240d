/* .npy files of float32 tensors (little-endian, C order): what nib
 * onnx-run reads as inputs and writes as outputs. */
#ifndef NIB_ONNX_NPY_H
#define NIB_ONNX_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "tools/compiler/onnx/onnx_ir.h"

/* buf is a whole .npy file; on success *data points into buf and rank,
 * dims hold its shape. 0, or -1 with a message. */
int nx_npy_parse(const uint8_t *buf, size_t size, uint32_t *rank, int64_t *dims, const float **data,
                 char *err, size_t errlen);
/* Write t (float32) to path: 0, or -1 with a message. */
int nx_npy_write(const char *path, const struct nx_tensor *t, char *err, size_t errlen);

#endif
