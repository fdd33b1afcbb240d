/* Values of the chat template evaluator: the arena, the output sink, and
 * JavaScript's conversions (numbers to text, text to numbers, equality,
 * JSON), as @huggingface/jinja gets them from its JavaScript host. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/chat/chat_internal.h"

_Noreturn void chat_fail(struct ctx *c, const char *fmt, ...)
{
    if (c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    longjmp(c->jb, 1);
}

void *chat_alloc(struct ctx *c, size_t n)
{
    size_t at = (c->used + 7) & ~(size_t)7;
    if (n > c->cap || at > c->cap - n)
        chat_fail(c, "chat template needs more than %zu bytes of scratch", c->cap);
    c->used = at + n;
    memset(c->arena + at, 0, n);
    return c->arena + at;
}

void chat_step(struct ctx *c, uint64_t n)
{
    c->steps += n;
    if (c->steps > c->max_steps)
        chat_fail(c, "chat template exceeds its work bound (%llu steps)",
                  (unsigned long long)c->max_steps);
}

void chat_enter(struct ctx *c)
{
    if (++c->depth > CHAT_MAX_RECURSION)
        chat_fail(c, "chat template nests deeper than %u (recursive macro?)", CHAT_MAX_RECURSION);
}

void chat_leave(struct ctx *c)
{
    c->depth--;
}

const char *chat_type_name(const struct val *v)
{
    static const char *const names[] = {
        "UndefinedValue", "NullValue",     "BooleanValue", "IntegerValue", "FloatValue",
        "StringValue",    "ArrayValue",    "TupleValue",   "ObjectValue",  "KeywordArgumentsValue",
        "NamespaceValue", "FunctionValue", "undefined",
    };
    return v->k < sizeof names / sizeof names[0] ? names[v->k] : "?";
}

/* ---- sink ---- */

static void sink_room(struct ctx *c, size_t n)
{
    if (n > c->ocap - c->olen)
        chat_fail(c, "chat template output exceeds %zu bytes", c->ocap);
}

void sink_put(struct ctx *c, const uint8_t *p, const uint8_t *t, uint8_t tu, size_t n)
{
    sink_room(c, n);
    if (n) {
        memcpy(c->out + c->olen, p, n);
        if (t)
            memcpy(c->taint + c->olen, t, n);
        else
            memset(c->taint + c->olen, tu, n);
    }
    c->olen += n;
    chat_step(c, n >> 6);
}

void sink_lit(struct ctx *c, const char *s)
{
    sink_put(c, (const uint8_t *)s, NULL, 0, strlen(s));
}

void sink_byte(struct ctx *c, uint8_t b, uint8_t taint)
{
    sink_room(c, 1);
    c->out[c->olen] = b;
    c->taint[c->olen++] = taint;
}

void sink_str(struct ctx *c, const struct val *s)
{
    sink_put(c, s->u.s.p, s->u.s.t, s->tu, s->n);
}

struct val sink_take(struct ctx *c, size_t mark)
{
    uint32_t n = (uint32_t)(c->olen - mark);
    const uint8_t *t = c->taint + mark;
    int uniform = 1;
    for (uint32_t i = 1; i < n && uniform; i++)
        uniform = t[i] == t[0];
    uint8_t *p = chat_alloc(c, n + (uniform ? 0 : n));
    memcpy(p, c->out + mark, n);
    struct val v = v_strn(p, NULL, n ? t[0] : 0, n);
    if (!uniform) {
        memcpy(p + n, t, n);
        v.u.s.t = p + n;
    }
    c->olen = mark;
    return v;
}

/* ---- constructors ---- */

struct val v_undef(void)
{
    return (struct val){.k = V_UNDEF};
}
struct val v_null(void)
{
    return (struct val){.k = V_NULL};
}
struct val v_bool(int b)
{
    return (struct val){.k = V_BOOL, .u.num = b ? 1 : 0};
}
struct val v_num(int kind, double d)
{
    return (struct val){.k = (uint8_t)kind, .u.num = d};
}

