/* The serving thread's work (protocol version 4, docs/ring.md): pick the
 * next submitted request round-robin across the attached hosts' rings,
 * check it as hostile input, render chat messages with the model's
 * template (rt/chat/chat.h), tokenize, run prefill and decode until an
 * end-of-generation token or a limit, stream tokens and text (whole UTF-8
 * characters only) back into the slot while it is still the request's own,
 * and post the final status. Between passes of the model (never inside
 * one) it also runs the control channel (rt/control.c): attach, detach,
 * hang-ups, stop, kicks.
 *
 * Memory is all caller-provided (the x_footprint / x_new pattern): the
 * header and the rings are memfd mappings made at boot (boot/), or by a
 * test; nothing is allocated or mapped here. */
#ifndef NIB_SERVE_H
#define NIB_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"
#include "proto/chat_msg.h"
#include "proto/shm_layout.h"
#include "rt/exec.h"
#include "rt/refloop.h"

/* What a request is checked against (from the blob and the geometry). */
struct nib_req_limits {
    uint32_t prompt_max;
    uint32_t slot_tokens;
    uint32_t ctx_len;
    uint32_t vocab_size;
    uint32_t chat_messages; /* messages a chat request may hold; 0: no chat template */
    uint32_t tensor_in;     /* a vision model: the exact bytes of its inputs (header
                             * inputs_len); 0: a decoder (no kind TENSOR) */
};

/* A request that passed every check. */
struct nib_req_decoded {
    uint32_t prompt_len; /* bytes of prompt to copy (<= prompt_max) */
    uint32_t max_tokens; /* 1..slot_tokens */
    float temperature;   /* 0..NIB_TEMPERATURE_MAX, not NaN */
    uint32_t flags;      /* known bits only */
    uint64_t seed;
    uint32_t n_ids;            /* NIB_REQ_PROMPT_IDS: ids copied to ids[] */
    uint32_t kind;             /* NIB_REQ_KIND_TEXT, _CHAT, _MEASURE or _TENSOR */
    uint32_t measure_pos;      /* MEASURE: the first position */
    struct nib_chat_head chat; /* CHAT: the conversation's header */
};

/* Decode and check a request that was copied out of shared memory: every
 * field against the limits, kind TEXT, CHAT or MEASURE for a decoder and
 * only TENSOR for a vision model (lim->tensor_in; then prompt_len is
 * exactly tensor_in, max_tokens, temperature and flags 0), reserved bytes
 * zero; with kind MEASURE, no flags, temperature 0 and a prompt of one
 * little-endian u32, the first position, with max_tokens positions from
 * it inside the context; with
 * NIB_REQ_PROMPT_IDS, prompt (prompt_avail bytes) holds the ids, each <
 * vocab_size, copied to ids (ids_cap >= prompt_max / 4); with kind CHAT,
 * the prompt holds messages (proto/chat_msg.h), decoded into parts (room
 * for lim->chat_messages; they point into prompt). Pure: reads only its
 * arguments. Returns 0, or -1 with "field: why" in err (the field named as
 * in docs/ring.md). */
int nib_req_decode(const struct nib_request *raw, const uint8_t *prompt, size_t prompt_avail,
                   const struct nib_req_limits *lim, struct nib_req_decoded *out, uint32_t *ids,
                   size_t ids_cap, struct nib_chat_part *parts, char *err, size_t errlen);

/* --- rt/serve_tensor.c: a vision model (docs/ring.md section 6.4) ---------- */

/* The tensor table of vision blob v into t (NIB_TENSOR_MAX records; NULL:
 * only the sizes): its io records, each at its 64-byte aligned offset in
 * the prompt area (inputs) or text area (outputs); *in_len and *out_len,
 * the exact bytes of each area's contents. */
void nib_tensor_layout(const struct nib_blob_view *v, struct nib_shm_tensor *t, uint64_t *in_len,
                       uint64_t *out_len);

/* Bytes of the header memfd for blob v: NIB_SHM_HEADER_MEMFD_SIZE, or with
 * the tensor table's page for a vision model. */
uint32_t nib_server_header_size(const struct nib_blob_view *v);

/* Why a vision blob cannot be served (an area over NIB_TENSOR_AREA_LIMIT),
 * into err; 0 when it can (and for a decoder). */
int nib_server_tensor_check(const struct nib_blob_view *v, char *err, size_t errlen);

/* kind TENSOR's part of nib_req_decode (r already copied, kind checked). */
int nib_req_decode_tensor(const struct nib_request *r, const struct nib_req_limits *lim,
                          struct nib_req_decoded *out, char *err, size_t errlen);

