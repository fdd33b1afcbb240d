/* JSON parser tests: RFC 8259 valid and invalid texts, escapes and
 * surrogate pairs, UTF-8 validation, numbers (exact int64, doubles, out of
 * range), duplicate keys, the depth and size limits, error positions, and
 * random mutations of valid documents (never a crash; run under ASan). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/test_util.h"
#include "tools/util/json.h"

static char err[512];

/* Parse an exact-size heap copy (so ASan sees any over-read). */
static struct json_doc *parse_n(const char *s, size_t n, const struct json_limits *lim)
{
    char *c = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(c);
    memcpy(c, s, n);
    struct json_doc *d = NULL;
    int rc = json_parse(c, n, lim, &d, err, sizeof err);
    free(c);
    ck_assert_int_eq(rc == 0, d != NULL);
    if (rc)
        ck_assert_msg(err[0] != 0, "a failure without a message");
    return d;
}

static struct json_doc *parse(const char *s)
{
    return parse_n(s, strlen(s), NULL);
}

#define EXPECT_BAD(text, phrase)                                                                   \
    do {                                                                                           \
        struct json_doc *d_ = parse(text);                                                         \
        ck_assert_msg(d_ == NULL, "'%s' parsed", text);                                            \
        ck_assert_msg(strstr(err, phrase), "'%s': error '%s' lacks '%s'", text, err, phrase);      \
    } while (0)

START_TEST(test_valid_values)
{
    struct json_doc *d =
        parse(" {\"a\": [1, -2.5, true, false, null, \"x\", {}, []], \"b\": {}}\n");
    ck_assert_ptr_nonnull(d);
    const struct json_value *r = json_root(d), *a = json_get(r, "a");
    ck_assert(json_is(r, JSON_OBJECT));
    ck_assert_uint_eq(r->n, 2);
    ck_assert(json_is(a, JSON_ARRAY));
    ck_assert_uint_eq(a->n, 8);
    ck_assert(json_at(a, 0)->is_int && json_at(a, 0)->i == 1);
    ck_assert(!json_at(a, 1)->is_int && json_at(a, 1)->num == -2.5);
    ck_assert(json_is(json_at(a, 2), JSON_TRUE) && json_is_bool(json_at(a, 3)));
    ck_assert(json_is(json_at(a, 4), JSON_NULL));
    ck_assert(json_str_eq(json_at(a, 5), "x"));
    ck_assert(json_is(json_at(a, 6), JSON_OBJECT) && json_at(a, 6)->n == 0);
    ck_assert(json_is(json_at(a, 7), JSON_ARRAY) && json_at(a, 7)->n == 0);
    ck_assert_ptr_null(json_at(a, 8));
    ck_assert_ptr_null(json_get(r, "c"));
    ck_assert_ptr_null(json_get(a, "a")); /* not an object */
    ck_assert_str_eq(json_type_name(json_get(r, "b")), "object");
    ck_assert_str_eq(json_type_name(NULL), "missing");
    json_free(d);
    /* scalars at the top level */
    const char *tops[] = {"0", "-0", "\"\"", "null", "true", " 1e3 ", "[[[]]]"};
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
        d = parse(tops[i]);
        ck_assert_msg(d != NULL, "'%s': %s", tops[i], err);
        json_free(d);
    }
}
END_TEST

