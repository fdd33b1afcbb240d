/* A tokenizer as nib compile understands it, before it is packed into the
 * blob's tokenizer section (tools/compiler/tok_pack.c): the one form both
 * importers produce, the GGUF one (tokenizer.ggml.*, tools/compiler/
 * gguf_tok.c) and the Hugging Face one (tokenizer.json with
 * tokenizer_config.json and generation_config.json, tools/compiler/
 * hf_tokenizer.c). Everything is owned (malloc'd) by the spec. */
#ifndef NIB_TOK_SPEC_H
#define NIB_TOK_SPEC_H

#include <stddef.h>
#include <stdint.h>

enum tok_spec_model {
    TOK_MODEL_SPM =
        1, /* SentencePiece BPE by piece score (GGUF "llama"): rt/tokenizer.c as today */
    TOK_MODEL_BPE = 2, /* BPE by merge rank (GGUF "gpt2", tokenizer.json "BPE") */
};

struct tok_spec_token {
    uint8_t *bytes; /* the piece as raw bytes: byte-level pieces already mapped back
                     * from their printable form; control and added tokens verbatim */
    uint32_t len;
    float score;  /* SPM only */
    int32_t type; /* enum nib_tok_type (model_blob/blob_format.h) */
};

struct tok_spec_merge {
    uint32_t left, right, result; /* rank = index in the merges array */
};

/* Normalizer steps, applied in order to every piece of text between added
 * tokens. */
enum tok_norm_kind {
    TOK_NORM_NFC = 1,
    TOK_NORM_PREPEND = 2, /* arg: prepended to a non-empty piece */
    TOK_NORM_REPLACE = 3, /* every occurrence of pattern (a literal string) -> arg */
};

struct tok_norm_step {
    int kind;
    uint8_t *pattern, *arg;
    uint32_t pattern_len, arg_len;
};

/* Pre-tokenizer steps: each splits every current word further. */
enum tok_pre_kind {
    TOK_PRE_SPLIT_REGEX = 1,     /* pattern: a regex (rt/text/regex.h) */
    TOK_PRE_SPLIT_STRING = 2,    /* pattern: a literal string */
    TOK_PRE_DIGITS = 3,          /* individual: each digit alone, else runs of digits */
    TOK_PRE_METASPACE = 4,       /* ' ' -> replacement; prepend_scheme; split */
    TOK_PRE_BYTELEVEL_REGEX = 5, /* ByteLevel with use_regex: the GPT-2 split */
};

/* Split behaviours (tokenizer.json "behavior"). */
enum tok_split_behavior {
    TOK_SPLIT_ISOLATED = 1,
    TOK_SPLIT_REMOVED = 2,
    TOK_SPLIT_MERGED_PREV = 3,
    TOK_SPLIT_MERGED_NEXT = 4,
    TOK_SPLIT_CONTIGUOUS = 5,
};

enum tok_prepend_scheme { TOK_PREPEND_NEVER = 0, TOK_PREPEND_FIRST = 1, TOK_PREPEND_ALWAYS = 2 };

struct tok_pre_step {
    int kind;
    char *pattern; /* SPLIT_*: NUL-terminated, UTF-8 */
    uint32_t pattern_len;
    int behavior;          /* SPLIT_*: enum tok_split_behavior */
    int invert;            /* SPLIT_*: the matches are the gaps */
    int individual_digits; /* DIGITS */
    uint32_t replacement;  /* METASPACE: the code point (U+2581) */
    int prepend_scheme;    /* METASPACE */
    int split;             /* METASPACE */
    int add_prefix_space;  /* BYTELEVEL_REGEX */
};

/* A token matched in the text before normalization (tokenizer.json
 * added_tokens, GGUF CONTROL and USER_DEFINED tokens). */
struct tok_spec_added {
    uint32_t id;
    int special;        /* matched only when the request allows special tokens */
    int lstrip, rstrip; /* swallow whitespace on that side */
    /* tokenizer.json "normalized": matched in the normalized text, by its
     * normalized content (GGUF: always 0, matched as written) */
    int normalized;
};

#define TOK_SPEC_MAX_EOG 16

