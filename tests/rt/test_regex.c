/* The pre-tokenizer regex engine (rt/text/regex.h): each construct, the
 * real patterns of rt/text/pretok_patterns.h on chosen strings, refused
 * syntax named with its offset, ill-formed UTF-8 as characters of no class,
 * the checker against corrupted programs, and hostile texts at the prompt
 * limit (finished within the step bound, or -1 for a pattern built to
 * explode). The broad comparison with @huggingface/tokenizers is
 * tests/rt/regex_xcheck.mjs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/text/pretok_patterns.h"
#include "rt/text/regex.h"
#include "tests/common/test_util.h"

static uint8_t prog[1 << 18];
static size_t plen;

static void compile_ok(const char *pat)
{
    char err[256];
    int r = nib_re_compile(pat, strlen(pat), prog, sizeof prog, &plen, err, sizeof err);
    ck_assert_msg(r == 0, "compile /%s/: %s", pat, err);
    ck_assert_msg(nib_re_check(prog, plen, err, sizeof err) == 0, "check /%s/: %s", pat, err);
}

/* Matches of pat over text[0..n), successive from 0, joined by '|'. */
static const char *splits_n(const char *pat, const char *text, size_t n)
{
    static char out[4096];
    compile_ok(pat);
    void *scratch = malloc(nib_re_scratch_footprint(prog, plen, n));
    size_t at = 0, ms, me, w = 0;
    int r;
    out[0] = 0;
    while ((r = nib_re_find(prog, plen, (const uint8_t *)text, n, at, &ms, &me, scratch)) == 1) {
        ck_assert(me > ms && ms >= at && me <= n);
        w += (size_t)snprintf(out + w, sizeof out - w, "%s%.*s", w ? "|" : "", (int)(me - ms),
                              text + ms);
        at = me;
    }
    ck_assert_int_eq(r, 0);
    free(scratch);
    return out;
}

static const char *splits(const char *pat, const char *text)
{
    return splits_n(pat, text, strlen(text));
}

static const char *pre(const char *name, unsigned k);

#define SPLITS(pat, text, want) ck_assert_str_eq(splits(pat, text), want)

static void refused(const char *pat, const char *what, unsigned offset)
{
    char err[256], at[48];
    int r = nib_re_compile(pat, strlen(pat), prog, sizeof prog, &plen, err, sizeof err);
    ck_assert_msg(r == -1, "/%s/ compiled", pat);
    snprintf(at, sizeof at, "offset %u:", offset);
    ck_assert_msg(strstr(err, what) && strstr(err, at), "/%s/: \"%s\" lacks \"%s\" / \"%s\"", pat,
                  err, what, at);
}

START_TEST(literals_and_escapes)
{
    SPLITS("ab", "xxabyab", "ab|ab");
    SPLITS("\\r\\n|\\t|\\f|\\v", "a\r\nb\tc\fd\v", "\r\n|\t|\f|\v");
    SPLITS("\\.\\$\\+\\\\\\(", "a.$+\\(b", ".$+\\(");
    SPLITS("\\x41\\x{42}\\u0043", "xABCx", "ABC");
    SPLITS("\xC3\xA9+", "caf\xC3\xA9\xC3\xA9s", "\xC3\xA9\xC3\xA9");
    SPLITS("\\x{1F600}", "a\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80");
    SPLITS("a{b}", "a{b}", "a{b}"); /* a brace that is no quantifier is literal */
    SPLITS("x]", "x]", "x]");
    SPLITS("\\a\\e", "\x07\x1B", "\x07\x1B");
}
END_TEST

