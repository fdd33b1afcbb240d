/* Chat template compiler: Jinja text -> the program of rt/chat/chat_prog.h.
 * The lexer and parser follow @huggingface/jinja (the engine Hugging
 * Face's JavaScript library renders chat templates with) rule for rule:
 * the same preprocessing (trim_blocks and lstrip_blocks on, one trailing
 * newline dropped, the transformers {% generation %} tag removed), the same
 * tokens and the same operator precedence, so that nibble's renderer gives
 * the same text. What nibble cannot run exactly is refused here, with the
 * line. */
#include "tools/compiler/chat_compile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/chat/chat_prog.h"

/* ---- errors ---- */

struct cc {
    const char *src; /* the template as given (for line numbers) */
    size_t src_len;
    char *buf;     /* preprocessed text */
    uint32_t *org; /* origin offset of each byte of buf */
    size_t len;
    char *err;
    size_t errlen;
    int failed;
};

static uint32_t line_of(const struct cc *c, uint32_t org)
{
    uint32_t line = 1;
    for (size_t i = 0; i < org && i < c->src_len; i++)
        line += c->src[i] == '\n';
    return line;
}

static void fail_at(struct cc *c, uint32_t org, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_at(struct cc *c, uint32_t org, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->errlen)
        snprintf(c->err, c->errlen, "chat template line %u: %s", (unsigned)line_of(c, org), msg);
}

static void *xalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "nib: out of memory\n");
        abort();
    }
    return p;
}

/* ---- JavaScript's \s (ECMAScript WhiteSpace and LineTerminator: the
 * lexer's notion of whitespace) ---- */

static uint32_t utf8_at(const char *s, size_t n, size_t i, size_t *adv)
{
    const uint8_t *p = (const uint8_t *)s + i;
    size_t left = n - i;
    if (p[0] < 0x80 || left < 2) {
        *adv = 1;
        return p[0];
    }
    if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
        *adv = 2;
        return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    }
    if ((p[0] & 0xF0) == 0xE0 && left >= 3 && (p[1] & 0xC0) == 0x80 && (p[2] & 0xC0) == 0x80) {
        *adv = 3;
        return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    }
    *adv = 1;
    return p[0];
}

static int js_space_cp(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

/* Length of the whitespace character at i, or 0. */
static size_t space_at(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return 0;
    size_t adv;
    uint32_t c = utf8_at(s, n, i, &adv);
    return js_space_cp(c) ? adv : 0;
}

/* Length of the whitespace character ending at i (exclusive), or 0. */
static size_t space_before(const char *s, size_t lo, size_t i)
{
    for (size_t k = 1; k <= 3 && k <= i - lo; k++)
        if (space_at(s, i, i - k) == k)
            return k;
    return 0;
}

/* ---- preprocessing (index.ts and lexer.ts preprocess()) ---- */

struct text {
    char *b;
    uint32_t *o;
    size_t n;
};

static void put(struct text *t, char ch, uint32_t org)
{
    t->b[t->n] = ch;
    t->o[t->n++] = org;
}

static struct text text_new(size_t cap)
{
    struct text t = {xalloc(cap + 1), xalloc((cap + 1) * sizeof(uint32_t)), 0};
    return t;
}

static int line_start(const struct text *t, size_t i)
{
    if (i == 0)
        return 1;
    char p = t->b[i - 1];
    if (p == '\n' || p == '\r')
        return 1;
    /* U+2028, U+2029 end a line for JavaScript's ^ too */
    return i >= 3 && (uint8_t)t->b[i - 3] == 0xE2 && (uint8_t)t->b[i - 2] == 0x80 &&
           ((uint8_t)t->b[i - 1] == 0xA8 || (uint8_t)t->b[i - 1] == 0xA9);
}

static int is_ident_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_';
}

/* {% generation %} / {% endgeneration %} at i: its end, and its dashes. */
static size_t generation_tag(const struct text *t, size_t i, int *lstrip, int *rstrip)
{
    const char *s = t->b;
    size_t n = t->n, k = i + 2, a;
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%')
        return 0;
    *lstrip = k < n && s[k] == '-';
    k += *lstrip;
    while ((a = space_at(s, n, k)))
        k += a;
    if (k + 3 <= n && !memcmp(s + k, "end", 3))
        k += 3;
    if (k + 10 > n || memcmp(s + k, "generation", 10))
        return 0;
    k += 10;
    while ((a = space_at(s, n, k)))
        k += a;
    *rstrip = k < n && s[k] == '-';
    k += *rstrip;
    if (k + 2 > n || s[k] != '%' || s[k + 1] != '}')
        return 0;
    return k + 2;
}

static struct text preprocess(const char *src, size_t len)
{
    struct text a = text_new(len), b;
    for (size_t i = 0; i < len; i++)
        put(&a, src[i], (uint32_t)i);
    if (a.n && a.b[a.n - 1] == '\n')
        a.n--;
    /* lstrip_blocks: /^[ \t]*({[#%-])/gm -> $1 */
    b = text_new(a.n);
    for (size_t i = 0; i < a.n;) {
        if (line_start(&a, i)) {
            size_t k = i;
            while (k < a.n && (a.b[k] == ' ' || a.b[k] == '\t'))
                k++;
            if (k + 1 < a.n && a.b[k] == '{' &&
                (a.b[k + 1] == '#' || a.b[k + 1] == '%' || a.b[k + 1] == '-')) {
                put(&b, a.b[k], a.o[k]);
                put(&b, a.b[k + 1], a.o[k + 1]);
                i = k + 2;
                continue;
            }
        }
        put(&b, a.b[i], a.o[i]);
        i++;
    }
    /* trim_blocks: /([#%-]})\n/g -> $1 */
    a.n = 0;
    for (size_t i = 0; i < b.n;) {
        if (i + 2 < b.n && (b.b[i] == '#' || b.b[i] == '%' || b.b[i] == '-') && b.b[i + 1] == '}' &&
            b.b[i + 2] == '\n') {
            put(&a, b.b[i], b.o[i]);
            put(&a, b.b[i + 1], b.o[i + 1]);
            i += 3;
            continue;
        }
        put(&a, b.b[i], b.o[i]);
        i++;
    }
    /* /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs: the tag goes, the
     * whitespace around it stays unless the tag's dash says otherwise */
    b.n = 0;
    size_t last_end = 0;
    for (size_t i = 0; i < a.n;) {
        int ls, rs;
        size_t e = a.b[i] == '{' ? generation_tag(&a, i, &ls, &rs) : 0;
        if (!e) {
            put(&b, a.b[i], a.o[i]);
            i++;
            continue;
        }
        if (ls) {
            size_t k = i, w;
            while (k > last_end && (w = space_before(a.b, last_end, k)))
                k -= w;
            b.n -= i - k;
        }
        size_t f = e, w;
        while ((w = space_at(a.b, a.n, f)))
            f += w;
        if (!rs)
            for (size_t k = e; k < f; k++)
                put(&b, a.b[k], a.o[k]);
        i = last_end = f;
    }
    free(a.b);
    free(a.o);
    b.b[b.n] = 0;
    return b;
}

