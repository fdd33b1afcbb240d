/* Unicode tables (rt/text/ucd.h) against the data files themselves, read
 * at test time: the general category and combining class of every code
 * point of UnicodeData.txt (ranges included, everything else Cn), the
 * White_Space property of PropList.txt, full canonical decompositions, the
 * version string; and the UTF-8 decoder's segmentation. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/text/ucd.h"
#include "tests/common/test_util.h"

#define UCD "/usr/share/unicode/"
#define NCP 0x110000

static const char *const gc_names[NIB_GC_COUNT] = {
    "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
    "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};

struct ucd_line {
    uint32_t cp;
    char name[128], gc[4], decomp[128];
    unsigned ccc;
};

static int read_line(FILE *f, struct ucd_line *u)
{
    char line[1024];
    if (!fgets(line, sizeof line, f))
        return 0;
    char *field[15] = {0};
    int nf = 0;
    for (char *p = line; nf < 15; nf++) {
        field[nf] = p;
        char *semi = strchr(p, ';');
        if (!semi)
            break;
        *semi = 0;
        p = semi + 1;
    }
    ck_assert_int_ge(nf, 5);
    u->cp = (uint32_t)strtoul(field[0], NULL, 16);
    snprintf(u->name, sizeof u->name, "%s", field[1]);
    snprintf(u->gc, sizeof u->gc, "%s", field[2]);
    u->ccc = (unsigned)atoi(field[3]);
    snprintf(u->decomp, sizeof u->decomp, "%s", field[5]);
    return 1;
}

static unsigned gc_index(const char *name)
{
    for (unsigned i = 0; i < NIB_GC_COUNT; i++)
        if (!strcmp(gc_names[i], name))
            return i;
    ck_abort_msg("unknown category %s", name);
    return 0;
}

START_TEST(categories_and_classes_match_unicode_data)
{
    FILE *f = fopen(UCD "UnicodeData.txt", "r");
    ck_assert_msg(f, UCD "UnicodeData.txt missing: install unicode-data");
    uint8_t *listed = calloc(NCP, 1);
    struct ucd_line u;
    uint32_t first = 0;
    unsigned checked = 0;
    while (read_line(f, &u)) {
        if (strstr(u.name, ", First>")) {
            first = u.cp;
            continue;
        }
        uint32_t lo = strstr(u.name, ", Last>") ? first : u.cp;
        for (uint32_t c = lo; c <= u.cp; c++) {
            listed[c] = 1;
            ck_assert_msg(nib_ucd_gc(c) == gc_index(u.gc), "U+%04X: gc %s, table %s", c, u.gc,
                          gc_names[nib_ucd_gc(c)]);
            ck_assert_msg(nib_ucd_ccc(c) == u.ccc, "U+%04X: ccc %u, table %u", c, u.ccc,
                          nib_ucd_ccc(c));
            checked++;
        }
    }
    fclose(f);
    for (uint32_t c = 0; c < NCP; c++)
        if (!listed[c])
            ck_assert_msg(nib_ucd_gc(c) == NIB_GC_CN, "U+%04X is unassigned but not Cn", c);
    ck_assert_uint_eq(nib_ucd_gc(0x110000), NIB_GC_CN);
    ck_assert_uint_gt(checked, 280000); /* the ranges were expanded */
    /* spot checks a reader can verify by eye */
    ck_assert_uint_eq(nib_ucd_gc('A'), NIB_GC_LU);
    ck_assert_uint_eq(nib_ucd_gc(0x4E00), NIB_GC_LO); /* CJK range */
    ck_assert_uint_eq(nib_ucd_gc(0xAC01), NIB_GC_LO); /* Hangul range */
    ck_assert_uint_eq(nib_ucd_gc(0x0663), NIB_GC_ND); /* ARABIC-INDIC DIGIT THREE */
    ck_assert_uint_eq(nib_ucd_gc(0xE000), NIB_GC_CO); /* private use range */
    ck_assert_uint_eq(nib_ucd_ccc(0x0301), 230);
    free(listed);
}
END_TEST

START_TEST(white_space_matches_prop_list)
{
    FILE *f = fopen(UCD "PropList.txt", "r");
    ck_assert_ptr_nonnull(f);
    uint8_t *ws = calloc(NCP, 1);
    char line[512];
    unsigned n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "; White_Space"))
            continue;
        unsigned lo, hi;
        if (sscanf(line, "%x..%x", &lo, &hi) != 2)
            hi = lo = (unsigned)strtoul(line, NULL, 16);
        for (unsigned c = lo; c <= hi; c++, n++)
            ws[c] = 1;
    }
    fclose(f);
    ck_assert_uint_ge(n, 25);
    for (uint32_t c = 0; c < NCP; c++)
        ck_assert_msg(nib_ucd_white_space(c) == ws[c], "U+%04X White_Space", c);
    ck_assert(nib_ucd_white_space(0x85) && nib_ucd_white_space(0x3000));
    ck_assert(!nib_ucd_white_space(0x200B) && !nib_ucd_white_space(0xFEFF));
    free(ws);
}
END_TEST

/* The full canonical decomposition, by recursion over the file's mappings. */
static uint32_t (*dmap)[3]; /* per code point: count, two code points */

static unsigned expand(uint32_t cp, uint32_t *out)
{
    if (!dmap[cp][0]) {
        out[0] = cp;
        return 1;
    }
    unsigned n = 0;
    for (unsigned i = 0; i < dmap[cp][0]; i++)
        n += expand(dmap[cp][1 + i], out + n);
    return n;
}