START_TEST(classes)
{
    SPLITS("[a-c]+", "abcdcba", "abc|cba");
    SPLITS("[^a-c]+", "abcdcba", "d");
    SPLITS("[]a]+", "]a]b", "]a]");
    SPLITS("[a-]+|[-z]", "a-z", "a-|z");
    SPLITS("[\\-x]+", "-x-", "-x-");
    /* non-ASCII ranges, deepseek style */
    SPLITS("[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+",
           "ab\xE4\xB8\xAD\xE6\x96\x87\xED\x95\x9C!", "\xE4\xB8\xAD\xE6\x96\x87\xED\x95\x9C");
    SPLITS("\\p{L}+", "h\xC3\xA9llo w\xC3\xB6rld 42", "h\xC3\xA9llo|w\xC3\xB6rld");
    SPLITS("\\p{N}+", "a12\xD9\xA3\xE2\x85\xA0x", "12\xD9\xA3\xE2\x85\xA0"); /* Nd, Nl */
    SPLITS("\\p{Lu}+", "abCDe\xC3\x89", "CD|\xC3\x89");
    SPLITS("\\p{P}+", "a,.!b\xE3\x80\x82", ",.!|\xE3\x80\x82");
    SPLITS("\\P{L}+", "ab12cd", "12");
    SPLITS("[\\p{L}\\p{N}]+", "ab12!cd", "ab12|cd");
    SPLITS("[^\\s\\p{L}\\p{N}]+", "a, b!?c", ",|!?");
    SPLITS("\\s+",
           "a \t\xC2\x85\xE3\x80\x80\xC2\xA0"
           "b",
           " \t\xC2\x85\xE3\x80\x80\xC2\xA0");
    SPLITS("\\S+", "a\xE2\x80\x8B b", "a\xE2\x80\x8B|b"); /* U+200B is not White_Space */
    SPLITS("\\d+|\\D", "1\xD9\xA3x", "1\xD9\xA3|x");
    SPLITS("\\w+", "ab_1\xC2\xB2 \xC3\xA9!", "ab_1\xC2\xB2|\xC3\xA9");
    SPLITS("[\\W]+", "ab, c", ", ");
    SPLITS("\\h+", "0x1fG", "0|1f");
    SPLITS("[\\H]+", "12zz\xC3\xA9", "zz\xC3\xA9");
    SPLITS(".+", "ab\ncd", "ab|cd");
    SPLITS("\\p{White_Space}+|\\p{Zs}", "a \xE3\x80\x80", " \xE3\x80\x80");
    /* nested classes are unions (Bloom's tokenizer.json) */
    SPLITS("[a[bc]]+|[[]]x]", "abcd]", "abc|]");
    SPLITS(" ?[^(\\s|[.,!?\xE2\x80\xA6\xE3\x80\x82])]+", "Hi, there(you)\xE2\x80\xA6 ok",
           "Hi| there|you| ok");
}
END_TEST

START_TEST(groups_alternation_quantifiers)
{
    SPLITS("a|ab|abc", "abc", "a");
    SPLITS("abc|ab|a", "abc", "abc");
    SPLITS("(?:ab)+", "abababa", "ababab");
    SPLITS("(a|b)c", "acbc", "ac|bc");
    SPLITS("x?y", "xyy", "xy|y");
    SPLITS("a*b", "aaabb", "aaab|b");
    SPLITS("a{2}", "aaaaa", "aa|aa");
    SPLITS("a{2,}", "aaaaa a", "aaaaa");
    SPLITS("a{1,3}", "aaaaa", "aaa|aa");
    SPLITS("a{,2}b", "aaab", "aab");
    SPLITS("(?:ab){1,2}c", "abababc", "ababc");
    SPLITS("a{2}+", "aaaaa", "aaaa"); /* {n}+ repeats the counted group */
    SPLITS("a+?", "aaa", "a|a|a");
    SPLITS("a*?b", "aab", "aab");
    SPLITS("a??b", "ab", "ab");
    SPLITS("a{2,3}?", "aaaaa", "aa|aa");
    SPLITS("(?:a|b)*?c", "abac", "abac");
    SPLITS("(?i:ab)", "aB AB ab", "aB|AB|ab");
    SPLITS("(?i:'s|'ll)", "it'S we'Ll", "'S|'Ll");
    SPLITS("(?i:[a-c]+)", "ABcDxa", "ABc|a");
    SPLITS("(?i:[^a])", "aAb", "b");
    SPLITS("(?i:\\p{Lu})", "aB", "B"); /* \p{..} is not folded, as in the reference */
    SPLITS("(?i:\\x41)", "a", "a");
}
END_TEST

START_TEST(anchors_and_lookahead)
{
    SPLITS("\\s+(?!\\S)", "a   b  ", "  |  ");
    SPLITS("\\s+(?!\\S)|\\s+", "a   b", "  | ");
    SPLITS("a(?=b)", "acab", "a");
    SPLITS("(?=\\d)\\w+", "ab 12c", "12c");
    SPLITS("^a", "aa\na", "a|a");
    SPLITS("a$", "aa\na", "a|a");
    SPLITS("\\s+$", "a  \nb ", "  | ");
    SPLITS("\\Aa|b\\z", "aab\nb", "a|b");
    SPLITS("b\\Z", "b\nb\n", "b");
    SPLITS("\\bab|x\\B.", "ab cab xy x.", "ab|xy");
    SPLITS("(?=(?:\\d{3})+(?!\\d))\\d", "1234567", "2|5"); /* positions of thousands */
}
END_TEST

