/* nib_req_decode, the pure check every request copied out of shared memory
 * goes through: each bad field is named, good requests come out intact, and
 * random bytes never get past it with an out-of-range value. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt/sample.h"
#include "rt/serve.h"
#include "tests/common/test_util.h"

static const struct nib_req_limits lim = {NIB_PROMPT_MAX, NIB_SLOT_TOKENS, 256, 512};
static uint8_t prompt[NIB_PROMPT_MAX];
static uint32_t ids[NIB_PROMPT_MAX / 4];

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
    int rc = nib_req_decode(r, prompt, avail, &lim, &d, ids, NIB_PROMPT_MAX / 4, err, sizeof err);
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
    ck_assert_int_eq(nib_req_decode(&r, prompt, 5, &lim, &d, ids, 16, err, sizeof err), 0);
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
}
END_TEST

static void put_id(uint32_t i, uint32_t id)
{
    prompt[4 * i] = (uint8_t)id;
    prompt[4 * i + 1] = (uint8_t)(id >> 8);
    prompt[4 * i + 2] = (uint8_t)(id >> 16);
    prompt[4 * i + 3] = (uint8_t)(id >> 24);
}

START_TEST(prompt_ids_checked_and_copied)
{
    struct nib_request r = good();
    r.flags = NIB_REQ_PROMPT_IDS;
    for (uint32_t i = 0; i < 4; i++)
        put_id(i, 1 + i * 100);
    r.prompt_len = 16;
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    ck_assert_int_eq(nib_req_decode(&r, prompt, 16, &lim, &d, ids, 4, err, sizeof err), 0);
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

/* Random bytes in every field: whatever passes is within every limit, and
 * whatever fails names a field of the request. */
START_TEST(random_bytes_never_pass_out_of_range)
{
    static const char *const fields[] = {"prompt_len", "max_tokens", "temperature", "flags",
                                         "reserved", "prompt"};
    uint64_t rng = 12345;
    unsigned passed = 0;
    for (int it = 0; it < 200000; it++) {
        struct nib_request r;
        uint8_t *b = (uint8_t *)&r;
        for (size_t i = 0; i < sizeof r; i++)
            b[i] = (uint8_t)(nib_rng_f32(&rng) * 256.0f);
        /* Bias towards requests that get far: zero the reserved bytes,
         * shrink lengths, sometimes ask for ids. */
        if (it & 1)
            memset(r.reserved, 0, sizeof r.reserved);
        if (it & 2)
            r.prompt_len %= 64;
        if (it & 4)
            r.max_tokens %= 2 * NIB_SLOT_TOKENS;
        if (it & 8)
            r.flags &= 3;
        for (int i = 0; i < 64; i++)
            prompt[i] = (uint8_t)(nib_rng_f32(&rng) * 256.0f);
        struct nib_req_decoded d;
        char err[NIB_ERRMSG_MAX];
        int rc = nib_req_decode(&r, prompt, 64, &lim, &d, ids, NIB_PROMPT_MAX / 4, err, sizeof err);
        if (rc == 0) {
            passed++;
            ck_assert_uint_le(d.prompt_len, 64);
            ck_assert(d.max_tokens >= 1 && d.max_tokens <= NIB_SLOT_TOKENS);
            ck_assert(d.temperature >= 0.0f && d.temperature <= NIB_TEMPERATURE_MAX);
            ck_assert_uint_eq(d.flags & ~NIB_REQ_FLAGS_KNOWN, 0);
            for (uint32_t i = 0; i < d.n_ids; i++)
                ck_assert_uint_lt(ids[i], lim.vocab_size);
        } else {
            int named = 0;
            for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
                named |= strncmp(err, fields[f], strlen(fields[f])) == 0 &&
                         err[strlen(fields[f])] == ':';
            ck_assert_msg(named, "error '%s' names no field", err);
        }
    }
    ck_assert_uint_gt(passed, 100); /* the biased inputs do reach the end */
}
END_TEST

TU_SUITE("decode", "decode", NULL, NULL, 0, good_request_passes_intact, each_bad_field_is_named,
         prompt_ids_checked_and_copied, random_bytes_never_pass_out_of_range)