struct val v_strn(const uint8_t *p, const uint8_t *t, uint8_t tu, uint32_t n)
{
    struct val v = {.k = V_STR, .tu = tu, .n = n};
    v.u.s.p = p;
    v.u.s.t = t;
    return v;
}

struct val v_lit(const char *s)
{
    return v_strn((const uint8_t *)s, NULL, 0, (uint32_t)strlen(s));
}

struct val v_array(struct ctx *c, uint32_t n, int kind)
{
    /* at least one slot, so that every array has its own identity */
    struct val v = {.k = (uint8_t)kind, .n = n};
    v.u.a = chat_alloc(c, (n ? n : 1) * sizeof(struct val));
    return v;
}

struct val v_map(struct ctx *c, int kind)
{
    struct val v = {.k = (uint8_t)kind};
    v.u.m = chat_alloc(c, sizeof(struct map));
    return v;
}

const struct val *map_get(const struct map *m, const uint8_t *key, uint32_t len)
{
    for (const struct ment *e = m->head; e; e = e->next)
        if (e->key.n == len && !memcmp(e->key.u.s.p, key, len))
            return &e->v;
    return NULL;
}

void map_set(struct ctx *c, struct map *m, struct val key, struct val v)
{
    for (struct ment *e = m->head; e; e = e->next)
        if (e->key.n == key.n && !memcmp(e->key.u.s.p, key.u.s.p, key.n)) {
            e->v = v;
            return;
        }
    struct ment *e = chat_alloc(c, sizeof *e);
    e->key = key;
    e->v = v;
    if (m->tail)
        m->tail->next = e;
    else
        m->head = e;
    m->tail = e;
    m->n++;
}

struct val str_slice(const struct val *s, uint32_t from, uint32_t to)
{
    struct val v = *s;
    v.u.s.p += from;
    if (v.u.s.t)
        v.u.s.t += from;
    v.n = to - from;
    return v;
}

int str_eq(const struct val *a, const struct val *b)
{
    return a->n == b->n && (a->n == 0 || !memcmp(a->u.s.p, b->u.s.p, a->n));
}

int str_eq_lit(const struct val *a, const char *lit)
{
    size_t n = strlen(lit);
    return a->n == n && !memcmp(a->u.s.p, lit, n);
}

/* ---- UTF-8 and UTF-16 ---- */

uint32_t u8_next(const uint8_t *p, uint32_t n, uint32_t i, uint32_t *cp)
{
    uint8_t b = p[i];
    uint32_t left = n - i;
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    uint32_t len = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b < 0xE0 ? 2 : 0;
    if (len && len <= left) {
        uint32_t v = b & (0x7F >> len);
        uint32_t k;
        for (k = 1; k < len && (p[i + k] & 0xC0) == 0x80; k++)
            v = v << 6 | (p[i + k] & 0x3F);
        if (k == len && !(len == 3 && (v < 0x800 || (v >= 0xD800 && v < 0xE000))) &&
            !(len == 4 && (v < 0x10000 || v > 0x10FFFF))) {
            *cp = v;
            return len;
        }
    }
    /* an ill-formed byte stands for itself (as U+FFFD would in JavaScript) */
    *cp = 0xFFFD;
    return 1;
}

uint32_t u16_len(const struct val *s)
{
    uint32_t n = 0, cp;
    for (uint32_t i = 0; i < s->n; i += u8_next(s->u.s.p, s->n, i, &cp), n++)
        ;
    /* a second pass only for the astral characters */
    for (uint32_t i = 0; i < s->n;) {
        uint32_t k = u8_next(s->u.s.p, s->n, i, &cp);
        n += cp >= 0x10000;
        i += k;
    }
    return n;
}

/* ECMAScript WhiteSpace and LineTerminator: what trim() and \s take. */
int js_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

