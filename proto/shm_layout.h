/* Shared memory between the appliance and its hosts, protocol version 4.
 * This header is the single definition of the layout; docs/ring.md
 * specifies the protocol and its threat model for hosts written in any
 * language (tools/host/nibhost.py is one). Every field is little-endian,
 * naturally aligned, at a fixed offset (static assertions below); bump
 * NIB_SHM_VERSION on any change a host could notice.
 *
 * A host attaches over the appliance's Unix socket (proto/ctl.h) and
 * receives two memory file descriptors, both made at boot:
 *
 *   header memfd  struct nib_shm_header | struct nib_stats      READ-ONLY
 *                 sealed F_SEAL_FUTURE_WRITE | SHRINK | GROW | SEAL after the
 *                 appliance mapped it writable: no host can write, truncate
 *                 or grow it, whatever descriptor it opens.
 *   ring memfd    struct nib_ring_header | n_slots request slots   this host's own
 *                 sealed F_SEAL_SHRINK | GROW | SEAL: the host maps it
 *                 read-write, but can never change its size.
 *
 * Each host has its own ring: nothing a host writes can reach another
 * host's requests, answers or place in line. Slot sizes come from the blob
 * (the header's geometry fields), not from constants: a host must read them.
 *
 * A slot moves through these states (state word: release stores and CAS,
 * read with acquire loads):
 *
 *   FREE --host--> CLAIMED --host writes the request, takes the next ticket of
 *   its ring, release--> SUBMITTED --appliance CAS--> RUNNING --appliance
 *   streams tokens and text, release--> DONE --host reads, release--> FREE
 *
 * The appliance keeps its own record of every request it runs (ring, slot,
 * ticket, start time) and writes into a slot only while that slot is still
 * RUNNING under the same ticket; a host that changes its slot mid-request
 * gets NIB_ST_HOST_CHANGED (when the slot can still take it) and nothing
 * else. It reads from a ring only the state, ticket, cancel flag and the
 * request, and checks all of it as hostile input.
 */
#ifndef NIB_SHM_LAYOUT_H
#define NIB_SHM_LAYOUT_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/stats_layout.h"

/* The magics name the memfd family (unchanged since version 3, so that a
 * host of another version reads `version` and says which it speaks). */
#define NIB_SHM_MAGIC 0x334D48534C42494Eull  /* "NIBLSHM3": header memfd */
#define NIB_RING_MAGIC 0x33474E524C42494Eull /* "NIBLRNG3": ring memfd */
#define NIB_SHM_VERSION 4u
#define NIB_SHM_DEFAULT_NAME "nib"
#define NIB_SHM_NAME_MAX 64
#define NIB_CACHELINE 64

#define NIB_HOSTS_DEFAULT 8 /* rings made at boot (appliance --max-hosts) */
#define NIB_HOSTS_MAX 64
#define NIB_RING_SLOTS 4 /* requests one host may have outstanding */
#define NIB_ERRMSG_MAX 128
#define NIB_TEMPERATURE_MAX 100.0f

/* Geometry bounds: the appliance sizes slots from the blob within these. */
#define NIB_PROMPT_MIN 65536u       /* prompt bytes at least ... */
#define NIB_PROMPT_PER_CTX 16u      /* ... or 16 bytes per context position */
#define NIB_PROMPT_LIMIT (1u << 20) /* never more than 1 MiB */
#define NIB_TEXT_MIN 32768u
#define NIB_TEXT_LIMIT (4u << 20)
/* A vision model (kind TENSOR, docs/ring.md section 6.4): the prompt area
 * holds its input tensors and the text area its output tensors, each area
 * at most this large; fewer slots per ring, since each holds megabytes. */
#define NIB_TENSOR_AREA_LIMIT (256u << 20)
#define NIB_RING_SLOTS_TENSOR 2u

/* The appliance checks between passes of the model, at least every
 * NIB_CONTROL_CHECK_TOKENS tokens or NIB_CONTROL_CHECK_NS (one poll() on its
 * sockets: never a system call per token), for new hosts, messages and
 * hang-ups. */
#define NIB_CONTROL_CHECK_TOKENS 64u
#define NIB_CONTROL_CHECK_NS 20000000ull
/* heartbeat_ns is refreshed at least this often while the appliance runs
 * (except during a single pass that takes longer). */
