/* llama.cpp's pre-tokenizer names (GGUF tokenizer.ggml.pre) as tok_spec
 * steps, both ways: gguf_tok reads a name into steps, nib synth --vocab and
 * the tokenizer.json importer name the steps of a real file. The pattern
 * lists are rt/text/pretok_patterns.h's; this file adds what else a
 * family's tokenizer.json does (Qwen2's NFC normalizer) and how tokenizer.json
 * writes the same split (ByteLevel with use_regex, Digits). */
#ifndef NIB_GGUF_PRETOK_H
#define NIB_GGUF_PRETOK_H

#include <stddef.h>

#include "rt/text/pretok_patterns.h"
#include "tools/compiler/tok_spec.h"

/* NULL when the name is unknown. */
const struct nib_pretok *gguf_pretok_find(const char *name);

/* Append the name's normalizer and pre-tokenizer steps and set
 * ignore_merges; 0, or -1 when out of memory. */
int gguf_pretok_fill(const struct nib_pretok *p, struct tok_spec *s);

/* llama.cpp's default of add_bos_token for the name (on for the Llama 3
 * family, the names that also ignore merges). */
int gguf_pretok_add_bos(const struct nib_pretok *p);

/* The first name whose steps split like s's normalizer and pre-tokenizer
 * steps, with the same ignore_merges, or NULL. */
const char *gguf_pretok_name_of(const struct tok_spec *s);

#endif
