#include "tools/measure/bench_stream.h"

#include <stdio.h>
#include <string.h>

/* 4 accumulators already cover one core's load ports; 8 and 16 give the
 * out-of-order core more independent misses; prefetch ahead of the
 * hardware prefetcher's own distance helps on some memory systems and
 * hurts on others. The sweep keeps whichever is fastest here. */
const struct stream_variant stream_variants[] = {
    {4, 0}, {8, 0}, {16, 0}, {8, 512}, {8, 2048}, {16, 1024}, {16, 4096},
};
const int n_stream_variants = sizeof stream_variants / sizeof stream_variants[0];

typedef uint64_t u64x4 __attribute__((vector_size(32)));

static u64x4 load32(const uint8_t *p)
{
    u64x4 x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* One loop per accumulator count, each accumulator a named variable: GCC
 * keeps those in registers (an array of them it keeps on the stack, which
 * adds a store per load). */
#define PF(pf, at)                                                                                 \
    do {                                                                                           \
        if (pf)                                                                                    \
            __builtin_prefetch((at) + (pf), 0, 3);                                                 \
    } while (0)
#define ACC(k) a##k += load32(p + i + 32 * (k))

static uint64_t fold4(const uint8_t *p, size_t n, int pf)
{
    u64x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (size_t i = 0; i + 128 <= n; i += 128) {
        PF(pf, p + i);
        PF(pf, p + i + 64);
        ACC(0), ACC(1), ACC(2), ACC(3);
    }
    a0 += a1 + a2 + a3;
    return a0[0] + a0[1] + a0[2] + a0[3];
}

static uint64_t fold8(const uint8_t *p, size_t n, int pf)
{
    u64x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    for (size_t i = 0; i + 256 <= n; i += 256) {
        for (int j = 0; j < 4; j++)
            PF(pf, p + i + 64 * j);
        ACC(0), ACC(1), ACC(2), ACC(3), ACC(4), ACC(5), ACC(6), ACC(7);
    }
    a0 += a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return a0[0] + a0[1] + a0[2] + a0[3];
}

static uint64_t fold16(const uint8_t *p, size_t n, int pf)
{
    u64x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    u64x4 a8 = {0}, a9 = {0}, a10 = {0}, a11 = {0}, a12 = {0}, a13 = {0}, a14 = {0}, a15 = {0};
    for (size_t i = 0; i + 512 <= n; i += 512) {
        for (int j = 0; j < 8; j++)
            PF(pf, p + i + 64 * j);
        ACC(0), ACC(1), ACC(2), ACC(3), ACC(4), ACC(5), ACC(6), ACC(7);
        ACC(8), ACC(9), ACC(10), ACC(11), ACC(12), ACC(13), ACC(14), ACC(15);
    }
    a0 += a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15;
    return a0[0] + a0[1] + a0[2] + a0[3];
}

uint64_t stream_fold(const uint8_t *p, size_t n, const struct stream_variant *v)
{
    switch (v->accumulators) {
    case 4: return fold4(p, n, v->prefetch);
    case 8: return fold8(p, n, v->prefetch);
    default: return fold16(p, n, v->prefetch);
    }
}

void stream_variant_name(const struct stream_variant *v, char *buf, size_t len)
{
    if (v->prefetch)
        snprintf(buf, len, "%d accumulators, prefetch %d B ahead", v->accumulators, v->prefetch);
    else
        snprintf(buf, len, "%d accumulators, no software prefetch", v->accumulators);
}

uint64_t pair_order_fold(const uint8_t *p, size_t n, size_t half, enum pair_order o,
                         size_t prefetch)
{
    u64x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    const size_t lines = half / 64;
    for (size_t c = 0; c + 2 * half <= n; c += 2 * half) {
        const uint8_t *q = p + c;
        for (size_t l = 0; l < lines; l++) {
            /* line l of each half, or lines 2l and 2l + 1 of the chunk */
            const uint8_t *x = q + 64 * l, *y = q + half + 64 * l;
            if (o == PAIR_IN_STREAM)
                x = q + 128 * l, y = x + 64;
            if (o == PAIR_TURNS_PF) {
                __builtin_prefetch(q + 128 * l + prefetch, 0, 3);
                __builtin_prefetch(q + 128 * l + 64 + prefetch, 0, 3);
            }
            a0 += load32(x), a1 += load32(x + 32), a2 += load32(y), a3 += load32(y + 32);
        }
    }
    a0 += a1 + a2 + a3;
    return a0[0] + a0[1] + a0[2] + a0[3];
}
