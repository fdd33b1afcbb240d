/* The pure checks of hostile input (protocol version 4): nib_req_decode,
 * which every request copied out of a ring goes through (each bad field is
 * named, good requests come out intact, random bytes never get past it with
 * an out-of-range value), with the chat messages of kind CHAT
 * (proto/chat_msg.h: encode and decode round-trip, each malformed field
 * named, lengths never past the area); nib_ctl_parse, which every control message goes
 * through; and the runtime directory / name rules of proto/shm_name.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/chat_msg.h"
#include "proto/ctl.h"
#include "proto/shm_name.h"
#include "rt/sample.h"
#include "rt/serve.h"
#include "tests/common/test_util.h"

/* Limits as the geometry gives them for a small model with a chat
 * template (nochat: the same model without one). */
#define NIB_PROMPT_MAX 65536u
#define NIB_SLOT_TOKENS 4096u
#define MSGS_MAX (NIB_PROMPT_MAX / 9)
static const struct nib_req_limits lim = {NIB_PROMPT_MAX, NIB_SLOT_TOKENS, 256, 512, MSGS_MAX, 0};
static const struct nib_req_limits nochat = {NIB_PROMPT_MAX, NIB_SLOT_TOKENS, 256, 512, 0, 0};
/* A vision model whose inputs take 778 bytes (docs/ring.md 6.4). */
static const struct nib_req_limits vision = {832, 0, 0, 0, 0, 778};
static uint8_t prompt[NIB_PROMPT_MAX];
static uint32_t ids[NIB_PROMPT_MAX / 4];
static struct nib_chat_part parts[MSGS_MAX];

static struct nib_request good(void)
{
    struct nib_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 5;
    r.max_tokens = 8;
    r.temperature = 0.5f;
    r.seed = 77;
    return r;
}

/* Decode r; expect failure naming `field` (NULL: expect success). */
static void expect(const struct nib_request *r, size_t avail, const char *field)
{
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    int rc =
        nib_req_decode(r, prompt, avail, &lim, &d, ids, NIB_PROMPT_MAX / 4, parts, err, sizeof err);
    if (!field) {
        ck_assert_msg(rc == 0, "rejected a good request: %s", err);
        return;
    }
    ck_assert_msg(rc == -1, "accepted a request with a bad %s", field);
    size_t n = strlen(field);
    ck_assert_msg(strncmp(err, field, n) == 0 && err[n] == ':', "error '%s' should name '%s'", err,
                  field);
}

START_TEST(good_request_passes_intact)
{
    struct nib_request r = good();
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    ck_assert_int_eq(nib_req_decode(&r, prompt, 5, &lim, &d, ids, 16, parts, err, sizeof err), 0);
    ck_assert_uint_eq(d.prompt_len, 5);
    ck_assert_uint_eq(d.max_tokens, 8);
    ck_assert(d.temperature == 0.5f);
    ck_assert_uint_eq(d.seed, 77);
    ck_assert_uint_eq(d.n_ids, 0);
    r.temperature = 0.0f;
    expect(&r, 5, NULL);
    r.temperature = NIB_TEMPERATURE_MAX;
    r.max_tokens = NIB_SLOT_TOKENS;
    r.prompt_len = NIB_PROMPT_MAX;
    r.flags = NIB_REQ_NO_BOS;
    expect(&r, NIB_PROMPT_MAX, NULL);
}
END_TEST

START_TEST(each_bad_field_is_named)
{
    struct nib_request r = good();
    r.prompt_len = NIB_PROMPT_MAX + 1;
    expect(&r, NIB_PROMPT_MAX, "prompt_len");
    r = good();
    r.prompt_len = UINT32_MAX;
    expect(&r, NIB_PROMPT_MAX, "prompt_len");
    r = good();
    r.max_tokens = 0;
    expect(&r, 5, "max_tokens");
    r.max_tokens = NIB_SLOT_TOKENS + 1;
    expect(&r, 5, "max_tokens");
    const float temps[] = {NAN, -NAN, -1.0f, -0.0001f, INFINITY, -INFINITY, 100.5f};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++) {
        r = good();
        r.temperature = temps[i];
        expect(&r, 5, "temperature");
    }
    r = good();
    r.flags = 0x80;
    expect(&r, 5, "flags");
    r.flags = 0x80000000u | NIB_REQ_NO_BOS;
    expect(&r, 5, "flags");
    for (size_t i = 0; i < sizeof r.reserved; i++) {
        r = good();
        r.reserved[i] = 1;
        expect(&r, 5, "reserved");
    }
    /* Kinds reserved for later revisions are refused by version 4. */
    const uint32_t kinds[] = {NIB_REQ_KIND_TENSOR, 99, UINT32_MAX};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        r = good();
        r.kind = kinds[i];
        expect(&r, 5, "kind");
    }
    r = good();
    r.flags = NIB_REQ_SPECIAL | NIB_REQ_NO_BOS; /* known since version 4 */
    expect(&r, 5, NULL);
    r.flags = 8;
    expect(&r, 5, "flags");
}
END_TEST

