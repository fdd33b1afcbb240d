#include "tests/common/test_util.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/tokenizer.h"

uint8_t *tu_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        abort();
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = aligned_alloc(64, ((size_t)n + 63) & ~(size_t)63);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        abort();
    }
    fclose(f);
    *size = (size_t)n;
    return p;
}

uint8_t *tu_open_test_blob(struct nib_blob_view *v)
{
    char err[256];
    size_t size;
    uint8_t *blob = tu_read_file(tu_env_path("NIB_TEST_BLOB"), &size);
    ck_assert_msg(nib_blob_open(v, blob, size, 1, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(nib_tok_check(v, err, sizeof err) == 0, "%s", err);
    return blob;
}

uint8_t *tu_new_arena(const struct nib_blob_view *v)
{
    uint64_t n = (v->mem_size + 63) & ~63ull;
    uint8_t *m = aligned_alloc(64, n);
    ck_assert_ptr_nonnull(m);
    memset(m, 0, n);
    return m;
}

const char *tu_env_path(const char *var)
{
    const char *p = getenv(var);
    if (!p || !*p) {
        fprintf(stderr, "%s is not set: run this test through meson test\n", var);
        abort();
    }
    return p;
}

int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

TCase *tu_add_case(Suite *s, const char *name, void (*setup)(void), void (*teardown)(void),
                   int timeout, const struct TTest *const *tests)
{
    TCase *tc = tcase_create(name);
    if (setup || teardown)
        tcase_add_checked_fixture(tc, setup, teardown);
    if (timeout)
        tcase_set_timeout(tc, timeout);
    for (; *tests; tests++)
        tcase_add_test(tc, *tests);
    suite_add_tcase(s, tc);
    return tc;
}

float tu_random_f32_bits(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t bits = (uint32_t)(*state >> 32);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