#define NIB_HEARTBEAT_NS 100000000ull
/* Hosts call an appliance whose heartbeat is older than this unresponsive. */
#define NIB_HEARTBEAT_STALE_NS 3000000000ull
/* An idle appliance sleeps in poll() at most this long. */
#define NIB_IDLE_SLEEP_MS 100

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
    NIB_SLOT_CLAIMED = 1,   /* the host is writing the request */
    NIB_SLOT_SUBMITTED = 2, /* waiting for the appliance */
    NIB_SLOT_RUNNING = 3,   /* the appliance is generating */
    NIB_SLOT_DONE = 4,      /* final status written; host reads then frees */
};

/* Final status of a request (slot.status, valid once DONE). */
enum nib_status {
    NIB_ST_PENDING = 0,
    NIB_ST_OK = 1,  /* reached max_tokens */
    NIB_ST_EOS = 2, /* the model produced end-of-sequence */
    NIB_ST_CANCELLED = 3,
    NIB_ST_CTX_FULL = 4,     /* ran out of context positions */
    NIB_ST_TEXT_FULL = 5,    /* output text area full */
    NIB_ST_BAD_REQUEST = 6,  /* error names the field */
    NIB_ST_SHUTDOWN = 7,     /* the appliance stopped before finishing */
    NIB_ST_OWNER_GONE = 8,   /* the host hung up; nobody reads this */
    NIB_ST_HOST_CHANGED = 9, /* the host changed its slot while the request ran */
    NIB_ST_COUNT
};

/* Request kinds (request.kind). TEXT and CHAT exist in version 4, MEASURE
 * and TENSOR where the header's features say so (a decoder serves the
 * first three, a vision model only TENSOR). */
enum nib_req_kind {
    NIB_REQ_KIND_TEXT = 0,    /* prompt bytes or token ids -> tokens and text */
    NIB_REQ_KIND_CHAT = 1,    /* messages (proto/chat_msg.h) rendered by the model's template */
    NIB_REQ_KIND_MEASURE = 2, /* reference-loop passes -> their times (NIB_FEAT_MEASURE) */
    NIB_REQ_KIND_TENSOR = 3,  /* input tensors -> output tensors (NIB_FEAT_TENSOR) */
};

/* Request flags. */
#define NIB_REQ_NO_BOS 1u     /* do not prepend BOS even if the model wants it */
#define NIB_REQ_PROMPT_IDS 2u /* the prompt area holds prompt_len/4 u32 token ids, used as is */
#define NIB_REQ_SPECIAL 4u    /* control tokens written as text (<|im_end|>) map to their ids */
#define NIB_REQ_FLAGS_KNOWN (NIB_REQ_NO_BOS | NIB_REQ_PROMPT_IDS | NIB_REQ_SPECIAL)

/* What the served model offers (header.features). */
#define NIB_FEAT_CHAT 1u    /* it has a chat template: kind CHAT is served */
#define NIB_FEAT_MEASURE 2u /* kind MEASURE is served (docs/ring.md section 6.3) */
#define NIB_FEAT_TENSOR 4u  /* a vision model: kind TENSOR only, the tensor table (6.4) */

struct nib_request {
    uint32_t prompt_len;  /* bytes in the slot's prompt area */
    uint32_t max_tokens;  /* tokens to generate, 1..slot_tokens */
    float temperature;    /* 0: greedy; else 0..NIB_TEMPERATURE_MAX */
    uint32_t flags;       /* NIB_REQ_* */
    uint64_t seed;        /* sampling seed */
    uint32_t kind;        /* enum nib_req_kind */
    uint8_t reserved[36]; /* must be zero */
};

