/* The shared-memory segment between the appliance and its hosts. This header
 * is the single definition of the layout; docs/ring.md explains it for hosts
 * written in other languages (tools/host/nibhost.py is one). Every field is
 * little-endian, naturally aligned, at a fixed offset (static assertions
 * below); bump NIB_SHM_VERSION on any change a host could notice.
 *
 * Segment = header | stats page | n_slots request slots.
 *
 * A request lives in a slot. Ownership moves by the slot's state word, which
 * is only changed with release stores / CAS and read with acquire loads:
 *
 *   FREE --host, holding the claim lock--> CLAIMED --host writes the request,
 *   takes a ticket, release--> SUBMITTED --appliance CAS--> RUNNING
 *   --appliance streams tokens and text, release--> DONE --host reads the
 *   result, release--> FREE
 *
 * Claiming a FREE slot is the only step where hosts compete. It is done while
 * holding an exclusive record lock on byte 0 of the segment file (fcntl), not
 * with a CAS, so that a host needs nothing but loads, stores and a file lock
 * (a Python host with mmap/struct/fcntl can do it) and so that a host that
 * dies holding the lock releases it (the kernel drops record locks of dead
 * processes). The claimer writes owner_pid before it publishes CLAIMED, so
 * the appliance never sees a CLAIMED slot with someone else's pid.
 *
 * The appliance serves SUBMITTED slots in ticket order (FIFO). A host that
 * dies leaves its pid in the slot; the appliance reclaims the slot (between
 * requests, and during a generation every NIB_OWNER_CHECK_NS). A full table
 * (no FREE slot) is back-pressure: the host is told "busy" and retries.
 * Output streams into the slot itself (tokens and text, each published by a
 * release store of its count), so a slow or dead host never blocks another
 * host's results. The appliance reads nothing back from a slot but the
 * state, owner, ticket, cancel flag and request, and checks all of it.
 */
#ifndef NIB_SHM_LAYOUT_H
#define NIB_SHM_LAYOUT_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stats_layout.h"

#define NIB_SHM_MAGIC 0x314D48534C42494Eull /* "NIBLSHM1" */
#define NIB_SHM_VERSION 2u
#define NIB_SHM_DEFAULT_NAME "nib"
#define NIB_SHM_NAME_MAX 64
#define NIB_CACHELINE 64

#define NIB_SLOTS 16
#define NIB_PROMPT_MAX 8192     /* prompt bytes */
#define NIB_SLOT_TOKENS 4096    /* prompt + generated token ids */
#define NIB_SLOT_TEXT 32768     /* generated text bytes */
#define NIB_ERRMSG_MAX 128
#define NIB_TEMPERATURE_MAX 100.0f

/* Byte of the segment file that hosts lock (F_WRLCK, length 1) to claim. */
#define NIB_CLAIM_LOCK_OFFSET 0
/* The appliance checks that a running request's owner is alive every
 * NIB_OWNER_CHECK_TOKENS tokens or NIB_OWNER_CHECK_NS, whichever comes first
 * (one kill(pid, 0), never per token). */
#define NIB_OWNER_CHECK_TOKENS 64u
#define NIB_OWNER_CHECK_NS 20000000ull
/* ... and reclaims slots of dead hosts at least this often. */
#define NIB_RECLAIM_NS 100000000ull
/* heartbeat_ns is refreshed at least this often while the appliance runs
 * (except during a single token that takes longer). */
#define NIB_HEARTBEAT_NS 100000000ull

/* Appliance state (header.state). */
enum nib_app_state {
    NIB_APP_BOOTING = 0,
    NIB_APP_READY = 1,
    NIB_APP_STOPPING = 2,
    NIB_APP_STOPPED = 3,
};

/* Slot state (slot.state). */
enum nib_slot_state {
    NIB_SLOT_FREE = 0,
    NIB_SLOT_CLAIMED = 1,   /* a host is writing the request */
    NIB_SLOT_SUBMITTED = 2, /* waiting for the appliance */
    NIB_SLOT_RUNNING = 3,   /* the appliance is generating */
    NIB_SLOT_DONE = 4,      /* final status written; host reads then frees */
};

