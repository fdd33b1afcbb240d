/* Allocation counters for the zero-allocation test. In a build made with
 *   -DNIB_COUNT_ALLOC=1 -Wl,--wrap=malloc,--wrap=calloc,... (tests/runtime)
 * every call to these functions from the appliance's code and from libc's
 * own callers (musl's stdio, pthread, ...) goes through a counter first.
 * musl's internal __libc_malloc/__mmap calls are not counted here; the
 * seccomp filter (boot/seccomp.c) covers the system-call side. */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "boot/boot.h"
#include "proto/private/sync.h"

const char *const boot_alloc_names[BOOT_ALLOC_KINDS] = {
    "malloc", "calloc", "realloc", "free", "aligned_alloc", "mmap", "munmap", "brk/sbrk",
};

#if NIB_COUNT_ALLOC
static uint64_t counts[BOOT_ALLOC_KINDS];

static void count(int k)
{
    nib_fetch_add_relaxed(&counts[k], 1); /* a statistic: orders nothing */
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
int __real_munmap(void *a, size_t n);
int __real_brk(void *a);
void *__real_sbrk(intptr_t n);

void *__wrap_malloc(size_t n)
{
    count(0);
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t s)
{
    count(1);
    return __real_calloc(n, s);
}
void *__wrap_realloc(void *p, size_t n)
{
    count(2);
    return __real_realloc(p, n);
}
void __wrap_free(void *p)
{
    count(3);
    __real_free(p);
}
void *__wrap_aligned_alloc(size_t a, size_t n)
{
    count(4);
    return __real_aligned_alloc(a, n);
}
int __wrap_posix_memalign(void **p, size_t a, size_t n)
{
    count(4);
    return __real_posix_memalign(p, a, n);
}
void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    count(5);
    return __real_mmap(a, n, prot, flags, fd, off);
}
int __wrap_munmap(void *a, size_t n)
{
    count(6);
    return __real_munmap(a, n);
}
int __wrap_brk(void *a)
{
    count(7);
    return __real_brk(a);
}
void *__wrap_sbrk(intptr_t n)
{
    count(7);
    return __real_sbrk(n);
}

int boot_alloc_counting(void)
{
    return 1;
}

void boot_alloc_read(uint64_t out[BOOT_ALLOC_KINDS])
{
    for (int k = 0; k < BOOT_ALLOC_KINDS; k++)
        out[k] = nib_load_relaxed(&counts[k]);
}
#else
int boot_alloc_counting(void)
{
    return 0;
}

void boot_alloc_read(uint64_t out[BOOT_ALLOC_KINDS])
{
    for (int k = 0; k < BOOT_ALLOC_KINDS; k++)
        out[k] = 0;
}
#endif
