/* GGUF tokenizer metadata -> struct tok_spec. gguf_open has checked that
 * every string and array lies in the file; this file checks meaning: key
 * types, counts, ids in range, pieces that map back to bytes, merges whose
 * parts are tokens. */
#include "tools/compiler/gguf_tok.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_format.h"
#include "tools/compiler/gguf_meta.h"
#include "tools/compiler/gguf_pretok.h"

struct gt {
    struct gguf_meta m; /* the file, and where messages go */
    struct tok_spec *s;
    const struct gguf_kv *tokens; /* tokenizer.ggml.tokens */
};

/* An optional token id: *out stays dflt when absent; present ids must be
 * below the vocabulary size. none_ok: -1 (as int32, or 0xFFFFFFFF) means
 * "none", as converters write for ids a model lacks. */
static int opt_id(struct gt *t, const char *key, int32_t *out, int32_t dflt, int none_ok)
{
    uint32_t v;
    int rc = gguf_get_u32(t->m.g, key, &v);
    const struct gguf_kv *kv = gguf_find_kv(t->m.g, key);
    if (none_ok && rc == -2 && kv && kv->type == GGUF_TYPE_INT32 && gguf_arr_i32(kv, 0) == -1)
        rc = -1;
    if (none_ok && rc == 0 && v == UINT32_MAX)
        rc = -1;
    if (rc == -1) {
        *out = dflt;
        return 0;
    }
    if (rc)
        return gguf_meta_bad(&t->m, key, rc, "integer");
    if (v >= t->s->n_vocab)
        return gguf_meta_fail(&t->m, "%s %u is out of range (vocab %u)", key, v, t->s->n_vocab);
    *out = (int32_t)v;
    return 0;
}

/* An optional string: NUL-terminated malloc'd copy, or NULL when absent. */
static int opt_strdup(struct gt *t, const char *key, char **out)
{
    struct gguf_str v;
    int rc = gguf_get_str(t->m.g, key, &v);
    *out = NULL;
    if (rc == -1)
        return 0;
    if (rc)
        return gguf_meta_bad(&t->m, key, rc, "string");
    if (memchr(v.ptr, 0, v.len))
        return gguf_meta_fail(&t->m, "metadata '%s' contains a NUL byte", key);
    *out = malloc(v.len + 1);
    if (!*out)
        return gguf_meta_fail(&t->m, "out of memory");
    memcpy(*out, v.ptr, v.len);
    (*out)[v.len] = 0;
    return 0;
}

/* An optional per-token array of one of the element types given. */
static int opt_token_array(struct gt *t, const char *key, uint32_t t1, uint32_t t2,
                           const char *expected, const struct gguf_kv **out)
{
    const struct gguf_kv *kv = gguf_find_kv(t->m.g, key);
    *out = NULL;
    if (!kv)
        return 0;
    if (kv->type != GGUF_TYPE_ARRAY || (kv->arr_type != t1 && kv->arr_type != t2))
        return gguf_meta_wrong_type(&t->m, key, kv, expected);
    if (kv->arr_n != t->s->n_vocab)
        return gguf_meta_fail(&t->m, "metadata '%s' has %llu entries, expected %u (one per token)",
                              key, (unsigned long long)kv->arr_n, t->s->n_vocab);
    *out = kv;
    return 0;
}

/* ---- tokens ---- */

static int read_token_list(struct gt *t)
{
    const char *key = "tokenizer.ggml.tokens";
    const struct gguf_kv *kv = gguf_find_kv(t->m.g, key);
    if (!kv)
        return gguf_meta_fail(&t->m, "missing required metadata '%s'", key);
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
        return gguf_meta_wrong_type(&t->m, key, kv, "array of string");
    if (kv->arr_n == 0 || kv->arr_n > NIB_MAX_VOCAB)
        return gguf_meta_fail(&t->m, "vocabulary size %llu is out of range [1, %u]",
                              (unsigned long long)kv->arr_n, NIB_MAX_VOCAB);
    t->tokens = kv;
    t->s->n_vocab = (uint32_t)kv->arr_n;
    t->s->tokens = calloc(t->s->n_vocab, sizeof *t->s->tokens);
    return t->s->tokens ? 0 : gguf_meta_fail(&t->m, "out of memory");
}