/* Final status of a request (slot.status, valid once DONE). */
enum nib_status {
    NIB_ST_PENDING = 0,
    NIB_ST_OK = 1,           /* reached max_tokens */
    NIB_ST_EOS = 2,          /* the model produced end-of-sequence */
    NIB_ST_CANCELLED = 3,
    NIB_ST_CTX_FULL = 4,     /* ran out of context positions */
    NIB_ST_TEXT_FULL = 5,    /* output text buffer full */
    NIB_ST_BAD_REQUEST = 6,  /* error names the field */
    NIB_ST_SHUTDOWN = 7,     /* the appliance stopped before finishing */
    NIB_ST_OWNER_GONE = 8,   /* the owner died; the slot went straight to FREE */
    NIB_ST_COUNT
};

/* Request flags. */
#define NIB_REQ_NO_BOS 1u     /* do not prepend BOS even if the model wants it */
#define NIB_REQ_PROMPT_IDS 2u /* prompt[] holds prompt_len/4 u32 token ids, used as is */
#define NIB_REQ_FLAGS_KNOWN (NIB_REQ_NO_BOS | NIB_REQ_PROMPT_IDS)

struct nib_request {
    uint32_t prompt_len;   /* bytes in prompt[] */
    uint32_t max_tokens;   /* tokens to generate, 1..slot_tokens */
    float temperature;     /* 0: greedy; else 0..NIB_TEMPERATURE_MAX */
    uint32_t flags;        /* NIB_REQ_* */
    uint64_t seed;         /* sampling seed */
    uint8_t reserved[40];  /* must be zero */
};

struct nib_shm_header {
    /* line 0: written once before READY, then read-only */
    alignas(NIB_CACHELINE) uint64_t magic;
    uint32_t version;
    uint32_t header_size;
    uint64_t segment_size;
    uint64_t epoch;          /* differs at every boot (CLOCK_REALTIME ns) */
    uint32_t n_slots;
    uint32_t slot_size;
    uint64_t slots_offset;
    uint64_t stats_offset;
    uint32_t appliance_pid;
    uint32_t vocab_size;
    /* line 1: limits a host needs to build valid requests */
    alignas(NIB_CACHELINE) uint32_t prompt_max;
    uint32_t slot_tokens;
    uint32_t slot_text;
    uint32_t ctx_len;
    uint32_t bos_id;
    uint32_t eos_id;
    uint32_t add_bos;        /* the model prepends BOS unless NIB_REQ_NO_BOS */
    uint32_t errmsg_max;
    uint32_t stats_size;     /* bytes of struct nib_stats */
    uint32_t reserved1[7];
    /* line 2: appliance-written, changes while serving */
    alignas(NIB_CACHELINE) uint32_t state;      /* enum nib_app_state */
    uint32_t done_seq;       /* futex word: +1 after every DONE */
    uint64_t heartbeat_ns;   /* CLOCK_MONOTONIC of the appliance */
    /* line 3: host-written */
    alignas(NIB_CACHELINE) uint32_t doorbell;   /* futex word: hosts bump it after submitting */
    uint32_t stop_requested;
    uint64_t next_ticket;    /* taken under the claim lock */
    uint32_t done_waiters;   /* hosts sleeping on done_seq (a hint) */
};

