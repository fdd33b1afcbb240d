/* tokenizer.json (+ tokenizer_config.json, generation_config.json) ->
 * struct tok_spec. Every field read is checked for type and range; every
 * component outside the supported set is refused with its JSON path. */
#include "tools/compiler/hf_tokenizer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_blob/blob_format.h"
#include "tools/compiler/gguf_pretok.h"
#include "tools/util/json.h"
#include "tools/util/tool_util.h"

#define PATH_MAX_LEN 160

struct hf {
    struct tok_spec *s;
    char *err;
    size_t errlen;
    const char *file; /* for messages: "tokenizer.json", ... */
    const struct json_value *root;
    struct tok_strmap vocab; /* model.vocab keys (printable form) -> id */
    /* model.vocab entries by id (NULL where only an added token has the id) */
    const struct json_member **by_id;
    int bos_from_post;   /* the post-processor named the BOS */
    int post_decides;    /* the post-processor decided add_bos */
    uint8_t *added_seen; /* per id: named by added_tokens already */
    uint8_t *is_added;   /* per id: named by added_tokens at all */
};

static int fail(struct hf *h, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (h->err && h->errlen)
        snprintf(h->err, h->errlen, "%s: %s", h->file, msg);
    return -1;
}

/* A string from the file made safe to print (at most 48 bytes). */
static const char *show(const char *s, size_t n, char out[64])
{
    size_t o = 0;
    for (size_t i = 0; i < n && o < 48; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = c >= 0x20 && c != 0x7f ? (char)c : '?';
    }
    if (o < n && o == 48) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
    return out;
}

/* Paths for messages; out may be path itself; a long path ends in "...". */
static void path_done(char *out, char *t, int n)
{
    if (n >= PATH_MAX_LEN)
        memcpy(t + PATH_MAX_LEN - 4, "...", 4);
    memcpy(out, t, PATH_MAX_LEN);
}

static void sub(char *out, const char *path, const char *key)
{
    char t[PATH_MAX_LEN];
    path_done(out, t, snprintf(t, sizeof t, "%s%s%s", path, path[0] ? "." : "", key));
}

static void idx(char *out, const char *path, size_t i)
{
    char t[PATH_MAX_LEN];
    path_done(out, t, snprintf(t, sizeof t, "%s[%zu]", path, i));
}

static int wrong_type(struct hf *h, const char *path, const struct json_value *v, const char *want)
{
    return fail(h, "%s: expected %s, found %s", path, want, json_type_name(v));
}

/* Optional boolean member: absent or null leaves dflt. */
static int get_bool(struct hf *h, const struct json_value *obj, const char *path, const char *key,
                    int dflt, int *out)
{
    const struct json_value *v = json_get(obj, key);
    char p[PATH_MAX_LEN];
    *out = dflt;
    if (!v || v->type == JSON_NULL)
        return 0;
    sub(p, path, key);
    if (!json_is_bool(v))
        return wrong_type(h, p, v, "true or false");
    *out = v->type == JSON_TRUE;
    return 0;
}

/* Required string member. */
static int get_str(struct hf *h, const struct json_value *obj, const char *path, const char *key,
                   const struct json_value **out)
{
    char p[PATH_MAX_LEN];
    sub(p, path, key);
    *out = json_get(obj, key);
    return json_is(*out, JSON_STRING) ? 0 : wrong_type(h, p, *out, "a string");
}

static int unsupported(struct hf *h, const char *path, const struct json_value *type)
{
    char b[64];
    return fail(h, "%s.type: \"%s\" is not supported", path, show(type->str, type->n, b));
}

/* The component's "type" string. */
static int comp_type(struct hf *h, const struct json_value *c, const char *path,
                     const struct json_value **type)
{
    if (!json_is(c, JSON_OBJECT))
        return wrong_type(h, path, c, "an object");
    return get_str(h, c, path, "type", type);
}

/* One kind of pipeline component (normalizer, pre-tokenizer, decoder,
 * post-processor): a component of a type other than "Sequence". */
typedef int (*component_fn)(struct hf *h, const struct json_value *c, const char *path,
                            const struct json_value *type);

/* A component at path: absent or null adds nothing; a "Sequence" takes
 * each entry of its list (list_key) in turn; any other type goes to one. */
static int component(struct hf *h, const struct json_value *c, const char *path, int depth,
                     const char *list_key, component_fn one)
{
    const struct json_value *type;
    char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
    if (!c || c->type == JSON_NULL)
        return 0;
    if (depth > 8)
        return fail(h, "%s: Sequences nested too deep", path);
    if (comp_type(h, c, path, &type))
        return -1;
    if (!json_str_eq(type, "Sequence"))
        return one(h, c, path, type);
    const struct json_value *list = json_get(c, list_key);
    sub(p, path, list_key);
    if (!json_is(list, JSON_ARRAY))
        return wrong_type(h, p, list, "an array");
    for (uint32_t i = 0; i < list->n; i++) {
        idx(q, p, i);
        if (component(h, &list->items[i], q, depth + 1, list_key, one))
            return -1;
    }
    return 0;
}

static uint8_t *dup_bytes(const void *p, size_t n)
{
    uint8_t *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = 0;
    }
    return d;
}