/* ---- lexer (lexer.ts tokenize()) ---- */

enum tok_type {
    T_TEXT = 1,
    T_NUM,
    T_STR,
    T_IDENT,
    T_EQUALS,
    T_LPAREN,
    T_RPAREN,
    T_OPEN_STMT,
    T_CLOSE_STMT,
    T_OPEN_EXPR,
    T_CLOSE_EXPR,
    T_LSQUARE,
    T_RSQUARE,
    T_LCURLY,
    T_RCURLY,
    T_COMMA,
    T_DOT,
    T_COLON,
    T_PIPE,
    T_ADD, /* + - ~ */
    T_MUL, /* * / // % */
    T_POW,
    T_CMP,
    T_UNARY,
    T_COMMENT,
};

struct tok {
    int type;
    char *v; /* value (owned), NUL-terminated */
    size_t n;
    uint32_t org;
};

struct lexer {
    struct cc *c;
    struct tok *t;
    size_t nt, cap;
};

static void push_tok(struct lexer *L, int type, const char *v, size_t n, uint32_t org)
{
    if (L->nt == L->cap) {
        L->cap = L->cap ? L->cap * 2 : 256;
        L->t = realloc(L->t, L->cap * sizeof *L->t);
        if (!L->t)
            abort();
    }
    struct tok *k = &L->t[L->nt++];
    k->type = type;
    k->v = xalloc(n + 1);
    memcpy(k->v, v, n);
    k->n = n;
    k->org = org;
}

static const struct {
    const char *s;
    int type;
} mapping[] = {
    {"{%", T_OPEN_STMT}, {"%}", T_CLOSE_STMT}, {"{{", T_OPEN_EXPR}, {"}}", T_CLOSE_EXPR},
    {"(", T_LPAREN},     {")", T_RPAREN},      {"{", T_LCURLY},     {"}", T_RCURLY},
    {"[", T_LSQUARE},    {"]", T_RSQUARE},     {",", T_COMMA},      {".", T_DOT},
    {":", T_COLON},      {"|", T_PIPE},        {"<=", T_CMP},       {">=", T_CMP},
    {"==", T_CMP},       {"!=", T_CMP},        {"<", T_CMP},        {">", T_CMP},
    {"+", T_ADD},        {"-", T_ADD},         {"~", T_ADD},        {"**", T_POW},
    {"*", T_MUL},        {"//", T_MUL},        {"/", T_MUL},        {"%", T_MUL},
    {"=", T_EQUALS},
};

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string literal from *pos (after the quote) to the closing quote, with
 * the escapes lexer.ts knows; 0 on error. */
static int lex_string(struct lexer *L, size_t *pos, char quote)
{
    struct cc *c = L->c;
    const char *s = c->buf;
    size_t n = c->len, i = *pos, o = 0;
    uint32_t org = c->org[i ? i - 1 : 0];
    char *out = xalloc(4 * (n - i) + 8);
    uint32_t hi = 0; /* a \u high surrogate waiting for its low half */
    for (;;) {
        if (i >= n) {
            fail_at(c, org, "unterminated string literal");
            free(out);
            return 0;
        }
        if (s[i] == quote)
            break;
        if (s[i] != '\\') {
            if (hi) {
                fail_at(c, c->org[i], "a \\u escape leaves half a surrogate pair");
                free(out);
                return 0;
            }
            out[o++] = s[i++];
            continue;
        }
        if (++i >= n) {
            fail_at(c, org, "unterminated string literal");
            free(out);
            return 0;
        }
        char e = s[i++];
        if (e == 'x' || e == 'u') {
            int w = e == 'x' ? 2 : 4;
            uint32_t v = 0;
            for (int k = 0; k < w; k++) {
                int h = i + (size_t)k < n ? hexval(s[i + k]) : -1;
                if (h < 0) {
                    fail_at(c, c->org[i - 1], "invalid hexadecimal escape sequence");
                    free(out);
                    return 0;
                }
                v = v << 4 | (uint32_t)h;
            }
            i += (size_t)w;
            if (v >= 0xD800 && v < 0xDC00 && !hi) {
                hi = v;
                continue;
            }
            if (v >= 0xDC00 && v < 0xE000 && hi) {
                v = 0x10000 + ((hi - 0xD800) << 10) + (v - 0xDC00);
                hi = 0;
            } else if (hi || (v >= 0xD800 && v < 0xE000)) {
                fail_at(c, c->org[i - 1], "a \\u escape leaves half a surrogate pair");
                free(out);
                return 0;
            }
            o += put_utf8(out + o, v);
            continue;
        }
        if (hi) {
            fail_at(c, c->org[i - 1], "a \\u escape leaves half a surrogate pair");
            free(out);
            return 0;
        }
        static const char from[] = "ntrbfv'\"\\", to[] = "\n\t\r\b\f\v'\"\\";
        const char *f = memchr(from, e, sizeof from - 1);
        if (!f) {
            fail_at(c, c->org[i - 1], "unexpected escaped character: %c", e);
            free(out);
            return 0;
        }
        out[o++] = to[f - from];
    }
    if (hi) {
        fail_at(c, c->org[i], "a \\u escape leaves half a surrogate pair");
        free(out);
        return 0;
    }
    push_tok(L, T_STR, out, o, org);
    free(out);
    *pos = i + 1;
    return 1;
}

static int last_type(const struct lexer *L)
{
    return L->nt ? L->t[L->nt - 1].type : 0;
}

static void strip_trailing_ws(struct lexer *L)
{
    if (last_type(L) != T_TEXT)
        return;
    struct tok *k = &L->t[L->nt - 1];
    size_t w;
    while (k->n && (w = space_before(k->v, 0, k->n)))
        k->n -= w;
    k->v[k->n] = 0;
    if (!k->n) {
        free(k->v);
        L->nt--;
    }
}

