/* The region shared across a virtual-machine boundary (docs/ring.md §19):
 * one sealed memfd that the host-side multiplexer (`nib vm run`) creates and
 * QEMU exposes to the guest as the BAR2 of an ivshmem-plain PCI device
 * (1af4:1110). Futex wake-ups, sockets and descriptor passing do not cross
 * that boundary; this memory does. Its layout reuses the local protocol's:
 *
 *   0                  region header page (struct nib_vmr_header): identity,
 *                      epochs, heartbeats, the ring table, the control mailbox
 *   4096               the appliance header pages, exactly the header memfd
 *                      of docs/ring.md §3 (struct nib_shm_header + nib_stats;
 *                      a vision model's tensor table on a second page)
 *   ring_offset[i]     ring i, exactly a ring memfd of §4 (ring_size bytes)
 *
 * Who writes what: the multiplexer writes line 0 once before QEMU starts,
 * its heartbeat (line 1) and the command mailbox (line 4); the appliance
 * writes lines 2-3 (its layout, epoch, state, heartbeat), the answer
 * mailbox (line 5), the ring table, the appliance header page and the
 * appliance's fields of each ring. Each side reads what the other wrote as
 * hostile input, through the checks below (pure functions, fuzzed:
 * tests/fuzz/fuzz_vm_region.c). Libc only. */
#ifndef NIB_VM_REGION_H
#define NIB_VM_REGION_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/shm_layout.h"

#define NIB_VMR_MAGIC 0x31524D564C42494Eull /* "NIBLVMR1" */
/* 2: the appliance header may be two pages (app_header_size); version 1
 * had one page and no such field. */
#define NIB_VMR_VERSION 2u
#define NIB_VMR_PAGE 4096u
#define NIB_VMR_APP_HEADER_OFFSET 4096u /* the appliance header pages */
#define NIB_VMR_RINGS_MAX NIB_HOSTS_MAX
/* Each side advances its heartbeat counter at least this often while it
 * runs; the other calls it dead when the counter has not moved for
 * NIB_VMR_STALE_NS of its own clock (the two clocks are never compared). */
#define NIB_VMR_BEAT_NS 100000000ull
#define NIB_VMR_STALE_NS 5000000000ull
/* A side that polls the region sleeps from this ... */
#define NIB_VMR_POLL_MIN_NS 50000ull
/* ... doubling to this while nothing changes. */
#define NIB_VMR_POLL_MAX_NS 2000000ull

/* The appliance's side (nib_vmr_header.guest_state). */
enum nib_vmr_guest_state {
    NIB_VMR_GUEST_ABSENT = 0,   /* nothing booted yet (the multiplexer zeroed it) */
    NIB_VMR_GUEST_READY = 1,    /* layout written, serving */
    NIB_VMR_GUEST_STOPPING = 2, /* shutting down */
    NIB_VMR_GUEST_STOPPED = 3,  /* exited cleanly */
};

/* Mailbox commands (multiplexer -> appliance) and their answers. */
enum nib_vmr_cmd_type {
    NIB_VMR_CMD_ATTACH = 1, /* a host took ring `ring`: reset it, write its ring header */
    NIB_VMR_CMD_DETACH = 2, /* ring `ring`'s host is gone: end its requests, free it */
    NIB_VMR_CMD_STOP = 3,   /* shut the appliance down */
};

/* One command; the multiplexer writes every field, then `seq` (release). */
struct nib_vmr_cmd {
    uint32_t seq;  /* +1 per command; 0: none yet */
    uint32_t type; /* enum nib_vmr_cmd_type */
    uint32_t ring; /* ATTACH, DETACH: 0..n_rings-1; STOP: 0 */
    uint32_t uid;  /* ATTACH: the host's uid (informational); else 0 */
    uint8_t reserved[48];
};

/* The answer; the appliance writes every field, then `seq` (release). */
struct nib_vmr_ans {
    uint32_t seq;        /* the command's seq */
    uint32_t type;       /* the command's type */
    uint32_t status;     /* 0 done, else enum nib_ctl_refusal (proto/ctl.h) */
    uint32_t ring;       /* the command's ring */
    uint32_t attach_seq; /* ATTACH: the ring header's new attach_seq */
    uint8_t reserved[44];
};

