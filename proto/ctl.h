/* The appliance's control channel, protocol version 3: a Unix
 * SOCK_SEQPACKET socket at <runtime dir>/<name>.sock (proto/shm_name.h).
 * Every message either way is one struct nib_ctl_msg (64 bytes, little-
 * endian); an ATTACHED reply carries two file descriptors (SCM_RIGHTS):
 * [0] the header memfd (read-only for hosts), [1] the host's own ring memfd.
 *
 *   host -> appliance   ATTACH, DETACH, STOP, KICK
 *   appliance -> host   ATTACHED, REFUSED, STOPPING
 *
 * A host is attached while its connection is open: when the kernel reports
 * the connection closed (exit, crash, SIGKILL, or DETACH then close), the
 * appliance cancels the host's requests and its ring goes back to the pool.
 * The appliance is alive for a host while the connection is open and the
 * header's heartbeat moves. The appliance reads every message as hostile
 * input (nib_ctl_parse); anything malformed closes that connection. */
#ifndef NIB_CTL_H
#define NIB_CTL_H

#include <stddef.h>
#include <stdint.h>

#define NIB_CTL_MAGIC 0x4342494Eu /* "NIBC" */
#define NIB_CTL_VERSION 3u        /* unchanged in shared-memory version 4 (docs/ring.md §15) */

enum nib_ctl_type {
    NIB_CTL_ATTACH = 1, /* give me a ring */
    NIB_CTL_DETACH = 2, /* I am done (closing the connection does the same) */
    NIB_CTL_STOP = 3,   /* shut the appliance down (peer uid must be allowed) */
    NIB_CTL_KICK = 4,   /* I submitted while the header said sleeping */
    NIB_CTL_ATTACHED = 0x81,
    NIB_CTL_REFUSED = 0x82,
    NIB_CTL_STOPPING = 0x83,
};

/* REFUSED reasons (msg.status). */
enum nib_ctl_refusal {
    NIB_CTL_OK = 0,
    NIB_CTL_NO_RING = 1,   /* --max-hosts rings are all attached */
    NIB_CTL_DENIED = 2,    /* the peer's uid may not do this */
    NIB_CTL_MALFORMED = 3, /* bad magic, version, type or reserved bytes */
    NIB_CTL_NOT_READY = 4, /* stopping */
};

struct nib_ctl_msg {
    uint32_t magic;       /* NIB_CTL_MAGIC */
    uint16_t version;     /* NIB_CTL_VERSION */
    uint16_t type;        /* enum nib_ctl_type */
    uint32_t status;      /* replies: enum nib_ctl_refusal */
    uint32_t host_index;  /* ATTACHED: the ring's index */
    uint64_t epoch;       /* ATTACHED, STOPPING: the appliance's boot */
    uint64_t header_size; /* ATTACHED: bytes of the header memfd */
    uint64_t ring_size;   /* ATTACHED: bytes of the ring memfd */
    uint8_t reserved[24]; /* zero */
};
_Static_assert(sizeof(struct nib_ctl_msg) == 64, "control message layout");

/* Check a message received from a peer: exactly sizeof(struct nib_ctl_msg)
 * bytes, magic, version, a host->appliance type, status/host_index/sizes/
 * reserved all zero. Pure. Returns the type, or -1 with a reason in err. */
int nib_ctl_parse(const void *buf, size_t len, char *err, size_t errlen);

/* A zeroed message of this type with magic and version set. */
struct nib_ctl_msg nib_ctl_make(uint16_t type);

#endif