static int tokenize(struct lexer *L)
{
    struct cc *c = L->c;
    const char *s = c->buf;
    size_t n = c->len, i = 0, w;
    int curly = 0;
    while (i < n && !c->failed) {
        int lt = last_type(L);
        if (lt == 0 || lt == T_CLOSE_STMT || lt == T_CLOSE_EXPR || lt == T_COMMENT) {
            size_t st = i;
            while (i < n && !(s[i] == '{' && i + 1 < n &&
                              (s[i + 1] == '%' || s[i + 1] == '{' || s[i + 1] == '#')))
                i++;
            if (i > st) {
                push_tok(L, T_TEXT, s + st, i - st, c->org[st]);
                continue;
            }
        }
        if (s[i] == '{' && i + 1 < n && s[i + 1] == '#') {
            uint32_t org = c->org[i];
            i += 2;
            int before = i < n && s[i] == '-';
            i += (size_t)before;
            size_t st = i;
            while (!(i + 1 < n && s[i] == '#' && s[i + 1] == '}')) {
                if (i + 2 >= n) {
                    fail_at(c, org, "missing end of comment tag");
                    return 0;
                }
                i++;
            }
            int after = i > st && s[i - 1] == '-';
            if (before)
                strip_trailing_ws(L);
            push_tok(L, T_COMMENT, "", 0, org);
            i += 2;
            if (after)
                while ((w = space_at(s, n, i)))
                    i += w;
            continue;
        }
        if (i + 3 <= n && !memcmp(s + i, "{%-", 3)) {
            strip_trailing_ws(L);
            push_tok(L, T_OPEN_STMT, "{%", 2, c->org[i]);
            i += 3;
            continue;
        }
        if (i + 3 <= n && !memcmp(s + i, "{{-", 3)) {
            strip_trailing_ws(L);
            push_tok(L, T_OPEN_EXPR, "{{", 2, c->org[i]);
            curly = 0;
            i += 3;
            continue;
        }
        while ((w = space_at(s, n, i)))
            i += w;
        if (i >= n) {
            fail_at(c, c->org[n - 1], "unexpected end of input");
            return 0;
        }
        if (i + 3 <= n && !memcmp(s + i, "-%}", 3)) {
            push_tok(L, T_CLOSE_STMT, "%}", 2, c->org[i]);
            i += 3;
            while ((w = space_at(s, n, i)))
                i += w;
            continue;
        }
        if (i + 3 <= n && !memcmp(s + i, "-}}", 3)) {
            push_tok(L, T_CLOSE_EXPR, "}}", 2, c->org[i]);
            i += 3;
            while ((w = space_at(s, n, i)))
                i += w;
            continue;
        }
        char ch = s[i];
        uint32_t org = c->org[i];
        if (ch == '-' || ch == '+') {
            lt = last_type(L);
            if (lt == T_TEXT || lt == 0) {
                fail_at(c, org, "unexpected character: %c", ch);
                return 0;
            }
            if (!(lt == T_IDENT || lt == T_NUM || lt == T_STR || lt == T_RPAREN ||
                  lt == T_RSQUARE)) {
                size_t st = i++;
                while (i < n && is_digit(s[i]))
                    i++;
                if (i > st + 1 && i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
                    i++;
                    while (i < n && is_digit(s[i]))
                        i++;
                }
                if (i >= n) {
                    fail_at(c, org, "unexpected end of input");
                    return 0;
                }
                push_tok(L, i > st + 1 ? T_NUM : T_UNARY, s + st, i - st, org);
                continue;
            }
        }
        int matched = 0;
        for (size_t m = 0; m < sizeof mapping / sizeof mapping[0]; m++) {
            size_t ml = strlen(mapping[m].s);
            if (mapping[m].type == T_CLOSE_EXPR && curly > 0)
                continue;
            if (i + ml <= n && !memcmp(s + i, mapping[m].s, ml)) {
                push_tok(L, mapping[m].type, s + i, ml, org);
                if (mapping[m].type == T_OPEN_EXPR)
                    curly = 0;
                else if (mapping[m].type == T_LCURLY)
                    curly++;
                else if (mapping[m].type == T_RCURLY)
                    curly--;
                i += ml;
                matched = 1;
                break;
            }
        }
        if (matched)
            continue;
        if (ch == '\'' || ch == '"') {
            i++;
            if (!lex_string(L, &i, ch))
                return 0;
            continue;
        }
        if (is_digit(ch) || is_ident_char(ch)) {
            size_t st = i;
            int num = is_digit(ch);
            while (i < n && (num ? is_digit(s[i]) : is_ident_char(s[i])))
                i++;
            if (num && last_type(L) != T_DOT && i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
                i++;
                while (i < n && is_digit(s[i]))
                    i++;
            }
            if (i >= n) {
                fail_at(c, org, "unexpected end of input");
                return 0;
            }
            push_tok(L, num ? T_NUM : T_IDENT, s + st, i - st, org);
            continue;
        }
        fail_at(c, org, "unexpected character: %c", ch);
        return 0;
    }
    return !c->failed;
}

/* ---- AST ---- */

struct ast {
    uint8_t op, sub;
    const char *s; /* string value or name (owned by a token, or static) */
    size_t sn;
    double num;
    struct ast **k;
    uint32_t nk, cap;
    uint32_t org;
    int is_kwarg_of_params; /* parameters: name=default */
};

struct parser {
    struct cc *c;
    struct tok *t;
    size_t nt, cur;
    int loops; /* for loops around the current statement (inside the current macro) */
    int depth; /* recursion guard */
    struct ast **all;
    size_t nall, capall;
};

static struct ast *mk(struct parser *P, int op, uint32_t org)
{
    struct ast *a = xalloc(sizeof *a);
    a->op = (uint8_t)op;
    a->org = org;
    if (P->nall == P->capall) {
        P->capall = P->capall ? P->capall * 2 : 256;
        P->all = realloc(P->all, P->capall * sizeof *P->all);
        if (!P->all)
            abort();
    }
    P->all[P->nall++] = a;
    return a;
}

static void add(struct ast *p, struct ast *k)
{
    if (!k)
        return;
    if (p->nk == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 4;
        p->k = realloc(p->k, p->cap * sizeof *p->k);
        if (!p->k)
            abort();
    }
    p->k[p->nk++] = k;
}

static const struct tok end_tok = {0, "", 0, 0};

static const struct tok *peek(struct parser *P, size_t ahead)
{
    return P->cur + ahead < P->nt ? &P->t[P->cur + ahead] : &end_tok;
}

