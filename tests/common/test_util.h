/* Small helpers shared by the Check suites. */
#ifndef NIB_TEST_UTIL_H
#define NIB_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Read a whole file into 64-byte-aligned memory (free with free()). Aborts
 * the test with a message when it cannot. */
uint8_t *tu_read_file(const char *path, size_t *size);

/* A float of random bits (NaNs and infinities included): the next step of a
 * 64-bit LCG on *state, its high 32 bits taken as the float's. */
float tu_random_f32_bits(uint64_t *state);

/* Every Check suite defines this; tests/common/test_main.c, linked into
 * each, is the one main() that runs it. */
typedef struct Suite Suite;
Suite *nib_test_suite(void);

/* Run a Check suite and free it: EXIT_SUCCESS when every test passed. */
int tu_run_suite(Suite *s);

/* Add a test case NAME to s with the tests listed (START_TEST names), run
 * between setup and teardown when given (a checked fixture), with a timeout
 * in seconds (0: Check's default). Returns the case, for more. */
typedef struct TCase TCase;
struct TTest;
TCase *tu_add_case(Suite *s, const char *name, void (*setup)(void), void (*teardown)(void),
                   int timeout, const struct TTest *const *tests);
#define TU_CASE(s, name, setup, teardown, timeout, ...)                                            \
    tu_add_case(s, name, setup, teardown, timeout, (const struct TTest *const[]){__VA_ARGS__, NULL})

/* nib_test_suite() for a suite of one case: TU_SUITE("suite", "case", setup,
 * teardown, timeout, tests...). */
#define TU_SUITE(name, case_name, setup, teardown, timeout, ...)                                   \
    Suite *nib_test_suite(void)                                                                    \
    {                                                                                              \
        Suite *s = suite_create(name);                                                             \
        TU_CASE(s, case_name, setup, teardown, timeout, __VA_ARGS__);                              \
        return s;                                                                                  \
    }

/* Path from an environment variable set by meson; aborts when unset. */
const char *tu_env_path(const char *var);

/* The blob at $NIB_TEST_BLOB, read and validated into *v (the test fails
 * otherwise). Returns its memory: free() it after the last use of *v. */
struct nib_blob_view;
uint8_t *tu_open_test_blob(struct nib_blob_view *v);

/* Zeroed, 64-byte-aligned runtime memory (arena + KV cache) for v. */
uint8_t *tu_new_arena(const struct nib_blob_view *v);

#endif
