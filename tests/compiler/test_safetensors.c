/* safetensors reader tests: well-formed files (shapes reversed into ne,
 * F32/F16/BF16, metadata, padding, holes), and every refusal: the header
 * length, the JSON, metadata, each tensor field, dtypes by name, ranks and
 * dimensions, offsets outside the data, sizes that disagree with the
 * shape, overlaps and duplicate names; then random damage to a valid file
 * (never a crash; run under ASan). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/test_util.h"
#include "tools/compiler/safetensors.h"

static char err[512];

/* A file: 8-byte length, header text, then data_len bytes of data (byte i
 * = i & 0xff), in an exact-size heap buffer so ASan sees any over-read. */
static uint8_t *make(const char *header, size_t data_len, size_t *size)
{
    size_t hl = strlen(header);
    *size = 8 + hl + data_len;
    uint8_t *b = malloc(*size);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++)
        b[8 + hl + i] = (uint8_t)i;
    return b;
}

static int open_text(const char *header, size_t data_len, struct st_file *f, uint8_t **buf)
{
    size_t size;
    *buf = make(header, data_len, &size);
    err[0] = 0;
    int rc = st_open(f, *buf, size, err, sizeof err);
    if (rc)
        ck_assert_msg(err[0], "a refusal without a message");
    return rc;
}

#define EXPECT_BAD(header, data_len, phrase)                                                       \
    do {                                                                                           \
        struct st_file f_;                                                                         \
        uint8_t *b_;                                                                               \
        ck_assert_msg(open_text(header, data_len, &f_, &b_) == -1, "accepted: %s", header);        \
        ck_assert_msg(strstr(err, phrase), "%s: error '%s' lacks '%s'", header, err, phrase);      \
        free(b_);                                                                                  \
    } while (0)

#define T1 "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}"

START_TEST(test_valid)
{
    struct st_file f;
    uint8_t *b;
    const char *h = "{\"__metadata__\": {\"format\": \"pt\", \"x\": \"y\"},"
                    " \"a.weight\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, "
                    "24]},"
                    " \"b\": {\"shape\": [4], \"dtype\": \"BF16\", \"data_offsets\": [24, 32]},"
                    " \"c\": {\"dtype\": \"F16\", \"shape\": [1, 2, 3, 2], \"data_offsets\": [40, "
                    "64]}}   ";
    ck_assert_msg(open_text(h, 70, &f, &b) == 0, "%s", err);
    ck_assert_uint_eq(f.n_tensors, 3);
    ck_assert_uint_eq(f.header_len, strlen(h));
    ck_assert_uint_eq(f.data_size, 70);
    const struct gguf_tensor *a = st_find(&f, "a.weight"), *bb = st_find(&f, "b"),
                             *c = st_find(&f, "c");
    ck_assert(a && bb && c && !st_find(&f, "__metadata__") && !st_find(&f, "a"));
    /* row-major [2, 3]: ne[0] = 3 (the fast dim), ne[1] = 2 */
    ck_assert_uint_eq(a->n_dims, 2);
    ck_assert(a->ne[0] == 3 && a->ne[1] == 2 && a->ne[2] == 1 && a->ne[3] == 1);
    ck_assert_uint_eq(a->type, GGML_TYPE_F32);
    ck_assert_uint_eq(a->n_elems, 6);
    ck_assert_uint_eq(a->nbytes, 24);
    ck_assert_ptr_eq(a->data, f.data);
    ck_assert_uint_eq(bb->type, GGML_TYPE_BF16);
    ck_assert(bb->n_dims == 1 && bb->ne[0] == 4 && bb->ne[1] == 1);
    ck_assert_ptr_eq(bb->data, f.data + 24);
    ck_assert_uint_eq(c->type, GGML_TYPE_F16);
    ck_assert(c->n_dims == 4 && c->ne[0] == 2 && c->ne[1] == 3 && c->ne[2] == 2 && c->ne[3] == 1);
    ck_assert_uint_eq(c->offset, 40); /* a hole of 8 bytes before it, 6 after: allowed */
    ck_assert_uint_eq(c->data[0], (uint8_t)40);
    ck_assert_str_eq(st_metadata(&f, "format"), "pt");
    ck_assert_ptr_null(st_metadata(&f, "nope"));
    ck_assert(a->name.len == 8 && a->name.ptr[8] == 0);
    st_close(&f);
    free(b);

    /* no tensors at all, and an empty metadata object: a valid (empty) file */
    ck_assert_int_eq(open_text("{}", 0, &f, &b), 0);
    ck_assert_uint_eq(f.n_tensors, 0);
    st_close(&f);
    free(b);
    ck_assert_int_eq(open_text("{\"__metadata__\": {}}", 3, &f, &b), 0);
    ck_assert_ptr_null(st_metadata(&f, "format"));
    st_close(&f);
    free(b);
    /* a tensor named like a JSON escape: the decoded name is found */
    ck_assert_int_eq(
        open_text("{\"a\\u00e9\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                  4, &f, &b),
        0);
    ck_assert_ptr_nonnull(st_find(&f, "a\xc3\xa9"));
    st_close(&f);
    free(b);
}
END_TEST

START_TEST(test_header_length)
{
    struct st_file f;
    uint8_t small[7] = {0};
    ck_assert_int_eq(st_open(&f, small, sizeof small, err, sizeof err), -1);
    ck_assert(strstr(err, "too short"));
    ck_assert_int_eq(st_open(&f, small, 0, err, sizeof err), -1);
    size_t size;
    uint8_t *b = make(T1, 24, &size);
    /* header length 0, 1, past the file, past the limit, 2^64 - 1 */
    const uint64_t lens[] = {0, 1, size - 7, (uint64_t)ST_MAX_HEADER + 1, UINT64_MAX};
    const char *want[] = {"out of range", "out of range", "past the end", "out of range",
                          "out of range"};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        uint8_t *c = malloc(size);
        memcpy(c, b, size);
        for (int i = 0; i < 8; i++)
            c[i] = (uint8_t)(lens[k] >> (8 * i));
        ck_assert_int_eq(st_open(&f, c, size, err, sizeof err), -1);
        ck_assert_msg(strstr(err, want[k]), "length %llu: %s", (unsigned long long)lens[k], err);
        free(c);
    }
    /* a header length that cuts the JSON short */
    uint8_t *c = malloc(size);
    memcpy(c, b, size);
    c[0] = (uint8_t)(strlen(T1) - 3);
    ck_assert_int_eq(st_open(&f, c, size, err, sizeof err), -1);
    ck_assert(strstr(err, "header:"));
    free(c);
    /* exactly the header, no data: the tensor reaches past the data section */
    ck_assert_int_eq(st_open(&f, b, size - 24, err, sizeof err), -1);
    ck_assert(strstr(err, "past the data section"));
    free(b);
}
END_TEST

