/* The pre-tokenizer regex engine (rt/text/regex.h).
 *
 * Compiler: recursive descent over the pattern text with no syntax tree: an
 * atom's extent is found first (skip_atom), its quantifier read, then the
 * atom is compiled as many times as the layout needs. Output: a program of
 * fixed 16-byte instructions (jump targets are instruction indices) followed
 * by a data section of literal strings and character classes (offsets into
 * it), so the checker can verify each instruction on its own.
 *
 * Matcher: backtracking with an explicit stack in caller scratch, plus a
 * memo of (branch target, position) pairs already explored: outside
 * lookaheads a state that failed once fails again (the continuation depends
 * only on it), so each one runs at most once per search and the search is
 * linear in the text (times the program size). Lookahead results are
 * memoized per position too. A single-character atom under a quantifier is
 * one LOOP instruction that scans greedily and gives characters back one
 * at a time from a single stack entry.
 *
 * Oniguruma's meaning as @huggingface/tokenizers translates it: \s is
 * White_Space, \d is \p{Nd}, \w is Alphabetic + M + Nd + Pc + the
 * superscript/fraction digits, `.` is anything but \n, ^ and $ are line
 * anchors, \A \z \Z string anchors, (?i:...) folds ASCII letters only. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/text/regex.h"
#include "rt/text/ucd.h"

#define RE_MAGIC 0x3145524Eu /* "NRE1" */
#define RE_HDR 64
#define RE_INS 16
#define RE_MAX_INST 16384
#define RE_MAX_DEPTH 48
#define RE_MAX_REPEAT 1000
#define RE_MAX_ITEMS 32
#define RE_MAX_RANGES 1024
#define RE_INF 0xFFFFFFFFu
#define RE_NO_MEMO 0xFFFFu
/* Caps that bound the scratch of any accepted program: memo bits per text
 * byte (branch targets + 2 per lookahead) and stack entries per byte. */
#define RE_MAX_ROW_BITS 1024
#define RE_MAX_PER_BYTE 16
#define RE_NONE 0xFFFFFFFFu

/* Header fields (byte offsets). */
enum {
    H_MAGIC = 0,
    H_LEN = 4,
    H_NINST = 8,
    H_DLEN = 12,
    H_NMEMO = 16,
    H_NLOOK = 18,
    H_NLOOP = 20,
    H_PERBYTE = 22,
    H_SBASE = 24,
    H_FLAGS = 28,
    H_FIRST = 32,
};
#define HF_NULLABLE 1u

enum {
    OP_MATCH = 1,
    OP_LMATCH, /* end of a lookahead body */
    OP_STR,    /* a: data offset, b: length; FL_FOLD */
    OP_CLASS,  /* a: class offset */
    OP_ANY,    /* any character but \n */
    OP_SPLIT,  /* try a, then b; c: 1 + offset of a's first bytes, or 0 */
    OP_JMP,    /* a */
    OP_LOOP,   /* a: class, b: min | loop index << 16, c: max; FL_LAZY */
    OP_ASSERT, /* fl: AS_* */
    OP_LOOK,   /* a: body, b: continuation, c: lookahead index; FL_NEG */
    OP_END
};
enum { AS_BOL = 1, AS_EOL, AS_BEGIN, AS_END, AS_END_NL, AS_WORDB, AS_NWORDB, AS_END_KIND };
#define FL_FOLD 1
#define FL_LAZY 1
#define FL_NEG 1
#define FL_TABLE 1 /* SPLIT: its first-byte record is followed by a jump table */
#define TABLE_BYTES (32 + 2 * 257)

/* Class record: size, flags, ASCII bitmap (4 words, final membership),
 * item count, items. Items are only consulted for characters >= 0x80. */
enum { K_GC = 1, K_PROP, K_WORD, K_RANGES, K_ALL, K_HIGH, K_END };
#define CLS_NEG 1u
#define CLS_HDR 28
#define ITEM_NEG 0x100u

struct ins {
    uint8_t op, fl;
    uint16_t memo;
    uint32_t a, b, c;
};

static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint16_t rd16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static inline void wr16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, 2);
}

static inline int is_word_cp(uint32_t cp)
{
    if (cp < 0x80)
        return (cp | 0x20) - 'a' < 26 || cp - '0' < 10 || cp == '_';
    if (cp >= NIB_UTF8_BAD)
        return 0;
    unsigned p = nib_ucd_props(cp), gc = p & NIB_UCD_GC_MASK;
    return (p & NIB_UCD_ALPHABETIC) || gc == NIB_GC_MN || gc == NIB_GC_MC || gc == NIB_GC_ME ||
           gc == NIB_GC_ND || gc == NIB_GC_PC || cp == 0xB2 || cp == 0xB3 || cp == 0xB9 ||
           (cp >= 0xBC && cp <= 0xBE);
}

/* One class item for a character (>= 0x80, or an ill-formed byte, which has
 * no category, no property and is in no range). */
static int item_true(unsigned kind, uint32_t value, const uint8_t *ranges, unsigned count,
                     uint32_t cp, unsigned props)
{
    switch (kind) {
    case K_GC: return cp < NIB_UTF8_BAD && ((value >> (props & NIB_UCD_GC_MASK)) & 1);
    case K_PROP: return cp < NIB_UTF8_BAD && (props & value) != 0;
    case K_WORD: return is_word_cp(cp);
    case K_RANGES: {
        unsigned lo = 0, hi = count;
        while (lo < hi) {
            unsigned mid = (lo + hi) / 2;
            if (rd32(ranges + 8 * mid + 4) < cp)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo < count && rd32(ranges + 8 * lo) <= cp;
    }
    case K_ALL: return cp < NIB_UTF8_BAD;
    default: return 1; /* K_HIGH: every character >= 0x80, for \H */
    }
}

static int cls_nonascii(const uint8_t *k, uint32_t cp)
{
    unsigned props = cp < NIB_UTF8_BAD ? nib_ucd_props(cp) : 0;
    unsigned nitems = rd32(k + 24);
    const uint8_t *it = k + CLS_HDR;
    int v = 0;
    for (unsigned i = 0; i < nitems && !v; i++) {
        uint32_t head = rd32(it), value = rd32(it + 4);
        unsigned count = head >> 16;
        int t = item_true(head & 0xFF, value, it + 8, count, cp, props);
        v = (head & ITEM_NEG) ? !t : t;
        it += 8 + ((head & 0xFF) == K_RANGES ? 8 * count : 0);
    }
    return v ^ (int)(rd32(k + 4) & CLS_NEG);
}

static inline int cls_match(const uint8_t *k, uint32_t cp)
{
    if (cp < 0x80)
        return (k[8 + (cp >> 3)] >> (cp & 7)) & 1;
    return cls_nonascii(k, cp);
}

/* ------------------------------------------------------------------ */
/* Compiler                                                            */

struct info {
    int nullable;
    uint8_t first[32]; /* bytes a match can start with */
};

struct quant {
    uint32_t min, max;
    int lazy, brace;
};

/* A class being built. */
struct cls {
    uint8_t ascii[16]; /* positive ASCII members */
    int neg;
    unsigned nitems;
    struct {
        uint8_t kind, neg;
        uint32_t value;
    } items[RE_MAX_ITEMS];
    unsigned nr;
    uint32_t r[RE_MAX_RANGES][2]; /* members >= 0x80 */
};

struct rc {
    const uint8_t *p;
    size_t n;
    uint8_t *prog;
    size_t cap;
    uint32_t ninst;
    size_t dtop; /* data bytes, stored down from prog + cap */
    char *err;
    size_t errlen;
    int bad;
    uint32_t nlook, nloop, pushes, per_byte;
    uint32_t work; /* instructions emitted, rolled back ones included */
    uint8_t target[RE_MAX_INST / 8];
    struct cls k; /* the class being parsed (classes do not nest) */
    uint8_t rec[CLS_HDR + 8 * (RE_MAX_ITEMS + 1) + 8 * RE_MAX_RANGES];
};

static int fail(struct rc *c, size_t at, const char *fmt, ...)
{
    if (!c->bad) {
        c->bad = 1;
        if (c->err && c->errlen) {
            int k = snprintf(c->err, c->errlen, "regex offset %zu: ", at);
            if (k >= 0 && (size_t)k < c->errlen) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
                va_end(ap);
            }
        }
    }
    return -1;
}

/* fail() for functions that return an index, 0 meaning failure. */
static size_t fail0(struct rc *c, size_t at, const char *msg)
{
    fail(c, at, "%s", msg);
    return 0;
}

static uint8_t *ins_at(struct rc *c, uint32_t pc)
{
    return c->prog + RE_HDR + (size_t)RE_INS * pc;
}

static uint32_t emit(struct rc *c, uint8_t op, uint8_t fl, uint32_t a, uint32_t b, uint32_t cc)
{
    if (c->bad)
        return 0;
    if (++c->work > 16 * RE_MAX_INST) {
        fail(c, c->n, "pattern too complex to compile");
        return 0;
    }
    if (c->ninst >= RE_MAX_INST || RE_HDR + (size_t)RE_INS * (c->ninst + 1) + c->dtop > c->cap) {
        fail(c, c->n, "pattern too large for its program (%u instructions, %zu bytes)", c->ninst,
             c->cap);
        return 0;
    }
    struct ins in = {op, fl, RE_NO_MEMO, a, b, cc};
    memcpy(ins_at(c, c->ninst), &in, sizeof in);
    return c->ninst++;
}

static struct ins get_ins(struct rc *c, uint32_t pc)
{
    struct ins in;
    memcpy(&in, ins_at(c, pc), sizeof in);
    return in;
}

static void put_ins(struct rc *c, uint32_t pc, struct ins in)
{
    if (!c->bad)
        memcpy(ins_at(c, pc), &in, sizeof in);
}

static void mark(struct rc *c, uint32_t pc)
{
    if (pc < RE_MAX_INST)
        c->target[pc >> 3] |= (uint8_t)(1u << (pc & 7));
}

