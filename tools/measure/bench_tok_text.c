/* The built-in text of nib bench --tokenizer: about 1 MiB of mixed text,
 * the same bytes on every machine (a fixed-seed generator): English-like
 * prose with a large vocabulary (common words and made-up ones, so no cache
 * sees only a few hundred words), source code, Chinese, Japanese and Korean,
 * Cyrillic, Greek, Arabic and Devanagari, emoji with ZWJ sequences, numbers. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/measure/bench_tok.h"

struct buf {
    char *p;
    size_t n, cap;
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pick(uint64_t *s, size_t n)
{
    return (size_t)(rnd(s) % n);
}

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->n + n > b->cap)
        return; /* the caller sized it; the tail is cut at a paragraph anyway */
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static const char *const common[] = {
    "the",  "of",   "and",    "to",   "in",    "is",   "you",   "that",  "it",     "he",
    "was",  "for",  "on",     "are",  "with",  "as",   "his",   "they",  "be",     "at",
    "one",  "have", "this",   "from", "or",    "had",  "by",    "word",  "but",    "what",
    "some", "we",   "can",    "out",  "other", "were", "all",   "there", "when",   "up",
    "use",  "your", "how",    "said", "an",    "each", "she",   "which", "do",     "their",
    "time", "if",   "will",   "way",  "about", "many", "then",  "them",  "write",  "would",
    "like", "so",   "these",  "her",  "long",  "make", "thing", "see",   "him",    "two",
    "has",  "look", "more",   "day",  "could", "go",   "come",  "did",   "number", "sound",
    "no",   "most", "people", "my",   "over",  "know", "water", "than",  "call",   "first",
    "who",  "may",  "down",   "side", "been",  "now",  "find",  "model", "memory", "token",
};
static const char *const syll[] = {"ka",  "ren", "to",   "mi",   "sal", "ver",  "on",  "tri", "bel",
                                   "dor", "an",  "quis", "el",   "mar", "stru", "pen", "ix",  "lo",
                                   "gra", "th",  "ion",  "ment", "ous", "ble",  "er",  "ing", "ed",
                                   "pro", "con", "de",   "re",   "un",  "ex",   "sy",  "nu",  "ph"};
static const char *const contr[] = {"'s", "'t", "'re", "'ve", "'ll", "'d", "'m"};
static const char *const punct[] = {".", ",", ";", ":", "!", "?", " -", "...", ")", "\""};

static void word(struct buf *b, uint64_t *s)
{
    if (pick(s, 10) < 7) { /* Zipf-like: the first words far more often */
        size_t n = sizeof common / sizeof common[0];
        size_t i = pick(s, n) * pick(s, n) / n;
        puts_(b, common[i]);
    } else {
        for (size_t k = 1 + pick(s, 4); k; k--)
            puts_(b, syll[pick(s, sizeof syll / sizeof syll[0])]);
    }
}

static void prose(struct buf *b, uint64_t *s)
{
    for (size_t sent = 2 + pick(s, 6); sent; sent--) {
        size_t n = 4 + pick(s, 18);
        for (size_t i = 0; i < n; i++) {
            size_t at = b->n;
            word(b, s);
            if (i == 0 && b->n > at && b->p[at] >= 'a' && b->p[at] <= 'z')
                b->p[at] -= 32;
            if (pick(s, 25) == 0)
                puts_(b, contr[pick(s, 7)]);
            if (i + 1 < n) {
                if (pick(s, 12) == 0)
                    puts_(b, punct[pick(s, 3)]);
                puts_(b, " ");
            }
        }
        puts_(b, pick(s, 8) ? "." : pick(s, 2) ? "?" : "!");
        if (sent > 1)
            puts_(b, " ");
    }
    puts_(b, "\n\n");
}

static void code(struct buf *b, uint64_t *s)
{
    char line[160];
    const char *types[] = {"int", "size_t", "float", "uint32_t", "double"};
    snprintf(line, sizeof line, "static %s %s_%s(const %s *x, size_t n)\n{\n", types[pick(s, 5)],
             common[pick(s, 100)], syll[pick(s, 36)], types[pick(s, 5)]);
    puts_(b, line);
    for (size_t k = 1 + pick(s, 6); k; k--) {
        snprintf(line, sizeof line,
                 "    for (size_t i = %u; i < n; i += %u)\n        acc%u += x[i] * %u.%ue-%u;\n",
                 (unsigned)pick(s, 4), 1 + (unsigned)pick(s, 8), (unsigned)pick(s, 9),
                 (unsigned)pick(s, 1000), (unsigned)pick(s, 100), (unsigned)pick(s, 9));
        puts_(b, line);
    }
    puts_(b, "    return acc0; // the sum\n}\n\n");
    snprintf(line, sizeof line,
             "def %s_%s(xs):\n    \"\"\"Return the %s.\"\"\"\n    return [x ** %u for x in xs "
             "if x != %u]\n\n",
             common[pick(s, 100)], syll[pick(s, 36)], common[pick(s, 100)], (unsigned)pick(s, 5),
             (unsigned)pick(s, 100));
    puts_(b, line);
}

