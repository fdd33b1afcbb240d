/* Strict JSON parser (json.h). Recursive descent bounded by max_depth.
 * Children of a container are gathered on a growing stack while they are
 * parsed, then copied into the arena in one piece when the container
 * closes, so arrays and objects are contiguous and the arena only grows. */
#include "tools/util/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena: chunks that never move ---- */

struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

struct json_doc {
    struct chunk *chunks;
    size_t next_cap; /* the next chunk's size: 0 (4 KiB), doubling to 1 MiB */
    struct json_value root;
};

static void *arena_alloc(struct json_doc *d, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct chunk *c = d->chunks;
    if (!c || c->cap - c->used < n) {
        /* chunks grow from 4 KiB: a small document (a chat message, a
         * request) no longer takes 1 MiB, whose mapping and sanitizer
         * shadow cost more than the parse itself */
        size_t want = d->next_cap ? d->next_cap : 4096;
        d->next_cap = want < (1u << 20) ? want * 2 : want;
        size_t cap = n > want ? n : want;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = d->chunks;
        d->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

/* ---- parser state ---- */

struct parser {
    const unsigned char *p, *end, *start;
    struct json_doc *doc;
    uint32_t max_depth;
    /* children waiting for their container to close */
    struct json_value *vals;
    size_t n_vals, cap_vals;
    struct json_member *mems;
    size_t n_mems, cap_mems;
    /* duplicate-key check of big objects: open addressing over member indices */
    uint32_t *dup;
    size_t dup_cap;
    char *err;
    size_t errlen;
    int failed;
};

static int fail_at(struct parser *ps, const unsigned char *at, const char *fmt, ...)
{
    if (ps->failed)
        return -1;
    ps->failed = 1;
    size_t line = 1, col = 1;
    for (const unsigned char *q = ps->start; q < at; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else if ((*q & 0xc0) != 0x80) {
            col++;
        }
    }
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->err && ps->errlen)
        snprintf(ps->err, ps->errlen, "line %zu, column %zu (byte %zu): %s", line, col,
                 (size_t)(at - ps->start), msg);
    return -1;
}

#define FAIL(...) fail_at(ps, ps->p, __VA_ARGS__)

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* A printable description of the byte at p, for messages. */
static const char *show_byte(const struct parser *ps, char out[16])
{
    if (ps->p >= ps->end)
        return "the end of the input";
    unsigned c = *ps->p;
    if (c >= 0x21 && c < 0x7f)
        snprintf(out, 16, "'%c'", (char)c);
    else
        snprintf(out, 16, "byte 0x%02x", c);
    return out;
}

/* ---- strings ---- */

/* Length of the well-formed UTF-8 character at s (< end), or 0. */
static size_t utf8_len(const unsigned char *s, const unsigned char *end)
{
    unsigned c = s[0];
    size_t n;
    uint32_t min, cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, min = 0x80, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, min = 0x800, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0;
    }
    if ((size_t)(end - s) < n)
        return 0;
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static int hex4(const unsigned char *s, const unsigned char *end, uint32_t *v)
{
    if (end - s < 4)
        return -1;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = s[k], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        *v = *v << 4 | d;
    }
    return 0;
}

static size_t put_utf8(unsigned char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xc0 | cp >> 6);
        o[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* One \uXXXX (or a surrogate pair) at ps->p (just after the backslash-u
 * start: p points at the 'u'); writes UTF-8 to o, returns its length or 0. */
static size_t unicode_escape(struct parser *ps, unsigned char *o)
{
    const unsigned char *at = ps->p - 1; /* the backslash */
    uint32_t hi, lo;
    if (hex4(ps->p + 1, ps->end, &hi)) {
        fail_at(ps, at, "\\u must be followed by 4 hex digits");
        return 0;
    }
    ps->p += 5;
    if (hi >= 0xdc00 && hi <= 0xdfff) {
        fail_at(ps, at, "lone low surrogate \\u%04X", hi);
        return 0;
    }
    if (hi >= 0xd800 && hi <= 0xdbff) {
        if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
            hex4(ps->p + 2, ps->end, &lo) || lo < 0xdc00 || lo > 0xdfff) {
            fail_at(ps, at, "high surrogate \\u%04X is not followed by a low one", hi);
            return 0;
        }
        ps->p += 6;
        hi = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
    }
    return put_utf8(o, hi);
}

