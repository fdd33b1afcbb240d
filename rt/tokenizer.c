#include "rt/tokenizer.h"

#include <string.h>

static const uint8_t *piece(const struct nib_blob_view *v, uint32_t id, uint32_t *len)
{
    const struct nib_tok_entry *e = &v->tok_entries[id];
    *len = e->len;
    return v->tok_bytes + e->offset;
}

static int cmp_piece(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
    uint32_t m = alen < blen ? alen : blen;
    int c = memcmp(a, b, m);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

int32_t nib_tok_lookup(const struct nib_blob_view *v, const char *s, size_t len)
{
    uint32_t lo = 0, hi = v->tok->n_vocab;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2, plen;
        const uint8_t *p = piece(v, v->tok_sorted[mid], &plen);
        int c = cmp_piece(p, plen, (const uint8_t *)s, (uint32_t)len);
        if (c == 0) {
            /* Byte tokens and control tokens are never matched from text. */
            uint32_t id = v->tok_sorted[mid];
            uint16_t t = v->tok_entries[id].type;
            if (t == NIB_TOK_NORMAL || t == NIB_TOK_USER || t == NIB_TOK_UNUSED)
                return (int32_t)id;
            /* Equal pieces sit next to each other: look at the neighbours. */
            for (uint32_t j = mid; j-- > 0;) {
                uint32_t l2;
                const uint8_t *p2 = piece(v, v->tok_sorted[j], &l2);
                if (cmp_piece(p2, l2, (const uint8_t *)s, (uint32_t)len))
                    break;
                t = v->tok_entries[v->tok_sorted[j]].type;
                if (t == NIB_TOK_NORMAL || t == NIB_TOK_USER || t == NIB_TOK_UNUSED)
                    return (int32_t)v->tok_sorted[j];
            }
            for (uint32_t j = mid + 1; j < v->tok->n_vocab; j++) {
                uint32_t l2;
                const uint8_t *p2 = piece(v, v->tok_sorted[j], &l2);
                if (cmp_piece(p2, l2, (const uint8_t *)s, (uint32_t)len))
                    break;
                t = v->tok_entries[v->tok_sorted[j]].type;
                if (t == NIB_TOK_NORMAL || t == NIB_TOK_USER || t == NIB_TOK_UNUSED)
                    return (int32_t)v->tok_sorted[j];
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
        ids[i] = v->tok->byte_fallback ? v->tok->byte_base + (uint8_t)s[i] : v->tok->unk_id;
    return n;
}

int nib_tok_encode(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                   uint32_t *ids, size_t max_ids)
{
    if (max_ids < len + 2)
        return -1;
    size_t n = 0;
    if (add_bos)
        ids[n++] = v->h->hp.bos_id;
    if (len == 0)
        return (int)n;
    size_t first = n;
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
    /* Merge the best-scoring adjacent pair until no pair is a piece. */
    char buf[2 * NIB_MAX_PIECE];
    for (;;) {
        float best = -1e30f;
        int32_t best_id = -1;
        size_t best_i = 0;
        for (size_t i = first; i + 1 < n; i++) {
            uint32_t la, lb;
            const uint8_t *a = piece(v, ids[i], &la), *b = piece(v, ids[i + 1], &lb);
            if (v->tok_entries[ids[i]].type == NIB_TOK_BYTE ||
                v->tok_entries[ids[i + 1]].type == NIB_TOK_BYTE)
                continue;
            memcpy(buf, a, la);
            memcpy(buf + la, b, lb);
            int32_t id = nib_tok_lookup(v, buf, la + lb);
            if (id >= 0 && v->tok_entries[id].score > best) {
                best = v->tok_entries[id].score;
                best_id = id;
                best_i = i;
            }
        }
        if (best_id < 0)
            break;
        ids[best_i] = (uint32_t)best_id;
        memmove(ids + best_i + 1, ids + best_i + 2, (n - best_i - 2) * sizeof ids[0]);
        n--;
    }
    return (int)n;
}

size_t nib_tok_decode(const struct nib_blob_view *v, uint32_t prev, uint32_t id, char *out,
                      size_t cap)
{
    if (id >= v->tok->n_vocab || cap == 0)
        return 0;
    const struct nib_tok_entry *e = &v->tok_entries[id];
    if (e->type == NIB_TOK_CONTROL || e->type == NIB_TOK_UNKNOWN)
        return 0;
    if (e->type == NIB_TOK_BYTE && v->tok->byte_fallback && id >= v->tok->byte_base &&
        id - v->tok->byte_base < 256) {
        out[0] = (char)(id - v->tok->byte_base);
        return 1;
    }
    uint32_t len;
    const uint8_t *p = piece(v, id, &len);
    if (prev == v->h->hp.bos_id && len > 0 && p[0] == ' ') {
        p++;
        len--;
    }
    if (len > cap)
        len = cap;
    memcpy(out, p, len);
    return len;
}
