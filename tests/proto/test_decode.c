/* The pure checks of hostile input (protocol version 3): nib_req_decode,
 * which every request copied out of a ring goes through (each bad field is
 * named, good requests come out intact, random bytes never get past it with
 * an out-of-range value); nib_ctl_parse, which every control message goes
 * through; and the runtime directory / name rules of proto/shm_name.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/ctl.h"
#include "proto/shm_name.h"
#include "rt/sample.h"
#include "rt/serve.h"
#include "tests/common/test_util.h"

/* Limits as the geometry gives them for a small model. */
#define NIB_PROMPT_MAX 8192u
#define NIB_SLOT_TOKENS 4096u
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
    /* Kinds reserved for later revisions are refused by version 3. */
    const uint32_t kinds[] = {NIB_REQ_KIND_CHAT, NIB_REQ_KIND_MEASURE, NIB_REQ_KIND_TENSOR, 99,
                              UINT32_MAX};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        r = good();
        r.kind = kinds[i];
        expect(&r, 5, "kind");
    }
    r = good();
    r.flags = NIB_REQ_SPECIAL; /* reserved flag: not known yet */
    expect(&r, 5, "flags");
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
    uint64_t rng = 12345;
    unsigned passed = 0;
    for (int it = 0; it < 200000; it++) {
        struct nib_request r;
        random_bytes(&r, sizeof r, &rng);
        /* Bias towards requests that get far: zero the reserved bytes,
         * shrink lengths, sometimes ask for ids. */
        if (it & 1) {
            memset(r.reserved, 0, sizeof r.reserved);
            r.kind = 0;
        }
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
         prompt_ids_checked_and_copied, random_bytes_never_pass_out_of_range,
         ctl_host_messages_pass, ctl_every_bad_field_refused, ctl_random_bytes, names_and_paths,
         runtime_dir_rules)
