/* GGUF reader tests: a valid fixture parses; every kind of damage to it
 * (truncation anywhere, hostile counts and lengths, bad types, shapes and
 * offsets, duplicates, random mutation) fails with a message that names the
 * problem and never reads outside the buffer (run under ASan). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/gguf_fixture.h"
#include "tests/common/test_util.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"

static char err[512];

/* Parse an exact-size copy of buf[0..n); 0 or -1, message in err. */
static int parse_copy(const uint8_t *buf, size_t n)
{
    uint8_t *c = fx_dup(buf, n);
    struct gguf_file g;
    int rc = gguf_open(&g, c, n, err, sizeof err);
    if (rc == 0)
        gguf_close(&g);
    free(c);
    return rc;
}

/* Expect failure with `phrase` in the message. */
#define EXPECT_FAIL(buf, n, phrase)                                                                \
    do {                                                                                           \
        ck_assert_int_eq(parse_copy((buf), (n)), -1);                                              \
        ck_assert_msg(strstr(err, (phrase)) != NULL, "error '%s' lacks '%s'", err, (phrase));      \
        ck_assert_msg(!strncmp(err, "gguf: ", 6), "error '%s' lacks the gguf: prefix", err);       \
    } while (0)

static size_t kv_index(const struct fx_model *m, const char *key)
{
    for (size_t i = 0; i < m->n_kv; i++)
        if (!strcmp(m->kv[i].key, key))
            return i;
    ck_abort_msg("fixture has no key %s", key);
    return 0;
}

/* Build a model edited by the caller and expect the parse to fail. */
static void expect_model_fail(struct fx_model *m, const char *phrase)
{
    struct fx_file f;
    fx_build(m, &f);
    EXPECT_FAIL(f.buf, f.size, phrase);
    fx_file_free(&f);
}

START_TEST(test_valid_parse)
{
    struct fx_params p;
    struct fx_model m;
    struct fx_file f;
    struct gguf_file g;
    fx_default_params(&p);
    fx_model_init(&m, &p);
    fx_build(&m, &f);
    ck_assert_int_eq(gguf_open(&g, f.buf, f.size, err, sizeof err), 0);
    ck_assert_uint_eq(g.version, 3);
    ck_assert_uint_eq(g.n_kv, m.n_kv);
    ck_assert_uint_eq(g.n_tensors, m.n_t);
    ck_assert_uint_eq(g.alignment, 32);
    ck_assert_ptr_eq(g.data, f.buf + f.data_start);
    for (size_t i = 0; i < m.n_t; i++) {
        const struct gguf_tensor *t = gguf_find_tensor(&g, m.t[i].name);
        ck_assert_ptr_eq(t, &g.tensors[i]);
        ck_assert_ptr_eq(t->data, f.buf + f.t_start[i]);
        ck_assert_uint_eq(t->nbytes, f.t_end[i] - f.t_start[i]);
        ck_assert_uint_eq(t->type, m.t[i].type);
        ck_assert_uint_eq(t->n_dims, m.t[i].n_dims);
    }
    const struct gguf_tensor *t = gguf_find_tensor(&g, "blk.1.ffn_down.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->ne[0], 16);
    ck_assert_uint_eq(t->ne[1], 8);
    ck_assert_uint_eq(t->ne[2], 1);
    ck_assert_uint_eq(t->n_elems, 128);
    ck_assert_uint_eq(t->nbytes, 512);
    ck_assert_ptr_null(gguf_find_tensor(&g, "blk.2.ffn_down.weight"));

    uint32_t u;
    float x;
    int b = 7;
    struct gguf_str s;
    ck_assert_int_eq(gguf_get_u32(&g, "llama.block_count", &u), 0);
    ck_assert_uint_eq(u, 2);
    ck_assert_int_eq(gguf_get_u32(&g, "general.architecture", &u), -2);
    ck_assert_int_eq(gguf_get_u32(&g, "no.such.key", &u), -1);
    ck_assert_int_eq(gguf_get_str(&g, "general.architecture", &s), 0);
    ck_assert(gguf_str_eq(s, "llama"));
    ck_assert_int_eq(gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &x), 0);
    ck_assert(x == 1e-5f);
    ck_assert_int_eq(gguf_get_f32(&g, "llama.block_count", &x), -2);
    ck_assert_int_eq(gguf_get_bool(&g, "tokenizer.ggml.add_bos_token", &b), 0);
    ck_assert_int_eq(b, 0);

    const struct gguf_kv *kv = gguf_find_kv(&g, "tokenizer.ggml.tokens");
    ck_assert_ptr_nonnull(kv);
    ck_assert_uint_eq(kv->type, GGUF_TYPE_ARRAY);
    ck_assert_uint_eq(kv->arr_type, GGUF_TYPE_STRING);
    ck_assert_uint_eq(kv->arr_n, 20);
    const uint8_t *pp = kv->val;
    char buf[32];
    for (uint32_t i = 0; i < 20; i++)
        ck_assert(gguf_str_eq(gguf_next_str(&pp), fx_piece(i, buf)));
    kv = gguf_find_kv(&g, "tokenizer.ggml.scores");
    ck_assert(gguf_arr_f32(kv, 7) == fx_score(7));
    kv = gguf_find_kv(&g, "tokenizer.ggml.token_type");
    ck_assert_int_eq(gguf_arr_i32(kv, 4), 6);
    gguf_close(&g);
    ck_assert_ptr_null(g.kv);
    fx_file_free(&f);
    fx_model_free(&m);
}
END_TEST