/* 300 frequent Chinese characters, then kana and hangul */
static const char zh[] =
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可"
    "她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三"
    "已"
    "老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问"
    "力"
    "机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代"
    "军"
    "产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死"
    "常"
    "提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直"
    "服";
static const char ja[] =
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよ"
    "らりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノ";
static const char ko[] =
    "가나다라마바사아자차카타파하고노도로모보소오조초코토포호는을를에서한국어입니다";

static void utf8_chars(struct buf *b, uint64_t *s, const char *set, size_t set_len, size_t n)
{
    /* every character of these sets is 3 bytes */
    for (size_t i = 0; i < n; i++)
        put(b, set + 3 * pick(s, set_len / 3), 3);
}

static void cjk(struct buf *b, uint64_t *s)
{
    static const char *const p[] = {"，", "。", "、", "！", "？", "「", "」"};
    for (size_t k = 2 + pick(s, 6); k; k--) {
        size_t which = pick(s, 6);
        if (which < 4)
            utf8_chars(b, s, zh, sizeof zh - 1, 4 + pick(s, 20));
        else if (which == 4)
            utf8_chars(b, s, ja, sizeof ja - 1, 4 + pick(s, 20));
        else {
            for (size_t w = 1 + pick(s, 5); w; w--) {
                utf8_chars(b, s, ko, sizeof ko - 1, 1 + pick(s, 4));
                puts_(b, " ");
            }
        }
        puts_(b, p[pick(s, 7)]);
        if (pick(s, 5) == 0) {
            word(b, s);
            puts_(b, " ");
        }
    }
    puts_(b, "\n\n");
}

static const char *const other_words[] = {
    "память", "модель",   "токен",  "быстро", "слово",  "человек", "время", "μνήμη",   "γλώσσα",
    "λέξη",   "άνθρωπος", "ذاكرة",  "نموذج",  "كلمة",   "الوقت",   "स्मृति",  "भाषा",    "शब्द",
    "समय",    "Zürich",   "façade", "naïve",  "Ελλάδα", "Москва",  "ﻣﺮﺣﺒﺎ", "İstanbul"};

static void other(struct buf *b, uint64_t *s)
{
    size_t n = sizeof other_words / sizeof other_words[0];
    for (size_t k = 6 + pick(s, 20); k; k--) {
        puts_(b, other_words[pick(s, n)]);
        puts_(b, pick(s, 8) ? " " : ", ");
    }
    puts_(b, "\n\n");
}

static const char *const emoji[] = {
    "\xF0\x9F\x98\x80", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xE2\x9D\xA4\xEF\xB8\x8F",
    "\xF0\x9F\x94\xA5", "\xF0\x9F\x9A\x80", "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",
    /* family: man ZWJ woman ZWJ girl ZWJ boy */
    "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F"
    "\x91\xA6",
    /* woman technologist */
    "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB", "\xF0\x9F\x98\x82", "\xE2\x9C\xA8"};

static void chat(struct buf *b, uint64_t *s)
{
    for (size_t k = 2 + pick(s, 5); k; k--) {
        for (size_t w = 3 + pick(s, 8); w; w--) {
            word(b, s);
            puts_(b, " ");
        }
        for (size_t e = 1 + pick(s, 3); e; e--)
            puts_(b, emoji[pick(s, sizeof emoji / sizeof emoji[0])]);
        puts_(b, "\n");
    }
    puts_(b, "\n");
}

static void numbers(struct buf *b, uint64_t *s)
{
    char line[128];
    for (size_t k = 3 + pick(s, 8); k; k--) {
        snprintf(line, sizeof line, "| %04u-%02u-%02u | %u,%03u.%02u | %u%% | 0x%08X |\n",
                 1900 + (unsigned)pick(s, 200), 1 + (unsigned)pick(s, 12),
                 1 + (unsigned)pick(s, 28), (unsigned)pick(s, 1000), (unsigned)pick(s, 1000),
                 (unsigned)pick(s, 100), (unsigned)pick(s, 101), (unsigned)rnd(s));
        puts_(b, line);
    }
    puts_(b, "\n");
}

char *bench_tok_builtin_text(size_t target, size_t *len)
{
    struct buf b = {.p = malloc(target + 8192), .cap = target + 8192};
    if (!b.p)
        return NULL;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    while (b.n < target) {
        size_t r = pick(&s, 100);
        if (r < 55)
            prose(&b, &s);
        else if (r < 70)
            code(&b, &s);
        else if (r < 82)
            cjk(&b, &s);
        else if (r < 90)
            other(&b, &s);
        else if (r < 95)
            chat(&b, &s);
        else
            numbers(&b, &s);
    }
    *len = b.n;
    return b.p;
}
