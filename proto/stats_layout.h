/* The statistics page of the header memfd: counters, latency histograms
 * and the boot report that the appliance writes (plain stores, one writer:
 * the serving thread) and hosts read (nib stats). Part of the header memfd
 * layout (proto/shm_layout.h); proto/stats.h records into it and turns the
 * histograms into percentiles, so hosts never decode buckets themselves.
 *
 * Latency histograms are log-linear (as HdrHistogram): each power-of-two
 * octave [2^e, 2^(e+1)) ns is split into 2^sub_bits equal buckets, so a
 * bucket is at most 2^-sub_bits of its value wide. Bucket 0 holds
 * everything below 2^min_exp, the last bucket everything at or above
 * 2^max_exp. Counts are u32 and saturate (they never wrap).
 *
 *   token:   32 per octave (width <= 3.2 %, percentile error about 1 %),
 *            4 us .. 2.1 s: one forward pass of the plan per token
 *            (prefill and decode), timed by the executor (rt/exec.c);
 *   request: 8 per octave, 16 us .. 4.6 min: submit to final status.
 */
#ifndef NIB_STATS_LAYOUT_H
#define NIB_STATS_LAYOUT_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#define NIB_STATS_VERSION 3u

#define NIB_TOKEN_HIST_MIN_EXP 12u
#define NIB_TOKEN_HIST_MAX_EXP 31u
#define NIB_TOKEN_HIST_SUB_BITS 5u
#define NIB_TOKEN_HIST_BUCKETS                                                                     \
    (2u + (NIB_TOKEN_HIST_MAX_EXP - NIB_TOKEN_HIST_MIN_EXP) * (1u << NIB_TOKEN_HIST_SUB_BITS))

#define NIB_REQUEST_HIST_MIN_EXP 14u
#define NIB_REQUEST_HIST_MAX_EXP 38u
#define NIB_REQUEST_HIST_SUB_BITS 3u
#define NIB_REQUEST_HIST_BUCKETS                                                                   \
    (2u + (NIB_REQUEST_HIST_MAX_EXP - NIB_REQUEST_HIST_MIN_EXP) * (1u << NIB_REQUEST_HIST_SUB_BITS))

/* boot_flags bits */
#define NIB_BOOT_MLOCKED 1u        /* mlockall succeeded */
#define NIB_BOOT_SECCOMP 2u        /* every thread runs under the filter */
#define NIB_BOOT_HUGETLB 4u        /* blob on reserved hugetlbfs pages */
#define NIB_BOOT_NUMA 8u           /* weight shards placed with libnuma */
#define NIB_BOOT_TOPO_OVERRIDE 16u /* booted on a machine unlike its table */
#define NIB_BOOT_PLACED 32u        /* the shard placement fields below are filled */

/* Shard placement (NIB_BOOT_PLACED): nodes and workers the page reports. */
#define NIB_STATS_NODES 4u
#define NIB_STATS_WORKER_NODES 32u

struct nib_stats {
    /* line 0: request and token counters */
    alignas(64) uint64_t requests_accepted;
    uint64_t requests_done;
    uint64_t requests_rejected; /* bad requests */
    uint64_t requests_cancelled;
    uint64_t slots_reclaimed; /* requests dropped because their host hung up */
    uint64_t tokens_prompt;
    uint64_t tokens_generated;
    uint64_t tokens_run; /* forward passes (prefill + decode) */
    /* line 1: maxima, layout, the executor */
    alignas(64) uint64_t request_ns_max;
    uint64_t barrier_sleeps;    /* barrier waits that fell back to FUTEX_WAIT */
    uint64_t token_pass_ns_max; /* largest sample of token_hist */
    uint64_t logits_digest;     /* CRC32C over every logit computed (--digest) */
    uint32_t version;           /* NIB_STATS_VERSION */
    uint32_t n_workers;
    uint32_t barriers_per_token;
    uint32_t boot_flags; /* NIB_BOOT_* */
    uint32_t numa_nodes;
    uint32_t placement_kib; /* page size shards were bound at: 4 or 2048 (NIB_BOOT_PLACED) */
    uint32_t reserved1[2];
    /* line 2: what boot got, read back from /proc/self/smaps */
    alignas(64) uint64_t blob_bytes;
    uint64_t blob_huge_bytes; /* AnonHugePages (or hugetlb) of the blob copy */
    uint64_t arena_bytes;     /* activations + KV cache + team */
    uint64_t arena_huge_bytes;
    uint64_t ref_iterations; /* reference-loop passes run for MEASURE requests */
    uint64_t shard_bytes;    /* bytes of the placement pages bound (they hold matmul shards) */
    uint64_t reserved2[2];
    /* line 3: hosts (protocol version 3) */
    alignas(64) uint64_t attaches;  /* ATTACHED replies sent */
    uint64_t attach_refused;        /* REFUSED replies (no ring, denied, stopping) */
    uint64_t host_hangups;          /* attached hosts whose connection closed */
    uint64_t requests_host_changed; /* the host changed its slot mid-request */
    uint64_t ctl_malformed;         /* connections closed for a malformed message */
    uint32_t hosts_attached;        /* now (also in the header) */
    uint32_t socket_lost;           /* 1: the socket path was removed or replaced */
    uint64_t reserved3[2];
    /* histograms (u32 counts, see above) */
    alignas(64) uint32_t token_hist[NIB_TOKEN_HIST_BUCKETS];
    alignas(64) uint32_t request_hist[NIB_REQUEST_HIST_BUCKETS];
    /* Shard placement, read back with move_pages at boot (NIB_BOOT_PLACED).
     * These took the struct's tail padding: its size did not change. */
    uint64_t node_shard_bytes[NIB_STATS_NODES]; /* shard bytes found on their worker's node */
    uint64_t shard_misplaced_bytes;             /* shard bytes found on another node */
    uint64_t worker_nodes[NIB_STATS_WORKER_NODES / 16]; /* worker i: bits 4i..4i+3 (15: >= 15) */
};

/* The size hosts check (stats_size): the placement fields must stay in the
 * padding after request_hist. */
_Static_assert(sizeof(struct nib_stats) == (offsetof(struct nib_stats, request_hist) +
                                            4u * NIB_REQUEST_HIST_BUCKETS + 63u) /
                                               64u * 64u,
               "the placement fields grew struct nib_stats");

/* Worker w's node from worker_nodes (w < NIB_STATS_WORKER_NODES). */
static inline uint32_t nib_stats_worker_node(const struct nib_stats *st, uint32_t w)
{
    return (uint32_t)(st->worker_nodes[w / 16] >> (4 * (w % 16))) & 15u;
}

#endif