/* kind TENSOR: exactly the inputs' bytes, no tokens, temperature or
 * flags; only to a vision model, which takes nothing else. */
static void expect_vision(const struct nib_request *r, const char *field)
{
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    int rc = nib_req_decode(r, prompt, 832, &vision, &d, ids, 0, parts, err, sizeof err);
    if (!field) {
        ck_assert_msg(rc == 0, "rejected a good tensor request: %s", err);
        ck_assert_uint_eq(d.kind, NIB_REQ_KIND_TENSOR);
        ck_assert_uint_eq(d.prompt_len, 778);
        return;
    }
    ck_assert_msg(rc == -1, "accepted a tensor request with a bad %s", field);
    size_t n = strlen(field);
    ck_assert_msg(strncmp(err, field, n) == 0 && err[n] == ':', "error '%s' should name '%s'", err,
                  field);
}

START_TEST(tensor_requests_are_checked)
{
    struct nib_request r;
    memset(&r, 0, sizeof r);
    r.kind = NIB_REQ_KIND_TENSOR;
    r.prompt_len = 778;
    r.seed = 99; /* ignored */
    expect_vision(&r, NULL);
    const uint32_t lens[] = {0, 1, 777, 779, 832, 833, UINT32_MAX};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        r.prompt_len = lens[i];
        expect_vision(&r, "prompt_len");
    }
    r.prompt_len = 778;
    r.max_tokens = 1;
    expect_vision(&r, "max_tokens");
    r.max_tokens = 0;
    const float temps[] = {NAN, 0.5f, -1.0f, INFINITY};
    for (size_t i = 0; i < sizeof temps / sizeof temps[0]; i++) {
        r.temperature = temps[i];
        expect_vision(&r, "temperature");
    }
    r.temperature = 0.0f;
    r.flags = NIB_REQ_NO_BOS;
    expect_vision(&r, "flags");
    r.flags = 0;
    r.reserved[0] = 1;
    expect_vision(&r, "reserved");
    r.reserved[0] = 0;
    /* every other kind, to a vision model */
    const uint32_t kinds[] = {NIB_REQ_KIND_TEXT, NIB_REQ_KIND_CHAT, NIB_REQ_KIND_MEASURE, 4, 99};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        struct nib_request t = good();
        t.kind = kinds[i];
        expect_vision(&t, "kind");
    }
    /* a tensor request to a decoder */
    r = good();
    r.kind = NIB_REQ_KIND_TENSOR;
    r.max_tokens = 0;
    r.temperature = 0.0f;
    expect(&r, 5, "kind");
}
END_TEST

static void put_id(uint32_t i, uint32_t id)
{
    prompt[4 * i] = (uint8_t)id;
    prompt[4 * i + 1] = (uint8_t)(id >> 8);
    prompt[4 * i + 2] = (uint8_t)(id >> 16);
    prompt[4 * i + 3] = (uint8_t)(id >> 24);
}

/* kind MEASURE: its first position as the prompt's one u32, max_tokens
 * passes inside the context (lim: ctx_len 256), nothing else set. */
static struct nib_request measure(uint32_t pos, uint32_t passes)
{
    struct nib_request r;
    memset(&r, 0, sizeof r);
    r.kind = NIB_REQ_KIND_MEASURE;
    r.prompt_len = 4;
    r.max_tokens = passes;
    put_id(0, pos);
    return r;
}

