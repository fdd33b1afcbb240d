/* The serve loop's work: pick the next submitted request from the shared
 * segment, check it as hostile input, tokenize, run prefill and decode,
 * stream tokens and text back into the slot, and post the final status.
 * Memory is all caller-provided (the x_footprint / x_new pattern), so the
 * same code runs in the appliance, and in tests over a private segment.
 * docs/ring.md is the protocol this implements. */
#ifndef NIB_SERVE_H
#define NIB_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "proto/shm_layout.h"

/* What a request is checked against (from the blob and the layout). */
struct nib_req_limits {
    uint32_t prompt_max;
    uint32_t slot_tokens;
    uint32_t ctx_len;
    uint32_t vocab_size;
};

/* A request that passed every check. */
struct nib_req_decoded {
    uint32_t prompt_len;  /* bytes of prompt to copy (<= prompt_max) */
    uint32_t max_tokens;  /* 1..slot_tokens */
    float temperature;    /* 0..NIB_TEMPERATURE_MAX, not NaN */
    uint32_t flags;       /* known bits only */
    uint64_t seed;
    uint32_t n_ids;       /* NIB_REQ_PROMPT_IDS: ids copied to ids[] */
};

/* Decode and check a request that was copied out of shared memory: every
 * field against the limits, reserved bytes zero; with NIB_REQ_PROMPT_IDS,
 * prompt (prompt_avail bytes) holds the ids, each < vocab_size, copied to
 * ids (ids_cap >= prompt_max / 4). Pure: reads only its arguments. Returns
 * 0, or -1 with "field: why" in err (the field named as in docs/ring.md). */
int nib_req_decode(const struct nib_request *raw, const uint8_t *prompt, size_t prompt_avail,
                   const struct nib_req_limits *lim, struct nib_req_decoded *out, uint32_t *ids,
                   size_t ids_cap, char *err, size_t errlen);

struct nib_server {
    const struct nib_blob_view *v;
    struct nib_exec exec;
    void *shm;                  /* NIB_SHM_SIZE bytes */
    struct nib_shm_header *hdr;
    struct nib_stats *stats;
    uint8_t *prompt;            /* private copy of the request's prompt */
    uint32_t *ids;              /* private token scratch */
    void *tok_work;             /* the tokenizer's merge scratch */
    volatile int *stop_flag;    /* set by a signal handler; may be NULL */
    /* Is a host still running? nib_pid_alive unless a test replaces it. */
    int (*owner_alive)(uint32_t pid);
    uint64_t last_reclaim_ns;
    uint64_t last_beat_ns;
};

/* Bytes of private scratch the server needs beside the runtime memory. */
uint64_t nib_server_scratch_footprint(void);

/* Lay out the segment header and slots (segment is zeroed, NIB_SHM_SIZE
 * bytes) and bind the server to its memory. mem: v->mem_size bytes;
 * scratch: nib_server_scratch_footprint() bytes, 64-byte aligned. */
void nib_server_init(struct nib_server *s, const struct nib_blob_view *v, void *mem,
                     void *scratch, void *shm, uint32_t pid, uint64_t epoch);

/* Serve the oldest submitted request, if any. Returns 1 if one was served,
 * 0 if there was nothing to do. Also reclaims dead hosts' slots every
 * NIB_RECLAIM_NS, so a busy appliance still reclaims. */
int nib_server_poll(struct nib_server *s);

/* Hand back slots whose owning host has died (alive(pid) == 0). Returns how
 * many were reclaimed. Call it only between requests, from the thread that
 * calls nib_server_poll (a RUNNING slot then is a leftover too). */
int nib_server_reclaim(struct nib_server *s, int (*alive)(uint32_t pid));

/* kill(pid, 0): 1 while the process exists (EPERM counts as alive). */
int nib_pid_alive(uint32_t pid);

#endif
