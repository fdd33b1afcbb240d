/* nib synth --vocab: a real tokenizer (a struct tok_spec read from a
 * tokenizer.json) written as GGUF tokenizer.ggml.* metadata the way
 * llama.cpp's converter writes it, so that gguf_tok reads the same
 * tokenizer back.
 *
 * Byte-level vocabularies become model "gpt2": normal tokens in GPT-2's
 * printable alphabet, control and user-defined tokens as text, merges as
 * "left right", and the pre-tokenizer as the llama.cpp name whose steps
 * are the file's (tools/compiler/gguf_pretok.h; no name: refused).
 * SentencePiece-style vocabularies (Prepend/Replace U+2581 normalizers,
 * byte-fallback <0xXX> tokens) become model "llama": pieces as they are,
 * scores from the merge ranks (a merge's result scores -(rank + 1), so
 * earlier merges win), which approximates the file's BPE (the GGUF
 * SentencePiece model merges by score, not by rank). GGUF cannot say that
 * an added token is "normalized": such tokens are written as llama.cpp's
 * converter writes them, to be matched as written. */
#include "tools/compiler/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_format.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/gguf_pretok.h"
#include "tools/compiler/gguf_write.h"

#define SP "\xe2\x96\x81"

struct strs {
    char **p;
    uint32_t *len;
    uint32_t n;
};

static void strs_free(struct strs *s)
{
    for (uint32_t i = 0; s->p && i < s->n; i++)
        free(s->p[i]);
    free(s->p);
    free(s->len);
    memset(s, 0, sizeof *s);
}

static int strs_init(struct strs *s, uint32_t n)
{
    s->n = n;
    s->p = calloc(n ? n : 1, sizeof *s->p);
    s->len = calloc(n ? n : 1, sizeof *s->len);
    return s->p && s->len ? 0 : -1;
}

static int is_text_type(int type)
{
    return type != NIB_TOK_NORMAL && type != NIB_TOK_BYTE;
}

/* The GGUF text of every token. */
static int token_texts(const struct tok_spec *s, struct strs *t)
{
    if (strs_init(t, s->n_vocab))
        return -1;
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        const struct tok_spec_token *k = &s->tokens[i];
        int printable = s->byte_level && !is_text_type(k->type);
        t->p[i] = malloc(2 * (size_t)k->len + 1);
        if (!t->p[i])
            return -1;
        if (printable) {
            t->len[i] = (uint32_t)tok_bytelevel_encode(k->bytes, k->len, (uint8_t *)t->p[i]);
        } else {
            memcpy(t->p[i], k->bytes, k->len);
            t->len[i] = k->len;
        }
        t->p[i][t->len[i]] = 0;
    }
    return 0;
}

static int merge_texts(const struct tok_spec *s, const struct strs *tok, struct strs *m, char *err,
                       size_t errlen)
{
    if (strs_init(m, s->n_merges))
        return snprintf(err, errlen, "out of memory"), -1;
    for (uint32_t r = 0; r < s->n_merges; r++) {
        uint32_t a = s->merges[r].left, b = s->merges[r].right;
        if (memchr(tok->p[a], ' ', tok->len[a]) || memchr(tok->p[b], ' ', tok->len[b])) {
            snprintf(err, errlen, "merge %u has a part with a space: it has no GGUF form", r);
            return -1;
        }
        m->len[r] = tok->len[a] + 1 + tok->len[b];
        m->p[r] = malloc(m->len[r] + 1);
        if (!m->p[r])
            return snprintf(err, errlen, "out of memory"), -1;
        memcpy(m->p[r], tok->p[a], tok->len[a]);
        m->p[r][tok->len[a]] = ' ';
        memcpy(m->p[r] + tok->len[a] + 1, tok->p[b], tok->len[b]);
        m->p[r][m->len[r]] = 0;
    }
    return 0;
}

/* What GGUF cannot say is refused rather than dropped. */
static int check_representable(const struct tok_spec *s, char *err, size_t errlen)
{
    uint32_t n_text = 0;
    for (uint32_t i = 0; i < s->n_vocab; i++)
        n_text += s->tokens[i].type == NIB_TOK_CONTROL || s->tokens[i].type == NIB_TOK_USER;
    for (uint32_t i = 0; i < s->n_added; i++) {
        const struct tok_spec_added *a = &s->added[i];
        int ty = s->tokens[a->id].type;
        if (a->lstrip || a->rstrip) {
            snprintf(err, errlen, "added token %u strips whitespace: GGUF has no way to say so",
                     a->id);
            return -1;
        }
        if (ty != (a->special ? NIB_TOK_CONTROL : NIB_TOK_USER) && ty != NIB_TOK_UNKNOWN) {
            snprintf(err, errlen, "added token %u has token type %d", a->id, ty);
            return -1;
        }
        n_text -= ty != NIB_TOK_UNKNOWN;
    }
    if (n_text) {
        snprintf(err, errlen, "control or user-defined tokens that are not added tokens");
        return -1;
    }
    if (s->add_eos) {
        snprintf(err, errlen, "add_eos is not supported");
        return -1;
    }
    return 0;
}

