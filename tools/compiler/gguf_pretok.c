/* The pre-tokenizer names nibble knows, each as the steps of its family's
 * tokenizer.json. The regexes are written the way those files write them
 * ((?i:...) contractions), which rt/text/regex.h runs with Oniguruma's
 * meaning. */
#include "tools/compiler/gguf_pretok.h"

#include <stdlib.h>
#include <string.h>

/* Llama 3: letters with one leading non-letter, digits in groups of up to 3. */
static const char *const re_llama3[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
/* Qwen2: the same with single digits. */
static const char *const re_qwen2[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};

static const struct gguf_pretok table[] = {
    {"llama-bpe", 0, re_llama3, 0, 0, 1, 1},
    {"qwen2", 0, re_qwen2, 0, 1, 0, 0},
    {"gpt-2", 1, NULL, 0, 0, 0, 0},
};

#define N_TABLE (sizeof table / sizeof table[0])

const char *const gguf_tok_pre_names[N_TABLE + 1] = {"llama-bpe", "qwen2", "gpt-2", NULL};

const struct gguf_pretok *gguf_pretok_find(const char *name)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
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

int gguf_pretok_fill(const struct gguf_pretok *d, struct tok_spec *s)
{
    if (d->nfc) {
        struct tok_norm_step *n = realloc(s->norm, (s->n_norm + 1) * sizeof *n);
        if (!n)
            return -1;
        s->norm = n;
        s->norm[s->n_norm++] = (struct tok_norm_step){.kind = TOK_NORM_NFC};
    }
    if (d->individual_digits &&
        add_pre(s, (struct tok_pre_step){.kind = TOK_PRE_DIGITS, .individual_digits = 1}))
        return -1;
    if (d->bytelevel_regex)
        return add_pre(s, (struct tok_pre_step){.kind = TOK_PRE_BYTELEVEL_REGEX});
    for (size_t i = 0; d->regex && d->regex[i]; i++) {
        char *pat = strdup(d->regex[i]);
        if (!pat || add_pre(s, (struct tok_pre_step){.kind = TOK_PRE_SPLIT_REGEX,
                                                     .pattern = pat,
                                                     .pattern_len = (uint32_t)strlen(pat),
                                                     .behavior = TOK_SPLIT_ISOLATED})) {
            free(pat);
            return -1;
        }
    }
    s->ignore_merges = d->ignore_merges;
    return 0;
}

static int steps_match(const struct gguf_pretok *d, const struct tok_spec *s)
{
    if ((uint32_t)d->nfc != s->n_norm || (d->nfc && s->norm[0].kind != TOK_NORM_NFC) ||
        d->ignore_merges != s->ignore_merges)
        return 0;
    uint32_t at = 0;
    if (d->individual_digits) {
        if (s->n_pre < 1 || s->pre[0].kind != TOK_PRE_DIGITS || !s->pre[0].individual_digits)
            return 0;
        at = 1;
    }
    if (d->bytelevel_regex)
        return s->n_pre == at + 1 && s->pre[at].kind == TOK_PRE_BYTELEVEL_REGEX &&
               !s->pre[at].add_prefix_space;
    for (size_t i = 0; d->regex && d->regex[i]; i++, at++) {
        if (at >= s->n_pre)
            return 0;
        const struct tok_pre_step *p = &s->pre[at];
        if (p->kind != TOK_PRE_SPLIT_REGEX || p->behavior != TOK_SPLIT_ISOLATED || p->invert ||
            strcmp(p->pattern, d->regex[i]) != 0)
            return 0;
    }
    return at == s->n_pre;
}

const char *gguf_pretok_name_of(const struct tok_spec *s)
{
    for (size_t i = 0; i < N_TABLE; i++)
        if (steps_match(&table[i], s))
            return table[i].name;
    return NULL;
}
