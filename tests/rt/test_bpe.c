/* The BPE tokenizer runtime (rt/tokenizer.c, rt/tok/) on small hand-built
 * tokenizers packed by tok_pack: merge order and ties, byte-level and byte
 * fallback, fuse_unk, ignore_merges, added tokens (special, taint,
 * lstrip/rstrip, leftmost-longest), normalizers, Metaspace, Digits,
 * string splits, the ill-formed UTF-8 rule, decoding; the heap merge
 * against the rescanning reference on random words; hostile sections
 * refused by the validator, field by field. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/tok/tok_internal.h"
#include "rt/tokenizer.h"
#include "tests/common/test_util.h"
#include "tools/compiler/tok_pack.h"
#include "tools/compiler/tok_spec.h"

/* ---- building specs ---- */

static void spec_init(struct tok_spec *s)
{
    tok_spec_init(s);
    s->model = TOK_MODEL_BPE;
    for (int b = 0; b < 256; b++)
        s->byte_id[b] = UINT32_MAX;
}

static uint32_t add_tok(struct tok_spec *s, const void *bytes, uint32_t len, int type)
{
    s->tokens = realloc(s->tokens, (s->n_vocab + 1) * sizeof *s->tokens);
    struct tok_spec_token *t = &s->tokens[s->n_vocab];
    t->bytes = malloc(len + 1);
    memcpy(t->bytes, bytes, len);
    t->len = len;
    t->score = 0;
    t->type = type;
    return s->n_vocab++;
}

static uint32_t tok(struct tok_spec *s, const char *text)
{
    return add_tok(s, text, (uint32_t)strlen(text), NIB_TOK_NORMAL);
}

static uint32_t id_of(const struct tok_spec *s, const char *text)
{
    for (uint32_t i = 0; i < s->n_vocab; i++)
        if (s->tokens[i].len == strlen(text) &&
            memcmp(s->tokens[i].bytes, text, s->tokens[i].len) == 0)
            return i;
    ck_abort_msg("no token '%s'", text);
    return 0;
}

/* Merge a+b (both and their concatenation already tokens), next rank. */
static void merge(struct tok_spec *s, const char *a, const char *b)
{
    char ab[64];
    snprintf(ab, sizeof ab, "%s%s", a, b);
    s->merges = realloc(s->merges, (s->n_merges + 1) * sizeof *s->merges);
    s->merges[s->n_merges++] = (struct tok_spec_merge){id_of(s, a), id_of(s, b), id_of(s, ab)};
}

static void added_n(struct tok_spec *s, const char *text, int special, int lstrip, int rstrip,
                    int normalized)
{
    uint32_t id =
        add_tok(s, text, (uint32_t)strlen(text), special ? NIB_TOK_CONTROL : NIB_TOK_USER);
    s->added = realloc(s->added, (s->n_added + 1) * sizeof *s->added);
    s->added[s->n_added++] = (struct tok_spec_added){
        .id = id, .special = special, .lstrip = lstrip, .rstrip = rstrip, .normalized = normalized};
}

static void added(struct tok_spec *s, const char *text, int special, int lstrip, int rstrip)
{
    added_n(s, text, special, lstrip, rstrip, 0);
}

static void norm(struct tok_spec *s, int kind, const char *pat, const char *arg)
{
    s->norm = realloc(s->norm, (s->n_norm + 1) * sizeof *s->norm);
    struct tok_norm_step *n = &s->norm[s->n_norm++];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    if (pat) {
        n->pattern = (uint8_t *)strdup(pat);
        n->pattern_len = (uint32_t)strlen(pat);
    }
    if (arg) {
        n->arg = (uint8_t *)strdup(arg);
        n->arg_len = (uint32_t)strlen(arg);
    }
}

static struct tok_pre_step *pre(struct tok_spec *s, int kind)
{
    s->pre = realloc(s->pre, (s->n_pre + 1) * sizeof *s->pre);
    struct tok_pre_step *p = &s->pre[s->n_pre++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    return p;
}

/* The byte-level alphabet: one token per byte, byte_id set. */
static void all_bytes(struct tok_spec *s)
{
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        s->byte_id[b] = add_tok(s, &c, 1, NIB_TOK_NORMAL);
    }
    s->byte_level = 1;
}

/* <0x00>..<0xFF> byte-fallback tokens. */
static void fallback_bytes(struct tok_spec *s)
{
    for (int b = 0; b < 256; b++) {
        char p[8];
        snprintf(p, sizeof p, "<0x%02X>", b);
        add_tok(s, p, 6, NIB_TOK_BYTE);
    }
    s->byte_fallback = 1;
}

