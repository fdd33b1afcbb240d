/* Error-feedback (GPTQ) codes for a vision node's per-channel 4-bit
 * weights (docs/vision.md, "Quantisation"): the decoder's GPTQ
 * (tools/compiler/gptq.h) run on the q4c layout, its codes and scales read
 * back in the form vq_quantize_rows gives them, so the vision packer
 * (nib_qconv_pack) takes either. */
#ifndef NIB_VISION_GPTQ_H
#define NIB_VISION_GPTQ_H

#include <stddef.h>
#include <stdint.h>

/* Codes q in [-8, 7] and per-row scales of rows x k weights w (row-major,
 * the columns in the order of h), w ~ scale[r] * q, chosen by GPTQ against
 * the input Hessian h (k x k doubles, sum of x x^T over calibration
 * inputs; overwritten). Deterministic for any thread count. 0, or -1 with
 * a message. */
int vq_gptq_rows(const float *w, uint32_t rows, uint32_t k, double *h, uint32_t threads, int8_t *q,
                 float *scale, char *err, size_t errlen);

#endif