/* JavaScript's < on strings: by UTF-16 code units. */
int u16_cmp(const struct val *a, const struct val *b)
{
    uint32_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        uint32_t x, y;
        i += u8_next(a->u.s.p, a->n, i, &x);
        j += u8_next(b->u.s.p, b->n, j, &y);
        if (x == y)
            continue;
        uint32_t ux = x < 0x10000 ? x : 0xD800 + ((x - 0x10000) >> 10);
        uint32_t uy = y < 0x10000 ? y : 0xD800 + ((y - 0x10000) >> 10);
        if (ux == uy) {
            ux = 0xDC00 + ((x - 0x10000) & 0x3FF);
            uy = 0xDC00 + ((y - 0x10000) & 0x3FF);
        }
        return ux < uy ? -1 : 1;
    }
    return (i < a->n) - (j < b->n);
}

/* ---- truthiness and equality ---- */

int truthy(const struct val *v)
{
    switch (v->k) {
    case V_UNDEF:
    case V_NULL: return 0;
    case V_BOOL:
    case V_INT:
    case V_FLOAT: return v->u.num != 0 && !isnan(v->u.num);
    case V_STR: return v->n > 0;
    case V_ARRAY:
    case V_TUPLE: return v->n > 0;
    case V_OBJECT:
    case V_KWARGS: return v->u.m->n > 0;
    default: return 1; /* namespaces and functions */
    }
}

static int is_container(const struct val *v)
{
    return v->k >= V_ARRAY && v->k <= V_FUNC;
}

static int same_ref(const struct val *a, const struct val *b)
{
    if (a->k == V_FUNC || b->k == V_FUNC)
        return a->k == b->k && a->n == b->n && a->u.f.self == b->u.f.self &&
               a->u.f.node == b->u.f.node;
    int aa = a->k == V_ARRAY || a->k == V_TUPLE, ba = b->k == V_ARRAY || b->k == V_TUPLE;
    if (aa != ba)
        return 0;
    return aa ? a->u.a == b->u.a : a->u.m == b->u.m;
}

int strict_eq(const struct val *a, const struct val *b)
{
    int an = a->k == V_INT || a->k == V_FLOAT, bn = b->k == V_INT || b->k == V_FLOAT;
    if (an || bn)
        return an && bn && a->u.num == b->u.num;
    if (is_container(a) || is_container(b))
        return is_container(a) && is_container(b) && same_ref(a, b);
    if (a->k != b->k)
        return 0;
    if (a->k == V_STR)
        return str_eq(a, b);
    if (a->k == V_BOOL)
        return a->u.num == b->u.num;
    return 1; /* both null or both undefined */
}

int same_value_zero(const struct val *a, const struct val *b)
{
    if ((a->k == V_INT || a->k == V_FLOAT) && (b->k == V_INT || b->k == V_FLOAT) &&
        isnan(a->u.num) && isnan(b->u.num))
        return 1;
    return strict_eq(a, b);
}

/* JavaScript's == on the values' .value. */
int loose_eq(struct ctx *c, const struct val *a, const struct val *b)
{
    int an = a->k <= V_NULL, bn = b->k <= V_NULL;
    if (an || bn)
        return an && bn;
    if (is_container(a) && is_container(b))
        return same_ref(a, b);
    if (is_container(a) || is_container(b)) {
        /* ToPrimitive: an array joins its items, a Map is "[object Map]" */
        const struct val *o = is_container(a) ? a : b, *p = is_container(a) ? b : a;
        struct val s = value_string(c, o, SM_JS);
        return loose_eq(c, &s, p);
    }
    if (a->k == V_STR && b->k == V_STR)
        return str_eq(a, b);
    double x = a->k == V_STR ? js_to_number(a) : a->u.num;
    double y = b->k == V_STR ? js_to_number(b) : b->u.num;
    return x == y;
}

/* ---- numbers ---- */

/* Shortest digits that read back as d (d > 0, finite): digits and the
 * decimal exponent n such that d = 0.DIGITS x 10^n. */
static int shortest(double d, char *digits, int *n)
{
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, d);
        if (strtod(buf, NULL) == d || p == 17)
            break;
    }
    int k = 0;
    const char *q = buf;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[k++] = *q;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = 0;
    *n = atoi(q + 1) + 1;
    return k;
}