struct nib_slot {
    /* line 0: ownership */
    alignas(NIB_CACHELINE) uint32_t state;      /* enum nib_slot_state */
    uint32_t owner_pid;     /* host that claimed it */
    uint64_t ticket;        /* FIFO order among SUBMITTED slots */
    uint32_t cancel;        /* host sets 1 to stop the generation */
    uint32_t reserved0;
    uint64_t request_id;    /* host's own id, never read by the appliance */
    /* line 1: request, host-written while CLAIMED */
    alignas(NIB_CACHELINE) struct nib_request req;
    /* line 2: response, appliance-written */
    alignas(NIB_CACHELINE) uint32_t n_tokens;   /* ids published in tokens[] (release) */
    uint32_t n_prompt;      /* leading ids of tokens[] that are the prompt */
    uint32_t text_len;      /* bytes published in text[] (release) */
    uint32_t status;        /* enum nib_status, valid once DONE */
    uint64_t t_start_ns;    /* appliance picked it up */
    uint64_t t_first_ns;    /* first generated token */
    uint64_t t_done_ns;
    uint64_t reserved2;
    char error[NIB_ERRMSG_MAX]; /* for BAD_REQUEST: "field: why", NUL-terminated */
    alignas(NIB_CACHELINE) uint8_t prompt[NIB_PROMPT_MAX];
    alignas(NIB_CACHELINE) uint32_t tokens[NIB_SLOT_TOKENS];
    alignas(NIB_CACHELINE) uint8_t text[NIB_SLOT_TEXT];
};

_Static_assert(sizeof(struct nib_request) == 64, "request layout");
_Static_assert(offsetof(struct nib_request, seed) == 16, "request seed");
_Static_assert(offsetof(struct nib_shm_header, epoch) == 24, "header epoch");
_Static_assert(offsetof(struct nib_shm_header, appliance_pid) == 56, "header pid");
_Static_assert(offsetof(struct nib_shm_header, prompt_max) == 64, "header line 1");
_Static_assert(offsetof(struct nib_shm_header, stats_size) == 96, "header stats size");
_Static_assert(offsetof(struct nib_shm_header, state) == 128, "header line 2");
_Static_assert(offsetof(struct nib_shm_header, heartbeat_ns) == 136, "header heartbeat");
_Static_assert(offsetof(struct nib_shm_header, doorbell) == 192, "header line 3");
_Static_assert(offsetof(struct nib_shm_header, next_ticket) == 200, "header ticket");
_Static_assert(offsetof(struct nib_shm_header, done_waiters) == 208, "header waiters");
_Static_assert(sizeof(struct nib_shm_header) == 256, "header size");
_Static_assert(offsetof(struct nib_slot, ticket) == 8, "slot ticket");
_Static_assert(offsetof(struct nib_slot, cancel) == 16, "slot cancel");
_Static_assert(offsetof(struct nib_slot, request_id) == 24, "slot request id");
_Static_assert(offsetof(struct nib_slot, req) == 64, "slot request");
_Static_assert(offsetof(struct nib_slot, n_tokens) == 128, "slot response");
_Static_assert(offsetof(struct nib_slot, t_start_ns) == 144, "slot times");
_Static_assert(offsetof(struct nib_slot, error) == 176, "slot error");
_Static_assert(offsetof(struct nib_slot, prompt) == 320, "slot prompt");
_Static_assert(offsetof(struct nib_slot, tokens) == 320 + NIB_PROMPT_MAX, "slot tokens");
_Static_assert(offsetof(struct nib_slot, text) == 320 + NIB_PROMPT_MAX + 4 * NIB_SLOT_TOKENS,
               "slot text");
_Static_assert(sizeof(struct nib_slot) == 320 + NIB_PROMPT_MAX + 4 * NIB_SLOT_TOKENS + NIB_SLOT_TEXT,
               "slot size");
_Static_assert(sizeof(struct nib_slot) % NIB_CACHELINE == 0, "slot size");

#define NIB_SHM_STATS_OFFSET 256u
#define NIB_SHM_SLOTS_OFFSET 4096u
_Static_assert(NIB_SHM_STATS_OFFSET + sizeof(struct nib_stats) <= NIB_SHM_SLOTS_OFFSET,
               "stats page fits before the slots");
#define NIB_SHM_SIZE (NIB_SHM_SLOTS_OFFSET + (uint64_t)NIB_SLOTS * sizeof(struct nib_slot))

static inline struct nib_slot *nib_shm_slot(void *base, uint32_t i)
{
    return (struct nib_slot *)(void *)((uint8_t *)base + NIB_SHM_SLOTS_OFFSET +
                                       (uint64_t)i * sizeof(struct nib_slot));
}

#endif