/* Exponential for plain backtracking: nib_re_find falls back to the
 * memoized search, which finishes with the same answer. */
START_TEST(memo_fallback)
{
    char t[64];
    memset(t, 'a', 40);
    t[40] = 0;
    const char *pat = "(?:a|aa)+c|a";
    ck_assert_str_eq(splits(pat, t),
                     "a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|a|"
                     "a|a|a|a|a|a|a|a");
    t[40] = 'c';
    t[41] = 0;
    ck_assert_str_eq(splits(pat, t), t);
    SPLITS("(?:x+x+)+y|x", "xxxxxxxxxxxxxxxxxxxxxxxxy z", "xxxxxxxxxxxxxxxxxxxxxxxxy");
    /* the memoized search alone agrees on a real pattern */
    compile_ok(pre("llama-bpe", 0));
    const char *text = "I'LL pay $12345 for it!!\n\n  ok \xE4\xBD\xA0\xFF  ";
    size_t n = strlen(text), a = 0, b = 0, ms1, me1, ms2, me2;
    void *scratch = malloc(nib_re_scratch_footprint(prog, plen, n));
    for (;;) {
        int r1 = nib_re_find(prog, plen, (const uint8_t *)text, n, a, &ms1, &me1, scratch);
        int r2 = nib_re_find_memo(prog, plen, (const uint8_t *)text, n, b, &ms2, &me2, scratch);
        ck_assert_int_eq(r1, r2);
        if (r1 != 1)
            break;
        ck_assert(ms1 == ms2 && me1 == me2);
        a = me1;
        b = me2;
    }
    free(scratch);
}
END_TEST

START_TEST(never_an_empty_match)
{
    SPLITS("a*", "baab", "aa");
    SPLITS("x*|b", "ab", ""); /* empty at each position wins, as in JavaScript */
    SPLITS("(?:)|a", "aa", "");
    SPLITS("$", "abc", "");
}
END_TEST

/* Ill-formed UTF-8: each byte of an ill-formed sequence is a character in
 * no positive class, in every negated one, and matched by `.`. */
START_TEST(ill_formed_bytes)
{
    SPLITS("\\p{L}+",
           "ab\xFF"
           "cd\xC3",
           "ab|cd");
    SPLITS("\\P{L}+",
           "ab\xFF\xE2\x82"
           "cd",
           "\xFF\xE2\x82");
    SPLITS("[^a]", "\xC0\x80", "\xC0|\x80");
    SPLITS(".", "\xED\xA0\x80", "\xED|\xA0|\x80");
    SPLITS("\\S+", "\x80\x80 \xF4\x90\x80\x80", "\x80\x80|\xF4\x90\x80\x80");
    SPLITS("\\p{Cn}|\\p{C}|\\p{Any}", "\xFF", "");
    SPLITS("[\\s\\p{L}]|\\s|\\w", "\xFE", "");
    SPLITS("\xC3\xA9", "\xC3\xC3\xA9", "\xC3\xA9");
    /* GPT-2: the bytes fall into the "other" alternative */
    SPLITS("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
           "ab \xFF\xFE!c", "ab| \xFF\xFE!|c");
}
END_TEST

static const char *pre(const char *name, unsigned k)
{
    const struct nib_pretok *t = nib_pretok_find(name, strlen(name));
    ck_assert_msg(t != NULL, "no pre-tokenizer %s", name);
    ck_assert_uint_lt(k, t->npatterns);
    return t->patterns[k];
}

