/* Unicode Normalization Form C (canonical decomposition, then canonical
 * composition), from the generated tables of rt/text/ucd.h. Bytes that are
 * not well-formed UTF-8 pass through unchanged and act as starters (the
 * rule docs/tokenizers.md states). No allocation. */
#ifndef NIB_NFC_H
#define NIB_NFC_H

#include <stddef.h>
#include <stdint.h>

/* Bytes the NFC form of s[0..n) can take at most (a bound; 3 * n + 16). */
size_t nib_nfc_bound(size_t n);

/* Write the NFC form of s[0..n) to out (cap >= nib_nfc_bound(n)); returns
 * its length, or 0 (nothing written) when cap is below the bound. */
size_t nib_nfc(const uint8_t *s, size_t n, uint8_t *out, size_t cap);

#endif
