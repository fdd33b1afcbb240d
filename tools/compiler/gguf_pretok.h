/* llama.cpp's pre-tokenizer names (GGUF tokenizer.ggml.pre) as tok_spec
 * steps, both ways: gguf_tok reads a name into steps, nib synth --vocab and
 * the tokenizer.json importer name the steps of a real file. A name stands
 * for what the Hugging Face tokenizer.json of that family does, so a GGUF
 * tokenizes like its tokenizer.json. */
#ifndef NIB_GGUF_PRETOK_H
#define NIB_GGUF_PRETOK_H

#include "tools/compiler/tok_spec.h"

struct gguf_pretok {
    const char *name;
    int bytelevel_regex;      /* one step: ByteLevel with use_regex (the GPT-2 split) */
    const char *const *regex; /* else: Split Isolated steps in order, NULL-terminated */
    int individual_digits;    /* a Digits(individual) step before the splits */
    int nfc;                  /* an NFC normalizer (the Qwen2 family's tokenizer.json has one) */
    int ignore_merges;        /* a word that is a token is that token (Llama 3) */
    int add_bos;              /* llama.cpp's default of add_bos_token for the name */
};

/* NULL when the name is unknown. */
const struct gguf_pretok *gguf_pretok_find(const char *name);

/* Append the name's normalizer and pre-tokenizer steps and set
 * ignore_merges; 0, or -1 when out of memory. */
int gguf_pretok_fill(const struct gguf_pretok *d, struct tok_spec *s);

/* The name whose steps are exactly s's normalizer, pre-tokenizer steps and
 * ignore_merges, or NULL. */
const char *gguf_pretok_name_of(const struct tok_spec *s);

/* Every known name, NULL-terminated (for messages). */
extern const char *const gguf_tok_pre_names[];

#endif
