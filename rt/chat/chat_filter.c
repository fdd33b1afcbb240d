/* Filters, tests, the methods of strings and mappings, and strftime_now,
 * as @huggingface/jinja defines them (runtime.ts applyFilter, TESTS,
 * StringValue and ObjectValue builtins; utils.ts). Case mapping is
 * JavaScript's (rt/chat/chat_case.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rt/chat/chat_case.h"
#include "rt/chat/chat_internal.h"

static struct val bound(struct ctx *c, const struct val *self, int fid)
{
    struct val *s = chat_alloc(c, sizeof *s);
    *s = *self;
    struct val f = {.k = V_FUNC, .n = (uint32_t)fid};
    f.u.f.self = s;
    return f;
}

static const struct {
    const char *name;
    int fid;
} str_methods[] =
    {
        {"upper", FN_S_UPPER},   {"lower", FN_S_LOWER},           {"strip", FN_S_STRIP},
        {"title", FN_S_TITLE},   {"capitalize", FN_S_CAPITALIZE}, {"rstrip", FN_S_RSTRIP},
        {"lstrip", FN_S_LSTRIP}, {"startswith", FN_S_STARTSWITH}, {"endswith", FN_S_ENDSWITH},
        {"split", FN_S_SPLIT},   {"replace", FN_S_REPLACE},
},
  obj_methods[] = {
      {"get", FN_O_GET},       {"items", FN_O_ITEMS},       {"keys", FN_O_KEYS},
      {"values", FN_O_VALUES}, {"dictsort", FN_O_DICTSORT},
};

static int method_of(const struct val *name, int obj)
{
    size_t n = obj ? sizeof obj_methods / sizeof obj_methods[0]
                   : sizeof str_methods / sizeof str_methods[0];
    for (size_t i = 0; i < n; i++)
        if (str_eq_lit(name, obj ? obj_methods[i].name : str_methods[i].name))
            return obj ? obj_methods[i].fid : str_methods[i].fid;
    return -1;
}

struct val chat_builtin_member(struct ctx *c, const struct val *obj, const struct val *name)
{
    if (obj->k == V_STR) {
        if (str_eq_lit(name, "length"))
            return v_num(V_INT, u16_len(obj));
        int f = method_of(name, 0);
        return f < 0 ? v_undef() : bound(c, obj, f);
    }
    if (obj->k == V_ARRAY || obj->k == V_TUPLE)
        return str_eq_lit(name, "length") ? v_num(V_INT, obj->n) : v_undef();
    if (obj->k == V_OBJECT || obj->k == V_KWARGS) {
        int f = method_of(name, 1);
        return f < 0 ? v_undef() : bound(c, obj, f);
    }
    return v_undef();
}

/* ---- strings ---- */

