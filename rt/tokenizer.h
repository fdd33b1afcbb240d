/* SentencePiece-style BPE tokenizer over the blob's vocabulary (pieces and
 * scores from the model's own metadata, spaces stored as ' '). Encoding
 * follows SentencePiece's BPE: a dummy-prefix space, one piece per UTF-8
 * character (byte tokens when the character is not in the vocabulary), then
 * repeatedly merge the adjacent pair whose concatenation is the best-scoring
 * piece, leftmost first. No allocation: the caller passes scratch. */
#ifndef NIB_TOKENIZER_H
#define NIB_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"

/* Encode text (len bytes) into ids (capacity max_ids); prepends BOS when
 * add_bos. Needs max_ids >= len + 2. Returns the token count, or -1 when the
 * capacity is too small or the blob's tokenizer is not SentencePiece (every
 * model: nib_tok_encode_req below). */
int nib_tok_encode(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                   uint32_t *ids, size_t max_ids);

/* The same with caller scratch (nib_tok_scratch_footprint(len) bytes,
 * 8-byte aligned): identical ids in O(n log n) instead of O(n^2), so a
 * hostile prompt cannot stall the serving thread. scratch NULL: the plain
 * rescanning merge (the reference the fast one is tested against). */
size_t nib_tok_scratch_footprint(size_t len);
int nib_tok_encode_with(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                        uint32_t *ids, size_t max_ids, void *scratch);

/* Id of a piece, or -1. */
int32_t nib_tok_lookup(const struct nib_blob_view *v, const char *s, size_t len);

/* Text of `id` following `prev` (for the SentencePiece rule that the
 * leading space after BOS is dropped; BPE: the decoder's strip_leading
 * spaces are dropped after BOS or when prev is NIB_TOK_NONE, the start of
 * a text). Byte tokens give their byte; control tokens give nothing.
 * Writes at most cap bytes to out, returns the length. */
size_t nib_tok_decode(const struct nib_blob_view *v, uint32_t prev, uint32_t id, char *out,
                      size_t cap);

/* ---- Every tokenizer model (blob format 4; rt/tokenizer.c dispatches on
 * the section's model: SentencePiece scores as above, or BPE by merge rank
 * with normalizers, pre-tokenizer, byte-level mapping and added tokens;
 * docs/tokenizers.md). ---- */

struct nib_tok_request {
    int add_bos; /* prepend BOS (the model's post-processor rule applies on top) */
    int special; /* control tokens written as text (<|im_start|>) map to their ids */
    /* NULL, or one byte per text byte: nonzero marks bytes that came from a
     * chat message; a control token is matched only where every byte is
     * zero, unless special. */
    const uint8_t *taint;
};

/* Ids a text of len bytes can need at most. */
size_t nib_tok_max_ids(const struct nib_blob_view *v, size_t len);

/* Scratch bytes nib_tok_encode_req needs for a text of up to len bytes. */
size_t nib_tok_req_scratch_footprint(const struct nib_blob_view *v, size_t len);

/* Encode text[0..len) into ids (capacity max_ids >= nib_tok_max_ids).
 * Returns the count; -1 when the capacity is too small; -2 when the text
 * exceeded a pre-tokenizer's step bound (a hostile prompt: refused). */
int nib_tok_encode_req(const struct nib_blob_view *v, const char *text, size_t len,
                       const struct nib_tok_request *rq, uint32_t *ids, size_t max_ids,
                       void *scratch);

/* 1 when id ends generation (the model's end-of-generation set). */
int nib_tok_is_eog(const struct nib_blob_view *v, uint32_t id);

/* The stored bytes of token id (for templates: bos_token, eos_token). */
const uint8_t *nib_tok_piece(const struct nib_blob_view *v, uint32_t id, uint32_t *len);

/* The blob's compiled chat template (rt/chat/chat.h), or NULL. */
const uint8_t *nib_tok_chat_program(const struct nib_blob_view *v, size_t *len);

/* The checks of the tokenizer section that need the runtime (regex
 * programs with nib_re_check, the chat program with nib_chat_check), after
 * nib_blob_open: boot and every tool that opens a blob call it. 0, or -1
 * with the problem in err. */
int nib_tok_check(const struct nib_blob_view *v, char *err, size_t errlen);

#endif