/* Types and scores for every token. */
static int read_types_scores(struct gt *t)
{
    struct tok_spec *s = t->s;
    const struct gguf_kv *sk, *tk;
    if (opt_token_array(t, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, GGUF_TYPE_FLOAT32,
                        "array of float32", &sk) ||
        opt_token_array(t, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, GGUF_TYPE_UINT32,
                        "array of int32", &tk))
        return -1;
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        float sc = sk ? gguf_arr_f32(sk, i) : 0.0f;
        if (isnan(sc))
            return gguf_meta_fail(&t->m, "token %u has a NaN score", i);
        int32_t ty = tk ? gguf_arr_i32(tk, i) : NIB_TOK_NORMAL;
        if (ty < 0 || ty > NIB_TOK_BYTE)
            return gguf_meta_fail(&t->m, "token %u has unknown token type %d", i, ty);
        s->tokens[i].score = s->model == TOK_MODEL_SPM ? sc : 0.0f;
        s->tokens[i].type = ty == 0 ? NIB_TOK_NORMAL : ty; /* 0 = "undefined" in llama.cpp */
    }
    return 0;
}

static int set_bytes(struct gt *t, uint32_t i, const uint8_t *b, size_t n)
{
    return tok_spec_set_piece(&t->s->tokens[i], b, n) ? gguf_meta_fail(&t->m, "out of memory") : 0;
}

/* Token i's piece of tokenizer.ggml.tokens; *p walks the array. */
static int next_piece(struct gt *t, const uint8_t **p, uint32_t i, struct gguf_str *g)
{
    *g = gguf_next_str(p);
    if (g->len > NIB_MAX_PIECE)
        return gguf_meta_fail(&t->m, "token %u piece is %llu bytes, longer than the limit %u", i,
                              (unsigned long long)g->len, NIB_MAX_PIECE);
    return 0;
}

/* SentencePiece pieces as the runtime has always stored them: U+2581
 * (e2 96 81) becomes ' '. */
static int spm_pieces(struct gt *t)
{
    struct tok_spec *s = t->s;
    const uint8_t *p = t->tokens->val;
    uint8_t buf[NIB_MAX_PIECE];
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        struct gguf_str g;
        if (next_piece(t, &p, i, &g))
            return -1;
        const uint8_t *q = (const uint8_t *)g.ptr;
        size_t n = 0;
        for (size_t j = 0; j < g.len; j++) {
            if (j + 2 < g.len && q[j] == 0xe2 && q[j + 1] == 0x96 && q[j + 2] == 0x81) {
                buf[n++] = ' ';
                j += 2;
            } else {
                buf[n++] = q[j];
            }
        }
        if (set_bytes(t, i, buf, n))
            return -1;
        int b = s->tokens[i].type == NIB_TOK_BYTE ? tok_byte_piece(q, g.len) : -1;
        if (b >= 0 && s->byte_id[b] == UINT32_MAX)
            s->byte_id[b] = i;
        if (s->tokens[i].type == NIB_TOK_UNKNOWN)
            s->unk_id = (int32_t)i; /* the last one, as nibble always chose */
    }
    int all = 1;
    for (int b = 0; b < 256; b++)
        all &= s->byte_id[b] != UINT32_MAX;
    s->byte_fallback = all;
    if (s->unk_id < 0)
        s->unk_id = 0;
    return 0;
}

/* Byte-level pieces: normal tokens are in GPT-2's printable alphabet and
 * are mapped back to bytes; control, user-defined, unknown and unused
 * tokens are text as is. Every byte must have a token of its own. */
static int bpe_pieces(struct gt *t, struct tok_strmap *printable)
{
    struct tok_spec *s = t->s;
    const uint8_t *p = t->tokens->val;
    uint8_t buf[NIB_MAX_PIECE];
    char show[72];
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        struct gguf_str g;
        if (next_piece(t, &p, i, &g))
            return -1;
        const uint8_t *q = (const uint8_t *)g.ptr;
        tok_strmap_put(printable, q, (uint32_t)g.len, i);
        int ty = s->tokens[i].type;
        if (ty == NIB_TOK_NORMAL || ty == NIB_TOK_BYTE) {
            long n = tok_bytelevel_decode(q, g.len, buf);
            if (n < 0)
                return gguf_meta_fail(
                    &t->m,
                    "token %u '%s' of tokenizer.ggml.tokens is not in the byte-level "
                    "alphabet (a normal token of a gpt2 tokenizer must be)",
                    i, gguf_str_show(g, show));
            if (set_bytes(t, i, buf, (size_t)n))
                return -1;
            if (n == 1 && s->byte_id[buf[0]] == UINT32_MAX)
                s->byte_id[buf[0]] = i;
        } else if (set_bytes(t, i, q, g.len)) {
            return -1;
        }
    }
    for (int b = 0; b < 256; b++)
        if (s->byte_id[b] == UINT32_MAX)
            return gguf_meta_fail(&t->m, "byte-level vocabulary has no token for byte 0x%02X", b);
    s->byte_level = 1;
    return 0;
}