static uint32_t here(struct parser *P)
{
    return P->cur < P->nt ? P->t[P->cur].org : (P->nt ? P->t[P->nt - 1].org : 0);
}

static int is_tok(struct parser *P, int type)
{
    return peek(P, 0)->type == type;
}

static int is_ident(struct parser *P, size_t ahead, const char *name)
{
    const struct tok *t = peek(P, ahead);
    return t->type == T_IDENT && !strcmp(t->v, name);
}

static int is_stmt(struct parser *P, const char *a, const char *b, const char *c3)
{
    if (peek(P, 0)->type != T_OPEN_STMT || peek(P, 1)->type != T_IDENT)
        return 0;
    const char *v = peek(P, 1)->v;
    return (a && !strcmp(v, a)) || (b && !strcmp(v, b)) || (c3 && !strcmp(v, c3));
}

static const struct tok *expect(struct parser *P, int type, const char *what)
{
    if (P->c->failed)
        return NULL;
    if (!is_tok(P, type)) {
        fail_at(P->c, here(P), "expected %s", what);
        return NULL;
    }
    return &P->t[P->cur++];
}

static void expect_ident(struct parser *P, const char *name)
{
    if (P->c->failed)
        return;
    if (!is_ident(P, 0, name)) {
        fail_at(P->c, here(P), "expected %s", name);
        return;
    }
    P->cur++;
}

static struct ast *parse_expr(struct parser *P);
static struct ast *parse_primary(struct parser *P);
static struct ast *parse_any(struct parser *P);

/* Guard against input nesting the recursive descent arbitrarily deep. */
static int enter(struct parser *P)
{
    if (++P->depth > 400) {
        fail_at(P->c, here(P), "nesting deeper than %u", NIB_CHAT_MAX_DEPTH);
        return 0;
    }
    return 1;
}

static struct ast *leave(struct parser *P, struct ast *a)
{
    P->depth--;
    return P->c->failed ? NULL : a;
}

static struct ast *parse_sequence(struct parser *P, int primary)
{
    uint32_t org = here(P);
    struct ast *first = primary ? parse_primary(P) : parse_expr(P);
    if (!first || !is_tok(P, T_COMMA))
        return first;
    struct ast *t = mk(P, CO_TUPLE, org);
    add(t, first);
    while (!P->c->failed) {
        P->cur++;
        add(t, primary ? parse_primary(P) : parse_expr(P));
        if (!is_tok(P, T_COMMA))
            break;
    }
    return P->c->failed ? NULL : t;
}

/* parseArgs: (a, b, k=v); parameters: names and name=default. */
static void parse_args(struct parser *P, struct ast *into, int params)
{
    if (!expect(P, T_LPAREN, "( for the arguments"))
        return;
    int saw_kw = 0;
    while (!P->c->failed && !is_tok(P, T_RPAREN)) {
        uint32_t org = here(P);
        if (is_tok(P, T_POW) || (is_tok(P, T_MUL) && !strcmp(peek(P, 0)->v, "*"))) {
            fail_at(P->c, org, "argument unpacking (* and **) is not supported");
            return;
        }
        if (peek(P, 0)->type == 0) {
            fail_at(P->c, org, "unexpected end of template in an argument list");
            return;
        }
        struct ast *arg = parse_expr(P);
        if (!arg)
            return;
        if (is_tok(P, T_EQUALS)) {
            P->cur++;
            if (arg->op != CO_NAME) {
                fail_at(P->c, org, "expected an identifier before =");
                return;
            }
            struct ast *kw = mk(P, CO_KWARG, org);
            kw->s = arg->s;
            kw->sn = arg->sn;
            add(kw, parse_expr(P));
            arg = kw;
            saw_kw = 1;
        } else if (saw_kw) {
            fail_at(P->c, org, "positional argument after a keyword argument");
            return;
        }
        if (params) {
            if (arg->op != CO_NAME && arg->op != CO_KWARG) {
                fail_at(P->c, org, "expected identifier for parameter declaration");
                return;
            }
            for (uint32_t i = 0; i < into->nk; i++)
                if (into->k[i]->sn == arg->sn && !memcmp(into->k[i]->s, arg->s, arg->sn)) {
                    fail_at(P->c, org, "duplicate parameter name: %.*s", (int)arg->sn, arg->s);
                    return;
                }
        }
        add(into, arg);
        if (is_tok(P, T_COMMA))
            P->cur++;
    }
    expect(P, T_RPAREN, ") after the arguments");
}

static struct ast *parse_member(struct parser *P, struct ast *obj);

static struct ast *parse_call(struct parser *P, struct ast *callee)
{
    if (!enter(P))
        return NULL;
    struct ast *call = mk(P, CO_CALL, here(P));
    add(call, callee);
    parse_args(P, call, 0);
    struct ast *e = parse_member(P, call);
    if (e && is_tok(P, T_LPAREN))
        e = parse_call(P, e);
    return leave(P, e);
}

static struct ast *parse_subscript(struct parser *P, struct ast *obj, uint32_t org)
{
    struct ast *parts[3] = {0};
    int n = 0, is_slice = 0;
    while (!P->c->failed && !is_tok(P, T_RSQUARE)) {
        if (peek(P, 0)->type == 0) {
            fail_at(P->c, org, "unterminated subscript");
            return NULL;
        }
        if (n == 3) {
            fail_at(P->c, org, "expected 0-3 arguments for slice expression");
            return NULL;
        }
        if (is_tok(P, T_COLON)) {
            parts[n++] = mk(P, CO_ABSENT, org);
            P->cur++;
            is_slice = 1;
        } else {
            parts[n++] = parse_expr(P);
            if (is_tok(P, T_COLON)) {
                P->cur++;
                is_slice = 1;
            }
        }
    }
    if (P->c->failed)
        return NULL;
    if (n == 0) {
        fail_at(P->c, org, "expected at least one argument for member/slice expression");
        return NULL;
    }
    struct ast *e = mk(P, is_slice ? CO_SLICE : CO_INDEX, org);
    add(e, obj);
    if (!is_slice) {
        add(e, parts[0]);
        return e;
    }
    for (int i = 0; i < 3; i++)
        add(e, parts[i] ? parts[i] : mk(P, CO_ABSENT, org));
    return e;
}