START_TEST(test_invalid_texts)
{
    EXPECT_BAD("", "expected a value, found the end of the input");
    EXPECT_BAD("   ", "end of the input");
    EXPECT_BAD("[1,]", "expected a value");
    EXPECT_BAD("{\"a\":1,}", "expected a string key");
    EXPECT_BAD("{a:1}", "expected a string key");
    EXPECT_BAD("{\"a\" 1}", "expected ':'");
    EXPECT_BAD("[1 2]", "expected ',' or ']'");
    EXPECT_BAD("{\"a\":1 \"b\":2}", "expected ',' or '}'");
    EXPECT_BAD("'x'", "expected a value, found '''");
    EXPECT_BAD("[1] 2", "unexpected '2' after the value");
    EXPECT_BAD("tru", "invalid literal (expected true)");
    EXPECT_BAD("nul", "expected null");
    EXPECT_BAD("NaN", "expected a value");
    EXPECT_BAD("+1", "expected a value, found '+'");
    EXPECT_BAD("01", "leading zero");
    EXPECT_BAD("-", "invalid number");
    EXPECT_BAD("1.", "a digit must follow the decimal point");
    EXPECT_BAD(".5", "expected a value");
    EXPECT_BAD("1e", "a digit must follow the exponent");
    EXPECT_BAD("1e+", "a digit must follow the exponent");
    EXPECT_BAD("1e999", "number out of range");
    EXPECT_BAD("-1e400", "number out of range");
    EXPECT_BAD("\"abc", "unterminated string");
    EXPECT_BAD("\"a\\", "unterminated string");
    EXPECT_BAD("\"\\x\"", "invalid escape \\x");
    EXPECT_BAD("\"a\tb\"", "control character 0x09");
    EXPECT_BAD("\"a\nb\"", "control character 0x0a");
    EXPECT_BAD("/* c */ 1", "expected a value, found '/'");
    EXPECT_BAD("[1] // c", "unexpected '/'");
    EXPECT_BAD("\xef\xbb\xbf{}", "byte 0xef"); /* a BOM is not JSON */
    EXPECT_BAD("{\"a\":1,\"a\":2}", "duplicate key \"a\"");
}
END_TEST

START_TEST(test_error_position)
{
    EXPECT_BAD("{\n  \"a\": [1,\n    2,,\n  ]\n}",
               "line 3, column 7 (byte 19): expected a value, found ','");
    EXPECT_BAD("[\"\xc3\xa9\xc3\xa9\", x]",
               "line 1, column 8 (byte 9)"); /* columns count characters */
}
END_TEST

START_TEST(test_escapes)
{
    struct json_doc *d =
        parse("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u0041\\u00e9\\u20AC\", \"\\ud83d\\ude00\", "
              "\"a\\u0000b\", \"\xf0\x9f\x98\x80\"]");
    ck_assert_msg(d != NULL, "%s", err);
    const struct json_value *r = json_root(d);
    ck_assert(json_str_eq(json_at(r, 0), "\"\\/\b\f\n\r\t"));
    ck_assert(json_str_eq(json_at(r, 1), "A\xc3\xa9\xe2\x82\xac"));
    ck_assert(json_str_eq(json_at(r, 2), "\xf0\x9f\x98\x80"));
    ck_assert(json_str_eq(json_at(r, 4), "\xf0\x9f\x98\x80"));
    const struct json_value *nul = json_at(r, 3);
    ck_assert_uint_eq(nul->n, 3); /* NUL kept: strings have a length */
    ck_assert(memcmp(nul->str, "a\0b", 4) == 0);
    json_free(d);
    EXPECT_BAD("\"\\ud83d\"", "high surrogate \\uD83D is not followed by a low one");
    EXPECT_BAD("\"\\ud83dx\"", "is not followed by a low one");
    EXPECT_BAD("\"\\ud83d\\u0041\"", "is not followed by a low one");
    EXPECT_BAD("\"\\ude00\"", "lone low surrogate \\uDE00");
    EXPECT_BAD("\"\\u12\"", "4 hex digits");
    EXPECT_BAD("\"\\u12G4\"", "4 hex digits");
    /* keys are strings too */
    d = parse("{\"\\u00e9\": 1}");
    ck_assert_ptr_nonnull(json_get(json_root(d), "\xc3\xa9"));
    json_free(d);
}
END_TEST

