/* The synchronization primitives the project's own code shares: the clock,
 * the spin-wait hint and the atomics. Private (never installed, libc only):
 * the protocol's public headers describe the layout; how a side orders its
 * accesses is its own business.
 *
 * Every use site names the edge it synchronizes with, as
 * "release: pairs with the acquire in f()", so a reader can check each
 * pair without reading the whole protocol. The wrappers name their memory
 * order; a seq_cst pair is a store-then-load handshake against a sleeper
 * (the sleeper announces itself, then checks; the waker publishes, then
 * checks for sleepers), which acquire/release alone does not order. */
#ifndef NIB_PROTO_PRIVATE_SYNC_H
#define NIB_PROTO_PRIVATE_SYNC_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
static inline uint64_t nib_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One round of a spin wait: tells the core (and its SMT sibling) we wait. */
static inline void nib_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* GCC/Clang builtins, lock-free on every target nibble supports. */
#define nib_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define nib_load_acq(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define nib_load_seqcst(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define nib_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define nib_store_rel(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define nib_store_seqcst(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
/* Fetch-and-add: each returns the value before the add. */
#define nib_fetch_add_relaxed(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define nib_fetch_add_rel(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELEASE)
#define nib_fetch_add_acq_rel(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define nib_fetch_add_seqcst(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define nib_fetch_sub_seqcst(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_SEQ_CST)
/* Compare-and-swap: acq_rel on success, acquire on failure. */
#define nib_cas(p, expect, want)                                                                   \
    __atomic_compare_exchange_n((p), (expect), (want), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

#endif
