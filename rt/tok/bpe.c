/* The BPE tokenizer pipeline for one text piece between added tokens, as
 * @huggingface/tokenizers runs it: normalizers in order, pre-tokenizer
 * steps splitting the piece into words (depth first, so each step needs
 * room for one word only), then the model on each word: byte tokens
 * (byte-level) or vocabulary characters, merged by lowest rank. All
 * memory is the caller's scratch; every step is linear or O(n log n), the
 * regex steps stop at their step bound (-2). */
#include <string.h>

#include "rt/text/nfc.h"
#include "rt/text/regex.h"
#include "rt/tok/tok_internal.h"

/* Unknown characters are symbols >= UNK_BASE carrying their byte offset in
 * the word (never a vocabulary id: n_vocab <= 2^20); they never merge. */
#define UNK_BASE 0x80000000u

static size_t up8(size_t x)
{
    return (x + 7) & ~(size_t)7;
}

static size_t utf8_put(uint32_t cp, uint8_t *o)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

static size_t rep_len(uint32_t cp)
{
    uint8_t b[4];
    return utf8_put(cp, b);
}

/* Bytes one piece of n bytes can take after the normalizers; pieces
 * counts the pieces n is spread over (for the total over a text). */
static size_t norm_bound(const struct nib_blob_view *v, size_t n, size_t pieces)
{
    for (uint32_t i = 0; i < v->tok_n_norm; i++) {
        const struct nib_tok_norm_step *s = &v->tok_norm[i];
        if (s->kind == NIB_TOKN_NFC)
            n = pieces * nib_nfc_bound(n / pieces + 1);
        else if (s->kind == NIB_TOKN_PREPEND)
            n += (size_t)s->arg_len * pieces;
        else if (s->arg_len > s->pat_len)
            n += n / s->pat_len * (s->arg_len - s->pat_len);
    }
    return n;
}

/* A word entering pre-tokenizer step k+1 from one of w bytes entering
 * step k (words: how many words w bytes can be). */
static size_t step_bound(const struct nib_tok_pre_step *s, size_t w, size_t words)
{
    if (s->kind == NIB_TOKP_METASPACE)
        return w * rep_len(s->replacement) + words * rep_len(s->replacement);
    if (s->kind == NIB_TOKP_BYTELEVEL_REGEX && (s->flags & NIB_TOKP_PREFIX_SPACE))
        return w + words;
    return w;
}

/* Where each part of the scratch lies for a piece of up to len bytes. */
struct layout {
    size_t norm[2], word[NIB_TOK_MAX_STEPS], regex, sym, merge, total;
    size_t norm_cap, word_cap[NIB_TOK_MAX_STEPS], model_cap;
};

static void layout(const struct nib_blob_view *v, size_t len, struct layout *L)
{
    memset(L, 0, sizeof *L);
    size_t off = 0, regex = 0;
    L->norm_cap = norm_bound(v, len, 1);
    if (v->tok_n_norm) {
        L->norm[0] = off;
        off += up8(L->norm_cap);
        L->norm[1] = off;
        off += up8(L->norm_cap);
    }
    size_t w = L->norm_cap;
    for (uint32_t k = 0; k < v->tok_n_pre; k++) {
        const struct nib_tok_pre_step *s = &v->tok_pre[k];
        size_t nw = step_bound(s, w, 1);
        if (nw != w) {
            L->word[k] = off;
            L->word_cap[k] = nw;
            off += up8(nw);
        }
        w = nw;
        if (s->kind == NIB_TOKP_SPLIT_REGEX || s->kind == NIB_TOKP_BYTELEVEL_REGEX) {
            size_t f = nib_re_scratch_footprint(v->tok_data + s->pat_off, s->pat_len, w);
            if (f > regex)
                regex = f;
        }
    }
    L->regex = off;
    off += up8(regex);
    L->model_cap = w;
    L->sym = off;
    off += up8(w * sizeof(uint32_t));
    L->merge = off;
    off += up8(nib_tok_merge_footprint(w));
    L->total = off + 64;
}

size_t nib_bpe_footprint(const struct nib_blob_view *v, size_t len)
{
    struct layout L;
    layout(v, len, &L);
    return L.total;
}

size_t nib_bpe_max_ids(const struct nib_blob_view *v, size_t len)
{
    /* pieces are separated by added tokens of at least one byte */
    size_t pieces = v->tok_n_nodes ? len / 2 + 1 : 1;
    size_t n = norm_bound(v, len, pieces);
    for (uint32_t k = 0; k < v->tok_n_pre; k++)
        n = step_bound(&v->tok_pre[k], n, n);
    return n + 2;
}

struct run {
    struct nib_bpe_run *r;
    const struct nib_blob_view *v;
    struct layout L;
    int first; /* the piece starts the text (Metaspace prepend_scheme "first") */
};

static void emit(struct run *c, uint32_t id)
{
    struct nib_bpe_run *r = c->r;
    if (r->failed)
        return;
    if (r->n_ids >= r->max_ids) {
        r->failed = -1;
        return;
    }
    r->ids[r->n_ids++] = id;
}

