/* Plan executor: runs the blob's flat op list for one token. No graph
 * walking, no allocation: every operand address is base + offset, checked
 * once at boot by nib_blob_open. */
#ifndef NIB_EXEC_H
#define NIB_EXEC_H

#include <stdint.h>

#include "model_blob/blob_view.h"

struct nib_exec {
    const struct nib_blob_view *v;
    uint8_t *mem; /* act_size + kv_size bytes, caller-owned */
};

/* Run the whole plan for `token` at position `pos`. Returns a pointer to
 * the vocab_size logits inside mem, or NULL when token >= vocab_size or
 * pos >= ctx_len. */
const float *nib_exec_token(struct nib_exec *e, uint32_t token, uint32_t pos);

#endif
