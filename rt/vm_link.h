/* The appliance's side of the VM region (docs/ring.md §19): its heartbeat,
 * the command mailbox and the watch on the multiplexer, run by the serving
 * thread at the end of every control pass (so between passes of the model
 * only, like every control message). No system call: the region is mapped
 * at boot. */
#ifndef NIB_RT_VM_LINK_H
#define NIB_RT_VM_LINK_H

#include <stdint.h>

#include "proto/vm_region.h"

struct nib_server;

struct nib_vm_link {
    struct nib_vmr_header *h; /* the region, mapped read-write */
    uint32_t n_rings;         /* as laid out at boot (kept here, never read back) */
    uint32_t last_seq;        /* the last command taken */
    uint64_t beat;            /* our heartbeat's private count */
    uint64_t beat_ns;         /* when we last beat */
    struct nib_vmr_watch mux; /* the multiplexer's heartbeat */
    int mux_gone;             /* its rings were dropped; waiting for it to beat again */
    uint64_t commands, malformed, mux_losses;
};

/* Bind the link to a region whose layout the appliance wrote (n_rings). */
void nib_vm_link_init(struct nib_vm_link *l, struct nib_vmr_header *h, uint32_t n_rings,
                      uint64_t now_ns);

/* One look at the region: beat, take and answer a command, watch the
 * multiplexer (stale: every ring attached over the region is dropped, as if
 * its host hung up). Returns the number of commands handled. */
int nib_vm_link_pass(struct nib_server *s);

#endif
