/* NFC (rt/text/nfc.h) against the Unicode conformance file
 * NormalizationTest.txt (decompressed by meson into the build folder,
 * $NIB_NORMALIZATION_TEST): for every line c2 == NFC(c1) == NFC(c2) ==
 * NFC(c3) and c4 == NFC(c4) == NFC(c5); every code point not in part 1 is
 * its own NFC. Plus hand cases: ill-formed bytes pass through as starters,
 * marks far from canonical order, the size bound. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/text/nfc.h"
#include "rt/text/ucd.h"
#include "tests/common/test_util.h"

/* "0044 0307" -> UTF-8 */
static size_t parse_cps(const char *field, uint8_t *out)
{
    size_t n = 0;
    char *end;
    for (const char *p = field; *p;) {
        unsigned long cp = strtoul(p, &end, 16);
        if (end == p)
            break;
        n += nib_utf8_encode((uint32_t)cp, out + n);
        p = end;
    }
    return n;
}

static void expect_nfc(const uint8_t *in, size_t n, const uint8_t *want, size_t wn, int line)
{
    uint8_t out[512];
    ck_assert_uint_le(nib_nfc_bound(n), sizeof out);
    size_t got = nib_nfc(in, n, out, sizeof out);
    ck_assert_msg(got == wn && !memcmp(out, want, wn), "NormalizationTest.txt line %d", line);
}

START_TEST(normalization_test_file)
{
    const char *path = tu_env_path("NIB_NORMALIZATION_TEST");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "%s missing", path);
    char line[2048];
    int lineno = 0, part = -1;
    unsigned lines = 0;
    uint8_t *part1 = calloc(0x110000, 1);
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '@') {
            part = atoi(line + 5);
            continue;
        }
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *col[5];
        char *p = line;
        for (int i = 0; i < 5; i++) {
            col[i] = p;
            p = strchr(p, ';');
            ck_assert_ptr_nonnull(p);
            *p++ = 0;
        }
        uint8_t c[5][256];
        size_t cn[5];
        for (int i = 0; i < 5; i++)
            cn[i] = parse_cps(col[i], c[i]);
        expect_nfc(c[0], cn[0], c[1], cn[1], lineno);
        expect_nfc(c[1], cn[1], c[1], cn[1], lineno);
        expect_nfc(c[2], cn[2], c[1], cn[1], lineno);
        expect_nfc(c[3], cn[3], c[3], cn[3], lineno);
        expect_nfc(c[4], cn[4], c[3], cn[3], lineno);
        if (part == 1)
            part1[strtoul(col[0], NULL, 16)] = 1;
        lines++;
    }
    fclose(f);
    ck_assert_uint_gt(lines, 18000);
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (part1[cp] || (cp >= 0xD800 && cp <= 0xDFFF))
            continue;
        uint8_t u[4];
        size_t n = nib_utf8_encode(cp, u);
        expect_nfc(u, n, u, n, -(int)cp);
    }
    free(part1);
}
END_TEST

static void nfc_is(const char *in, const char *want)
{
    uint8_t out[256];
    size_t n = nib_nfc((const uint8_t *)in, strlen(in), out, sizeof out);
    ck_assert_msg(n == strlen(want) && !memcmp(out, want, n), "NFC of \"%s\"", in);
}

START_TEST(hand_cases)
{
    nfc_is("", "");
    nfc_is("plain ascii", "plain ascii");
    nfc_is("e\xCC\x81", "\xC3\xA9");                                /* e + acute -> é */
    nfc_is("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", "\xED\x95\x9C"); /* jamo -> 한 */
    nfc_is("a\xCC\x81\xCC\x96", "\xC3\xA1\xCC\x96");                /* reordered, then composed */
    nfc_is("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC");             /* U+0958 stays decomposed */
    /* ill-formed bytes pass through unchanged and compose with nothing */
    nfc_is("\xC3(", "\xC3(");
    nfc_is("a\xFF\xCC\x81", "a\xFF\xCC\x81");
    nfc_is("\xED\xA0\x80\xCC\x81", "\xED\xA0\x80\xCC\x81");
    nfc_is("\xF0\x9F\x98", "\xF0\x9F\x98");
    nfc_is("\x80\x80"
           "e\xCC\x81\xC0",
           "\x80\x80\xC3\xA9\xC0");
}
END_TEST

/* A long run of marks out of canonical order takes the one-pass-per-class
 * path: a + (U+0301 U+0316) x 1000 -> á + U+0316 x 1000 + U+0301 x 999. */
START_TEST(long_unordered_mark_run)
{
    enum { K = 1000 };
    uint8_t in[1 + 4 * K], want[2 + 4 * K], out[3 * (1 + 4 * K) + 16];
    size_t n = 0, w = 0;
    in[n++] = 'a';
    for (int i = 0; i < K; i++) {
        memcpy(in + n, "\xCC\x81\xCC\x96", 4);
        n += 4;
    }
    memcpy(want, "\xC3\xA1", 2);
    w = 2;
    for (int i = 0; i < K; i++, w += 2)
        memcpy(want + w, "\xCC\x96", 2);
    for (int i = 0; i < K - 1; i++, w += 2)
        memcpy(want + w, "\xCC\x81", 2);
    size_t got = nib_nfc(in, n, out, sizeof out);
    ck_assert_uint_eq(got, w);
    ck_assert(!memcmp(out, want, w));
}
END_TEST

START_TEST(bound_is_enforced_and_sufficient)
{
    /* U+0390 (2 bytes) decomposes to 3 two-byte code points: 3x growth in
     * NFD; NFC recomposes. U+1D160 (4 bytes, excluded) stays 12 bytes. */
    uint8_t in[400], out[3 * 400 + 16];
    size_t n = 0;
    while (n + 4 <= sizeof in) {
        memcpy(in + n, "\xF0\x9D\x85\xA0", 4);
        n += 4;
    }
    ck_assert_uint_eq(nib_nfc(in, n, out, nib_nfc_bound(n) - 1), 0);
    size_t got = nib_nfc(in, n, out, nib_nfc_bound(n));
    ck_assert_uint_eq(got, 3 * n);
    uint64_t st = 99;
    for (int round = 0; round < 2000; round++) { /* random bytes: never past the bound */
        for (size_t i = 0; i < sizeof in; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            in[i] = (uint8_t)(st >> 56);
        }
        size_t len = (size_t)(st >> 20) % sizeof in;
        ck_assert_uint_le(nib_nfc(in, len, out, nib_nfc_bound(len)), nib_nfc_bound(len));
    }
}
END_TEST

TU_SUITE("nfc", "nfc", NULL, NULL, 300, normalization_test_file, hand_cases,
         long_unordered_mark_run, bound_is_enforced_and_sufficient)