/* A pattern {"String": s} (or {"Regex": r} when regex_ok); *is_regex says which. */
static int pattern(struct hf *h, const struct json_value *c, const char *path, int regex_ok,
                   const struct json_value **pat, int *is_regex)
{
    char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
    const struct json_value *v = json_get(c, "pattern");
    sub(p, path, "pattern");
    if (!json_is(v, JSON_OBJECT) || v->n != 1)
        return wrong_type(h, p, v, "an object {\"String\": ...} or {\"Regex\": ...}");
    const struct json_member *m = &v->members[0];
    *is_regex = m->key_len == 5 && !memcmp(m->key, "Regex", 5);
    if (!(m->key_len == 6 && !memcmp(m->key, "String", 6)) && !(*is_regex && regex_ok)) {
        char b[64];
        return fail(h, "%s: a \"%s\" pattern is not supported (%s)", p, show(m->key, m->key_len, b),
                    regex_ok ? "String or Regex" : "String only");
    }
    sub(q, p, m->key);
    if (!json_is(&m->value, JSON_STRING))
        return wrong_type(h, q, &m->value, "a string");
    *pat = &m->value;
    return 0;
}

/* ---- normalizer ---- */

static int add_norm(struct hf *h, int kind, const struct json_value *pat,
                    const struct json_value *arg)
{
    struct tok_spec *s = h->s;
    struct tok_norm_step *n = realloc(s->norm, (s->n_norm + 1) * sizeof *n);
    if (!n)
        return fail(h, "out of memory");
    s->norm = n;
    struct tok_norm_step st = {.kind = kind};
    if (pat && !(st.pattern = dup_bytes(pat->str, pat->n)))
        return fail(h, "out of memory");
    if (arg && !(st.arg = dup_bytes(arg->str, arg->n))) {
        free(st.pattern);
        return fail(h, "out of memory");
    }
    st.pattern_len = pat ? pat->n : 0;
    st.arg_len = arg ? arg->n : 0;
    s->norm[s->n_norm++] = st;
    return 0;
}

static int normalizer(struct hf *h, const struct json_value *c, const char *path,
                      const struct json_value *type)
{
    const struct json_value *a, *pat;
    if (json_str_eq(type, "NFC"))
        return add_norm(h, TOK_NORM_NFC, NULL, NULL);
    if (json_str_eq(type, "Prepend"))
        return get_str(h, c, path, "prepend", &a) || add_norm(h, TOK_NORM_PREPEND, NULL, a);
    if (json_str_eq(type, "Replace")) {
        int re;
        if (pattern(h, c, path, 0, &pat, &re) || get_str(h, c, path, "content", &a))
            return -1;
        if (pat->n == 0)
            return fail(h, "%s.pattern.String: an empty pattern is not supported", path);
        return add_norm(h, TOK_NORM_REPLACE, pat, a);
    }
    return unsupported(h, path, type);
}

/* ---- pre-tokenizer ---- */

static int add_pre(struct hf *h, struct tok_pre_step st)
{
    struct tok_spec *s = h->s;
    struct tok_pre_step *n = realloc(s->pre, (s->n_pre + 1) * sizeof *n);
    if (!n) {
        free(st.pattern);
        return fail(h, "out of memory");
    }
    s->pre = n;
    s->pre[s->n_pre++] = st;
    return 0;
}

static int behavior(struct hf *h, const struct json_value *c, const char *path, int *out)
{
    static const struct {
        const char *name;
        int b;
    } names[] = {
        {"Isolated", TOK_SPLIT_ISOLATED},
        {"Removed", TOK_SPLIT_REMOVED},
        {"MergedWithPrevious", TOK_SPLIT_MERGED_PREV},
        {"MergedWithNext", TOK_SPLIT_MERGED_NEXT},
        {"Contiguous", TOK_SPLIT_CONTIGUOUS},
    };
    const struct json_value *v;
    char p[PATH_MAX_LEN], b[64];
    if (get_str(h, c, path, "behavior", &v))
        return -1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (json_str_eq(v, names[i].name)) {
            *out = names[i].b;
            return 0;
        }
    sub(p, path, "behavior");
    return fail(h, "%s: \"%s\" is not a split behavior", p, show(v->str, v->n, b));
}

