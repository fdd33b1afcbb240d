/* Lookups over the tables rt/text/ucd_gen.py generates (nib_ucd_tables.c in
 * the build folder), plus Hangul's arithmetic (de)composition (Unicode
 * section 3.12). */
#include "rt/text/ucd.h"

enum {
    HANGUL_S_BASE = 0xAC00,
    HANGUL_L_BASE = 0x1100,
    HANGUL_V_BASE = 0x1161,
    HANGUL_T_BASE = 0x11A7,
    HANGUL_L_COUNT = 19,
    HANGUL_V_COUNT = 21,
    HANGUL_T_COUNT = 28,
    HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT,
    HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT,
};

unsigned nib_ucd_gc(uint32_t cp)
{
    return cp > 0x10FFFF ? NIB_GC_CN : nib_ucd_props(cp) & NIB_UCD_GC_MASK;
}

int nib_ucd_white_space(uint32_t cp)
{
    return cp <= 0x10FFFF && (nib_ucd_props(cp) & NIB_UCD_WHITE_SPACE) != 0;
}

unsigned nib_ucd_ccc(uint32_t cp)
{
    if (cp > 0x10FFFF)
        return 0;
    unsigned blk = nib_ucd_ccc_stage1[cp >> NIB_UCD_CCC_SHIFT];
    return nib_ucd_ccc_stage2[(blk << NIB_UCD_CCC_SHIFT) | (cp & ((1u << NIB_UCD_CCC_SHIFT) - 1))];
}

unsigned nib_ucd_decompose(uint32_t cp, uint32_t out[NIB_UCD_MAX_DECOMP])
{
    if (cp > 0x10FFFF) {
        out[0] = cp;
        return 1;
    }
    if (cp - HANGUL_S_BASE < HANGUL_S_COUNT) {
        uint32_t s = cp - HANGUL_S_BASE, t = s % HANGUL_T_COUNT;
        out[0] = HANGUL_L_BASE + s / HANGUL_N_COUNT;
        out[1] = HANGUL_V_BASE + (s % HANGUL_N_COUNT) / HANGUL_T_COUNT;
        if (t == 0)
            return 2;
        out[2] = HANGUL_T_BASE + t;
        return 3;
    }
    unsigned blk = nib_ucd_decomp_stage1[cp >> NIB_UCD_DECOMP_SHIFT];
    unsigned at = nib_ucd_decomp_stage2[(blk << NIB_UCD_DECOMP_SHIFT) |
                                        (cp & ((1u << NIB_UCD_DECOMP_SHIFT) - 1))];
    if (at == 0) {
        out[0] = cp;
        return 1;
    }
    unsigned len = nib_ucd_decomp_seq[at];
    for (unsigned i = 0; i < len; i++)
        out[i] = nib_ucd_decomp_seq[at + 1 + i];
    return len;
}

uint32_t nib_ucd_compose(uint32_t a, uint32_t b)
{
    if (a - HANGUL_L_BASE < HANGUL_L_COUNT && b - HANGUL_V_BASE < HANGUL_V_COUNT)
        return HANGUL_S_BASE +
               ((a - HANGUL_L_BASE) * HANGUL_V_COUNT + (b - HANGUL_V_BASE)) * HANGUL_T_COUNT;
    if (a - HANGUL_S_BASE < HANGUL_S_COUNT && (a - HANGUL_S_BASE) % HANGUL_T_COUNT == 0 &&
        b - HANGUL_T_BASE - 1 < HANGUL_T_COUNT - 1)
        return a + (b - HANGUL_T_BASE);
    if (a > 0x10FFFF || b > 0x10FFFF)
        return 0;
    uint64_t key = (uint64_t)a << 21 | b;
    unsigned lo = 0, hi = nib_ucd_ncomp;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (nib_ucd_comp_key[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nib_ucd_ncomp && nib_ucd_comp_key[lo] == key ? nib_ucd_comp_value[lo] : 0;
}
