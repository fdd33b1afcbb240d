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

/* One loop per accumulator count: the compiler keeps acc[] in registers
 * only when the count is a constant. */
#define FOLD(N)                                                                                    \
    static uint64_t fold##N(const uint8_t *p, size_t n, int pf)                                    \
    {                                                                                              \
        u64x4 acc[N];                                                                              \
        memset(acc, 0, sizeof acc);                                                                \
        for (size_t i = 0; i + 32 * N <= n; i += 32 * N) {                                         \
            if (pf)                                                                                \
                for (int j = 0; j < N; j += 2)                                                     \
                    __builtin_prefetch(p + i + (size_t)pf + 32 * (size_t)j, 0, 0);                 \
            for (int j = 0; j < N; j++)                                                            \
                acc[j] += load32(p + i + 32 * (size_t)j);                                          \
        }                                                                                          \
        for (int j = 1; j < N; j++)                                                                \
            acc[0] += acc[j];                                                                      \
        return acc[0][0] + acc[0][1] + acc[0][2] + acc[0][3];                                      \
    }
FOLD(4)
FOLD(8)
FOLD(16)

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
