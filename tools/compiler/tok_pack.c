/* Packing a tokenizer spec into the blob's tokenizer section: the tables
 * the runtime searches (sorted index, merge hash table, added-token trie)
 * are built here once, so the appliance only looks things up. */
#include "tools/compiler/tok_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_format.h"
#include "rt/text/nfc.h"
#include "rt/text/regex.h"
#include "tools/util/tool_util.h"

const char tok_gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static size_t up8(size_t x)
{
    return (x + 7) & ~(size_t)7;
}

/* A growing byte buffer for the step data. */
struct data {
    uint8_t *p;
    size_t n, cap;
};

static int data_add(struct data *d, const void *src, size_t n, uint32_t *off)
{
    if (d->n + n > d->cap) {
        size_t cap = (d->n + n) * 2 + 64;
        uint8_t *p = realloc(d->p, cap);
        if (!p)
            return -1;
        d->p = p;
        d->cap = cap;
    }
    if (n)
        memcpy(d->p + d->n, src, n);
    *off = (uint32_t)d->n;
    d->n += n;
    return 0;
}

static const struct tok_spec *sort_spec;

static int cmp_bytes(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int cmp_ids(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    const struct tok_spec_token *ta = &sort_spec->tokens[a], *tb = &sort_spec->tokens[b];
    int c = cmp_bytes(ta->bytes, ta->len, tb->bytes, tb->len);
    return c ? c : (a > b) - (a < b);
}

/* An added token as the trie holds it: its text (raw, or normalized for
 * a token matched in normalized text), and its place in the list. */
struct key {
    uint8_t *bytes; /* owned when normalized, else the token's */
    uint32_t len, at;
    int normalized;
};

/* Sorted by bytes, then by their place in the list. */
static int cmp_keys(const void *x, const void *y)
{
    const struct key *a = x, *b = y;
    int c = cmp_bytes(a->bytes, a->len, b->bytes, b->len);
    return c ? c : (a->at > b->at) - (a->at < b->at);
}

/* The normalizer steps applied to s[0..n), as the runtime applies them
 * (rt/tok/bpe.c): a malloc'd text, or NULL when out of memory. */
static uint8_t *normalize(const struct tok_spec *sp, const uint8_t *s, uint32_t n, uint32_t *out)
{
    uint8_t *t = malloc(n + 1);
    if (!t)
        return NULL;
    memcpy(t, s, n);
    for (uint32_t i = 0; i < sp->n_norm; i++) {
        const struct tok_norm_step *st = &sp->norm[i];
        size_t cap = nib_nfc_bound(n) + (size_t)n * (st->arg_len + 1) + st->arg_len + 1, m = 0;
        uint8_t *o = malloc(cap);
        if (!o) {
            free(t);
            return NULL;
        }
        if (st->kind == TOK_NORM_NFC) {
            m = nib_nfc(t, n, o, cap);
        } else if (st->kind == TOK_NORM_PREPEND) {
            memcpy(o, st->arg, st->arg_len);
            memcpy(o + st->arg_len, t, n);
            m = n ? st->arg_len + n : 0;
        } else {
            for (uint32_t j = 0; j < n;) {
                if (st->pattern_len && j + st->pattern_len <= n &&
                    memcmp(t + j, st->pattern, st->pattern_len) == 0) {
                    memcpy(o + m, st->arg, st->arg_len);
                    m += st->arg_len;
                    j += st->pattern_len;
                } else {
                    o[m++] = t[j++];
                }
            }
        }
        free(t);
        t = o;
        n = (uint32_t)m;
    }
    *out = n;
    return t;
}

/* Merge hash table: twice the merges, rounded up to a power of two, grown
 * until no key needs more than 64 probes. A repeated pair keeps its last
 * rank, as tokenizers.js's Map does. */
static int build_merges(const struct tok_spec *s, struct nib_tok_merge **out, uint32_t *slots,
                        uint32_t *max_probe, char *err, size_t errlen)
{
    *out = NULL;
    *slots = 0;
    *max_probe = 0;
    if (s->n_merges == 0)
        return 0;
    for (uint32_t i = 0; i < s->n_merges; i++) {
        const struct tok_spec_merge *m = &s->merges[i];
        if (m->left >= s->n_vocab || m->right >= s->n_vocab || m->result >= s->n_vocab)
            return nib_fail(err, errlen, "merge %u names a token outside the vocabulary", i);
    }
    if (s->n_merges >= (1u << 24) || s->n_merges > NIB_TOK_MAX_MERGES / 2)
        return nib_fail(err, errlen, "%u merges, more than nibble's limit %u", s->n_merges,
                        NIB_TOK_MAX_MERGES / 2);
    uint32_t n = 16;
    while (n < 2 * s->n_merges)
        n *= 2;
    for (; n <= NIB_TOK_MAX_MERGES; n *= 2) {
        struct nib_tok_merge *t = malloc((size_t)n * sizeof *t);
        if (!t)
            return nib_fail(err, errlen, "out of memory for the merge table");
        memset(t, 0xFF, (size_t)n * sizeof *t);
        uint32_t probe = 0;
        for (uint32_t i = 0; i < s->n_merges; i++) {
            const struct tok_spec_merge *m = &s->merges[i];
            uint32_t h = nib_tok_merge_hash(m->left, m->right) & (n - 1), d = 0;
            while (t[h].left != NIB_TOK_NONE && !(t[h].left == m->left && t[h].right == m->right))
                h = (h + 1) & (n - 1), d++;
            t[h] = (struct nib_tok_merge){m->left, m->right, i, m->result};
            if (d > probe)
                probe = d;
        }
        if (probe <= 64) {
            *out = t;
            *slots = n;
            *max_probe = probe;
            return 0;
        }
        free(t);
    }
    return nib_fail(err, errlen, "merge table does not fit");
}

/* The added-token trie in breadth-first order: a node is a range of the
 * sorted token list sharing its first d bytes. */
struct trie {
    struct nib_tok_trie_node *nodes;
    struct nib_tok_trie_edge *edges;
    uint32_t n_nodes, n_edges;
};

struct qitem {
    uint32_t lo, hi, d;
};

static void free_keys(struct key *k, uint32_t n)
{
    for (uint32_t i = 0; k && i < n; i++)
        if (k[i].normalized)
            free(k[i].bytes);
    free(k);
}

static int build_trie(const struct tok_spec *s, struct trie *tr, char *err, size_t errlen)
{
    memset(tr, 0, sizeof *tr);
    struct key *k = calloc(s->n_added + 1, sizeof *k);
    uint32_t n = 0;
    if (!k)
        return nib_fail(err, errlen, "out of memory");
    size_t total = 1;
    for (uint32_t i = 0; i < s->n_added; i++) {
        const struct tok_spec_added *a = &s->added[i];
        if (a->id >= s->n_vocab) {
            free_keys(k, n);
            return nib_fail(err, errlen, "added token %u: id %u outside the vocabulary", i, a->id);
        }
        const struct tok_spec_token *t = &s->tokens[a->id];
        struct key *ky = &k[n];
        ky->at = i;
        ky->normalized = 0;
        ky->bytes = t->bytes;
        ky->len = t->len;
        /* tokenizers.js matches a "normalized" token by its normalized
         * text in the normalized text (when there is a normalizer) */
        if (a->normalized && s->n_norm) {
            ky->normalized = 1;
            if (!(ky->bytes = normalize(s, t->bytes, t->len, &ky->len))) {
                free_keys(k, n);
                return nib_fail(err, errlen, "out of memory");
            }
        }
        if (ky->len == 0 || ky->len > NIB_MAX_PIECE) {
            if (ky->normalized)
                free(ky->bytes);
            continue;
        }
        n++;
        total += ky->len;
    }
    if (n == 0) {
        free_keys(k, n);
        return 0;
    }
    qsort(k, n, sizeof *k, cmp_keys);
    if (total > NIB_TOK_MAX_TRIE) {
        free_keys(k, n);
        return nib_fail(err, errlen, "added tokens too long in total (%zu bytes)", total);
    }
    tr->nodes = calloc(total, sizeof *tr->nodes);
    tr->edges = calloc(total, sizeof *tr->edges);
    struct qitem *q = malloc(total * sizeof *q);
    if (!tr->nodes || !tr->edges || !q) {
        free_keys(k, n);
        free(q);
        return nib_fail(err, errlen, "out of memory");
    }
    uint32_t qh = 0, qt = 0;
    q[qt++] = (struct qitem){0, n, 0};
    tr->n_nodes = 1;
    while (qh < qt) {
        struct qitem it = q[qh];
        struct nib_tok_trie_node *node = &tr->nodes[qh];
        qh++;
        uint32_t lo = it.lo;
        /* tokens that end here: the last of equal ones wins (tokenizers.js
         * maps a content to its last added token) */
        while (lo < it.hi && k[lo].len == it.d) {
            const struct tok_spec_added *a = &s->added[k[lo].at];
            node->flags = NIB_TOKA_TERMINAL | (a->special ? NIB_TOKA_SPECIAL : 0) |
                          (a->lstrip ? NIB_TOKA_LSTRIP : 0) | (a->rstrip ? NIB_TOKA_RSTRIP : 0) |
                          (k[lo].normalized ? NIB_TOKA_NORMALIZED : 0);
            node->id = a->id;
            lo++;
        }
        node->edge_start = tr->n_edges;
        while (lo < it.hi) {
            uint8_t b = k[lo].bytes[it.d];
            uint32_t hi = lo + 1;
            while (hi < it.hi && k[hi].bytes[it.d] == b)
                hi++;
            tr->edges[tr->n_edges++] = (struct nib_tok_trie_edge){tr->n_nodes++, b};
            node->n_edges++;
            q[qt++] = (struct qitem){lo, hi, it.d + 1};
            lo = hi;
        }
    }
    free(q);
    free_keys(k, n);
    return 0;
}

static int pack_steps(const struct tok_spec *s, struct nib_tok_norm_step *norm,
                      struct nib_tok_pre_step *pre, struct data *d, char *err, size_t errlen)
{
    if (s->n_norm > NIB_TOK_MAX_STEPS || s->n_pre > NIB_TOK_MAX_STEPS)
        return nib_fail(err, errlen, "more than %u normalizer or pre-tokenizer steps",
                        NIB_TOK_MAX_STEPS);
    for (uint32_t i = 0; i < s->n_norm; i++) {
        const struct tok_norm_step *n = &s->norm[i];
        struct nib_tok_norm_step *o = &norm[i];
        memset(o, 0, sizeof *o);
        o->kind = (uint32_t)n->kind;
        if (n->kind == TOK_NORM_NFC)
            continue;
        if ((n->kind != TOK_NORM_PREPEND && n->kind != TOK_NORM_REPLACE) ||
            n->arg_len > NIB_TOK_MAX_ARG || n->pattern_len > NIB_TOK_MAX_ARG ||
            (n->kind == TOK_NORM_REPLACE && n->pattern_len == 0) ||
            (n->kind == TOK_NORM_PREPEND && n->arg_len == 0))
            return nib_fail(err, errlen, "normalizer step %u: kind %d or its strings unsupported",
                            i, n->kind);
        if (data_add(d, n->arg, n->arg_len, &o->arg_off))
            return nib_fail(err, errlen, "out of memory");
        o->arg_len = n->arg_len;
        if (n->kind == TOK_NORM_REPLACE) {
            if (data_add(d, n->pattern, n->pattern_len, &o->pat_off))
                return nib_fail(err, errlen, "out of memory");
            o->pat_len = n->pattern_len;
        }
    }
    for (uint32_t i = 0; i < s->n_pre; i++) {
        const struct tok_pre_step *p = &s->pre[i];
        struct nib_tok_pre_step *o = &pre[i];
        memset(o, 0, sizeof *o);
        o->kind = (uint32_t)p->kind;
        /* tokenizers.js: invert keeps the matches; Removed drops them (a
         * String pattern is a capture group there, so it keeps them) */
        o->behavior = p->invert ? NIB_TOKS_MATCHES
                      : (p->behavior == TOK_SPLIT_REMOVED && p->kind == TOK_PRE_SPLIT_REGEX)
                          ? NIB_TOKS_REMOVED
                          : NIB_TOKS_ISOLATED;
        switch (p->kind) {
        case TOK_PRE_SPLIT_REGEX:
        case TOK_PRE_BYTELEVEL_REGEX: {
            const char *pat = p->kind == TOK_PRE_SPLIT_REGEX ? p->pattern : tok_gpt2_regex;
            size_t plen = p->kind == TOK_PRE_SPLIT_REGEX ? p->pattern_len : strlen(pat);
            if (!pat)
                return nib_fail(err, errlen, "pre-tokenizer step %u: no pattern", i);
            size_t cap = 64 + 64 * plen, used = 0;
            uint8_t *prog = malloc(cap);
            char why[200];
            if (!prog)
                return nib_fail(err, errlen, "out of memory");
            if (nib_re_compile(pat, plen, prog, cap, &used, why, sizeof why)) {
                free(prog);
                return nib_fail(err, errlen, "pre-tokenizer step %u: regex '%.*s': %s", i,
                                (int)(plen > 120 ? 120 : plen), pat, why);
            }
            /* programs are read as aligned words */
            uint32_t pad_off;
            static const uint8_t zeros[8];
            if (data_add(d, zeros, up8(d->n) - d->n, &pad_off) ||
                data_add(d, prog, used, &o->pat_off)) {
                free(prog);
                return nib_fail(err, errlen, "out of memory");
            }
            free(prog);
            o->pat_len = (uint32_t)used;
            if (p->kind == TOK_PRE_BYTELEVEL_REGEX) {
                o->behavior = NIB_TOKS_MATCHES;
                o->flags = p->add_prefix_space ? NIB_TOKP_PREFIX_SPACE : 0;
            }
            break;
        }
        case TOK_PRE_SPLIT_STRING:
            if (!p->pattern || p->pattern_len == 0 || p->pattern_len > NIB_TOK_MAX_ARG)
                return nib_fail(err, errlen, "pre-tokenizer step %u: split string of %u bytes", i,
                                p->pattern_len);
            if (data_add(d, p->pattern, p->pattern_len, &o->pat_off))
                return nib_fail(err, errlen, "out of memory");
            o->pat_len = p->pattern_len;
            break;
        case TOK_PRE_DIGITS: o->flags = p->individual_digits ? NIB_TOKP_INDIVIDUAL : 0; break;
        case TOK_PRE_METASPACE:
            if (p->replacement == 0 || p->replacement > 0x10FFFF ||
                (p->replacement >= 0xD800 && p->replacement <= 0xDFFF))
                return nib_fail(err, errlen, "pre-tokenizer step %u: bad Metaspace replacement", i);
            o->replacement = p->replacement;
            o->flags = p->prepend_scheme == TOK_PREPEND_ALWAYS  ? NIB_TOKP_PREPEND_ALWAYS
                       : p->prepend_scheme == TOK_PREPEND_FIRST ? NIB_TOKP_PREPEND_FIRST
                                                                : 0;
            break;
        default: return nib_fail(err, errlen, "pre-tokenizer step %u: unknown kind %d", i, p->kind);
        }
    }
    return 0;
}

/* tokenizers.js's byte fallback looks the string "<0xXX>" up in the
 * vocabulary: the lowest id with that piece, whatever its type. */
static void fallback_bytes(const struct tok_spec *s, uint32_t *bid)
{
    static const char hex[] = "0123456789ABCDEF";
    for (uint32_t i = s->n_vocab; i-- > 0;) {
        const uint8_t *p = s->tokens[i].bytes;
        if (s->tokens[i].len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>' || !p[3] || !p[4])
            continue;
        const char *hi = memchr(hex, p[3], 16), *lo = memchr(hex, p[4], 16);
        if (hi && lo)
            bid[(hi - hex) * 16 + (lo - hex)] = i;
    }
}

static int check_spec(const struct tok_spec *s, char *err, size_t errlen)
{
    if (s->model != TOK_MODEL_SPM && s->model != TOK_MODEL_BPE)
        return nib_fail(err, errlen, "tokenizer model %d unknown", s->model);
    if (s->n_vocab == 0 || s->n_vocab > NIB_MAX_VOCAB)
        return nib_fail(err, errlen, "vocabulary of %u tokens (1..%u)", s->n_vocab, NIB_MAX_VOCAB);
    if (s->model == TOK_MODEL_SPM && (s->n_merges || s->n_norm || s->n_pre))
        return nib_fail(err, errlen, "a SentencePiece tokenizer has no merges or pipeline steps");
    for (uint32_t i = 0; i < s->n_vocab; i++)
        if (s->tokens[i].len > NIB_MAX_PIECE || (s->tokens[i].len && !s->tokens[i].bytes))
            return nib_fail(err, errlen, "token %u is %u bytes, longer than the limit %u", i,
                            s->tokens[i].len, NIB_MAX_PIECE);
    int32_t ids[3] = {s->unk_id, s->bos_id, s->eos_id};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= (int32_t)s->n_vocab)
            return nib_fail(err, errlen, "unk/bos/eos id %d outside the vocabulary", ids[i]);
    if ((s->add_bos && s->bos_id < 0) || (s->add_eos && s->eos_id < 0))
        return nib_fail(err, errlen, "the tokenizer adds BOS/EOS but has none");
    if (s->model == TOK_MODEL_SPM && s->unk_id < 0)
        return nib_fail(err, errlen, "a SentencePiece tokenizer needs an unknown token");
    if (s->n_eog > TOK_SPEC_MAX_EOG)
        return nib_fail(err, errlen, "end-of-generation set too large");
    for (uint32_t i = 0; i < s->n_eog; i++)
        if (s->eog[i] >= s->n_vocab)
            return nib_fail(err, errlen, "end-of-generation id %u outside the vocabulary",
                            s->eog[i]);
    for (int b = 0; b < 256; b++)
        if ((s->byte_level || (s->model == TOK_MODEL_SPM && s->byte_fallback)) &&
            s->byte_id[b] >= s->n_vocab)
            return nib_fail(err, errlen, "byte 0x%02X has no token", b);
    if (s->dec_from_len > NIB_TOK_MAX_ARG || s->dec_to_len > NIB_TOK_MAX_ARG ||
        s->strip_leading > NIB_TOK_MAX_ARG)
        return nib_fail(err, errlen, "decoder strings too long");
    return 0;
}

int tok_pack(const struct tok_spec *s, const uint8_t *chat_prog, size_t chat_len, uint8_t **sec,
             size_t *sec_len, char *err, size_t errlen)
{
    *sec = NULL;
    *sec_len = 0;
    if (check_spec(s, err, errlen))
        return -1;
    if (chat_len > NIB_TOK_MAX_CHAT)
        return nib_fail(err, errlen, "chat program of %zu bytes > %u", chat_len, NIB_TOK_MAX_CHAT);
    uint32_t n = s->n_vocab;
    int rc = -1;
    struct nib_tok_merge *merges = NULL;
    struct trie tr = {0};
    struct data d = {0};
    uint32_t *sorted = malloc((size_t)n * 4);
    struct nib_tok_norm_step norm[NIB_TOK_MAX_STEPS];
    struct nib_tok_pre_step pre[NIB_TOK_MAX_STEPS];
    struct nib_tok_header h;
    memset(&h, 0, sizeof h);
    uint8_t *out = NULL;
    uint32_t slots, probe, off;
    if (!sorted) {
        nib_fail(err, errlen, "out of memory");
        goto done;
    }
    if (build_merges(s, &merges, &slots, &probe, err, errlen) || build_trie(s, &tr, err, errlen) ||
        pack_steps(s, norm, pre, &d, err, errlen))
        goto done;
    if (data_add(&d, s->dec_from, s->dec_from_len, &h.dec_from_off) ||
        data_add(&d, s->dec_to, s->dec_to_len, &h.dec_to_off) || d.n > NIB_TOK_MAX_DATA) {
        nib_fail(err, errlen, "tokenizer step data too large");
        goto done;
    }
    h.dec_from_len = s->dec_from_len;
    h.dec_to_len = s->dec_to_len;
    for (uint32_t i = 0; i < n; i++)
        sorted[i] = i;
    sort_spec = s;
    qsort(sorted, n, 4, cmp_ids);
    sort_spec = NULL;

    uint64_t bytes = 0;
    for (uint32_t i = 0; i < n; i++)
        bytes += s->tokens[i].len;
    h.n_vocab = n;
    h.model = s->model == TOK_MODEL_SPM ? NIB_TOKM_SPM : NIB_TOKM_BPE;
    h.flags = (s->byte_level ? NIB_TOKF_BYTE_LEVEL : 0) |
              (s->byte_fallback ? NIB_TOKF_BYTE_FALLBACK : 0) |
              (s->add_bos ? NIB_TOKF_ADD_BOS : 0) | (s->add_eos ? NIB_TOKF_ADD_EOS : 0);
    if (s->model == TOK_MODEL_BPE)
        h.flags |=
            (s->fuse_unk ? NIB_TOKF_FUSE_UNK : 0) | (s->ignore_merges ? NIB_TOKF_IGNORE_MERGES : 0);
    h.unk_id = s->unk_id < 0 ? NIB_TOK_NONE : (uint32_t)s->unk_id;
    h.bos_id = s->bos_id < 0 ? NIB_TOK_NONE : (uint32_t)s->bos_id;
    h.eos_id = s->eos_id < 0 ? NIB_TOK_NONE : (uint32_t)s->eos_id;
    h.n_eog = s->n_eog;
    memcpy(h.eog, s->eog, s->n_eog * 4);
    h.merge_max_probe = probe;
    h.strip_leading = s->strip_leading;
    if (s->pre_name)
        snprintf(h.pre_name, sizeof h.pre_name, "%s", s->pre_name);
    /* the tables, in the order the header lists them */
    off = (uint32_t)up8(sizeof h);
#define PLACE(r, cnt, elem)                                                                        \
    do {                                                                                           \
        (r).offset = off;                                                                          \
        (r).count = (uint32_t)(cnt);                                                               \
        off = (uint32_t)up8(off + (uint64_t)(cnt) * (elem));                                       \
    } while (0)
    if (bytes + (uint64_t)n * 16 + (uint64_t)slots * 16 + (uint64_t)tr.n_nodes * 20 + d.n +
            chat_len >
        (1ull << 31)) {
        nib_fail(err, errlen, "tokenizer section would exceed 2 GiB");
        goto done;
    }
    PLACE(h.entries, n, sizeof(struct nib_tok_entry));
    PLACE(h.sorted, n, 4);
    PLACE(h.bytes, bytes, 1);
    PLACE(h.byte_ids, 256, 4);
    PLACE(h.merges, slots, sizeof(struct nib_tok_merge));
    PLACE(h.trie_nodes, tr.n_nodes, sizeof(struct nib_tok_trie_node));
    PLACE(h.trie_edges, tr.n_edges, sizeof(struct nib_tok_trie_edge));
    PLACE(h.norm, s->n_norm, sizeof(struct nib_tok_norm_step));
    PLACE(h.pre, s->n_pre, sizeof(struct nib_tok_pre_step));
    PLACE(h.data, d.n, 1);
    PLACE(h.chat, chat_len, 1);
#undef PLACE
    size_t total = (off + 63) & ~(size_t)63;
    out = aligned_alloc(64, total);
    if (!out) {
        nib_fail(err, errlen, "out of memory");
        goto done;
    }
    memset(out, 0, total);
    struct nib_tok_entry *e = (void *)(out + h.entries.offset);
    uint8_t *pb = out + h.bytes.offset;
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct tok_spec_token *t = &s->tokens[i];
        e[i].score = t->score;
        e[i].offset = at;
        e[i].len = (uint16_t)t->len;
        e[i].type =
            (uint16_t)(t->type >= NIB_TOK_NORMAL && t->type <= NIB_TOK_BYTE ? t->type
                                                                            : NIB_TOK_NORMAL);
        if (t->len)
            memcpy(pb + at, t->bytes, t->len);
        at += t->len;
        if (t->len > h.max_piece_len)
            h.max_piece_len = t->len;
    }
    memcpy(out + h.sorted.offset, sorted, (size_t)n * 4);
    uint32_t *bid = (void *)(out + h.byte_ids.offset);
    for (int b = 0; b < 256; b++)
        bid[b] =
            (s->byte_level || (s->model == TOK_MODEL_SPM && s->byte_fallback)) && s->byte_id[b] < n
                ? s->byte_id[b]
                : NIB_TOK_NONE;
    if (s->model == TOK_MODEL_BPE && !s->byte_level && s->byte_fallback)
        fallback_bytes(s, bid);
    if (slots)
        memcpy(out + h.merges.offset, merges, (size_t)slots * sizeof *merges);
    if (tr.n_nodes) {
        memcpy(out + h.trie_nodes.offset, tr.nodes, tr.n_nodes * sizeof *tr.nodes);
        memcpy(out + h.trie_edges.offset, tr.edges, tr.n_edges * sizeof *tr.edges);
    }
    memcpy(out + h.norm.offset, norm, s->n_norm * sizeof *norm);
    memcpy(out + h.pre.offset, pre, s->n_pre * sizeof *pre);
    if (d.n)
        memcpy(out + h.data.offset, d.p, d.n);
    if (chat_len)
        memcpy(out + h.chat.offset, chat_prog, chat_len);
    memcpy(out, &h, sizeof h);
    *sec = out;
    *sec_len = total;
    out = NULL;
    rc = 0;
done:
    free(out);
    free(sorted);
    free(merges);
    free(tr.nodes);
    free(tr.edges);
    free(d.p);
    return rc;
}
