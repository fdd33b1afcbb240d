/* Unicode character data for the tokenizers: general category, the
 * White_Space property and NFC composition data, from tables generated at
 * build time (rt/text/ucd_gen.py) out of Debian's unicode-data package
 * (/usr/share/unicode/UnicodeData.txt, PropList.txt, ...). No hand-typed
 * ranges. Pure lookups, no allocation. docs/tokenizers.md says which
 * Unicode version and why this source. */
#ifndef NIB_UCD_H
#define NIB_UCD_H

#include <stddef.h>
#include <stdint.h>

/* General categories (UnicodeData.txt field 2). Cn (unassigned) is 0, so a
 * code point no table lists is Cn. */
enum nib_gc {
    NIB_GC_CN = 0,
    NIB_GC_LU,
    NIB_GC_LL,
    NIB_GC_LT,
    NIB_GC_LM,
    NIB_GC_LO,
    NIB_GC_MN,
    NIB_GC_MC,
    NIB_GC_ME,
    NIB_GC_ND,
    NIB_GC_NL,
    NIB_GC_NO,
    NIB_GC_PC,
    NIB_GC_PD,
    NIB_GC_PS,
    NIB_GC_PE,
    NIB_GC_PI,
    NIB_GC_PF,
    NIB_GC_PO,
    NIB_GC_SM,
    NIB_GC_SC,
    NIB_GC_SK,
    NIB_GC_SO,
    NIB_GC_ZS,
    NIB_GC_ZL,
    NIB_GC_ZP,
    NIB_GC_CC,
    NIB_GC_CF,
    NIB_GC_CS,
    NIB_GC_CO,
    NIB_GC_COUNT
};

/* The version of the data the tables were generated from ("15.0.0"). */
extern const char nib_ucd_version[];

/* enum nib_gc of cp; NIB_GC_CN for cp > 0x10FFFF. */
unsigned nib_ucd_gc(uint32_t cp);

/* 1 when cp has the White_Space property (PropList.txt). */
int nib_ucd_white_space(uint32_t cp);

/* Canonical combining class of cp (0 for cp > 0x10FFFF). */
unsigned nib_ucd_ccc(uint32_t cp);

/* The full (recursive) canonical decomposition of cp into out (at most
 * NIB_UCD_MAX_DECOMP code points; Hangul syllables arithmetically): the
 * count, 1 with out[0] = cp when cp does not decompose. */
#define NIB_UCD_MAX_DECOMP 4
unsigned nib_ucd_decompose(uint32_t cp, uint32_t out[NIB_UCD_MAX_DECOMP]);

/* The primary composite of the pair (a, b), Hangul included, or 0. */
uint32_t nib_ucd_compose(uint32_t a, uint32_t b);

/* The generated tables behind the lookups, for the inline ones below. */
#define NIB_UCD_PROPS_SHIFT 7
#define NIB_UCD_CCC_SHIFT 8
#define NIB_UCD_DECOMP_SHIFT 8
extern const uint16_t nib_ucd_props_stage1[];
extern const uint8_t nib_ucd_props_stage2[];
extern const uint16_t nib_ucd_ccc_stage1[];
extern const uint8_t nib_ucd_ccc_stage2[];
extern const uint16_t nib_ucd_decomp_stage1[];
extern const uint16_t nib_ucd_decomp_stage2[];
extern const uint32_t nib_ucd_decomp_seq[];
extern const unsigned nib_ucd_ncomp;
extern const uint64_t nib_ucd_comp_key[];
extern const uint32_t nib_ucd_comp_value[];

/* Property byte of a code point: the general category in the low 5 bits,
 * then these flags. */
#define NIB_UCD_GC_MASK 0x1Fu
#define NIB_UCD_WHITE_SPACE 0x20u
#define NIB_UCD_ALPHABETIC 0x40u  /* DerivedCoreProperties.txt, for \w */
#define NIB_UCD_COMP_SECOND 0x80u /* second of some primary composite */

/* cp must be <= 0x10FFFF. */
static inline unsigned nib_ucd_props(uint32_t cp)
{
    unsigned blk = nib_ucd_props_stage1[cp >> NIB_UCD_PROPS_SHIFT];
    return nib_ucd_props_stage2[(blk << NIB_UCD_PROPS_SHIFT) |
                                (cp & ((1u << NIB_UCD_PROPS_SHIFT) - 1))];
}

/* UTF-8 decoding shared by NFC and the regex matcher. At s[0..n), n >= 1:
 * a well-formed sequence (Unicode Table 3-7: no overlong forms, no
 * surrogates, nothing above U+10FFFF) is one code point; otherwise the first
 * byte alone is one character, given as NIB_UTF8_BAD + byte. Returns the
 * bytes taken (1 to 4). */
#define NIB_UTF8_BAD 0x110000u
static inline unsigned nib_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
    unsigned b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) {
        if (n >= 2 && (s[1] & 0xC0) == 0x80) {
            *cp = ((b & 0x1Fu) << 6) | (s[1] & 0x3Fu);
            return 2;
        }
    } else if (b >= 0xE0 && b <= 0xEF) {
        unsigned lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
        if (n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80) {
            *cp = ((b & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
            return 3;
        }
    } else if (b >= 0xF0 && b <= 0xF4) {
        unsigned lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
        if (n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80 && (s[3] & 0xC0) == 0x80) {
            *cp = ((b & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) |
                  (s[3] & 0x3Fu);
            return 4;
        }
    }
    *cp = NIB_UTF8_BAD + b;
    return 1;
}

/* UTF-8 of cp (<= 0x10FFFF, or NIB_UTF8_BAD + byte: that byte) into out;
 * returns its length. */
static inline unsigned nib_utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp >= NIB_UTF8_BAD) {
        out[0] = (uint8_t)(cp - NIB_UTF8_BAD);
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* The start of the character that ends at s[end] (end > 0), by the same
 * segmentation as nib_utf8_decode from any character boundary before it. */
static inline size_t nib_utf8_prev(const uint8_t *s, size_t end)
{
    if ((s[end - 1] & 0xC0) != 0x80)
        return end - 1;
    for (unsigned k = 2; k <= 4 && k <= end; k++) {
        uint32_t cp;
        if ((s[end - k] & 0xC0) != 0x80) {
            if (nib_utf8_decode(s + end - k, k, &cp) == k)
                return end - k;
            break;
        }
    }
    return end - 1;
}

#endif