size_t js_num_str(double d, char *buf)
{
    if (isnan(d))
        return (size_t)sprintf(buf, "NaN");
    if (isinf(d))
        return (size_t)sprintf(buf, d < 0 ? "-Infinity" : "Infinity");
    if (d == 0)
        return (size_t)sprintf(buf, "0");
    size_t o = 0;
    if (d < 0) {
        buf[o++] = '-';
        d = -d;
    }
    char dg[24];
    int n, k = shortest(d, dg, &n);
    if (k <= n && n <= 21) {
        memcpy(buf + o, dg, (size_t)k);
        o += (size_t)k;
        for (int i = k; i < n; i++)
            buf[o++] = '0';
    } else if (0 < n && n <= 21) {
        memcpy(buf + o, dg, (size_t)n);
        o += (size_t)n;
        buf[o++] = '.';
        memcpy(buf + o, dg + n, (size_t)(k - n));
        o += (size_t)(k - n);
    } else if (-6 < n && n <= 0) {
        buf[o++] = '0';
        buf[o++] = '.';
        for (int i = 0; i < -n; i++)
            buf[o++] = '0';
        memcpy(buf + o, dg, (size_t)k);
        o += (size_t)k;
    } else {
        buf[o++] = dg[0];
        if (k > 1) {
            buf[o++] = '.';
            memcpy(buf + o, dg + 1, (size_t)(k - 1));
            o += (size_t)(k - 1);
        }
        o += (size_t)sprintf(buf + o, "e%c%d", n - 1 >= 0 ? '+' : '-', abs(n - 1));
    }
    buf[o] = 0;
    return o;
}

size_t js_float_str(double d, char *buf)
{
    if (d == 0 && signbit(d))
        return (size_t)sprintf(buf, "-0.0");
    if (isfinite(d) && d == floor(d)) {
        if (fabs(d) >= 1e21)
            return js_num_str(d, buf);
        return (size_t)sprintf(buf, "%.1f", d);
    }
    return js_num_str(d, buf);
}

/* A StrDecimalLiteral (sign, digits, point, exponent, or Infinity) at p:
 * its length, 0 when none. */
static size_t decimal_prefix(const char *p, size_t n, int sign_ok)
{
    size_t i = 0;
    if (sign_ok && i < n && (p[i] == '+' || p[i] == '-'))
        i++;
    if (n - i >= 8 && !memcmp(p + i, "Infinity", 8))
        return i + 8;
    size_t d0 = i;
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++;
    size_t int_digits = i - d0, frac_digits = 0;
    if (i < n && p[i] == '.') {
        size_t f = i + 1;
        while (f < n && p[f] >= '0' && p[f] <= '9')
            f++;
        frac_digits = f - i - 1;
        if (int_digits || frac_digits)
            i = f;
    }
    if (!int_digits && !frac_digits)
        return 0;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        size_t e = i + 1;
        if (e < n && (p[e] == '+' || p[e] == '-'))
            e++;
        size_t e0 = e;
        while (e < n && p[e] >= '0' && p[e] <= '9')
            e++;
        if (e > e0)
            i = e;
    }
    return i;
}

static double parse_prefix(const char *p, size_t n)
{
    char buf[400];
    if (n >= sizeof buf)
        n = sizeof buf - 1; /* digits past this change nothing a double holds */
    memcpy(buf, p, n);
    buf[n] = 0;
    const char *q = buf;
    int neg = *q == '-';
    if (*q == '+' || *q == '-')
        q++;
    if (!strcmp(q, "Infinity"))
        return neg ? -INFINITY : INFINITY;
    return strtod(buf, NULL);
}

