/* What the kernel checks (qcheck.c, convcheck.c) share: a seeded generator,
 * the first-failure message, and zeroed 64-byte-aligned test buffers. Kept
 * header-only so the NEON runner under qemu compiles it with either check. */
#ifndef NIB_TESTS_KERNELS_CHECK_UTIL_H
#define NIB_TESTS_KERNELS_CHECK_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t rnd(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint32_t rnd_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(rnd(s) % n);
}

static inline float rnd_unit(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(rnd(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* Counts a failure; the first one's message is kept in msg. */
static inline int fail(int *nfail, char *msg, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int fail(int *nfail, char *msg, size_t len, const char *fmt, ...)
{
    if ((*nfail)++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return *nfail;
}

/* Zeroed, 64-byte aligned; a test that cannot get memory aborts. */
static inline void *xalloc(size_t n)
{
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "kernel check: out of memory (%zu bytes)\n", n);
        abort();
    }
    memset(p, 0, n);
    return p;
}

#endif