/* tokenizer.ggml.merges: "left right" in the printable form, rank = index. */
static int bpe_merges(struct gt *t, const struct tok_strmap *printable)
{
    const char *key = "tokenizer.ggml.merges";
    const struct gguf_kv *kv = gguf_find_kv(t->m.g, key);
    struct tok_spec *s = t->s;
    char show[72];
    if (!kv)
        return gguf_meta_fail(
            &t->m, "missing required metadata '%s' (a gpt2 tokenizer merges by rank)", key);
    if (kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING)
        return gguf_meta_wrong_type(&t->m, key, kv, "array of string");
    if (kv->arr_n > 4ull * NIB_MAX_VOCAB)
        return gguf_meta_fail(&t->m, "metadata '%s' has %llu merges, more than the limit %u", key,
                              (unsigned long long)kv->arr_n, 4u * NIB_MAX_VOCAB);
    s->n_merges = (uint32_t)kv->arr_n;
    s->merges = malloc((s->n_merges ? s->n_merges : 1) * sizeof *s->merges);
    if (!s->merges)
        return gguf_meta_fail(&t->m, "out of memory");
    const uint8_t *p = kv->val;
    uint8_t cat[2 * NIB_MAX_PIECE];
    for (uint32_t r = 0; r < s->n_merges; r++) {
        struct gguf_str m = gguf_next_str(&p);
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', m.len - 1) : NULL;
        if (!sp)
            return gguf_meta_fail(&t->m,
                                  "merge %u '%s' of %s is not two tokens separated by a space", r,
                                  gguf_str_show(m, show), key);
        uint32_t ll = (uint32_t)(sp - m.ptr), rl = (uint32_t)(m.len - ll - 1);
        const uint8_t *a = (const uint8_t *)m.ptr, *b = (const uint8_t *)sp + 1;
        int64_t li = tok_strmap_get(printable, a, ll), ri = tok_strmap_get(printable, b, rl);
        int64_t res = -1;
        if (li >= 0 && ri >= 0 && ll + rl <= sizeof cat) {
            memcpy(cat, a, ll);
            memcpy(cat + ll, b, rl);
            res = tok_strmap_get(printable, cat, ll + rl);
        }
        if (li < 0 || ri < 0 || res < 0)
            return gguf_meta_fail(&t->m, "merge %u '%s' of %s: %s is not a token", r,
                                  gguf_str_show(m, show), key,
                                  li < 0   ? "the left part"
                                  : ri < 0 ? "the right part"
                                           : "the merged text");
        s->merges[r] = (struct tok_spec_merge){(uint32_t)li, (uint32_t)ri, (uint32_t)res};
    }
    return 0;
}

/* tokenizer.ggml.pre -> pre-tokenizer steps (tools/compiler/gguf_pretok.h). */
static int bpe_pre(struct gt *t)
{
    struct tok_spec *s = t->s;
    if (opt_strdup(t, "tokenizer.ggml.pre", &s->pre_name))
        return -1;
    if (!s->pre_name) { /* older files: llama.cpp's own default */
        s->pre_name = strdup("default");
        if (!s->pre_name)
            return gguf_meta_fail(&t->m, "out of memory");
    }
    const struct nib_pretok *d = gguf_pretok_find(s->pre_name);
    if (!d) {
        char known[2048];
        struct gguf_str v = {strlen(s->pre_name), s->pre_name};
        char show[72];
        return gguf_meta_fail(&t->m, "unsupported tokenizer.ggml.pre '%s' (nibble knows: %s)",
                              gguf_str_show(v, show), nib_pretok_names(known, sizeof known));
    }
    return gguf_pretok_fill(d, s) ? gguf_meta_fail(&t->m, "out of memory") : 0;
}

/* CONTROL and USER_DEFINED tokens are matched in the text before the
 * model runs: user-defined ones always, control ones only when allowed. */
static int added_tokens(struct gt *t)
{
    struct tok_spec *s = t->s;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_vocab; i++)
        n += s->tokens[i].type == NIB_TOK_CONTROL || s->tokens[i].type == NIB_TOK_USER;
    s->added = calloc(n ? n : 1, sizeof *s->added);
    if (!s->added)
        return gguf_meta_fail(&t->m, "out of memory");
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        int ty = s->tokens[i].type;
        if ((ty == NIB_TOK_CONTROL || ty == NIB_TOK_USER) && s->tokens[i].len > 0)
            s->added[s->n_added++] =
                (struct tok_spec_added){.id = i, .special = ty == NIB_TOK_CONTROL};
    }
    return 0;
}