START_TEST(test_integer_conversions)
{
    struct fx_params p;
    struct fx_model m;
    struct fx_file f;
    struct gguf_file g;
    uint32_t u;
    uint8_t v8 = 200, i64[8], u64[8];
    fx_default_params(&p);
    fx_model_init(&m, &p);
    fx_set_raw(&m, "t.u8", GGUF_TYPE_UINT8, &v8, 1);
    fx_set_raw(&m, "t.i8", GGUF_TYPE_INT8, &v8, 1); /* -56 */
    fx_put_u64(i64, (uint64_t)-5);
    fx_set_raw(&m, "t.i64", GGUF_TYPE_INT64, i64, 8);
    fx_put_u64(u64, 1ull << 32);
    fx_set_raw(&m, "t.u64big", GGUF_TYPE_UINT64, u64, 8);
    fx_put_u64(u64, 123456789);
    fx_set_raw(&m, "t.u64", GGUF_TYPE_UINT64, u64, 8);
    fx_set_i32(&m, "t.i32", 77);
    fx_build(&m, &f);
    ck_assert_int_eq(gguf_open(&g, f.buf, f.size, err, sizeof err), 0);
    ck_assert_int_eq(gguf_get_u32(&g, "t.u8", &u), 0);
    ck_assert_uint_eq(u, 200);
    ck_assert_int_eq(gguf_get_u32(&g, "t.i8", &u), -2);
    ck_assert_int_eq(gguf_get_u32(&g, "t.i64", &u), -2);
    ck_assert_int_eq(gguf_get_u32(&g, "t.u64big", &u), -2);
    ck_assert_int_eq(gguf_get_u32(&g, "t.u64", &u), 0);
    ck_assert_uint_eq(u, 123456789);
    ck_assert_int_eq(gguf_get_u32(&g, "t.i32", &u), 0);
    ck_assert_uint_eq(u, 77);
    gguf_close(&g);
    fx_file_free(&f);
    fx_model_free(&m);
}
END_TEST

START_TEST(test_version2_and_alignment)
{
    struct fx_params p;
    struct fx_file f;
    struct gguf_file g;
    fx_default_params(&p);
    p.version = 2;
    fx_build_default(&f, &p);
    ck_assert_int_eq(gguf_open(&g, f.buf, f.size, err, sizeof err), 0);
    ck_assert_uint_eq(g.version, 2);
    gguf_close(&g);
    fx_file_free(&f);

    static const uint32_t aligns[] = {1, 8, 64, 4096};
    for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        fx_default_params(&p);
        p.alignment = aligns[a];
        fx_build_default(&f, &p);
        ck_assert_msg(gguf_open(&g, f.buf, f.size, err, sizeof err) == 0, "align %u: %s", aligns[a],
                      err);
        ck_assert_uint_eq(g.alignment, aligns[a]);
        ck_assert_uint_eq((size_t)(g.data - f.buf) % aligns[a], 0);
        for (uint64_t i = 0; i < g.n_tensors; i++)
            ck_assert_uint_eq((size_t)(g.tensors[i].data - f.buf) % aligns[a], 0);
        gguf_close(&g);
        fx_file_free(&f);
    }
}
END_TEST