/* Data record: returns its distance from the end (fixed up at the end). */
static uint32_t add_data(struct rc *c, const void *d, size_t len)
{
    size_t padded = (len + 3) & ~(size_t)3;
    if (c->bad)
        return 0;
    if (RE_HDR + (size_t)RE_INS * c->ninst + c->dtop + padded > c->cap) {
        fail(c, c->n, "pattern too large for its program (%zu bytes)", c->cap);
        return 0;
    }
    c->dtop += padded;
    uint8_t *at = c->prog + c->cap - c->dtop;
    memcpy(at, d, len);
    memset(at + len, 0, padded - len);
    return (uint32_t)c->dtop;
}

static int pat_char(struct rc *c, size_t i, uint32_t *cp)
{
    unsigned l = nib_utf8_decode(c->p + i, c->n - i, cp);
    if (*cp >= NIB_UTF8_BAD)
        return fail(c, i, "the pattern is not valid UTF-8");
    return (int)l;
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f')
        return (ch | 0x20) - 'a' + 10;
    return -1;
}

/* \p{...} names: general categories (short and long forms, loosely
 * matched as Oniguruma does) and the few binary properties in use. */
#define GCB(x) (1u << NIB_GC_##x)
#define GC_L (GCB(LU) | GCB(LL) | GCB(LT) | GCB(LM) | GCB(LO))
#define GC_M (GCB(MN) | GCB(MC) | GCB(ME))
#define GC_N (GCB(ND) | GCB(NL) | GCB(NO))
#define GC_P (GCB(PC) | GCB(PD) | GCB(PS) | GCB(PE) | GCB(PI) | GCB(PF) | GCB(PO))
#define GC_S (GCB(SM) | GCB(SC) | GCB(SK) | GCB(SO))
#define GC_Z (GCB(ZS) | GCB(ZL) | GCB(ZP))
#define GC_C (GCB(CC) | GCB(CF) | GCB(CS) | GCB(CO) | GCB(CN))

static const struct pname {
    const char *name;
    uint8_t kind;
    uint32_t value;
} pnames[] = {
    {"l", K_GC, GC_L},
    {"letter", K_GC, GC_L},
    {"lu", K_GC, GCB(LU)},
    {"uppercaseletter", K_GC, GCB(LU)},
    {"ll", K_GC, GCB(LL)},
    {"lowercaseletter", K_GC, GCB(LL)},
    {"lt", K_GC, GCB(LT)},
    {"titlecaseletter", K_GC, GCB(LT)},
    {"lc", K_GC, GCB(LU) | GCB(LL) | GCB(LT)},
    {"l&", K_GC, GCB(LU) | GCB(LL) | GCB(LT)},
    {"casedletter", K_GC, GCB(LU) | GCB(LL) | GCB(LT)},
    {"lm", K_GC, GCB(LM)},
    {"modifierletter", K_GC, GCB(LM)},
    {"lo", K_GC, GCB(LO)},
    {"otherletter", K_GC, GCB(LO)},
    {"m", K_GC, GC_M},
    {"mark", K_GC, GC_M},
    {"combiningmark", K_GC, GC_M},
    {"mn", K_GC, GCB(MN)},
    {"nonspacingmark", K_GC, GCB(MN)},
    {"mc", K_GC, GCB(MC)},
    {"spacingmark", K_GC, GCB(MC)},
    {"me", K_GC, GCB(ME)},
    {"enclosingmark", K_GC, GCB(ME)},
    {"n", K_GC, GC_N},
    {"number", K_GC, GC_N},
    {"nd", K_GC, GCB(ND)},
    {"decimalnumber", K_GC, GCB(ND)},
    {"nl", K_GC, GCB(NL)},
    {"letternumber", K_GC, GCB(NL)},
    {"no", K_GC, GCB(NO)},
    {"othernumber", K_GC, GCB(NO)},
    {"p", K_GC, GC_P},
    {"punctuation", K_GC, GC_P},
    {"pc", K_GC, GCB(PC)},
    {"connectorpunctuation", K_GC, GCB(PC)},
    {"pd", K_GC, GCB(PD)},
    {"dashpunctuation", K_GC, GCB(PD)},
    {"ps", K_GC, GCB(PS)},
    {"openpunctuation", K_GC, GCB(PS)},
    {"pe", K_GC, GCB(PE)},
    {"closepunctuation", K_GC, GCB(PE)},
    {"pi", K_GC, GCB(PI)},
    {"initialpunctuation", K_GC, GCB(PI)},
    {"pf", K_GC, GCB(PF)},
    {"finalpunctuation", K_GC, GCB(PF)},
    {"po", K_GC, GCB(PO)},
    {"otherpunctuation", K_GC, GCB(PO)},
    {"s", K_GC, GC_S},
    {"symbol", K_GC, GC_S},
    {"sm", K_GC, GCB(SM)},
    {"mathsymbol", K_GC, GCB(SM)},
    {"sc", K_GC, GCB(SC)},
    {"currencysymbol", K_GC, GCB(SC)},
    {"sk", K_GC, GCB(SK)},
    {"modifiersymbol", K_GC, GCB(SK)},
    {"so", K_GC, GCB(SO)},
    {"othersymbol", K_GC, GCB(SO)},
    {"z", K_GC, GC_Z},
    {"separator", K_GC, GC_Z},
    {"zs", K_GC, GCB(ZS)},
    {"spaceseparator", K_GC, GCB(ZS)},
    {"zl", K_GC, GCB(ZL)},
    {"lineseparator", K_GC, GCB(ZL)},
    {"zp", K_GC, GCB(ZP)},
    {"paragraphseparator", K_GC, GCB(ZP)},
    {"c", K_GC, GC_C},
    {"other", K_GC, GC_C},
    {"cc", K_GC, GCB(CC)},
    {"control", K_GC, GCB(CC)},
    {"cf", K_GC, GCB(CF)},
    {"format", K_GC, GCB(CF)},
    {"cs", K_GC, GCB(CS)},
    {"surrogate", K_GC, GCB(CS)},
    {"co", K_GC, GCB(CO)},
    {"privateuse", K_GC, GCB(CO)},
    {"cn", K_GC, GCB(CN)},
    {"unassigned", K_GC, GCB(CN)},
    {"whitespace", K_PROP, NIB_UCD_WHITE_SPACE},
    {"alphabetic", K_PROP, NIB_UCD_ALPHABETIC},
    {"word", K_WORD, 0},
    {"any", K_ALL, 0},
};

struct esc {
    enum { E_CHAR, E_SET, E_ASSERT } kind;
    uint32_t cp;         /* E_CHAR */
    uint8_t skind, sneg; /* E_SET: item kind, negated */
    uint32_t svalue;     /* E_SET: item value */
    uint8_t ascii[16];   /* E_SET with ASCII-only members (\h): their bitmap */
    int ascii_only;      /* E_SET: \h / \H (members are ASCII) */
    uint8_t as;          /* E_ASSERT */
    size_t end;
};

static void hex_digits_bitmap(uint8_t *bm)
{
    memset(bm, 0, 16);
    for (int ch = 0; ch < 128; ch++)
        if (hexval(ch) >= 0)
            bm[ch >> 3] |= (uint8_t)(1u << (ch & 7));
}

/* The escape at p[i] == '\\'. */
static int parse_escape(struct rc *c, size_t i, int in_class, struct esc *e)
{
    memset(e, 0, sizeof *e);
    if (i + 1 >= c->n)
        return fail(c, i, "the pattern ends in a backslash");
    int ch = c->p[i + 1];
    e->end = i + 2;
    e->kind = E_SET;
    switch (ch) {
    case 'p':
    case 'P': {
        if (i + 2 >= c->n || c->p[i + 2] != '{')
            return fail(c, i, "\\%c needs a braced property name, as in \\%c{L}", ch, ch);
        size_t j = i + 3;
        char name[40];
        size_t k = 0;
        if (j < c->n && c->p[j] == '^')
            return fail(c, i, "\\%c{^...} (negated property name) is not supported; use \\%c{...}",
                        ch, ch == 'p' ? 'P' : 'p');
        for (; j < c->n && c->p[j] != '}'; j++) {
            int x = c->p[j];
            if (x == ' ' || x == '_' || x == '-')
                continue;
            if (k + 1 >= sizeof name || x >= 0x80)
                return fail(c, i, "unknown property name in \\%c{...}", ch);
            name[k++] = (char)(x >= 'A' && x <= 'Z' ? x + 32 : x);
        }
        if (j >= c->n)
            return fail(c, i, "unterminated \\%c{", ch);
        name[k] = 0;
        e->end = j + 1;
        for (size_t t = 0; t < sizeof pnames / sizeof pnames[0]; t++)
            if (!strcmp(pnames[t].name, name)) {
                e->skind = pnames[t].kind;
                e->svalue = pnames[t].value;
                e->sneg = ch == 'P';
                return 0;
            }
        return fail(c, i,
                    "unsupported property \\%c{%.*s} (general categories, White_Space, "
                    "Alphabetic, Word and Any are)",
                    ch, (int)(j - i - 3), (const char *)c->p + i + 3);
    }
    case 'd':
    case 'D':
        e->skind = K_GC;
        e->svalue = GCB(ND);
        e->sneg = ch == 'D';
        return 0;
    case 's':
    case 'S':
        e->skind = K_PROP;
        e->svalue = NIB_UCD_WHITE_SPACE;
        e->sneg = ch == 'S';
        return 0;
    case 'w':
    case 'W':
        e->skind = K_WORD;
        e->sneg = ch == 'W';
        return 0;
    case 'h':
    case 'H':
        e->ascii_only = 1;
        e->sneg = ch == 'H';
        e->skind = K_HIGH; /* \H: every non-ASCII character too */
        hex_digits_bitmap(e->ascii);
        return 0;
    }
    e->kind = E_CHAR;
    switch (ch) {
    case 'n': e->cp = '\n'; return 0;
    case 'r': e->cp = '\r'; return 0;
    case 't': e->cp = '\t'; return 0;
    case 'f': e->cp = '\f'; return 0;
    case 'v': e->cp = '\v'; return 0;
    case 'a': e->cp = 0x07; return 0;
    case 'e': e->cp = 0x1B; return 0;
    case 'c':
        if (i + 2 < c->n && ((c->p[i + 2] | 0x20) >= 'a' && (c->p[i + 2] | 0x20) <= 'z')) {
            e->cp = c->p[i + 2] & 0x1Fu;
            e->end = i + 3;
            return 0;
        }
        return fail(c, i, "\\c needs a letter");
    case 'x':
        if (i + 2 < c->n && c->p[i + 2] == '{') {
            size_t j = i + 3;
            uint32_t v = 0;
            for (; j < c->n && hexval(c->p[j]) >= 0 && j - (i + 3) < 8; j++)
                v = v * 16 + (uint32_t)hexval(c->p[j]);
            if (j == i + 3 || j >= c->n || c->p[j] != '}')
                return fail(c, i, "malformed \\x{...}");
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                return fail(c, i, "\\x{%X} is not a Unicode scalar value", v);
            e->cp = v;
            e->end = j + 1;
            return 0;
        }
        if (i + 3 < c->n && hexval(c->p[i + 2]) >= 0 && hexval(c->p[i + 3]) >= 0) {
            e->cp = (uint32_t)(hexval(c->p[i + 2]) * 16 + hexval(c->p[i + 3]));
            e->end = i + 4;
            return 0;
        }
        return fail(c, i, "\\x needs two hex digits or braces");
    case 'u': {
        uint32_t v = 0;
        for (size_t j = i + 2; j < i + 6; j++) {
            if (j >= c->n || hexval(c->p[j]) < 0)
                return fail(c, i, "\\u needs four hex digits");
            v = v * 16 + (uint32_t)hexval(c->p[j]);
        }
        if (v >= 0xD800 && v <= 0xDFFF)
            return fail(c, i, "\\u%04X is a surrogate", v);
        e->cp = v;
        e->end = i + 6;
        return 0;
    }
    }
    if (!in_class) {
        e->kind = E_ASSERT;
        switch (ch) {
        case 'A': e->as = AS_BEGIN; return 0;
        case 'z': e->as = AS_END; return 0;
        case 'Z': e->as = AS_END_NL; return 0;
        case 'b': e->as = AS_WORDB; return 0;
        case 'B': e->as = AS_NWORDB; return 0;
        }
        e->kind = E_CHAR;
    }
    if (ch >= '0' && ch <= '9')
        return fail(c, i, "backreference or octal escape \\%c is not supported", ch);
    if (ch == 'k' || ch == 'g')
        return fail(c, i, "\\%c (named backreference or subexpression call) is not supported", ch);
    if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z')
        return fail(c, i, "unsupported escape \\%c", ch);
    int l = pat_char(c, i + 1, &e->cp);
    if (l < 0)
        return -1;
    e->end = i + 1 + (size_t)l;
    return 0;
}

