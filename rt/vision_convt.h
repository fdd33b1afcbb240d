/* The transposed convolution of a vision plan (rt/vision_convt.c). */
#ifndef NIB_VISION_CONVT_H
#define NIB_VISION_CONVT_H

#include <stdint.h>

#include "model_blob/blob_format.h"

/* Output rows [b, e) of the transposed convolution p: x the NHWC input,
 * w the packed weights, bias NULL or c_out values; y gets the sums and
 * bias only (the caller applies the activation and post step). */
void nib_vision_convt(const struct nib_vconv_params *p, const float *x, const float *w,
                      const float *bias, float *y, uint32_t b, uint32_t e);

#endif