START_TEST(test_no_tensors)
{
    struct fx_params p;
    struct fx_model m;
    struct fx_file f;
    struct gguf_file g;
    fx_default_params(&p);
    fx_model_init(&m, &p);
    while (m.n_t)
        fx_del_tensor(&m, m.t[0].name);
    fx_build(&m, &f);
    ck_assert_int_eq(gguf_open(&g, f.buf, f.size, err, sizeof err), 0);
    ck_assert_uint_eq(g.n_tensors, 0);
    gguf_close(&g);
    /* header only, no kv either */
    uint8_t h[24] = "GGUF";
    fx_put_u32(h + 4, 3);
    ck_assert_int_eq(parse_copy(h, 24), 0);
    fx_file_free(&f);
    fx_model_free(&m);
}
END_TEST

START_TEST(test_truncation_boundaries)
{
    struct fx_file f;
    fx_build_default(&f, NULL);
    ck_assert_uint_gt(f.n_bounds, 40);
    for (size_t i = 0; i < f.n_bounds; i++) {
        size_t n = f.bounds[i];
        if (n == f.size)
            continue;
        ck_assert_msg(parse_copy(f.buf, n) == -1, "truncated at %zu of %zu parsed", n, f.size);
        ck_assert_msg(!strncmp(err, "gguf: ", 6), "bad message '%s'", err);
    }
    /* the messages say where */
    EXPECT_FAIL(f.buf, 10, "truncated in header at byte 8");
    EXPECT_FAIL(f.buf, f.kv_start[2] + 11, "n_kv 18 cannot fit"); /* counts checked first */
    EXPECT_FAIL(f.buf, f.kv_start[15] + 11, "truncated in kv 15 (key)");
    EXPECT_FAIL(f.buf, f.kv_type_at[15] + 2,
                "truncated in kv 15 'tokenizer.ggml.bos_token_id' (type)");
    EXPECT_FAIL(f.buf, f.kv_type_at[15] + 6, "(value)");
    EXPECT_FAIL(f.buf, f.ti_start[3] + 12, "truncated in tensor info 3 (name)");
    char want[64];
    snprintf(want, sizeof want, "(name) at byte %zu", f.ti_start[3] + 8);
    EXPECT_FAIL(f.buf, f.ti_start[3] + 12, want);
    EXPECT_FAIL(f.buf, f.ti_ndims_at[3] + 6, "(shape)");
    EXPECT_FAIL(f.buf, f.ti_offset_at[3] + 1, "(type, offset)");
    EXPECT_FAIL(f.buf, f.t_end[0], "lies outside the file");
    EXPECT_FAIL(f.buf, f.size - 1, "lies outside the file");
    fx_file_free(&f);
}
END_TEST

START_TEST(test_truncation_every_prefix)
{
    /* Every byte of the F32 file and of a Q8_0 one (the last tensor ends
     * the file, so no proper prefix is a valid file). */
    struct fx_params p;
    for (int v = 0; v < 2; v++) {
        struct fx_file f;
        if (v)
            fx_quant_params(&p, GGML_TYPE_Q8_0);
        else
            fx_default_params(&p);
        fx_build_default(&f, &p);
        ck_assert_int_eq(parse_copy(f.buf, f.size), 0);
        for (size_t n = 0; n < f.size; n++)
            ck_assert_msg(parse_copy(f.buf, n) == -1, "prefix %zu of %zu parsed", n, f.size);
        fx_file_free(&f);
    }
    ck_assert_int_eq(parse_copy(NULL, 0), -1);
}
END_TEST