/* An unknown character: its byte tokens, else unk, else nothing. */
static void emit_unknown(struct run *c, const uint8_t *s, size_t n)
{
    const struct nib_blob_view *v = c->v;
    int bytes = (v->tok->flags & NIB_TOKF_BYTE_FALLBACK) != 0;
    for (size_t i = 0; bytes && i < n; i++)
        bytes = v->tok_byte_ids[s[i]] != NIB_TOK_NONE;
    if (bytes)
        for (size_t i = 0; i < n; i++)
            emit(c, v->tok_byte_ids[s[i]]);
    else if (v->tok->unk_id != NIB_TOK_NONE)
        emit(c, v->tok->unk_id);
}

/* One word without ill-formed UTF-8: ignore_merges, initial symbols,
 * merges, output. */
static void model_word(struct run *c, const uint8_t *w, size_t n)
{
    const struct nib_blob_view *v = c->v;
    uint32_t flags = v->tok->flags;
    if (flags & NIB_TOKF_IGNORE_MERGES) {
        uint32_t id = nib_bpe_lookup(v, w, n);
        if (id != NIB_TOK_NONE) {
            emit(c, id);
            return;
        }
    }
    uint32_t *sym = (uint32_t *)(void *)(c->r->scratch + c->L.sym);
    size_t m = 0;
    if (flags & NIB_TOKF_BYTE_LEVEL) {
        for (size_t i = 0; i < n; i++)
            sym[m++] = v->tok_byte_ids[w[i]];
    } else {
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t k = nib_tok_utf8(w + i, n - i, &cp);
            uint32_t id = nib_bpe_lookup(v, w + i, k);
            sym[m++] = id != NIB_TOK_NONE ? id : UNK_BASE + (uint32_t)i;
            i += k;
        }
    }
    if (m > 1)
        m = nib_tok_merge_heap(v, sym, 0, m, c->r->scratch + c->L.merge);
    for (size_t i = 0; i < m; i++) {
        if (sym[i] < UNK_BASE) {
            emit(c, sym[i]);
        } else {
            uint32_t cp, at = sym[i] - UNK_BASE;
            emit_unknown(c, w + at, nib_tok_utf8(w + at, n - at, &cp));
        }
    }
}

/* The ill-formed UTF-8 rule (docs/tokenizers.md): each byte of an
 * ill-formed sequence is its own byte token (or <0xXX>, or unk) and never
 * merges; the well-formed runs between them are words of their own. */
static void model(struct run *c, const uint8_t *w, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = nib_tok_utf8(w + i, n - i, &cp);
        if (k == 1 && cp >= 0x80) {
            if (i > run)
                model_word(c, w + run, i - run);
            if (c->v->tok->flags & NIB_TOKF_BYTE_LEVEL)
                emit(c, c->v->tok_byte_ids[w[i]]);
            else
                emit_unknown(c, w + i, 1);
            run = i + 1;
        }
        i += k;
    }
    if (n > run)
        model_word(c, w + run, n - run);
}

static void pre(struct run *c, uint32_t k, const uint8_t *w, size_t n);

/* Split w at [ms, me) matches found by find(); keep what behavior says. */
static void split_emit(struct run *c, uint32_t k, uint32_t behavior, const uint8_t *w, size_t prev,
                       size_t ms, size_t me)
{
    if (ms > prev && behavior != NIB_TOKS_MATCHES)
        pre(c, k + 1, w + prev, ms - prev);
    if (me > ms && behavior != NIB_TOKS_REMOVED)
        pre(c, k + 1, w + ms, me - ms);
}

static size_t find_literal(const uint8_t *w, size_t n, size_t from, const uint8_t *p, size_t pn)
{
    for (size_t i = from; i + pn <= n; i++)
        if (w[i] == p[0] && memcmp(w + i, p, pn) == 0)
            return i;
    return n;
}