/* A string starting at ps->p ('"'): decoded into the arena. */
static int parse_string(struct parser *ps, const char **out, uint32_t *len)
{
    const unsigned char *open = ps->p++;
    /* First the raw extent: decoding never makes a string longer. */
    const unsigned char *q = ps->p;
    while (q < ps->end && *q != '"') {
        if (*q == '\\' && q + 1 < ps->end)
            q++;
        q++;
    }
    if (q >= ps->end)
        return fail_at(ps, open, "unterminated string");
    if ((size_t)(q - ps->p) > UINT32_MAX - 1)
        return fail_at(ps, open, "string too long");
    unsigned char *o = arena_alloc(ps->doc, (size_t)(q - ps->p) + 1);
    if (!o)
        return FAIL("out of memory");
    size_t n = 0;
    for (;;) {
        unsigned c = *ps->p;
        if (c == '"')
            break;
        if (c < 0x20)
            return FAIL("control character 0x%02x in a string (write it as \\u%04x)", c, c);
        if (c == '\\') {
            ps->p++;
            unsigned e = *ps->p, v;
            switch (e) {
            case '"': v = '"'; break;
            case '\\': v = '\\'; break;
            case '/': v = '/'; break;
            case 'b': v = '\b'; break;
            case 'f': v = '\f'; break;
            case 'n': v = '\n'; break;
            case 'r': v = '\r'; break;
            case 't': v = '\t'; break;
            case 'u': {
                size_t k = unicode_escape(ps, o + n);
                if (!k)
                    return -1;
                n += k;
                continue;
            }
            default:
                return fail_at(ps, ps->p - 1, "invalid escape \\%c",
                               e >= 0x20 && e < 0x7f ? e : '?');
            }
            o[n++] = (unsigned char)v;
            ps->p++;
            continue;
        }
        size_t k = utf8_len(ps->p, ps->end);
        if (!k)
            return FAIL("ill-formed UTF-8 in a string");
        memcpy(o + n, ps->p, k);
        n += k;
        ps->p += k;
    }
    ps->p++; /* closing quote */
    o[n] = 0;
    *out = (const char *)o;
    *len = (uint32_t)n;
    return 0;
}

/* ---- numbers ---- */

static int is_digit(unsigned c)
{
    return c >= '0' && c <= '9';
}

static int parse_number(struct parser *ps, struct json_value *v)
{
    const unsigned char *s = ps->p, *q = s;
    int integral = 1;
    if (q < ps->end && *q == '-')
        q++;
    if (q >= ps->end || !is_digit(*q))
        return FAIL("invalid number");
    if (*q == '0') {
        q++;
        if (q < ps->end && is_digit(*q))
            return fail_at(ps, q - 1, "leading zero in a number");
    } else {
        while (q < ps->end && is_digit(*q))
            q++;
    }
    if (q < ps->end && *q == '.') {
        q++;
        integral = 0;
        if (q >= ps->end || !is_digit(*q))
            return fail_at(ps, q, "a digit must follow the decimal point");
        while (q < ps->end && is_digit(*q))
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        integral = 0;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || !is_digit(*q))
            return fail_at(ps, q, "a digit must follow the exponent");
        while (q < ps->end && is_digit(*q))
            q++;
    }
    size_t n = (size_t)(q - s);
    char small[64], *txt = n < sizeof small ? small : malloc(n + 1);
    if (!txt)
        return FAIL("out of memory");
    memcpy(txt, s, n);
    txt[n] = 0;
    v->type = JSON_NUMBER;
    v->num = strtod(txt, NULL); /* the grammar above is a subset of strtod's */
    v->is_int = 0;
    if (integral) {
        /* exact int64 from the digits, when it fits */
        const char *d = txt + (txt[0] == '-');
        uint64_t acc = 0, lim = txt[0] == '-' ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        int fits = 1;
        for (; *d && fits; d++) {
            unsigned dig = (unsigned)(*d - '0');
            if (acc > (lim - dig) / 10)
                fits = 0;
            else
                acc = acc * 10 + dig;
        }
        if (fits) {
            v->is_int = 1;
            v->i = txt[0] == '-' ? (int64_t)(0 - acc) : (int64_t)acc;
        }
    } else if (isfinite(v->num) && v->num == floor(v->num) && fabs(v->num) < 9007199254740992.0) {
        v->is_int = 1; /* 1e3, 2.0: integral and exact in a double */
        v->i = (int64_t)v->num;
    }
    if (txt != small)
        free(txt);
    if (!isfinite(v->num))
        return FAIL("number out of range");
    ps->p = q;
    return 0;
}

/* ---- containers ---- */

