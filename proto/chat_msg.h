/* Chat messages in a request's prompt area (request kind NIB_REQ_KIND_CHAT,
 * protocol version 4; docs/ring.md §6.2). The host writes the
 * conversation; the appliance checks it as hostile input, renders it with
 * the model's own chat template and tokenizes the result.
 *
 *   off  type  field
 *   0    u32   magic       NIB_CHAT_MAGIC ("NIBM")
 *   4    u32   n_messages  0..NIB_CHAT_MESSAGES_MAX
 *   8    u32   flags       bit 0 NIB_CHAT_ADD_GENERATION_PROMPT; others 0
 *   12   u32   reserved    0
 *   16   i64   now_s       what the template's strftime_now() formats:
 *                          0 = the appliance's clock, else 1..NIB_CHAT_NOW_MAX
 *                          (UTC seconds since 1970)
 *   24   then n_messages times, unpadded:
 *        u32 role_len (1..NIB_CHAT_ROLE_MAX), u32 content_len,
 *        role bytes (0x21..0x7E), content bytes (any)
 *
 * Little-endian; the encoding must fill prompt_len exactly. Libc only, no
 * allocation, pure functions: hosts encode with it, the appliance decodes. */
#ifndef NIB_CHAT_MSG_H
#define NIB_CHAT_MSG_H

#include <stddef.h>
#include <stdint.h>

#define NIB_CHAT_MAGIC 0x4D42494Eu /* "NIBM" */
#define NIB_CHAT_HEADER_SIZE 24u
#define NIB_CHAT_MSG_HEAD 8u /* role_len, content_len */
#define NIB_CHAT_ROLE_MAX 64u
#define NIB_CHAT_MESSAGES_MAX 16384u
#define NIB_CHAT_ADD_GENERATION_PROMPT 1u
#define NIB_CHAT_FLAGS_KNOWN NIB_CHAT_ADD_GENERATION_PROMPT
#define NIB_CHAT_NOW_MAX 253402300799ll /* 9999-12-31T23:59:59Z */

/* One message: pointers into the caller's (or the prompt area's) bytes. */
struct nib_chat_part {
    const uint8_t *role, *content;
    uint32_t role_len, content_len;
};

/* The header fields, decoded. */
struct nib_chat_head {
    uint32_t n_messages;
    uint32_t flags;
    int64_t now_s;
};

/* The most messages an area of len bytes can hold (each takes at least
 * NIB_CHAT_MSG_HEAD + 1 bytes), capped at NIB_CHAT_MESSAGES_MAX. */
uint32_t nib_chat_max_messages(size_t len);

/* 0 when role[0..len) is a valid role, else -1 with "why" in err. */
int nib_chat_check_role(const uint8_t *role, size_t len, char *err, size_t errlen);

/* Bytes the encoding of n messages takes; 0 when it cannot be encoded
 * (too many messages, a role that fails nib_chat_check_role, more than
 * UINT32_MAX bytes). */
size_t nib_chat_encoded_size(const struct nib_chat_part *m, uint32_t n);

/* Encode into out (cap bytes). Returns the bytes written, or 0 when the
 * messages cannot be encoded, flags or now_s are invalid, or it does not
 * fit (then nothing useful is in out). */
size_t nib_chat_encode(const struct nib_chat_part *m, uint32_t n, uint32_t flags, int64_t now_s,
                       uint8_t *out, size_t cap);

/* Decode and check p[0..len) (hostile). parts receives the messages
 * (pointing into p; parts_cap >= nib_chat_max_messages(len) always
 * suffices). Returns 0, or -1 with "FIELD: why" in err, FIELD as in
 * docs/ring.md: chat.magic, chat.n_messages, chat.flags, chat.reserved,
 * chat.now_s, chat.message[I].role_len, chat.message[I].role,
 * chat.message[I].content_len, chat.length. */
int nib_chat_decode(const uint8_t *p, size_t len, struct nib_chat_head *head,
                    struct nib_chat_part *parts, uint32_t parts_cap, char *err, size_t errlen);

#endif