START_TEST(test_bad_magic_and_versions)
{
    struct fx_file f;
    fx_build_default(&f, NULL);
    f.buf[0] = 'X';
    EXPECT_FAIL(f.buf, f.size, "bad magic");
    f.buf[0] = 'G';
    static const uint32_t bad[] = {0, 1, 4, 0xFFFFFFFFu, 0x03000000u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char want[64];
        fx_put_u32(f.buf + 4, bad[i]);
        snprintf(want, sizeof want, "unsupported GGUF version %u", bad[i]);
        EXPECT_FAIL(f.buf, f.size, want);
    }
    fx_file_free(&f);
}
END_TEST

START_TEST(test_hostile_counts)
{
    struct fx_file f;
    fx_build_default(&f, NULL);
    uint64_t orig_t, orig_kv;
    memcpy(&orig_t, f.buf + 8, 8);
    memcpy(&orig_kv, f.buf + 16, 8);
    static const uint64_t huge[] = {1ull << 63, UINT64_MAX, 1ull << 32, 1ull << 21};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        fx_put_u64(f.buf + 8, huge[i]);
        EXPECT_FAIL(f.buf, f.size, "n_tensors");
        EXPECT_FAIL(f.buf, f.size, "cannot fit");
        fx_put_u64(f.buf + 8, orig_t);
        fx_put_u64(f.buf + 16, huge[i]);
        EXPECT_FAIL(f.buf, f.size, "n_kv");
        fx_put_u64(f.buf + 16, orig_kv);
    }
    /* just over what the bytes could hold */
    fx_put_u64(f.buf + 8, (f.size - 24) / 33 + 1);
    EXPECT_FAIL(f.buf, f.size, "cannot fit");
    fx_put_u64(f.buf + 8, orig_t);
    fx_put_u64(f.buf + 16, (f.size - 24) / 13 + 1);
    EXPECT_FAIL(f.buf, f.size, "cannot fit");
    /* off by one: the counts are believed, so parsing runs off the rails */
    fx_put_u64(f.buf + 16, orig_kv + 1);
    ck_assert_int_eq(parse_copy(f.buf, f.size), -1);
    fx_put_u64(f.buf + 16, orig_kv);
    fx_put_u64(f.buf + 8, orig_t + 1);
    ck_assert_int_eq(parse_copy(f.buf, f.size), -1);
    fx_file_free(&f);
}
END_TEST

START_TEST(test_huge_strings)
{
    struct fx_params p;
    struct fx_model m;
    struct fx_file f;
    fx_default_params(&p);
    fx_model_init(&m, &p);
    fx_build(&m, &f);
    uint8_t *b = f.buf;
    static const uint64_t lens[] = {1ull << 63, UINT64_MAX, 65536, 1ull << 32};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t save[8];
        memcpy(save, b + f.kv_start[1], 8);
        fx_put_u64(b + f.kv_start[1], lens[i]);
        EXPECT_FAIL(b, f.size, "longer than the limit 65535");
        memcpy(b + f.kv_start[1], save, 8);
        memcpy(save, b + f.ti_start[2], 8);
        fx_put_u64(b + f.ti_start[2], lens[i]);
        EXPECT_FAIL(b, f.size, "tensor info 2 (name)");
        memcpy(b + f.ti_start[2], save, 8);
        /* general.name's value */
        size_t at = f.kv_type_at[kv_index(&m, "general.name")] + 4;
        memcpy(save, b + at, 8);
        fx_put_u64(b + at, lens[i]);
        EXPECT_FAIL(b, f.size, "general.name' (value)");
        memcpy(b + at, save, 8);
        /* the first vocabulary piece */
        at = f.kv_type_at[kv_index(&m, "tokenizer.ggml.tokens")] + 16;
        memcpy(save, b + at, 8);
        fx_put_u64(b + at, lens[i]);
        EXPECT_FAIL(b, f.size, "tokenizer.ggml.tokens' (array of 20 string)");
        memcpy(b + at, save, 8);
    }
    /* array counts */
    size_t at = f.kv_type_at[kv_index(&m, "tokenizer.ggml.scores")] + 8;
    fx_put_u64(b + at, 1ull << 62);
    EXPECT_FAIL(b, f.size, "cannot fit in the remaining");
    fx_put_u64(b + at, 20);
    at = f.kv_type_at[kv_index(&m, "tokenizer.ggml.tokens")] + 8;
    fx_put_u64(b + at, UINT64_MAX);
    EXPECT_FAIL(b, f.size, "cannot fit in the remaining");
    fx_put_u64(b + at, 20);
    /* empty key */
    fx_put_u64(b + f.kv_start[0], 0);
    EXPECT_FAIL(b, f.size, "kv 0 has an empty key");
    fx_file_free(&f);
    fx_model_free(&m);
}
END_TEST