/* EOS, EOT, EOM, and control tokens with a well-known end-of-turn text. */
static int eog_set(struct gt *t, int32_t eot, int32_t eom)
{
    struct tok_spec *s = t->s;
    int32_t ids[] = {s->eos_id, eot, eom};
    for (size_t i = 0; i < 3; i++)
        if (ids[i] >= 0 && tok_spec_add_eog(s, (uint32_t)ids[i]))
            return gguf_meta_fail(&t->m, "more than %d end-of-generation tokens", TOK_SPEC_MAX_EOG);
    for (uint32_t i = 0; i < s->n_vocab; i++)
        if (s->tokens[i].type == NIB_TOK_CONTROL &&
            tok_is_end_of_turn_text(s->tokens[i].bytes, s->tokens[i].len) && tok_spec_add_eog(s, i))
            return gguf_meta_fail(&t->m, "more than %d end-of-generation tokens", TOK_SPEC_MAX_EOG);
    tok_spec_sort_eog(s);
    return 0;
}

static int specials(struct gt *t)
{
    struct tok_spec *s = t->s;
    int spm = s->model == TOK_MODEL_SPM;
    int32_t eot, eom, unk;
    const struct nib_pretok *pt = s->pre_name ? gguf_pretok_find(s->pre_name) : NULL;
    int add_bos = spm || (pt && gguf_pretok_add_bos(pt));
    int add_eos = 0;
    /* padding_token_id is not read: nothing in nibble pads. */
    if (opt_id(t, "tokenizer.ggml.bos_token_id", &s->bos_id, spm ? 1 : -1, 0) ||
        opt_id(t, "tokenizer.ggml.eos_token_id", &s->eos_id, spm ? 2 : -1, 0) ||
        opt_id(t, "tokenizer.ggml.eot_token_id", &eot, -1, 1) ||
        opt_id(t, "tokenizer.ggml.eom_token_id", &eom, -1, 1) ||
        opt_id(t, "tokenizer.ggml.unknown_token_id", &unk, -1, 1) ||
        gguf_meta_opt_bool(&t->m, "tokenizer.ggml.add_bos_token", &add_bos) ||
        gguf_meta_opt_bool(&t->m, "tokenizer.ggml.add_eos_token", &add_eos))
        return -1;
    if (!spm)
        s->unk_id = unk;
    if (add_bos && s->bos_id < 0)
        return gguf_meta_fail(&t->m, "tokenizer.ggml.add_bos_token is true but the file has no "
                                     "tokenizer.ggml.bos_token_id");
    if (add_eos && !spm)
        return gguf_meta_fail(
            &t->m, "tokenizer.ggml.add_eos_token true is not supported for gpt2 tokenizers");
    s->add_bos = add_bos;
    return eog_set(t, eot, eom);
}

int gguf_tok_load(const struct gguf_file *g, struct tok_spec *out, char *err, size_t errlen)
{
    struct gt t = {.s = out};
    struct gguf_str model;
    char show[72];
    gguf_meta_init(&t.m, g, err, errlen);
    tok_spec_init(out);
    if (gguf_meta_need_str(&t.m, "tokenizer.ggml.model", &model))
        return -1;
    if (gguf_str_eq(model, "llama"))
        out->model = TOK_MODEL_SPM;
    else if (gguf_str_eq(model, "gpt2"))
        out->model = TOK_MODEL_BPE;
    else
        return gguf_meta_fail(&t.m,
                              "unsupported tokenizer model '%s' (nibble reads 'llama' and 'gpt2')",
                              gguf_str_show(model, show));
    int rc = read_token_list(&t) || read_types_scores(&t);
    if (!rc && out->model == TOK_MODEL_SPM) {
        rc = spm_pieces(&t);
    } else if (!rc) {
        struct tok_strmap printable;
        if (tok_strmap_init(&printable, out->n_vocab))
            rc = gguf_meta_fail(&t.m, "out of memory");
        else
            rc = bpe_pieces(&t, &printable) || bpe_merges(&t, &printable) || bpe_pre(&t);
        tok_strmap_free(&printable);
    }
    rc = rc || added_tokens(&t) || specials(&t) ||
         opt_strdup(&t, "tokenizer.chat_template", &out->chat_template);
    if (rc) {
        tok_spec_free(out);
        tok_spec_init(out);
        return -1;
    }
    return 0;
}