/* "field: why" into err with why formatted from a and b; returns -1. */
int nib_req_fail(char *err, size_t errlen, const char *field, const char *why, uint64_t a,
                 uint64_t b);

/* Bytes a chat request's rendered text may take (the template's text
 * around the messages included): NIB_CHAT_RENDER_FACTOR x prompt_max. */
#define NIB_CHAT_RENDER_FACTOR 2u

/* The appliance's own record of one ring (never read back from the ring). */
struct nib_host_ring {
    uint8_t *base;     /* ring_size bytes, mapped read-write */
    int mem_fd;        /* the ring memfd handed to its host; -1 in tests */
    int conn;          /* index in conns[] of the attached host, -1: free */
    int ever;          /* handed out before */
    uint32_t last_uid; /* uid of the last holder */
    uint32_t attach_seq;
    uint32_t done_seq;
};

/* One control connection (attached or not). */
struct nib_conn {
    int fd;                 /* -1: unused */
    uint32_t uid, gid, pid; /* SO_PEERCRED at accept */
    int ring;               /* attached ring, -1: none */
    int stopper;            /* sent STOP: kept open until exit */
    int vm;                 /* attached over the VM region (rt/vm_link.c): no socket, fd -1 */
    uint64_t since_ns;      /* accepted at */
};

#define NIB_CONNS_MAX (NIB_HOSTS_MAX + 16)
/* The idle spin's control cadence while a connection waits for its
 * ATTACH answer (else NIB_CONTROL_CHECK_NS). */
#define NIB_CONTROL_FAST_NS 100000ull
/* An unattached connection that sends nothing for this long is closed. */
#define NIB_CONN_IDLE_NS 2000000000ull

/* The request being served (between passes the control channel may end it:
 * its host hung up). */
struct nib_run {
    uint32_t ring, slot;
    uint64_t ticket;
    uint64_t t_start;
    int gone;          /* its host hung up or detached */
    uint32_t text_len; /* text bytes written into the slot ... */
    uint8_t tail[3];   /* ... the last of them (private: never read back) ... */
    uint32_t tail_n;   /* ... and how many (<= 3), to publish whole characters */
};

struct nib_server {
    const struct nib_blob_view *v;
    struct nib_exec exec;
    struct nib_ref ref;         /* MEASURE requests: the reference loop over exec */
    struct nib_shm_header *hdr; /* the header memfd, mapped writable (only here) */
    struct nib_stats *stats;
    int header_fd; /* sent to every host; -1 in tests */
    uint32_t n_rings;
    struct nib_host_ring rings[NIB_HOSTS_MAX];
    uint32_t rr_last; /* ring served last (round-robin) */
    struct nib_req_limits lim;
    /* private scratch, sized from the geometry */
    uint8_t *prompt; /* prompt_max bytes */
    uint32_t *ids;   /* ids_cap ids */
    uint32_t ids_cap;
    void *tok_work;
    /* chat (only when the blob has a template; else NULL / 0) */
    const uint8_t *chat_prog;
    size_t chat_prog_len;
    struct nib_chat_part *parts; /* lim.chat_messages */
    void *messages;              /* lim.chat_messages struct nib_chat_message */
    uint8_t *render, *taint;     /* render_cap bytes each */
    size_t render_cap;
    void *chat_work;
    size_t chat_work_size;
    /* control channel (rt/control.c) */
    int listen_fd;     /* -1: none (tests attach with nib_control_adopt) */
    uint32_t uid, gid; /* the appliance's */
    int group_access;  /* peers of gid may attach */
    struct nib_conn conns[NIB_CONNS_MAX];
    uint32_t conns_waiting; /* connected, neither attached nor stopping: the idle
                                 * spin runs the control channel every
                                 * NIB_CONTROL_FAST_NS while there are any */
    const char *sock_path;  /* watched every NIB_HEARTBEAT_NS; NULL: not watched */
    uint64_t sock_dev, sock_ino;
    volatile int *stop_flag; /* set by a signal handler; may be NULL */
    int stop;                /* a STOP message was accepted */
    struct nib_run *run;     /* the request being served, or NULL */
    uint64_t last_beat_ns, last_control_ns, last_watch_ns;
    /* Tests only: called after every pass of the model (prefill or a
     * token), before the checks, to act as a host would mid-request. */
    void (*pass_hook)(struct nib_server *s, void *arg);
    void *pass_hook_arg;
    /* An appliance in a virtual machine: the region's mailbox and
     * heartbeats, run at the end of every control pass; NULL: none. */
    struct nib_vm_link *vm;
};

