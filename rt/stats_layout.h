/* The statistics page of the shared segment: counters and latency
 * histograms the appliance updates (plain stores, single writer) and hosts
 * read (nib stats). Part of the segment layout (rt/shm_layout.h). */
#ifndef NIB_STATS_LAYOUT_H
#define NIB_STATS_LAYOUT_H

#include <stdalign.h>
#include <stdint.h>

#define NIB_HIST_BUCKETS 64 /* log2-spaced latency buckets, ns */

struct nib_stats {
    alignas(64) uint64_t requests_accepted;
    uint64_t requests_done;
    uint64_t requests_rejected;   /* bad requests */
    uint64_t requests_cancelled;
    uint64_t slots_reclaimed;     /* from dead hosts */
    uint64_t tokens_prompt;
    uint64_t tokens_generated;
    uint64_t reserved0;
    alignas(64) uint64_t token_ns_hist[NIB_HIST_BUCKETS];   /* per generated token */
    uint64_t request_ns_hist[NIB_HIST_BUCKETS]; /* per request, submit to done */
    uint64_t token_ns_max;
    uint64_t request_ns_max;
};

#endif
