/* How fuzz_blob turns input bytes into a blob (shared with blob_seeds.c,
 * which checks that the committed heads open this way). A real blob is
 * mostly zero padding (the weights start 2 MiB in), so an input shorter
 * than the blob_size its header claims (up to FUZZ_BLOB_EXPAND_MAX) is the
 * blob's first bytes, zero-extended to that size, and opened without the
 * checksum; any other input is taken as is, checksum included. */
#ifndef NIB_FUZZ_BLOB_EXPAND_H
#define NIB_FUZZ_BLOB_EXPAND_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_format.h"

#define FUZZ_BLOB_EXPAND_MAX (16u << 20)

/* The blob's bytes in 64-byte-aligned memory (free()), *n of them, or NULL
 * when out of memory; *expanded is 1 for a zero-extended head. */
static inline uint8_t *fuzz_blob_expand(const uint8_t *data, size_t size, size_t *n, int *expanded)
{
    uint64_t claimed = 0;
    if (size >= sizeof(struct nib_blob_header))
        memcpy(&claimed, data + offsetof(struct nib_blob_header, blob_size), 8);
    *expanded = claimed > size && claimed <= FUZZ_BLOB_EXPAND_MAX;
    *n = *expanded ? (size_t)claimed : size;
    uint8_t *buf = aligned_alloc(64, (*n + 64) & ~(size_t)63);
    if (buf) {
        memset(buf, 0, *n);
        if (size)
            memcpy(buf, data, size);
    }
    return buf;
}

#endif
