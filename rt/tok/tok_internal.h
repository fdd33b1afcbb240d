/* Pieces of the runtime tokenizer shared by its files (rt/tokenizer.c and
 * rt/tok/): vocabulary lookup, the merge loop both models use, the
 * added-token trie and the BPE pipeline. Not a public interface. */
#ifndef NIB_TOK_INTERNAL_H
#define NIB_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"

static inline const uint8_t *nib_tok_piece_at(const struct nib_blob_view *v, uint32_t id,
                                              uint32_t *len)
{
    const struct nib_tok_entry *e = &v->tok_entries[id];
    *len = e->len;
    return v->tok_bytes + e->offset;
}

/* BPE: the id text s[0..n) is as a token matched from text (not a control
 * or byte token; an added USER token first, else the lowest id), or
 * NIB_TOK_NONE. */
uint32_t nib_bpe_lookup(const struct nib_blob_view *v, const uint8_t *s, size_t n);

/* BPE: the merge of (left, right): its result with *rank, or NIB_TOK_NONE. */
uint32_t nib_bpe_merge_find(const struct nib_blob_view *v, uint32_t left, uint32_t right,
                            uint32_t *rank);

/* The merge loop of both models over ids[first..n) (symbols; NIB_TOK_NONE
 * never merges): SPM merges the best-scoring pair piece, BPE the lowest
 * merge rank, leftmost first on ties. Heap version in O(n log n) with
 * scratch of nib_tok_merge_footprint(n - first) bytes; scan version
 * O(n^2), the reference. Both return the new end. */
size_t nib_tok_merge_footprint(size_t n);
size_t nib_tok_merge_heap(const struct nib_blob_view *v, uint32_t *ids, size_t first, size_t n,
                          void *scratch);
size_t nib_tok_merge_scan(const struct nib_blob_view *v, uint32_t *ids, size_t first, size_t n);

/* Added tokens: the leftmost-longest token allowed at or after byte from of
 * text[0..n) (a SPECIAL one only when special, or where every byte of it
 * has taint 0; taint NULL: every byte tainted). normalized: the tokens
 * matched in normalized text (NIB_TOKA_NORMALIZED), else the others.
 * 1 with [*ms, *me), its node flags and id; 0 when none. */
int nib_tok_added_find(const struct nib_blob_view *v, const uint8_t *text, size_t n, size_t from,
                       int normalized, int special, const uint8_t *taint, size_t *ms, size_t *me,
                       uint32_t *id, uint32_t *flags);

/* Whitespace as JavaScript's trim() sees it (lstrip/rstrip): length of the
 * whitespace character ending at (before) / starting at s[i], or 0. */
size_t nib_tok_ws_before(const uint8_t *s, size_t i);
size_t nib_tok_ws_at(const uint8_t *s, size_t n, size_t i);

/* One UTF-8 character at s[0..n) (n > 0): its length, 1 for each byte of
 * an ill-formed sequence; *cp is the code point (the byte for ill-formed). */
size_t nib_tok_utf8(const uint8_t *s, size_t n, uint32_t *cp);

/* The BPE pipeline over one text piece between added tokens (normalizers,
 * pre-tokenizer, model). */
struct nib_bpe_run {
    const struct nib_blob_view *v;
    uint32_t *ids;
    size_t n_ids, max_ids;
    uint8_t *scratch; /* nib_bpe_footprint(v, len) bytes */
    size_t len;       /* the text length the scratch was sized for */
    int special;      /* special added tokens allowed in this piece */
    int failed;       /* -1: ids full; -2: a step bound ran out */
};
size_t nib_bpe_footprint(const struct nib_blob_view *v, size_t len);
size_t nib_bpe_max_ids(const struct nib_blob_view *v, size_t len);
void nib_bpe_piece(struct nib_bpe_run *r, const uint8_t *text, size_t n, int first);

#endif
