/* Strict UTF-8 for text the model produced: the one rule every host uses
 * before it shows or encodes model bytes (nib ask, its --json, the Python
 * host's tools/host/nibhost.py, which implements the same rule).
 *
 * Well-formed sequences are exactly those of the Unicode standard's table
 * 3-7: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF. Everything else becomes U+FFFD, one per maximal subpart (the
 * standard's recommended practice, "U+FFFD substitution of maximal
 * subparts"): a lead byte followed by continuation bytes that could still
 * start a well-formed sequence is one subpart; any other byte is one.
 *
 *   C3 A9          -> U+00E9 (kept)
 *   C0 AF          -> FFFD FFFD        (C0 never starts a sequence)
 *   E0 80 AF       -> FFFD FFFD FFFD   (overlong: E0 wants A0..BF next)
 *   ED A0 80       -> FFFD FFFD FFFD   (surrogate)
 *   F4 90 80 80    -> FFFD x4          (above U+10FFFF)
 *   E2 82 41       -> FFFD 'A'         (truncated: E2 82 is one subpart)
 *
 * Streaming: an output that arrives in pieces must never print half a
 * character. nib_utf8_ready() says how much of what has arrived can be
 * converted now: everything but a trailing truncated sequence that more
 * bytes could still complete. Converting ready prefixes piece by piece
 * gives exactly the bytes of converting the whole text at once.
 *
 * Libc only, no allocation; pure functions. */
#ifndef NIB_UTF8_H
#define NIB_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define NIB_UTF8_REPLACEMENT 0xFFFDu

/* Decode one step at s (n > 0 bytes available). Returns the bytes consumed
 * (1..4) and sets *cp to the code point, or to NIB_UTF8_REPLACEMENT for a
 * maximal invalid subpart. *incomplete is set to 1 when the step was cut
 * short only by the end of the input (more bytes could complete it). */
size_t nib_utf8_step(const uint8_t *s, size_t n, uint32_t *cp, int *incomplete);

/* Bytes of s[0..n) that can be converted now when more may follow: n, or
 * the offset of a trailing truncated sequence to hold back. */
size_t nib_utf8_ready(const uint8_t *s, size_t n);

/* Bytes the sanitized form of s[0..n) takes (at most 3 * n). */
size_t nib_utf8_sanitized_len(const uint8_t *s, size_t n);

/* Write the sanitized form of s[0..n) to out (room for cap bytes; at most
 * 3 * n are ever needed). Returns the bytes it takes, which may exceed cap
 * (then only cap bytes, ending on a character boundary, were written). */
size_t nib_utf8_sanitize(const uint8_t *s, size_t n, uint8_t *out, size_t cap);

/* Encode cp (< 0x110000, not a surrogate) as UTF-8 into out[4]; returns
 * its length. */
size_t nib_utf8_encode(uint32_t cp, uint8_t *out);

#endif