static int push_val(struct parser *ps, const struct json_value *v)
{
    if (ps->n_vals == ps->cap_vals) {
        size_t cap = ps->cap_vals ? 2 * ps->cap_vals : 256;
        struct json_value *nv = realloc(ps->vals, cap * sizeof *nv);
        if (!nv)
            return FAIL("out of memory");
        ps->vals = nv;
        ps->cap_vals = cap;
    }
    ps->vals[ps->n_vals++] = *v;
    return 0;
}

static int push_mem(struct parser *ps, const struct json_member *m)
{
    if (ps->n_mems == ps->cap_mems) {
        size_t cap = ps->cap_mems ? 2 * ps->cap_mems : 256;
        struct json_member *nm = realloc(ps->mems, cap * sizeof *nm);
        if (!nm)
            return FAIL("out of memory");
        ps->mems = nm;
        ps->cap_mems = cap;
    }
    ps->mems[ps->n_mems++] = *m;
    return 0;
}

static int parse_value(struct parser *ps, struct json_value *v, uint32_t depth);

static int parse_array(struct parser *ps, struct json_value *v, uint32_t depth)
{
    size_t base = ps->n_vals;
    ps->p++; /* '[' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
    } else {
        for (;;) {
            struct json_value e;
            char b[16];
            if (parse_value(ps, &e, depth + 1) || push_val(ps, &e))
                return -1;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == ']') {
                ps->p++;
                break;
            }
            return FAIL("expected ',' or ']' in an array, found %s", show_byte(ps, b));
        }
    }
    size_t n = ps->n_vals - base;
    if (n > UINT32_MAX)
        return FAIL("array too long");
    struct json_value *items = NULL;
    if (n) {
        items = arena_alloc(ps->doc, n * sizeof *items);
        if (!items)
            return FAIL("out of memory");
        memcpy(items, ps->vals + base, n * sizeof *items);
    }
    ps->n_vals = base;
    memset(v, 0, sizeof *v);
    v->type = JSON_ARRAY;
    v->n = (uint32_t)n;
    v->items = items;
    return 0;
}

static uint32_t key_hash(const char *s, uint32_t n)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h ^ h >> 16;
}

static int same_key(const struct json_member *a, const struct json_member *b)
{
    return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

/* Refuse duplicate keys among m[0..n): pairwise for small objects, a hash
 * set for big ones (a vocabulary has hundreds of thousands). */
static int check_dups(struct parser *ps, const struct json_member *m, size_t n,
                      const unsigned char *at)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (same_key(&m[i], &m[j]))
                    return fail_at(ps, at, "duplicate key \"%.60s\" in an object", m[i].key);
        return 0;
    }
    size_t cap = 64;
    while (cap < 2 * n)
        cap *= 2;
    if (cap > ps->dup_cap) {
        free(ps->dup);
        ps->dup = malloc(cap * sizeof *ps->dup);
        ps->dup_cap = ps->dup ? cap : 0;
        if (!ps->dup)
            return fail_at(ps, at, "out of memory");
    }
    memset(ps->dup, 0, cap * sizeof *ps->dup);
    for (size_t i = 0; i < n; i++) {
        size_t h = key_hash(m[i].key, m[i].key_len) & (cap - 1);
        while (ps->dup[h]) {
            if (same_key(&m[ps->dup[h] - 1], &m[i]))
                return fail_at(ps, at, "duplicate key \"%.60s\" in an object", m[i].key);
            h = (h + 1) & (cap - 1);
        }
        ps->dup[h] = (uint32_t)i + 1;
    }
    return 0;
}

static int parse_object(struct parser *ps, struct json_value *v, uint32_t depth)
{
    size_t base = ps->n_mems;
    const unsigned char *open = ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
    } else {
        for (;;) {
            struct json_member m;
            char b[16];
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"')
                return FAIL("expected a string key in an object, found %s", show_byte(ps, b));
            if (parse_string(ps, &m.key, &m.key_len))
                return -1;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':')
                return FAIL("expected ':' after an object key, found %s", show_byte(ps, b));
            ps->p++;
            if (parse_value(ps, &m.value, depth + 1) || push_mem(ps, &m))
                return -1;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == '}') {
                ps->p++;
                break;
            }
            return FAIL("expected ',' or '}' in an object, found %s", show_byte(ps, b));
        }
    }
    size_t n = ps->n_mems - base;
    if (n > UINT32_MAX)
        return FAIL("object too long");
    if (n && check_dups(ps, ps->mems + base, n, open))
        return -1;
    struct json_member *mem = NULL;
    if (n) {
        mem = arena_alloc(ps->doc, n * sizeof *mem);
        if (!mem)
            return FAIL("out of memory");
        memcpy(mem, ps->mems + base, n * sizeof *mem);
    }
    ps->n_mems = base;
    memset(v, 0, sizeof *v);
    v->type = JSON_OBJECT;
    v->n = (uint32_t)n;
    v->members = mem;
    return 0;
}