/* Header memfd, page 0 (appliance-written; hosts map it read-only). */
struct nib_shm_header {
    /* line 0: identity, written once before READY */
    alignas(NIB_CACHELINE) uint64_t magic;
    uint32_t version;
    uint32_t header_size; /* sizeof(struct nib_shm_header) */
    uint64_t header_memfd_size;
    uint64_t epoch;        /* differs at every boot (CLOCK_REALTIME ns) */
    uint64_t stats_offset; /* of struct nib_stats in the header memfd */
    uint32_t stats_size;
    uint32_t appliance_pid; /* informational: liveness comes from the socket */
    uint32_t max_hosts;
    uint32_t vocab_size;
    /* line 1: the model's limits */
    alignas(NIB_CACHELINE) uint32_t ctx_len;
    uint32_t bos_id;
    uint32_t eos_id;
    uint32_t add_bos; /* the model prepends BOS unless NIB_REQ_NO_BOS */
    uint32_t errmsg_max;
    uint32_t features; /* NIB_FEAT_* */
    /* NIB_FEAT_TENSOR: the tensor table (struct nib_shm_tensor) at
     * tensors_offset in the header memfd, n_inputs records then n_outputs;
     * all 0 for a decoder */
    uint32_t tensors_offset;
    uint32_t n_inputs;
    uint32_t n_outputs;
    uint32_t inputs_len;  /* exact bytes of a TENSOR request's prompt area */
    uint32_t outputs_len; /* exact bytes of its answer in the text area */
    uint32_t reserved1[5];
    /* line 2: ring geometry (the same for every host's ring) */
    alignas(NIB_CACHELINE) uint64_t ring_size; /* bytes of each ring memfd */
    uint32_t ring_header_size;                 /* sizeof(struct nib_ring_header) */
    uint32_t n_slots;                          /* slots per ring (NIB_RING_SLOTS) */
    uint64_t slots_offset;                     /* of slot 0 in the ring */
    uint64_t slot_size;     /* bytes from one slot to the next (64-byte multiple) */
    uint32_t prompt_offset; /* of the prompt area in a slot */
    uint32_t prompt_max;    /* its bytes */
    uint32_t tokens_offset; /* of the token id area (u32) in a slot */
    uint32_t slot_tokens;   /* its ids: prompt + generated */
    uint32_t text_offset;   /* of the text area in a slot */
    uint32_t slot_text;     /* its bytes */
    /* line 3: appliance-written, changes while serving */
    alignas(NIB_CACHELINE) uint32_t state; /* enum nib_app_state */
    uint32_t sleeping;                     /* 1: idle in poll(); a host that submits sends KICK */
    uint64_t heartbeat_ns;                 /* CLOCK_MONOTONIC of the appliance */
    uint32_t hosts_attached;
    uint32_t socket_lost; /* 1: the socket path was removed or replaced */
};

/* Ring memfd, offset 0 (one host's own). */
struct nib_ring_header {
    /* line 0: appliance-written at attach */
    alignas(NIB_CACHELINE) uint64_t magic; /* NIB_RING_MAGIC */
    uint64_t epoch;                        /* the boot that made it */
    uint32_t host_index;                   /* which ring this is */
    uint32_t attach_seq;                   /* +1 at every attach of this ring */
    uint32_t done_seq;                     /* futex word: +1 after every DONE in this ring */
    uint32_t reserved0;
    /* line 1: host-written (read by the appliance only as a hint) */
    alignas(NIB_CACHELINE) uint32_t done_waiters; /* the host sleeps on done_seq */
    uint32_t reserved1;
    uint64_t next_ticket; /* the host's own counter; tickets order a host's slots */
};

/* A slot's fixed part; its prompt, token and text areas follow at the
 * offsets the header gives. */
struct nib_slot {
    /* line 0: ownership (host-written, checked by the appliance) */
    alignas(NIB_CACHELINE) uint32_t state; /* enum nib_slot_state */
    uint32_t reserved0;
    uint64_t ticket; /* order among this ring's SUBMITTED slots */
    uint32_t cancel; /* host sets 1 to stop the generation */
    uint32_t reserved1;
    uint64_t request_id; /* host's own id, never read by the appliance */
    /* line 1: request, host-written while CLAIMED */
    alignas(NIB_CACHELINE) struct nib_request req;
    /* line 2: response, appliance-written */
    alignas(NIB_CACHELINE) uint32_t n_tokens; /* ids published in the token area (release) */
    uint32_t n_prompt;                        /* leading ids that are the prompt */
    uint32_t text_len;                        /* bytes published in the text area (release) */
    uint32_t status;                          /* enum nib_status, valid once DONE */
    uint64_t t_start_ns;                      /* the appliance's clock: picked up */
    uint64_t t_first_ns;                      /* first generated token */
    uint64_t t_done_ns;
    uint64_t served_ticket;     /* the ticket the appliance served */
    char error[NIB_ERRMSG_MAX]; /* for BAD_REQUEST: "field: why", NUL-terminated */
};

