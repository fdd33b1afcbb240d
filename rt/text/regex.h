/* The regular expressions of tokenizer pre-tokenizers (the patterns real
 * tokenizer.json files and llama.cpp's pre-tokenizer names use), compiled
 * by nib compile into a small program stored in the blob and run by a
 * bounded backtracking matcher with Oniguruma's meaning for \s, \p{..},
 * (?i:...) etc. as docs/tokenizers.md specifies. Unsupported syntax is
 * refused at compile time with the construct named; a program read back
 * from a blob is checked before use. Matching works on code points decoded
 * from UTF-8; each byte of an ill-formed sequence is one character that
 * belongs to no class but negated ones (like an unassigned code point). */
#ifndef NIB_REGEX_H
#define NIB_REGEX_H

#include <stddef.h>
#include <stdint.h>

/* Compile pattern pat[0..len) into prog (cap bytes). 0 with *used set, or
 * -1 with a message naming the problem in err. */
int nib_re_compile(const char *pat, size_t len, uint8_t *prog, size_t cap, size_t *used, char *err,
                   size_t errlen);

/* Check a program that came from a blob (hostile input): 0 or -1 + err. */
int nib_re_check(const uint8_t *prog, size_t len, char *err, size_t errlen);

/* Scratch bytes nib_re_find needs for a text of n bytes (8-byte aligned).
 * For any program the checker accepts it is at most 128 * (n + 1) +
 * 16 * (16 * (n + 1) + 32808) + 131072 bytes (NIB_RE_MAX_SCRATCH). */
#define NIB_RE_MAX_SCRATCH(n)                                                                      \
    (128 * ((size_t)(n) + 1) + 16 * (16 * ((size_t)(n) + 1) + 32808) + 131072)
size_t nib_re_scratch_footprint(const uint8_t *prog, size_t len, size_t n);

/* Leftmost match (alternatives tried in order, greedy quantifiers, as
 * Oniguruma) in s[0..n) starting at or after byte `from`; never an empty
 * match. 1 with [*ms, *me) set, 0 when there is none, -1 when the step
 * bound (linear in n, docs/tokenizers.md) or the stack ran out: a pattern
 * built to explode inside a lookahead, or a hostile program; never the
 * patterns of rt/text/pretok_patterns.h. Anchors (^ \A \b...) see all of
 * s, from byte 0. */
int nib_re_find(const uint8_t *prog, size_t len, const uint8_t *s, size_t n, size_t from,
                size_t *ms, size_t *me, void *scratch);

/* nib_re_find by its memoized search alone (the one it falls back to when
 * plain backtracking runs long), so that tests can compare the two. */
int nib_re_find_memo(const uint8_t *prog, size_t len, const uint8_t *s, size_t n, size_t from,
                     size_t *ms, size_t *me, void *scratch);

#endif