START_TEST(measure_request_checked)
{
    struct nib_request r = measure(250, 6); /* positions 250..255: the last six */
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    ck_assert_int_eq(
        nib_req_decode(&r, prompt, 4, &lim, &d, ids, NIB_PROMPT_MAX / 4, parts, err, sizeof err),
        0);
    ck_assert_uint_eq(d.kind, NIB_REQ_KIND_MEASURE);
    ck_assert_uint_eq(d.measure_pos, 250);
    ck_assert_uint_eq(d.max_tokens, 6);
    ck_assert_uint_eq(d.n_ids, 0);
    r = measure(250, 7); /* one past the context */
    expect(&r, 4, "prompt");
    const uint32_t past[] = {256, 257, 0x80000000u, UINT32_MAX};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        r = measure(past[i], 1);
        expect(&r, 4, "prompt");
    }
    r = measure(0, 0);
    expect(&r, 4, "max_tokens");
    r = measure(0, NIB_SLOT_TOKENS + 1);
    expect(&r, 4, "max_tokens");
    r = measure(0, 8);
    expect(&r, 3, "prompt_len"); /* the position was not provided */
    const uint32_t lens[] = {0, 3, 5, 8, NIB_PROMPT_MAX + 1};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        r = measure(0, 8);
        r.prompt_len = lens[i];
        expect(&r, 8, "prompt_len");
    }
    const uint32_t flags[] = {NIB_REQ_NO_BOS, NIB_REQ_PROMPT_IDS, NIB_REQ_SPECIAL, 0x80};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        r = measure(0, 8);
        r.flags = flags[i];
        expect(&r, 4, "flags");
    }
    r = measure(0, 8);
    r.temperature = 0.5f;
    expect(&r, 4, "temperature");
    r.temperature = NAN;
    expect(&r, 4, "temperature");
    r = measure(0, 8);
    r.reserved[3] = 1;
    expect(&r, 4, "reserved");
}
END_TEST

START_TEST(prompt_ids_checked_and_copied)
{
    struct nib_request r = good();
    r.flags = NIB_REQ_PROMPT_IDS;
    for (uint32_t i = 0; i < 4; i++)
        put_id(i, 1 + i * 100);
    r.prompt_len = 16;
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    ck_assert_int_eq(nib_req_decode(&r, prompt, 16, &lim, &d, ids, 4, parts, err, sizeof err), 0);
    ck_assert_uint_eq(d.n_ids, 4);
    for (uint32_t i = 0; i < 4; i++)
        ck_assert_uint_eq(ids[i], 1 + i * 100);
    r.prompt_len = 6;
    expect(&r, 16, "prompt_len"); /* not whole ids */
    r.prompt_len = 0;
    expect(&r, 16, "prompt_len"); /* no ids */
    r.prompt_len = 4 * (lim.ctx_len + 1);
    expect(&r, NIB_PROMPT_MAX, "prompt_len"); /* more than the context */
    r.prompt_len = 16;
    expect(&r, 12, "prompt_len"); /* the caller copied fewer bytes */
    put_id(2, lim.vocab_size);
    expect(&r, 16, "prompt");
    put_id(2, UINT32_MAX);
    expect(&r, 16, "prompt");
    put_id(2, lim.vocab_size - 1);
    expect(&r, 16, NULL);
}
END_TEST

/* n bytes at p from the test's generator. */
static void random_bytes(void *p, size_t n, uint64_t *rng)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(nib_rng_f32(rng) * 256.0f);
}

/* Random bytes in every field: whatever passes is within every limit, and
 * whatever fails names a field of the request. */