START_TEST(test_utf8)
{
    const char *good[] = {"\"\xc2\x80\"",        "\"\xdf\xbf\"",     "\"\xe0\xa0\x80\"",
                          "\"\xed\x9f\xbf\"",    "\"\xee\x80\x80\"", "\"\xf0\x90\x80\x80\"",
                          "\"\xf4\x8f\xbf\xbf\""};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct json_doc *d = parse(good[i]);
        ck_assert_msg(d != NULL, "good[%zu]: %s", i, err);
        json_free(d);
    }
    const char *bad[] = {
        "\"\x80\"",             /* lone continuation */
        "\"\xc0\xaf\"",         /* overlong '/' */
        "\"\xc1\xbf\"",         /* overlong */
        "\"\xe0\x80\xaf\"",     /* overlong 3-byte */
        "\"\xed\xa0\x80\"",     /* surrogate D800 */
        "\"\xf0\x80\x80\xaf\"", /* overlong 4-byte */
        "\"\xf4\x90\x80\x80\"", /* above U+10FFFF */
        "\"\xf5\x80\x80\x80\"",
        "\"\xff\"",
        "\"\xc3\"",
        "\"\xe2\x82\"",
        "\"\xc3x\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        EXPECT_BAD(bad[i], "ill-formed UTF-8");
}
END_TEST

START_TEST(test_numbers)
{
    struct json_doc *d = parse("[9223372036854775807, -9223372036854775808, 9223372036854775808, "
                               "1e3, 2.0, 2.5, -0, 1E-2, 12345678901234567890123, 0.1e1]");
    ck_assert_msg(d != NULL, "%s", err);
    const struct json_value *r = json_root(d);
    ck_assert(json_at(r, 0)->is_int && json_at(r, 0)->i == INT64_MAX);
    ck_assert(json_at(r, 1)->is_int && json_at(r, 1)->i == INT64_MIN);
    ck_assert(!json_at(r, 2)->is_int); /* past int64: a double only */
    ck_assert(json_at(r, 2)->num == 9223372036854775808.0);
    ck_assert(json_at(r, 3)->is_int && json_at(r, 3)->i == 1000);
    ck_assert(json_at(r, 4)->is_int && json_at(r, 4)->i == 2);
    ck_assert(!json_at(r, 5)->is_int && json_at(r, 5)->num == 2.5);
    ck_assert(json_at(r, 6)->is_int && json_at(r, 6)->i == 0);
    ck_assert(fabs(json_at(r, 7)->num - 0.01) < 1e-18);
    ck_assert(!json_at(r, 8)->is_int && json_at(r, 8)->num > 1.2e22);
    ck_assert(json_at(r, 9)->is_int && json_at(r, 9)->i == 1);
    json_free(d);
    /* a number longer than any buffer */
    size_t n = 5000;
    char *big = malloc(n + 1);
    memset(big, '7', n);
    big[n] = 0;
    d = parse(big);
    ck_assert_ptr_null(d); /* 7...7 (5000 digits) overflows a double */
    ck_assert(strstr(err, "out of range"));
    memcpy(big, "0.", 2);
    d = parse(big);
    ck_assert_msg(d != NULL, "%s", err);
    json_free(d);
    free(big);
}
END_TEST

static char *nested(size_t depth, char open, char close)
{
    char *s = malloc(2 * depth + 1);
    memset(s, open, depth);
    memset(s + depth, close, depth);
    s[2 * depth] = 0;
    return s;
}

