/* Chat templates at compile time: parse a Jinja chat template (the
 * subset docs/tokenizers.md lists) and emit the program rt/chat/chat.h
 * runs. A template using anything outside the subset is refused with the
 * construct and its line named, never approximated. */
#ifndef NIB_CHAT_COMPILE_H
#define NIB_CHAT_COMPILE_H

#include <stddef.h>
#include <stdint.h>

/* 0 with *prog (malloc'd) and *prog_len set, or -1 with err. */
int nib_chat_compile(const char *tmpl, size_t len, uint8_t **prog, size_t *prog_len, char *err,
                     size_t errlen);

/* nibble's own template for a family named by --chat-template (llama2,
 * llama3, chatml, phi3, gemma, mistral, zephyr), or NULL. */
const char *nib_chat_builtin(const char *family);

/* The names nib_chat_builtin knows, NULL-terminated. */
extern const char *const nib_chat_families[];

#endif