START_TEST(test_bad_json)
{
    EXPECT_BAD("[1, 2]", 0, "does not start with '{'");
    EXPECT_BAD(" {}", 0, "does not start with '{'");
    EXPECT_BAD("{\"a\": }", 0, "header: line 1");
    EXPECT_BAD("{\"a\": 1,}", 0, "header:");
    EXPECT_BAD("{} x", 0, "header:");
    EXPECT_BAD("{\"a\": {\"b\": {\"c\": {\"d\": {}}}}}", 0, "nesting");
    EXPECT_BAD("{\"a\": \"\xff\"}", 0, "header:");
}
END_TEST

START_TEST(test_metadata)
{
    EXPECT_BAD("{\"__metadata__\": []}", 0, "__metadata__ is array, not an object");
    EXPECT_BAD("{\"__metadata__\": {\"format\": 1}}", 0, "__metadata__.format is number");
    EXPECT_BAD("{\"__metadata__\": {\"a\": {}}}", 0, "__metadata__.a is object");
    EXPECT_BAD("{\"__metadata__\": null}", 0, "__metadata__ is null");
}
END_TEST

START_TEST(test_tensor_fields)
{
    EXPECT_BAD("{\"w\": 1}", 0, "tensor 'w': is number, not an object");
    EXPECT_BAD("{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "tensor 'w': missing dtype");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, "missing shape");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, "missing data_offsets");
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"x\": 1}}",
               4, "unknown field 'x'");
    EXPECT_BAD("{\"\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "empty name");
    EXPECT_BAD("{\"a\\u0000b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "NUL byte");
    char big[1200];
    memset(big, 'n', sizeof big);
    size_t at = (size_t)snprintf(big, sizeof big, "{\"");
    memset(big + at, 'n', ST_MAX_NAME + 1);
    snprintf(big + at + ST_MAX_NAME + 1, sizeof big - at - ST_MAX_NAME - 1,
             "\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}");
    EXPECT_BAD(big, 4, "is longer than 512");
    /* duplicate tensor names: the header's JSON refuses duplicate keys */
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
               " \"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
               8, "duplicate key");
    EXPECT_BAD("{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "duplicate key");
}
END_TEST

START_TEST(test_dtypes)
{
    const char *refused[] = {"F64", "I64", "U64",     "I32",     "U32",     "I16",
                             "U16", "I8",  "U8",      "BOOL",    "F8_E4M3", "F8_E5M2",
                             "C64", "F4",  "F8_E8M0", "F6_E2M3", "F6_E3M2"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char h[200], want[80];
        snprintf(h, sizeof h,
                 "{\"w\": {\"dtype\": \"%s\", \"shape\": [8], \"data_offsets\": [0, 64]}}",
                 refused[i]);
        snprintf(want, sizeof want, "tensor 'w': dtype %s is not supported", refused[i]);
        EXPECT_BAD(h, 64, want);
        EXPECT_BAD(h, 64, "nibble reads F32, F16 and BF16");
    }
    EXPECT_BAD("{\"w\": {\"dtype\": \"f32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "unknown dtype 'f32'");
    EXPECT_BAD("{\"w\": {\"dtype\": \"Q4_0\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "unknown dtype 'Q4_0'");
    EXPECT_BAD("{\"w\": {\"dtype\": 0, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "dtype is number, not a string");
    EXPECT_BAD("{\"w\": {\"dtype\": \"\\u0007\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "unknown dtype '?'");
}
END_TEST

START_TEST(test_shapes)
{
#define SH(shape, offs, len, phrase)                                                               \
    EXPECT_BAD("{\"w\": {\"dtype\": \"F32\", \"shape\": " shape ", \"data_offsets\": " offs "}}",  \
               len, phrase)
    SH("[]", "[0, 4]", 4, "rank 0");
    SH("[1, 1, 1, 1, 1]", "[0, 4]", 4, "rank 5");
    SH("1", "[0, 4]", 4, "shape is number, not an array");
    SH("[0]", "[0, 0]", 4, "shape[0] must be an integer in [1, 2^32 - 1]");
    SH("[2, 0]", "[0, 0]", 4, "shape[1] must be");
    SH("[-1]", "[0, 4]", 4, "shape[0] must be");
    SH("[1.5]", "[0, 4]", 4, "shape[0] must be");
    SH("[\"1\"]", "[0, 4]", 4, "shape[0] must be");
    SH("[4294967296]", "[0, 4]", 4, "shape[0] must be");
    SH("[4294967295, 4294967295, 4294967295]", "[0, 4]", 4, "shape overflows");
    SH("[4294967295, 4294967295]", "[0, 4]", 4, "shape overflows"); /* elements fit, bytes not */
    SH("[4294967295]", "[0, 17179869180]", 4, "past the data section");
    /* offsets */
    SH("[1]", "[0]", 4, "data_offsets must be an array [begin, end]");
    SH("[1]", "[0, 4, 8]", 8, "data_offsets must be an array");
    SH("[1]", "{}", 4, "data_offsets must be an array");
    SH("[1]", "[-4, 0]", 4, "non-negative integers");
    SH("[1]", "[0.5, 4]", 4, "non-negative integers");
    SH("[1]", "[0, 99999999999999999999]", 4, "non-negative integers");
    SH("[1]", "[8, 4]", 8, "end before they begin");
    SH("[1]", "[4, 8]", 7, "past the data section");
    SH("[1]", "[0, 8]", 8, "hold 8 bytes, but the shape and dtype need 4");
    SH("[2]", "[0, 4]", 8, "hold 4 bytes, but the shape and dtype need 8");
#undef SH
}
END_TEST

START_TEST(test_overlaps)
{
    EXPECT_BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
               " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}",
               12, "tensors 'a' and 'b' overlap");
    /* the same range twice, listed in reverse offset order */
    EXPECT_BAD("{\"c\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]},"
               " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
               " \"b\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [8, 12]}}",
               12, "overlap");
    /* one inside another */
    EXPECT_BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
               " \"b\": {\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [4, 8]}}",
               16, "overlap");
    /* touching is not overlapping */
    struct st_file f;
    uint8_t *b;
    ck_assert_int_eq(
        open_text("{\"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]},"
                  " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}",
                  16, &f, &b),
        0);
    st_close(&f);
    free(b);
}
END_TEST

/* Random damage to a valid file: refused with a message or accepted with
 * every tensor inside the data section, never a crash. */
START_TEST(test_damage)
{
    const char *h = "{\"__metadata__\": {\"format\": \"pt\"},"
                    " \"model.embed_tokens.weight\": {\"dtype\": \"BF16\", \"shape\": [4, 8],"
                    " \"data_offsets\": [0, 64]},"
                    " \"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [8], \"data_offsets\":"
                    " [64, 96]}}";
    size_t size;
    uint8_t *b = make(h, 96, &size);
    uint64_t seed = 12345;
    int ok = 0;
    for (int it = 0; it < 4000; it++) {
        uint8_t *c = malloc(size);
        memcpy(c, b, size);
        for (int k = 0; k < 1 + it % 4; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % (8 + strlen(h));
            c[at] = (uint8_t)(seed >> 20);
        }
        size_t n = it % 7 == 6 ? (size_t)(seed >> 40) % size : size;
        struct st_file f;
        if (st_open(&f, c, n, err, sizeof err) == 0) {
            ok++;
            for (uint32_t i = 0; i < f.n_tensors; i++) {
                const struct gguf_tensor *t = &f.tensors[i];
                ck_assert(t->data >= f.data && t->data + t->nbytes <= f.data + f.data_size);
                ck_assert(t->data + t->nbytes <= c + n);
            }
            st_close(&f);
        } else {
            ck_assert(err[0]);
        }
        free(c);
    }
    ck_assert_int_gt(ok, 0); /* some damage (inside names, metadata) is harmless */
    free(b);
}
END_TEST

TU_SUITE("safetensors", "safetensors", NULL, NULL, 120, test_valid, test_header_length,
         test_bad_json, test_metadata, test_tensor_fields, test_dtypes, test_shapes, test_overlaps,
         test_damage)