START_TEST(random_bytes_never_pass_out_of_range)
{
    static const char *const fields[] = {"prompt_len", "max_tokens", "temperature", "flags",
                                         "kind",       "reserved",   "prompt"};
    static const char *const chat_fields[] = {"chat.magic",    "chat.n_messages", "chat.flags",
                                              "chat.reserved", "chat.now_s",      "chat.length",
                                              "chat.message["};
    uint64_t rng = 12345;
    unsigned passed = 0, chats = 0;
    for (int it = 0; it < 200000; it++) {
        struct nib_request r;
        random_bytes(&r, sizeof r, &rng);
        /* Bias towards requests that get far: zero the reserved bytes,
         * shrink lengths, sometimes ask for ids. */
        if (it & 1) {
            memset(r.reserved, 0, sizeof r.reserved);
            r.kind = (it & 16) ? NIB_REQ_KIND_CHAT : 0;
        }
        if (it & 2)
            r.prompt_len %= 64;
        if (it & 4)
            r.max_tokens %= 2 * NIB_SLOT_TOKENS;
        if (it & 8)
            r.flags &= 3;
        for (int i = 0; i < 64; i++)
            prompt[i] = (uint8_t)(nib_rng_f32(&rng) * 256.0f);
        if (it & 32) { /* a valid conversation of random messages, sometimes one byte off */
            static const char *const roles[] = {"user", "system", "a", "assistant"};
            struct nib_chat_part m[3];
            uint32_t n = (uint32_t)(nib_rng_f32(&rng) * 4.0f) % 4;
            uint8_t body[16];
            random_bytes(body, sizeof body, &rng);
            for (uint32_t i = 0; i < n; i++)
                m[i] =
                    (struct nib_chat_part){(const uint8_t *)roles[body[i] % 4], body,
                                           (uint32_t)strlen(roles[body[i] % 4]), body[i + 4] % 8u};
            size_t len = nib_chat_encode(m, n, body[8] & 1, body[9], prompt, 64);
            if (it & 64)
                r.prompt_len = (uint32_t)len;
            if (it & 128)
                prompt[body[10] % 64] ^= (uint8_t)(1u << (body[11] % 8));
        }
        struct nib_req_decoded d;
        char err[NIB_ERRMSG_MAX];
        int rc = nib_req_decode(&r, prompt, 64, &lim, &d, ids, NIB_PROMPT_MAX / 4, parts, err,
                                sizeof err);
        if (rc == 0) {
            passed++;
            ck_assert_uint_le(d.prompt_len, 64);
            ck_assert(d.max_tokens >= 1 && d.max_tokens <= NIB_SLOT_TOKENS);
            ck_assert(d.temperature >= 0.0f && d.temperature <= NIB_TEMPERATURE_MAX);
            ck_assert_uint_eq(d.flags & ~NIB_REQ_FLAGS_KNOWN, 0);
            for (uint32_t i = 0; i < d.n_ids; i++)
                ck_assert_uint_lt(ids[i], lim.vocab_size);
            if (d.kind == NIB_REQ_KIND_CHAT) {
                chats++;
                ck_assert_uint_le(d.chat.n_messages, MSGS_MAX);
                for (uint32_t i = 0; i < d.chat.n_messages; i++) {
                    ck_assert(parts[i].role >= prompt &&
                              parts[i].role + parts[i].role_len <= prompt + d.prompt_len);
                    ck_assert(parts[i].content >= prompt &&
                              parts[i].content + parts[i].content_len <= prompt + d.prompt_len);
                }
            }
        } else {
            int named = 0;
            for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
                named |= strncmp(err, fields[f], strlen(fields[f])) == 0 &&
                         err[strlen(fields[f])] == ':';
            for (size_t f = 0; f < sizeof chat_fields / sizeof chat_fields[0]; f++)
                named |= strncmp(err, chat_fields[f], strlen(chat_fields[f])) == 0 &&
                         strchr(err, ':') != NULL;
            ck_assert_msg(named, "error '%s' names no field", err);
        }
    }
    ck_assert_uint_gt(passed, 100); /* the biased inputs do reach the end */
    ck_assert_uint_gt(chats, 10);   /* chat requests among them */
}
END_TEST

/* --- chat messages (proto/chat_msg.h) ------------------------------------------------- */

#define PART(r, c)                                                                                 \
    {                                                                                              \
        (const uint8_t *)(r), (const uint8_t *)(c), sizeof(r) - 1, sizeof(c) - 1                   \
    }
static const struct nib_chat_part convo[] = {
    PART("system", "You are terse."),
    PART("user", "Hi \xc3\xa9\xf0\x9f\x98\x80 <|im_end|>"),
    PART("assistant", ""),
    PART("user", "again"),
};
#define N_CONVO 4u

/* A chat request over the encoded conversation (prompt holds it). */
static struct nib_request chat_request(size_t len)
{
    struct nib_request r = good();
    r.kind = NIB_REQ_KIND_CHAT;
    r.prompt_len = (uint32_t)len;
    return r;
}