/* The code point of a one-character UTF-8 string, or -1. */
static int64_t single_char(const struct json_value *v)
{
    const unsigned char *s = (const unsigned char *)v->str;
    if (v->n == 1 && s[0] < 0x80)
        return s[0];
    if (v->n == 2 && (s[0] & 0xe0) == 0xc0)
        return (s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    if (v->n == 3 && (s[0] & 0xf0) == 0xe0)
        return (s[0] & 0x0f) << 12 | (s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    if (v->n == 4 && (s[0] & 0xf8) == 0xf0)
        return (int64_t)(s[0] & 0x07) << 18 | (s[1] & 0x3f) << 12 | (s[2] & 0x3f) << 6 |
               (s[3] & 0x3f);
    return -1;
}

static int metaspace(struct hf *h, const struct json_value *c, const char *path)
{
    const struct json_value *r, *ps = json_get(c, "prepend_scheme");
    char p[PATH_MAX_LEN];
    struct tok_pre_step st = {.kind = TOK_PRE_METASPACE, .prepend_scheme = TOK_PREPEND_ALWAYS};
    int aps, split;
    if (get_str(h, c, path, "replacement", &r))
        return -1;
    int64_t cp = single_char(r);
    if (cp < 0) {
        sub(p, path, "replacement");
        return fail(h, "%s: must be one character", p);
    }
    st.replacement = (uint32_t)cp;
    if (get_bool(h, c, path, "add_prefix_space", 1, &aps) ||
        get_bool(h, c, path, "split", 1, &split))
        return -1;
    st.split = split;
    if (ps && ps->type != JSON_NULL) {
        sub(p, path, "prepend_scheme");
        if (json_str_eq(ps, "always"))
            st.prepend_scheme = TOK_PREPEND_ALWAYS;
        else if (json_str_eq(ps, "first"))
            st.prepend_scheme = TOK_PREPEND_FIRST;
        else if (json_str_eq(ps, "never"))
            st.prepend_scheme = TOK_PREPEND_NEVER;
        else
            return wrong_type(h, p, ps, "\"always\", \"first\" or \"never\"");
    } else if (!aps) {
        st.prepend_scheme = TOK_PREPEND_NEVER; /* older files: add_prefix_space alone */
    }
    return add_pre(h, st);
}

static int pre_tokenizer(struct hf *h, const struct json_value *c, const char *path,
                         const struct json_value *type)
{
    if (json_str_eq(type, "Split")) {
        const struct json_value *pat;
        struct tok_pre_step st = {0};
        int re;
        if (pattern(h, c, path, 1, &pat, &re) || behavior(h, c, path, &st.behavior) ||
            get_bool(h, c, path, "invert", 0, &st.invert))
            return -1;
        if (pat->n == 0 || memchr(pat->str, 0, pat->n))
            return fail(h, "%s.pattern: an empty pattern or one with a NUL is not supported", path);
        st.kind = re ? TOK_PRE_SPLIT_REGEX : TOK_PRE_SPLIT_STRING;
        st.pattern = (char *)dup_bytes(pat->str, pat->n);
        st.pattern_len = pat->n;
        if (!st.pattern)
            return fail(h, "out of memory");
        return add_pre(h, st);
    }
    if (json_str_eq(type, "ByteLevel")) {
        int aps, use_regex;
        if (get_bool(h, c, path, "add_prefix_space", 1, &aps) ||
            get_bool(h, c, path, "use_regex", 1, &use_regex))
            return -1;
        h->s->byte_level = 1;
        if (use_regex)
            return add_pre(
                h, (struct tok_pre_step){.kind = TOK_PRE_BYTELEVEL_REGEX, .add_prefix_space = aps});
        if (aps)
            return fail(h, "%s: add_prefix_space without use_regex is not supported", path);
        return 0;
    }
    if (json_str_eq(type, "Digits")) {
        struct tok_pre_step st = {.kind = TOK_PRE_DIGITS};
        return get_bool(h, c, path, "individual_digits", 0, &st.individual_digits) ||
               add_pre(h, st);
    }
    if (json_str_eq(type, "Metaspace"))
        return metaspace(h, c, path);
    return unsupported(h, path, type);
}

/* ---- decoder ---- */

static int decoder(struct hf *h, const struct json_value *c, const char *path,
                   const struct json_value *type)
{
    struct tok_spec *s = h->s;
    const struct json_value *pat, *content;
    char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
    if (json_str_eq(type, "ByteLevel")) {
        s->byte_level = 1;
        return 0;
    }
    if (json_str_eq(type, "ByteFallback") || json_str_eq(type, "Fuse"))
        return 0; /* byte tokens join into bytes; pieces join into one text: always so */
    if (json_str_eq(type, "Replace") || json_str_eq(type, "Metaspace")) {
        int re, metaspace = json_str_eq(type, "Metaspace");
        if (metaspace
                ? get_str(h, c, path, "replacement", &pat)
                : pattern(h, c, path, 0, &pat, &re) || get_str(h, c, path, "content", &content))
            return -1;
        if (s->dec_from)
            return fail(h, "%s: a second Replace in the decoder is not supported", path);
        if (pat->n == 0)
            return fail(h, "%s: an empty pattern is not supported", path);
        s->dec_from = dup_bytes(pat->str, pat->n);
        s->dec_to = metaspace ? dup_bytes(" ", 1) : dup_bytes(content->str, content->n);
        if (!s->dec_from || !s->dec_to)
            return fail(h, "out of memory");
        s->dec_from_len = pat->n;
        s->dec_to_len = metaspace ? 1 : content->n;
        if (metaspace) { /* the space its prepend_scheme put in front goes again */
            const struct json_value *ps = json_get(c, "prepend_scheme");
            int aps;
            if (get_bool(h, c, path, "add_prefix_space", 1, &aps))
                return -1;
            s->strip_leading = json_is(ps, JSON_STRING) ? !json_str_eq(ps, "never") : aps;
        }
        return 0;
    }
    if (json_str_eq(type, "Strip")) {
        const struct json_value *st = json_get(c, "start"), *sp = json_get(c, "stop");
        if (get_str(h, c, path, "content", &content))
            return -1;
        if (!json_str_eq(content, " "))
            return fail(h, "%s.content: only \" \" is supported", path);
        sub(p, path, "start");
        sub(q, path, "stop");
        if (!json_is(st, JSON_NUMBER) || !st->is_int || st->i < 0 || st->i > 64)
            return wrong_type(h, p, st, "an integer in [0, 64]");
        if (!json_is(sp, JSON_NUMBER) || !sp->is_int || sp->i != 0)
            return fail(h, "%s: only 0 is supported", q);
        s->strip_leading = (uint32_t)st->i;
        return 0;
    }
    return unsupported(h, path, type);
}

/* ---- model ---- */

/* An integer id in [0, NIB_MAX_VOCAB). */
static int token_id(struct hf *h, const struct json_value *v, const char *path, uint32_t *out)
{
    if (!json_is(v, JSON_NUMBER) || !v->is_int || v->i < 0 || v->i >= NIB_MAX_VOCAB)
        return fail(h, "%s: expected a token id in [0, %u), found %s", path, NIB_MAX_VOCAB,
                    v && v->type == JSON_NUMBER ? "another number" : json_type_name(v));
    *out = (uint32_t)v->i;
    return 0;
}

static int model_flags(struct hf *h, const struct json_value *m)
{
    struct tok_spec *s = h->s;
    const struct json_value *type = json_get(m, "type"), *v;
    char b[64];
    if (type && !json_str_eq(type, "BPE")) {
        if (!json_is(type, JSON_STRING))
            return wrong_type(h, "model.type", type, "a string");
        return fail(h, "model.type: \"%s\" is not supported (nibble reads BPE)",
                    show(type->str, type->n, b));
    }
    if (!type && !json_get(m, "merges"))
        return fail(h, "model: no type and no merges (nibble reads BPE)");
    if ((v = json_get(m, "dropout")) && v->type != JSON_NULL)
        return fail(h, "model.dropout: only null is supported");
    static const char *const empty_only[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < 2; i++)
        if ((v = json_get(m, empty_only[i])) && v->type != JSON_NULL &&
            !(json_is(v, JSON_STRING) && v->n == 0))
            return fail(h, "model.%s: only null or \"\" is supported", empty_only[i]);
    return get_bool(h, m, "model", "fuse_unk", 0, &s->fuse_unk) ||
           get_bool(h, m, "model", "byte_fallback", 0, &s->byte_fallback) ||
           get_bool(h, m, "model", "ignore_merges", 0, &s->ignore_merges);
}

/* Size the vocabulary: the largest id of model.vocab and added_tokens + 1;
 * every id below it must have a token. */
static int vocab_ids(struct hf *h, const struct json_value *vocab, const struct json_value *added)
{
    struct tok_spec *s = h->s;
    uint32_t max = 0, id = 0;
    char p[PATH_MAX_LEN], b[64];
    for (uint32_t i = 0; i < vocab->n; i++) {
        const struct json_member *m = &vocab->members[i];
        snprintf(p, sizeof p, "model.vocab[\"%s\"]", show(m->key, m->key_len, b));
        if (token_id(h, &m->value, p, &id))
            return -1;
        max = id > max ? id : max;
    }
    for (uint32_t i = 0; added && i < added->n; i++) {
        idx(p, "added_tokens", i);
        sub(p, p, "id");
        if (token_id(h, json_get(&added->items[i], "id"), p, &id))
            return -1;
        max = id > max ? id : max;
    }
    if (vocab->n == 0 && (!added || added->n == 0))
        return fail(h, "model.vocab: the vocabulary is empty");
    s->n_vocab = max + 1;
    s->tokens = calloc(s->n_vocab, sizeof *s->tokens);
    h->by_id = calloc(s->n_vocab, sizeof *h->by_id);
    if (!s->tokens || !h->by_id || tok_strmap_init(&h->vocab, vocab->n))
        return fail(h, "out of memory");
    for (uint32_t i = 0; i < vocab->n; i++) {
        const struct json_member *m = &vocab->members[i];
        id = (uint32_t)m->value.i;
        if (h->by_id[id])
            return fail(h, "model.vocab: id %u is given to both \"%s\" and another token", id,
                        show(m->key, m->key_len, b));
        h->by_id[id] = m;
        tok_strmap_put(&h->vocab, (const uint8_t *)m->key, m->key_len, id);
    }
    h->is_added = calloc(s->n_vocab, 1);
    if (!h->is_added)
        return fail(h, "out of memory");
    for (uint32_t i = 0; added && i < added->n; i++)
        h->is_added[json_get(&added->items[i], "id")->i] = 1;
    return 0;
}

static int set_token(struct hf *h, uint32_t id, const void *bytes, size_t n, int type)
{
    if (tok_spec_set_piece(&h->s->tokens[id], bytes, n))
        return fail(h, "out of memory");
    h->s->tokens[id].type = type;
    return 0;
}

/* model.vocab pieces as bytes (byte-level ones mapped back). */
static int vocab_tokens(struct hf *h)
{
    struct tok_spec *s = h->s;
    uint8_t buf[2 * NIB_MAX_PIECE];
    char b[64];
    for (uint32_t id = 0; id < s->n_vocab; id++) {
        const struct json_member *m = h->by_id[id];
        if (!m || h->is_added[id]) /* an added token's text is its content */
            continue;
        if (s->byte_level) {
            /* a printable piece is at most twice as long as its bytes */
            long n = m->key_len <= sizeof buf
                         ? tok_bytelevel_decode((const uint8_t *)m->key, m->key_len, buf)
                         : NIB_MAX_PIECE + 1;
            if (n < 0)
                return fail(h,
                            "model.vocab[\"%s\"] (id %u): not in the byte-level alphabet (every "
                            "piece of a ByteLevel tokenizer must be)",
                            show(m->key, m->key_len, b), id);
            if (n > NIB_MAX_PIECE)
                return fail(h, "model.vocab[\"%s\"] (id %u): longer than the limit of %u bytes",
                            show(m->key, m->key_len, b), id, NIB_MAX_PIECE);
            if (set_token(h, id, buf, (size_t)n, NIB_TOK_NORMAL))
                return -1;
            if (n == 1 && s->byte_id[buf[0]] == UINT32_MAX)
                s->byte_id[buf[0]] = id;
        } else {
            if (m->key_len > NIB_MAX_PIECE)
                return fail(h, "model.vocab[\"%s\"] (id %u): longer than the limit of %u bytes",
                            show(m->key, m->key_len, b), id, NIB_MAX_PIECE);
            int bv = s->byte_fallback ? tok_byte_piece(m->key, m->key_len) : -1;
            if (set_token(h, id, m->key, m->key_len, bv >= 0 ? NIB_TOK_BYTE : NIB_TOK_NORMAL))
                return -1;
            if (bv >= 0 && s->byte_id[bv] == UINT32_MAX)
                s->byte_id[bv] = id;
        }
    }
    return 0;
}

static int added_tokens(struct hf *h, const struct json_value *list)
{
    struct tok_spec *s = h->s;
    char p[PATH_MAX_LEN], q[PATH_MAX_LEN];
    if (!list || list->type == JSON_NULL)
        return 0;
    if (!json_is(list, JSON_ARRAY))
        return wrong_type(h, "added_tokens", list, "an array");
    s->added = calloc(list->n ? list->n : 1, sizeof *s->added);
    h->added_seen = calloc(s->n_vocab, 1);
    if (!s->added || !h->added_seen)
        return fail(h, "out of memory");
    for (uint32_t i = 0; i < list->n; i++) {
        const struct json_value *a = &list->items[i], *content;
        struct tok_spec_added *ad = &s->added[s->n_added];
        int single_word;
        idx(p, "added_tokens", i);
        if (!json_is(a, JSON_OBJECT))
            return wrong_type(h, p, a, "an object");
        ad->id = (uint32_t)json_get(a, "id")->i; /* checked by vocab_ids */
        if (get_str(h, a, p, "content", &content) ||
            get_bool(h, a, p, "special", 0, &ad->special) ||
            get_bool(h, a, p, "lstrip", 0, &ad->lstrip) ||
            get_bool(h, a, p, "rstrip", 0, &ad->rstrip) ||
            get_bool(h, a, p, "single_word", 0, &single_word) ||
            get_bool(h, a, p, "normalized", !ad->special, &ad->normalized))
            return -1;
        sub(q, p, "content");
        if (content->n == 0 || content->n > NIB_MAX_PIECE)
            return fail(h, "%s: must be 1 to %u bytes long", q, NIB_MAX_PIECE);
        if (single_word) {
            sub(q, p, "single_word");
            return fail(h, "%s: true is not supported", q);
        }
        if (h->added_seen[ad->id])
            return fail(h, "%s.id: token %u is added twice", p, ad->id);
        h->added_seen[ad->id] = 1;
        if (set_token(h, ad->id, content->str, content->n,
                      ad->special ? NIB_TOK_CONTROL : NIB_TOK_USER))
            return -1;
        s->n_added++;
    }
    return 0;
}

/* Merges "a b" or ["a", "b"]: both parts and their concatenation must be
 * in model.vocab. */
static int merges(struct hf *h, const struct json_value *list)
{
    struct tok_spec *s = h->s;
    char p[PATH_MAX_LEN], b[64];
    uint8_t cat[4 * NIB_MAX_PIECE];
    if (!json_is(list, JSON_ARRAY))
        return wrong_type(h, "model.merges", list, "an array");
    s->n_merges = list->n;
    s->merges = malloc((list->n ? list->n : 1) * sizeof *s->merges);
    if (!s->merges)
        return fail(h, "out of memory");
    for (uint32_t r = 0; r < list->n; r++) {
        const struct json_value *e = &list->items[r];
        const char *a, *c;
        uint32_t al, cl;
        idx(p, "model.merges", r);
        if (json_is(e, JSON_STRING)) {
            const char *sp = memchr(e->str, ' ', e->n);
            if (!sp || memchr(sp + 1, ' ', e->n - (size_t)(sp - e->str) - 1))
                return fail(h, "%s: \"%s\" is not two tokens separated by one space", p,
                            show(e->str, e->n, b));
            a = e->str;
            al = (uint32_t)(sp - e->str);
            c = sp + 1;
            cl = e->n - al - 1;
        } else if (json_is(e, JSON_ARRAY) && e->n == 2 && json_is(&e->items[0], JSON_STRING) &&
                   json_is(&e->items[1], JSON_STRING)) {
            a = e->items[0].str;
            al = e->items[0].n;
            c = e->items[1].str;
            cl = e->items[1].n;
        } else {
            return wrong_type(h, p, e, "\"a b\" or [\"a\", \"b\"]");
        }
        int64_t li = tok_strmap_get(&h->vocab, (const uint8_t *)a, al);
        int64_t ri = tok_strmap_get(&h->vocab, (const uint8_t *)c, cl);
        int64_t res = -1;
        if (li >= 0 && ri >= 0 && (size_t)al + cl <= sizeof cat) {
            memcpy(cat, a, al);
            memcpy(cat + al, c, cl);
            res = tok_strmap_get(&h->vocab, cat, al + cl);
        }
        if (li < 0 || ri < 0 || res < 0)
            return fail(h, "%s: %s of the merge is not in model.vocab", p,
                        li < 0   ? "the left part"
                        : ri < 0 ? "the right part"
                                 : "the merged text");
        s->merges[r] = (struct tok_spec_merge){(uint32_t)li, (uint32_t)ri, (uint32_t)res};
    }
    return 0;
}

/* Id of a token text: an added token's content, else a model.vocab key
 * (as written in the file). -1 when none. */
static int64_t find_token(struct hf *h, const char *text, size_t n)
{
    const struct tok_spec *s = h->s;
    for (uint32_t i = 0; i < s->n_added; i++) {
        const struct tok_spec_token *t = &s->tokens[s->added[i].id];
        if (t->len == n && memcmp(t->bytes, text, n) == 0)
            return s->added[i].id;
    }
    return tok_strmap_get(&h->vocab, (const uint8_t *)text, (uint32_t)n);
}

static int model(struct hf *h)
{
    struct tok_spec *s = h->s;
    const struct json_value *m = json_get(h->root, "model"), *unk;
    const struct json_value *added = json_get(h->root, "added_tokens");
    const struct json_value *vocab = json_get(m, "vocab");
    char b[64];
    if (!json_is(m, JSON_OBJECT))
        return wrong_type(h, "model", m, "an object");
    if (model_flags(h, m))
        return -1;
    if (!json_is(vocab, JSON_OBJECT))
        return wrong_type(h, "model.vocab", vocab, "an object {piece: id}");
    if (added && added->type != JSON_NULL && !json_is(added, JSON_ARRAY))
        return wrong_type(h, "added_tokens", added, "an array");
    for (uint32_t i = 0; added && added->type == JSON_ARRAY && i < added->n; i++)
        if (!json_is(&added->items[i], JSON_OBJECT)) {
            char p[PATH_MAX_LEN];
            idx(p, "added_tokens", i);
            return wrong_type(h, p, &added->items[i], "an object");
        }
    if (vocab_ids(h, vocab, added && added->type == JSON_ARRAY ? added : NULL) || vocab_tokens(h) ||
        added_tokens(h, added))
        return -1;
    for (uint32_t id = 0; id < s->n_vocab; id++)
        if (!s->tokens[id].bytes)
            return fail(h, "model.vocab: no token has id %u (ids must be 0..%u without gaps)", id,
                        s->n_vocab - 1);
    if (merges(h, json_get(m, "merges")))
        return -1;
    unk = json_get(m, "unk_token");
    if (unk && unk->type != JSON_NULL) {
        if (!json_is(unk, JSON_STRING))
            return wrong_type(h, "model.unk_token", unk, "a string or null");
        int64_t id = tok_strmap_get(&h->vocab, (const uint8_t *)unk->str, unk->n);
        if (id < 0)
            return fail(h, "model.unk_token: \"%s\" is not in model.vocab",
                        show(unk->str, unk->n, b));
        s->unk_id = (int32_t)id;
        s->tokens[id].type = NIB_TOK_UNKNOWN;
    }
    if (s->byte_level)
        for (int c = 0; c < 256; c++)
            if (s->byte_id[c] == UINT32_MAX)
                return fail(h,
                            "model.vocab: the byte-level vocabulary has no token for byte "
                            "0x%02X",
                            c);
    return 0;
}

/* ---- post-processor ---- */

static int template_single(struct hf *h, const struct json_value *c, const char *path)
{
    const struct json_value *single = json_get(c, "single");
    char p[PATH_MAX_LEN], b[64];
    sub(p, path, "single");
    if (!json_is(single, JSON_ARRAY))
        return wrong_type(h, p, single, "an array");
    const struct json_value *first = json_at(single, 0), *second = json_at(single, 1);
    const struct json_value *seq = single->n == 1 ? first : second;
    if (!(single->n == 1 || single->n == 2) || !json_is(json_get(seq, "Sequence"), JSON_OBJECT) ||
        !json_str_eq(json_get(json_get(seq, "Sequence"), "id"), "A") ||
        (single->n == 2 && !json_is(json_get(first, "SpecialToken"), JSON_OBJECT)))
        return fail(h, "%s: only [SpecialToken, Sequence A] (BOS) or [Sequence A] is supported", p);
    h->post_decides = 1;
    h->s->add_bos = single->n == 2;
    if (single->n == 1)
        return 0;
    const struct json_value *name = json_get(json_get(first, "SpecialToken"), "id");
    if (!json_is(name, JSON_STRING))
        return fail(h, "%s[0].SpecialToken.id: expected a string", p);
    /* special_tokens[name].ids[0], else the token of that text */
    const struct json_value *ids =
        json_get(json_get(json_get(c, "special_tokens"), name->str), "ids");
    int64_t id = -1;
    if (json_is(ids, JSON_ARRAY) && ids->n == 1) {
        uint32_t u = 0;
        char q[PATH_MAX_LEN];
        snprintf(q, sizeof q, "%s.special_tokens[\"%s\"].ids[0]", path,
                 show(name->str, name->n, b));
        if (token_id(h, &ids->items[0], q, &u))
            return -1;
        id = u < h->s->n_vocab ? (int64_t)u : -1;
    } else {
        id = find_token(h, name->str, name->n);
    }
    if (id < 0)
        return fail(h, "%s[0].SpecialToken: \"%s\" is not a token", p, show(name->str, name->n, b));
    h->s->bos_id = (int32_t)id;
    h->bos_from_post = 1;
    return 0;
}

static int post_processor(struct hf *h, const struct json_value *c, const char *path,
                          const struct json_value *type)
{
    if (json_str_eq(type, "ByteLevel")) { /* offsets only: adds no token */
        h->post_decides = 1;
        return 0;
    }
    if (json_str_eq(type, "TemplateProcessing"))
        return template_single(h, c, path);
    return unsupported(h, path, type);
}

/* ---- tokenizer_config.json, generation_config.json ---- */

/* bos_token / eos_token: a string, {"content": ...}, or null. */
static int config_token(struct hf *h, const struct json_value *cfg, const char *key, int64_t *id)
{
    const struct json_value *v = json_get(cfg, key);
    char b[64];
    *id = -1;
    if (!v || v->type == JSON_NULL)
        return 0;
    if (json_is(v, JSON_OBJECT))
        v = json_get(v, "content");
    if (!json_is(v, JSON_STRING))
        return wrong_type(h, key, v, "a string, {\"content\": string} or null");
    *id = find_token(h, v->str, v->n);
    if (*id < 0)
        return fail(h, "%s: \"%s\" is not a token of tokenizer.json", key, show(v->str, v->n, b));
    return 0;
}

static int chat_template(struct hf *h, const struct json_value *cfg)
{
    const struct json_value *t = json_get(cfg, "chat_template");
    char p[PATH_MAX_LEN];
    if (!t || t->type == JSON_NULL)
        return 0;
    if (json_is(t, JSON_ARRAY)) { /* [{name, template}]: take "default" */
        const struct json_value *found = NULL;
        for (uint32_t i = 0; i < t->n; i++) {
            idx(p, "chat_template", i);
            if (!json_is(json_get(&t->items[i], "name"), JSON_STRING) ||
                !json_is(json_get(&t->items[i], "template"), JSON_STRING))
                return fail(h, "%s: expected {\"name\": string, \"template\": string}", p);
            if (json_str_eq(json_get(&t->items[i], "name"), "default"))
                found = json_get(&t->items[i], "template");
        }
        if (!found)
            return fail(h, "chat_template: the list has no template named \"default\"");
        t = found;
    }
    if (!json_is(t, JSON_STRING))
        return wrong_type(h, "chat_template", t, "a string or a list of {name, template}");
    if (memchr(t->str, 0, t->n))
        return fail(h, "chat_template: contains a NUL character");
    h->s->chat_template = (char *)dup_bytes(t->str, t->n);
    return h->s->chat_template ? 0 : fail(h, "out of memory");
}

static int config(struct hf *h, const struct json_value *cfg)
{
    struct tok_spec *s = h->s;
    int64_t bos, eos;
    int add_bos, add_eos;
    h->file = "tokenizer_config.json";
    if (!json_is(cfg, JSON_OBJECT))
        return wrong_type(h, "(top level)", cfg, "an object");
    if (config_token(h, cfg, "bos_token", &bos) || config_token(h, cfg, "eos_token", &eos) ||
        get_bool(h, cfg, "", "add_bos_token", s->add_bos, &add_bos) ||
        get_bool(h, cfg, "", "add_eos_token", 0, &add_eos) || chat_template(h, cfg))
        return -1;
    if (add_eos)
        return fail(h, "add_eos_token: true is not supported");
    if (h->bos_from_post && bos >= 0 && bos != s->bos_id)
        return fail(h, "bos_token: id %lld, but tokenizer.json's post_processor adds id %d",
                    (long long)bos, s->bos_id);
    if (!h->bos_from_post)
        s->bos_id = (int32_t)bos;
    if (!h->post_decides)
        s->add_bos = add_bos; /* no post-processor: the config says */
    s->eos_id = (int32_t)eos;
    return 0;
}

static int generation_config(struct hf *h, const struct json_value *gen)
{
    struct tok_spec *s = h->s;
    h->file = "generation_config.json";
    if (!json_is(gen, JSON_OBJECT))
        return wrong_type(h, "(top level)", gen, "an object");
    const struct json_value *e = json_get(gen, "eos_token_id");
    if (!e || e->type == JSON_NULL)
        return 0;
    uint32_t n = json_is(e, JSON_ARRAY) ? e->n : 1;
    for (uint32_t i = 0; i < n; i++) {
        const struct json_value *v = json_is(e, JSON_ARRAY) ? &e->items[i] : e;
        char p[PATH_MAX_LEN];
        uint32_t id = 0;
        if (json_is(e, JSON_ARRAY))
            idx(p, "eos_token_id", i);
        else
            snprintf(p, sizeof p, "eos_token_id");
        if (token_id(h, v, p, &id))
            return -1;
        if (id >= s->n_vocab)
            return fail(h, "%s: id %u is out of range (vocabulary %u)", p, id, s->n_vocab);
        if (tok_spec_add_eog(s, id))
            return fail(h, "%s: more than %d end-of-generation tokens", p, TOK_SPEC_MAX_EOG);
    }
    return 0;
}

static int eog(struct hf *h)
{
    struct tok_spec *s = h->s;
    if (s->eos_id >= 0 && tok_spec_add_eog(s, (uint32_t)s->eos_id))
        return fail(h, "more than %d end-of-generation tokens", TOK_SPEC_MAX_EOG);
    for (uint32_t i = 0; i < s->n_added; i++) {
        const struct tok_spec_token *t = &s->tokens[s->added[i].id];
        if (tok_is_end_of_turn_text(t->bytes, t->len) && tok_spec_add_eog(s, s->added[i].id))
            return fail(h, "more than %d end-of-generation tokens", TOK_SPEC_MAX_EOG);
    }
    tok_spec_sort_eog(s);
    return 0;
}

/* The largest real tokenizer.json files are tens of MB (Gemma 3's 262k
 * pieces and 515k merges: 33 MB); the tree takes about 4x its text. */
#define HF_MAX_JSON_BYTES (128u << 20)

static int parse_json(struct hf *h, const char *name, const char *txt, size_t len,
                      struct json_doc **doc)
{
    char jerr[256];
    struct json_limits lim = {.max_bytes = HF_MAX_JSON_BYTES, .max_depth = 64};
    h->file = name;
    if (json_parse(txt, len, &lim, doc, jerr, sizeof jerr))
        return fail(h, "%s", jerr);
    return 0;
}

static int tokenizer_json(struct hf *h)
{
    struct tok_spec *s = h->s;
    const struct json_value *v;
    h->file = "tokenizer.json";
    if (!json_is(h->root, JSON_OBJECT))
        return wrong_type(h, "(top level)", h->root, "an object");
    static const char *const null_only[] = {"truncation", "padding"};
    for (size_t i = 0; i < 2; i++)
        if ((v = json_get(h->root, null_only[i])) && v->type != JSON_NULL)
            return fail(h, "%s: only null is supported", null_only[i]);
    s->model = TOK_MODEL_BPE;
    /* the byte-level question first: it decides how pieces are read */
    if (component(h, json_get(h->root, "pre_tokenizer"), "pre_tokenizer", 0, "pretokenizers",
                  pre_tokenizer) ||
        component(h, json_get(h->root, "decoder"), "decoder", 0, "decoders", decoder) ||
        component(h, json_get(h->root, "normalizer"), "normalizer", 0, "normalizers", normalizer) ||
        model(h) ||
        component(h, json_get(h->root, "post_processor"), "post_processor", 0, "processors",
                  post_processor))
        return -1;
    if (s->byte_level && s->byte_fallback)
        return fail(h, "model.byte_fallback: true with a ByteLevel vocabulary is not supported");
    return 0;
}

int hf_tokenizer_parse(const char *tok_json, size_t tok_len, const char *config_json,
                       size_t config_len, const char *gen_json, size_t gen_len,
                       struct tok_spec *out, char *err, size_t errlen)
{
    struct hf h = {.s = out, .err = err, .errlen = errlen};
    struct json_doc *tdoc = NULL, *cdoc = NULL, *gdoc = NULL;
    tok_spec_init(out);
    if (err && errlen)
        err[0] = 0;
    int rc = parse_json(&h, "tokenizer.json", tok_json, tok_len, &tdoc);
    if (!rc) {
        h.root = json_root(tdoc);
        rc = tokenizer_json(&h);
    }
    if (!rc && config_json)
        rc = parse_json(&h, "tokenizer_config.json", config_json, config_len, &cdoc) ||
             config(&h, json_root(cdoc));
    if (!rc && gen_json)
        rc = parse_json(&h, "generation_config.json", gen_json, gen_len, &gdoc) ||
             generation_config(&h, json_root(gdoc));
    h.file = "tokenizer.json";
    if (!rc)
        rc = eog(&h);
    if (!rc && out->add_bos && out->bos_id < 0)
        rc = fail(&h, "the post-processor or add_bos_token asks for a BOS, but no BOS token is "
                      "named");
    if (!rc && out->byte_level) {
        const char *name = gguf_pretok_name_of(out);
        if (name && !(out->pre_name = strdup(name)))
            rc = fail(&h, "out of memory");
    }
    tok_strmap_free(&h.vocab);
    free(h.by_id);
    free(h.added_seen);
    free(h.is_added);
    json_free(tdoc);
    json_free(cdoc);
    json_free(gdoc);
    if (rc) {
        tok_spec_free(out);
        tok_spec_init(out);
        return -1;
    }
    return 0;
}

/* ---- files ---- */

struct mapped {
    const uint8_t *p;
    size_t n;
    int present;
};

static int map_opt(const char *path, struct mapped *m, int required, char *err, size_t errlen)
{
    struct stat st;
    memset(m, 0, sizeof *m);
    if (!required && stat(path, &st) != 0 && errno == ENOENT)
        return 0;
    char e[300];
    if (nib_map_file(path, &m->p, &m->n, e, sizeof e)) {
        snprintf(err, errlen, "%s", e);
        return -1;
    }
    m->present = 1;
    return 0;
}

int hf_tokenizer_load(const char *path, struct tok_spec *out, char *err, size_t errlen)
{
    char dir[4096], tj[4200], cj[4200], gj[4200];
    struct stat st;
    tok_spec_init(out);
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    } else {
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        snprintf(tj, sizeof tj, "%s", path);
    }
    snprintf(cj, sizeof cj, "%s/tokenizer_config.json", dir);
    snprintf(gj, sizeof gj, "%s/generation_config.json", dir);
    struct mapped t, c, g;
    if (map_opt(tj, &t, 1, err, errlen))
        return -1;
    if (map_opt(cj, &c, 0, err, errlen) || map_opt(gj, &g, 0, err, errlen)) {
        nib_unmap_file(t.p, t.n);
        if (c.present)
            nib_unmap_file(c.p, c.n);
        return -1;
    }
    char e[512];
    int rc = hf_tokenizer_parse((const char *)t.p, t.n, c.present ? (const char *)c.p : NULL, c.n,
                                g.present ? (const char *)g.p : NULL, g.n, out, e, sizeof e);
    if (rc)
        snprintf(err, errlen, "%s: %s", dir, e);
    nib_unmap_file(t.p, t.n);
    if (c.present)
        nib_unmap_file(c.p, c.n);
    if (g.present)
        nib_unmap_file(g.p, g.n);
    return rc;
}