static struct ast *parse_member(struct parser *P, struct ast *obj)
{
    while (obj && !P->c->failed && (is_tok(P, T_DOT) || is_tok(P, T_LSQUARE))) {
        uint32_t org = here(P);
        int computed = is_tok(P, T_LSQUARE);
        P->cur++;
        if (computed) {
            obj = parse_subscript(P, obj, org);
            expect(P, T_RSQUARE, "] after the subscript");
            continue;
        }
        struct ast *prop = parse_primary(P);
        if (!prop)
            return NULL;
        if (prop->op == CO_NAME) {
            struct ast *e = mk(P, CO_ATTR, org);
            e->s = prop->s;
            e->sn = prop->sn;
            add(e, obj);
            obj = e;
        } else if (prop->op == CO_INT) {
            struct ast *e = mk(P, CO_INDEX, org);
            add(e, obj);
            add(e, prop);
            obj = e;
        } else {
            fail_at(P->c, org, "expected identifier or integer following dot operator");
            return NULL;
        }
    }
    return P->c->failed ? NULL : obj;
}

static struct ast *parse_call_member(struct parser *P)
{
    struct ast *m = parse_member(P, parse_primary(P));
    if (m && is_tok(P, T_LPAREN))
        return parse_call(P, m);
    return m;
}

static int lookup_name(const char *const *names, int count, const char *s, size_t n)
{
    for (int i = 1; i < count; i++)
        if (names[i] && strlen(names[i]) == n && !memcmp(names[i], s, n))
            return i;
    return 0;
}

/* Makes a FILTER (or FILTER_BLOCK) node from `name` or `name(args)`. */
static struct ast *parse_filter_into(struct parser *P, struct ast *node)
{
    struct ast *f = parse_primary(P);
    if (!f)
        return NULL;
    if (f->op != CO_NAME) {
        fail_at(P->c, f->org, "expected identifier for the filter");
        return NULL;
    }
    node->s = f->s;
    node->sn = f->sn;
    node->sub = (uint8_t)lookup_name(nib_chat_filter_names, CF_END, f->s, f->sn);
    if (is_tok(P, T_LPAREN)) {
        struct ast *call = parse_call(P, f);
        if (!call)
            return NULL;
        if (call->op != CO_CALL || call->k[0] != f) {
            fail_at(P->c, f->org, "a filter followed by more than its arguments is not supported");
            return NULL;
        }
        node->sub |= CF_CALLED;
        for (uint32_t i = 1; i < call->nk; i++)
            add(node, call->k[i]);
    }
    return node;
}

static struct ast *parse_unary_sign(struct parser *P)
{
    const struct tok *t = peek(P, 0);
    if ((t->type == T_UNARY || t->type == T_ADD) && (!strcmp(t->v, "-") || !strcmp(t->v, "+"))) {
        if (!enter(P))
            return NULL;
        struct ast *u = mk(P, CO_UNARY, t->org);
        u->sub = t->v[0] == '-' ? CU_NEG : CU_POS;
        P->cur++;
        add(u, parse_unary_sign(P));
        return leave(P, u);
    }
    return parse_call_member(P);
}

static struct ast *parse_filter_expr(struct parser *P)
{
    struct ast *operand = parse_unary_sign(P);
    while (operand && !P->c->failed && is_tok(P, T_PIPE)) {
        struct ast *f = mk(P, CO_FILTER, here(P));
        P->cur++;
        add(f, operand);
        operand = parse_filter_into(P, f);
    }
    return P->c->failed ? NULL : operand;
}

static struct ast *parse_test_expr(struct parser *P)
{
    struct ast *operand = parse_filter_expr(P);
    while (operand && !P->c->failed && is_ident(P, 0, "is")) {
        struct ast *t = mk(P, CO_TEST, here(P));
        P->cur++;
        int neg = is_ident(P, 0, "not");
        P->cur += (size_t)neg;
        struct ast *name = parse_primary(P);
        if (!name)
            return NULL;
        if (name->op != CO_NAME) {
            fail_at(P->c, t->org, "expected identifier for the test");
            return NULL;
        }
        t->s = name->s;
        t->sn = name->sn;
        t->sub = (uint8_t)(lookup_name(nib_chat_test_names, CT_END, name->s, name->sn) |
                           (neg ? CT_NEGATED : 0));
        add(t, operand);
        operand = t;
    }
    return P->c->failed ? NULL : operand;
}

static struct ast *binary(struct parser *P, int sub, struct ast *l, struct ast *r, uint32_t org)
{
    if (!l || !r)
        return NULL;
    struct ast *b = mk(P, CO_BIN, org);
    b->sub = (uint8_t)sub;
    add(b, l);
    add(b, r);
    return b;
}

static struct ast *parse_power(struct parser *P)
{
    struct ast *l = parse_test_expr(P);
    while (l && is_tok(P, T_POW)) {
        uint32_t org = here(P);
        P->cur++;
        l = binary(P, CB_POW, l, parse_test_expr(P), org);
    }
    return l;
}

static struct ast *parse_mul(struct parser *P)
{
    struct ast *l = parse_power(P);
    while (l && is_tok(P, T_MUL)) {
        const struct tok *t = &P->t[P->cur++];
        int sub = !strcmp(t->v, "*")    ? CB_MUL
                  : !strcmp(t->v, "/")  ? CB_DIV
                  : !strcmp(t->v, "//") ? CB_FLOORDIV
                                        : CB_MOD;
        l = binary(P, sub, l, parse_power(P), t->org);
    }
    return l;
}

static struct ast *parse_add(struct parser *P)
{
    struct ast *l = parse_mul(P);
    while (l && is_tok(P, T_ADD)) {
        const struct tok *t = &P->t[P->cur++];
        int sub = t->v[0] == '+' ? CB_ADD : t->v[0] == '-' ? CB_SUB : CB_CONCAT;
        l = binary(P, sub, l, parse_mul(P), t->org);
    }
    return l;
}

static struct ast *parse_comparison(struct parser *P)
{
    struct ast *l = parse_add(P);
    while (l && !P->c->failed) {
        uint32_t org = here(P);
        int sub;
        if (is_ident(P, 0, "not") && is_ident(P, 1, "in")) {
            sub = CB_NOTIN;
            P->cur += 2;
        } else if (is_ident(P, 0, "in")) {
            sub = CB_IN;
            P->cur++;
        } else if (is_tok(P, T_CMP)) {
            const char *v = P->t[P->cur++].v;
            sub = !strcmp(v, "==")   ? CB_EQ
                  : !strcmp(v, "!=") ? CB_NE
                  : !strcmp(v, "<")  ? CB_LT
                  : !strcmp(v, ">")  ? CB_GT
                  : !strcmp(v, "<=") ? CB_LE
                                     : CB_GE;
        } else {
            break;
        }
        l = binary(P, sub, l, parse_add(P), org);
    }
    return l;
}