static void put32_at(size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        prompt[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

START_TEST(chat_round_trip)
{
    size_t len = nib_chat_encode(convo, N_CONVO, NIB_CHAT_ADD_GENERATION_PROMPT, 1700000000, prompt,
                                 sizeof prompt);
    ck_assert_uint_eq(len, nib_chat_encoded_size(convo, N_CONVO));
    size_t want = NIB_CHAT_HEADER_SIZE;
    for (uint32_t i = 0; i < N_CONVO; i++)
        want += 8 + convo[i].role_len + convo[i].content_len;
    ck_assert_uint_eq(len, want);
    struct nib_request r = chat_request(len);
    r.flags = NIB_REQ_SPECIAL;
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    ck_assert_msg(nib_req_decode(&r, prompt, len, &lim, &d, ids, 16, parts, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(d.kind, NIB_REQ_KIND_CHAT);
    ck_assert_uint_eq(d.flags, NIB_REQ_SPECIAL);
    ck_assert_uint_eq(d.chat.n_messages, N_CONVO);
    ck_assert_uint_eq(d.chat.flags, NIB_CHAT_ADD_GENERATION_PROMPT);
    ck_assert(d.chat.now_s == 1700000000);
    for (uint32_t i = 0; i < N_CONVO; i++) {
        ck_assert_uint_eq(parts[i].role_len, convo[i].role_len);
        ck_assert_uint_eq(parts[i].content_len, convo[i].content_len);
        ck_assert_mem_eq(parts[i].role, convo[i].role, convo[i].role_len);
        if (convo[i].content_len)
            ck_assert_mem_eq(parts[i].content, convo[i].content, convo[i].content_len);
    }
    /* No messages at all, and now_s 0 (the appliance's clock). */
    len = nib_chat_encode(convo, 0, 0, 0, prompt, sizeof prompt);
    ck_assert_uint_eq(len, NIB_CHAT_HEADER_SIZE);
    r = chat_request(len);
    expect(&r, len, NULL);
    /* Does not fit, bad flags, bad time, bad role: nothing encoded. */
    ck_assert_uint_eq(nib_chat_encode(convo, N_CONVO, 0, 0, prompt, want - 1), 0);
    ck_assert_uint_eq(nib_chat_encode(convo, N_CONVO, 2, 0, prompt, sizeof prompt), 0);
    ck_assert_uint_eq(nib_chat_encode(convo, N_CONVO, 0, -1, prompt, sizeof prompt), 0);
    ck_assert_uint_eq(
        nib_chat_encode(convo, N_CONVO, 0, NIB_CHAT_NOW_MAX + 1, prompt, sizeof prompt), 0);
    const struct nib_chat_part bad_role[] = {PART("us er", "x")};
    ck_assert_uint_eq(nib_chat_encoded_size(bad_role, 1), 0);
}
END_TEST

START_TEST(chat_each_bad_field_is_named)
{
    size_t len = nib_chat_encode(convo, N_CONVO, 1, 5, prompt, sizeof prompt);
    struct nib_request r = chat_request(len);
    expect(&r, len, NULL);
    /* The model has no chat template. */
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    ck_assert_int_eq(nib_req_decode(&r, prompt, len, &nochat, &d, ids, 16, parts, err, sizeof err),
                     -1);
    ck_assert_str_eq(err, "kind: this model has no chat template");
    r.flags = NIB_REQ_PROMPT_IDS;
    expect(&r, len, "flags");
    r = chat_request(len);
    expect(&r, len - 1, "prompt_len"); /* fewer bytes than prompt_len were copied */
    r.prompt_len = NIB_CHAT_HEADER_SIZE - 1;
    expect(&r, len, "chat.length");
    r.prompt_len = (uint32_t)len - 1; /* the last content cut short */
    expect(&r, len, "chat.message[3].content_len");
    r = chat_request(len + 3);
    expect(&r, len + 3, "chat.length"); /* trailing bytes */
    r = chat_request(len);
    /* Each header field. */
    struct {
        size_t at;
        uint32_t value;
        const char *field;
    } hdr[] = {
        {0, 0x4D42494Fu, "chat.magic"},
        {4, N_CONVO + 1, "chat.message[4].role_len"}, /* a message more than there is */
        {4, UINT32_MAX, "chat.n_messages"},
        {4, MSGS_MAX + 1, "chat.n_messages"},
        {8, 2, "chat.flags"},
        {8, 0x80000001u, "chat.flags"},
        {12, 1, "chat.reserved"},
        {20, 0x80000000u, "chat.now_s"}, /* negative */
        {20, 0x7fffffffu, "chat.now_s"}, /* past year 9999 */
    };
    for (size_t i = 0; i < sizeof hdr / sizeof hdr[0]; i++) {
        nib_chat_encode(convo, N_CONVO, 1, 5, prompt, sizeof prompt);
        put32_at(hdr[i].at, hdr[i].value);
        expect(&r, len, hdr[i].field);
    }
    /* The first message's lengths and role bytes (it starts at 24). */
    struct {
        size_t at;
        uint32_t value;
        const char *field;
    } msg[] = {
        {24, 0, "chat.message[0].role_len"},
        {24, NIB_CHAT_ROLE_MAX + 1, "chat.message[0].role_len"},
        {24, UINT32_MAX, "chat.message[0].role_len"},
        {28, UINT32_MAX, "chat.message[0].content_len"},
        {28, (uint32_t)len, "chat.message[0].content_len"},
        {32, ' ', "chat.message[0].role"},
        {32, 0x7f, "chat.message[0].role"},
        {32, 0xc3, "chat.message[0].role"},
    };
    for (size_t i = 0; i < sizeof msg / sizeof msg[0]; i++) {
        nib_chat_encode(convo, N_CONVO, 1, 5, prompt, sizeof prompt);
        if (msg[i].at == 32)
            prompt[32] = (uint8_t)msg[i].value;
        else
            put32_at(msg[i].at, msg[i].value);
        expect(&r, len, msg[i].field);
    }
    /* A shorter content moves the rest: trailing bytes or a cut header. */
    nib_chat_encode(convo, N_CONVO, 1, 5, prompt, sizeof prompt);
    put32_at(28, convo[0].content_len - 1);
    expect(&r, len, "chat.message[1].role_len");
}
END_TEST

/* Hostile conversations at the limit: as many empty messages as fit, one
 * giant message, and counts that claim more than the area holds. */
START_TEST(chat_at_the_prompt_limit)
{
    static struct nib_chat_part many[MSGS_MAX + 1];
    for (uint32_t i = 0; i <= MSGS_MAX; i++)
        many[i] = (struct nib_chat_part){(const uint8_t *)"u", (const uint8_t *)"", 1, 0};
    uint32_t fit = (NIB_PROMPT_MAX - NIB_CHAT_HEADER_SIZE) / 9;
    size_t len = nib_chat_encode(many, fit, 1, 0, prompt, sizeof prompt);
    ck_assert_uint_gt(len, 0);
    ck_assert_uint_le(len, NIB_PROMPT_MAX);
    struct nib_request r = chat_request(len);
    expect(&r, len, NULL);
    ck_assert_uint_eq(nib_chat_encode(many, fit + 1, 1, 0, prompt, sizeof prompt), 0);
    put32_at(4, fit + 1);
    expect(&r, len, "chat.n_messages");
    /* One message as large as the area allows. */
    static uint8_t big[NIB_PROMPT_MAX];
    memset(big, 'a', sizeof big);
    struct nib_chat_part one = {(const uint8_t *)"user", big, 4,
                                NIB_PROMPT_MAX - NIB_CHAT_HEADER_SIZE - 12};
    len = nib_chat_encode(&one, 1, 1, 0, prompt, sizeof prompt);
    ck_assert_uint_eq(len, NIB_PROMPT_MAX);
    r = chat_request(len);
    expect(&r, len, NULL);
    one.content_len++;
    ck_assert_uint_eq(nib_chat_encode(&one, 1, 1, 0, prompt, sizeof prompt), 0);
    ck_assert_uint_eq(nib_chat_max_messages(0), 0);
    ck_assert_uint_eq(nib_chat_max_messages(SIZE_MAX), NIB_CHAT_MESSAGES_MAX);
}
END_TEST

/* --- control messages ------------------------------------------------------- */

static int parse(const struct nib_ctl_msg *m, size_t len)
{
    char err[128];
    err[0] = 0;
    int t = nib_ctl_parse(m, len, err, sizeof err);
    if (t < 0)
        ck_assert_msg(err[0] != 0, "a refusal without a reason");
    return t;
}

START_TEST(ctl_host_messages_pass)
{
    const uint16_t types[] = {NIB_CTL_ATTACH, NIB_CTL_DETACH, NIB_CTL_STOP, NIB_CTL_KICK};
    for (size_t i = 0; i < 4; i++) {
        struct nib_ctl_msg m = nib_ctl_make(types[i]);
        ck_assert_uint_eq(m.magic, NIB_CTL_MAGIC);
        ck_assert_uint_eq(m.version, NIB_CTL_VERSION);
        ck_assert_int_eq(parse(&m, sizeof m), types[i]);
        m.epoch = 12345; /* hosts may leave their last epoch there: ignored */
        ck_assert_int_eq(parse(&m, sizeof m), types[i]);
    }
}
END_TEST

START_TEST(ctl_every_bad_field_refused)
{
    struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_ATTACH);
    for (size_t len = 0; len < 2 * sizeof m; len++)
        if (len != sizeof m)
            ck_assert_int_eq(parse(&m, len), -1);
    m.magic ^= 0x100;
    ck_assert_int_eq(parse(&m, sizeof m), -1);
    m = nib_ctl_make(NIB_CTL_ATTACH);
    m.version = 2;
    ck_assert_int_eq(parse(&m, sizeof m), -1);
    /* Appliance-to-host types and unknown ones. */
    const uint16_t bad_types[] = {0,     5, NIB_CTL_ATTACHED, NIB_CTL_REFUSED, NIB_CTL_STOPPING,
                                  0xffff};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        m = nib_ctl_make(bad_types[i]);
        ck_assert_int_eq(parse(&m, sizeof m), -1);
    }
    /* Each reply-only field set in a host's message. */
#define REFUSED_WITH(field, value)                                                                 \
    do {                                                                                           \
        m = nib_ctl_make(NIB_CTL_STOP);                                                            \
        m.field = value;                                                                           \
        ck_assert_int_eq(parse(&m, sizeof m), -1);                                                 \
    } while (0)
    REFUSED_WITH(status, 1);
    REFUSED_WITH(host_index, 3);
    REFUSED_WITH(header_size, 4096);
    REFUSED_WITH(ring_size, 1);
#undef REFUSED_WITH
    for (size_t i = 0; i < sizeof m.reserved; i++) {
        m = nib_ctl_make(NIB_CTL_KICK);
        m.reserved[i] = 0x80;
        ck_assert_int_eq(parse(&m, sizeof m), -1);
    }
}
END_TEST

START_TEST(ctl_random_bytes)
{
    uint64_t rng = 777;
    unsigned passed = 0;
    for (int it = 0; it < 100000; it++) {
        struct nib_ctl_msg m;
        random_bytes(&m, sizeof m, &rng);
        if (it & 1) { /* get past the first checks */
            struct nib_ctl_msg z = nib_ctl_make((uint16_t)(m.type % 8));
            z.epoch = m.epoch;
            if (it & 2)
                z.reserved[m.type % 24] = (uint8_t)m.status;
            m = z;
        }
        int t = parse(&m, sizeof m);
        if (t >= 0) {
            passed++;
            ck_assert(t == NIB_CTL_ATTACH || t == NIB_CTL_DETACH || t == NIB_CTL_STOP ||
                      t == NIB_CTL_KICK);
            ck_assert_uint_eq(m.magic, NIB_CTL_MAGIC);
            ck_assert_uint_eq(m.status | m.host_index, 0);
            for (size_t i = 0; i < sizeof m.reserved; i++)
                ck_assert_uint_eq(m.reserved[i], 0);
        }
    }
    ck_assert_uint_gt(passed, 1000);
}
END_TEST

/* --- names and the runtime directory ----------------------------------------------- */

START_TEST(names_and_paths)
{
    char err[256];
    struct nib_name_paths p;
    const char *good_names[] = {"nib", "a", "A-b_c.9",
                                "x234567890123456789012345678901234567890123456789012345"};
    const char *bad_names[] = {
        "",   ".hidden", "a/b",      "a b",
        "..", "n\n",     "\xc3\xa9", "x23456789012345678901234567890123456789012345678901234567"};
    for (size_t i = 0; i < sizeof good_names / sizeof *good_names; i++)
        ck_assert_msg(nib_name_check(good_names[i], err, sizeof err) == 0, "%s: %s", good_names[i],
                      err);
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++)
        ck_assert_int_eq(nib_name_check(bad_names[i], err, sizeof err), -1);

    setenv("NIB_RUNTIME_DIR", "/run/x/", 1);
    ck_assert_int_eq(nib_name_paths("nib", &p, err, sizeof err), 0);
    ck_assert_str_eq(p.dir, "/run/x");
    ck_assert_str_eq(p.lock, "/run/x/nib.lock");
    ck_assert_str_eq(p.sock, "/run/x/nib.sock");
    setenv("NIB_RUNTIME_DIR", "relative/dir", 1);
    ck_assert_int_eq(nib_name_paths("nib", &p, err, sizeof err), -1);
    unsetenv("NIB_RUNTIME_DIR");
    setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
    ck_assert_int_eq(nib_name_paths("nib", &p, err, sizeof err), 0);
    ck_assert_str_eq(p.sock, "/run/user/1000/nibble/nib.sock");
    unsetenv("XDG_RUNTIME_DIR");
    ck_assert_int_eq(nib_name_paths("nib", &p, err, sizeof err), 0);
    char want[64];
    snprintf(want, sizeof want, "/tmp/nibble-%u", (unsigned)geteuid());
    ck_assert_str_eq(p.dir, want);
    /* A socket path that does not fit a Unix address is refused. */
    char longdir[200];
    memset(longdir, 'd', sizeof longdir);
    longdir[0] = '/';
    longdir[100] = 0;
    setenv("NIB_RUNTIME_DIR", longdir, 1);
    ck_assert_int_eq(nib_name_paths("nib", &p, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "NIB_RUNTIME_DIR"));
    unsetenv("NIB_RUNTIME_DIR");
}
END_TEST

START_TEST(runtime_dir_rules)
{
    char err[256], dir[] = "/tmp/nib-dir-XXXXXX", link[64], sub[64], file[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    uint32_t uid = (uint32_t)geteuid();
    ck_assert_int_eq(chmod(dir, 0700), 0);
    ck_assert_int_eq(nib_runtime_dir_check(dir, uid, 0, err, sizeof err), 0);
    ck_assert_int_eq(nib_runtime_dir_check(dir, uid, 1, err, sizeof err), -1); /* wants 0750 */
    ck_assert_int_eq(nib_runtime_dir_check(dir, uid + 1, 0, err, sizeof err), -1);
    ck_assert_int_eq(nib_runtime_dir_check_host(dir, uid, err, sizeof err), 0);
    ck_assert_int_eq(chmod(dir, 0750), 0);
    ck_assert_int_eq(nib_runtime_dir_check(dir, uid, 1, err, sizeof err), 0);
    ck_assert_int_eq(nib_runtime_dir_check(dir, uid, 0, err, sizeof err), -1);
    ck_assert_int_eq(nib_runtime_dir_check_host(dir, uid + 1, err, sizeof err), 0);
    const unsigned bad_modes[] = {0755, 0777, 0701, 0770, 01700, 0500};
    for (size_t i = 0; i < sizeof bad_modes / sizeof *bad_modes; i++) {
        ck_assert_int_eq(chmod(dir, bad_modes[i]), 0);
        ck_assert_msg(nib_runtime_dir_check(dir, uid, 0, err, sizeof err) == -1 &&
                          nib_runtime_dir_check(dir, uid, 1, err, sizeof err) == -1,
                      "mode %o accepted", bad_modes[i]);
    }
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_int_eq(nib_runtime_dir_check_host(dir, uid, err, sizeof err), -1);
    ck_assert_int_eq(chmod(dir, 0700), 0);
    /* A link to a good directory, and a file, are not directories. */
    snprintf(link, sizeof link, "%s.link", dir);
    ck_assert_int_eq(symlink(dir, link), 0);
    ck_assert_int_eq(nib_runtime_dir_check(link, uid, 0, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "link"));
    ck_assert_int_eq(nib_runtime_dir_check_host(link, uid, err, sizeof err), -1);
    snprintf(file, sizeof file, "%s/f", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(nib_runtime_dir_check(file, uid, 0, err, sizeof err), -1);
    snprintf(sub, sizeof sub, "%s/missing", dir);
    ck_assert_int_eq(nib_runtime_dir_check(sub, uid, 0, err, sizeof err), -1);
    unlink(file);
    unlink(link);
    rmdir(dir);
}
END_TEST

TU_SUITE("decode", "decode", NULL, NULL, 0, good_request_passes_intact, each_bad_field_is_named,
         tensor_requests_are_checked, measure_request_checked, prompt_ids_checked_and_copied,
         random_bytes_never_pass_out_of_range, chat_round_trip, chat_each_bad_field_is_named,
         chat_at_the_prompt_limit, ctl_host_messages_pass, ctl_every_bad_field_refused,
         ctl_random_bytes, names_and_paths, runtime_dir_rules)
