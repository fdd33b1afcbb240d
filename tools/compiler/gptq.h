/* Error-feedback quantization of one matrix in the GPTQ manner (`nib
 * compile --method gptq`, docs/accuracy.md).
 *
 * For a weight matrix W (rows x cols) whose inputs x have the calibration
 * Hessian H = sum x x^T (cols x cols), the columns of every row are
 * quantized in order 0..cols-1; after column i the rounding error, scaled
 * by the inverse Hessian's Cholesky factor, is subtracted from columns
 * i+1.. of the same row, so later columns compensate for earlier ones in
 * the directions the inputs actually take (minimising the layer's output
 * error tr((W-Q) H (W-Q)^T) greedily). H is damped first: damp * mean of
 * its diagonal is added to the diagonal; an input channel that was never
 * non-zero gets a diagonal of 1 and takes no error.
 *
 * Group parameters (scale, zero point or minimum) are chosen at the first
 * column of each group from the group's current (updated) values with
 * nib_qgroup_choose(l, NIB_QM_SEARCH, ..., importance = the group's
 * undamped diagonal of H); a per-channel layout chooses its one scale per
 * row from the whole row before any column. Codes are nib_qgroup_code's.
 *
 * Deterministic: the same W, H and options give the same bytes on every
 * machine and for any thread count (rows are independent; every sum runs
 * in a fixed order; the compiler library is built without FP contraction). */
#ifndef NIB_GPTQ_H
#define NIB_GPTQ_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/qformat.h"

#define NIB_GPTQ_DAMP 0.1

struct nib_gptq_opts {
    double damp;      /* fraction of the mean diagonal added (NIB_GPTQ_DAMP) */
    uint32_t threads; /* worker threads (>= 1); results do not depend on it */
};

/* Quantize w (l->rows x l->cols floats, row-major; overwritten: used as
 * scratch) into out (l->size bytes, fully written, padding included, as
 * nib_quantize writes it), with h (l->cols x l->cols doubles, symmetric,
 * row-major; overwritten). Non-finite weights are refused. 0, or -1 with a
 * message (out of memory, non-finite values, a Hessian that is not
 * positive definite even after damping). */
int nib_gptq_quantize(const struct nib_qlayout *l, float *w, double *h,
                      const struct nib_gptq_opts *o, uint8_t *out, char *err, size_t errlen);

#endif
