/* Images (PPM/PGM, PNG) -> a vision input record's planar bytes: the half
 * of tensor_file.h that knows pixels. */
#ifndef NIB_TENSOR_IMAGE_H
#define NIB_TENSOR_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_format.h"

#define NIB_TF_BGR 1u /* images: planes in B, G, R order (PaddleOCR's models take BGR) */

/* Binary P6 (RGB) or P5 (gray), maxval 255, exactly one image. */
int nib_image_pnm(const uint8_t *buf, size_t size, unsigned flags, const struct nib_io_rec *rec,
                  uint8_t *out, char *err, size_t errlen);
/* PNG through libpng's simplified API (8-bit; alpha onto white). */
int nib_image_png(const uint8_t *buf, size_t size, unsigned flags, const struct nib_io_rec *rec,
                  uint8_t *out, char *err, size_t errlen);

#endif
