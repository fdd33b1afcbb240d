/* Fuzz target: the JSON parser (tools/util/json.h) on arbitrary bytes,
 * with a small depth limit so deep nesting is reached.
 *
 *   - a refusal has a message naming a line and column;
 *   - an accepted document is well formed: strings are valid UTF-8 and
 *     NUL-terminated at their length, integers agree with their double;
 *   - writing the tree back out as JSON and parsing that gives the same
 *     tree (the parser loses nothing and invents nothing).
 *
 * Any violated invariant aborts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/util/json.h"

struct out {
    char *p;
    size_t n, cap;
};

static void emit(struct out *o, const char *s, size_t n)
{
    if (o->n + n + 1 > o->cap) {
        o->cap = 2 * (o->n + n + 1);
        o->p = realloc(o->p, o->cap);
        FUZZ_ASSERT(o->p != NULL);
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void emit_str(struct out *o, const char *s, uint32_t n)
{
    emit(o, "\"", 1);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"' || c == '\\') {
            e[0] = '\\';
            e[1] = (char)c;
            emit(o, e, 2);
        } else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            emit(o, e, 6);
        } else {
            emit(o, (const char *)&c, 1);
        }
    }
    emit(o, "\"", 1);
}

static int valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80                 ? 1
                   : c >= 0xc2 && c <= 0xdf ? 2
                   : c >= 0xe0 && c <= 0xef ? 3
                   : c >= 0xf0 && c <= 0xf4 ? 4
                                            : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
        if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] > 0x9f) ||
            (c == 0xf0 && s[i + 1] < 0x90) || (c == 0xf4 && s[i + 1] > 0x8f))
            return 0;
        i += k;
    }
    return 1;
}

static void check_str(const char *s, uint32_t n)
{
    FUZZ_ASSERT(s != NULL && s[n] == 0);
    FUZZ_ASSERT(valid_utf8((const unsigned char *)s, n));
}

static void write_value(struct out *o, const struct json_value *v)
{
    char num[64];
    switch (v->type) {
    case JSON_NULL: emit(o, "null", 4); break;
    case JSON_TRUE: emit(o, "true", 4); break;
    case JSON_FALSE: emit(o, "false", 5); break;
    case JSON_NUMBER:
        FUZZ_ASSERT(isfinite(v->num));
        if (v->is_int) {
            FUZZ_ASSERT((double)v->i == v->num || fabs(v->num) >= 9007199254740992.0);
            snprintf(num, sizeof num, "%lld", (long long)v->i);
        } else {
            snprintf(num, sizeof num, "%.17g", v->num);
        }
        emit(o, num, strlen(num));
        break;
    case JSON_STRING:
        check_str(v->str, v->n);
        emit_str(o, v->str, v->n);
        break;
    case JSON_ARRAY:
        emit(o, "[", 1);
        for (uint32_t i = 0; i < v->n; i++) {
            if (i)
                emit(o, ",", 1);
            FUZZ_ASSERT(json_at(v, i) == &v->items[i]);
            write_value(o, &v->items[i]);
        }
        emit(o, "]", 1);
        break;
    case JSON_OBJECT:
        emit(o, "{", 1);
        for (uint32_t i = 0; i < v->n; i++) {
            const struct json_member *m = &v->members[i];
            if (i)
                emit(o, ",", 1);
            check_str(m->key, m->key_len);
            emit_str(o, m->key, m->key_len);
            emit(o, ":", 1);
            write_value(o, &m->value);
        }
        emit(o, "}", 1);
        break;
    default: FUZZ_ASSERT(0);
    }
}

static void same(const struct json_value *a, const struct json_value *b)
{
    FUZZ_ASSERT(a->type == b->type && a->n == b->n);
    switch (a->type) {
    case JSON_NUMBER:
        FUZZ_ASSERT(a->num == b->num || (a->num == 0 && b->num == 0));
        FUZZ_ASSERT(!a->is_int || (b->is_int && a->i == b->i));
        break;
    case JSON_STRING: FUZZ_ASSERT(memcmp(a->str, b->str, a->n) == 0); break;
    case JSON_ARRAY:
        for (uint32_t i = 0; i < a->n; i++)
            same(&a->items[i], &b->items[i]);
        break;
    case JSON_OBJECT:
        for (uint32_t i = 0; i < a->n; i++) {
            FUZZ_ASSERT(a->members[i].key_len == b->members[i].key_len);
            FUZZ_ASSERT(!memcmp(a->members[i].key, b->members[i].key, a->members[i].key_len));
            same(&a->members[i].value, &b->members[i].value);
        }
        break;
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct json_limits lim = {.max_bytes = 1 << 20, .max_depth = 24};
    struct json_doc *d;
    char err[256];
    if (json_parse((const char *)data, size, &lim, &d, err, sizeof err)) {
        FUZZ_ASSERT(d == NULL);
        FUZZ_ASSERT(size > lim.max_bytes || (!strncmp(err, "line ", 5) && strstr(err, "column")));
        return 0;
    }
    struct out o = {0};
    write_value(&o, json_root(d));
    struct json_doc *again;
    lim.max_bytes = o.n + 1;
    int rc = json_parse(o.p, o.n, &lim, &again, err, sizeof err);
    if (rc)
        fprintf(stderr, "re-parse: %s\n", err);
    FUZZ_ASSERT(rc == 0);
    same(json_root(d), json_root(again));
    json_free(again);
    json_free(d);
    free(o.p);
    return 0;
}