static void cls_init(struct cls *k)
{
    memset(k->ascii, 0, sizeof k->ascii);
    k->neg = 0;
    k->nitems = 0;
    k->nr = 0;
}

static int cls_range(struct rc *c, size_t at, struct cls *k, uint32_t lo, uint32_t hi)
{
    for (; lo <= hi && lo < 0x80; lo++)
        k->ascii[lo >> 3] |= (uint8_t)(1u << (lo & 7));
    if (lo > hi)
        return 0;
    if (k->nr >= RE_MAX_RANGES)
        return fail(c, at, "character class too large (over %d ranges)", RE_MAX_RANGES);
    k->r[k->nr][0] = lo;
    k->r[k->nr][1] = hi;
    k->nr++;
    return 0;
}

static int cls_set(struct rc *c, size_t at, struct cls *k, const struct esc *e)
{
    if (e->ascii_only) { /* \h: ASCII members; \H: their complement */
        for (int ch = 0; ch < 128; ch++)
            if (((e->ascii[ch >> 3] >> (ch & 7)) & 1) != e->sneg)
                k->ascii[ch >> 3] |= (uint8_t)(1u << (ch & 7));
        if (!e->sneg)
            return 0;
    }
    if (k->nitems >= RE_MAX_ITEMS)
        return fail(c, at, "character class too complex (over %d sets)", RE_MAX_ITEMS);
    k->items[k->nitems].kind = e->skind;
    k->items[k->nitems].neg = e->ascii_only ? 0 : e->sneg;
    k->items[k->nitems].value = e->svalue;
    k->nitems++;
    return 0;
}

static void fold_ascii(uint8_t *bm)
{
    for (int ch = 'A'; ch <= 'Z'; ch++) {
        int u = (bm[ch >> 3] >> (ch & 7)) & 1, l = (bm[(ch + 32) >> 3] >> ((ch + 32) & 7)) & 1;
        if (u != l) {
            bm[ch >> 3] |= (uint8_t)(1u << (ch & 7));
            bm[(ch + 32) >> 3] |= (uint8_t)(1u << ((ch + 32) & 7));
        }
    }
}

