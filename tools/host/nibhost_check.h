/* libnibhost's check of what an appliance hands over, as a pure function
 * (private: not installed; the fuzz target tests/fuzz/fuzz_hostcheck.c
 * calls it). */
#ifndef NIBHOST_CHECK_H
#define NIBHOST_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "proto/shm_layout.h"

/* Check a copy s of the header memfd's header against the ATTACHED reply
 * (host_index, epoch) and the sizes of the two memfds received: identity,
 * version, limits, and a ring geometry whose every slot and area lies
 * inside ring_size. 0, or -1 with "... from WHO: ..." in err. Pure. */
int nib_host_check_header(const struct nib_shm_header *s, uint32_t host_index, uint64_t epoch,
                          uint64_t hdr_size, uint64_t ring_size, const char *who, char *err,
                          size_t errlen);

/* Check a vision model's tensor table t (NIB_TENSOR_MAX records copied
 * from the header memfd) against its header s (already checked): every
 * record named, of its direction, a known element type, rank and dims
 * whose product is its bytes, 64-byte aligned, in order without overlap
 * inside its area, the last of each ending at inputs_len / outputs_len.
 * 0, or -1 with "... from WHO: ..." in err. Pure. */
int nib_host_check_tensors(const struct nib_shm_header *s, const struct nib_shm_tensor *t,
                           const char *who, char *err, size_t errlen);

#endif
