/* The multiplexer's relay (docs/ring.md §19): each local host's own ring
 * memfd on one side, the same-numbered ring of the VM region on the other.
 * To the local host the multiplexer is the appliance (it takes SUBMITTED
 * slots with the appliance's CAS, streams ids and text, posts DONE and
 * wakes futex sleepers); to the guest it is a host (it writes requests and
 * reads answers). What the guest writes is clamped before it is copied;
 * what the local host writes is copied as it is and checked by the guest's
 * serve loop. */
#ifndef NIB_CLI_VM_RELAY_H
#define NIB_CLI_VM_RELAY_H

#include <stdint.h>

#include "proto/shm_layout.h"

enum vm_fwd_state {
    VM_FWD_IDLE = 0,  /* nothing of ours in the region's slot */
    VM_FWD_RUNNING,   /* forwarded; the local slot is RUNNING under ticket */
    VM_FWD_ABANDONED, /* the local host changed its slot: cancelled, waiting for DONE */
};

struct vm_fwd {
    uint32_t state; /* enum vm_fwd_state */
    uint64_t ticket;
    uint32_t tokens_sent, text_sent;
};

struct vm_relay_ring {
    uint8_t *local;     /* the local host's ring memfd, mapped */
    uint8_t *remote;    /* the region's ring */
    uint32_t *done_seq; /* the appliance-side private count (struct nib_host_ring) */
    struct vm_fwd fwd[NIB_RING_SLOTS];
};

/* One relay pass over ring r with geometry g. shutdown: end everything
 * still forwarded with status SHUTDOWN. Returns how many slots moved. */
int vm_relay_pass(struct vm_relay_ring *r, const struct nib_shm_header *g, int shutdown);

/* The ring was detached or reattached: forget what was forwarded. */
void vm_relay_reset(struct vm_relay_ring *r);

#endif
