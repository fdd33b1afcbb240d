#include "proto/chat_msg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint32_t nib_chat_max_messages(size_t len)
{
    size_t n = len / (NIB_CHAT_MSG_HEAD + 1);
    return n < NIB_CHAT_MESSAGES_MAX ? (uint32_t)n : NIB_CHAT_MESSAGES_MAX;
}

int nib_chat_check_role(const uint8_t *role, size_t len, char *err, size_t errlen)
{
    if (len == 0 || len > NIB_CHAT_ROLE_MAX) {
        snprintf(err, errlen, "%zu bytes is outside 1..%u", len, NIB_CHAT_ROLE_MAX);
        return -1;
    }
    /* Printable ASCII without spaces: every role a template compares
     * against (system, user, assistant, tool, ipython, ...). */
    for (size_t i = 0; i < len; i++)
        if (role[i] < 0x21 || role[i] > 0x7E) {
            snprintf(err, errlen, "byte %zu (0x%02x) is not printable ASCII", i, role[i]);
            return -1;
        }
    return 0;
}

size_t nib_chat_encoded_size(const struct nib_chat_part *m, uint32_t n)
{
    if (n > NIB_CHAT_MESSAGES_MAX)
        return 0;
    uint64_t total = NIB_CHAT_HEADER_SIZE;
    char why[64];
    for (uint32_t i = 0; i < n; i++) {
        if (nib_chat_check_role(m[i].role, m[i].role_len, why, sizeof why))
            return 0;
        total += NIB_CHAT_MSG_HEAD + (uint64_t)m[i].role_len + m[i].content_len;
    }
    return total <= UINT32_MAX ? (size_t)total : 0;
}

size_t nib_chat_encode(const struct nib_chat_part *m, uint32_t n, uint32_t flags, int64_t now_s,
                       uint8_t *out, size_t cap)
{
    size_t need = nib_chat_encoded_size(m, n);
    if (!need || need > cap || (flags & ~NIB_CHAT_FLAGS_KNOWN) || now_s < 0 ||
        now_s > NIB_CHAT_NOW_MAX)
        return 0;
    put32(out, NIB_CHAT_MAGIC);
    put32(out + 4, n);
    put32(out + 8, flags);
    put32(out + 12, 0);
    put32(out + 16, (uint32_t)(uint64_t)now_s);
    put32(out + 20, (uint32_t)((uint64_t)now_s >> 32));
    size_t at = NIB_CHAT_HEADER_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        put32(out + at, m[i].role_len);
        put32(out + at + 4, m[i].content_len);
        at += NIB_CHAT_MSG_HEAD;
        memcpy(out + at, m[i].role, m[i].role_len);
        at += m[i].role_len;
        if (m[i].content_len)
            memcpy(out + at, m[i].content, m[i].content_len);
        at += m[i].content_len;
    }
    return at;
}

static int bad(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

int nib_chat_decode(const uint8_t *p, size_t len, struct nib_chat_head *head,
                    struct nib_chat_part *parts, uint32_t parts_cap, char *err, size_t errlen)
{
    memset(head, 0, sizeof *head);
    if (len < NIB_CHAT_HEADER_SIZE)
        return bad(err, errlen, "chat.length: %zu bytes, the chat header alone takes %u", len,
                   NIB_CHAT_HEADER_SIZE);
    if (get32(p) != NIB_CHAT_MAGIC)
        return bad(err, errlen, "chat.magic: 0x%08x is not 0x%08x (\"NIBM\")", get32(p),
                   NIB_CHAT_MAGIC);
    uint32_t n = get32(p + 4), flags = get32(p + 8);
    uint32_t most = nib_chat_max_messages(len - NIB_CHAT_HEADER_SIZE);
    if (n > most || n > parts_cap)
        return bad(err, errlen, "chat.n_messages: %u, at most %u fit in %zu bytes", n,
                   most < parts_cap ? most : parts_cap, len);
    if (flags & ~NIB_CHAT_FLAGS_KNOWN)
        return bad(err, errlen, "chat.flags: unknown bits 0x%x set", flags & ~NIB_CHAT_FLAGS_KNOWN);
    if (get32(p + 12))
        return bad(err, errlen, "chat.reserved: 0x%x is not zero", get32(p + 12));
    int64_t now = (int64_t)((uint64_t)get32(p + 16) | (uint64_t)get32(p + 20) << 32);
    if (now < 0 || now > NIB_CHAT_NOW_MAX)
        return bad(err, errlen, "chat.now_s: %lld is outside 0..%lld", (long long)now,
                   (long long)NIB_CHAT_NOW_MAX);
    size_t at = NIB_CHAT_HEADER_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        if (len - at < NIB_CHAT_MSG_HEAD)
            return bad(err, errlen, "chat.message[%u].role_len: the area ends at byte %zu", i, len);
        uint32_t rl = get32(p + at), cl = get32(p + at + 4);
        at += NIB_CHAT_MSG_HEAD;
        if (rl == 0 || rl > NIB_CHAT_ROLE_MAX || rl > len - at)
            return bad(err, errlen,
                       "chat.message[%u].role_len: %u is outside 1..%u or past the area", i, rl,
                       NIB_CHAT_ROLE_MAX);
        char why[64];
        if (nib_chat_check_role(p + at, rl, why, sizeof why))
            return bad(err, errlen, "chat.message[%u].role: %s", i, why);
        parts[i].role = p + at;
        parts[i].role_len = rl;
        at += rl;
        if (cl > len - at)
            return bad(err, errlen,
                       "chat.message[%u].content_len: %u bytes, only %zu are left in the area", i,
                       cl, len - at);
        parts[i].content = p + at;
        parts[i].content_len = cl;
        at += cl;
    }
    if (at != len)
        return bad(err, errlen, "chat.length: %zu bytes after the last message", len - at);
    head->n_messages = n;
    head->flags = flags;
    head->now_s = now;
    return 0;
}
