/* The Hugging Face tokenizer importer: tokenizer.json (with
 * tokenizer_config.json and generation_config.json when present) into a
 * struct tok_spec (tools/compiler/tok_spec.h).
 *
 * Supported (docs/tokenizers.md): model BPE (vocab, merges as "a b" or
 * [a, b], ignore_merges, byte_fallback, fuse_unk, unk_token); normalizers
 * NFC, Prepend, Replace (String patterns), Sequence; pre-tokenizers
 * Sequence, Split (Regex or String), ByteLevel, Digits, Metaspace; decoders
 * ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence;
 * post-processors TemplateProcessing (BOS + sequence, or the sequence
 * alone), ByteLevel, Sequence of those; added_tokens. Anything else is
 * refused with its JSON path named, e.g.
 *   pre_tokenizer.pretokenizers[1].type: "Whitespace" is not supported
 *
 * Byte-level vocabularies (a ByteLevel pre-tokenizer or decoder) have
 * their pieces mapped back from GPT-2's printable alphabet to bytes; added
 * tokens keep their text. The "normalized" flag of added tokens is kept
 * (tok_spec_added.normalized; absent: true for non-special tokens, as
 * Hugging Face defaults it).
 *
 * End of generation: the EOS, generation_config.json's eos_token_id (one
 * or a list), and every added token whose text is a well-known end-of-turn
 * marker (tok_is_end_of_turn_text). */
#ifndef NIB_HF_TOKENIZER_H
#define NIB_HF_TOKENIZER_H

#include <stddef.h>

#include "tools/compiler/tok_spec.h"

/* path: a tokenizer.json file (the two config files are read from beside
 * it when there) or a directory holding tokenizer.json. 0 with *out filled
 * (tok_spec_free it), or -1 with a message naming the file and JSON path
 * in err and nothing to free. */
int hf_tokenizer_load(const char *path, struct tok_spec *out, char *err, size_t errlen);

/* The same from texts in memory (tests, fuzzing); config and gen may be
 * NULL (absent). */
int hf_tokenizer_parse(const char *tok_json, size_t tok_len, const char *config_json,
                       size_t config_len, const char *gen_json, size_t gen_len,
                       struct tok_spec *out, char *err, size_t errlen);

#endif