static void trim_js(const struct val *s, uint32_t *from, uint32_t *to)
{
    uint32_t i = 0, cp, k;
    while (i < s->n && (k = u8_next(s->u.s.p, s->n, i, &cp), js_space(cp)))
        i += k;
    uint32_t j = i;
    for (uint32_t p = i; p < s->n; p += k) {
        k = u8_next(s->u.s.p, s->n, p, &cp);
        if (!js_space(cp))
            j = p + k;
    }
    *from = i;
    *to = j;
}

struct val str_trim(const struct val *s, int left, int right)
{
    uint32_t a, b;
    trim_js(s, &a, &b);
    if (a == s->n) /* only whitespace */
        return str_slice(s, 0, 0);
    if (!left)
        a = 0;
    if (!right)
        b = s->n;
    return str_slice(s, a, b);
}

double js_to_number(const struct val *s)
{
    uint32_t a, b;
    trim_js(s, &a, &b);
    const char *p = (const char *)s->u.s.p + a;
    size_t n = b - a;
    if (n == 0)
        return 0;
    if (n > 2 && p[0] == '0' && (p[1] | 0x20) != 0 && strchr("xob", p[1] | 0x20)) {
        int base = (p[1] | 0x20) == 'x' ? 16 : (p[1] | 0x20) == 'o' ? 8 : 2;
        double v = 0;
        for (size_t i = 2; i < n; i++) {
            int d = p[i] >= '0' && p[i] <= '9'                     ? p[i] - '0'
                    : (p[i] | 0x20) >= 'a' && (p[i] | 0x20) <= 'f' ? (p[i] | 0x20) - 'a' + 10
                                                                   : 99;
            if (d >= base)
                return NAN;
            v = v * base + d;
        }
        return v;
    }
    size_t k = decimal_prefix(p, n, 1);
    return k == n ? parse_prefix(p, n) : NAN;
}

double js_parse_int(const struct val *s)
{
    uint32_t a, b;
    trim_js(s, &a, &b);
    const char *p = (const char *)s->u.s.p + a;
    size_t n = s->n - a, i = 0;
    if (i < n && (p[i] == '+' || p[i] == '-'))
        i++;
    size_t d0 = i;
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++;
    if (i == d0)
        return NAN;
    return parse_prefix(p, i);
}

double js_parse_float(const struct val *s)
{
    uint32_t a, b;
    trim_js(s, &a, &b);
    const char *p = (const char *)s->u.s.p + a;
    size_t k = decimal_prefix(p, s->n - a, 1);
    return k ? parse_prefix(p, k) : NAN;
}

/* ---- text of values ---- */

static void put_num(struct ctx *c, const struct val *v, int mode)
{
    char buf[48];
    size_t n = v->k == V_FLOAT && mode == SM_PRINT ? js_float_str(v->u.num, buf)
                                                   : js_num_str(v->u.num, buf);
    sink_put(c, (const uint8_t *)buf, NULL, 0, n);
}

void put_value(struct ctx *c, const struct val *v, int mode)
{
    switch (v->k) {
    case V_UNDEF:
        if (mode != SM_JOIN)
            sink_lit(c, "undefined");
        return;
    case V_NULL:
        if (mode != SM_JOIN)
            sink_lit(c, "null");
        return;
    case V_BOOL: sink_lit(c, v->u.num ? "true" : "false"); return;
    case V_INT:
    case V_FLOAT: put_num(c, v, mode); return;
    case V_STR: sink_str(c, v); return;
    case V_ARRAY:
    case V_TUPLE:
        if (mode == SM_PRINT) {
            put_json(c, v, NULL, 0, 0);
            return;
        }
        /* the JavaScript array of runtime values, joined by commas */
        chat_enter(c);
        for (uint32_t i = 0; i < v->n; i++) {
            if (i)
                sink_lit(c, ",");
            put_value(c, &v->u.a[i], SM_PRINT);
        }
        chat_leave(c);
        return;
    case V_OBJECT:
    case V_KWARGS:
    case V_NS:
        if (mode == SM_PRINT)
            put_json(c, v, NULL, 0, 0);
        else
            sink_lit(c, "[object Map]");
        return;
    default: chat_fail(c, "cannot convert a function to text");
    }
}