static void put_cp(struct ctx *c, uint32_t cp, uint8_t taint)
{
    uint8_t b[4];
    uint32_t n = 0;
    if (cp < 0x80) {
        b[n++] = (uint8_t)cp;
    } else if (cp < 0x800) {
        b[n++] = (uint8_t)(0xC0 | cp >> 6);
        b[n++] = (uint8_t)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        b[n++] = (uint8_t)(0xE0 | cp >> 12);
        b[n++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        b[n++] = (uint8_t)(0x80 | (cp & 0x3F));
    } else {
        b[n++] = (uint8_t)(0xF0 | cp >> 18);
        b[n++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        b[n++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        b[n++] = (uint8_t)(0x80 | (cp & 0x3F));
    }
    for (uint32_t i = 0; i < n; i++)
        sink_byte(c, b[i], taint);
}

/* Final_Sigma (Unicode 3.13): after a cased letter (case-ignorable ones
 * between), and not before one. */
static int sigma_is_final(const struct val *s, uint32_t after, int cased_before)
{
    if (!cased_before)
        return 0;
    uint32_t cp;
    for (uint32_t i = after; i < s->n;) {
        i += u8_next(s->u.s.p, s->n, i, &cp);
        if (!nib_chat_case_ignorable(cp))
            return !nib_chat_cased(cp);
    }
    return 1;
}

/* String.prototype.toUpperCase / toLowerCase: full mappings, Final_Sigma;
 * an ill-formed byte stays as it is. */
static struct val change_case(struct ctx *c, const struct val *s, int upper)
{
    size_t mark = c->olen;
    int cased_before = 0;
    chat_step(c, s->n >> 4);
    for (uint32_t i = 0; i < s->n;) {
        uint32_t cp, k = u8_next(s->u.s.p, s->n, i, &cp), out[3];
        uint8_t t = str_taint(s, i);
        if (cp == 0xFFFD && k == 1) {
            sink_byte(c, s->u.s.p[i], t);
            i += k;
            cased_before = 0;
            continue;
        }
        uint32_t m;
        if (!upper && cp == 0x3A3 && sigma_is_final(s, i + k, cased_before)) {
            out[0] = 0x3C2;
            m = 1;
        } else {
            m = nib_chat_case_map(cp, upper, out);
        }
        for (uint32_t j = 0; j < m; j++)
            put_cp(c, out[j], t);
        if (!nib_chat_case_ignorable(cp))
            cased_before = nib_chat_cased(cp);
        i += k;
    }
    return sink_take(c, mark);
}

static int word_byte(uint8_t b)
{
    return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') || b == '_';
}

/* value.replace(/\b\w/g, toUpperCase): ASCII word characters only */
static struct val title(struct ctx *c, const struct val *s)
{
    size_t mark = c->olen;
    for (uint32_t i = 0; i < s->n; i++) {
        uint8_t b = s->u.s.p[i];
        if (b >= 'a' && b <= 'z' && (i == 0 || !word_byte(s->u.s.p[i - 1])))
            b -= 32;
        sink_byte(c, b, str_taint(s, i));
    }
    return sink_take(c, mark);
}

/* charAt(0).toUpperCase() + slice(1): the first UTF-16 unit only (half of
 * an astral character stays as it is). */
static struct val capitalize(struct ctx *c, const struct val *s)
{
    if (s->n == 0)
        return *s;
    uint32_t cp, k = u8_next(s->u.s.p, s->n, 0, &cp), out[3];
    if (cp >= 0x10000 || (cp == 0xFFFD && k == 1))
        return *s;
    uint32_t m = nib_chat_case_map(cp, 1, out);
    if (m == 1 && out[0] == cp)
        return *s;
    size_t mark = c->olen;
    for (uint32_t j = 0; j < m; j++)
        put_cp(c, out[j], str_taint(s, 0));
    sink_put(c, s->u.s.p + k, s->u.s.t ? s->u.s.t + k : NULL, s->tu, s->n - k);
    return sink_take(c, mark);
}

static int affix(const struct val *s, const struct val *a, int end)
{
    if (a->n > s->n)
        return 0;
    return !memcmp(s->u.s.p + (end ? s->n - a->n : 0), a->u.s.p, a->n);
}

static struct val starts_ends(struct ctx *c, const struct val *s, struct args *a, int end)
{
    const char *name = end ? "endswith" : "startswith";
    if (a->n == 0)
        chat_fail(c, "%s() requires at least one argument", name);
    const struct val *p = &a->v[0];
    if (p->k == V_STR)
        return v_bool(affix(s, p, end));
    if (p->k == V_ARRAY || p->k == V_TUPLE) {
        for (uint32_t i = 0; i < p->n; i++) {
            if (p->u.a[i].k != V_STR)
                chat_fail(c, "%s() tuple elements must be strings", name);
            if (affix(s, &p->u.a[i], end))
                return v_bool(1);
        }
        return v_bool(0);
    }
    chat_fail(c, "%s() argument must be a string or tuple of strings", name);
}

static uint32_t find(const struct val *s, uint32_t from, const struct val *needle)
{
    for (uint32_t i = from; i + needle->n <= s->n; i++)
        if (!memcmp(s->u.s.p + i, needle->u.s.p, needle->n))
            return i;
    return UINT32_MAX;
}

static struct val split(struct ctx *c, const struct val *s, struct args *a)
{
    struct val sep = a->n > 0 ? a->v[0] : v_null();
    if (sep.k != V_STR && sep.k != V_NULL)
        chat_fail(c, "sep argument must be a string or null");
    struct val ms = a->n > 1 ? a->v[1] : v_num(V_INT, -1);
    if (ms.k != V_INT)
        chat_fail(c, "maxsplit argument must be a number");
    double maxsplit = ms.u.num;
    chat_step(c, s->n >> 4);
    /* at most one piece per byte, plus one */
    struct val r = v_array(c, s->n + 1, V_ARRAY);
    r.n = 0;
    if (sep.k == V_NULL) {
        struct val t = str_trim(s, 1, 0);
        uint32_t i = 0, cp, k;
        while (i < t.n) {
            uint32_t st = i;
            while (i < t.n && (k = u8_next(t.u.s.p, t.n, i, &cp), !js_space(cp)))
                i += k;
            if (maxsplit != -1 && r.n >= maxsplit) {
                r.u.a[r.n++] = str_slice(&t, st, t.n);
                break;
            }
            r.u.a[r.n++] = str_slice(&t, st, i);
            while (i < t.n && (k = u8_next(t.u.s.p, t.n, i, &cp), js_space(cp)))
                i += k;
        }
        return r;
    }
    if (sep.n == 0)
        chat_fail(c, "empty separator");
    uint32_t st = 0, at;
    while ((at = find(s, st, &sep)) != UINT32_MAX) {
        r.u.a[r.n++] = str_slice(s, st, at);
        st = at + sep.n;
    }
    r.u.a[r.n++] = str_slice(s, st, s->n);
    if (maxsplit != -1 && r.n > maxsplit) {
        double k = maxsplit < 0 ? fmax(r.n + maxsplit, 0) : maxsplit;
        uint32_t keep = (uint32_t)k;
        /* the rest, joined by sep again, is the original text from there */
        uint32_t from = (uint32_t)(r.u.a[keep].u.s.p - s->u.s.p);
        r.u.a[keep] = str_slice(s, from, s->n);
        r.n = keep + 1;
    }
    return r;
}

static struct val replace(struct ctx *c, const struct val *s, struct args *a)
{
    if (a->n < 2)
        chat_fail(c, "replace() requires at least two arguments");
    const struct val *old = &a->v[0], *new = &a->v[1];
    if (old->k != V_STR || new->k != V_STR)
        chat_fail(c, "replace() arguments must be strings");
    struct val count = v_null();
    if (a->n > 2) {
        if (a->v[2].k == V_KWARGS) {
            const struct val *cv = map_get(a->v[2].u.m, (const uint8_t *)"count", 5);
            count = cv ? *cv : v_null();
        } else {
            count = a->v[2];
        }
    }
    if (count.k != V_INT && count.k != V_NULL)
        chat_fail(c, "replace() count argument must be a number or null");
    if (count.k == V_INT && count.u.num == 0)
        return *s;
    double left = count.k == V_NULL || count.u.num < 0 ? INFINITY : count.u.num;
    chat_step(c, s->n >> 4);
    size_t mark = c->olen;
    if (old->n == 0) {
        /* /(?=)/gu: before every character and at the end */
        uint32_t cp;
        for (uint32_t i = 0;; i += u8_next(s->u.s.p, s->n, i, &cp)) {
            if (left > 0) {
                sink_str(c, new);
                left--;
            }
            if (i >= s->n)
                break;
            uint32_t k = u8_next(s->u.s.p, s->n, i, &cp);
            sink_put(c, s->u.s.p + i, s->u.s.t ? s->u.s.t + i : NULL, s->tu, k);
        }
        return sink_take(c, mark);
    }
    uint32_t st = 0, at;
    while (left > 0 && (at = find(s, st, old)) != UINT32_MAX) {
        sink_put(c, s->u.s.p + st, s->u.s.t ? s->u.s.t + st : NULL, s->tu, at - st);
        sink_str(c, new);
        st = at + old->n;
        left--;
    }
    sink_put(c, s->u.s.p + st, s->u.s.t ? s->u.s.t + st : NULL, s->tu, s->n - st);
    return sink_take(c, mark);
}

/* ---- sorting (compareRuntimeValues) ---- */

static int numlike(const struct val *v)
{
    return v->k == V_INT || v->k == V_FLOAT || v->k == V_BOOL;
}

static int compare(struct ctx *c, const struct val *a, const struct val *b, int case_sensitive)
{
    if (a->k == V_NULL && b->k == V_NULL)
        return 0;
    if (a->k == V_NULL || b->k == V_NULL || (a->k == V_UNDEF) != (b->k == V_UNDEF))
        chat_fail(c, "Cannot compare %s with %s", chat_type_name(a), chat_type_name(b));
    if (a->k == V_UNDEF)
        return 0;
    if (numlike(a) && numlike(b))
        return a->u.num < b->u.num ? -1 : a->u.num > b->u.num ? 1 : 0;
    if (a->k != b->k)
        chat_fail(c, "Cannot compare different types: %s and %s", chat_type_name(a),
                  chat_type_name(b));
    if (a->k != V_STR)
        chat_fail(c, "Cannot compare type: %s", chat_type_name(a));
    if (case_sensitive)
        return u16_cmp(a, b);
    size_t mark = c->olen;
    struct val la = change_case(c, a, 0), lb = change_case(c, b, 0);
    c->olen = mark;
    return u16_cmp(&la, &lb);
}

static const struct val *attr_path(struct ctx *c, const struct val *item, const struct val *path,
                                   struct val *tmp);

struct sort_key {
    const struct val *attr; /* NULL: the item itself */
    int by;                 /* dictsort: 0 key, 1 value; -1 not a pair */
    int cs, rev;
};

static int sort_cmp(struct ctx *c, const struct val *x, const struct val *y,
                    const struct sort_key *k)
{
    struct val tx, ty;
    const struct val *a = x, *b = y;
    if (k->by >= 0) {
        a = &x->u.a[k->by];
        b = &y->u.a[k->by];
    } else if (k->attr) {
        a = attr_path(c, x, k->attr, &tx);
        b = attr_path(c, y, k->attr, &ty);
    }
    int r = compare(c, a, b, k->cs);
    return k->rev ? -r : r;
}

/* Stable merge sort (Array.prototype.sort is stable). */
static void sort_vals(struct ctx *c, struct val *v, uint32_t n, const struct sort_key *k)
{
    struct val *tmp = chat_alloc(c, (n ? n : 1) * sizeof *tmp);
    for (uint32_t w = 1; w < n; w *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * w) {
            uint32_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            uint32_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = sort_cmp(c, &v[j], &v[i], k) < 0 ? v[j++] : v[i++];
            while (i < mid)
                tmp[o++] = v[i++];
            while (j < hi)
                tmp[o++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
        chat_step(c, n);
    }
}

static struct val copy_array(struct ctx *c, const struct val *a)
{
    struct val r = v_array(c, a->n, V_ARRAY);
    if (a->n)
        memcpy(r.u.a, a->u.a, a->n * sizeof *r.u.a);
    return r;
}

/* ---- mappings ---- */

static struct val items_of(struct ctx *c, const struct map *m)
{
    struct val r = v_array(c, m->n, V_ARRAY);
    uint32_t i = 0;
    for (const struct ment *e = m->head; e; e = e->next) {
        struct val pair = v_array(c, 2, V_ARRAY);
        pair.u.a[0] = e->key;
        pair.u.a[1] = e->v;
        r.u.a[i++] = pair;
    }
    return r;
}

static const struct val *kwarg(const struct args *a, const char *name)
{
    if (a->n && a->v[a->n - 1].k == V_KWARGS)
        return map_get(a->v[a->n - 1].u.m, (const uint8_t *)name, (uint32_t)strlen(name));
    return NULL;
}

/* args.at(i) ?? kwargs.get(name) ?? dflt, positional meaning any value but
 * the trailing keyword mapping. */
static struct val arg_or(const struct args *a, uint32_t i, const char *name, struct val dflt)
{
    uint32_t npos = a->n && a->v[a->n - 1].k == V_KWARGS ? a->n - 1 : a->n;
    if (i < npos)
        return a->v[i];
    const struct val *k = name ? kwarg(a, name) : NULL;
    return k ? *k : dflt;
}

static struct val dictsort(struct ctx *c, const struct val *obj, struct args *a)
{
    struct val cs = arg_or(a, 0, "case_sensitive", v_bool(0));
    if (cs.k != V_BOOL)
        chat_fail(c, "case_sensitive must be a boolean");
    struct val by = arg_or(a, 1, "by", v_lit("key"));
    if (by.k != V_STR)
        chat_fail(c, "by must be a string");
    if (!str_eq_lit(&by, "key") && !str_eq_lit(&by, "value"))
        chat_fail(c, "by must be either 'key' or 'value'");
    struct val rev = arg_or(a, 2, "reverse", v_bool(0));
    if (rev.k != V_BOOL)
        chat_fail(c, "reverse must be a boolean");
    struct val r = items_of(c, obj->u.m);
    struct sort_key k = {NULL, str_eq_lit(&by, "key") ? 0 : 1, cs.u.num != 0, rev.u.num != 0};
    sort_vals(c, r.u.a, r.n, &k);
    return r;
}

struct val chat_method(struct ctx *c, const struct val *fn, struct args *a)
{
    const struct val *s = fn->u.f.self;
    switch (fn->n) {
    case FN_S_UPPER: return change_case(c, s, 1);
    case FN_S_LOWER: return change_case(c, s, 0);
    case FN_S_STRIP: return str_trim(s, 1, 1);
    case FN_S_TITLE: return title(c, s);
    case FN_S_CAPITALIZE: return capitalize(c, s);
    case FN_S_RSTRIP: return str_trim(s, 0, 1);
    case FN_S_LSTRIP: return str_trim(s, 1, 0);
    case FN_S_STARTSWITH: return starts_ends(c, s, a, 0);
    case FN_S_ENDSWITH: return starts_ends(c, s, a, 1);
    case FN_S_SPLIT: return split(c, s, a);
    case FN_S_REPLACE: return replace(c, s, a);
    case FN_O_GET: {
        if (a->n == 0)
            chat_fail(c, "Object key must be a string: got undefined");
        if (a->v[0].k != V_STR)
            chat_fail(c, "Object key must be a string: got %s", chat_type_name(&a->v[0]));
        const struct val *v = map_get(s->u.m, a->v[0].u.s.p, a->v[0].n);
        return v ? *v : a->n > 1 ? a->v[1] : v_null();
    }
    case FN_O_ITEMS: return items_of(c, s->u.m);
    case FN_O_KEYS:
    case FN_O_VALUES: {
        struct val r = v_array(c, s->u.m->n, V_ARRAY);
        uint32_t i = 0;
        for (const struct ment *e = s->u.m->head; e; e = e->next)
            r.u.a[i++] = fn->n == FN_O_KEYS ? e->key : e->v;
        return r;
    }
    case FN_O_DICTSORT: return dictsort(c, s, a);
    default: chat_fail(c, "chat program: unknown function");
    }
}

/* The names of the filters and tests a chat program knows by number
 * (rt/chat/chat_prog.h): the compiler looks names up here, and the
 * evaluator names a test in its errors from here. */
const char *const nib_chat_filter_names[CF_END] = {
    [CF_SAFE] = "safe",
    [CF_TOJSON] = "tojson",
    [CF_LIST] = "list",
    [CF_FIRST] = "first",
    [CF_LAST] = "last",
    [CF_LENGTH] = "length",
    [CF_REVERSE] = "reverse",
    [CF_SORT] = "sort",
    [CF_JOIN] = "join",
    [CF_STRING] = "string",
    [CF_UNIQUE] = "unique",
    [CF_UPPER] = "upper",
    [CF_LOWER] = "lower",
    [CF_TITLE] = "title",
    [CF_CAPITALIZE] = "capitalize",
    [CF_TRIM] = "trim",
    [CF_INDENT] = "indent",
    [CF_INT] = "int",
    [CF_FLOAT] = "float",
    [CF_ABS] = "abs",
    [CF_ITEMS] = "items",
    [CF_BOOL] = "bool",
    [CF_DEFAULT] = "default",
    [CF_SELECTATTR] = "selectattr",
    [CF_REJECTATTR] = "rejectattr",
    [CF_MAP] = "map",
    [CF_REPLACE] = "replace",
};

const char *const nib_chat_test_names[CT_END] = {
    [CT_BOOLEAN] = "boolean",
    [CT_CALLABLE] = "callable",
    [CT_ODD] = "odd",
    [CT_EVEN] = "even",
    [CT_FALSE] = "false",
    [CT_TRUE] = "true",
    [CT_NONE] = "none",
    [CT_STRING] = "string",
    [CT_NUMBER] = "number",
    [CT_INTEGER] = "integer",
    [CT_ITERABLE] = "iterable",
    [CT_MAPPING] = "mapping",
    [CT_SEQUENCE] = "sequence",
    [CT_LOWER] = "lower",
    [CT_UPPER] = "upper",
    [CT_DEFINED] = "defined",
    [CT_UNDEFINED] = "undefined",
    [CT_EQUALTO] = "equalto",
    [CT_EQ] = "eq",
};

/* ---- tests (Environment.TESTS) ---- */

static int test_by_name(const struct val *name)
{
    for (int i = 1; i < CT_END; i++)
        if (str_eq_lit(name, nib_chat_test_names[i]))
            return i;
    return 0;
}

/* str === str.toLowerCase() (or toUpperCase()) */
static int is_case(struct ctx *c, const struct val *v, int upper)
{
    if (v->k != V_STR)
        return 0;
    size_t mark = c->olen;
    struct val m = change_case(c, v, upper);
    int same = str_eq(&m, v);
    c->olen = mark;
    return same;
}

int chat_test(struct ctx *c, int test, const struct nib_chat_node *n, const struct val *v,
              const struct val *arg)
{
    switch (test) {
    case CT_BOOLEAN: return v->k == V_BOOL;
    case CT_CALLABLE: return v->k == V_FUNC;
    case CT_ODD:
    case CT_EVEN:
        if (v->k != V_INT)
            chat_fail(c, "cannot %s on %s", test == CT_ODD ? "odd" : "even", chat_type_name(v));
        return (fmod(v->u.num, 2) != 0) == (test == CT_ODD);
    case CT_FALSE: return v->k == V_BOOL && !v->u.num;
    case CT_TRUE: return v->k == V_BOOL && v->u.num;
    case CT_NONE: return v->k == V_NULL;
    case CT_STRING: return v->k == V_STR;
    case CT_NUMBER: return v->k == V_INT || v->k == V_FLOAT;
    case CT_INTEGER: return v->k == V_INT;
    case CT_ITERABLE: return v->k == V_ARRAY || v->k == V_STR;
    case CT_MAPPING: return v->k == V_OBJECT || v->k == V_KWARGS;
    case CT_SEQUENCE:
        return v->k == V_ARRAY || v->k == V_TUPLE || v->k == V_OBJECT || v->k == V_KWARGS ||
               v->k == V_STR;
    case CT_LOWER: return is_case(c, v, 0);
    case CT_UPPER: return is_case(c, v, 1);
    case CT_DEFINED: return v->k != V_UNDEF;
    case CT_UNDEFINED: return v->k == V_UNDEF;
    case CT_EQUALTO:
    case CT_EQ:
        if (!arg)
            chat_fail(c, "the %s test needs a value to compare with", nib_chat_test_names[test]);
        return strict_eq(v, arg);
    default:
        if (n)
            chat_fail(c, "Unknown test: %.*s", (int)n->b, (const char *)c->pool + n->a);
        chat_fail(c, "Unknown test");
    }
}

/* ---- filters ---- */

static const struct val *attr_path(struct ctx *c, const struct val *item, const struct val *path,
                                   struct val *tmp)
{
    /* getAttributeValue: a dotted path through mappings and list indices */
    const struct val *v = item;
    uint32_t st = 0;
    (void)c;
    for (;;) {
        uint32_t e = st;
        while (e < path->n && path->u.s.p[e] != '.')
            e++;
        struct val part = str_slice(path, st, e);
        if (v->k == V_OBJECT || v->k == V_KWARGS || v->k == V_NS) {
            v = map_get(v->u.m, part.u.s.p, part.n);
            if (!v) {
                *tmp = v_undef();
                return tmp;
            }
        } else if (v->k == V_ARRAY || v->k == V_TUPLE) {
            double i = js_parse_int(&part);
            if (isnan(i) || i < 0 || i >= v->n) {
                *tmp = v_undef();
                return tmp;
            }
            v = &v->u.a[(uint32_t)i];
        } else {
            *tmp = v_undef();
            return tmp;
        }
        if (e >= path->n)
            return v;
        st = e + 1;
    }
}

static int raw_truthy(const struct val *v)
{
    /* JavaScript truthiness of value.value: any array or Map is true */
    return (v->k >= V_ARRAY && v->k <= V_FUNC) || truthy(v);
}

static struct val indent(struct ctx *c, const struct val *s, double width, int first, int blank)
{
    if (width < 0 || width > 65536)
        chat_fail(c, "Invalid count value: %g", width);
    size_t mark = c->olen;
    uint32_t st = 0, line = 0;
    for (;;) {
        uint32_t e = st;
        while (e < s->n && s->u.s.p[e] != '\n')
            e++;
        if (!((!first && line == 0) || (!blank && e == st)))
            for (uint32_t i = 0; i < (uint32_t)width; i++)
                sink_byte(c, ' ', 0);
        sink_put(c, s->u.s.p + st, s->u.s.t ? s->u.s.t + st : NULL, s->tu, e - st);
        if (e >= s->n)
            break;
        sink_byte(c, '\n', str_taint(s, e));
        st = e + 1;
        line++;
    }
    return sink_take(c, mark);
}

static struct val join(struct ctx *c, const struct val *v, const struct val *sep)
{
    size_t mark = c->olen;
    if (v->k == V_STR) {
        uint32_t cp;
        for (uint32_t i = 0; i < v->n;) {
            uint32_t k = u8_next(v->u.s.p, v->n, i, &cp);
            if (i && sep)
                sink_str(c, sep);
            sink_put(c, v->u.s.p + i, v->u.s.t ? v->u.s.t + i : NULL, v->tu, k);
            i += k;
        }
    } else {
        for (uint32_t i = 0; i < v->n; i++) {
            if (i && sep)
                sink_str(c, sep);
            put_value(c, &v->u.a[i], SM_JOIN);
        }
    }
    return sink_take(c, mark);
}

static struct val to_json(struct ctx *c, const struct val *v, const struct json_opts *o)
{
    size_t mark = c->olen;
    put_json(c, v, o, 0, 1);
    return sink_take(c, mark);
}

static struct val unique(struct ctx *c, const struct val *a)
{
    struct val r = v_array(c, a->n, V_ARRAY);
    r.n = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        int seen = 0;
        for (uint32_t j = 0; j < r.n && !seen; j++)
            seen = same_value_zero(&r.u.a[j], &a->u.a[i]);
        if (!seen)
            r.u.a[r.n++] = a->u.a[i];
        chat_step(c, r.n >> 4);
    }
    return r;
}

static int container(const struct val *v)
{
    return v->k == V_OBJECT || v->k == V_KWARGS || v->k == V_NS;
}

static struct val select_attr(struct ctx *c, const struct val *arr, struct nib_chat_node f,
                              uint32_t first, uint32_t nargs, struct scope *sc, int select)
{
    const char *name = select ? "selectattr" : "rejectattr";
    for (uint32_t i = 0; i < arr->n; i++)
        if (!container(&arr->u.a[i]))
            chat_fail(c, "`%s` can only be applied to array of objects", name);
    for (uint32_t i = 0; i < nargs; i++)
        if (chat_node(c, first + i).op != CO_STR)
            chat_fail(c, "arguments of `%s` must be strings", name);
    (void)f;
    if (nargs == 0)
        chat_fail(c, "`%s` needs an attribute name", name);
    struct val attr = chat_eval(c, first, sc);
    struct val value = nargs > 2 ? chat_eval(c, first + 2, sc) : v_undef();
    int test = -1;
    if (nargs > 1) {
        struct val tn = chat_eval(c, first + 1, sc);
        test = test_by_name(&tn);
        if (!test)
            chat_fail(c, "Unknown test: %.*s", (int)tn.n, (const char *)tn.u.s.p);
    }
    struct val r = v_array(c, arr->n, V_ARRAY);
    r.n = 0;
    for (uint32_t i = 0; i < arr->n; i++) {
        const struct val *a = map_get(arr->u.a[i].u.m, attr.u.s.p, attr.n);
        int res = 0;
        if (a)
            res = test < 0 ? truthy(a) : chat_test(c, test, NULL, a, nargs > 2 ? &value : NULL);
        if (res == select)
            r.u.a[r.n++] = arr->u.a[i];
    }
    return r;
}

static struct val map_attr(struct ctx *c, const struct val *arr, struct args *a)
{
    const struct val *attr = kwarg(a, "attribute");
    if (!attr)
        chat_fail(c, "`map` expressions without `attribute` set are not currently supported.");
    if (attr->k != V_STR)
        chat_fail(c, "attribute must be a string");
    const struct val *dflt = kwarg(a, "default");
    struct val r = v_array(c, arr->n, V_ARRAY);
    for (uint32_t i = 0; i < arr->n; i++) {
        if (!container(&arr->u.a[i]))
            chat_fail(c, "items in map must be an object");
        struct val tmp;
        const struct val *v = attr_path(c, &arr->u.a[i], attr, &tmp);
        r.u.a[i] = v->k == V_UNDEF ? (dflt ? *dflt : v_undef()) : *v;
    }
    return r;
}

static struct args eval_args(struct ctx *c, uint32_t first, uint32_t n, struct scope *sc)
{
    struct args a = {chat_alloc(c, (n + 1) * sizeof(struct val)), 0};
    uint32_t nkw = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (chat_node(c, first + i).op == CO_KWARG)
            nkw++;
        else
            a.v[a.n++] = chat_eval(c, first + i, sc);
    }
    if (nkw) {
        struct val kw = v_map(c, V_KWARGS);
        for (uint32_t i = 0; i < n; i++) {
            struct nib_chat_node k = chat_node(c, first + i);
            if (k.op != CO_KWARG)
                continue;
            if (map_get(kw.u.m, c->pool + k.a, k.b))
                chat_fail(c, "Got multiple values for keyword argument '%.*s'", (int)k.b,
                          (const char *)c->pool + k.a);
            map_set(c, kw.u.m, v_strn(c->pool + k.a, NULL, 0, k.b), chat_eval(c, k.k0, sc));
        }
        a.v[a.n++] = kw;
    }
    return a;
}

static _Noreturn void unknown(struct ctx *c, const char *kind, struct nib_chat_node f)
{
    chat_fail(c, "Unknown %s filter: %.*s", kind, (int)f.b, (const char *)c->pool + f.a);
}

static struct val object_builtin(struct ctx *c, const struct val *o, struct nib_chat_node f,
                                 struct args *a)
{
    struct val name = v_strn(c->pool + f.a, NULL, 0, f.b);
    int fid = method_of(&name, 1);
    if (fid < 0)
        unknown(c, "ObjectValue", f);
    struct val fn = bound(c, o, fid);
    struct args none = {NULL, 0};
    return chat_method(c, &fn, a ? a : &none);
}

static struct val filter_plain(struct ctx *c, struct val v, struct nib_chat_node f)
{
    int id = f.sub & 0x7F;
    if (id == CF_SAFE)
        return v;
    if (id == CF_TOJSON)
        return to_json(c, &v, NULL);
    switch (v.k) {
    case V_ARRAY:
    case V_TUPLE:
        switch (id) {
        case CF_LIST: return v;
        case CF_FIRST:
        case CF_LAST:
            if (!v.n)
                return (struct val){.k = V_HOLE};
            return v.u.a[id == CF_FIRST ? 0 : v.n - 1];
        case CF_LENGTH: return v_num(V_INT, v.n);
        case CF_REVERSE: {
            struct val r = v_array(c, v.n, V_ARRAY);
            for (uint32_t i = 0; i < v.n; i++)
                r.u.a[i] = v.u.a[v.n - 1 - i];
            return r;
        }
        case CF_SORT: {
            struct val r = copy_array(c, &v);
            struct sort_key k = {NULL, -1, 0, 0};
            sort_vals(c, r.u.a, r.n, &k);
            return r;
        }
        case CF_JOIN: return join(c, &v, NULL);
        case CF_STRING: {
            size_t mark = c->olen;
            put_json(c, &v, NULL, 0, 0);
            return sink_take(c, mark);
        }
        case CF_UNIQUE: return unique(c, &v);
        }
        unknown(c, "ArrayValue", f);
    case V_STR:
        switch (id) {
        case CF_LENGTH: return v_num(V_INT, u16_len(&v));
        case CF_UPPER: return change_case(c, &v, 1);
        case CF_LOWER: return change_case(c, &v, 0);
        case CF_TITLE: return title(c, &v);
        case CF_CAPITALIZE: return capitalize(c, &v);
        case CF_TRIM: return str_trim(&v, 1, 1);
        case CF_INDENT: return indent(c, &v, 4, 0, 0);
        case CF_JOIN:
        case CF_STRING: return v;
        case CF_INT: {
            double d = js_parse_int(&v);
            return v_num(V_INT, isnan(d) ? 0 : d);
        }
        case CF_FLOAT: {
            double d = js_parse_float(&v);
            return v_num(V_FLOAT, isnan(d) ? 0 : d);
        }
        }
        unknown(c, "StringValue", f);
    case V_INT:
    case V_FLOAT:
        switch (id) {
        case CF_ABS: return v_num(v.k, fabs(v.u.num));
        case CF_INT: return v_num(V_INT, floor(v.u.num));
        case CF_FLOAT: return v_num(V_FLOAT, v.u.num);
        case CF_STRING: return value_string(c, &v, SM_PRINT);
        }
        unknown(c, "NumericValue", f);
    case V_OBJECT:
    case V_KWARGS:
        if (id == CF_ITEMS)
            return items_of(c, v.u.m);
        if (id == CF_LENGTH)
            return v_num(V_INT, v.u.m->n);
        return object_builtin(c, &v, f, NULL);
    case V_BOOL:
        switch (id) {
        case CF_BOOL: return v;
        case CF_INT: return v_num(V_INT, v.u.num);
        case CF_FLOAT: return v_num(V_FLOAT, v.u.num);
        case CF_STRING: return v_lit(v.u.num ? "true" : "false");
        }
        unknown(c, "BooleanValue", f);
    default:
        chat_fail(c, "Cannot apply filter \"%.*s\" to type: %s", (int)f.b,
                  (const char *)c->pool + f.a, chat_type_name(&v));
    }
}

static struct val tojson_called(struct ctx *c, const struct val *v, struct args *a)
{
    struct json_opts o = {0, 0, NULL, NULL};
    const struct val *ind = kwarg(a, "indent"), *asc = kwarg(a, "ensure_ascii"),
                     *sk = kwarg(a, "sort_keys"), *sep = kwarg(a, "separators");
    if (ind && ind->k != V_INT && ind->k != V_NULL)
        chat_fail(c, "If set, indent must be a number");
    if (ind && ind->k == V_INT) {
        if (ind->u.num < 0 || ind->u.num > 1024)
            chat_fail(c, "Invalid count value: %g", ind->u.num);
        o.indent = (int)ind->u.num;
    }
    if (asc && asc->k != V_BOOL)
        chat_fail(c, "If set, ensure_ascii must be a boolean");
    o.ensure_ascii = asc && asc->u.num;
    if (sk && sk->k != V_BOOL)
        chat_fail(c, "If set, sort_keys must be a boolean");
    if (sk && sk->u.num)
        chat_fail(c, "tojson(sort_keys=true) is not supported by nibble (locale collation)");
    if (sep && (sep->k == V_ARRAY || sep->k == V_TUPLE)) {
        if (sep->n != 2 || sep->u.a[0].k != V_STR || sep->u.a[1].k != V_STR)
            chat_fail(c, "separators must be a tuple of two strings");
        o.item_sep = &sep->u.a[0];
        o.key_sep = &sep->u.a[1];
    } else if (sep && sep->k != V_NULL) {
        chat_fail(c, "If set, separators must be a tuple of two strings");
    }
    return to_json(c, v, &o);
}

struct val chat_filter(struct ctx *c, struct val v, struct nib_chat_node f, uint32_t first,
                       uint32_t nargs, struct scope *sc)
{
    chat_step(c, 1);
    if (!(f.sub & CF_CALLED))
        return filter_plain(c, v, f);
    int id = f.sub & 0x7F;
    if ((v.k == V_ARRAY || v.k == V_TUPLE) && (id == CF_SELECTATTR || id == CF_REJECTATTR))
        return select_attr(c, &v, f, first, nargs, sc, id == CF_SELECTATTR);
    struct args a = eval_args(c, first, nargs, sc);
    switch (id) {
    case CF_TOJSON: return tojson_called(c, &v, &a);
    case CF_JOIN: {
        if (v.k != V_STR && v.k != V_ARRAY && v.k != V_TUPLE)
            chat_fail(c, "Cannot apply filter \"join\" to type: %s", chat_type_name(&v));
        struct val sep = arg_or(&a, 0, "separator", v_lit(""));
        if (sep.k != V_STR)
            chat_fail(c, "separator must be a string");
        return join(c, &v, &sep);
    }
    case CF_INT:
    case CF_FLOAT: {
        int is_int = id == CF_INT;
        struct val dflt = arg_or(&a, 0, "default", v_num(is_int ? V_INT : V_FLOAT, 0));
        if (v.k == V_STR) {
            double d = is_int ? js_parse_int(&v) : js_parse_float(&v);
            return isnan(d) ? dflt : v_num(is_int ? V_INT : V_FLOAT, d);
        }
        if (v.k == V_INT || v.k == V_FLOAT)
            return v;
        if (v.k == V_BOOL)
            return v_num(is_int ? V_INT : V_FLOAT, v.u.num);
        chat_fail(c, "Cannot apply filter \"%s\" to type: %s", is_int ? "int" : "float",
                  chat_type_name(&v));
    }
    case CF_DEFAULT: {
        uint32_t npos = a.n && a.v[a.n - 1].k == V_KWARGS ? a.n - 1 : a.n;
        struct val dflt = npos > 0 ? a.v[0] : v_lit("");
        struct val boolean = arg_or(&a, 1, "boolean", v_bool(0));
        if (boolean.k != V_BOOL)
            chat_fail(c, "`default` filter flag must be a boolean");
        if (v.k == V_UNDEF || (boolean.u.num && !truthy(&v)))
            return dflt;
        return v;
    }
    }
    switch (v.k) {
    case V_ARRAY:
    case V_TUPLE:
        if (id == CF_SORT) {
            struct val rev = arg_or(&a, 0, "reverse", v_bool(0));
            if (rev.k != V_BOOL)
                chat_fail(c, "reverse must be a boolean");
            struct val cs = arg_or(&a, 1, "case_sensitive", v_bool(0));
            if (cs.k != V_BOOL)
                chat_fail(c, "case_sensitive must be a boolean");
            struct val at = arg_or(&a, 2, "attribute", v_null());
            if (at.k != V_STR && at.k != V_INT && at.k != V_NULL)
                chat_fail(c, "attribute must be a string, integer, or null");
            if (at.k == V_INT)
                at = value_string(c, &at, SM_JS);
            struct val r = copy_array(c, &v);
            struct sort_key k = {at.k == V_STR ? &at : NULL, -1, cs.u.num != 0, rev.u.num != 0};
            sort_vals(c, r.u.a, r.n, &k);
            return r;
        }
        if (id == CF_MAP)
            return map_attr(c, &v, &a);
        unknown(c, "ArrayValue", f);
    case V_STR:
        if (id == CF_INDENT) {
            struct val w = arg_or(&a, 0, "width", v_num(V_INT, 4));
            if (w.k != V_INT)
                chat_fail(c, "width must be a number");
            struct val fi = arg_or(&a, 1, "first", v_bool(0));
            struct val bl = arg_or(&a, 2, "blank", v_bool(0));
            return indent(c, &v, w.u.num, raw_truthy(&fi), raw_truthy(&bl));
        }
        if (id == CF_REPLACE)
            return replace(c, &v, &a);
        unknown(c, "StringValue", f);
    case V_OBJECT:
    case V_KWARGS: return object_builtin(c, &v, f, &a);
    default:
        chat_fail(c, "Cannot apply filter \"%.*s\" to type: %s", (int)f.b,
                  (const char *)c->pool + f.a, chat_type_name(&v));
    }
}

/* ---- strftime_now (utils.ts strftime, en-US month names, UTC) ---- */

struct val chat_strftime(struct ctx *c, const struct val *fmt)
{
    static const char *const months[] = {"January",   "February", "March",    "April",
                                         "May",       "June",     "July",     "August",
                                         "September", "October",  "November", "December"};
    if (!fmt || fmt->k != V_STR)
        chat_fail(c, "strftime_now() needs a format string");
    int64_t days = c->now_s / 86400, secs = c->now_s % 86400;
    if (secs < 0) {
        secs += 86400;
        days--;
    }
    /* civil date from days since 1970-01-01 (proleptic Gregorian) */
    int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    size_t mark = c->olen;
    char buf[32];
    for (uint32_t i = 0; i < fmt->n; i++) {
        uint8_t ch = fmt->u.s.p[i];
        const char *put = NULL;
        if (ch == '%' && i + 1 < fmt->n) {
            switch (fmt->u.s.p[i + 1]) {
            case 'Y':
                snprintf(buf, sizeof buf, "%lld", (long long)y);
                put = buf;
                break;
            case 'm':
                snprintf(buf, sizeof buf, "%02lld", (long long)m);
                put = buf;
                break;
            case 'd':
                snprintf(buf, sizeof buf, "%02lld", (long long)d);
                put = buf;
                break;
            case 'b':
                snprintf(buf, sizeof buf, "%.3s", months[m - 1]);
                put = buf;
                break;
            case 'B': put = months[m - 1]; break;
            case 'H':
                snprintf(buf, sizeof buf, "%02lld", (long long)(secs / 3600));
                put = buf;
                break;
            case 'M':
                snprintf(buf, sizeof buf, "%02lld", (long long)(secs / 60 % 60));
                put = buf;
                break;
            case '%': put = "%"; break;
            }
        }
        if (put) {
            sink_lit(c, put);
            i++;
        } else {
            sink_byte(c, ch, str_taint(fmt, i));
        }
    }
    return sink_take(c, mark);
}
