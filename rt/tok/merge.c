/* The merge loop of both tokenizer models: SentencePiece merges the
 * adjacent pair whose concatenation is the best-scoring piece, BPE the
 * pair of lowest merge rank; leftmost first on ties. One heap serves both:
 * a candidate's key is the score (SPM) or minus the rank (BPE, ranks below
 * 2^24 are exact floats), higher first. */
#include <string.h>

#include "rt/tok/tok_internal.h"
#include "rt/tokenizer.h"

/* Byte tokens never merge in SPM; a pair scoring at or below -1e30 never
 * wins. */
static int32_t spm_pair(const struct nib_blob_view *v, uint32_t a, uint32_t b)
{
    if (v->tok_entries[a].type == NIB_TOK_BYTE || v->tok_entries[b].type == NIB_TOK_BYTE)
        return -1;
    char buf[2 * NIB_MAX_PIECE];
    uint32_t la, lb;
    const uint8_t *pa = nib_tok_piece_at(v, a, &la), *pb = nib_tok_piece_at(v, b, &lb);
    memcpy(buf, pa, la);
    memcpy(buf + la, pb, lb);
    int32_t id = nib_tok_lookup(v, buf, la + lb);
    return id >= 0 && v->tok_entries[id].score > -1e30f ? id : -1;
}

/* The merged id of symbols a and b with its key, or -1. */
static int32_t pair(const struct nib_blob_view *v, uint32_t a, uint32_t b, float *key)
{
    if (v->tok->model == NIB_TOKM_SPM) {
        int32_t id = spm_pair(v, a, b);
        if (id >= 0)
            *key = v->tok_entries[id].score;
        return id;
    }
    if (a >= v->tok->n_vocab || b >= v->tok->n_vocab) /* unknown characters never merge */
        return -1;
    uint32_t rank, id = nib_bpe_merge_find(v, a, b, &rank);
    if (id == NIB_TOK_NONE)
        return -1;
    *key = -(float)rank;
    return (int32_t)id;
}

size_t nib_tok_merge_scan(const struct nib_blob_view *v, uint32_t *ids, size_t first, size_t n)
{
    for (;;) {
        float best = -1e30f, key = 0;
        int32_t best_id = -1;
        size_t best_i = 0;
        for (size_t i = first; i + 1 < n; i++) {
            int32_t id = pair(v, ids[i], ids[i + 1], &key);
            if (id >= 0 && (best_id < 0 || key > best)) {
                best = key;
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

/* Candidate pairs in a max-heap ordered by (key, then leftmost), symbols
 * in a linked list; an entry whose symbols changed since it was pushed is
 * skipped when it surfaces. */
struct tok_cand {
    float key;
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
    return a->key > b->key || (a->key == b->key && a->l < b->l);
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
    float key = 0;
    int32_t id = pair(v, ids[l], ids[r], &key);
    if (id < 0)
        return;
    struct tok_cand c = {key, (uint32_t)l, (uint32_t)r, w->ver[l], w->ver[r], id};
    heap_push(w, c);
}

size_t nib_tok_merge_footprint(size_t n)
{
    /* each merge pushes at most 2 candidates: n - 1 + 2n entries bound the heap */
    return n * (2 * sizeof(int32_t) + sizeof(uint32_t)) + 3 * n * sizeof(struct tok_cand) + 64;
}

size_t nib_tok_merge_heap(const struct nib_blob_view *v, uint32_t *ids, size_t first, size_t n,
                          void *scratch)
{
    struct tok_work w;
    /* indices are relative to first, so the scratch covers n - first symbols */
    size_t m = n - first;
    uint32_t *sym = ids + first;
    uint8_t *p = scratch;
    w.next = (int32_t *)(void *)p;
    w.prev = w.next + m;
    w.ver = (uint32_t *)(w.prev + m);
    w.heap = (struct tok_cand *)(void *)(((uintptr_t)(w.ver + m) + 7) & ~(uintptr_t)7);
    w.n_heap = 0;
    for (size_t i = 0; i < m; i++) {
        w.next[i] = i + 1 < m ? (int32_t)(i + 1) : -1;
        w.prev[i] = i > 0 ? (int32_t)(i - 1) : -1;
        w.ver[i] = 0;
    }
    for (size_t i = 0; i + 1 < m; i++)
        push_pair(v, &w, sym, (int32_t)i, (int32_t)(i + 1));
    while (w.n_heap) {
        struct tok_cand c = heap_pop(&w);
        if (w.ver[c.l] != c.lv || w.ver[c.r] != c.rv || w.next[c.l] != (int32_t)c.r)
            continue; /* stale: a neighbour merged since */
        sym[c.l] = (uint32_t)c.id;
        w.ver[c.l]++;
        w.ver[c.r] = UINT32_MAX;
        w.next[c.l] = w.next[c.r];
        if (w.next[c.r] >= 0)
            w.prev[w.next[c.r]] = (int32_t)c.l;
        push_pair(v, &w, sym, w.prev[c.l], (int32_t)c.l);
        push_pair(v, &w, sym, (int32_t)c.l, w.next[c.l]);
    }
    size_t out = 0;
    for (int32_t i = m ? 0 : -1; i >= 0; i = w.next[i])
        sym[out++] = sym[i];
    return first + out;
}