struct nib_vmr_header {
    /* line 0: the multiplexer, once, before QEMU starts */
    alignas(NIB_CACHELINE) uint64_t magic; /* NIB_VMR_MAGIC */
    uint32_t version;                      /* NIB_VMR_VERSION */
    uint32_t header_size;                  /* sizeof(struct nib_vmr_header) */
    uint64_t region_size;                  /* bytes of the whole region (a power of two) */
    uint64_t mux_epoch;                    /* the multiplexer's start; never 0 */
    uint32_t max_rings;                    /* rings the appliance may lay out */
    uint32_t reserved0;
    /* line 1: the multiplexer, while it runs */
    alignas(NIB_CACHELINE) uint64_t mux_beat; /* +1 at least every NIB_VMR_BEAT_NS */
    /* line 2: the appliance, at boot, before guest_state READY (release) */
    alignas(NIB_CACHELINE) uint64_t guest_epoch; /* = the appliance header's epoch; never 0 */
    uint64_t app_header_offset;                  /* NIB_VMR_APP_HEADER_OFFSET */
    uint64_t ring_size;                          /* = the appliance header's ring_size */
    uint32_t n_rings;                            /* 1..max_rings */
    uint32_t app_header_size; /* = the appliance header's header_memfd_size: 4096, or 8192
                               * for a vision model (its tensor table page) */
    /* line 3: the appliance, while it runs */
    alignas(NIB_CACHELINE) uint32_t guest_state; /* enum nib_vmr_guest_state */
    uint32_t reserved3;
    uint64_t guest_beat; /* +1 at least every NIB_VMR_BEAT_NS */
    /* line 4: command mailbox (multiplexer) */
    alignas(NIB_CACHELINE) struct nib_vmr_cmd cmd;
    /* line 5: answer mailbox (appliance) */
    alignas(NIB_CACHELINE) struct nib_vmr_ans ans;
    /* lines 6-7: reserved, 0 */
    alignas(NIB_CACHELINE) uint8_t reserved6[128];
    /* 512: the ring table, the appliance, at boot */
    uint64_t ring_offset[NIB_VMR_RINGS_MAX];
};

_Static_assert(sizeof(struct nib_vmr_cmd) == 64, "mailbox command");
_Static_assert(sizeof(struct nib_vmr_ans) == 64, "mailbox answer");
_Static_assert(offsetof(struct nib_vmr_header, mux_epoch) == 24, "region mux epoch");
_Static_assert(offsetof(struct nib_vmr_header, mux_beat) == 64, "region line 1");
_Static_assert(offsetof(struct nib_vmr_header, guest_epoch) == 128, "region line 2");
_Static_assert(offsetof(struct nib_vmr_header, n_rings) == 152, "region n_rings");
_Static_assert(offsetof(struct nib_vmr_header, app_header_size) == 156, "region app header size");
_Static_assert(offsetof(struct nib_vmr_header, guest_state) == 192, "region line 3");
_Static_assert(offsetof(struct nib_vmr_header, guest_beat) == 200, "region guest beat");
_Static_assert(offsetof(struct nib_vmr_header, cmd) == 256, "region command");
_Static_assert(offsetof(struct nib_vmr_header, ans) == 320, "region answer");
_Static_assert(offsetof(struct nib_vmr_header, ring_offset) == 512, "region ring table");
_Static_assert(sizeof(struct nib_vmr_header) == 1024, "region header");
_Static_assert(sizeof(struct nib_vmr_header) <= NIB_VMR_PAGE, "region header page");
_Static_assert(NIB_SHM_HEADER_MEMFD_SIZE == NIB_VMR_PAGE, "appliance header page");
_Static_assert(NIB_SHM_HEADER_MEMFD_SIZE_TENSOR == 2 * NIB_VMR_PAGE, "vision header pages");

/* The region's size for n_rings rings of ring_size bytes after an
 * appliance header of app_header_size bytes (NIB_SHM_HEADER_MEMFD_SIZE or
 * ..._TENSOR): the header pages and the rings, rounded up to a power of two
 * (a PCI BAR's size). 0 when it would not fit in 2^40 bytes or the
 * arguments are out of range. */
uint64_t nib_vmr_region_size(uint64_t ring_size, uint32_t app_header_size, uint32_t n_rings);

/* The multiplexer's line 0 into a zeroed region header. */
void nib_vmr_init(struct nib_vmr_header *h, uint64_t region_size, uint64_t mux_epoch,
                  uint32_t max_rings);