static struct ast *parse_not(struct parser *P)
{
    if (is_ident(P, 0, "not")) {
        if (!enter(P))
            return NULL;
        struct ast *u = mk(P, CO_UNARY, here(P));
        u->sub = CU_NOT;
        P->cur++;
        add(u, parse_not(P));
        return leave(P, u);
    }
    return parse_comparison(P);
}

/* operand (word operand)*, left to right: `and` over `not`, `or` over `and`. */
static struct ast *parse_logical(struct parser *P, const char *word, int op,
                                 struct ast *(*operand)(struct parser *))
{
    struct ast *l = operand(P);
    while (l && is_ident(P, 0, word)) {
        uint32_t org = here(P);
        P->cur++;
        l = binary(P, op, l, operand(P), org);
    }
    return l;
}

static struct ast *parse_and(struct parser *P)
{
    return parse_logical(P, "and", CB_AND, parse_not);
}

static struct ast *parse_or(struct parser *P)
{
    return parse_logical(P, "or", CB_OR, parse_and);
}

static struct ast *parse_expr(struct parser *P)
{
    if (!enter(P))
        return NULL;
    struct ast *a = parse_or(P);
    if (a && is_ident(P, 0, "if")) {
        uint32_t org = here(P);
        P->cur++;
        struct ast *test = parse_or(P);
        if (test && is_ident(P, 0, "else")) {
            P->cur++;
            struct ast *t = mk(P, CO_TERNARY, org);
            add(t, test);
            add(t, a);
            add(t, parse_expr(P));
            a = t;
        } else if (test) {
            struct ast *s = mk(P, CO_SELECT, org);
            add(s, a);
            add(s, test);
            a = s;
        }
    }
    return leave(P, a);
}

/* A list `[a, b]` or dict `{k: v}` display opened by t, up to close: a
 * trailing comma is allowed. */
static struct ast *parse_display(struct parser *P, const struct tok *t, int op, int close,
                                 const char *unterminated)
{
    if (!enter(P))
        return NULL;
    struct ast *l = mk(P, op, t->org);
    while (!P->c->failed && !is_tok(P, close)) {
        if (peek(P, 0)->type == 0) {
            fail_at(P->c, t->org, "%s", unterminated);
            break;
        }
        add(l, parse_expr(P));
        if (op == CO_DICT) {
            expect(P, T_COLON, ": between key and value");
            add(l, parse_expr(P));
        }
        if (is_tok(P, T_COMMA))
            P->cur++;
    }
    P->cur++;
    return leave(P, l);
}

static struct ast *parse_primary(struct parser *P)
{
    if (P->c->failed)
        return NULL;
    if (P->cur >= P->nt) {
        fail_at(P->c, here(P), "unexpected end of template");
        return NULL;
    }
    const struct tok *t = &P->t[P->cur++];
    switch (t->type) {
    case T_NUM: {
        struct ast *a = mk(P, strchr(t->v, '.') ? CO_FLOAT : CO_INT, t->org);
        a->num = strtod(t->v, NULL);
        return a;
    }
    case T_STR: {
        size_t total = t->n;
        for (size_t k = P->cur; k < P->nt && P->t[k].type == T_STR; k++)
            total += P->t[k].n;
        struct ast *a = mk(P, CO_STR, t->org);
        if (total == t->n) {
            a->s = t->v;
            a->sn = t->n;
            return a;
        }
        /* adjacent literals join: kept in the token being merged into */
        char *j = xalloc(total + 1);
        size_t o = 0;
        memcpy(j, t->v, t->n);
        o = t->n;
        while (is_tok(P, T_STR)) {
            memcpy(j + o, P->t[P->cur].v, P->t[P->cur].n);
            o += P->t[P->cur].n;
            P->cur++;
        }
        free(((struct tok *)t)->v);
        ((struct tok *)t)->v = j;
        ((struct tok *)t)->n = total;
        a->s = j;
        a->sn = total;
        return a;
    }
    case T_IDENT: {
        struct ast *a = mk(P, CO_NAME, t->org);
        a->s = t->v;
        a->sn = t->n;
        return a;
    }
    case T_LPAREN: {
        if (!enter(P))
            return NULL;
        struct ast *e = parse_sequence(P, 0);
        expect(P, T_RPAREN, ") after the parenthesized expression");
        return leave(P, e);
    }
    case T_LSQUARE: return parse_display(P, t, CO_LIST, T_RSQUARE, "unterminated list");
    case T_LCURLY: return parse_display(P, t, CO_DICT, T_RCURLY, "unterminated dict");
    default: fail_at(P->c, t->org, "unexpected token: %s", t->v); return NULL;
    }
}

/* Statements up to (not including) one of the closing tags. */
static struct ast *parse_body(struct parser *P, const char *a, const char *b, const char *c3,
                              uint32_t org)
{
    struct ast *blk = mk(P, CO_BLOCK, org);
    while (!P->c->failed && !is_stmt(P, a, b, c3)) {
        if (P->cur >= P->nt) {
            fail_at(P->c, org, "missing {%% %s %%}", a);
            return NULL;
        }
        add(blk, parse_any(P));
    }
    return P->c->failed ? NULL : blk;
}

static void close_tag(struct parser *P, const char *name)
{
    expect(P, T_OPEN_STMT, "{%");
    expect_ident(P, name);
    expect(P, T_CLOSE_STMT, "%}");
}

static int valid_target(struct ast *t, int allow_attr)
{
    if (t->op == CO_NAME)
        return 1;
    if (t->op == CO_ATTR)
        return allow_attr;
    if (t->op != CO_TUPLE)
        return 0;
    for (uint32_t i = 0; i < t->nk; i++)
        if (t->k[i]->op != CO_NAME)
            return 0;
    return 1;
}

static struct ast *parse_if(struct parser *P, uint32_t org)
{
    if (!enter(P))
        return NULL;
    struct ast *n = mk(P, CO_IF, org);
    add(n, parse_expr(P));
    expect(P, T_CLOSE_STMT, "%} after the if test");
    add(n, parse_body(P, "elif", "else", "endif", org));
    struct ast *alt = mk(P, CO_BLOCK, here(P));
    if (!P->c->failed && is_stmt(P, "elif", NULL, NULL)) {
        uint32_t o2 = here(P);
        P->cur += 2;
        add(alt, parse_if(P, o2));
    } else if (!P->c->failed && is_stmt(P, "else", NULL, NULL)) {
        P->cur += 2;
        expect(P, T_CLOSE_STMT, "%} after else");
        struct ast *b = parse_body(P, "endif", NULL, NULL, org);
        if (b)
            alt = b;
    }
    add(n, alt);
    return leave(P, n);
}

