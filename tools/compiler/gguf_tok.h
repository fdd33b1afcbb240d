/* The GGUF tokenizer importer: tokenizer.ggml.* of a validated GGUF into a
 * struct tok_spec (tools/compiler/tok_spec.h).
 *
 * model "llama" (SentencePiece): pieces, scores and token types as nibble
 * has always read them (TOK_MODEL_SPM); U+2581 in a piece becomes ' ', the
 * form the runtime matches text in; byte tokens keep their "<0xXX>" text.
 * model "gpt2" (byte-level BPE, TOK_MODEL_BPE): normal pieces mapped back
 * from GPT-2's printable alphabet to raw bytes, control and user-defined
 * tokens verbatim, tokenizer.ggml.merges as ranks, and the pre-tokenizer
 * named by tokenizer.ggml.pre (rt/text/pretok_patterns.h; an unknown name is
 * refused with the list of known ones). */
#ifndef NIB_GGUF_TOK_H
#define NIB_GGUF_TOK_H

#include <stddef.h>

#include "tools/compiler/gguf.h"
#include "tools/compiler/tok_spec.h"

/* 0 with *out filled (tok_spec_free it), or -1 with a message naming the
 * key or token at fault in err and nothing to free. */
int gguf_tok_load(const struct gguf_file *g, struct tok_spec *out, char *err, size_t errlen);

#endif
