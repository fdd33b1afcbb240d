/* Lies told to the blob validator by the blob tests: `work` is a mutable
 * copy of a valid blob; a test edits it, and blob_lie_open reseals it (the
 * checksum recomputed, so only the lie can be refused), opens it as the
 * appliance does, and restores the copy for the next lie. */
#ifndef NIB_TEST_BLOB_LIE_H
#define NIB_TEST_BLOB_LIE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model_blob/blob_view.h"

static inline int blob_lie_open(const uint8_t *blob, uint8_t *work, size_t size, char *err,
                                size_t errlen)
{
    struct nib_blob_view v;
    ((struct nib_blob_header *)(void *)work)->crc32c = nib_blob_crc(work, size);
    int rc = nib_blob_open(&v, work, size, 1, err, errlen);
    memcpy(work, blob, size);
    return rc;
}

/* The edited copy is refused, and the message names `what` (err: a char
 * array). */
#define BLOB_LIE_REFUSED(blob, work, size, err, what)                                              \
    do {                                                                                           \
        ck_assert_int_eq(blob_lie_open(blob, work, size, err, sizeof err), -1);                    \
        ck_assert_msg(strstr(err, what) != NULL, "error '%s' does not say '%s'", err, what);       \
    } while (0)

#endif
