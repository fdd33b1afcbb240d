/* Added tokens (tokenizer.json added_tokens, GGUF control and user-defined
 * tokens), found in the raw text before anything else, leftmost-longest,
 * through the blob's trie. */
#include "rt/text/ucd.h"
#include "rt/tok/tok_internal.h"

size_t nib_tok_utf8(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    size_t k;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        k = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4, v = c & 0x07, min = 0x10000;
    } else {
        *cp = c;
        return 1;
    }
    if (k > n)
        goto bad;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            goto bad;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        goto bad;
    *cp = v;
    return k;
bad:
    *cp = c;
    return 1;
}

/* ECMAScript's WhiteSpace and LineTerminator: what trimStart/trimEnd
 * remove (tokenizers.js strips added tokens' neighbours with them). */
static int js_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0xFEFF || cp == 0x2028 || cp == 0x2029 ||
           nib_ucd_gc(cp) == NIB_GC_ZS;
}

size_t nib_tok_ws_at(const uint8_t *s, size_t n, size_t i)
{
    uint32_t cp;
    size_t k = nib_tok_utf8(s + i, n - i, &cp);
    return (k > 1 || cp < 0x80) && js_space(cp) ? k : 0;
}

size_t nib_tok_ws_before(const uint8_t *s, size_t i)
{
    for (size_t k = 1; k <= 4 && k <= i; k++) {
        uint32_t cp;
        if (nib_tok_utf8(s + i - k, k, &cp) == k && (k > 1 || cp < 0x80))
            return js_space(cp) ? k : 0;
    }
    return 0;
}

/* The child of node on byte b, or 0 (the root is nobody's child). */
static uint32_t child(const struct nib_blob_view *v, uint32_t node, uint8_t b)
{
    const struct nib_tok_trie_node *t = &v->tok_nodes[node];
    const struct nib_tok_trie_edge *e = v->tok_edges + t->edge_start;
    uint32_t lo = 0, hi = t->n_edges;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (e[mid].byte == b)
            return e[mid].child;
        if (e[mid].byte < b)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

int nib_tok_added_find(const struct nib_blob_view *v, const uint8_t *text, size_t n, size_t from,
                       int normalized, int special, const uint8_t *taint, size_t *ms, size_t *me,
                       uint32_t *id, uint32_t *flags)
{
    if (v->tok_n_nodes == 0)
        return 0;
    for (size_t i = from; i < n; i++) {
        uint32_t node = 0;
        size_t best = 0;
        int tainted = taint == NULL;
        for (size_t j = i; j < n; j++) {
            node = child(v, node, text[j]);
            if (node == 0)
                break;
            if (taint && taint[j])
                tainted = 1;
            const struct nib_tok_trie_node *t = &v->tok_nodes[node];
            if ((t->flags & NIB_TOKA_TERMINAL) &&
                !(t->flags & NIB_TOKA_NORMALIZED) == !normalized &&
                (!(t->flags & NIB_TOKA_SPECIAL) || special || !tainted)) {
                best = j + 1;
                *id = t->id;
                *flags = t->flags;
            }
        }
        if (best) {
            *ms = i;
            *me = best;
            return 1;
        }
    }
    return 0;
}