static int literal(struct parser *ps, const char *word, struct json_value *v, int type)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return FAIL("invalid literal (expected %s)", word);
    ps->p += n;
    memset(v, 0, sizeof *v);
    v->type = (uint8_t)type;
    return 0;
}

static int parse_value(struct parser *ps, struct json_value *v, uint32_t depth)
{
    char b[16];
    skip_ws(ps);
    if (ps->p >= ps->end)
        return FAIL("expected a value, found the end of the input");
    switch (*ps->p) {
    case '{':
    case '[':
        if (depth >= ps->max_depth)
            return FAIL("nesting deeper than %u", ps->max_depth);
        return *ps->p == '{' ? parse_object(ps, v, depth) : parse_array(ps, v, depth);
    case '"':
        memset(v, 0, sizeof *v);
        v->type = JSON_STRING;
        return parse_string(ps, &v->str, &v->n);
    case 't': return literal(ps, "true", v, JSON_TRUE);
    case 'f': return literal(ps, "false", v, JSON_FALSE);
    case 'n': return literal(ps, "null", v, JSON_NULL);
    default:
        if (*ps->p == '-' || is_digit(*ps->p)) {
            memset(v, 0, sizeof *v);
            return parse_number(ps, v);
        }
        return FAIL("expected a value, found %s", show_byte(ps, b));
    }
}

int json_parse(const char *buf, size_t len, const struct json_limits *lim, struct json_doc **out,
               char *err, size_t errlen)
{
    size_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : JSON_DEFAULT_MAX_BYTES;
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    if (len > max_bytes) {
        snprintf(err, errlen, "input of %zu bytes is larger than the limit %zu", len, max_bytes);
        return -1;
    }
    struct json_doc *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const unsigned char *b = (const unsigned char *)(buf ? buf : "");
    struct parser ps = {
        .p = b,
        .end = b + len,
        .start = b,
        .doc = d,
        .max_depth = lim && lim->max_depth ? lim->max_depth : JSON_DEFAULT_MAX_DEPTH,
        .err = err,
        .errlen = errlen,
    };
    if (ps.max_depth > JSON_MAX_DEPTH)
        ps.max_depth = JSON_MAX_DEPTH;
    int rc = parse_value(&ps, &d->root, 0);
    if (!rc) {
        skip_ws(&ps);
        if (ps.p < ps.end) {
            char bb[16];
            rc = fail_at(&ps, ps.p, "unexpected %s after the value", show_byte(&ps, bb));
        }
    }
    free(ps.vals);
    free(ps.mems);
    free(ps.dup);
    if (rc) {
        json_free(d);
        return -1;
    }
    *out = d;
    return 0;
}

const struct json_value *json_root(const struct json_doc *d)
{
    return d ? &d->root : NULL;
}

void json_free(struct json_doc *d)
{
    if (!d)
        return;
    for (struct chunk *c = d->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(d);
}

/* ---- lookups ---- */

const struct json_value *json_get(const struct json_value *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (uint32_t i = 0; i < obj->n; i++)
        if (obj->members[i].key_len == n && memcmp(obj->members[i].key, key, n) == 0)
            return &obj->members[i].value;
    return NULL;
}

const struct json_value *json_at(const struct json_value *arr, size_t i)
{
    if (!arr || arr->type != JSON_ARRAY || i >= arr->n)
        return NULL;
    return &arr->items[i];
}

int json_is(const struct json_value *v, enum json_type t)
{
    return v && v->type == t;
}

int json_is_bool(const struct json_value *v)
{
    return v && (v->type == JSON_TRUE || v->type == JSON_FALSE);
}

const char *json_type_name(const struct json_value *v)
{
    static const char *const names[] = {"?",      "null",   "false", "true",
                                        "number", "string", "array", "object"};
    if (!v)
        return "missing";
    return v->type < sizeof names / sizeof names[0] ? names[v->type] : "?";
}

int json_str_eq(const struct json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && strlen(s) == v->n && memcmp(v->str, s, v->n) == 0;
}