START_TEST(decompositions_are_the_recursive_canonical_ones)
{
    FILE *f = fopen(UCD "UnicodeData.txt", "r");
    ck_assert_ptr_nonnull(f);
    dmap = calloc(NCP, sizeof *dmap);
    struct ucd_line u;
    unsigned n = 0;
    while (read_line(f, &u)) {
        if (!u.decomp[0] || u.decomp[0] == '<')
            continue;
        unsigned a = 0, b = 0;
        int k = sscanf(u.decomp, "%x %x", &a, &b);
        ck_assert_int_ge(k, 1);
        dmap[u.cp][0] = (uint32_t)k;
        dmap[u.cp][1] = a;
        dmap[u.cp][2] = b;
        n++;
    }
    fclose(f);
    ck_assert_uint_gt(n, 2000);
    for (uint32_t c = 0; c < NCP; c++) {
        if (c >= 0xAC00 && c <= 0xD7A3)
            continue;
        uint32_t want[16], got[NIB_UCD_MAX_DECOMP];
        unsigned nw = expand(c, want), ng = nib_ucd_decompose(c, got);
        ck_assert_msg(nw == ng && !memcmp(want, got, 4 * nw), "U+%04X decomposition", c);
    }
    uint32_t d[NIB_UCD_MAX_DECOMP];
    ck_assert_uint_eq(nib_ucd_decompose(0xD55C, d), 3); /* HANGUL SYLLABLE HAN */
    ck_assert(d[0] == 0x1112 && d[1] == 0x1161 && d[2] == 0x11AB);
    ck_assert_uint_eq(nib_ucd_compose(0x1112, 0x1161), 0xD558);
    ck_assert_uint_eq(nib_ucd_compose(0xD558, 0x11AB), 0xD55C);
    ck_assert_uint_eq(nib_ucd_compose('e', 0x301), 0xE9);
    ck_assert_uint_eq(nib_ucd_compose(0x915, 0x93C), 0); /* excluded: U+0958 */
    free(dmap);
}
END_TEST

START_TEST(version_is_the_data_files_version)
{
    FILE *f = fopen(UCD "DerivedNormalizationProps.txt", "r");
    ck_assert_ptr_nonnull(f);
    char line[256], want[32];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_int_eq(sscanf(line, "# DerivedNormalizationProps-%31[0-9.]", want), 1);
    size_t l = strlen(want);
    if (l && want[l - 1] == '.')
        want[l - 1] = 0;
    ck_assert_str_eq(nib_ucd_version, want);
}
END_TEST

START_TEST(utf8_decoding_follows_table_3_7)
{
    struct {
        const char *s;
        unsigned len;
        uint32_t cp;
    } cases[] = {
        {"A", 1, 'A'},
        {"\xC3\xA9", 2, 0xE9},
        {"\xE2\x82\xAC", 3, 0x20AC},
        {"\xF0\x9F\x98\x80", 4, 0x1F600},
        {"\xC0\x80", 1, NIB_UTF8_BAD + 0xC0},         /* overlong */
        {"\xE0\x80\x80", 1, NIB_UTF8_BAD + 0xE0},     /* overlong */
        {"\xED\xA0\x80", 1, NIB_UTF8_BAD + 0xED},     /* surrogate */
        {"\xF4\x90\x80\x80", 1, NIB_UTF8_BAD + 0xF4}, /* above U+10FFFF */
        {"\xE2\x82", 1, NIB_UTF8_BAD + 0xE2},         /* truncated */
        {"\x80", 1, NIB_UTF8_BAD + 0x80},
        {"\xFF", 1, NIB_UTF8_BAD + 0xFF},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t cp;
        unsigned l = nib_utf8_decode((const uint8_t *)cases[i].s, strlen(cases[i].s), &cp);
        ck_assert_uint_eq(l, cases[i].len);
        ck_assert_uint_eq(cp, cases[i].cp);
        uint8_t out[4];
        if (cp < NIB_UTF8_BAD)
            ck_assert_uint_eq(nib_utf8_encode(cp, out), l);
    }
    /* backward steps land on the forward segmentation's boundaries */
    uint64_t st = 12345;
    static const uint8_t alphabet[] = {0x41, 0x80, 0xBF, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xED,
                                       0xA0, 0xF0, 0x9F, 0x98, 0xF4, 0x90, 0xC0, 0xFF};
    for (int round = 0; round < 20000; round++) {
        uint8_t s[12];
        size_t n = 1 + round % 12, bounds[13], nb = 0;
        for (size_t i = 0; i < n; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            s[i] = alphabet[(st >> 33) % sizeof alphabet];
        }
        for (size_t p = 0; p < n;) {
            uint32_t cp;
            bounds[nb++] = p;
            p += nib_utf8_decode(s + p, n - p, &cp);
        }
        size_t p = n;
        while (nb--) {
            p = nib_utf8_prev(s, p);
            ck_assert_uint_eq(p, bounds[nb]);
        }
    }
}
END_TEST

TU_SUITE("ucd", "tables", NULL, NULL, 120, categories_and_classes_match_unicode_data,
         white_space_matches_prop_list, decompositions_are_the_recursive_canonical_ones,
         version_is_the_data_files_version, utf8_decoding_follows_table_3_7)