START_TEST(real_patterns)
{
    SPLITS(pre("gpt-2", 0), "Hello world's 123  test!!  \n  x",
           "Hello| world|'s| 123| | test|!!|  \n | x");
    SPLITS(pre("llama-bpe", 0), "I'LL pay $12345 for it!!\n\n  ok",
           "I|'LL| pay| $|123|45| for| it|!!\n\n| | ok");
    SPLITS(pre("qwen2", 0), "x12 \xE4\xBD\xA0\xE5\xA5\xBD\r\n",
           "x|1|2| \xE4\xBD\xA0\xE5\xA5\xBD|\r\n");
    SPLITS(pre("deepseek-llm", 1), " Hello \xCE\xB1\xCE\xB2", " Hello| \xCE\xB1\xCE\xB2");
    SPLITS(pre("deepseek-llm", 4),
           "a\xE4\xB8\xAD\xE6\x96\x87"
           "b",
           "\xE4\xB8\xAD\xE6\x96\x87");
    SPLITS(pre("deepseek-coder", 2), "f(x) ,y", "(|)| ,");
    SPLITS(pre("falcon", 0), "a+b<=c", "+|<=");
    SPLITS(pre("starcoder", 0), "v123", "1|2|3");
    SPLITS(pre("gpt-4o", 0), "HelloWorld's ABC", "Hello|World's| ABC");
    ck_assert_ptr_null(nib_pretok_find("no-such-pre", 11));
    char names[2048];
    nib_pretok_names(names, sizeof names);
    ck_assert_ptr_nonnull(strstr(names, "llama-bpe, llama3"));
    char small[16];
    nib_pretok_names(small, sizeof small);
    ck_assert_uint_eq(strlen(small), 15);
    /* every table pattern compiles and passes the checker, whatever the
     * program buffer held before (the compiler reads only what it wrote) */
    unsigned count;
    const struct nib_pretok *all = nib_pretok_all(&count);
    ck_assert_uint_ge(count, 11);
    for (int fill = 0; fill < 3; fill++)
        for (unsigned i = 0; i < count; i++)
            for (unsigned k = 0; k < all[i].npatterns; k++) {
                memset(prog, fill == 0 ? 0 : fill == 1 ? 0xFF : 0x5A, sizeof prog);
                compile_ok(all[i].patterns[k]);
            }
    const char *odd[] = {
        "a|", "(?:a|)b", "x(?:|y|z)", "(?:a|b|)?c", "|", "(?:|a){2}", "(?:(?:ab){40}+|b){0}x"};
    for (int fill = 0; fill < 3; fill++)
        for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
            if (fill < 2)
                memset(prog, fill ? 0xFF : 0x5A, sizeof prog);
            else /* stale instructions of a larger program */
                compile_ok("(?:x|yy|zzz|w)(?:x|yy|zzz|w)(?:x|yy|zzz|w)(?:x|yy|zzz|w)");
            compile_ok(odd[i]);
        }
}
END_TEST

START_TEST(refused_constructs_are_named)
{
    refused("ab(?<=c)", "lookbehind", 2);
    refused("(?<n>a)", "named group", 0);
    refused("a\\1", "backreference", 1);
    refused("x(?>a)", "atomic group", 1);
    refused("a++", "possessive", 1);
    refused("a?+", "possessive", 1);
    refused("(?i)a", "inline option", 0);
    refused("[[:alpha:]]", "POSIX bracket", 1);
    refused("[a[^b]]", "negated class inside a class", 2);
    refused("[a-[b]]", "range with a set", 2);
    refused("[a&&b]", "intersection", 2);
    refused("*a", "without anything to repeat", 0);
    refused("a**", "quantifier after a quantifier", 2);
    refused("(a", "unterminated group", 0);
    refused("a)", "unmatched )", 1);
    refused("[ab", "unterminated character class", 0);
    refused("[z-a]", "out of order", 2);
    refused("\\p{Han}", "unsupported property", 0);
    refused("\\q", "unsupported escape", 0);
    refused("^*", "quantifier on an assertion", 0);
    refused("(?:a?)*", "can match the empty string", 0);
    refused("a{2000}", "repeat count", 1);
    refused("a\\", "backslash", 1);
    refused("\xC3(", "not valid UTF-8", 0);
    refused("[\\d-z]", "range with a set", 3);
    /* the caps that bound any program's scratch */
    static char big[8192];
    size_t w = 0;
    for (int i = 0; i < 700; i++)
        w += (size_t)snprintf(big + w, sizeof big - w, "%sa%d", i ? "|" : "", i);
    refused(big, "too complex", 0);
    refused("(?:a|b|c|d|e|f|g|h|i|j|k|l|m|n|o|p|q|r)+", "too complex", 0);
    char err[64];
    ck_assert_int_eq(nib_re_compile("a", 1, prog, 10, &plen, err, sizeof err), -1);
    /* too large for the program buffer: refused, never overrun */
    ck_assert_int_eq(nib_re_compile("(?:abc|def){50}", 15, prog, 512, &plen, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "too large"));
}
END_TEST

