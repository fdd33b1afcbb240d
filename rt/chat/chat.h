/* Chat templates at serving time: a request's messages rendered into
 * prompt text by the model's own template (a Jinja template from the GGUF
 * or tokenizer_config.json), which nib compile turned into a compact
 * program in the blob (tools/compiler/chat_compile.c). The program is
 * checked at boot (hostile blob), and rendering runs with caller scratch
 * and bounded work: no allocation, no system call. docs/tokenizers.md
 * lists the template language nibble runs and what it refuses.
 *
 * Every output byte carries a taint byte: nonzero when it came from a
 * message (role or content), zero when it came from the template or the
 * model's own strings (bos_token, ...). The tokenizer matches control
 * tokens only in untainted bytes unless the request allows special tokens,
 * so a user's message can never forge <|im_end|>. */
#ifndef NIB_CHAT_H
#define NIB_CHAT_H

#include <stddef.h>
#include <stdint.h>

struct nib_chat_message {
    const uint8_t *role, *content;
    uint32_t role_len, content_len;
};

struct nib_chat_args {
    const struct nib_chat_message *messages;
    uint32_t n_messages;
    int add_generation_prompt;
    const uint8_t *bos_token, *eos_token; /* the model's; NULL: none (undefined) */
    uint32_t bos_len, eos_len;
    int64_t now_s; /* what strftime_now() formats (UTC seconds since 1970) */
};

/* Check a program read from a blob: 0, or -1 with the problem in err. */
int nib_chat_check(const uint8_t *prog, size_t len, char *err, size_t errlen);

/* Scratch bytes nib_chat_render needs to render up to out_cap bytes for
 * requests whose messages total at most in_bytes. */
size_t nib_chat_scratch_footprint(size_t in_bytes, size_t out_cap);

/* Render. 0 with *out_len set, or -1 with err: the template's own
 * raise_exception() message, or which bound was exceeded. taint may be
 * NULL. */
int nib_chat_render(const uint8_t *prog, size_t len, const struct nib_chat_args *a, void *scratch,
                    size_t scratch_size, uint8_t *out, uint8_t *taint, size_t cap, size_t *out_len,
                    char *err, size_t errlen);

#endif