struct tok_spec {
    int model; /* enum tok_spec_model */
    uint32_t n_vocab;
    struct tok_spec_token *tokens;
    /* BPE */
    uint32_t n_merges;
    struct tok_spec_merge *merges;
    int byte_level; /* words start as bytes: byte_id[b] is the token of byte b */
    uint32_t byte_id[256];
    int byte_fallback; /* characters not in the vocabulary become <0xXX> tokens */
    int fuse_unk;      /* consecutive unknowns become one unk */
    int ignore_merges; /* a word that is itself a token is that token */
    int32_t unk_id;    /* -1: none */
    /* pipeline */
    uint32_t n_norm, n_pre;
    struct tok_norm_step *norm;
    struct tok_pre_step *pre;
    uint32_t n_added;
    struct tok_spec_added *added;
    /* decoding: pieces are shown with replace_from -> replace_to (e.g. U+2581 -> ' ');
     * strip_leading: spaces dropped from the start of a decoded text */
    uint8_t *dec_from, *dec_to;
    uint32_t dec_from_len, dec_to_len;
    uint32_t strip_leading;
    /* specials */
    int add_bos, add_eos;
    int32_t bos_id, eos_id; /* -1: none */
    uint32_t n_eog;         /* end-of-generation set (EOS, EOT, EOM, <|im_end|>, ...) */
    uint32_t eog[TOK_SPEC_MAX_EOG];
    char *pre_name;      /* GGUF tokenizer.ggml.pre, for nib inspect; may be NULL */
    char *chat_template; /* NULL: the model has none */
};

void tok_spec_free(struct tok_spec *s);

/* ---- Helpers shared by the importers (tools/compiler/tok_spec.c) ---- */

/* An empty spec: everything 0, unk/bos/eos -1, byte_id[] UINT32_MAX (no
 * token for that byte). */
void tok_spec_init(struct tok_spec *s);

/* Sort the end-of-generation set (so two specs compare field by field). */
void tok_spec_sort_eog(struct tok_spec *s);

/* A map from byte strings (owned by the caller) to ids: open addressing. */
struct tok_strmap_ent {
    const uint8_t *s;
    uint32_t len, id;
};
struct tok_strmap {
    struct tok_strmap_ent *e;
    uint32_t mask;
};
/* Room for cap keys; -1 when out of memory. */
int tok_strmap_init(struct tok_strmap *m, uint32_t cap);
void tok_strmap_free(struct tok_strmap *m);
/* Insert s -> id unless s is present; returns the id s maps to afterwards. */
uint32_t tok_strmap_put(struct tok_strmap *m, const uint8_t *s, uint32_t len, uint32_t id);
/* The id of s, or -1. */
int64_t tok_strmap_get(const struct tok_strmap *m, const uint8_t *s, uint32_t len);

/* Set a token's piece to a copy of bytes (n of them, NUL-terminated after
 * them), freeing the one it had; -1 when out of memory. */
int tok_spec_set_piece(struct tok_spec_token *t, const void *bytes, size_t n);

/* The byte a byte token's text "<0xXX>" (X: 0-9, A-F) stands for, or -1. */
int tok_byte_piece(const void *text, size_t n);

/* Add id to the end-of-generation set unless present; -1 when it is full. */
int tok_spec_add_eog(struct tok_spec *s, uint32_t id);

/* 1 when a control token's text is one of the well-known end-of-turn
 * markers (<|eot_id|>, <|im_end|>, <end_of_turn>, ...; the list is in
 * tok_spec.c), which join the end-of-generation set. */
int tok_is_end_of_turn_text(const uint8_t *s, size_t n);

/* GPT-2's byte-level alphabet: each byte is shown as one printable code
 * point (printable Latin-1 stands for itself, every other byte is U+0100 +
 * k in byte order). */
uint32_t tok_bytelevel_cp(uint8_t byte);
/* The byte a code point of that alphabet stands for, or -1. */
int tok_bytelevel_byte(uint32_t cp);
/* Map a printable piece (UTF-8, n bytes) back to raw bytes in out (room for
 * n bytes: a piece never grows); returns the raw length, or -1 when a
 * character is not in the alphabet or the UTF-8 is ill-formed. */
long tok_bytelevel_decode(const uint8_t *s, size_t n, uint8_t *out);
/* Raw bytes to the printable form (out: room for 2 * n bytes); returns its
 * length. */
size_t tok_bytelevel_encode(const uint8_t *s, size_t n, uint8_t *out);

#endif
