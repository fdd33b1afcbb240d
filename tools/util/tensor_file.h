/* Input files -> the exact bytes of a vision model's io record
 * (model_blob/blob_format.h struct nib_io_rec), and outputs -> .npy.
 *
 * Accepted inputs (docs/vision.md, "Input files"):
 *   .npy     float32 ('<f4') or uint8 ('|u1'), C order, the record's dtype
 *            and exactly its dims;
 *   raw      any other file: exactly the record's byte count, copied;
 *   PPM/PGM  binary P6 / P5, maxval 255;
 *   PNG      8-bit gray, RGB, RGBA or palette (libpng; alpha composited
 *            onto white).
 * An image needs a record of dims [1,3,H,W] or [1,1,H,W] and exactly H x W
 * pixels. It is written planar (NCHW): u8 as is, f32 as value / 255 (the
 * blob's compiled normalisation does the rest). A gray image fills all
 * three planes of a colour input; a colour image for a gray input is
 * refused. Every file is untrusted: a malformed one is a message, never a
 * crash (tests/fuzz/fuzz_tensor_file.c). */
#ifndef NIB_TENSOR_FILE_H
#define NIB_TENSOR_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_format.h"
#include "tools/util/tensor_image.h"

enum nib_tensor_fmt {
    NIB_TF_AUTO = 0, /* from the file's first bytes: .npy, PNG, P5/P6, else raw */
    NIB_TF_NPY,
    NIB_TF_RAW,
    NIB_TF_PNM,
    NIB_TF_PNG,
};

/* Flags of nib_tensor_decode / nib_tensor_load: NIB_TF_BGR (tensor_image.h). */

/* The format a file's bytes say they are (NIB_TF_RAW when none). */
enum nib_tensor_fmt nib_tensor_sniff(const uint8_t *buf, size_t size);

/* Decode size bytes of a file in format fmt into out, rec->bytes bytes laid
 * out as rec says. 0, or -1 with a message (out then undefined). */
int nib_tensor_decode(const uint8_t *buf, size_t size, enum nib_tensor_fmt fmt, unsigned flags,
                      const struct nib_io_rec *rec, uint8_t *out, char *err, size_t errlen);

/* The same for a file on disk (format sniffed); messages name the file. */
int nib_tensor_load(const char *path, unsigned flags, const struct nib_io_rec *rec, uint8_t *out,
                    char *err, size_t errlen);

/* Write rec->bytes bytes (an output as the appliance returns it) to path as
 * .npy: '<f4' or '|u1', C order, rec's dims. 0, or -1 with a message. */
int nib_npy_write(const char *path, const struct nib_io_rec *rec, const uint8_t *bytes, char *err,
                  size_t errlen);

#endif
