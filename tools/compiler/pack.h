/* The packer: writes a plan, its weights and the vocabulary as one blob,
 * in the order the runtime streams them, with the CRC32C computed as the
 * bytes go out (multi-gigabyte blobs are never held in memory). */
#ifndef NIB_PACK_H
#define NIB_PACK_H

#include <stdio.h>

#include "tools/compiler/llama_import.h"
#include "tools/compiler/plan.h"

/* Write the blob to out (seekable). Fills tensor offsets/sizes in p.
 * 0, or -1 with a message. */
int nib_pack_blob(struct nib_plan *p, const struct llama_model *m, FILE *out, char *err,
                  size_t errlen);

#endif
