/* A model's tokenizer for the tools that run it without the weights (nib
 * tokenize, nib bench --tokenizer): from a blob (validated), or built in
 * memory from a GGUF or a Hugging Face tokenizer.json / directory (import,
 * tok_pack, validation: the section nib compile would write). In every
 * case nib_tok_check has passed, so the runtime may run it. */
#ifndef NIB_TOK_LOAD_H
#define NIB_TOK_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"

struct tok_loaded {
    struct nib_blob_view v; /* the tokenizer fields are set (v.h only for a blob) */
    const uint8_t *map;     /* the mapped file, or NULL */
    size_t map_size;
    uint8_t *sec; /* a section built in memory, or NULL */
};

/* 0, or -1 with a message naming the file and the problem. */
int tok_load(const char *path, struct tok_loaded *t, char *err, size_t errlen);
void tok_unload(struct tok_loaded *t);

/* Encode text with any model's tokenizer (nib_tok_encode_req, scratch
 * allocated here: for tools, not the serving thread): BOS as the model's
 * rule says when add_bos, no special tokens. The count, or -1 when it
 * does not fit cap ids or the text is refused. */
int tok_encode_into(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                    uint32_t *ids, size_t cap);

#endif
