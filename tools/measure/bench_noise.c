#include "tools/measure/bench_noise.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "proto/private/sync.h"

#define MAX_GAPS 200000
#define MAX_CPUS 64
#define GAP_NS 2000

struct gap {
    uint64_t at, len; /* ns from the common start */
};

struct spinner {
    uint32_t cpu;
    uint64_t start, end;
    struct gap *gaps;
    uint32_t n;
    const volatile int *go;
};

static void *spin(void *p)
{
    struct spinner *s = p;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(s->cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    while (!*s->go)
        ;
    uint64_t prev = nib_now_ns();
    while (prev < s->end) {
        uint64_t t = nib_now_ns();
        if (t - prev > GAP_NS && s->n < MAX_GAPS)
            s->gaps[s->n++] = (struct gap){prev - s->start, t - prev};
        prev = t;
    }
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Longest stall of one CPU inside [w0, w1): gaps sorted by time. */
static uint64_t stall_in(const struct spinner *s, uint64_t w0, uint64_t w1)
{
    uint32_t lo = 0, hi = s->n;
    while (lo < hi) { /* first gap ending after w0 */
        uint32_t mid = (lo + hi) / 2;
        if (s->gaps[mid].at + s->gaps[mid].len <= w0)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t worst = 0;
    for (uint32_t i = lo; i < s->n && s->gaps[i].at < w1; i++) {
        uint64_t b = s->gaps[i].at > w0 ? s->gaps[i].at : w0;
        uint64_t e = s->gaps[i].at + s->gaps[i].len;
        uint64_t len = e - b;
        worst = len > worst ? len : worst;
    }
    return worst;
}

int nib_noise_measure(const uint32_t *cpus, uint32_t n, double seconds, uint64_t token_ns,
                      struct nib_noise *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0 || n > MAX_CPUS || seconds <= 0 || token_ns == 0)
        return -1;
    static struct spinner sp[MAX_CPUS];
    pthread_t tid[MAX_CPUS];
    volatile int go = 0;
    uint64_t span = (uint64_t)(seconds * 1e9), start = nib_now_ns() + 20000000ull;
    uint32_t started = 0;
    int rc = 0;
    for (uint32_t i = 0; i < n; i++) {
        sp[i] = (struct spinner){
            cpus[i], start, start + span, malloc(MAX_GAPS * sizeof(struct gap)), 0, &go};
        if (!sp[i].gaps || pthread_create(&tid[i], NULL, spin, &sp[i])) {
            rc = -1;
            break;
        }
        started++;
    }
    while (nib_now_ns() < start)
        ;
    go = 1;
    for (uint32_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    if (rc) {
        for (uint32_t i = 0; i < n; i++)
            free(sp[i].gaps);
        return -1;
    }
    out->seconds = seconds;
    uint64_t lost = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t g = 0; g < sp[i].n; g++) {
            uint64_t len = sp[i].gaps[g].len;
            lost += len;
            out->gaps_5us += len > 5000;
            out->gaps_20us += len > 20000;
            out->gaps_100us += len > 100000;
            if (len / 1e3 > out->max_gap_us)
                out->max_gap_us = len / 1e3;
        }
    out->gaps_5us = (uint64_t)(out->gaps_5us / seconds / n);
    out->gaps_20us = (uint64_t)(out->gaps_20us / seconds / n);
    out->gaps_100us = (uint64_t)(out->gaps_100us / seconds / n);
    out->lost_pct = 100.0 * (double)lost / ((double)span * n);
    /* Random windows of one token: a pass that needs every CPU waits for
     * the slowest, roughly the longest stall among them. */
    enum { WINDOWS = 20000 };
    double *r = malloc(WINDOWS * sizeof *r);
    if (r && span > token_ns) {
        uint64_t x = 0x9E3779B97F4A7C15ull;
        for (int w = 0; w < WINDOWS; w++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t w0 = x % (span - token_ns), worst = 0;
            for (uint32_t i = 0; i < n; i++) {
                uint64_t st = stall_in(&sp[i], w0, w0 + token_ns);
                worst = st > worst ? st : worst;
            }
            r[w] = (double)(token_ns + worst) / (double)token_ns;
        }
        qsort(r, WINDOWS, sizeof *r, cmp_d);
        out->floor_p99 = r[(int)(0.99 * WINDOWS) - 1] / r[WINDOWS / 2 - 1];
        out->floor_p999 = r[(int)(0.999 * WINDOWS) - 1] / r[WINDOWS / 2 - 1];
    }
    free(r);
    for (uint32_t i = 0; i < n; i++)
        free(sp[i].gaps);
    return 0;
}