START_TEST(test_value_types)
{
    struct fx_params p;
    struct fx_model m;
    struct fx_file f;
    fx_default_params(&p);
    fx_model_init(&m, &p);
    fx_build(&m, &f);
    size_t at = f.kv_type_at[kv_index(&m, "llama.block_count")];
    fx_put_u32(f.buf + at, 13);
    EXPECT_FAIL(f.buf, f.size, "kv 4 'llama.block_count' has unknown value type 13");
    fx_put_u32(f.buf + at, 0xFFFFFFFFu);
    EXPECT_FAIL(f.buf, f.size, "unknown value type 4294967295");
    fx_put_u32(f.buf + at, GGUF_TYPE_ARRAY); /* the u32 value then reads as a bad element type */
    ck_assert_int_eq(parse_copy(f.buf, f.size), -1);
    fx_put_u32(f.buf + at, GGUF_TYPE_UINT32);
    ck_assert_int_eq(parse_copy(f.buf, f.size), 0);
    /* bool must be 0 or 1 */
    at = f.kv_type_at[kv_index(&m, "tokenizer.ggml.add_bos_token")] + 4;
    f.buf[at] = 2;
    EXPECT_FAIL(f.buf, f.size, "bool value 2");
    fx_file_free(&f);

    /* nested array: array of (array of u32) */
    uint8_t nested[4 + 8 + 4 + 8 + 4];
    fx_put_u32(nested, GGUF_TYPE_ARRAY);
    fx_put_u64(nested + 4, 1);
    fx_put_u32(nested + 12, GGUF_TYPE_UINT32);
    fx_put_u64(nested + 16, 1);
    fx_put_u32(nested + 24, 5);
    fx_set_raw(&m, "test.nested", GGUF_TYPE_ARRAY, nested, sizeof nested);
    expect_model_fail(&m, "'test.nested' is a nested array");
    fx_del(&m, "test.nested");
    /* unknown element type */
    uint8_t arr[12];
    fx_put_u32(arr, 13);
    fx_put_u64(arr + 4, 0);
    fx_set_raw(&m, "test.arr", GGUF_TYPE_ARRAY, arr, sizeof arr);
    expect_model_fail(&m, "'test.arr' has unknown array element type 13");
    /* an empty array of a known type is fine */
    fx_put_u32(arr, GGUF_TYPE_FLOAT64);
    fx_set_raw(&m, "test.arr", GGUF_TYPE_ARRAY, arr, sizeof arr);
    fx_build(&m, &f);
    ck_assert_int_eq(parse_copy(f.buf, f.size), 0);
    fx_file_free(&f);
    fx_model_free(&m);
}
END_TEST

START_TEST(test_duplicates)
{
    struct fx_params p;
    struct fx_model m;
    fx_default_params(&p);
    fx_model_init(&m, &p);
    uint8_t v[4];
    fx_put_u32(v, 2);
    fx_add_raw(&m, "llama.block_count", GGUF_TYPE_UINT32, v, 4);
    expect_model_fail(&m, "duplicate key 'llama.block_count'");
    fx_model_free(&m);

    fx_model_init(&m, &p);
    uint64_t ne[2] = {8, 8};
    fx_add_tensor(&m, "blk.0.attn_q.weight", GGML_TYPE_F32, 2, ne);
    expect_model_fail(&m, "duplicate tensor 'blk.0.attn_q.weight'");
    fx_model_free(&m);
}
END_TEST

START_TEST(test_alignment_key)
{
    struct fx_params p;
    struct fx_model m;
    fx_default_params(&p);
    fx_model_init(&m, &p);
    uint8_t v[8];
    fx_put_u64(v, 32);
    fx_set_raw(&m, "general.alignment", GGUF_TYPE_UINT64, v, 8);
    expect_model_fail(&m, "general.alignment has type uint64, expected uint32");
    static const uint32_t bad[] = {0, 48, 3, 1u << 21, 0x80000000u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fx_set_u32(&m, "general.alignment", bad[i]);
        expect_model_fail(&m, "is not a power of two");
    }
    fx_model_free(&m);
}
END_TEST

