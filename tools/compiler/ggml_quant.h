/* Writing GGUF quantized tensors: f32 rows -> ggml blocks of any type
 * nibble reads (tools/compiler/ggml_dequant.h), so nibble can make K-quant
 * and legacy-type models itself (nib synth, tests) that llama.cpp loads.
 * Plain round-to-nearest with scales from each group's range, not
 * llama.cpp's search: valid blocks of modest quality, a pure function of
 * the input. */
#ifndef NIB_GGML_QUANT_H
#define NIB_GGML_QUANT_H

#include <stdint.h>

/* Quantize n floats (a whole number of the type's blocks) into out
 * (n / blck * bytes). F32, F16 and BF16 convert (round to nearest even).
 * Returns 0, or -1 for an unknown type, a partial block or a non-finite
 * input (nothing meaningful written). */
int ggml_quantize_row(uint32_t type, const float *x, uint64_t n, uint8_t *out);

#endif
