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
/* One `--data NAME=FILE.npy` argument of nib onnx-run: nx_data_open
 * splits it (name, name_len); nx_data_load maps the file and parses it,
 * its shape required to be exactly rank/dims (data then points at its
 * floats); nx_data_close unmaps. 0, or -1 with a message naming the
 * argument. */
struct nx_data_arg {
    const char *arg, *name, *path;
    size_t name_len;
    const uint8_t *buf;
    size_t size;
    const float *data;
};
int nx_data_open(struct nx_data_arg *a, const char *arg, char *err, size_t errlen);
int nx_data_load(struct nx_data_arg *a, uint32_t rank, const int64_t *dims, char *err,
                 size_t errlen);
void nx_data_close(struct nx_data_arg *a);

/* Write t (float32) to path: 0, or -1 with a message. */
int nx_npy_write(const char *path, const struct nx_tensor *t, char *err, size_t errlen);

#endif