START_TEST(test_tensor_info_damage)
{
    struct fx_params p;
    struct fx_model m;
    struct fx_file f;
    fx_default_params(&p);
    fx_model_init(&m, &p);
    fx_build(&m, &f);
    uint8_t *b = f.buf;
    uint8_t save[16];
    /* n_dims */
    static const uint32_t dims[] = {0, 5, 0xFFFFFFFFu};
    for (size_t i = 0; i < 3; i++) {
        fx_put_u32(b + f.ti_ndims_at[0], dims[i]);
        EXPECT_FAIL(b, f.size, "tensor 'token_embd.weight' has n_dims");
    }
    fx_put_u32(b + f.ti_ndims_at[0], 2);
    ck_assert_int_eq(parse_copy(b, f.size), 0);

    /* ne: zero, too large, product overflow */
    uint8_t *ne = b + f.ti_ndims_at[0] + 4;
    memcpy(save, ne, 16);
    fx_put_u64(ne + 8, 0);
    EXPECT_FAIL(b, f.size, "tensor 'token_embd.weight' ne[1] = 0 is out of range");
    fx_put_u64(ne + 8, 1ull << 40);
    EXPECT_FAIL(b, f.size, "ne[1] = 1099511627776 is out of range");
    fx_put_u64(ne + 8, UINT64_MAX);
    EXPECT_FAIL(b, f.size, "is out of range");
    fx_put_u64(ne, (1ull << 40) - 1);
    fx_put_u64(ne + 8, (1ull << 40) - 1);
    EXPECT_FAIL(b, f.size, "more than 2^53 elements");
    fx_put_u64(ne, 1ull << 27);
    fx_put_u64(ne + 8, 1ull << 26); /* 2^53 elements: allowed, but 2^55 bytes do not fit */
    EXPECT_FAIL(b, f.size, "lies outside the file");
    memcpy(ne, save, 16);

    /* tensor type */
    fx_put_u32(b + f.ti_type_at[1], 16); /* iq2_xxs */
    EXPECT_FAIL(b, f.size,
                "tensor 'output_norm.weight' has unsupported type iq2_xxs (16); nibble reads f32, "
                "f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, "
                "iq4_xs");
    fx_put_u32(b + f.ti_type_at[1], 4); /* q4_2: removed from ggml */
    EXPECT_FAIL(b, f.size, "has unsupported type unknown (4); nibble reads f32");
    fx_put_u32(b + f.ti_type_at[1], 0xFFFFFFFFu);
    EXPECT_FAIL(b, f.size, "has unsupported type unknown (4294967295)");
    fx_put_u32(b + f.ti_type_at[1], GGML_TYPE_Q6_K); /* ne[0] = 8 is not whole blocks */
    EXPECT_FAIL(b, f.size, "of type q6_K has ne[0] = 8, not a multiple of its block size 256");
    fx_put_u32(b + f.ti_type_at[1], GGML_TYPE_Q8_0); /* ne[0] = 8 is not whole blocks */
    EXPECT_FAIL(b, f.size, "not a multiple of its block size 32");
    fx_put_u32(b + f.ti_type_at[1], GGML_TYPE_F32);

    /* offsets */
    size_t last = f.n_t - 1;
    uint8_t *off = b + f.ti_offset_at[last];
    memcpy(save, off, 8);
    uint64_t o;
    memcpy(&o, save, 8);
    fx_put_u64(off, o + 4);
    EXPECT_FAIL(b, f.size, "is not a multiple of the alignment 32");
    fx_put_u64(off, o + 32);
    char want[160];
    snprintf(want, sizeof want, "tensor '%s' data [%zu, %zu) lies outside the file (size %zu)",
             m.t[last].name, f.t_start[last] + 32, f.t_end[last] + 32, f.size);
    EXPECT_FAIL(b, f.size, want);
    fx_put_u64(off, UINT64_MAX - 31); /* offset + nbytes wraps */
    EXPECT_FAIL(b, f.size, "lies outside the file");
    fx_put_u64(off, f.size & ~(size_t)31);
    EXPECT_FAIL(b, f.size, "lies outside the file");
    memcpy(off, save, 8);
    ck_assert_int_eq(parse_copy(b, f.size), 0);

    /* empty tensor name */
    fx_put_u64(b + f.ti_start[0], 0);
    EXPECT_FAIL(b, f.size, "tensor info 0 has an empty name");
    fx_file_free(&f);
    fx_model_free(&m);
}
END_TEST

