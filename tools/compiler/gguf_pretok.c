/* tokenizer.ggml.pre names <-> tok_spec steps (gguf_pretok.h). */
#include "tools/compiler/gguf_pretok.h"

#include <stdlib.h>
#include <string.h>

/* GPT-2's split: what a tokenizer.json ByteLevel pre-tokenizer with
 * use_regex runs, and llama.cpp's list for "gpt-2" (that list without the
 * last alternative, in longer lists, splits the same). */
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
static const char gpt2_re[] = GPT2_RE "|\\s+";
static const char gpt2_re_short[] = GPT2_RE;

/* Families whose tokenizer.json normalizes to NFC first (the Qwen2
 * tokenizer). */
static const char *const nfc_names[] = {"qwen2", "deepseek-r1-qwen"};

static int has_nfc(const struct nib_pretok *p)
{
    for (size_t i = 0; i < sizeof nfc_names / sizeof nfc_names[0]; i++)
        if (strcmp(p->name, nfc_names[i]) == 0)
            return 1;
    return 0;
}

const struct nib_pretok *gguf_pretok_find(const char *name)
{
    return nib_pretok_find(name, strlen(name));
}

int gguf_pretok_add_bos(const struct nib_pretok *p)
{
    return p->ignore_merges;
}

static int add_pre(struct tok_spec *s, struct tok_pre_step st)
{
    struct tok_pre_step *p = realloc(s->pre, (s->n_pre + 1) * sizeof *p);
    if (!p)
        return -1;
    s->pre = p;
    s->pre[s->n_pre++] = st;
    return 0;
}

int gguf_pretok_fill(const struct nib_pretok *p, struct tok_spec *s)
{
    if (has_nfc(p)) {
        struct tok_norm_step *n = realloc(s->norm, (s->n_norm + 1) * sizeof *n);
        if (!n)
            return -1;
        s->norm = n;
        s->norm[s->n_norm++] = (struct tok_norm_step){.kind = TOK_NORM_NFC};
    }
    s->ignore_merges = p->ignore_merges;
    /* GPT-2's list alone is written as tokenizer.json writes it */
    if (p->npatterns == 1 && strcmp(p->patterns[0], gpt2_re) == 0)
        return add_pre(s, (struct tok_pre_step){.kind = TOK_PRE_BYTELEVEL_REGEX});
    for (unsigned i = 0; i < p->npatterns; i++) {
        char *pat = strdup(p->patterns[i]);
        if (!pat || add_pre(s, (struct tok_pre_step){.kind = TOK_PRE_SPLIT_REGEX,
                                                     .pattern = pat,
                                                     .pattern_len = (uint32_t)strlen(pat),
                                                     .behavior = TOK_SPLIT_ISOLATED})) {
            free(pat);
            return -1;
        }
    }
    return 0;
}

/* One step against one pattern: the same Isolated split, or a
 * tokenizer.json spelling of it. */
static int step_is(const struct tok_pre_step *st, const char *pattern)
{
    switch (st->kind) {
    case TOK_PRE_SPLIT_REGEX:
        return st->behavior == TOK_SPLIT_ISOLATED && !st->invert &&
               strcmp(st->pattern, pattern) == 0;
    case TOK_PRE_DIGITS: return st->individual_digits && strcmp(pattern, "\\p{N}") == 0;
    case TOK_PRE_BYTELEVEL_REGEX:
        return !st->add_prefix_space &&
               (strcmp(pattern, gpt2_re) == 0 || strcmp(pattern, gpt2_re_short) == 0);
    default: return 0;
    }
}

static int steps_match(const struct nib_pretok *p, const struct tok_spec *s)
{
    int nfc = has_nfc(p);
    if ((uint32_t)nfc != s->n_norm || (nfc && s->norm[0].kind != TOK_NORM_NFC) ||
        p->ignore_merges != s->ignore_merges || p->npatterns != s->n_pre)
        return 0;
    for (unsigned i = 0; i < p->npatterns; i++)
        if (!step_is(&s->pre[i], p->patterns[i]))
            return 0;
    return 1;
}

const char *gguf_pretok_name_of(const struct tok_spec *s)
{
    unsigned n;
    const struct nib_pretok *all = nib_pretok_all(&n);
    for (unsigned i = 0; i < n; i++)
        if (steps_match(&all[i], s))
            return all[i].name;
    return NULL;
}