/* One tensor a vision model takes or gives (the header memfd's tensor
 * table, docs/ring.md section 3): its bytes lie at area_off in a slot's
 * prompt area (an input) or text area (an output), dense, row-major over
 * dims, elements little-endian. */
#define NIB_TENSOR_NAME_MAX 64
#define NIB_TENSOR_MAX 16
#define NIB_TENSOR_MAX_RANK 8
enum nib_tensor_dtype { NIB_TENSOR_F32 = 1, NIB_TENSOR_U8 = 2 };
struct nib_shm_tensor {
    char name[NIB_TENSOR_NAME_MAX]; /* the model's name for it, NUL-terminated */
    uint32_t dir;                   /* 0 input, 1 output */
    uint32_t dtype;                 /* enum nib_tensor_dtype: 1 f32, 2 u8 */
    uint32_t rank;                  /* 1..NIB_TENSOR_MAX_RANK */
    uint32_t reserved;
    uint32_t dims[NIB_TENSOR_MAX_RANK]; /* unused ones 0 */
    uint64_t area_off;                  /* 64-byte aligned, inside its area */
    uint64_t bytes;                     /* product of dims x element size */
};

_Static_assert(sizeof(struct nib_shm_tensor) == 128, "tensor record layout");
_Static_assert(offsetof(struct nib_shm_tensor, dims) == 80, "tensor record dims");
_Static_assert(sizeof(struct nib_request) == 64, "request layout");
_Static_assert(offsetof(struct nib_request, seed) == 16, "request seed");
_Static_assert(offsetof(struct nib_request, kind) == 24, "request kind");
_Static_assert(offsetof(struct nib_shm_header, epoch) == 24, "header epoch");
_Static_assert(offsetof(struct nib_shm_header, appliance_pid) == 44, "header pid");
_Static_assert(offsetof(struct nib_shm_header, ctx_len) == 64, "header line 1");
_Static_assert(offsetof(struct nib_shm_header, features) == 84, "header features");
_Static_assert(offsetof(struct nib_shm_header, outputs_len) == 104, "header tensor fields");
_Static_assert(offsetof(struct nib_shm_header, ring_size) == 128, "header line 2");
_Static_assert(offsetof(struct nib_shm_header, slot_text) == 180, "header geometry");
_Static_assert(offsetof(struct nib_shm_header, state) == 192, "header line 3");
_Static_assert(offsetof(struct nib_shm_header, heartbeat_ns) == 200, "header heartbeat");
_Static_assert(sizeof(struct nib_shm_header) == 256, "header size");
_Static_assert(offsetof(struct nib_ring_header, done_seq) == 24, "ring done_seq");
_Static_assert(offsetof(struct nib_ring_header, done_waiters) == 64, "ring host line");
_Static_assert(sizeof(struct nib_ring_header) == 128, "ring header size");
_Static_assert(offsetof(struct nib_slot, ticket) == 8, "slot ticket");
_Static_assert(offsetof(struct nib_slot, cancel) == 16, "slot cancel");
_Static_assert(offsetof(struct nib_slot, request_id) == 24, "slot request id");
_Static_assert(offsetof(struct nib_slot, req) == 64, "slot request");
_Static_assert(offsetof(struct nib_slot, n_tokens) == 128, "slot response");
_Static_assert(offsetof(struct nib_slot, t_start_ns) == 144, "slot times");
_Static_assert(offsetof(struct nib_slot, error) == 176, "slot error");
_Static_assert(sizeof(struct nib_slot) == 320, "slot fixed part");

#define NIB_SHM_STATS_OFFSET 256u
#define NIB_SHM_HEADER_MEMFD_SIZE 4096u
_Static_assert(NIB_SHM_STATS_OFFSET + sizeof(struct nib_stats) <= NIB_SHM_HEADER_MEMFD_SIZE,
               "stats page fits in the header memfd");
/* A vision model's header memfd: a second page holds the tensor table. */
#define NIB_SHM_TENSORS_OFFSET 4096u
#define NIB_SHM_HEADER_MEMFD_SIZE_TENSOR 8192u
_Static_assert(NIB_SHM_TENSORS_OFFSET + NIB_TENSOR_MAX * sizeof(struct nib_shm_tensor) <=
                   NIB_SHM_HEADER_MEMFD_SIZE_TENSOR,
               "tensor table fits in the header memfd");

