/* nib onnx-run --blob: a compiled vision blob run in this process. */
#ifndef NIB_ONNX_RUN_BLOB_H
#define NIB_ONNX_RUN_BLOB_H

#include <stddef.h>
#include <stdint.h>

/* data: NAME=FILE.npy for every input; outputs to out_dir/K.npy (NULL:
 * printed only). isa: scalar, avx2, neon, or NULL/auto (the best here).
 * 0, or -1 with a message. */
int nib_onnx_run_blob(const char *path, const char *const *data, uint32_t n_data,
                      const char *out_dir, uint32_t workers, const char *isa, char *err,
                      size_t errlen);

#endif
