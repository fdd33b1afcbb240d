#include "rt/tokenizer.h"

#include <stdio.h>
#include <string.h>

#include "rt/chat/chat.h"
#include "rt/text/regex.h"
#include "rt/tok/tok_internal.h"

static const uint8_t *piece(const struct nib_blob_view *v, uint32_t id, uint32_t *len)
{
    return nib_tok_piece_at(v, id, len);
}

static int cmp_piece(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
    uint32_t m = alen < blen ? alen : blen;
    int c = memcmp(a, b, m);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* Byte tokens and control tokens are never matched from text. */
static int from_text(const struct nib_blob_view *v, uint32_t id)
{
    uint16_t t = v->tok_entries[id].type;
    return t == NIB_TOK_NORMAL || t == NIB_TOK_USER || t == NIB_TOK_UNUSED;
}

int32_t nib_tok_lookup(const struct nib_blob_view *v, const char *s, size_t len)
{
    uint32_t lo = 0, hi = v->tok->n_vocab;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2, plen;
        const uint8_t *p = piece(v, v->tok_sorted[mid], &plen);
        int c = cmp_piece(p, plen, (const uint8_t *)s, (uint32_t)len);
        if (c == 0) {
            uint32_t id = v->tok_sorted[mid];
            if (from_text(v, id))
                return (int32_t)id;
            /* Equal pieces sit next to each other: look at the neighbours,
             * left of mid, then right (j wraps below 0 to >= n_vocab). */
            for (int step = -1; step <= 1; step += 2) {
                for (uint32_t j = mid + (uint32_t)step; j < v->tok->n_vocab; j += (uint32_t)step) {
                    uint32_t l2, id2 = v->tok_sorted[j];
                    const uint8_t *p2 = piece(v, id2, &l2);
                    if (cmp_piece(p2, l2, (const uint8_t *)s, (uint32_t)len))
                        break;
                    if (from_text(v, id2))
                        return (int32_t)id2;
                }
            }
            return -1;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static size_t utf8_len(uint8_t c)
{
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0)
        return 2;
    if ((c & 0xF0) == 0xE0)
        return 3;
    if ((c & 0xF8) == 0xF0)
        return 4;
    return 1; /* stray continuation or invalid lead byte: one byte on its own */
}

/* Append the pieces for one character: the whole character if it is in
 * the vocabulary, else one byte token per byte (or unk). */
static size_t push_char(const struct nib_blob_view *v, const char *s, size_t n, uint32_t *ids)
{
    int32_t id = nib_tok_lookup(v, s, n);
    if (id >= 0) {
        ids[0] = (uint32_t)id;
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = (v->tok->flags & NIB_TOKF_BYTE_FALLBACK) ? v->tok_byte_ids[(uint8_t)s[i]]
                                                          : v->tok->unk_id;
    return n;
}

/* One character per symbol (the dummy-prefix space first); returns the
 * count, ids[first..n) are the symbols. */
static size_t split_chars(const struct nib_blob_view *v, const char *text, size_t len,
                          uint32_t *ids, size_t n)
{
    n += push_char(v, " ", 1, ids + n); /* SentencePiece's dummy prefix */
    for (size_t i = 0; i < len;) {
        size_t cl = utf8_len((uint8_t)text[i]);
        if (cl > len - i)
            cl = len - i;
        for (size_t j = 1; j < cl; j++)
            if (((uint8_t)text[i + j] & 0xC0) != 0x80)
                cl = j; /* truncated sequence: take what is well-formed */
        n += push_char(v, text + i, cl, ids + n);
        i += cl;
    }
    return n;
}

size_t nib_tok_scratch_footprint(size_t len)
{
    return nib_tok_merge_footprint(len + 2);
}

int nib_tok_encode_with(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                        uint32_t *ids, size_t max_ids, void *scratch)
{
    if (max_ids < len + 2 || v->tok->model != NIB_TOKM_SPM)
        return -1;
    size_t n = 0;
    if (add_bos)
        ids[n++] = v->h->hp.bos_id;
    if (len == 0)
        return (int)n;
    size_t first = n;
    n = split_chars(v, text, len, ids, n);
    n = scratch ? nib_tok_merge_heap(v, ids, first, n, scratch)
                : nib_tok_merge_scan(v, ids, first, n);
    return (int)n;
}

int nib_tok_encode(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                   uint32_t *ids, size_t max_ids)
{
    return nib_tok_encode_with(v, text, len, add_bos, ids, max_ids, NULL);
}

uint32_t nib_bpe_lookup(const struct nib_blob_view *v, const uint8_t *s, size_t n)
{
    /* the first index whose piece is >= s */
    uint32_t lo = 0, hi = v->tok->n_vocab, plen, best = NIB_TOK_NONE;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const uint8_t *p = piece(v, v->tok_sorted[mid], &plen);
        if (cmp_piece(p, plen, s, (uint32_t)n) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < v->tok->n_vocab; lo++) {
        uint32_t id = v->tok_sorted[lo];
        const uint8_t *p = piece(v, id, &plen);
        if (cmp_piece(p, plen, s, (uint32_t)n) != 0)
            break;
        if (!from_text(v, id))
            continue;
        /* an added (user) token wins, as tokenizers.js lets added tokens
         * overwrite the vocabulary; else the lowest id */
        if (best == NIB_TOK_NONE ||
            (v->tok_entries[id].type == NIB_TOK_USER) >
                (v->tok_entries[best].type == NIB_TOK_USER) ||
            ((v->tok_entries[id].type == NIB_TOK_USER) ==
                 (v->tok_entries[best].type == NIB_TOK_USER) &&
             id < best))
            best = id;
    }
    return best;
}

uint32_t nib_bpe_merge_find(const struct nib_blob_view *v, uint32_t left, uint32_t right,
                            uint32_t *rank)
{
    uint32_t slots = v->tok_merge_slots;
    if (slots == 0)
        return NIB_TOK_NONE;
    uint32_t mask = slots - 1, s = nib_tok_merge_hash(left, right) & mask;
    for (uint32_t d = 0; d <= v->tok->merge_max_probe; d++, s = (s + 1) & mask) {
        const struct nib_tok_merge *m = &v->tok_merges[s];
        if (m->left == NIB_TOK_NONE)
            break;
        if (m->left == left && m->right == right) {
            *rank = m->rank;
            return m->result;
        }
    }
    return NIB_TOK_NONE;
}

/* "<0xXX>" (SentencePiece and tokenizers' byte fallback pieces): the byte,
 * or -1. */
static int byte_piece(const uint8_t *p, uint32_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>' || !p[3] || !p[4])
        return -1;
    const char *hi = memchr(hex, p[3], 16), *lo = memchr(hex, p[4], 16);
    return hi && lo ? (int)((hi - hex) * 16 + (lo - hex)) : -1;
}

size_t nib_tok_decode(const struct nib_blob_view *v, uint32_t prev, uint32_t id, char *out,
                      size_t cap)
{
    if (id >= v->tok->n_vocab || cap == 0)
        return 0;
    const struct nib_tok_entry *e = &v->tok_entries[id];
    if (e->type == NIB_TOK_CONTROL || e->type == NIB_TOK_UNKNOWN)
        return 0;
    uint32_t len;
    const uint8_t *p = piece(v, id, &len);
    int b = byte_piece(p, len);
    /* byte tokens: SentencePiece's typed ones; any "<0xXX>" piece for BPE
     * (tokenizers' ByteFallback decoder goes by the text) */
    if (b >= 0 && (v->tok->flags & NIB_TOKF_BYTE_FALLBACK) &&
        (e->type == NIB_TOK_BYTE || v->tok->model == NIB_TOKM_BPE)) {
        out[0] = (char)b;
        return 1;
    }
    if (v->tok->model == NIB_TOKM_SPM) {
        if (prev == v->tok->bos_id && len > 0 && p[0] == ' ') {
            p++;
            len--;
        }
        if (len > cap)
            len = cap;
        memcpy(out, p, len);
        return len;
    }
    /* BPE: the piece with the decoder's replacement (U+2581 -> ' '); at the
     * start of a text, strip_leading spaces dropped */
    const struct nib_tok_header *t = v->tok;
    const uint8_t *from = v->tok_data + t->dec_from_off, *to = v->tok_data + t->dec_to_off;
    size_t o = 0;
    uint32_t strip = (prev == NIB_TOK_NONE || (t->bos_id != NIB_TOK_NONE && prev == t->bos_id))
                         ? t->strip_leading
                         : 0;
    for (uint32_t i = 0; i < len;) {
        const uint8_t *q = p + i;
        size_t ql = 1;
        if (t->dec_from_len && i + t->dec_from_len <= len &&
            memcmp(p + i, from, t->dec_from_len) == 0) {
            q = to;
            ql = t->dec_to_len;
            i += t->dec_from_len;
        } else {
            i++;
        }
        for (size_t j = 0; j < ql; j++) {
            if (strip && o == 0 && q[j] == ' ') {
                strip--;
                continue;
            }
            strip = 0;
            if (o < cap)
                out[o++] = (char)q[j];
        }
    }
    return o;
}

size_t nib_tok_max_ids(const struct nib_blob_view *v, size_t len)
{
    if (v->tok->model == NIB_TOKM_SPM)
        return 2 * len + 3;
    return nib_bpe_max_ids(v, len);
}

size_t nib_tok_req_scratch_footprint(const struct nib_blob_view *v, size_t len)
{
    if (v->tok->model == NIB_TOKM_SPM)
        return nib_tok_scratch_footprint(len);
    return nib_bpe_footprint(v, len);
}

int nib_tok_encode_req(const struct nib_blob_view *v, const char *text, size_t len,
                       const struct nib_tok_request *rq, uint32_t *ids, size_t max_ids,
                       void *scratch)
{
    const struct nib_tok_header *t = v->tok;
    const uint8_t *s = (const uint8_t *)text;
    if (max_ids < nib_tok_max_ids(v, len))
        return -1;
    struct nib_bpe_run r = {.v = v, .ids = ids, .max_ids = max_ids, .scratch = scratch, .len = len};
    if (rq->add_bos && (t->flags & NIB_TOKF_ADD_BOS))
        ids[r.n_ids++] = t->bos_id;
    size_t pos = 0;
    for (;;) {
        size_t ms = len, me = len;
        uint32_t id = 0, flags = 0;
        int found =
            nib_tok_added_find(v, s, len, pos, 0, rq->special, rq->taint, &ms, &me, &id, &flags);
        size_t end = ms;
        if (found && (flags & NIB_TOKA_LSTRIP))
            for (size_t k; end > pos && (k = nib_tok_ws_before(s, end)) > 0;)
                end -= k;
        if (end > pos) {
            if (t->model == NIB_TOKM_SPM) {
                size_t first = r.n_ids;
                r.n_ids = split_chars(v, text + pos, end - pos, ids, r.n_ids);
                r.n_ids = nib_tok_merge_heap(v, ids, first, r.n_ids, scratch);
            } else {
                /* tokens matched in the normalized text: special ones only
                 * when allowed, or when the whole piece is template text */
                r.special = rq->special;
                for (size_t k = pos; !r.special && rq->taint && k < end && !rq->taint[k]; k++)
                    r.special = k + 1 == end;
                nib_bpe_piece(&r, s + pos, end - pos, pos == 0);
                if (r.failed)
                    return r.failed;
            }
        }
        if (!found)
            break;
        if (r.n_ids >= max_ids)
            return -1;
        ids[r.n_ids++] = id;
        pos = me;
        if (flags & NIB_TOKA_RSTRIP)
            for (size_t k; pos < len && (k = nib_tok_ws_at(s, len, pos)) > 0;)
                pos += k;
    }
    if (rq->add_bos && (t->flags & NIB_TOKF_ADD_EOS)) {
        if (r.n_ids >= max_ids)
            return -1;
        ids[r.n_ids++] = t->eos_id;
    }
    return (int)r.n_ids;
}

int nib_tok_is_eog(const struct nib_blob_view *v, uint32_t id)
{
    for (uint32_t i = 0; i < v->tok->n_eog; i++)
        if (v->tok->eog[i] == id)
            return 1;
    return 0;
}

const uint8_t *nib_tok_piece(const struct nib_blob_view *v, uint32_t id, uint32_t *len)
{
    if (id >= v->tok->n_vocab) {
        *len = 0;
        return NULL;
    }
    return piece(v, id, len);
}

const uint8_t *nib_tok_chat_program(const struct nib_blob_view *v, size_t *len)
{
    *len = v->tok_chat ? v->tok_chat_size : 0;
    return v->tok_chat;
}

int nib_tok_check(const struct nib_blob_view *v, char *err, size_t errlen)
{
    char why[200];
    for (uint32_t i = 0; i < v->tok_n_pre; i++) {
        const struct nib_tok_pre_step *s = &v->tok_pre[i];
        if ((s->kind == NIB_TOKP_SPLIT_REGEX || s->kind == NIB_TOKP_BYTELEVEL_REGEX) &&
            nib_re_check(v->tok_data + s->pat_off, s->pat_len, why, sizeof why)) {
            snprintf(err, errlen, "tokenizer pre-tokenizer step %u: bad regex program: %s", i, why);
            return -1;
        }
    }
    if (v->tok_chat && nib_chat_check(v->tok_chat, v->tok_chat_size, why, sizeof why)) {
        snprintf(err, errlen, "chat template program: %s", why);
        return -1;
    }
    return 0;
}
