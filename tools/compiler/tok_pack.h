/* The tokenizer section of a blob (format 4, docs/blob-format.md) packed
 * from a struct tok_spec and the compiled chat program: what the runtime
 * (rt/tokenizer.c) reads and model_blob/blob_validate.c checks. */
#ifndef NIB_TOK_PACK_H
#define NIB_TOK_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "tools/compiler/tok_spec.h"

/* Pack s (with chat_prog[0..chat_len), NULL for none) into *sec, a
 * malloc'd, 64-byte aligned buffer of *sec_len bytes. 0, or -1 with a
 * message naming the problem (a regex nibble cannot run, a table too
 * large, an id outside the vocabulary). */
int tok_pack(const struct tok_spec *s, const uint8_t *chat_prog, size_t chat_len, uint8_t **sec,
             size_t *sec_len, char *err, size_t errlen);

/* The GPT-2 split of a ByteLevel pre-tokenizer with use_regex, as
 * tokenizers.js writes it. */
extern const char tok_gpt2_regex[];

#endif
