/* The serve loop's work: pick the next submitted request from the shared
 * segment, check it as hostile input, tokenize, run prefill and decode,
 * stream tokens and text back into the slot, and post the final status.
 * Memory is all caller-provided (the x_footprint / x_new pattern), so the
 * same code runs in the appliance, and in tests over a private segment. */
#ifndef NIB_SERVE_H
#define NIB_SERVE_H

#include <stdint.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "rt/shm_layout.h"

struct nib_server {
    const struct nib_blob_view *v;
    struct nib_exec exec;
    void *shm;                  /* NIB_SHM_SIZE bytes */
    struct nib_shm_header *hdr;
    struct nib_stats *stats;
    uint8_t *prompt;            /* private copy of the request's prompt */
    uint32_t *ids;              /* private token scratch */
    volatile int *stop_flag;    /* set by a signal handler; may be NULL */
};

/* Bytes of private scratch the server needs beside the runtime memory. */
uint64_t nib_server_scratch_footprint(void);

/* Lay out the segment header and slots (segment is zeroed, NIB_SHM_SIZE
 * bytes) and bind the server to its memory. mem: v->mem_size bytes;
 * scratch: nib_server_scratch_footprint() bytes, 64-byte aligned. */
void nib_server_init(struct nib_server *s, const struct nib_blob_view *v, void *mem,
                     void *scratch, void *shm, uint32_t pid, uint64_t epoch);

/* Serve the oldest submitted request, if any. Returns 1 if one was served,
 * 0 if there was nothing to do. */
int nib_server_poll(struct nib_server *s);

/* Hand back slots whose owning host has died (alive(pid) == 0). Returns how
 * many were reclaimed. Called between requests, never on the token path. */
int nib_server_reclaim(struct nib_server *s, int (*alive)(uint32_t pid));

/* CLOCK_MONOTONIC in ns (vDSO: no system call). */
uint64_t nib_now_ns(void);

#endif