/* Bytes of private scratch the server needs beside the runtime memory, for
 * the geometry of the blob v (nib_server_geometry). */
uint64_t nib_server_scratch_footprint(const struct nib_blob_view *v);

/* The ring geometry of blob v into h's line 2. */
void nib_server_geometry(const struct nib_blob_view *v, struct nib_shm_header *h);

/* Write the header (identity, limits, geometry; header: a zeroed mapping of
 * nib_server_header_size(v) bytes) and bind the server to its memory. mem:
 * v->mem_size bytes; scratch: nib_server_scratch_footprint(v) bytes,
 * 64-byte aligned. Rings are added with nib_server_set_ring. State stays
 * BOOTING until the caller stores READY. */
void nib_server_init(struct nib_server *s, const struct nib_blob_view *v, void *mem, void *scratch,
                     void *header, uint32_t max_hosts, uint32_t pid, uint64_t epoch);

/* A vision model's header fields and tensor table (from nib_server_init). */
void nib_server_init_tensors(struct nib_server *s);

/* Serve a decoded TENSOR request picked up into r from slot: the inputs
 * from the prompt area to their io offsets in the arena, one run of the
 * plan, the outputs into the text area, the final status. */
void nib_serve_tensor(struct nib_server *s, struct nib_run *r, struct nib_slot *slot);

/* Is the slot still r's own (RUNNING under its ticket)? Checked before
 * every write into it. */
int nib_serve_own(const struct nib_server *s, const struct nib_run *r);

/* Post r's final status (only into a slot that is still its own). */
void nib_serve_finish(struct nib_server *s, struct nib_run *r, uint32_t status, const char *why);

/* Ring i: hdr->ring_size bytes at base (zeroed), its memfd (or -1). */
void nib_server_set_ring(struct nib_server *s, uint32_t i, void *base, int mem_fd);

/* One step of the serve loop: the control channel (poll with timeout 0),
 * then the next submitted request, round-robin across attached rings,
 * lowest ticket inside a ring. Returns 1 if a request was served, 0 if
 * there was nothing to do. */
int nib_server_poll(struct nib_server *s);

/* Idle: spin up to spin_ns looking for work (control channel every
 * NIB_CONTROL_CHECK_NS), then set header.sleeping, look once more, and
 * sleep in poll() on the sockets for up to NIB_IDLE_SLEEP_MS. */
void nib_server_idle(struct nib_server *s, uint64_t spin_ns);

/* 1 once the appliance should stop (STOP message or stop_flag). */
int nib_server_stopping(const struct nib_server *s);

/* Shutdown: STOPPING, SHUTDOWN for every queued request, STOPPED. */
void nib_server_shutdown(struct nib_server *s);

/* Heartbeat and the socket path watch (called between passes). */
void nib_server_housekeeping(struct nib_server *s, uint64_t now);

/* --- rt/control.c ---------------------------------------------------------- */

/* Run the control channel once: poll the listening socket and every
 * connection for up to timeout_ms, accept, read and answer messages,
 * handle hang-ups. Returns the number of events handled. */
int nib_control_pass(struct nib_server *s, int timeout_ms);

/* Take a connected socket as if accepted from a peer of uid/gid/pid (the
 * accept path after SO_PEERCRED; tests use a socketpair). Returns the
 * connection index, or -1 (table full: fd closed). */
int nib_control_adopt(struct nib_server *s, int fd, uint32_t uid, uint32_t gid, uint32_t pid);

/* The ring's host hung up (or detached): close its connection, end its
 * running request (OWNER_GONE), free the ring. */
void nib_control_drop(struct nib_server *s, int conn);

/* The VM region's ATTACH (docs/ring.md §19): ring i taken by a host of uid
 * on the other side, through a connection without a socket. 0 with the
 * ring reset and *attach_seq its new value, or an enum nib_ctl_refusal
 * (NO_RING: attached already, or still ending a request; NOT_READY). */
uint32_t nib_control_vm_attach(struct nib_server *s, uint32_t i, uint32_t uid,
                               uint32_t *attach_seq);

/* The VM region's DETACH: ring i's host is gone (as a hang-up). 0, or
 * NIB_CTL_NO_RING when ring i is not attached over the region. */
uint32_t nib_control_vm_detach(struct nib_server *s, uint32_t i);

#endif