struct packed {
    uint8_t *sec;
    struct nib_blob_view v;
    void *scratch;
    uint32_t ids[4096];
};

static struct packed *pack(struct tok_spec *s)
{
    struct packed *p = calloc(1, sizeof *p);
    size_t len;
    char err[512];
    ck_assert_msg(tok_pack(s, NULL, 0, &p->sec, &len, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(nib_tok_section_open(&p->v, p->sec, len, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(nib_tok_check(&p->v, err, sizeof err) == 0, "%s", err);
    return p;
}

static void unpack(struct packed *p, struct tok_spec *s)
{
    free(p->sec);
    free(p->scratch);
    free(p);
    tok_spec_free(s);
}

static int encode(struct packed *p, const void *text, size_t len, int special, const uint8_t *taint,
                  int bos)
{
    struct nib_tok_request rq = {.add_bos = bos, .special = special, .taint = taint};
    free(p->scratch);
    p->scratch = aligned_alloc(64, (nib_tok_req_scratch_footprint(&p->v, len) + 63) & ~(size_t)63);
    size_t max = nib_tok_max_ids(&p->v, len);
    ck_assert_uint_le(max, 4096);
    return nib_tok_encode_req(&p->v, text, len, &rq, p->ids, max, p->scratch);
}

/* The ids of text, as the token texts separated by '|' (ids by number
 * when written #N). */
static void expect_full(struct packed *p, const struct tok_spec *s, const void *text, size_t len,
                        int special, const uint8_t *taint, int bos, const char *want)
{
    int n = encode(p, text, len, special, taint, bos);
    uint32_t exp[256];
    int m = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", want);
    for (char *q = buf, *e; *q; q = e) {
        e = strchr(q, '|');
        if (e)
            *e++ = 0;
        else
            e = q + strlen(q);
        exp[m++] = q[0] == '#' && q[1] ? (uint32_t)atoi(q + 1) : id_of(s, q);
    }
    char got[1024] = "";
    for (int i = 0; i < n; i++) {
        uint32_t l;
        const uint8_t *pc = nib_tok_piece(&p->v, p->ids[i], &l);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%.*s", i ? "|" : "", (int)l,
                 (const char *)pc);
    }
    ck_assert_msg(n == m && memcmp(p->ids, exp, (size_t)m * 4) == 0,
                  "'%.*s': got %d ids '%s', want '%s'", (int)len, (const char *)text, n, got, want);
}

#define EXPECT(p, s, text, want) expect_full(p, s, text, strlen(text), 0, NULL, 0, want)

/* ---- tests ---- */

/* Lowest rank first, whatever the position; leftmost on ties. */
START_TEST(merge_rank_order_and_ties)
{
    struct tok_spec s;
    spec_init(&s);
    tok(&s, "a"), tok(&s, "b"), tok(&s, "c"), tok(&s, "ab"), tok(&s, "bc"), tok(&s, "aa");
    tok(&s, "abc"), tok(&s, "aaaa");
    merge(&s, "b", "c");   /* 0 */
    merge(&s, "a", "b");   /* 1 */
    merge(&s, "a", "bc");  /* 2 */
    merge(&s, "a", "a");   /* 3 */
    merge(&s, "aa", "aa"); /* 4 */
    s.unk_id = -1;
    struct packed *p = pack(&s);
    EXPECT(p, &s, "abc", "abc"); /* b+c first, then a+bc */
    EXPECT(p, &s, "ab", "ab");
    EXPECT(p, &s, "aaa", "aa|a");     /* leftmost tie */
    EXPECT(p, &s, "aaaaa", "aaaa|a"); /* aa aa a, then aa+aa */
    EXPECT(p, &s, "cab", "c|ab");
    EXPECT(p, &s, "abcab", "abc|ab");
    unpack(p, &s);
}
END_TEST

/* Byte-level: each byte is its token first; no unknowns exist. */
START_TEST(byte_level_words)
{
    struct tok_spec s;
    spec_init(&s);
    all_bytes(&s);
    tok(&s, "\xc3\xa9"), tok(&s, "h\xc3\xa9"), tok(&s, " \xed"), tok(&s, "\xed\x9f");
    merge(&s, "\xc3", "\xa9");
    merge(&s, "h", "\xc3\xa9");
    merge(&s, " ", "\xed");
    merge(&s, "\xed", "\x9f");
    s.ignore_merges = 1;
    struct packed *p = pack(&s);
    EXPECT(p, &s, "h\xc3\xa9", "h\xc3\xa9");
    /* ill-formed UTF-8: each byte through its byte token */
    EXPECT(p, &s, "\xff\xc3", "\xff|\xc3");
    EXPECT(p, &s, "\xc3\xc3\xa9", "\xc3|\xc3\xa9");
    /* ...and never merges, nor makes a whole-word match */
    EXPECT(p, &s, " \xed", " |\xed");
    EXPECT(p, &s, " \xed\x9f\x80", " \xed|\x9f|\x80"); /* U+D7C0 is well-formed */
    EXPECT(p, &s, "\xed\xa0\x80", "\xed|\xa0|\x80");   /* a surrogate is ill-formed */
    unpack(p, &s);
}
END_TEST

/* Characters not in the vocabulary: <0xXX> per byte, else unk; fuse_unk
 * folds a run of unknowns into one. */
START_TEST(byte_fallback_unk_and_fuse)
{
    struct tok_spec s;
    spec_init(&s);
    s.unk_id = (int32_t)add_tok(&s, "<unk>", 5, NIB_TOK_UNKNOWN);
    tok(&s, "a"), tok(&s, "b");
    fallback_bytes(&s);
    struct packed *p = pack(&s);
    EXPECT(p, &s,
           "a\xc3\xa9"
           "b",
           "a|<0xC3>|<0xA9>|b");
    EXPECT(p, &s, "\xff", "<0xFF>"); /* an ill-formed byte is one character */
    unpack(p, &s);

    spec_init(&s);
    s.unk_id = (int32_t)add_tok(&s, "<unk>", 5, NIB_TOK_UNKNOWN);
    tok(&s, "a");
    p = pack(&s);
    EXPECT(p, &s, "xya", "<unk>|<unk>|a");
    unpack(p, &s);

    spec_init(&s);
    s.unk_id = (int32_t)add_tok(&s, "<unk>", 5, NIB_TOK_UNKNOWN);
    tok(&s, "a");
    s.fuse_unk = 1;
    p = pack(&s);
    EXPECT(p, &s, "xyaz\xff", "<unk>|a|<unk>");
    unpack(p, &s);

    /* byte fallback with a byte token missing: the character is unk */
    spec_init(&s);
    s.unk_id = (int32_t)add_tok(&s, "<unk>", 5, NIB_TOK_UNKNOWN);
    add_tok(&s, "<0xC3>", 6, NIB_TOK_BYTE);
    s.byte_fallback = 1;
    p = pack(&s);
    EXPECT(p, &s, "\xc3\xa9", "<unk>");
    unpack(p, &s);
}
END_TEST

/* ignore_merges: a word that is a token is that token, even where the
 * merges would not build it. */
START_TEST(ignore_merges_whole_word)
{
    struct tok_spec s;
    spec_init(&s);
    all_bytes(&s);
    tok(&s, "abc"), tok(&s, "bc");
    merge(&s, "b", "c");
    struct packed *p = pack(&s);
    EXPECT(p, &s, "abc", "a|bc");
    unpack(p, &s);
    spec_init(&s);
    all_bytes(&s);
    tok(&s, "abc"), tok(&s, "bc");
    merge(&s, "b", "c");
    s.ignore_merges = 1;
    p = pack(&s);
    EXPECT(p, &s, "abc", "abc");
    EXPECT(p, &s, "abcc", "a|bc|c");
    unpack(p, &s);
}
END_TEST

/* Added tokens: leftmost-longest; special ones only with special or in
 * untainted bytes; lstrip/rstrip swallow whitespace. */
START_TEST(added_tokens)
{
    struct tok_spec s;
    spec_init(&s);
    all_bytes(&s);
    added(&s, "[im_start]", 1, 0, 0);
    added(&s, "[im", 1, 0, 0);
    added(&s, "<think>", 0, 0, 0);
    added(&s, "<L>", 0, 1, 0);
    added(&s, "<R>", 0, 0, 1);
    struct packed *p = pack(&s);
    const char *t = "x[im_start]y";
    EXPECT(p, &s, t, "x|[|i|m|_|s|t|a|r|t|]|y");
    expect_full(p, &s, t, strlen(t), 1, NULL, 0, "x|[im_start]|y");
    uint8_t taint[32] = {0};
    expect_full(p, &s, t, strlen(t), 0, taint, 0, "x|[im_start]|y");
    taint[2] = 1; /* one message byte inside: neither control token */
    expect_full(p, &s, t, strlen(t), 0, taint, 0, "x|[|i|m|_|s|t|a|r|t|]|y");
    taint[2] = 0;
    taint[6] = 1; /* the longer one is tainted, the shorter one is not */
    expect_full(p, &s, t, strlen(t), 0, taint, 0, "x|[im|_|s|t|a|r|t|]|y");
    EXPECT(p, &s, "a<think>b", "a|<think>|b");
    EXPECT(p, &s, "a \t <L> b", "a|<L>| |b");
    EXPECT(p, &s, "a <R> \n b", "a| |<R>|b");
    EXPECT(p, &s, "<R>  ", "<R>");
    unpack(p, &s);
}
END_TEST

/* Normalizers Prepend and Replace apply to each piece between added
 * tokens (the Llama 2 tokenizer.json pipeline). */
START_TEST(prepend_replace_per_piece)
{
    struct tok_spec s;
    spec_init(&s);
    s.unk_id = (int32_t)add_tok(&s, "<unk>", 5, NIB_TOK_UNKNOWN);
    added(&s, "<s>", 1, 0, 0);
    tok(&s, "\xe2\x96\x81"), tok(&s, "h"), tok(&s, "i"), tok(&s, "\xe2\x96\x81h");
    tok(&s, "\xe2\x96\x81hi");
    merge(&s, "\xe2\x96\x81", "h");
    merge(&s, "\xe2\x96\x81h", "i");
    norm(&s, TOK_NORM_PREPEND, NULL, "\xe2\x96\x81");
    norm(&s, TOK_NORM_REPLACE, " ", "\xe2\x96\x81");
    s.bos_id = (int32_t)id_of(&s, "<s>");
    s.add_bos = 1;
    struct packed *p = pack(&s);
    EXPECT(p, &s, "hi hi", "\xe2\x96\x81hi|\xe2\x96\x81hi");
    expect_full(p, &s, "hi<s>hi", 7, 1, NULL, 1, "<s>|\xe2\x96\x81hi|<s>|\xe2\x96\x81hi");
    EXPECT(p, &s, "", "");
    expect_full(p, &s, "", 0, 0, NULL, 1, "<s>");
    unpack(p, &s);
}
END_TEST

/* "normalized" added tokens are matched by their normalized text in the
 * normalized piece (tokenizers.js): with Prepend+Replace, "<u>" is
 * "\u2581<u>", so it matches after a space or at the start only. */
START_TEST(normalized_added_tokens)
{
    struct tok_spec s;
    spec_init(&s);
    s.unk_id = (int32_t)add_tok(&s, "?", 1, NIB_TOK_UNKNOWN);
    added_n(&s, "<u>", 1, 0, 0, 1);
    added_n(&s, "<x>", 1, 0, 0, 0);
    tok(&s, "\xe2\x96\x81"), tok(&s, "a"), tok(&s, "<"), tok(&s, "u"), tok(&s, ">");
    tok(&s, "\xe2\x96\x81"
            "a");
    merge(&s, "\xe2\x96\x81", "a");
    norm(&s, TOK_NORM_PREPEND, NULL, "\xe2\x96\x81");
    norm(&s, TOK_NORM_REPLACE, " ", "\xe2\x96\x81");
    struct packed *p = pack(&s);
    expect_full(p, &s, "<u>", 3, 1, NULL, 0, "<u>");
    expect_full(p, &s, "a <u>a", 6, 1, NULL, 0,
                "\xe2\x96\x81"
                "a|<u>|a");
    expect_full(p, &s, "a<u>", 4, 1, NULL, 0,
                "\xe2\x96\x81"
                "a|<|u|>");
    expect_full(p, &s, "a <u>", 5, 0, NULL, 0,
                "\xe2\x96\x81"
                "a|\xe2\x96\x81|<|u|>");
    uint8_t clean[8] = {0};
    expect_full(p, &s, "a <u>", 5, 0, clean, 0,
                "\xe2\x96\x81"
                "a|<u>");
    /* a raw (not normalized) one splits the text first: Prepend again after it */
    expect_full(p, &s, "a<x>a", 5, 1, NULL, 0,
                "\xe2\x96\x81"
                "a|<x>|\xe2\x96\x81"
                "a");
    unpack(p, &s);
}
END_TEST

/* Metaspace (prepend "first" only on the text's first piece, no split),
 * Digits and string splits. */
START_TEST(metaspace_digits_split)
{
    struct tok_spec s;
    spec_init(&s);
    all_bytes(&s);
    added(&s, "<s>", 1, 0, 0);
    tok(&s, "\xe2\x96"), tok(&s, "\xe2\x96\x81"), tok(&s, "12"), tok(&s, "123");
    merge(&s, "\xe2", "\x96");
    merge(&s, "\xe2\x96", "\x81");
    merge(&s, "1", "2");
    merge(&s, "12", "3");
    struct tok_pre_step *m = pre(&s, TOK_PRE_METASPACE);
    m->replacement = 0x2581;
    m->prepend_scheme = TOK_PREPEND_FIRST;
    struct packed *p = pack(&s);
    EXPECT(p, &s, "a b", "\xe2\x96\x81|a|\xe2\x96\x81|b");
    expect_full(p, &s, "<s>a", 4, 1, NULL, 0, "<s>|a");
    expect_full(p, &s, "a<s>a", 5, 1, NULL, 0, "\xe2\x96\x81|a|<s>|a");
    EXPECT(p, &s, " a", "\xe2\x96\x81|a");
    unpack(p, &s);

    spec_init(&s);
    all_bytes(&s);
    tok(&s, "12"), tok(&s, "123"), tok(&s, "a1");
    merge(&s, "1", "2");
    merge(&s, "12", "3");
    merge(&s, "a", "1");
    pre(&s, TOK_PRE_DIGITS);
    p = pack(&s);
    EXPECT(p, &s, "a123b1", "a|123|b|1");
    unpack(p, &s);
    spec_init(&s);
    all_bytes(&s);
    tok(&s, "12"), tok(&s, "123");
    merge(&s, "1", "2");
    merge(&s, "12", "3");
    pre(&s, TOK_PRE_DIGITS)->individual_digits = 1;
    p = pack(&s);
    EXPECT(p, &s, "x123", "x|1|2|3");
    unpack(p, &s);

    spec_init(&s);
    all_bytes(&s);
    tok(&s, "ab"), tok(&s, "b-"), tok(&s, "-a");
    merge(&s, "a", "b");
    merge(&s, "b", "-");
    merge(&s, "-", "a");
    struct tok_pre_step *sp = pre(&s, TOK_PRE_SPLIT_STRING);
    sp->pattern = strdup("-");
    sp->pattern_len = 1;
    sp->behavior = TOK_SPLIT_ISOLATED;
    p = pack(&s);
    EXPECT(p, &s, "ab-ab", "ab|-|ab");
    unpack(p, &s);
    spec_init(&s);
    all_bytes(&s);
    tok(&s, "ab");
    merge(&s, "a", "b");
    sp = pre(&s, TOK_PRE_SPLIT_STRING);
    sp->pattern = strdup("-");
    sp->pattern_len = 1;
    sp->invert = 1; /* the matches alone */
    p = pack(&s);
    EXPECT(p, &s, "ab-ab--", "-|-|-");
    unpack(p, &s);
}
END_TEST

/* Decoding: the decoder's replacement, strip at the start of a text, byte
 * fallback pieces as their byte, control tokens as nothing. */
START_TEST(decode_pieces)
{
    struct tok_spec s;
    spec_init(&s);
    added(&s, "<s>", 1, 0, 0);
    tok(&s, "\xe2\x96\x81hi"), tok(&s, "x");
    fallback_bytes(&s);
    s.bos_id = 0;
    s.dec_from = (uint8_t *)strdup("\xe2\x96\x81");
    s.dec_from_len = 3;
    s.dec_to = (uint8_t *)strdup(" ");
    s.dec_to_len = 1;
    s.strip_leading = 1;
    struct packed *p = pack(&s);
    char out[64];
    uint32_t hi = id_of(&s, "\xe2\x96\x81hi");
    ck_assert_uint_eq(nib_tok_decode(&p->v, NIB_TOK_NONE, hi, out, sizeof out), 2);
    ck_assert_mem_eq(out, "hi", 2);
    ck_assert_uint_eq(nib_tok_decode(&p->v, 0, hi, out, sizeof out), 2);
    ck_assert_uint_eq(nib_tok_decode(&p->v, hi, hi, out, sizeof out), 3);
    ck_assert_mem_eq(out, " hi", 3);
    ck_assert_uint_eq(nib_tok_decode(&p->v, hi, 0, out, sizeof out), 0);
    ck_assert_uint_eq(nib_tok_decode(&p->v, hi, id_of(&s, "<0x0A>"), out, sizeof out), 1);
    ck_assert_int_eq(out[0], '\n');
    ck_assert_int_eq(nib_tok_is_eog(&p->v, 0), 0);
    unpack(p, &s);
}
END_TEST

/* The heap merge equals the rescanning reference on random words over a
 * random merge table (ties, chains, unknown symbols). */
START_TEST(fast_merge_equals_reference)
{
    struct tok_spec s;
    spec_init(&s);
    all_bytes(&s);
    uint64_t r = 12345;
#define RND() ((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 33)
    /* tokens over the alphabet a..d, merges in random order */
    for (int i = 0; i < 300; i++) {
        uint32_t a = (uint32_t)(RND() % s.n_vocab), b = (uint32_t)(RND() % s.n_vocab);
        if (a < 256 && !(a >= 'a' && a <= 'd'))
            continue;
        if (b < 256 && !(b >= 'a' && b <= 'd'))
            continue;
        uint32_t la = s.tokens[a].len, lb = s.tokens[b].len;
        if (la + lb > 12)
            continue;
        uint8_t cat[32];
        memcpy(cat, s.tokens[a].bytes, la);
        memcpy(cat + la, s.tokens[b].bytes, lb);
        uint32_t res = UINT32_MAX;
        for (uint32_t k = 0; k < s.n_vocab; k++)
            if (s.tokens[k].len == la + lb && !memcmp(s.tokens[k].bytes, cat, la + lb))
                res = k;
        int dup = 0;
        for (uint32_t k = 0; k < s.n_merges; k++)
            dup |= s.merges[k].left == a && s.merges[k].right == b;
        if (dup)
            continue;
        if (res == UINT32_MAX)
            res = add_tok(&s, cat, la + lb, NIB_TOK_NORMAL);
        s.merges = realloc(s.merges, (s.n_merges + 1) * sizeof *s.merges);
        s.merges[s.n_merges++] = (struct tok_spec_merge){a, b, res};
    }
    struct packed *p = pack(&s);
    uint32_t a[600], b[600];
    void *work = aligned_alloc(64, (nib_tok_merge_footprint(600) + 63) & ~(size_t)63);
    for (int round = 0; round < 3000; round++) {
        size_t n = 1 + RND() % 500;
        for (size_t i = 0; i < n; i++)
            a[i] = RND() % 16 == 0 ? 0x80000000u + (uint32_t)i : 'a' + (uint32_t)(RND() % 4);
        memcpy(b, a, n * 4);
        size_t na = nib_tok_merge_scan(&p->v, a, 0, n);
        size_t nb = nib_tok_merge_heap(&p->v, b, 0, n, work);
        ck_assert_uint_eq(na, nb);
        ck_assert_mem_eq(a, b, na * 4);
    }
    free(work);
    unpack(p, &s);
#undef RND
}
END_TEST

/* A packed section with one field made hostile is refused, naming it. */
static struct tok_spec hostile_spec;
static uint8_t *hostile_sec, *hostile_work;
static size_t hostile_len;

static void hostile_setup(void)
{
    struct tok_spec *s = &hostile_spec;
    spec_init(s);
    all_bytes(s);
    tok(s, "ab");
    merge(s, "a", "b");
    added(s, "<x>", 1, 0, 0);
    added(s, "<y>", 0, 0, 0);
    norm(s, TOK_NORM_REPLACE, " ", "_");
    pre(s, TOK_PRE_DIGITS);
    s->bos_id = (int32_t)id_of(s, "<x>");
    s->n_eog = 1;
    s->eog[0] = (uint32_t)s->bos_id;
    char err[256];
    ck_assert(tok_pack(s, NULL, 0, &hostile_sec, &hostile_len, err, sizeof err) == 0);
    hostile_work = aligned_alloc(64, hostile_len);
}

static void hostile_teardown(void)
{
    free(hostile_sec);
    free(hostile_work);
    tok_spec_free(&hostile_spec);
}

static struct nib_tok_header *HW(void)
{
    return (struct nib_tok_header *)(void *)hostile_work;
}

#define HOSTILE(mutation, what)                                                                    \
    do {                                                                                           \
        memcpy(hostile_work, hostile_sec, hostile_len);                                            \
        struct nib_tok_header *h = HW();                                                           \
        (void)h;                                                                                   \
        mutation;                                                                                  \
        struct nib_blob_view v;                                                                    \
        char err[256] = "";                                                                        \
        ck_assert_msg(nib_tok_section_open(&v, hostile_work, hostile_len, err, sizeof err) == -1,  \
                      "accepted: " #mutation);                                                     \
        ck_assert_msg(strstr(err, what), "'%s' does not say '%s'", err, what);                     \
    } while (0)

#define AT(T, range, i) ((T *)(void *)(hostile_work + h->range.offset))[i]

START_TEST(hostile_sections_refused)
{
    struct nib_blob_view v;
    char err[256];
    memcpy(hostile_work, hostile_sec, hostile_len);
    ck_assert_msg(nib_tok_section_open(&v, hostile_work, hostile_len, err, sizeof err) == 0, "%s",
                  err);
    HOSTILE(h->model = 3, "model 3");
    HOSTILE(h->flags |= 0x100, "flags");
    HOSTILE(h->unk_id = h->n_vocab, "unk id");
    HOSTILE(h->bos_id = h->n_vocab + 5, "bos/eos");
    HOSTILE(h->flags |= NIB_TOKF_ADD_EOS, "bos/eos");
    HOSTILE(h->n_eog = 17, "end-of-generation");
    HOSTILE(h->eog[0] = 1u << 30, "end-of-generation");
    HOSTILE(h->max_piece_len = 1000, "max piece");
    HOSTILE(h->pre_name[31] = 'x'; memset(h->pre_name, 'x', 32), "name");
    HOSTILE(h->strip_leading = 1000, "strip");
    HOSTILE(h->entries.count--, "tables");
    HOSTILE(h->byte_ids.count = 255, "256 bytes");
    HOSTILE(h->entries.offset = 4, "entries");
    HOSTILE(h->sorted.offset = (uint32_t)hostile_len, "sorted index");
    HOSTILE(h->bytes.count = 0x7FFFFFFF, "bytes");
    HOSTILE(h->merges.count = 3, "power of two");
    HOSTILE(h->merges.count = 1u << 30, "merges");
    HOSTILE(h->trie_nodes.count = 1u << 30, "too large");
    HOSTILE(h->norm.count = 9, "too large");
    HOSTILE(h->data.offset = 0xFFFFFFF8u, "data");
    HOSTILE(h->chat.count = 1u << 30, "too large");
    HOSTILE(h->dec_to_off = 0xFFFFFF00u; h->dec_to_len = 1, "decoder");
    HOSTILE(h->dec_from_len = 65, "decoder");
    HOSTILE(AT(uint32_t, byte_ids, 9) = h->n_vocab, "byte 9");
    HOSTILE(AT(uint32_t, byte_ids, 9) = NIB_TOK_NONE, "byte 9"); /* byte-level needs all */
    HOSTILE(AT(struct nib_tok_entry, entries, 3).len = 200, "outside the tokenizer bytes");
    HOSTILE(AT(struct nib_tok_entry, entries, 3).type = 9, "unknown type");
    HOSTILE(AT(uint32_t, sorted, 0) = h->n_vocab, "sorted index");
    HOSTILE(uint32_t t0 = AT(uint32_t, sorted, 0);
            AT(uint32_t, sorted, 0) = AT(uint32_t, sorted, 1);
            AT(uint32_t, sorted, 1) = t0, "not sorted");
    /* the merge table: every field of the one merge */
    memcpy(hostile_work, hostile_sec, hostile_len);
    struct nib_tok_header *h = HW();
    const struct nib_tok_merge *pristine = (const void *)(hostile_sec + h->merges.offset);
    for (uint32_t i = 0; i < h->merges.count; i++) {
        if (pristine[i].left == NIB_TOK_NONE)
            continue;
        HOSTILE(AT(struct nib_tok_merge, merges, i).result = h->n_vocab, "outside the vocabulary");
        HOSTILE(AT(struct nib_tok_merge, merges, i).left = h->n_vocab + 1, "outside");
        HOSTILE(AT(struct nib_tok_merge, merges, i).rank = 1u << 25, "rank");
        /* moved away from its home slot: not findable */
        HOSTILE(AT(struct nib_tok_merge, merges, (i + 5) & (h->merges.count - 1)) =
                    AT(struct nib_tok_merge, merges, i);
                AT(struct nib_tok_merge, merges, i).left = NIB_TOK_NONE, "reachable");
        /* the same key twice */
        HOSTILE(AT(struct nib_tok_merge, merges, (i + 1) & (h->merges.count - 1)) =
                    AT(struct nib_tok_merge, merges, i);
                h->merge_max_probe = 1, "repeats");
    }
    HOSTILE(h->merge_max_probe = 5000, "probe");
    /* the trie */
    HOSTILE(AT(struct nib_tok_trie_node, trie_nodes, 0).n_edges++, "edges");
    HOSTILE(AT(struct nib_tok_trie_node, trie_nodes, 1).edge_start++, "edges");
    HOSTILE(AT(struct nib_tok_trie_node, trie_nodes, 0).flags = NIB_TOKA_TERMINAL, "bad token");
    HOSTILE(AT(struct nib_tok_trie_node, trie_nodes, h->trie_nodes.count - 1).id = h->n_vocab,
            "bad token");
    HOSTILE(AT(struct nib_tok_trie_node, trie_nodes, 2).flags = NIB_TOKA_SPECIAL, "bad token");
    HOSTILE(AT(struct nib_tok_trie_edge, trie_edges, 0).child = 0, "breaks the order");
    HOSTILE(AT(struct nib_tok_trie_edge, trie_edges, 0).byte = 300, "not sorted");
    HOSTILE(h->trie_nodes.count--, "reached");
    /* the steps */
    HOSTILE(AT(struct nib_tok_norm_step, norm, 0).kind = 9, "normalizer step 0");
    HOSTILE(AT(struct nib_tok_norm_step, norm, 0).pat_len = 0, "normalizer step 0");
    HOSTILE(AT(struct nib_tok_norm_step, norm, 0).arg_off = 1u << 30, "normalizer step 0");
    HOSTILE(AT(struct nib_tok_pre_step, pre, 0).kind = 0, "pre-tokenizer step 0");
    HOSTILE(AT(struct nib_tok_pre_step, pre, 0).flags = 0x100, "pre-tokenizer step 0");
    HOSTILE(AT(struct nib_tok_pre_step, pre, 0).kind = NIB_TOKP_SPLIT_STRING, "pre-tokenizer");
    HOSTILE(AT(struct nib_tok_pre_step, pre, 0).kind = NIB_TOKP_METASPACE;
            AT(struct nib_tok_pre_step, pre, 0).replacement = 0xD800, "pre-tokenizer");
    HOSTILE(memset(hostile_work, 0, 16), "tokenizer has 0");
}
END_TEST

/* The SentencePiece blob the tests build ($NIB_TEST_BLOB): the request
 * path (added tokens found first, control ones not allowed) gives exactly
 * the ids of the format 3 path on random texts, and with special on the
 * control tokens written in the text become their ids. */
START_TEST(spm_request_equals_plain_path)
{
    struct nib_blob_view v;
    uint8_t *blob = tu_open_test_blob(&v);
    ck_assert_uint_eq(v.tok->model, NIB_TOKM_SPM);
    enum { MAXLEN = 200 };
    uint32_t a[2 * MAXLEN + 3], b[2 * MAXLEN + 3];
    void *work = aligned_alloc(64, (nib_tok_req_scratch_footprint(&v, MAXLEN) + 63) & ~(size_t)63);
    void *work2 = aligned_alloc(64, (nib_tok_scratch_footprint(MAXLEN) + 63) & ~(size_t)63);
    uint64_t r = 99;
    char text[MAXLEN];
    for (int round = 0; round < 500; round++) {
        size_t len = 0;
        while (len < MAXLEN - NIB_MAX_PIECE / 8) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            uint32_t id = (uint32_t)(r >> 33) % v.tok->n_vocab, pl;
            const uint8_t *pc = nib_tok_piece(&v, id, &pl);
            if ((r >> 20) % 5 == 0) {
                text[len++] = (char)(r >> 40);
            } else if (pl <= 24 && len + pl <= MAXLEN) {
                memcpy(text + len, pc, pl);
                len += pl;
            }
            if ((r >> 50) % 9 == 0)
                break;
        }
        struct nib_tok_request rq = {.add_bos = 1};
        int na = nib_tok_encode_req(&v, text, len, &rq, a, nib_tok_max_ids(&v, len), work);
        int nb = nib_tok_encode_with(&v, text, len, (int)v.h->hp.add_bos, b, MAXLEN + 2, work2);
        ck_assert_int_eq(na, nb);
        ck_assert_mem_eq(a, b, (size_t)na * 4);
    }
    struct nib_tok_request sp = {.add_bos = 0, .special = 1};
    uint32_t len;
    const uint8_t *eos = nib_tok_piece(&v, v.tok->eos_id, &len);
    memcpy(text, "hi", 2);
    memcpy(text + 2, eos, len);
    int n = nib_tok_encode_req(&v, text, 2 + len, &sp, a, nib_tok_max_ids(&v, 2 + len), work);
    ck_assert_int_ge(n, 2);
    ck_assert_uint_eq(a[n - 1], v.tok->eos_id);
    free(work);
    free(work2);
    free(blob);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("bpe");
    TU_CASE(s, "model", NULL, NULL, 60, merge_rank_order_and_ties, byte_level_words,
            byte_fallback_unk_and_fuse, ignore_merges_whole_word, added_tokens,
            prepend_replace_per_piece, normalized_added_tokens, metaspace_digits_split,
            decode_pieces, fast_merge_equals_reference);
    TU_CASE(s, "hostile", hostile_setup, hostile_teardown, 60, hostile_sections_refused);
    TU_CASE(s, "sentencepiece", NULL, NULL, 120, spm_request_equals_plain_path);
    return s;
}
