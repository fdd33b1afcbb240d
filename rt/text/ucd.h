/* Unicode character data for the tokenizers: general category, the
 * White_Space property and NFC composition data, from tables generated at
 * build time (rt/text/ucd_gen.py) out of Debian's unicode-data package
 * (/usr/share/unicode/UnicodeData.txt, PropList.txt, ...). No hand-typed
 * ranges. Pure lookups, no allocation. docs/tokenizers.md says which
 * Unicode version and why this source. */
#ifndef NIB_UCD_H
#define NIB_UCD_H

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

#endif