static int mentions(const struct ast *a, const char *name)
{
    if (a->op == CO_NAME && a->sn == strlen(name) && !memcmp(a->s, name, a->sn))
        return 1;
    for (uint32_t i = 0; i < a->nk; i++)
        if (mentions(a->k[i], name))
            return 1;
    return 0;
}

static struct ast *parse_statement(struct parser *P)
{
    uint32_t org = here(P);
    expect(P, T_OPEN_STMT, "{%");
    if (P->c->failed)
        return NULL;
    if (!is_tok(P, T_IDENT)) {
        fail_at(P->c, org, "unknown statement");
        return NULL;
    }
    const char *name = P->t[P->cur].v;
    P->cur++;
    struct ast *n = NULL;
    if (!strcmp(name, "set")) {
        struct ast *target = parse_sequence(P, 0);
        if (!target)
            return NULL;
        if (!valid_target(target, 1)) {
            fail_at(P->c, org, "set can assign only to names and namespace attributes");
            return NULL;
        }
        if (is_tok(P, T_EQUALS)) {
            P->cur++;
            n = mk(P, CO_SET, org);
            add(n, target);
            add(n, parse_sequence(P, 0));
        } else {
            expect(P, T_CLOSE_STMT, "%} or = after set");
            n = mk(P, CO_SET_BLOCK, org);
            add(n, target);
            add(n, parse_body(P, "endset", NULL, NULL, org));
            expect(P, T_OPEN_STMT, "{%");
            expect_ident(P, "endset");
        }
        expect(P, T_CLOSE_STMT, "%} after set");
    } else if (!strcmp(name, "if")) {
        n = parse_if(P, org);
        close_tag(P, "endif");
    } else if (!strcmp(name, "for")) {
        n = mk(P, CO_FOR, org);
        struct ast *target = parse_sequence(P, 1);
        if (!target)
            return NULL;
        if (!valid_target(target, 0)) {
            fail_at(P->c, org, "expected identifier/tuple for the loop variable");
            return NULL;
        }
        if (!is_ident(P, 0, "in")) {
            fail_at(P->c, org, "expected `in` keyword following loop variable");
            return NULL;
        }
        P->cur++;
        struct ast *iter = parse_expr(P);
        if (!iter)
            return NULL;
        add(n, target);
        if (iter->op == CO_SELECT) {
            add(n, iter->k[0]);
            add(n, iter->k[1]);
        } else {
            add(n, iter);
            add(n, mk(P, CO_ABSENT, org));
        }
        expect(P, T_CLOSE_STMT, "%} after the for loop head");
        P->loops++;
        add(n, parse_body(P, "endfor", "else", NULL, org));
        P->loops--;
        struct ast *alt = mk(P, CO_BLOCK, org);
        if (!P->c->failed && is_stmt(P, "else", NULL, NULL)) {
            P->cur += 2;
            expect(P, T_CLOSE_STMT, "%} after else");
            struct ast *b = parse_body(P, "endfor", NULL, NULL, org);
            if (b)
                alt = b;
        }
        add(n, alt);
        close_tag(P, "endfor");
    } else if (!strcmp(name, "macro")) {
        struct ast *id = parse_primary(P);
        if (!id)
            return NULL;
        if (id->op != CO_NAME) {
            fail_at(P->c, org, "expected identifier following macro statement");
            return NULL;
        }
        n = mk(P, CO_MACRO, org);
        n->s = id->s;
        n->sn = id->sn;
        parse_args(P, n, 1);
        expect(P, T_CLOSE_STMT, "%} after the macro head");
        int loops = P->loops;
        P->loops = 0;
        struct ast *body = parse_body(P, "endmacro", NULL, NULL, org);
        P->loops = loops;
        if (!body)
            return NULL;
        if (mentions(body, "varargs") || mentions(body, "kwargs")) {
            fail_at(P->c, org, "macros using varargs or kwargs are not supported");
            return NULL;
        }
        add(n, body);
        close_tag(P, "endmacro");
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        if (!P->loops) {
            fail_at(P->c, org, "%s outside a for loop", name);
            return NULL;
        }
        n = mk(P, name[0] == 'b' ? CO_BREAK : CO_CONTINUE, org);
        expect(P, T_CLOSE_STMT, "%}");
    } else if (!strcmp(name, "filter")) {
        n = mk(P, CO_FILTER_BLOCK, org);
        struct ast *body_slot = mk(P, CO_BLOCK, org);
        add(n, body_slot);
        if (!parse_filter_into(P, n))
            return NULL;
        expect(P, T_CLOSE_STMT, "%} after the filter");
        struct ast *body = parse_body(P, "endfilter", NULL, NULL, org);
        if (!body)
            return NULL;
        n->k[0] = body;
        close_tag(P, "endfilter");
    } else if (!strcmp(name, "call")) {
        fail_at(P->c, org, "call blocks are not supported");
        return NULL;
    } else {
        fail_at(P->c, org, "unknown statement type: %s", name);
        return NULL;
    }
    return P->c->failed ? NULL : n;
}

static struct ast *parse_any(struct parser *P)
{
    if (P->c->failed)
        return NULL;
    const struct tok *t = peek(P, 0);
    switch (t->type) {
    case T_COMMENT: P->cur++; return NULL;
    case T_TEXT: {
        struct ast *a = mk(P, CO_TEXT, t->org);
        a->s = t->v;
        a->sn = t->n;
        P->cur++;
        return a;
    }
    case T_OPEN_STMT: return parse_statement(P);
    case T_OPEN_EXPR: {
        struct ast *p = mk(P, CO_PRINT, t->org);
        P->cur++;
        add(p, parse_expr(P));
        expect(P, T_CLOSE_EXPR, "}} after the expression");
        return P->c->failed ? NULL : p;
    }
    default: fail_at(P->c, t->org, "unexpected token: %s", t->v); return NULL;
    }
}

/* ---- emit: breadth first (rt/chat/chat_prog.h) ---- */

