/* Machine noise: how much time does this machine take away from a thread
 * that never sleeps? nib bench --latency measures it on the worker CPUs in
 * the same run, so a latency spread can be read against what the machine
 * itself imposes (interrupts, other processes, a hypervisor's steal). */
#ifndef NIB_BENCH_NOISE_H
#define NIB_BENCH_NOISE_H

#include <stdint.h>

struct nib_noise {
    double seconds;    /* spun per CPU */
    uint64_t gaps_5us; /* per second per CPU, gaps longer than 5 us */
    uint64_t gaps_20us;
    uint64_t gaps_100us;
    double lost_pct; /* share of time in gaps longer than 2 us */
    double max_gap_us;
    /* The floor the noise alone puts under p99/p50 (and p99.9/p50) for a
     * pass of token_ns that needs every CPU: over random windows of
     * token_ns, (token_ns + the longest stall any CPU had in it) / token_ns. */
    double floor_p99, floor_p999;
};

/* Spin on each of cpus[0..n) at once (pinned threads) for `seconds`,
 * recording every gap between two clock reads over 2 us. 0, or -1 when
 * the threads could not be started or out of memory. */
int nib_noise_measure(const uint32_t *cpus, uint32_t n, double seconds, uint64_t token_ns,
                      struct nib_noise *out);

#endif