struct val value_string(struct ctx *c, const struct val *v, int mode)
{
    if (v->k == V_STR)
        return *v;
    size_t mark = c->olen;
    put_value(c, v, mode);
    return sink_take(c, mark);
}

/* JSON.stringify of a string; ensure_ascii escapes 0x7F and above. */
static void put_json_string(struct ctx *c, const struct val *s, int ascii)
{
    static const char hex[] = "0123456789abcdef";
    sink_lit(c, "\"");
    for (uint32_t i = 0; i < s->n;) {
        uint32_t cp, k = u8_next(s->u.s.p, s->n, i, &cp);
        uint8_t t = str_taint(s, i);
        const char *esc = NULL;
        char buf[16];
        switch (cp) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (cp < 0x20 || (ascii && cp >= 0x7F)) {
                uint32_t units[2] = {cp, 0}, nu = 1;
                if (cp >= 0x10000) {
                    units[0] = 0xD800 + ((cp - 0x10000) >> 10);
                    units[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF);
                    nu = 2;
                }
                size_t o = 0;
                for (uint32_t u = 0; u < nu; u++) {
                    buf[o++] = '\\';
                    buf[o++] = 'u';
                    for (int sh = 12; sh >= 0; sh -= 4)
                        buf[o++] = hex[(units[u] >> sh) & 15];
                }
                buf[o] = 0;
                esc = buf;
            }
        }
        if (esc) {
            for (const char *q = esc; *q; q++)
                sink_byte(c, (uint8_t)*q, t);
        } else {
            sink_put(c, s->u.s.p + i, s->u.s.t ? s->u.s.t + i : NULL, s->tu, k);
        }
        i += k;
    }
    sink_lit(c, "\"");
}

static void put_pad(struct ctx *c, int indent, int depth)
{
    sink_lit(c, "\n");
    for (int i = 0; i < indent * depth; i++)
        sink_lit(c, " ");
}

void put_json(struct ctx *c, const struct val *v, const struct json_opts *o, int depth,
              int undef_null)
{
    static const struct json_opts none = {0, 0, NULL, NULL};
    if (!o)
        o = &none;
    char buf[48];
    switch (v->k) {
    case V_NULL: sink_lit(c, "null"); return;
    case V_UNDEF: sink_lit(c, undef_null ? "null" : "undefined"); return;
    case V_BOOL: sink_lit(c, v->u.num ? "true" : "false"); return;
    case V_INT:
    case V_FLOAT:
        if (!isfinite(v->u.num)) {
            sink_lit(c, "null");
            return;
        }
        sink_put(c, (const uint8_t *)buf, NULL, 0, js_num_str(v->u.num, buf));
        return;
    case V_STR: put_json_string(c, v, o->ensure_ascii); return;
    case V_FUNC: chat_fail(c, "Cannot convert to JSON: FunctionValue");
    default: break;
    }
    chat_enter(c);
    chat_step(c, 1);
    int arr = v->k == V_ARRAY || v->k == V_TUPLE;
    uint32_t count = arr ? v->n : v->u.m->n;
    sink_lit(c, arr ? "[" : "{");
    const struct ment *e = arr ? NULL : v->u.m->head;
    for (uint32_t i = 0; i < count; i++) {
        if (i) {
            if (o->item_sep)
                sink_str(c, o->item_sep);
            else
                sink_lit(c, o->indent ? "," : ", ");
        }
        if (o->indent)
            put_pad(c, o->indent, depth + 1);
        if (arr) {
            put_json(c, &v->u.a[i], o, depth + 1, undef_null);
            continue;
        }
        put_json_string(c, &e->key, o->ensure_ascii);
        if (o->key_sep)
            sink_str(c, o->key_sep);
        else
            sink_lit(c, ": ");
        put_json(c, &e->v, o, depth + 1, undef_null);
        e = e->next;
    }
    if (o->indent && count)
        put_pad(c, o->indent, depth);
    sink_lit(c, arr ? "]" : "}");
    chat_leave(c);
}