START_TEST(test_depth_limit)
{
    char *ok = nested(JSON_DEFAULT_MAX_DEPTH, '[', ']');
    struct json_doc *d = parse(ok);
    ck_assert_msg(d != NULL, "%s", err);
    json_free(d);
    free(ok);
    char *deep = nested(JSON_DEFAULT_MAX_DEPTH + 1, '[', ']');
    ck_assert_ptr_null(parse(deep));
    ck_assert(strstr(err, "nesting deeper than 128"));
    free(deep);
    /* a million opening brackets: refused at the limit, no stack overflow */
    size_t n = 1000000;
    char *huge = malloc(n);
    memset(huge, '[', n);
    ck_assert_ptr_null(parse_n(huge, n, NULL));
    ck_assert(strstr(err, "nesting deeper"));
    /* a limit above JSON_MAX_DEPTH is JSON_MAX_DEPTH: the parser recurses */
    struct json_limits big = {.max_depth = UINT32_MAX};
    ck_assert_ptr_null(parse_n(huge, n, &big));
    ck_assert(strstr(err, "nesting deeper than 4096"));
    free(huge);
    struct json_limits lim = {.max_depth = 2}; /* containers inside containers */
    ck_assert_ptr_null(parse_n("{\"a\":[[1]]}", 11, &lim));
    ck_assert(strstr(err, "nesting deeper than 2"));
    d = parse_n("{\"a\":[1]}", 9, &lim);
    ck_assert_ptr_nonnull(d);
    json_free(d);
}
END_TEST

START_TEST(test_size_limit)
{
    struct json_limits lim = {.max_bytes = 8};
    ck_assert_ptr_null(parse_n("[1,2,3,4]", 9, &lim));
    ck_assert(strstr(err, "larger than the limit 8"));
    struct json_doc *d = parse_n("[1,2,34]", 8, &lim);
    ck_assert_ptr_nonnull(d);
    json_free(d);
}
END_TEST

/* Big objects: the duplicate check switches to hashing; both find a
 * duplicate anywhere and accept distinct keys. */
START_TEST(test_big_object)
{
    size_t n = 50000, cap = n * 24 + 64;
    char *s = malloc(cap);
    size_t at = (size_t)sprintf(s, "{");
    for (size_t i = 0; i < n; i++)
        at += (size_t)sprintf(s + at, "%s\"k%zu\":%zu", i ? "," : "", i, i);
    sprintf(s + at, "}");
    struct json_doc *d = parse(s);
    ck_assert_msg(d != NULL, "%s", err);
    const struct json_value *r = json_root(d);
    ck_assert_uint_eq(r->n, n);
    ck_assert_int_eq(json_get(r, "k49999")->i, 49999);
    ck_assert_str_eq(r->members[123].key, "k123");
    json_free(d);
    /* the last key repeats the first */
    sprintf(s + at, ",\"k0\":1}");
    ck_assert_ptr_null(parse(s));
    ck_assert(strstr(err, "duplicate key \"k0\""));
    free(s);
}
END_TEST

/* Random byte edits of a valid document: parse or fail with a message,
 * never crash or leak (ASan). */
START_TEST(test_mutations)
{
    const char *base = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"\\u00e9\": 1}, "
                       "\"merges\": [\"a b\", [\"c\", \"d\"]]}, \"n\": [1.5e3, -0, true, null]}";
    size_t n = strlen(base);
    uint64_t st = 12345;
    char *buf = malloc(n + 8);
    int parsed = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(buf, base, n);
        size_t len = n;
        int edits = 1 + (int)(st >> 60) % 3;
        for (int e = 0; e < edits && len > 0; e++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)(st >> 33) % len;
            int kind = (int)(st >> 20) % 3;
            if (kind == 0)
                buf[pos] = (char)(st >> 8);
            else if (kind == 1 && len > 1)
                memmove(buf + pos, buf + pos + 1, --len - pos);
            else
                len = pos; /* truncate */
        }
        struct json_doc *d = parse_n(buf, len, NULL);
        parsed += d != NULL;
        json_free(d);
    }
    free(buf);
    ck_assert_int_gt(parsed, 0);
}
END_TEST

TU_SUITE("json", "json", NULL, NULL, 60, test_valid_values, test_invalid_texts, test_error_position,
         test_escapes, test_utf8, test_numbers, test_depth_limit, test_size_limit, test_big_object,
         test_mutations)