static int tree_depth(const struct ast *a)
{
    int d = 0;
    for (uint32_t i = 0; i < a->nk; i++) {
        int k = tree_depth(a->k[i]);
        d = k > d ? k : d;
    }
    return d + 1;
}

static int emit(struct cc *c, struct ast *root, uint8_t **prog, size_t *prog_len)
{
    /* count nodes and pool bytes */
    size_t cap = 64, n = 0, pool = 0;
    struct ast **q = xalloc(cap * sizeof *q);
    q[n++] = root;
    for (size_t i = 0; i < n; i++) {
        pool += q[i]->sn;
        if (n + q[i]->nk > cap) {
            while (n + q[i]->nk > cap)
                cap *= 2;
            q = realloc(q, cap * sizeof *q);
            if (!q)
                abort();
        }
        for (uint32_t k = 0; k < q[i]->nk; k++)
            q[n++] = q[i]->k[k];
        if (q[i]->nk > 0xFFFF) {
            fail_at(c, q[i]->org, "more than 65535 items in one block or list");
            free(q);
            return -1;
        }
    }
    int depth = tree_depth(root);
    if (n > NIB_CHAT_MAX_NODES || pool > NIB_CHAT_MAX_POOL) {
        fail_at(c, 0, "the template is too large (%zu nodes, %zu string bytes; at most %u, %u)", n,
                pool, NIB_CHAT_MAX_NODES, NIB_CHAT_MAX_POOL);
        free(q);
        return -1;
    }
    if ((unsigned)depth > NIB_CHAT_MAX_DEPTH) {
        fail_at(c, 0, "the template nests %d deep (at most %u)", depth, NIB_CHAT_MAX_DEPTH);
        free(q);
        return -1;
    }
    size_t total = NIB_CHAT_HEADER + n * NIB_CHAT_NODE + pool;
    uint8_t *p = xalloc(total);
    memcpy(p, NIB_CHAT_MAGIC, 4);
    nib_chat_wr32(p + 4, NIB_CHAT_VERSION);
    nib_chat_wr32(p + 8, (uint32_t)n);
    nib_chat_wr32(p + 12, (uint32_t)pool);
    nib_chat_wr32(p + 16, (uint32_t)depth);
    uint8_t *pl = p + NIB_CHAT_HEADER + n * NIB_CHAT_NODE;
    size_t po = 0, next = 1;
    for (size_t i = 0; i < n; i++) {
        struct ast *a = q[i];
        uint8_t *d = p + NIB_CHAT_HEADER + i * NIB_CHAT_NODE;
        d[0] = a->op;
        d[1] = a->sub;
        d[2] = (uint8_t)a->nk;
        d[3] = (uint8_t)(a->nk >> 8);
        nib_chat_wr32(d + 4, a->nk ? (uint32_t)next : 0);
        next += a->nk;
        if (a->op == CO_INT || a->op == CO_FLOAT) {
            uint64_t bits;
            memcpy(&bits, &a->num, sizeof bits);
            nib_chat_wr32(d + 8, (uint32_t)bits);
            nib_chat_wr32(d + 12, (uint32_t)(bits >> 32));
        } else {
            if (a->sn)
                memcpy(pl + po, a->s, a->sn);
            nib_chat_wr32(d + 8, (uint32_t)po);
            nib_chat_wr32(d + 12, (uint32_t)a->sn);
            po += a->sn;
        }
    }
    free(q);
    *prog = p;
    *prog_len = total;
    return 0;
}

int nib_chat_compile(const char *tmpl, size_t len, uint8_t **prog, size_t *prog_len, char *err,
                     size_t errlen)
{
    struct cc c = {.src = tmpl, .src_len = len, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = 0;
    *prog = NULL;
    *prog_len = 0;
    if (len > (size_t)64 << 20) {
        snprintf(err, errlen, "chat template: %zu bytes is too large", len);
        return -1;
    }
    struct text t = preprocess(tmpl, len);
    c.buf = t.b;
    c.org = t.o;
    c.len = t.n;
    struct lexer L = {.c = &c};
    struct parser P = {.c = &c};
    int rc = -1;
    if (tokenize(&L)) {
        P.t = L.t;
        P.nt = L.nt;
        struct ast *root = mk(&P, CO_BLOCK, 0);
        while (!c.failed && P.cur < P.nt)
            add(root, parse_any(&P));
        if (!c.failed)
            rc = emit(&c, root, prog, prog_len);
    }
    for (size_t i = 0; i < P.nall; i++) {
        free(P.all[i]->k);
        free(P.all[i]);
    }
    free(P.all);
    for (size_t i = 0; i < L.nt; i++)
        free(L.t[i].v);
    free(L.t);
    free(t.b);
    free(t.o);
    if (rc != 0 && errlen && !err[0])
        snprintf(err, errlen, "chat template: cannot compile");
    return rc;
}

/* ---- nibble's own templates, for --chat-template FAMILY ---- */

static const struct {
    const char *name, *text;
} families[] = {
    {"llama2",
     "{% if messages and messages[0]['role'] == 'system' %}"
     "{% set sys = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}"
     "{% set msgs = messages[1:] %}{% else %}{% set sys = '' %}{% set msgs = messages %}{% endif %}"
     "{% for m in msgs %}{% if m['role'] == 'user' %}"
     "{{ bos_token }}[INST] {{ ((sys if loop.first else '') + m['content']) | trim }} [/INST]"
     "{% else %} {{ m['content'] | trim }} {{ eos_token }}{% endif %}{% endfor %}"},
    {"llama3",
     "{{ bos_token }}{% for m in messages %}"
     "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>"
     "{% endfor %}{% if add_generation_prompt %}"
     "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"},
    {"chatml", "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
               "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"},
    {"phi3", "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|assistant|>\n{% else %}{{ eos_token }}{% endif %}"},
    {"gemma", "{{ bos_token }}{% for m in messages %}"
              "{% set role = 'model' if m['role'] == 'assistant' else 'user' %}"
              "<start_of_turn>{{ role }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
              "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"},
    {"mistral",
     "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'assistant' %}"
     "{{ m['content'] }}{{ eos_token }}{% else %}[INST] {{ m['content'] }} [/INST]{% endif %}"
     "{% endfor %}"},
    {"zephyr",
     "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
     "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"},
};

const char *const nib_chat_families[] = {"llama2", "llama3",  "chatml", "phi3",
                                         "gemma",  "mistral", "zephyr", NULL};

const char *nib_chat_builtin(const char *family)
{
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(families[i].name, family))
            return families[i].text;
    return NULL;
}
