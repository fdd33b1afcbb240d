/* Validated, typed view of a blob held in memory. nib_blob_open checks every
 * field, size, offset and the checksum before handing out pointers; code that
 * holds a nib_blob_view may index the tables it describes without further
 * checks. Shared by the toolchain (nib inspect) and the appliance's boot. */
#ifndef NIB_BLOB_VIEW_H
#define NIB_BLOB_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_format.h"

struct nib_blob_view {
    const uint8_t *base;
    uint64_t size;
    const struct nib_blob_header *h;
    const struct nib_tensor_rec *tensors;
    const struct nib_op *ops;
    const struct nib_tok_header *tok;
    const struct nib_tok_entry *tok_entries;
    const uint32_t *tok_sorted; /* ids sorted by piece bytes */
    const uint8_t *tok_bytes;
    uint64_t tok_bytes_size;
    const uint8_t *weights;
    uint64_t mem_size; /* act_size + kv_size */
};

/* Validate blob (size bytes, 64-byte aligned) and fill v. Returns 0, or -1
 * with a message naming the problem in err. check_crc = 0 skips only the
 * checksum (used by tools that report it separately). */
int nib_blob_open(struct nib_blob_view *v, const void *blob, uint64_t size, int check_crc,
                  char *err, size_t errlen);

/* Checksum of the blob as stored (bytes NIB_CRC_START..size). */
uint32_t nib_blob_crc(const void *blob, uint64_t size);

/* Bytes a tensor of this dtype and shape must occupy; 0 if unknown. */
uint64_t nib_tensor_bytes(uint32_t dtype, uint32_t rows, uint32_t cols, uint32_t group);

const char *nib_dtype_name(uint32_t dtype);
const char *nib_op_name(uint32_t code);

static inline const float *nib_tensor_f32(const struct nib_blob_view *v, uint32_t t)
{
    return (const float *)(const void *)(v->weights + v->tensors[t].offset);
}

#endif