/* The appliance's layout: as many rings of ring_size as fit (at most
 * max_hosts and the header's max_rings), packed after the appliance header
 * of app_header_size bytes (one page, or two for a vision model); fills
 * line 2 and the ring table (guest_state is left to the caller, who stores
 * READY with release). 0, or -1 with the reason. */
int nib_vmr_layout(struct nib_vmr_header *h, uint64_t ring_size, uint32_t app_header_size,
                   uint32_t max_hosts, uint64_t guest_epoch, char *err, size_t errlen);

/* The appliance's check of line 0 (a copy), against the size of the BAR it
 * mapped. 0, or -1 with the reason. Pure. */
int nib_vmr_check_mux(const struct nib_vmr_header *copy, uint64_t bar_size, char *err,
                      size_t errlen);

/* The multiplexer's check of the appliance's layout (a copy of the region
 * header and of the appliance header page), against the region it made:
 * its own line 0 unchanged, guest_epoch equal to the appliance header's and
 * not 0, app_header_size one or two pages and equal to the appliance
 * header's header_memfd_size, n_rings 1..max_rings, ring_size equal to the
 * appliance header's and a multiple of the page, every ring page-aligned,
 * inside the region, clear of every header page and of every other ring.
 * 0, or -1. Pure. */
int nib_vmr_check_layout(const struct nib_vmr_header *copy, const struct nib_shm_header *app,
                         uint64_t region_size, uint64_t mux_epoch, char *err, size_t errlen);

/* The appliance's check of a command (a copy) for n_rings rings: a known
 * type, ring < n_rings for ATTACH/DETACH and 0 for STOP, uid 0 unless
 * ATTACH, reserved zero. Returns the type, or -1. Pure. */
int nib_vmr_parse_cmd(const struct nib_vmr_cmd *c, uint32_t n_rings, char *err, size_t errlen);

/* The multiplexer's check of an answer (a copy) to the command `sent`:
 * same seq, type and ring, a known status, reserved zero. 0, or -1. Pure. */
int nib_vmr_parse_ans(const struct nib_vmr_ans *a, const struct nib_vmr_cmd *sent, char *err,
                      size_t errlen);

/* The other side's heartbeat as one side watches it: alive while the
 * counter moved within stale_ns of the watcher's own clock. */
struct nib_vmr_watch {
    uint64_t beat;    /* the counter last seen */
    uint64_t seen_ns; /* when it last changed (the watcher's clock) */
};
void nib_vmr_watch_start(struct nib_vmr_watch *w, uint64_t beat, uint64_t now_ns);
/* 1 alive, 0 stale (no move for stale_ns). */
int nib_vmr_watch_alive(struct nib_vmr_watch *w, uint64_t beat, uint64_t now_ns, uint64_t stale_ns);

/* The next poll sleep after one that found nothing: doubling from
 * NIB_VMR_POLL_MIN_NS to NIB_VMR_POLL_MAX_NS (0 gives the minimum). */
uint64_t nib_vmr_backoff(uint64_t prev_ns);

/* The mailbox on the live region. One command is in flight at a time: the
 * multiplexer posts the next only after the answer to the last arrived (or
 * it gave up on the appliance). Posting writes every field with plain
 * stores, then seq with a release store; taking loads seq with an acquire
 * load (pairs with that release) and copies the fields when it moved. The
 * copy is then checked (nib_vmr_parse_*): a torn or hostile record is
 * refused, never acted on. */
void nib_vmr_cmd_post(struct nib_vmr_header *h, const struct nib_vmr_cmd *c);
/* 1 and the command in *out when cmd.seq differs from last_seq, else 0. */
int nib_vmr_cmd_take(const struct nib_vmr_header *h, uint32_t last_seq, struct nib_vmr_cmd *out);
void nib_vmr_ans_post(struct nib_vmr_header *h, const struct nib_vmr_ans *a);
/* 1 and the answer in *out when ans.seq equals want_seq, else 0. */
int nib_vmr_ans_take(const struct nib_vmr_header *h, uint32_t want_seq, struct nib_vmr_ans *out);
/* A side's heartbeat: *count is its private counter (the shared word is
 * never read back, so the other side cannot steer it); release store. */
void nib_vmr_beat(uint64_t *shared, uint64_t *count);
/* The other side's heartbeat word (acquire: pairs with nib_vmr_beat). */
uint64_t nib_vmr_beat_read(const uint64_t *shared);

#endif
