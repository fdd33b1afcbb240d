/* Fuzz target: the chat messages a host writes into a CHAT request's
 * prompt area (proto/chat_msg.h, protocol version 4). Input: the area's
 * bytes as they are, decoded with room for every message and with too
 * little room.
 *
 *   - a refusal names a chat field ("chat.FIELD: why");
 *   - an accepted area: every message lies inside it, roles pass the role
 *     rule, and encoding the decoded messages gives the input byte for
 *     byte (the format has one encoding of a conversation);
 *   - the same bytes with the header forced valid (magic, flags, time) get
 *     past the header, so the message walk is fuzzed too.
 *
 * Any violated invariant aborts. */
#include <stdlib.h>
#include <string.h>

#include "proto/chat_msg.h"
#include "tests/fuzz/fuzz.h"

static struct nib_chat_part parts[NIB_CHAT_MESSAGES_MAX];
static uint8_t again[1 << 20];

static void decode(const uint8_t *p, size_t len, uint32_t cap)
{
    struct nib_chat_head head;
    char err[128];
    if (nib_chat_decode(p, len, &head, parts, cap, err, sizeof err)) {
        FUZZ_ASSERT(strncmp(err, "chat.", 5) == 0 && strchr(err, ':') != NULL);
        return;
    }
    FUZZ_ASSERT(len >= NIB_CHAT_HEADER_SIZE);
    FUZZ_ASSERT(head.n_messages <= cap && head.n_messages <= nib_chat_max_messages(len));
    FUZZ_ASSERT(!(head.flags & ~NIB_CHAT_FLAGS_KNOWN));
    FUZZ_ASSERT(head.now_s >= 0 && head.now_s <= NIB_CHAT_NOW_MAX);
    for (uint32_t i = 0; i < head.n_messages; i++) {
        FUZZ_ASSERT(parts[i].role >= p && parts[i].role + parts[i].role_len <= p + len);
        FUZZ_ASSERT(parts[i].content >= p && parts[i].content + parts[i].content_len <= p + len);
        FUZZ_ASSERT(nib_chat_check_role(parts[i].role, parts[i].role_len, err, sizeof err) == 0);
    }
    FUZZ_ASSERT(nib_chat_encoded_size(parts, head.n_messages) == len);
    if (len <= sizeof again) {
        size_t n = nib_chat_encode(parts, head.n_messages, head.flags, head.now_s, again, len);
        FUZZ_ASSERT(n == len && memcmp(again, p, len) == 0);
        FUZZ_ASSERT(
            nib_chat_encode(parts, head.n_messages, head.flags, head.now_s, again, len - 1) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decode(data, size, NIB_CHAT_MESSAGES_MAX);
    decode(data, size, 2);
    if (size < NIB_CHAT_HEADER_SIZE || size > sizeof again)
        return 0;
    uint8_t *p = malloc(size);
    memcpy(p, data, size);
    const uint32_t magic = NIB_CHAT_MAGIC;
    memcpy(p, &magic, 4);
    p[8] &= NIB_CHAT_FLAGS_KNOWN;
    memset(p + 9, 0, 7);
    memset(p + 20, 0, 4); /* now_s below 2^32: valid */
    decode(p, size, NIB_CHAT_MESSAGES_MAX);
    free(p);
    return 0;
}
