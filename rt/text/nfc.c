/* NFC (UAX #15) in one pass and without allocation: the text is read as its
 * canonical decomposition (a cursor: byte position + index inside that
 * character's decomposition); each run of non-starters is visited in
 * canonical order (stably by combining class: in one pass when the run is
 * already ordered, else one pass per class present, so any run length
 * works in bounded memory) and composed onto the last starter written. The
 * output holds at most the decomposition of what was read, which is at
 * most 3 bytes per input byte. */
#include <string.h>

#include "rt/text/nfc.h"
#include "rt/text/ucd.h"

size_t nib_nfc_bound(size_t n)
{
    return 3 * n + 16;
}

struct dcur {
    size_t pos;   /* byte offset of the current input character */
    unsigned sub; /* index in its decomposition */
};

/* The code point at the cursor and its combining class; advances. */
static uint32_t dnext(const uint8_t *s, size_t n, struct dcur *c, unsigned *ccc)
{
    uint32_t cp, d[NIB_UCD_MAX_DECOMP];
    unsigned len = nib_utf8_decode(s + c->pos, n - c->pos, &cp);
    if (cp >= NIB_UTF8_BAD) { /* an ill-formed byte: a starter of its own */
        c->pos += 1;
        *ccc = 0;
        return cp;
    }
    unsigned nd = nib_ucd_decompose(cp, d);
    uint32_t r = d[c->sub];
    if (++c->sub == nd) {
        c->sub = 0;
        c->pos += len;
    }
    *ccc = nib_ucd_ccc(r);
    return r;
}

struct nfc_out {
    uint8_t *buf;
    size_t cap, w;
    int have_s;        /* a starter S was written at s_pos */
    uint32_t s;        /* S (or NIB_UTF8_BAD + byte) */
    size_t s_pos;      /* where S's bytes are */
    unsigned s_len;    /* their count; uncombined marks follow up to w */
    unsigned last_ccc; /* class of the last mark left after S; 0: none */
};

static void put(struct nfc_out *o, uint32_t cp)
{
    if (o->cap - o->w >= 4)
        o->w += nib_utf8_encode(cp, o->buf + o->w);
}

/* S becomes its composite c: rewrite it, shifting the marks after it. */
static void replace_s(struct nfc_out *o, uint32_t c)
{
    uint8_t b[4];
    unsigned len = nib_utf8_encode(c, b);
    size_t tail = o->s_pos + o->s_len;
    if (len != o->s_len) {
        if (len > o->s_len && o->cap - o->w < len - o->s_len)
            return;
        memmove(o->buf + o->s_pos + len, o->buf + tail, o->w - tail);
        o->w = o->w + len - o->s_len;
    }
    memcpy(o->buf + o->s_pos, b, len);
    o->s = c;
    o->s_len = len;
}

static int composable(uint32_t a, uint32_t b)
{
    return a < NIB_UTF8_BAD && b < NIB_UTF8_BAD && (nib_ucd_props(b) & NIB_UCD_COMP_SECOND);
}

static void starter(struct nfc_out *o, uint32_t t)
{
    if (o->have_s && o->last_ccc == 0 && composable(o->s, t)) {
        uint32_t c = nib_ucd_compose(o->s, t);
        if (c) {
            replace_s(o, c);
            return;
        }
    }
    o->s_pos = o->w;
    put(o, t);
    o->have_s = o->w > o->s_pos;
    o->s = t;
    o->s_len = (unsigned)(o->w - o->s_pos);
    o->last_ccc = 0;
}

/* A mark, in canonical order: it composes with S unless an uncombined mark
 * of the same or a higher class stands between (then it is blocked). */
static void mark(struct nfc_out *o, uint32_t m, unsigned ccc)
{
    if (o->have_s && o->last_ccc < ccc && composable(o->s, m)) {
        uint32_t c = nib_ucd_compose(o->s, m);
        if (c) {
            replace_s(o, c);
            return;
        }
    }
    put(o, m);
    o->last_ccc = ccc;
}