static void pre(struct run *c, uint32_t k, const uint8_t *w, size_t n)
{
    const struct nib_blob_view *v = c->v;
    if (c->r->failed || n == 0)
        return;
    if (k == v->tok_n_pre) {
        model(c, w, n);
        return;
    }
    const struct nib_tok_pre_step *s = &v->tok_pre[k];
    uint8_t *buf = c->r->scratch + c->L.word[k];
    const uint8_t *pat = v->tok_data + s->pat_off;
    size_t prev = 0;
    switch (s->kind) {
    case NIB_TOKP_METASPACE: {
        /* spaces become the replacement; a prefix unless the word starts
         * with one already (tokenizers.js does not split here) */
        uint8_t r[4];
        size_t rl = utf8_put(s->replacement, r), m = 0;
        int scheme = (s->flags & NIB_TOKP_PREPEND_ALWAYS) ||
                     ((s->flags & NIB_TOKP_PREPEND_FIRST) && c->first);
        if (scheme && w[0] != ' ' && !(n >= rl && memcmp(w, r, rl) == 0)) {
            memcpy(buf, r, rl);
            m = rl;
        }
        for (size_t i = 0; i < n; i++) {
            if (w[i] == ' ') {
                memcpy(buf + m, r, rl);
                m += rl;
            } else {
                buf[m++] = w[i];
            }
        }
        pre(c, k + 1, buf, m);
        return;
    }
    case NIB_TOKP_DIGITS:
        /* runs of ASCII digits (or each alone) and runs of anything else */
        for (size_t i = 0; i < n;) {
            size_t j = i + 1;
            int digit = w[i] >= '0' && w[i] <= '9';
            if (!digit || !(s->flags & NIB_TOKP_INDIVIDUAL))
                while (j < n && (w[j] >= '0' && w[j] <= '9') == digit)
                    j++;
            pre(c, k + 1, w + i, j - i);
            i = j;
        }
        return;
    case NIB_TOKP_SPLIT_STRING:
        for (;;) {
            size_t ms = find_literal(w, n, prev, pat, s->pat_len);
            if (ms == n)
                break;
            split_emit(c, k, s->behavior, w, prev, ms, ms + s->pat_len);
            prev = ms + s->pat_len;
        }
        split_emit(c, k, s->behavior, w, prev, n, n);
        return;
    default: /* SPLIT_REGEX, BYTELEVEL_REGEX */
        if (s->kind == NIB_TOKP_BYTELEVEL_REGEX && (s->flags & NIB_TOKP_PREFIX_SPACE) &&
            w[0] != ' ') {
            buf[0] = ' ';
            memcpy(buf + 1, w, n);
            w = buf;
            n++;
        }
        for (;;) {
            size_t ms, me;
            int f = nib_re_find(pat, s->pat_len, w, n, prev, &ms, &me, c->r->scratch + c->L.regex);
            if (f < 0) {
                c->r->failed = -2;
                return;
            }
            if (f == 0)
                break;
            split_emit(c, k, s->behavior, w, prev, ms, me);
            prev = me;
        }
        split_emit(c, k, s->behavior, w, prev, n, n);
        return;
    }
}

/* Normalizers, ping-ponging between the two buffers. */
static const uint8_t *normalize(struct run *c, const uint8_t *t, size_t *n)
{
    const struct nib_blob_view *v = c->v;
    for (uint32_t i = 0; i < v->tok_n_norm; i++) {
        const struct nib_tok_norm_step *s = &v->tok_norm[i];
        uint8_t *o = c->r->scratch + c->L.norm[i & 1];
        const uint8_t *arg = v->tok_data + s->arg_off, *pat = v->tok_data + s->pat_off;
        size_t m = 0;
        if (s->kind == NIB_TOKN_NFC) {
            m = nib_nfc(t, *n, o, c->L.norm_cap);
        } else if (s->kind == NIB_TOKN_PREPEND) {
            if (*n == 0)
                continue;
            memcpy(o, arg, s->arg_len);
            memcpy(o + s->arg_len, t, *n);
            m = s->arg_len + *n;
        } else {
            for (size_t j = 0; j < *n;) {
                if (j + s->pat_len <= *n && memcmp(t + j, pat, s->pat_len) == 0) {
                    memcpy(o + m, arg, s->arg_len);
                    m += s->arg_len;
                    j += s->pat_len;
                } else {
                    o[m++] = t[j++];
                }
            }
        }
        t = o;
        *n = m;
    }
    return t;
}

/* Pre-tokenizer and model over one subsection; fuse_unk folds a run of
 * unknowns in it into one unk. */
static void subsection(struct run *c, const uint8_t *text, size_t n)
{
    struct nib_bpe_run *r = c->r;
    size_t start = r->n_ids;
    pre(c, 0, text, n);
    uint32_t unk = r->v->tok->unk_id;
    if ((r->v->tok->flags & NIB_TOKF_FUSE_UNK) && unk != NIB_TOK_NONE && !r->failed) {
        size_t o = start;
        for (size_t i = start; i < r->n_ids; i++)
            if (!(r->ids[i] == unk && o > start && r->ids[o - 1] == unk))
                r->ids[o++] = r->ids[i];
        r->n_ids = o;
    }
}

void nib_bpe_piece(struct nib_bpe_run *r, const uint8_t *text, size_t n, int first)
{
    struct run c = {.r = r, .v = r->v, .first = first};
    layout(r->v, r->len, &c.L);
    text = normalize(&c, text, &n);
    /* added tokens matched by their normalized form (tokenizer.json
     * "normalized": true) split the normalized text once more */
    size_t pos = 0;
    while (!r->failed) {
        size_t ms = n, me = n;
        uint32_t id = 0, flags = 0;
        int found =
            nib_tok_added_find(r->v, text, n, pos, 1, r->special, NULL, &ms, &me, &id, &flags);
        size_t end = ms;
        if (found && (flags & NIB_TOKA_LSTRIP))
            for (size_t k; end > pos && (k = nib_tok_ws_before(text, end)) > 0;)
                end -= k;
        if (end > pos)
            subsection(&c, text + pos, end - pos);
        if (!found)
            break;
        emit(&c, id);
        pos = me;
        if (flags & NIB_TOKA_RSTRIP)
            for (size_t k; pos < n && (k = nib_tok_ws_at(text, n, pos)) > 0;)
                pos += k;
    }
}
