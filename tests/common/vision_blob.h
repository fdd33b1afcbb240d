/* Identity vision blobs for tests (blob format 6, docs/blob-format.md):
 * no ops, every output aliasing an input, so an answer must equal the
 * request byte for byte. Made here until `nib compile` writes real ones. */
#ifndef NIB_TEST_VISION_BLOB_H
#define NIB_TEST_VISION_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_format.h"

/* Bytes of every blob made here (the weights section starts at 2 MiB). */
#define NIB_TEST_VISION_BLOB_SIZE NIB_WEIGHT_ALIGN

enum nib_test_vision {
    /* input "image" f32 1x3x8x8; output "same" aliasing it */
    NIB_TEST_VISION_ONE = 1,
    /* inputs "a" f32 1x3x8x8 and "b" u8 2x5; outputs "b_out" (aliasing b)
     * then "a_out" (aliasing a): the outputs' order differs */
    NIB_TEST_VISION_TWO = 2,
};

/* The io table of variant `which` into io (NIB_IO_MAX records): returns
 * n_io, and the arena bytes in *act_size. */
uint32_t nib_test_vision_io(int which, struct nib_io_rec *io, uint64_t *act_size);

/* Write a whole blob with io table io[0..n_io) into buf (64-byte aligned,
 * NIB_TEST_VISION_BLOB_SIZE bytes, zeroed here), with its CRC. n_io and
 * the records are written as given, however wrong (the validator's tests
 * use that). Returns the blob's size. */
size_t nib_test_vision_blob_io(uint8_t *buf, const struct nib_io_rec *io, uint32_t n_io,
                               uint64_t act_size);

/* The header of a hand-built vision blob: n_tensors tensor records at
 * byte 256, then the plan's n_ops ops (64-byte aligned) and the n_io io
 * records; act_size bytes of runtime memory, the worker scratch at
 * [wscratch_off, + wscratch_size) (0, 0: none); weights_size bytes of
 * weights at NIB_WEIGHT_ALIGN, blob_size the end of them. The caller
 * writes the sections and the CRC. */
struct nib_blob_header nib_test_vision_header(uint32_t n_tensors, uint32_t n_ops, uint32_t n_io,
                                              uint64_t act_size, uint32_t wscratch_off,
                                              uint32_t wscratch_size, uint64_t weights_size);

/* The blob of variant `which` into buf (as above). */
size_t nib_test_vision_blob(uint8_t *buf, int which);

#endif
