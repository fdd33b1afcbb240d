/* Small helpers shared by the Check suites. */
#ifndef NIB_TEST_UTIL_H
#define NIB_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Read a whole file into 64-byte-aligned memory (free with free()). Aborts
 * the test with a message when it cannot. */
uint8_t *tu_read_file(const char *path, size_t *size);

/* Run a Check suite and free it: EXIT_SUCCESS when every test passed. */
typedef struct Suite Suite;
int tu_run_suite(Suite *s);

/* Path from an environment variable set by meson; aborts when unset. */
const char *tu_env_path(const char *var);

/* The blob at $NIB_TEST_BLOB, read and validated into *v (the test fails
 * otherwise). Returns its memory: free() it after the last use of *v. */
struct nib_blob_view;
uint8_t *tu_open_test_blob(struct nib_blob_view *v);

/* Zeroed, 64-byte-aligned runtime memory (arena + KV cache) for v. */
uint8_t *tu_new_arena(const struct nib_blob_view *v);

#endif