/* The geometry of every ring for a model of ctx_len positions whose
 * longest vocabulary piece is max_piece bytes: fills the line-2 fields of
 * h (pure arithmetic, the same in the appliance and in tests). */
static inline void nib_ring_geometry(struct nib_shm_header *h, uint32_t ctx_len, uint32_t max_piece)
{
    uint64_t prompt = (uint64_t)ctx_len * NIB_PROMPT_PER_CTX;
    if (prompt < NIB_PROMPT_MIN)
        prompt = NIB_PROMPT_MIN;
    if (prompt > NIB_PROMPT_LIMIT)
        prompt = NIB_PROMPT_LIMIT;
    uint64_t text = (uint64_t)ctx_len * (max_piece ? max_piece : 1);
    if (text < NIB_TEXT_MIN)
        text = NIB_TEXT_MIN;
    if (text > NIB_TEXT_LIMIT)
        text = NIB_TEXT_LIMIT;
    uint64_t tokens = ctx_len;
    h->ring_header_size = sizeof(struct nib_ring_header);
    h->n_slots = NIB_RING_SLOTS;
    h->slots_offset = sizeof(struct nib_ring_header);
    h->prompt_offset = sizeof(struct nib_slot);
    h->prompt_max = (uint32_t)((prompt + 63) & ~63ull);
    h->tokens_offset = h->prompt_offset + h->prompt_max;
    h->slot_tokens = (uint32_t)tokens;
    h->text_offset = (uint32_t)((h->tokens_offset + 4 * tokens + 63) & ~63ull);
    h->slot_text = (uint32_t)((text + 63) & ~63ull);
    h->slot_size = (h->text_offset + (uint64_t)h->slot_text + 63) & ~63ull;
    h->ring_size = (h->slots_offset + h->n_slots * h->slot_size + 4095) & ~4095ull;
}

/* The geometry of every ring for a vision model whose inputs take
 * inputs_len bytes and outputs outputs_len (each area laid out by the
 * tensor table, every tensor 64-byte aligned): NIB_RING_SLOTS_TENSOR
 * slots, no token area. The caller bounds both by NIB_TENSOR_AREA_LIMIT. */
static inline void nib_ring_geometry_tensor(struct nib_shm_header *h, uint64_t inputs_len,
                                            uint64_t outputs_len)
{
    h->ring_header_size = sizeof(struct nib_ring_header);
    h->n_slots = NIB_RING_SLOTS_TENSOR;
    h->slots_offset = sizeof(struct nib_ring_header);
    h->prompt_offset = sizeof(struct nib_slot);
    h->prompt_max = (uint32_t)((inputs_len + 63) & ~63ull);
    h->tokens_offset = h->prompt_offset + h->prompt_max;
    h->slot_tokens = 0;
    h->text_offset = h->tokens_offset;
    h->slot_text = (uint32_t)((outputs_len + 63) & ~63ull);
    h->slot_size = (h->text_offset + (uint64_t)h->slot_text + 63) & ~63ull;
    h->ring_size = (h->slots_offset + h->n_slots * h->slot_size + 4095) & ~4095ull;
}

static inline const struct nib_shm_tensor *nib_shm_tensors(const struct nib_shm_header *h)
{
    return (const struct nib_shm_tensor *)(const void *)((const uint8_t *)h + h->tensors_offset);
}

static inline struct nib_slot *nib_ring_slot(void *ring, const struct nib_shm_header *h, uint32_t i)
{
    return (struct nib_slot *)(void *)((uint8_t *)ring + h->slots_offset +
                                       (uint64_t)i * h->slot_size);
}
static inline uint8_t *nib_slot_prompt(struct nib_slot *s, const struct nib_shm_header *h)
{
    return (uint8_t *)s + h->prompt_offset;
}
static inline uint32_t *nib_slot_tokens(struct nib_slot *s, const struct nib_shm_header *h)
{
    return (uint32_t *)(void *)((uint8_t *)s + h->tokens_offset);
}
static inline char *nib_slot_text(struct nib_slot *s, const struct nib_shm_header *h)
{
    return (char *)s + h->text_offset;
}

#endif