START_TEST(test_type_sizes_and_names)
{
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_F32, 10), 40);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_F16, 10), 20);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_BF16, 10), 20);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q8_0, 64), 68);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q4_0, 64), 36);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q4_1, 64), 40);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q8_0, 33), 0);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_F32, UINT64_MAX), 0);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_F32, UINT64_MAX / 4), UINT64_MAX / 4 * 4);
    ck_assert_uint_eq(ggml_type_nbytes(4, 32), 0);
    ck_assert_uint_eq(ggml_type_nbytes(16, 256), 0); /* iq2_xxs: not read */
    /* block bytes as ggml's block structs (ggml-common.h) */
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q5_0, 64), 44);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q5_1, 64), 48);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_IQ4_NL, 64), 36);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q2_K, 512), 168);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q3_K, 512), 220);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q4_K, 512), 288);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q5_K, 512), 352);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q6_K, 512), 420);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_IQ4_XS, 512), 272);
    ck_assert_uint_eq(ggml_type_nbytes(GGML_TYPE_Q4_K, 32), 0);
    ck_assert_str_eq(ggml_type_name(GGML_TYPE_Q4_K), "q4_K");
    ck_assert_str_eq(ggml_type_name(GGML_TYPE_IQ4_XS), "iq4_xs");
    ck_assert_str_eq(ggml_type_name(16), "iq2_xxs");
    ck_assert_str_eq(ggml_type_name(GGML_TYPE_Q4_1), "q4_1");
    ck_assert_str_eq(ggml_type_name(GGML_TYPE_BF16), "bf16");
    ck_assert_str_eq(ggml_type_name(99), "unknown");
    ck_assert_str_eq(gguf_type_name(GGUF_TYPE_FLOAT64), "float64");
    ck_assert_str_eq(gguf_type_name(GGUF_TYPE_COUNT), "unknown");
}
END_TEST