static int same(struct dcur a, struct dcur b)
{
    return a.pos == b.pos && a.sub == b.sub;
}

/* The run of marks from `at`: find its end, then visit it in canonical
 * order. Returns the cursor after it. */
static struct dcur run(struct nfc_out *o, const uint8_t *s, size_t n, struct dcur at)
{
    struct dcur end = at, c;
    unsigned prev = 0, cc, lo = 256;
    int sorted = 1;
    while (end.pos < n) {
        c = end;
        dnext(s, n, &c, &cc);
        if (cc == 0)
            break;
        if (cc < prev)
            sorted = 0;
        if (cc < lo)
            lo = cc;
        prev = cc;
        end = c;
    }
    if (sorted) {
        for (c = at; !same(c, end);) {
            uint32_t m = dnext(s, n, &c, &cc);
            mark(o, m, cc);
        }
        return end;
    }
    /* One pass per class present, lowest first; each finds the next. */
    while (lo < 256) {
        unsigned next = 256;
        for (c = at; !same(c, end);) {
            uint32_t m = dnext(s, n, &c, &cc);
            if (cc == lo)
                mark(o, m, cc);
            else if (cc > lo && cc < next)
                next = cc;
        }
        lo = next;
    }
    return end;
}

/* A starter that is not the second of any composition and whose
 * decomposition is itself (Hangul syllables count: they recompose to
 * themselves): it goes out as it is, as the new last starter. */
static inline int inert(uint32_t cp)
{
    if (nib_ucd_props(cp) & NIB_UCD_COMP_SECOND)
        return 0;
    if (cp - 0xAC00 < 11172)
        return 1;
    unsigned cb = nib_ucd_ccc_stage1[cp >> NIB_UCD_CCC_SHIFT];
    if (nib_ucd_ccc_stage2[(cb << NIB_UCD_CCC_SHIFT) | (cp & ((1u << NIB_UCD_CCC_SHIFT) - 1))])
        return 0;
    unsigned db = nib_ucd_decomp_stage1[cp >> NIB_UCD_DECOMP_SHIFT];
    return nib_ucd_decomp_stage2[(db << NIB_UCD_DECOMP_SHIFT) |
                                 (cp & ((1u << NIB_UCD_DECOMP_SHIFT) - 1))] == 0;
}

size_t nib_nfc(const uint8_t *s, size_t n, uint8_t *out, size_t cap)
{
    struct nfc_out o = {.buf = out, .cap = cap};
    struct dcur c = {0, 0};
    if (cap < nib_nfc_bound(n))
        return 0;
    while (c.pos < n) {
        if (c.sub == 0 && s[c.pos] < 0x80) { /* ASCII: starters, never seconds */
            size_t e = c.pos + 1;
            while (e < n && s[e] < 0x80)
                e++;
            memcpy(o.buf + o.w, s + c.pos, e - c.pos);
            o.w += e - c.pos;
            o.s_pos = o.w - 1;
            o.s = s[e - 1];
            o.s_len = 1;
            o.have_s = 1;
            o.last_ccc = 0;
            c.pos = e;
            continue;
        }
        if (c.sub == 0) { /* a character NFC leaves as it is and nothing joins */
            uint32_t cp;
            unsigned l = nib_utf8_decode(s + c.pos, n - c.pos, &cp);
            if (cp < NIB_UTF8_BAD && inert(cp) && o.cap - o.w >= 4) {
                o.s_pos = o.w;
                for (unsigned k = 0; k < l; k++)
                    o.buf[o.w++] = s[c.pos + k];
                o.s = cp;
                o.s_len = l;
                o.have_s = 1;
                o.last_ccc = 0;
                c.pos += l;
                continue;
            }
        }
        struct dcur at = c;
        unsigned cc;
        uint32_t cp = dnext(s, n, &c, &cc);
        if (cc == 0)
            starter(&o, cp);
        else
            c = run(&o, s, n, at);
    }
    return o.w;
}