/* EOG ids beyond the EOS and well-known control texts go to the eot and
 * eom slots, which is all GGUF has. */
static int eog_slots(const struct tok_spec *s, int32_t *eot, int32_t *eom, char *err, size_t errlen)
{
    *eot = *eom = -1;
    for (uint32_t i = 0; i < s->n_eog; i++) {
        uint32_t id = s->eog[i];
        const struct tok_spec_token *t = &s->tokens[id];
        if ((int32_t)id == s->eos_id)
            continue;
        if (t->type == NIB_TOK_CONTROL && tok_is_end_of_turn_text(t->bytes, t->len)) {
            if (t->len == 10 && !memcmp(t->bytes, "<|eot_id|>", 10))
                *eot = (int32_t)id;
            else if (t->len == 10 && !memcmp(t->bytes, "<|eom_id|>", 10))
                *eom = (int32_t)id;
            continue;
        }
        if (*eot < 0) {
            *eot = (int32_t)id;
        } else if (*eom < 0) {
            *eom = (int32_t)id;
        } else {
            snprintf(err, errlen, "more end-of-generation tokens than GGUF can name");
            return -1;
        }
    }
    return 0;
}

static void write_ids(struct gguf_writer *w, const struct tok_spec *s, int32_t eot, int32_t eom)
{
    if (s->bos_id >= 0)
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)s->bos_id);
    if (s->eos_id >= 0)
        gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)s->eos_id);
    if (s->unk_id >= 0)
        gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)s->unk_id);
    if (eot >= 0)
        gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)eot);
    if (eom >= 0)
        gguf_w_u32(w, "tokenizer.ggml.eom_token_id", (uint32_t)eom);
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", s->add_bos);
    gguf_w_bool(w, "tokenizer.ggml.add_eos_token", 0);
    if (s->chat_template)
        gguf_w_str(w, "tokenizer.chat_template", s->chat_template);
}

/* SentencePiece style: [Prepend U+2581, Replace ' ' -> U+2581] (with or
 * without the Prepend), no pre-tokenizer, byte fallback. */
static int spm_style(const struct tok_spec *s, int *prefix)
{
    uint32_t i = 0;
    *prefix = 0;
    if (s->n_pre || s->byte_level)
        return 0;
    if (i < s->n_norm && s->norm[i].kind == TOK_NORM_PREPEND && s->norm[i].arg_len == 3 &&
        !memcmp(s->norm[i].arg, SP, 3)) {
        *prefix = 1;
        i++;
    }
    if (!(i < s->n_norm && s->norm[i].kind == TOK_NORM_REPLACE && s->norm[i].pattern_len == 1 &&
          s->norm[i].pattern[0] == ' ' && s->norm[i].arg_len == 3 &&
          !memcmp(s->norm[i].arg, SP, 3)))
        return 0;
    return i + 1 == s->n_norm;
}

int nib_synth_tok_metadata(struct gguf_writer *w, const struct tok_spec *s, char *err,
                           size_t errlen)
{
    struct strs tok = {0}, mer = {0};
    int32_t *types = NULL, eot, eom, prefix = 0;
    float *scores = NULL;
    int rc = -1;
    const char *pre = s->byte_level ? gguf_pretok_name_of(s) : NULL;
    if (s->model != TOK_MODEL_BPE) {
        snprintf(err, errlen, "only BPE tokenizers are written by --vocab");
        return -1;
    }
    if (s->byte_level && !pre) {
        snprintf(err, errlen,
                 "its pre-tokenizer matches no tokenizer.ggml.pre name nibble knows (see "
                 "tools/compiler/gguf_pretok.c)");
        return -1;
    }
    if (!s->byte_level && !spm_style(s, &prefix)) {
        snprintf(err, errlen,
                 "neither byte-level nor SentencePiece-style (Prepend/Replace U+2581 "
                 "normalizers and no pre-tokenizer): it has no GGUF form nibble writes");
        return -1;
    }
    if (check_representable(s, err, errlen) || eog_slots(s, &eot, &eom, err, errlen))
        return -1;
    types = malloc(s->n_vocab * sizeof *types);
    scores = calloc(s->n_vocab, sizeof *scores);
    if (!types || !scores || token_texts(s, &tok)) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < s->n_vocab; i++)
        types[i] = s->tokens[i].type;
    if (s->byte_level) {
        if (merge_texts(s, &tok, &mer, err, errlen))
            goto out;
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", pre);
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok.p, tok.len, tok.n);
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, s->n_vocab);
        gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mer.p, mer.len, mer.n);
    } else {
        for (uint32_t r = s->n_merges; r-- > 0;)
            scores[s->merges[r].result] = -(float)(r + 1); /* the earliest merge wins */
        gguf_w_str(w, "tokenizer.ggml.model", "llama");
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok.p, tok.len, tok.n);
        gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, s->n_vocab);
        gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, s->n_vocab);
        gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
    }
    write_ids(w, s, eot, eom);
    rc = 0;
out:
    free(types);
    free(scores);
    strs_free(&tok);
    strs_free(&mer);
    return rc;
}