/* Reference: the value of an f16 pattern by its definition, via ldexp. */
static float f16_ref(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

START_TEST(test_half_conversions)
{
    ck_assert(gguf_f16_to_f32(0x3C00) == 1.0f);
    ck_assert(gguf_f16_to_f32(0xC000) == -2.0f);
    ck_assert(gguf_f16_to_f32(0x7BFF) == 65504.0f);
    ck_assert(gguf_f16_to_f32(0x0001) == 0x1p-24f);
    ck_assert(gguf_f16_to_f32(0x0400) == 0x1p-14f);
    ck_assert(gguf_f16_to_f32(0x3555) == 0x1.554p-2f);
    ck_assert(signbit(gguf_f16_to_f32(0x8000)) && gguf_f16_to_f32(0x8000) == 0);
    ck_assert(isinf(gguf_f16_to_f32(0xFC00)) && gguf_f16_to_f32(0xFC00) < 0);
    ck_assert(isnan(gguf_f16_to_f32(0x7E00)));
    for (uint32_t h = 0; h < 65536; h++) {
        float a = gguf_f16_to_f32((uint16_t)h), r = f16_ref((uint16_t)h);
        if (isnan(r))
            ck_assert_msg(isnan(a), "f16 %04x", h);
        else
            ck_assert_msg(a == r && signbit(a) == signbit(r), "f16 %04x: %a vs %a", h, a, r);
    }
    ck_assert(gguf_bf16_to_f32(0x3F80) == 1.0f);
    ck_assert(gguf_bf16_to_f32(0xC040) == -3.0f);
    ck_assert(gguf_bf16_to_f32(0x0001) == 0x1p-133f);
    ck_assert(isinf(gguf_bf16_to_f32(0x7F80)));
}
END_TEST

/* ---- random mutation ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Touch everything a successful import hands out. */
static void walk_model(const struct llama_model *m)
{
    const struct llama_weight *ws[3 + 9 * NIB_MAX_LAYERS];
    size_t n = 0;
    ws[n++] = &m->tok_embd, ws[n++] = &m->output_norm, ws[n++] = &m->output;
    for (uint32_t l = 0; l < m->hp.n_layers; l++) {
        const struct llama_layer *L = &m->layers[l];
        ws[n++] = &L->attn_norm, ws[n++] = &L->wq, ws[n++] = &L->wk, ws[n++] = &L->wv,
        ws[n++] = &L->wo;
        ws[n++] = &L->ffn_norm, ws[n++] = &L->w_gate, ws[n++] = &L->w_up, ws[n++] = &L->w_down;
    }
    float *row = malloc(NIB_MAX_DIM * sizeof *row);
    for (size_t i = 0; i < n; i++)
        for (uint32_t r = 0; r < ws[i]->rows; r++)
            ck_assert_int_eq(llama_weight_row_f32(ws[i], r, row), 0);
    free(row);
    volatile unsigned sum = 0;
    for (uint32_t i = 0; i < m->tok.n_vocab; i++)
        for (uint32_t j = 0; j < m->tok.tokens[i].len; j++)
            sum += m->tok.tokens[i].bytes[j];
    (void)sum;
}

static void mutate(uint8_t *b, size_t size, size_t meta_end)
{
    int n = 1 + (int)(rnd() % 4);
    for (int k = 0; k < n; k++) {
        size_t lim = rnd() % 4 ? meta_end : size; /* mostly the metadata */
        size_t at = (size_t)(rnd() % lim);
        switch (rnd() % 4) {
        case 0: b[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: b[at] = (uint8_t)rnd(); break;
        case 2: b[at] = (uint8_t)(b[at] + 1); break;
        default: { /* an "interesting" 64-bit value */
            static const uint64_t v[] = {
                0, 1, 2, 31, 32, 33, 0x7FFFFFFF, 0xFFFFFFFF, 1ull << 32, 1ull << 63, UINT64_MAX};
            if (at + 8 <= size)
                fx_put_u64(b + at, v[rnd() % (sizeof v / sizeof v[0])]);
        }
        }
    }
}

START_TEST(test_random_mutation)
{
    struct fx_params p;
    struct fx_file files[3];
    fx_default_params(&p);
    fx_build_default(&files[0], &p);
    fx_quant_params(&p, GGML_TYPE_Q8_0);
    fx_build_default(&files[1], &p);
    fx_quant_params(&p, GGML_TYPE_Q4_0);
    p.version = 2;
    fx_build_default(&files[2], &p);
    int parsed = 0, imported = 0;
    for (int it = 0; it < 2000; it++) {
        const struct fx_file *f = &files[it % 3];
        uint8_t *b = fx_dup(f->buf, f->size);
        mutate(b, f->size, f->data_start);
        struct gguf_file g;
        if (gguf_open(&g, b, f->size, err, sizeof err) == 0) {
            struct llama_model m;
            parsed++;
            if (llama_import(&m, &g, err, sizeof err) == 0) {
                imported++;
                walk_model(&m);
                llama_model_free(&m);
            } else {
                ck_assert(err[0] != 0);
            }
            gguf_close(&g);
        } else {
            ck_assert(!strncmp(err, "gguf: ", 6));
        }
        free(b);
    }
    fprintf(stderr, "mutation: 2000 runs, %d parsed, %d imported\n", parsed, imported);
    ck_assert_int_gt(parsed, 0);
    ck_assert_int_lt(parsed, 2000);
    for (int i = 0; i < 3; i++)
        fx_file_free(&files[i]);
}
END_TEST

TU_SUITE("gguf", "reader", NULL, NULL, 120, test_valid_parse, test_integer_conversions,
         test_version2_and_alignment, test_no_tensors, test_truncation_boundaries,
         test_truncation_every_prefix, test_bad_magic_and_versions, test_hostile_counts,
         test_huge_strings, test_value_types, test_duplicates, test_alignment_key,
         test_tensor_info_damage, test_type_sizes_and_names, test_half_conversions,
         test_random_mutation)
