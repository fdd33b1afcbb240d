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
        ids[i] = v->tok->byte_fallback ? v->tok->byte_base + (uint8_t)s[i] : v->tok->unk_id;
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

/* The piece two adjacent symbols merge into, or -1. Byte tokens never
 * merge; a pair scoring at or below -1e30 never wins. */
static int32_t pair_piece(const struct nib_blob_view *v, uint32_t a, uint32_t b)
{
    if (v->tok_entries[a].type == NIB_TOK_BYTE || v->tok_entries[b].type == NIB_TOK_BYTE)
        return -1;
    char buf[2 * NIB_MAX_PIECE];
    uint32_t la, lb;
    const uint8_t *pa = piece(v, a, &la), *pb = piece(v, b, &lb);
    memcpy(buf, pa, la);
    memcpy(buf + la, pb, lb);
    int32_t id = nib_tok_lookup(v, buf, la + lb);
    return id >= 0 && v->tok_entries[id].score > -1e30f ? id : -1;
}

/* Reference merge: rescan every pair for the best score, leftmost first,
 * until no pair is a piece. O(n^2) per merge. */
static size_t merge_scan(const struct nib_blob_view *v, uint32_t *ids, size_t first, size_t n)
{
    for (;;) {
        float best = -1e30f;
        int32_t best_id = -1;
        size_t best_i = 0;
        for (size_t i = first; i + 1 < n; i++) {
            int32_t id = pair_piece(v, ids[i], ids[i + 1]);
            if (id >= 0 && v->tok_entries[id].score > best) {
                best = v->tok_entries[id].score;
                best_id = id;
                best_i = i;
            }
        }
        if (best_id < 0)
            return n;
        ids[best_i] = (uint32_t)best_id;
        memmove(ids + best_i + 1, ids + best_i + 2, (n - best_i - 2) * sizeof ids[0]);
        n--;
    }
}

/* The same merges in O(n log n): candidate pairs in a max-heap ordered by
 * (score, then leftmost), symbols in a linked list; an entry whose symbols
 * changed since it was pushed is skipped when it surfaces. */
struct tok_cand {
    float score;
    uint32_t l, r;   /* symbol indices */
    uint32_t lv, rv; /* their versions when pushed */
    int32_t id;
};

struct tok_work {
    int32_t *next, *prev;
    uint32_t *ver; /* bumped when a symbol changes; UINT32_MAX once merged away */
    struct tok_cand *heap;
    size_t n_heap;
};

static int cand_before(const struct tok_cand *a, const struct tok_cand *b)
{
    return a->score > b->score || (a->score == b->score && a->l < b->l);
}

static void heap_push(struct tok_work *w, struct tok_cand c)
{
    size_t i = w->n_heap++;
    while (i > 0 && cand_before(&c, &w->heap[(i - 1) / 2])) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = c;
}

static struct tok_cand heap_pop(struct tok_work *w)
{
    struct tok_cand top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cand_before(&w->heap[c + 1], &w->heap[c]))
            c++;
        if (!cand_before(&w->heap[c], &last))
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

static void push_pair(const struct nib_blob_view *v, struct tok_work *w, const uint32_t *ids,
                      int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return;
    int32_t id = pair_piece(v, ids[l], ids[r]);
    if (id < 0)
        return;
    struct tok_cand c = {
        v->tok_entries[id].score, (uint32_t)l, (uint32_t)r, w->ver[l], w->ver[r], id};
    heap_push(w, c);
}

size_t nib_tok_scratch_footprint(size_t len)
{
    size_t n = len + 2;
    /* each merge pushes at most 2 candidates: n - 1 + 2n entries bound the heap */
    return n * (2 * sizeof(int32_t) + sizeof(uint32_t)) + 3 * n * sizeof(struct tok_cand) + 64;
}

static size_t merge_heap(const struct nib_blob_view *v, uint32_t *ids, size_t first, size_t n,
                         void *scratch)
{
    struct tok_work w;
    uint8_t *p = scratch;
    w.next = (int32_t *)(void *)p;
    w.prev = w.next + n;
    w.ver = (uint32_t *)(w.prev + n);
    w.heap = (struct tok_cand *)(void *)(((uintptr_t)(w.ver + n) + 7) & ~(uintptr_t)7);
    w.n_heap = 0;
    for (size_t i = first; i < n; i++) {
        w.next[i] = i + 1 < n ? (int32_t)(i + 1) : -1;
        w.prev[i] = i > first ? (int32_t)(i - 1) : -1;
        w.ver[i] = 0;
    }
    for (size_t i = first; i + 1 < n; i++)
        push_pair(v, &w, ids, (int32_t)i, (int32_t)(i + 1));
    while (w.n_heap) {
        struct tok_cand c = heap_pop(&w);
        if (w.ver[c.l] != c.lv || w.ver[c.r] != c.rv || w.next[c.l] != (int32_t)c.r)
            continue; /* stale: a neighbour merged since */
        ids[c.l] = (uint32_t)c.id;
        w.ver[c.l]++;
        w.ver[c.r] = UINT32_MAX;
        w.next[c.l] = w.next[c.r];
        if (w.next[c.r] >= 0)
            w.prev[w.next[c.r]] = (int32_t)c.l;
        push_pair(v, &w, ids, w.prev[c.l], (int32_t)c.l);
        push_pair(v, &w, ids, (int32_t)c.l, w.next[c.l]);
    }
    size_t out = first;
    for (int32_t i = n > first ? (int32_t)first : -1; i >= 0; i = w.next[i])
        ids[out++] = ids[i];
    return out;
}

int nib_tok_encode_with(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                        uint32_t *ids, size_t max_ids, void *scratch)
{
    if (max_ids < len + 2)
        return -1;
    size_t n = 0;
    if (add_bos)
        ids[n++] = v->h->hp.bos_id;
    if (len == 0)
        return (int)n;
    size_t first = n;
    n = split_chars(v, text, len, ids, n);
    n = scratch ? merge_heap(v, ids, first, n, scratch) : merge_scan(v, ids, first, n);
    return (int)n;
}

int nib_tok_encode(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                   uint32_t *ids, size_t max_ids)
{
    return nib_tok_encode_with(v, text, len, add_bos, ids, max_ids, NULL);
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