static int cmp_range(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Finish k into a data record; *first gets the bytes it can start with. */
static uint32_t cls_store(struct rc *c, struct cls *k, int fold, uint8_t first[32])
{
    uint8_t bm[16];
    memcpy(bm, k->ascii, 16);
    for (unsigned i = 0; i < k->nitems; i++)
        for (uint32_t ch = 0; ch < 0x80 && k->items[i].kind != K_HIGH; ch++) {
            unsigned props = nib_ucd_props(ch);
            int t = item_true(k->items[i].kind, k->items[i].value, NULL, 0, ch, props);
            if (t != k->items[i].neg)
                bm[ch >> 3] |= (uint8_t)(1u << (ch & 7));
        }
    if (fold)
        fold_ascii(bm);
    if (k->neg)
        for (int i = 0; i < 16; i++)
            bm[i] = (uint8_t)~bm[i];
    /* merge the ranges */
    if (k->nr > 1)
        qsort(k->r, k->nr, sizeof k->r[0], cmp_range);
    unsigned m = 0;
    for (unsigned i = 0; i < k->nr; i++) {
        if (m && k->r[i][0] <= k->r[m - 1][1] + 1) {
            if (k->r[i][1] > k->r[m - 1][1])
                k->r[m - 1][1] = k->r[i][1];
        } else {
            k->r[m][0] = k->r[i][0];
            k->r[m][1] = k->r[i][1];
            m++;
        }
    }
    k->nr = m;
    unsigned nitems = k->nitems + (m > 0);
    size_t size = CLS_HDR + 8 * (size_t)nitems + 8 * (size_t)m;
    uint8_t *rec = c->rec;
    wr32(rec, (uint32_t)size);
    wr32(rec + 4, k->neg ? CLS_NEG : 0);
    memcpy(rec + 8, bm, 16);
    wr32(rec + 24, nitems);
    uint8_t *it = rec + CLS_HDR;
    /* categories first: the cheapest and most common test */
    for (int pass = 0; pass < 2; pass++)
        for (unsigned i = 0; i < k->nitems; i++) {
            if ((k->items[i].kind == K_GC) != (pass == 0))
                continue;
            wr32(it, k->items[i].kind | (k->items[i].neg ? ITEM_NEG : 0));
            wr32(it + 4, k->items[i].value);
            it += 8;
        }
    if (m) {
        wr32(it, K_RANGES | (uint32_t)m << 16);
        wr32(it + 4, 0);
        it += 8;
        for (unsigned i = 0; i < m; i++, it += 8) {
            wr32(it, k->r[i][0]);
            wr32(it + 4, k->r[i][1]);
        }
    }
    for (int ch = 0; ch < 128; ch++)
        if ((bm[ch >> 3] >> (ch & 7)) & 1)
            first[ch >> 3] |= (uint8_t)(1u << (ch & 7));
    if (k->neg || nitems)
        memset(first + 16, 0xFF, 16);
    return add_data(c, rec, size);
}

/* [...] at p[i]: parse into k; returns the index after ']' or 0. */
static size_t parse_class(struct rc *c, size_t i, struct cls *k)
{
    size_t start = i++;
    cls_init(k);
    if (i < c->n && c->p[i] == '^') {
        k->neg = 1;
        i++;
    }
    /* Nested classes ([a[bc]], as Bloom's tokenizer.json writes) are their
     * union, as in Oniguruma; first[] holds each level's first position
     * (where a ']' is a literal). */
    size_t first[8];
    unsigned depth = 0;
    first[0] = i;
    enum { NONE, SCALAR, SET, RANGE } last = NONE;
    uint32_t pend = 0;
    for (;;) {
        if (i >= c->n)
            return fail0(c, start, "unterminated character class");
        int ch = c->p[i];
        if (ch == ']' && i != first[depth]) {
            if (last == SCALAR && cls_range(c, i, k, pend, pend) < 0)
                return 0;
            if (depth == 0)
                break;
            depth--;
            i++;
            last = SET;
            continue;
        }
        if (ch == '&' && i + 1 < c->n && c->p[i + 1] == '&')
            return fail0(c, i, "class intersection && is not supported");
        if (ch == '-' && last == SCALAR && i + 1 < c->n && c->p[i + 1] != ']') {
            /* a range pend-hi */
            size_t at = i++;
            uint32_t hi;
            if (c->p[i] == '[')
                return fail0(c, at, "range with a set as its end");
            if (c->p[i] == '\\') {
                struct esc e;
                if (parse_escape(c, i, 1, &e) < 0)
                    return 0;
                if (e.kind != E_CHAR)
                    return fail0(c, at, "range with a set as its end");
                hi = e.cp;
                i = e.end;
            } else {
                int l = pat_char(c, i, &hi);
                if (l < 0)
                    return 0;
                i += (size_t)l;
            }
            if (hi < pend)
                return fail0(c, at, "range out of order in class");
            if (cls_range(c, at, k, pend, hi) < 0)
                return 0;
            last = RANGE;
            continue;
        }
        if (ch == '-' && last == SET && !(i + 1 < c->n && c->p[i + 1] == ']'))
            return fail0(c, i, "range with a set as its start");
        if (last == SCALAR && cls_range(c, i, k, pend, pend) < 0)
            return 0;
        if (ch == '[') {
            if (i + 1 < c->n && c->p[i + 1] == ':')
                return fail0(c, i, "POSIX bracket [:...:] is not supported");
            if (i + 1 < c->n && c->p[i + 1] == '^')
                return fail0(c, i, "negated class inside a class is not supported");
            if (depth + 1 >= sizeof first / sizeof first[0])
                return fail0(c, i, "classes nested too deep");
            first[++depth] = ++i;
            last = NONE;
            continue;
        }
        if (ch == '\\') {
            struct esc e;
            if (parse_escape(c, i, 1, &e) < 0)
                return 0;
            if (e.kind == E_SET) {
                if (cls_set(c, i, k, &e) < 0)
                    return 0;
                last = SET;
            } else {
                pend = e.cp;
                last = SCALAR;
            }
            i = e.end;
            continue;
        }
        int l = pat_char(c, i, &pend);
        if (l < 0)
            return 0;
        i += (size_t)l;
        last = SCALAR;
    }
    return i + 1;
}

/* Group prefix at p[i] == '(': its kind and length. */
enum { G_PLAIN, G_FOLD, G_LOOK, G_NLOOK };
static int group_prefix(struct rc *c, size_t i, int *kind, size_t *len)
{
    const uint8_t *q = c->p + i;
    size_t left = c->n - i;
    if (left < 2 || q[1] != '?') {
        *kind = G_PLAIN;
        *len = 1;
        return 0;
    }
    if (left >= 3 && q[2] == ':') {
        *kind = G_PLAIN;
        *len = 3;
        return 0;
    }
    if (left >= 4 && q[2] == 'i' && q[3] == ':') {
        *kind = G_FOLD;
        *len = 4;
        return 0;
    }
    if (left >= 3 && (q[2] == '=' || q[2] == '!')) {
        *kind = q[2] == '=' ? G_LOOK : G_NLOOK;
        *len = 3;
        return 0;
    }
    if (left >= 4 && q[2] == '<' && (q[3] == '=' || q[3] == '!'))
        return fail(c, i, "lookbehind (?<%c is not supported", q[3]);
    if (left >= 3 && (q[2] == '<' || q[2] == 'P' || q[2] == '\''))
        return fail(c, i, "named group is not supported");
    if (left >= 3 && q[2] == '>')
        return fail(c, i, "atomic group (?> is not supported");
    if (left >= 3 && q[2] == '#')
        return fail(c, i, "comment group (?# is not supported");
    return fail(c, i, "inline option or group (?%c is not supported (only (?:, (?i:, (?= and (?!)",
                left >= 3 ? q[2] : '?');
}

/* A quantifier at p[i]: 1 (with *q, *end), 0 when none. */
static int parse_quant(struct rc *c, size_t i, struct quant *q, size_t *end)
{
    if (i >= c->n)
        return 0;
    int ch = c->p[i];
    q->lazy = 0;
    q->brace = 0;
    if (ch == '?' || ch == '*' || ch == '+') {
        q->min = ch == '+';
        q->max = ch == '?' ? 1 : RE_INF;
        *end = i + 1;
    } else if (ch == '{') {
        size_t j = i + 1;
        uint32_t a = 0, b;
        int da = 0, db = 0, comma = 0;
        for (; j < c->n && c->p[j] >= '0' && c->p[j] <= '9'; j++, da++)
            a = a > RE_MAX_REPEAT ? a : a * 10 + (uint32_t)(c->p[j] - '0');
        b = a;
        if (j < c->n && c->p[j] == ',') {
            comma = 1;
            b = 0;
            for (j++; j < c->n && c->p[j] >= '0' && c->p[j] <= '9'; j++, db++)
                b = b > RE_MAX_REPEAT ? b : b * 10 + (uint32_t)(c->p[j] - '0');
        }
        if (j >= c->n || c->p[j] != '}' || (!da && !db) || (!da && !comma))
            return 0; /* not a quantifier: a literal '{' */
        if (comma && !db)
            b = RE_INF;
        if (a > RE_MAX_REPEAT || (b != RE_INF && b > RE_MAX_REPEAT))
            return fail(c, i, "repeat count over %d", RE_MAX_REPEAT);
        if (b < a)
            return fail(c, i, "repeat range {%u,%u} out of order", a, b);
        q->min = a;
        q->max = b;
        q->brace = 1;
        *end = j + 1;
        if (!comma && *end < c->n && c->p[*end] == '?')
            return fail(c, i,
                        "{n}? is not supported (its meaning differs between Oniguruma "
                        "and JavaScript)");
    } else {
        return 0;
    }
    if (*end < c->n && c->p[*end] == '?') {
        q->lazy = 1;
        (*end)++;
    } else if (*end < c->n && c->p[*end] == '+' && !q->brace) {
        return fail(c, *end - 1, "possessive quantifier is not supported");
    }
    return 1;
}

static int skip_atom(struct rc *c, size_t i, size_t *end, unsigned depth);

/* Quantifiers after an atom: up to two (a {n,m} then + or *, which
 * repeats the counted group, as Oniguruma's Ruby syntax reads it). */
static int read_quants(struct rc *c, size_t i, struct quant *q, unsigned *nq, size_t *end)
{
    *nq = 0;
    *end = i;
    int r = parse_quant(c, i, &q[0], end);
    if (r <= 0)
        return r;
    *nq = 1;
    if (q[0].brace && !q[0].lazy && *end < c->n && (c->p[*end] == '+' || c->p[*end] == '*')) {
        q[1].min = c->p[*end] == '+';
        q[1].max = RE_INF;
        q[1].lazy = 0;
        q[1].brace = 0;
        (*end)++;
        if (*end < c->n && c->p[*end] == '?') {
            q[1].lazy = 1;
            (*end)++;
        }
        *nq = 2;
    }
    size_t e2;
    struct quant dummy;
    if (*end < c->n && c->p[*end] != '{' && parse_quant(c, *end, &dummy, &e2) != 0)
        return fail(c, *end, "a quantifier after a quantifier");
    if (*end < c->n && c->p[*end] == '{' && parse_quant(c, *end, &dummy, &e2) > 0)
        return fail(c, *end, "a quantifier after a quantifier");
    return c->bad ? -1 : 1;
}

static int skip_atom(struct rc *c, size_t i, size_t *end, unsigned depth)
{
    int ch = c->p[i];
    if (depth > RE_MAX_DEPTH)
        return fail(c, i, "groups nested deeper than %d", RE_MAX_DEPTH);
    switch (ch) {
    case '(': {
        int kind;
        size_t plen;
        if (group_prefix(c, i, &kind, &plen) < 0)
            return -1;
        size_t j = i + plen;
        while (j < c->n && c->p[j] != ')') {
            if (c->p[j] == '|') {
                j++;
                continue;
            }
            if (skip_atom(c, j, &j, depth + 1) < 0)
                return -1;
            struct quant q[2];
            unsigned nq;
            if (read_quants(c, j, q, &nq, &j) < 0)
                return -1;
        }
        if (j >= c->n)
            return fail(c, i, "unterminated group");
        *end = j + 1;
        return 0;
    }
    case ')': return fail(c, i, "unmatched )");
    case '*':
    case '+':
    case '?': return fail(c, i, "quantifier %c without anything to repeat", ch);
    case '[': { /* parsed in full to find its end (c->k is free here) */
        size_t e = parse_class(c, i, &c->k);
        if (!e)
            return -1;
        *end = e;
        return 0;
    }
    case '\\': {
        struct esc e;
        if (parse_escape(c, i, 0, &e) < 0)
            return -1;
        *end = e.end;
        return 0;
    }
    default: {
        uint32_t cp;
        int l = pat_char(c, i, &cp);
        if (l < 0)
            return -1;
        *end = i + (size_t)l;
        return 0;
    }
    }
}

static void first_or(uint8_t *dst, const uint8_t *src)
{
    for (int i = 0; i < 32; i++)
        dst[i] |= src[i];
}

static void first_byte(uint8_t *first, unsigned b, int fold)
{
    first[b >> 3] |= (uint8_t)(1u << (b & 7));
    if (fold && (b | 0x20) >= 'a' && (b | 0x20) <= 'z') {
        first[(b ^ 0x20) >> 3] |= (uint8_t)(1u << ((b ^ 0x20) & 7));
    }
}

static int c_alt(struct rc *c, size_t beg, size_t end, int fold, unsigned depth, struct info *inf);

/* The single character an atom stands for, as a class (for LOOP), or 0 when
 * the atom is not a single character. */
static int atom_class(struct rc *c, size_t beg, int *foldable)
{
    struct cls *k = &c->k;
    int ch = c->p[beg];
    *foldable = ch == '[';
    if (ch == '[')
        return parse_class(c, beg, k) ? 1 : -1;
    cls_init(k);
    if (ch == '.') {
        k->neg = 1;
        k->ascii['\n' >> 3] |= 1u << ('\n' & 7);
        return 1;
    }
    if (ch == '(' || ch == '^' || ch == '$')
        return 0;
    uint32_t cp;
    if (ch == '\\') {
        struct esc e;
        if (parse_escape(c, beg, 0, &e) < 0)
            return -1;
        if (e.kind == E_ASSERT)
            return 0;
        if (e.kind == E_SET)
            return cls_set(c, beg, k, &e) < 0 ? -1 : 1;
        cp = e.cp;
    } else if (pat_char(c, beg, &cp) < 0) {
        return -1;
    }
    if (cls_range(c, beg, k, cp, cp) < 0)
        return -1;
    *foldable = 1; /* (?i:) folds literals and bracket classes, not \p{..} */
    return 1;
}

static int is_assertion(struct rc *c, size_t beg)
{
    int ch = c->p[beg];
    if (ch == '^' || ch == '$')
        return 1;
    if (ch == '\\' && beg + 1 < c->n)
        return strchr("AzZbB", c->p[beg + 1]) != NULL;
    if (ch == '(' && beg + 2 < c->n && c->p[beg + 1] == '?')
        return c->p[beg + 2] == '=' || c->p[beg + 2] == '!';
    return 0;
}

static int emit_atom(struct rc *c, size_t beg, size_t end, int fold, unsigned depth,
                     struct info *inf)
{
    int ch = c->p[beg];
    memset(inf, 0, sizeof *inf);
    if (ch == '(') {
        int kind;
        size_t plen;
        if (group_prefix(c, beg, &kind, &plen) < 0)
            return -1;
        if (depth >= RE_MAX_DEPTH)
            return fail(c, beg, "groups nested deeper than %d", RE_MAX_DEPTH);
        if (kind == G_PLAIN || kind == G_FOLD)
            return c_alt(c, beg + plen, end - 1, fold || kind == G_FOLD, depth + 1, inf);
        uint32_t look = emit(c, OP_LOOK, kind == G_NLOOK ? FL_NEG : 0, 0, 0, c->nlook++);
        struct ins in = get_ins(c, look);
        in.a = look + 1;
        c->pushes++;
        struct info body;
        if (c_alt(c, beg + plen, end - 1, fold, depth + 1, &body) < 0)
            return -1;
        emit(c, OP_LMATCH, 0, 0, 0, 0);
        in.b = c->ninst;
        put_ins(c, look, in);
        inf->nullable = 1;
        return c->bad ? -1 : 0;
    }
    if (ch == '^' || ch == '$') {
        emit(c, OP_ASSERT, ch == '^' ? AS_BOL : AS_EOL, 0, 0, 0);
        inf->nullable = 1;
        return c->bad ? -1 : 0;
    }
    if (ch == '.') {
        emit(c, OP_ANY, 0, 0, 0, 0);
        memset(inf->first, 0xFF, 32);
        inf->first['\n' >> 3] &= (uint8_t) ~(1u << ('\n' & 7));
        return c->bad ? -1 : 0;
    }
    if (ch == '\\') {
        struct esc e;
        if (parse_escape(c, beg, 0, &e) < 0)
            return -1;
        if (e.kind == E_ASSERT) {
            emit(c, OP_ASSERT, e.as, 0, 0, 0);
            inf->nullable = 1;
            return c->bad ? -1 : 0;
        }
    }
    int foldable, r = atom_class(c, beg, &foldable);
    if (r < 0)
        return -1;
    uint32_t off = cls_store(c, &c->k, fold && foldable, inf->first);
    emit(c, OP_CLASS, 0, off, 0, 0);
    return c->bad ? -1 : 0;
}

/* Roll the program back to a mark (for {0}: the atom is checked, then
 * dropped). */
struct mark {
    uint32_t ninst, nlook, nloop, pushes, per_byte;
    size_t dtop;
};

static struct mark save(struct rc *c)
{
    struct mark m = {c->ninst, c->nlook, c->nloop, c->pushes, c->per_byte, c->dtop};
    return m;
}

static void restore(struct rc *c, struct mark m)
{
    for (uint32_t pc = m.ninst; pc < c->ninst && pc < RE_MAX_INST; pc++)
        c->target[pc >> 3] &= (uint8_t) ~(1u << (pc & 7));
    c->ninst = m.ninst;
    c->nlook = m.nlook;
    c->nloop = m.nloop;
    c->pushes = m.pushes;
    c->per_byte = m.per_byte;
    c->dtop = m.dtop;
}

/* A split whose first branch cannot match here is skipped without a push:
 * give it that branch's first bytes (when the branch cannot match empty). */
static void guard(struct rc *c, uint32_t split, const struct info *first_branch)
{
    if (c->bad || first_branch->nullable)
        return;
    struct ins in = get_ins(c, split);
    in.c = add_data(c, first_branch->first, 32);
    put_ins(c, split, in);
}

static int emit_piece(struct rc *c, size_t beg, size_t end, const struct quant *q, unsigned nq,
                      int fold, unsigned depth, struct info *inf)
{
    if (nq == 0)
        return emit_atom(c, beg, end, fold, depth, inf);
    struct quant Q = q[nq - 1];
    if (is_assertion(c, beg))
        return fail(c, beg, "a quantifier on an assertion");
    memset(inf, 0, sizeof *inf);
    if (nq == 1) {
        int foldable, r = atom_class(c, beg, &foldable);
        if (r < 0)
            return -1;
        if (r == 1) {
            struct info ci = {0, {0}};
            uint32_t off = cls_store(c, &c->k, fold && foldable, ci.first);
            if (Q.max == 0) {
                inf->nullable = 1;
                return c->bad ? -1 : 0;
            }
            uint32_t idx = 0xFFFF;
            if (!Q.lazy && Q.max == RE_INF) {
                if (c->nloop >= 0xFFFF)
                    return fail(c, beg, "too many loops");
                idx = c->nloop++;
            }
            uint32_t pc = emit(c, OP_LOOP, Q.lazy ? FL_LAZY : 0, off, Q.min | idx << 16, Q.max);
            mark(c, pc + 1);
            if (Q.max > Q.min)
                c->pushes++;
            inf->nullable = Q.min == 0;
            memcpy(inf->first, ci.first, 32);
            return c->bad ? -1 : 0;
        }
    }
    if (Q.max == 0) {
        struct mark m = save(c);
        struct info dummy;
        int r = emit_piece(c, beg, end, q, nq - 1, fold, depth, &dummy);
        restore(c, m);
        inf->nullable = 1;
        return r;
    }
    struct info body;
    int have_body = 0;
    uint32_t copies = Q.max == RE_INF ? (Q.min ? Q.min - 1 : 0) : Q.min;
    for (uint32_t k = 0; k < copies; k++) {
        if (emit_piece(c, beg, end, q, nq - 1, fold, depth, &body) < 0)
            return -1;
        have_body = 1;
    }
    if (Q.max == RE_INF) {
        uint32_t before = c->pushes, top, split;
        if (Q.min == 0) {
            top = split = emit(c, OP_SPLIT, 0, 0, 0, 0);
            mark(c, top);
            if (emit_piece(c, beg, end, q, nq - 1, fold, depth, &body) < 0)
                return -1;
            emit(c, OP_JMP, 0, top, 0, 0);
            struct ins in = get_ins(c, split);
            in.a = Q.lazy ? c->ninst : split + 1;
            in.b = Q.lazy ? split + 1 : c->ninst;
            put_ins(c, split, in);
            mark(c, split + 1);
            if (!Q.lazy)
                guard(c, split, &body);
        } else {
            top = c->ninst;
            mark(c, top);
            if (emit_piece(c, beg, end, q, nq - 1, fold, depth, &body) < 0)
                return -1;
            split = emit(c, OP_SPLIT, 0, 0, 0, 0);
            struct ins in = get_ins(c, split);
            in.a = Q.lazy ? split + 1 : top;
            in.b = Q.lazy ? top : split + 1;
            put_ins(c, split, in);
            if (!Q.lazy)
                guard(c, split, &body);
        }
        mark(c, c->ninst);
        c->pushes++;
        if (body.nullable)
            return fail(c, beg, "a repeated group that can match the empty string");
        uint32_t per = c->pushes - before;
        if (per > c->per_byte)
            c->per_byte = per;
        inf->nullable = Q.min == 0;
        memcpy(inf->first, body.first, 32);
        return c->bad ? -1 : 0;
    }
    /* {min,max}: max - min nested optional copies, each skip going to the end */
    uint32_t chain = RE_NONE;
    for (uint32_t k = Q.min; k < Q.max; k++) {
        uint32_t split = emit(c, OP_SPLIT, 0, RE_NONE, RE_NONE, 0);
        struct ins in = get_ins(c, split);
        if (Q.lazy)
            in.a = chain;
        else
            in.b = chain;
        put_ins(c, split, in);
        chain = split;
        mark(c, split + 1);
        c->pushes++;
        if (emit_piece(c, beg, end, q, nq - 1, fold, depth, &body) < 0)
            return -1;
        have_body = 1;
    }
    uint32_t join = c->ninst;
    mark(c, join);
    while (chain != RE_NONE && !c->bad) {
        struct ins in = get_ins(c, chain);
        uint32_t next = Q.lazy ? in.a : in.b;
        if (Q.lazy) {
            in.a = join;
            in.b = chain + 1;
        } else {
            in.a = chain + 1;
            in.b = join;
        }
        put_ins(c, chain, in);
        if (!Q.lazy)
            guard(c, chain, &body);
        chain = next;
    }
    inf->nullable = Q.min == 0 || (have_body && body.nullable);
    if (have_body)
        memcpy(inf->first, body.first, 32);
    return c->bad ? -1 : 0;
}

static int c_seq(struct rc *c, size_t beg, size_t end, int fold, unsigned depth, struct info *inf)
{
    uint8_t lit[64];
    size_t litn = 0;
    memset(inf, 0, sizeof *inf);
    inf->nullable = 1;
    size_t i = beg;
    while (i < end && !c->bad) {
        size_t aend, qend;
        struct quant q[2];
        unsigned nq;
        if (skip_atom(c, i, &aend, depth) < 0 || read_quants(c, aend, q, &nq, &qend) < 0)
            return -1;
        if (aend > end || qend > end)
            return fail(c, i, "malformed pattern");
        uint32_t cp = RE_NONE;
        if (nq == 0 && c->p[i] != '(' && c->p[i] != '[' && c->p[i] != '.' && c->p[i] != '^' &&
            c->p[i] != '$') {
            if (c->p[i] == '\\') {
                struct esc e;
                if (parse_escape(c, i, 0, &e) < 0)
                    return -1;
                if (e.kind == E_CHAR)
                    cp = e.cp;
            } else if (pat_char(c, i, &cp) < 0) {
                return -1;
            }
        }
        if (cp != RE_NONE) { /* literal text: gather */
            uint8_t u[4];
            unsigned l = nib_utf8_encode(cp, u);
            if (litn + l > sizeof lit) {
                if (inf->nullable)
                    first_byte(inf->first, lit[0], fold);
                inf->nullable = 0;
                emit(c, OP_STR, fold ? FL_FOLD : 0, add_data(c, lit, litn), (uint32_t)litn, 0);
                litn = 0;
            }
            for (unsigned t = 0; t < l; t++)
                lit[litn++] = fold && u[t] >= 'A' && u[t] <= 'Z' ? u[t] + 32 : u[t];
            i = qend;
            continue;
        }
        if (litn) {
            if (inf->nullable)
                first_byte(inf->first, lit[0], fold);
            inf->nullable = 0;
            emit(c, OP_STR, fold ? FL_FOLD : 0, add_data(c, lit, litn), (uint32_t)litn, 0);
            litn = 0;
        }
        struct info pi;
        if (emit_piece(c, i, aend, q, nq, fold, depth, &pi) < 0)
            return -1;
        if (inf->nullable)
            first_or(inf->first, pi.first);
        inf->nullable = inf->nullable && pi.nullable;
        i = qend;
    }
    if (litn) {
        if (inf->nullable)
            first_byte(inf->first, lit[0], fold);
        inf->nullable = 0;
        emit(c, OP_STR, fold ? FL_FOLD : 0, add_data(c, lit, litn), (uint32_t)litn, 0);
    }
    return c->bad ? -1 : 0;
}

/* The next top-level '|' in [i, end), or end. */
static int find_bar(struct rc *c, size_t i, size_t end, unsigned depth, size_t *bar)
{
    while (i < end) {
        if (c->p[i] == '|')
            break;
        struct quant q[2];
        unsigned nq;
        if (skip_atom(c, i, &i, depth) < 0 || read_quants(c, i, q, &nq, &i) < 0)
            return -1;
    }
    *bar = i < end ? i : end;
    return 0;
}

/* For a chain of guarded alternatives: per next byte (256: end of text), the
 * first instruction of the chain that is not a guarded split refusing it,
 * so that the matcher jumps there at once. */
static void jump_table(struct rc *c, uint32_t split)
{
    struct ins in = get_ins(c, split);
    if (!in.c)
        return;
    uint8_t rec[TABLE_BYTES];
    memcpy(rec, c->prog + c->cap - in.c, 32);
    for (unsigned b = 0; b <= 256; b++) {
        uint32_t t = split;
        for (uint32_t steps = 0; steps < c->ninst && t < c->ninst; steps++) {
            struct ins x = get_ins(c, t); /* (t == ninst: the join, not emitted yet) */
            if (x.op != OP_SPLIT || !x.c || x.b <= t)
                break;
            const uint8_t *f = c->prog + c->cap - x.c;
            if (b < 256 && ((f[b >> 3] >> (b & 7)) & 1))
                break;
            t = x.b;
        }
        wr16(rec + 32 + 2 * b, (uint16_t)t);
    }
    in.c = add_data(c, rec, sizeof rec);
    in.fl = FL_TABLE;
    put_ins(c, split, in);
}

static int c_alt(struct rc *c, size_t beg, size_t end, int fold, unsigned depth, struct info *inf)
{
    uint32_t chain = RE_NONE, first_split = RE_NONE;
    size_t cur = beg;
    memset(inf, 0, sizeof *inf);
    for (;;) {
        size_t bar;
        if (find_bar(c, cur, end, depth, &bar) < 0)
            return -1;
        uint32_t split = RE_NONE;
        if (bar < end) {
            split = emit(c, OP_SPLIT, 0, c->ninst + 1, 0, 0);
            if (first_split == RE_NONE)
                first_split = split;
            mark(c, split + 1);
            c->pushes++;
        }
        struct info ai;
        if (c_seq(c, cur, bar, fold, depth, &ai) < 0)
            return -1;
        if (split != RE_NONE)
            guard(c, split, &ai);
        first_or(inf->first, ai.first);
        inf->nullable |= ai.nullable;
        if (bar >= end)
            break;
        uint32_t j = emit(c, OP_JMP, 0, chain, 0, 0);
        chain = j;
        struct ins in = get_ins(c, split);
        in.b = c->ninst;
        put_ins(c, split, in);
        mark(c, c->ninst);
        cur = bar + 1;
    }
    uint32_t join = c->ninst;
    mark(c, join);
    while (chain != RE_NONE && !c->bad) {
        struct ins in = get_ins(c, chain);
        uint32_t next = in.a;
        in.a = join;
        put_ins(c, chain, in);
        chain = next;
    }
    if (first_split != RE_NONE && !c->bad)
        jump_table(c, first_split);
    return c->bad ? -1 : 0;
}

int nib_re_compile(const char *pat, size_t len, uint8_t *prog, size_t cap, size_t *used, char *err,
                   size_t errlen)
{
    struct rc c;
    memset(&c, 0, sizeof c);
    c.p = (const uint8_t *)pat;
    c.n = len;
    c.prog = prog;
    c.cap = cap;
    c.err = err;
    c.errlen = errlen;
    if (err && errlen)
        err[0] = 0;
    if (cap < RE_HDR + RE_INS || cap > 0x7FFFFFFF)
        return fail(&c, 0, "program buffer of %zu bytes is too small", cap);
    if (len > 0xFFFFFF)
        return fail(&c, 0, "pattern too long");
    struct info inf;
    mark(&c, 0);
    if (c_alt(&c, 0, len, 0, 0, &inf) < 0)
        return -1;
    emit(&c, OP_MATCH, 0, 0, 0, 0);
    if (c.bad)
        return -1;
    /* memo slots for branch targets */
    uint32_t nmemo = 0;
    for (uint32_t pc = 0; pc < c.ninst; pc++) {
        if (!((c.target[pc >> 3] >> (pc & 7)) & 1))
            continue;
        if (nmemo >= RE_NO_MEMO)
            return fail(&c, 0, "pattern has too many branches");
        wr16(ins_at(&c, pc) + 2, (uint16_t)nmemo++);
    }
    /* data after the code; offsets from the end become offsets from its start */
    size_t code_end = RE_HDR + (size_t)RE_INS * c.ninst, dlen = c.dtop;
    memmove(prog + code_end, prog + cap - dlen, dlen);
    for (uint32_t pc = 0; pc < c.ninst; pc++) {
        struct ins in = get_ins(&c, pc);
        if (in.op == OP_STR || in.op == OP_CLASS || in.op == OP_LOOP) {
            in.a = (uint32_t)dlen - in.a;
            put_ins(&c, pc, in);
        }
        if (in.op == OP_SPLIT && in.c) {
            in.c = (uint32_t)dlen - in.c + 1;
            put_ins(&c, pc, in);
        }
    }
    if (nmemo + 2 * c.nlook > RE_MAX_ROW_BITS)
        return fail(&c, 0,
                    "pattern too complex: %u branch points and %u lookaheads (at most %d "
                    "branch points + 2 per lookahead)",
                    nmemo, c.nlook, RE_MAX_ROW_BITS);
    if (c.per_byte > RE_MAX_PER_BYTE)
        return fail(&c, 0,
                    "pattern too complex: a repeated group holds %u alternatives (at most %d)",
                    c.per_byte, RE_MAX_PER_BYTE);
    memset(prog, 0, RE_HDR);
    wr32(prog + H_MAGIC, RE_MAGIC);
    wr32(prog + H_LEN, (uint32_t)(code_end + dlen));
    wr32(prog + H_NINST, c.ninst);
    wr32(prog + H_DLEN, (uint32_t)dlen);
    wr16(prog + H_NMEMO, (uint16_t)nmemo);
    wr16(prog + H_NLOOK, (uint16_t)c.nlook);
    wr16(prog + H_NLOOP, (uint16_t)c.nloop);
    wr16(prog + H_PERBYTE, (uint16_t)c.per_byte);
    wr32(prog + H_SBASE, c.pushes + 8);
    wr32(prog + H_FLAGS, inf.nullable ? HF_NULLABLE : 0);
    memcpy(prog + H_FIRST, inf.first, 32);
    *used = code_end + dlen;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Checker                                                             */

static int bad_prog(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        int k = snprintf(err, errlen, "regex program: ");
        if (k >= 0 && (size_t)k < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static int check_class(const uint8_t *data, uint32_t dlen, uint32_t off, char *err, size_t errlen)
{
    if (off % 4 || off > dlen || dlen - off < CLS_HDR)
        return bad_prog(err, errlen, "class offset %u out of range", off);
    const uint8_t *k = data + off;
    uint32_t size = rd32(k), flags = rd32(k + 4), nitems = rd32(k + 24);
    if (size < CLS_HDR || size > dlen - off || size % 4 || flags > CLS_NEG ||
        nitems > RE_MAX_ITEMS + 1)
        return bad_prog(err, errlen, "malformed class at %u", off);
    uint32_t at = CLS_HDR;
    for (uint32_t i = 0; i < nitems; i++) {
        if (size - at < 8)
            return bad_prog(err, errlen, "class at %u: items overrun it", off);
        uint32_t head = rd32(k + at), kind = head & 0xFF, count = head >> 16;
        if (kind < K_GC || kind >= K_END || (head & 0xFE00) || (kind != K_RANGES && count))
            return bad_prog(err, errlen, "class at %u: bad item", off);
        at += 8;
        if (kind == K_RANGES) {
            if (!count || (size - at) / 8 < count)
                return bad_prog(err, errlen, "class at %u: ranges overrun it", off);
            uint32_t prev = 0;
            for (uint32_t r = 0; r < count; r++, at += 8) {
                uint32_t lo = rd32(k + at), hi = rd32(k + at + 4);
                if (lo > hi || hi > 0x10FFFF || (r && lo <= prev))
                    return bad_prog(err, errlen, "class at %u: ranges unsorted or invalid", off);
                prev = hi;
            }
        }
    }
    if (at != size)
        return bad_prog(err, errlen, "class at %u: size mismatch", off);
    return 0;
}

int nib_re_check(const uint8_t *prog, size_t len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    if (!prog || len < RE_HDR || rd32(prog + H_MAGIC) != RE_MAGIC)
        return bad_prog(err, errlen, "bad header");
    uint32_t total = rd32(prog + H_LEN), ninst = rd32(prog + H_NINST), dlen = rd32(prog + H_DLEN);
    uint32_t nmemo = rd16(prog + H_NMEMO), nlook = rd16(prog + H_NLOOK);
    uint32_t nloop = rd16(prog + H_NLOOP), per = rd16(prog + H_PERBYTE);
    uint32_t sbase = rd32(prog + H_SBASE), flags = rd32(prog + H_FLAGS);
    if (total != len || ninst == 0 || ninst > RE_MAX_INST ||
        (uint64_t)RE_HDR + (uint64_t)RE_INS * ninst + dlen != len)
        return bad_prog(err, errlen, "sizes do not add up (%zu bytes)", len);
    if (nmemo > ninst || nlook > ninst || nloop > ninst || per > RE_MAX_PER_BYTE ||
        nmemo + 2 * nlook > RE_MAX_ROW_BITS || sbase > 2 * ninst + 16 || flags > HF_NULLABLE)
        return bad_prog(err, errlen, "header counts out of range");
    const uint8_t *code = prog + RE_HDR, *data = code + (size_t)RE_INS * ninst;
    for (uint32_t pc = 0; pc < ninst; pc++) {
        struct ins in;
        memcpy(&in, code + (size_t)RE_INS * pc, sizeof in);
        int next = 0;
        if (in.memo != RE_NO_MEMO && in.memo >= nmemo)
            return bad_prog(err, errlen, "instruction %u: memo slot out of range", pc);
        switch (in.op) {
        case OP_MATCH:
        case OP_LMATCH: break;
        case OP_STR:
            if (in.b == 0 || in.a > dlen || in.b > dlen - in.a || in.fl > FL_FOLD)
                return bad_prog(err, errlen, "instruction %u: string out of range", pc);
            next = 1;
            break;
        case OP_CLASS:
            if (check_class(data, dlen, in.a, err, errlen) < 0)
                return -1;
            next = 1;
            break;
        case OP_ANY: next = 1; break;
        case OP_SPLIT:
            if (in.a >= ninst || in.b >= ninst)
                return bad_prog(err, errlen, "instruction %u: jump out of range", pc);
            if (in.c && ((in.c - 1) % 4 || in.c - 1 > dlen ||
                         dlen - (in.c - 1) < (in.fl & FL_TABLE ? TABLE_BYTES : 32)))
                return bad_prog(err, errlen, "instruction %u: first-byte set out of range", pc);
            if (in.fl > FL_TABLE || ((in.fl & FL_TABLE) && !in.c))
                return bad_prog(err, errlen, "instruction %u: bad split flags", pc);
            if (in.fl & FL_TABLE)
                for (unsigned b = 0; b <= 256; b++)
                    if (rd16(data + in.c - 1 + 32 + 2 * b) >= ninst)
                        return bad_prog(err, errlen, "instruction %u: jump table out of range", pc);
            break;
        case OP_JMP:
            if (in.a >= ninst)
                return bad_prog(err, errlen, "instruction %u: jump out of range", pc);
            break;
        case OP_LOOP: {
            uint32_t min = in.b & 0xFFFF, idx = in.b >> 16;
            if (check_class(data, dlen, in.a, err, errlen) < 0)
                return -1;
            if (min > in.c || in.fl > FL_LAZY ||
                (!(in.fl & FL_LAZY) && in.c == RE_INF && idx >= nloop))
                return bad_prog(err, errlen, "instruction %u: bad loop", pc);
            next = 1;
            break;
        }
        case OP_ASSERT:
            if (in.fl < AS_BOL || in.fl >= AS_END_KIND)
                return bad_prog(err, errlen, "instruction %u: bad assertion", pc);
            next = 1;
            break;
        case OP_LOOK:
            if (in.a >= ninst || in.b >= ninst || in.c >= nlook || in.fl > FL_NEG)
                return bad_prog(err, errlen, "instruction %u: bad lookahead", pc);
            break;
        default: return bad_prog(err, errlen, "instruction %u: unknown operation %u", pc, in.op);
        }
        if (next && pc + 1 >= ninst)
            return bad_prog(err, errlen, "instruction %u runs off the end", pc);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Matcher                                                             */

enum { BT_ALT = 1, BT_GIVE, BT_LAZY, BT_BARRIER };
struct bt {
    uint32_t pc, pos, x, kind;
};

struct hdr {
    uint32_t ninst, nmemo, nlook, nloop, per, sbase, flags;
    size_t rowb;
};

static struct hdr read_hdr(const uint8_t *prog)
{
    struct hdr h;
    h.ninst = rd32(prog + H_NINST);
    h.nmemo = rd16(prog + H_NMEMO);
    h.nlook = rd16(prog + H_NLOOK);
    h.nloop = rd16(prog + H_NLOOP);
    h.per = rd16(prog + H_PERBYTE);
    h.sbase = rd32(prog + H_SBASE);
    h.flags = rd32(prog + H_FLAGS);
    h.rowb = (h.nmemo + 2 * (size_t)h.nlook + 7) / 8;
    if (h.rowb == 0)
        h.rowb = 1;
    return h;
}

static size_t align8(size_t x)
{
    return (x + 7) & ~(size_t)7;
}

static size_t stack_cap(const struct hdr *h, size_t n)
{
    return (size_t)h->per * (n + 1) + h->sbase + 16;
}

size_t nib_re_scratch_footprint(const uint8_t *prog, size_t len, size_t n)
{
    (void)len;
    struct hdr h = read_hdr(prog);
    return align8((n + 1) * h.rowb) + align8((size_t)h.nloop * 8) +
           stack_cap(&h, n) * sizeof(struct bt);
}

struct m {
    const uint8_t *code, *data;
    const uint8_t *s;
    size_t n, from;
    uint8_t *rows;
    size_t rowb, cleared;
    uint32_t nmemo;
    uint32_t *iv;
    struct bt *st;
    size_t cap, sp;
    int64_t budget;
    int memo; /* the memo is in use (the second, bounded attempt) */
};

static inline uint8_t *row(struct m *m, size_t pos)
{
    /* rows count from the search's start, so that the successive searches
     * of a split reuse the same (cached) memory */
    size_t r = pos - m->from;
    if (r >= m->cleared) {
        memset(m->rows + m->cleared * m->rowb, 0, (r + 1 - m->cleared) * m->rowb);
        m->cleared = r + 1;
    }
    return m->rows + r * m->rowb;
}

/* Test-and-set a memo bit: 1 when it was set already. */
static inline int seen(struct m *m, uint32_t bit, size_t pos)
{
    uint8_t *r = row(m, pos), b = (uint8_t)(1u << (bit & 7));
    if (r[bit >> 3] & b)
        return 1;
    r[bit >> 3] |= b;
    return 0;
}

static inline int peek_seen(struct m *m, uint32_t bit, size_t pos)
{
    return (row(m, pos)[bit >> 3] >> (bit & 7)) & 1;
}

static inline struct ins load(const struct m *m, uint32_t pc)
{
    struct ins in;
    memcpy(&in, m->code + (size_t)RE_INS * pc, sizeof in);
    return in;
}

/* Whether the byte at pos is in the first-byte set at data offset c - 1. */
static inline int first_ok(const struct m *m, uint32_t c, size_t pos)
{
    const uint8_t *f = m->data + c - 1;
    return pos < m->n && ((f[m->s[pos] >> 3] >> (m->s[pos] & 7)) & 1);
}

static int push(struct m *m, uint32_t kind, uint32_t pc, size_t pos, uint32_t x)
{
    if (m->sp >= m->cap)
        return -1;
    struct bt *b = &m->st[m->sp++];
    b->kind = kind;
    b->pc = pc;
    b->pos = (uint32_t)pos;
    b->x = x;
    return 0;
}

static int assert_ok(const struct m *m, unsigned kind, size_t pos)
{
    const uint8_t *s = m->s;
    size_t n = m->n;
    switch (kind) {
    case AS_BOL: return pos == 0 || s[pos - 1] == '\n';
    case AS_EOL: return pos == n || s[pos] == '\n';
    case AS_BEGIN: return pos == 0;
    case AS_END: return pos == n;
    case AS_END_NL: return pos == n || (pos + 1 == n && s[pos] == '\n');
    default: {
        uint32_t a = 0, b = 0;
        int wa = 0, wb = 0;
        if (pos > 0) {
            size_t p = nib_utf8_prev(s, pos);
            nib_utf8_decode(s + p, pos - p, &a);
            wa = is_word_cp(a);
        }
        if (pos < n) {
            nib_utf8_decode(s + pos, n - pos, &b);
            wb = is_word_cp(b);
        }
        return (wa != wb) == (kind == AS_WORDB);
    }
    }
}

/* The start of the character before `end`, not looking below `lo`. */
static inline size_t prev_char(const uint8_t *s, size_t lo, size_t end)
{
    size_t p = nib_utf8_prev(s + lo, end - lo);
    return lo + p;
}

/* Backtracking run from (pc 0, start): 1 with *end, 0, or -1 (bounds). */
#define RETURN(x)                                                                                  \
    do {                                                                                           \
        m->budget = budget;                                                                        \
        return x;                                                                                  \
    } while (0)

static int run(struct m *m, size_t start, size_t *end)
{
    const uint8_t *s = m->s;
    size_t n = m->n, pos = start;
    uint32_t pc = 0, barrier = RE_NONE;
    unsigned la = 0;
    int64_t budget = m->budget; /* locals: byte stores could alias them */
    const int memo = m->memo;
    m->sp = 0;
    for (;;) {
        if (--budget < 0)
            RETURN(-1);
        struct ins in = load(m, pc);
        if (memo && in.memo != RE_NO_MEMO && la == 0 && seen(m, in.memo, pos))
            goto fail;
        switch (in.op) {
        case OP_MATCH:
            if (la)
                goto fail;
            *end = pos;
            RETURN(1);
        case OP_LMATCH: {
            if (!la)
                goto fail;
            struct bt *b = &m->st[barrier];
            uint32_t lpc = b->pc;
            size_t spos = b->pos;
            m->sp = barrier;
            barrier = b->x;
            la--;
            struct ins L = load(m, lpc);
            if (m->memo) {
                uint32_t bit = m->nmemo + 2 * L.c;
                uint8_t *r = row(m, spos);
                r[bit >> 3] |= (uint8_t)(1u << (bit & 7));
                r[(bit + 1) >> 3] |= (uint8_t)(1u << ((bit + 1) & 7));
            }
            if (L.fl & FL_NEG)
                goto fail;
            pc = L.b;
            pos = spos;
            continue;
        }
        case OP_STR: {
            const uint8_t *t = m->data + in.a;
            if (n - pos < in.b)
                goto fail;
            if (in.fl & FL_FOLD) {
                for (uint32_t k = 0; k < in.b; k++) {
                    uint8_t x = s[pos + k];
                    if ((x >= 'A' && x <= 'Z' ? x + 32 : x) != t[k])
                        goto fail;
                }
            } else if (memcmp(s + pos, t, in.b)) {
                goto fail;
            }
            pos += in.b;
            pc++;
            continue;
        }
        case OP_CLASS: {
            if (pos >= n)
                goto fail;
            const uint8_t *k = m->data + in.a;
            if (s[pos] < 0x80) {
                if (!((k[8 + (s[pos] >> 3)] >> (s[pos] & 7)) & 1))
                    goto fail;
                pos++;
            } else {
                uint32_t cp;
                unsigned l = nib_utf8_decode(s + pos, n - pos, &cp);
                if (!cls_nonascii(k, cp))
                    goto fail;
                pos += l;
            }
            pc++;
            continue;
        }
        case OP_ANY: {
            if (pos >= n || s[pos] == '\n')
                goto fail;
            uint32_t cp;
            pos += nib_utf8_decode(s + pos, n - pos, &cp);
            pc++;
            continue;
        }
        case OP_SPLIT: {
            if ((in.fl & FL_TABLE) && !memo) {
                uint32_t t = rd16(m->data + in.c - 1 + 32 + 2 * (pos < n ? s[pos] : 256u));
                if (t != pc) {
                    pc = t;
                    continue;
                }
            }
            if (in.c && !first_ok(m, in.c, pos)) {
                /* the first branch cannot start here: on to the second, and
                 * past the chain of alternatives that cannot either */
                do {
                    pc = in.b;
                    in = load(m, pc);
                } while (!memo && in.op == OP_SPLIT && in.c && --budget > 0 &&
                         !first_ok(m, in.c, pos));
                continue;
            }
            struct ins t = load(m, in.b);
            if (!(memo && t.memo != RE_NO_MEMO && la == 0 && peek_seen(m, t.memo, pos)))
                if (push(m, BT_ALT, in.b, pos, 0) < 0)
                    RETURN(-1);
            pc = in.a;
            continue;
        }
        case OP_JMP: pc = in.a; continue;
        case OP_LOOP: {
            const uint8_t *k = m->data + in.a;
            uint32_t min = in.b & 0xFFFF, idx = in.b >> 16, max = in.c, count = 0;
            int lazy = in.fl & FL_LAZY, ivok = !lazy && max == RE_INF && la == 0;
            if (ivok && m->iv[2 * idx] <= pos && pos <= m->iv[2 * idx + 1])
                goto fail; /* inside a run this loop already gave back */
            uint32_t want = lazy ? min : max;
            size_t p = pos, pmin = pos;
            while (count < want && p < n) {
                unsigned b = s[p];
                if (b < 0x80) {
                    if (!((k[8 + (b >> 3)] >> (b & 7)) & 1))
                        break;
                    p++;
                } else {
                    uint32_t cp;
                    unsigned l = nib_utf8_decode(s + p, n - p, &cp);
                    if (!cls_nonascii(k, cp))
                        break;
                    p += l;
                }
                if (++count == min)
                    pmin = p;
            }
            budget -= count;
            if (count < min)
                goto fail;
            if (lazy) {
                if (max > min && push(m, BT_LAZY, pc, p, count) < 0)
                    RETURN(-1);
            } else {
                if (ivok) {
                    m->iv[2 * idx] = (uint32_t)pos;
                    m->iv[2 * idx + 1] = (uint32_t)p;
                }
                if (count > min && push(m, BT_GIVE, pc + 1, p, (uint32_t)pmin) < 0)
                    RETURN(-1);
            }
            pc++;
            pos = p;
            continue;
        }
        case OP_ASSERT:
            if (!assert_ok(m, in.fl, pos))
                goto fail;
            pc++;
            continue;
        case OP_LOOK: {
            uint32_t bit = m->nmemo + 2 * in.c;
            uint8_t *r = m->memo ? row(m, pos) : NULL;
            if (r && ((r[bit >> 3] >> (bit & 7)) & 1)) {
                int v = (r[(bit + 1) >> 3] >> ((bit + 1) & 7)) & 1;
                if (v == (in.fl & FL_NEG))
                    goto fail;
                pc = in.b;
                continue;
            }
            if (push(m, BT_BARRIER, pc, pos, barrier) < 0)
                RETURN(-1);
            barrier = (uint32_t)(m->sp - 1);
            la++;
            pc = in.a;
            continue;
        }
        default: RETURN(-1);
        }
    fail:
        for (;;) {
            if (m->sp == 0)
                RETURN(0);
            struct bt *b = &m->st[m->sp - 1];
            if (b->kind == BT_ALT) {
                pc = b->pc;
                pos = b->pos;
                m->sp--;
                break;
            }
            if (b->kind == BT_GIVE) {
                size_t np = prev_char(s, m->from, b->pos);
                if (np <= b->x) {
                    np = b->x;
                    m->sp--;
                } else {
                    b->pos = (uint32_t)np;
                }
                pc = b->pc;
                pos = np;
                break;
            }
            if (b->kind == BT_LAZY) {
                struct ins L = load(m, b->pc);
                size_t p = b->pos;
                uint32_t cp;
                if (b->x < L.c && p < n) {
                    unsigned l = nib_utf8_decode(s + p, n - p, &cp);
                    if (cls_match(m->data + L.a, cp)) {
                        pc = b->pc + 1;
                        pos = p + l;
                        if (++b->x >= L.c)
                            m->sp--;
                        else
                            b->pos = (uint32_t)pos;
                        break;
                    }
                }
                m->sp--;
                continue;
            }
            /* BT_BARRIER: the lookahead body failed */
            uint32_t lpc = b->pc;
            size_t spos = b->pos;
            barrier = b->x;
            m->sp--;
            la--;
            struct ins L = load(m, lpc);
            if (m->memo) {
                uint32_t bit = m->nmemo + 2 * L.c;
                uint8_t *r = row(m, spos);
                r[bit >> 3] |= (uint8_t)(1u << (bit & 7));
            }
            if (L.fl & FL_NEG) {
                pc = L.b;
                pos = spos;
                break;
            }
        }
    }
}

#undef RETURN

/* Leftmost non-empty match from m->from: the start positions in order. */
static int search(struct m *m, const uint8_t *first, int nullable, size_t *ms, size_t *me,
                  uint32_t nloop)
{
    const uint8_t *s = m->s;
    size_t n = m->n, p = m->from;
    for (uint32_t i = 0; i < nloop; i++) {
        m->iv[2 * i] = 1;
        m->iv[2 * i + 1] = 0;
    }
    m->cleared = 0;
    for (;;) {
        if (!nullable) {
            while (p < n && !((first[s[p] >> 3] >> (s[p] & 7)) & 1)) {
                uint32_t cp;
                p += nib_utf8_decode(s + p, n - p, &cp);
            }
            if (p >= n)
                return 0;
        }
        size_t e = p;
        int r = run(m, p, &e);
        if (r < 0)
            return -1;
        if (r == 1 && e > p) {
            *ms = p;
            *me = e;
            return 1;
        }
        if (p >= n)
            return 0;
        uint32_t cp;
        p += nib_utf8_decode(s + p, n - p, &cp);
    }
}

static int find(const uint8_t *prog, const uint8_t *s, size_t n, size_t from, size_t *ms,
                size_t *me, void *scratch, int memo_only)
{
    struct hdr h = read_hdr(prog);
    if (n >= 0xFFFFFFF0u)
        return -1;
    if (from > n)
        return 0;
    struct m m;
    m.code = prog + RE_HDR;
    m.data = m.code + (size_t)RE_INS * h.ninst;
    m.s = s;
    m.n = n;
    m.from = from;
    m.rows = scratch;
    m.rowb = h.rowb;
    m.nmemo = h.nmemo;
    m.iv = (uint32_t *)((uint8_t *)scratch + align8((n + 1) * h.rowb));
    m.st = (struct bt *)((uint8_t *)m.iv + align8((size_t)h.nloop * 8));
    m.cap = stack_cap(&h, n);
    const uint8_t *first = prog + H_FIRST;
    int nullable = h.flags & HF_NULLABLE;
    /* First a plain backtracking attempt (no memo: the common case, cheaper),
     * allowed 16 steps per byte; if that runs out, the memoized search. */
    if (!memo_only) {
        m.memo = 0;
        m.budget = (int64_t)(n - from + 1) * 16 + 256;
        int r = search(&m, first, nullable, ms, me, h.nloop);
        if (r >= 0)
            return r;
    }
    /* The step bound: (4 * instructions + 64) steps per byte from `from`.
     * With the memo a search runs each (branch target, position) once, so
     * only lookahead bodies that loop (no real pattern has one) or a
     * hostile program come near it. */
    m.memo = 1;
    m.budget = (int64_t)(n - from + 1) * (4 * (int64_t)h.ninst + 64) + 1024;
    return search(&m, first, nullable, ms, me, h.nloop);
}

int nib_re_find(const uint8_t *prog, size_t len, const uint8_t *s, size_t n, size_t from,
                size_t *ms, size_t *me, void *scratch)
{
    (void)len;
    return find(prog, s, n, from, ms, me, scratch, 0);
}

int nib_re_find_memo(const uint8_t *prog, size_t len, const uint8_t *s, size_t n, size_t from,
                     size_t *ms, size_t *me, void *scratch)
{
    (void)len;
    return find(prog, s, n, from, ms, me, scratch, 1);
}