/* A program from a blob is hostile: every single-byte corruption is either
 * refused by the checker or, if accepted, runs within bounds (ASan). */
START_TEST(checker_against_corruption)
{
    compile_ok(pre("llama-bpe", 0));
    static uint8_t copy[1 << 16];
    ck_assert_uint_le(plen, sizeof copy);
    char err[256];
    const char *text = "Hello, World's 12345!! \n\n  \xE4\xBD\xA0\xFF";
    size_t n = strlen(text);
    unsigned refused_n = 0, accepted = 0;
    uint64_t st = 7;
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, prog, plen);
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t at = (size_t)(st >> 33) % plen;
        copy[at] ^= (uint8_t)(1u << ((st >> 20) & 7));
        if (nib_re_check(copy, plen, err, sizeof err) < 0) {
            ck_assert(err[0] != 0);
            refused_n++;
            continue;
        }
        accepted++;
        ck_assert_uint_le(nib_re_scratch_footprint(copy, plen, 65536), NIB_RE_MAX_SCRATCH(65536));
        void *scratch = malloc(nib_re_scratch_footprint(copy, plen, n));
        size_t from = 0, ms, me;
        int r;
        while ((r = nib_re_find(copy, plen, (const uint8_t *)text, n, from, &ms, &me, scratch)) ==
               1) {
            ck_assert(me > ms && ms >= from && me <= n);
            from = me;
        }
        free(scratch);
    }
    ck_assert_uint_gt(refused_n, 0);
    ck_assert_uint_gt(accepted, 0);
    ck_assert_int_eq(nib_re_check(prog, plen - 1, err, sizeof err), -1);
    ck_assert_int_eq(nib_re_check(prog, 10, err, sizeof err), -1);
}
END_TEST

/* Texts at the prompt limit (64 KiB) for every table pattern: the whole
 * split finishes (no -1) and covers the text; a pattern built to explode
 * inside a lookahead hits the step bound instead of hanging. */
START_TEST(hostile_texts_finish)
{
    enum { N = 65536 };
    char *t = malloc(N);
    unsigned count;
    const struct nib_pretok *all = nib_pretok_all(&count);
    for (int kind = 0; kind < 6; kind++) {
        for (size_t i = 0; i < N; i++) {
            switch (kind) {
            case 0: t[i] = ' '; break;
            case 1: t[i] = 'a'; break;
            case 2: t[i] = i % 2 ? ' ' : '\n'; break;
            case 3: t[i] = (char)(0x80 + i % 64); break;
            case 4: t[i] = "'s 1"[i % 4]; break;
            default: t[i] = i % 7 ? ' ' : '!'; break;
            }
        }
        t[N - 1] = 'x';
        for (unsigned e = 0; e < count; e++) {
            if (e && all[e].patterns == all[e - 1].patterns)
                continue;
            for (unsigned k = 0; k < all[e].npatterns; k++) {
                compile_ok(all[e].patterns[k]);
                void *scratch = malloc(nib_re_scratch_footprint(prog, plen, N));
                size_t from = 0, ms, me;
                int r;
                while ((r = nib_re_find(prog, plen, (const uint8_t *)t, N, from, &ms, &me,
                                        scratch)) == 1)
                    from = me;
                ck_assert_msg(r == 0, "%s[%u] on text kind %d: %d", all[e].name, k, kind, r);
                free(scratch);
            }
        }
    }
    compile_ok("(?=(?:a|a)+(?:a|a)+b)a");
    void *scratch = malloc(nib_re_scratch_footprint(prog, plen, 4096));
    memset(t, 'a', 4096);
    size_t ms, me;
    ck_assert_int_eq(nib_re_find(prog, plen, (const uint8_t *)t, 4096, 0, &ms, &me, scratch), -1);
    free(scratch);
    free(t);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("regex");
    TU_CASE(s, "syntax", NULL, NULL, 60, literals_and_escapes, classes,
            groups_alternation_quantifiers, anchors_and_lookahead, memo_fallback,
            never_an_empty_match, ill_formed_bytes, real_patterns, refused_constructs_are_named);
    TU_CASE(s, "hostile", NULL, NULL, 300, checker_against_corruption, hostile_texts_finish);
    return s;
}
