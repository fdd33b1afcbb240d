/* struct tok_spec: freeing, and the small helpers both importers share. */
#include "tools/compiler/tok_spec.h"

#include <stdlib.h>
#include <string.h>

void tok_spec_free(struct tok_spec *s)
{
    if (!s)
        return;
    if (s->tokens)
        for (uint32_t i = 0; i < s->n_vocab; i++)
            free(s->tokens[i].bytes);
    free(s->tokens);
    free(s->merges);
    for (uint32_t i = 0; s->norm && i < s->n_norm; i++) {
        free(s->norm[i].pattern);
        free(s->norm[i].arg);
    }
    free(s->norm);
    for (uint32_t i = 0; s->pre && i < s->n_pre; i++)
        free(s->pre[i].pattern);
    free(s->pre);
    free(s->added);
    free(s->dec_from);
    free(s->dec_to);
    free(s->pre_name);
    free(s->chat_template);
    memset(s, 0, sizeof *s);
}

void tok_spec_init(struct tok_spec *s)
{
    memset(s, 0, sizeof *s);
    s->unk_id = -1;
    s->bos_id = -1;
    s->eos_id = -1;
    for (int b = 0; b < 256; b++)
        s->byte_id[b] = UINT32_MAX;
}

int tok_spec_set_piece(struct tok_spec_token *t, const void *bytes, size_t n)
{
    uint8_t *b = malloc(n + 1);
    if (!b)
        return -1;
    memcpy(b, bytes, n);
    b[n] = 0;
    free(t->bytes);
    t->bytes = b;
    t->len = (uint32_t)n;
    return 0;
}

int tok_byte_piece(const void *text, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *p = text;
    if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>' || !p[3] || !p[4])
        return -1;
    const char *hi = memchr(hex, p[3], 16), *lo = memchr(hex, p[4], 16);
    return hi && lo ? (int)((hi - hex) * 16 + (lo - hex)) : -1;
}

int tok_spec_add_eog(struct tok_spec *s, uint32_t id)
{
    for (uint32_t i = 0; i < s->n_eog; i++)
        if (s->eog[i] == id)
            return 0;
    if (s->n_eog == TOK_SPEC_MAX_EOG)
        return -1;
    s->eog[s->n_eog++] = id;
    return 0;
}

/* End-of-turn texts of the families nibble knows (Llama 3, ChatML/Qwen,
 * Phi-3, Gemma, GPT-2 style, Llama 3 base), kept short on purpose: a token
 * joins the end-of-generation set by its exact text only. */
static const char *const end_of_turn[] = {
    "<|eot_id|>",    "<|eom_id|>",    "<|im_end|>",      "<|end|>",
    "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
};

int tok_is_end_of_turn_text(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < sizeof end_of_turn / sizeof end_of_turn[0]; i++)
        if (strlen(end_of_turn[i]) == n && memcmp(end_of_turn[i], s, n) == 0)
            return 1;
    return 0;
}

/* Printable Latin-1: '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF. */
static int bytelevel_self(unsigned b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
}

/* The 68 other bytes, in order: 0x00..0x20 (k 0..32), 0x7f..0xa0 (k 33..66),
 * 0xad (k 67). */
uint32_t tok_bytelevel_cp(uint8_t byte)
{
    if (bytelevel_self(byte))
        return byte;
    if (byte <= 0x20)
        return 0x100u + byte;
    if (byte <= 0xa0)
        return 0x100u + 33 + (byte - 0x7fu);
    return 0x100u + 67; /* 0xad */
}

int tok_bytelevel_byte(uint32_t cp)
{
    if (cp < 0x100)
        return bytelevel_self(cp) ? (int)cp : -1;
    uint32_t k = cp - 0x100;
    if (k <= 32)
        return (int)k;
    if (k <= 66)
        return (int)(0x7f + k - 33);
    return k == 67 ? 0xad : -1;
}

/* One UTF-8 character at s (n > 0 bytes): its length, or 0 when ill-formed.
 * Only code points below U+0800 occur in the alphabet, so longer
 * sequences are reported as ill-formed (not in the alphabet) too. */
static size_t utf8_small(const uint8_t *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] >= 0xc2 && s[0] <= 0xdf && n >= 2 && (s[1] & 0xc0) == 0x80) {
        *cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
        return 2;
    }
    return 0;
}

long tok_bytelevel_decode(const uint8_t *s, size_t n, uint8_t *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_small(s + i, n - i, &cp);
        int b = k ? tok_bytelevel_byte(cp) : -1;
        if (b < 0)
            return -1;
        out[o++] = (uint8_t)b;
        i += k;
    }
    return (long)o;
}

size_t tok_bytelevel_encode(const uint8_t *s, size_t n, uint8_t *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = tok_bytelevel_cp(s[i]);
        if (cp < 0x80) {
            out[o++] = (uint8_t)cp;
        } else {
            out[o++] = (uint8_t)(0xc0 | cp >> 6);
            out[o++] = (uint8_t)(0x80 | (cp & 0x3f));
        }
    }
    return o;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void tok_spec_sort_eog(struct tok_spec *s)
{
    qsort(s->eog, s->n_eog, sizeof s->eog[0], cmp_u32);
}

int tok_strmap_init(struct tok_strmap *m, uint32_t cap)
{
    uint32_t n = 16;
    while (n < 2u * cap && n < (1u << 30))
        n *= 2;
    m->e = calloc(n, sizeof *m->e);
    m->mask = n - 1;
    return m->e ? 0 : -1;
}

void tok_strmap_free(struct tok_strmap *m)
{
    free(m->e);
    m->e = NULL;
}

static uint32_t str_hash(const uint8_t *s, uint32_t n)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h ^ (h >> 15);
}

/* Entries hold id + 1 in `id`, so 0 marks an empty slot. */
static struct tok_strmap_ent *strmap_slot(const struct tok_strmap *m, const uint8_t *s,
                                          uint32_t len)
{
    for (uint32_t i = str_hash(s, len) & m->mask;; i = (i + 1) & m->mask) {
        struct tok_strmap_ent *e = &m->e[i];
        if (e->id == 0 || (e->len == len && memcmp(e->s, s, len) == 0))
            return e;
    }
}

uint32_t tok_strmap_put(struct tok_strmap *m, const uint8_t *s, uint32_t len, uint32_t id)
{
    struct tok_strmap_ent *e = strmap_slot(m, s, len);
    if (e->id == 0) {
        e->s = s;
        e->len = len;
        e->id = id + 1;
    }
    return e->id - 1;
}

int64_t tok_strmap_get(const struct tok_strmap *m, const uint8_t *s, uint32_t len)
{
    const struct tok_strmap_ent *e = strmap_slot(m, s, len);
    return e->id ? (int64_t)e->id - 1 : -1;
}
