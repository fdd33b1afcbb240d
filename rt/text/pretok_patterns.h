/* The pre-tokenizer regexes behind each `tokenizer.ggml.pre` name of GGUF
 * files (the names llama.cpp's converter writes), as data. A name maps to a
 * list of patterns applied in order: each splits every piece the previous
 * one left, keeping both its matches and the text between them as pieces
 * (Hugging Face's Split with behavior "Isolated"). The patterns are those of
 * the models' own tokenizer.json files where known, else llama.cpp's
 * equivalents, in the syntax rt/text/regex.h compiles. */
#ifndef NIB_PRETOK_PATTERNS_H
#define NIB_PRETOK_PATTERNS_H

#include <stddef.h>

struct nib_pretok {
    const char *name;            /* tokenizer.ggml.pre value */
    unsigned npatterns;          /* 1 to NIB_PRETOK_MAX_PATTERNS */
    const char *const *patterns; /* NUL-terminated pattern texts */
    int ignore_merges;           /* llama.cpp sets it for this family */
};

#define NIB_PRETOK_MAX_PATTERNS 6

/* The entry for name[0..len), or NULL when the name is unknown. */
const struct nib_pretok *nib_pretok_find(const char *name, size_t len);

/* All entries, for listing: *count gets their number. */
const struct nib_pretok *nib_pretok_all(unsigned *count);

/* The known names, comma-separated, into buf (cap bytes, NUL-terminated,
 * truncated with "..." if short); returns buf. For error messages. */
char *nib_pretok_names(char *buf, size_t cap);

#endif
