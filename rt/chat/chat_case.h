/* Unicode case mapping for chat templates, as JavaScript's toUpperCase and
 * toLowerCase do it (what @huggingface/jinja's upper, lower, capitalize and
 * case-insensitive sort use): full mappings (one character may become up
 * to three) and the Final_Sigma rule. Tables generated at build time by
 * rt/chat/case_gen.py from Debian's unicode-data (the same source as
 * rt/text). */
#ifndef NIB_CHAT_CASE_H
#define NIB_CHAT_CASE_H

#include <stdint.h>

extern const char nib_chat_case_version[];
extern const uint32_t nib_chat_upper_n, nib_chat_lower_n, nib_chat_cased_n, nib_chat_ignorable_n;
extern const uint32_t nib_chat_upper_key[], nib_chat_upper_val[], nib_chat_lower_key[],
    nib_chat_lower_val[], nib_chat_case_pool[];
extern const uint32_t nib_chat_cased_ranges[][2], nib_chat_ignorable_ranges[][2];

/* The mapping of cp (to upper case when upper, else lower) into out:
 * its length, 1 to 3 (cp itself when it has none). No Final_Sigma here. */
uint32_t nib_chat_case_map(uint32_t cp, int upper, uint32_t out[3]);
int nib_chat_cased(uint32_t cp);
int nib_chat_case_ignorable(uint32_t cp);

#endif
