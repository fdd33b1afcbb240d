/* Fuzz target: the control channel (proto/ctl.h). Each input is parsed
 * whole by nib_ctl_parse, then split into a conversation: records of
 * [connection byte][length byte][length bytes], each sent as one message on
 * one of three host connections (socketpairs adopted by a server with two
 * rings), the server's control pass running after each. A length of 0xff
 * closes that connection instead (a hang-up; the next record on it opens a
 * new one). Invariants: an accepted message is exactly one valid host
 * message; the server's ring table and connection table agree; the
 * header's hosts_attached counts the attached rings; every reply is a
 * well-formed appliance message; no descriptor outlives the conversation.
 * No blob is needed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/ctl.h"
#include "rt/serve.h"
#include "tests/common/fds.h"
#include "tests/fuzz/fuzz.h"

#define RINGS 2
#define HOSTS 3

static struct nib_server srv;
static struct nib_shm_header *hdr;
static uint8_t *rings[RINGS];
static int host[HOSTS];

static void check_parse(const uint8_t *data, size_t size)
{
    char err[128];
    err[0] = 0;
    int t = nib_ctl_parse(data, size, err, sizeof err);
    if (t < 0) {
        FUZZ_ASSERT(err[0] != 0);
        return;
    }
    FUZZ_ASSERT(size == sizeof(struct nib_ctl_msg));
    struct nib_ctl_msg m;
    memcpy(&m, data, sizeof m);
    FUZZ_ASSERT(t == m.type);
    FUZZ_ASSERT(t == NIB_CTL_ATTACH || t == NIB_CTL_DETACH || t == NIB_CTL_STOP ||
                t == NIB_CTL_KICK);
    FUZZ_ASSERT(m.magic == NIB_CTL_MAGIC && m.version == NIB_CTL_VERSION);
    FUZZ_ASSERT(!m.status && !m.host_index && !m.header_size && !m.ring_size);
    for (size_t i = 0; i < sizeof m.reserved; i++)
        FUZZ_ASSERT(m.reserved[i] == 0);
}

/* A server with rings but no model: enough for the control channel. */
static void server_reset(void)
{
    for (int c = 0; c < NIB_CONNS_MAX; c++)
        if (srv.conns[c].fd >= 0 && srv.hdr)
            nib_control_drop(&srv, c);
    for (int i = 0; i < HOSTS; i++)
        if (host[i] > 0)
            close(host[i]);
    if (!hdr) {
        hdr = aligned_alloc(4096, NIB_SHM_HEADER_MEMFD_SIZE);
        nib_ring_geometry(hdr, 64, 8);
        for (int i = 0; i < RINGS; i++)
            rings[i] = aligned_alloc(4096, hdr->ring_size);
    }
    struct nib_shm_header geo = *hdr;
    memset(hdr, 0, NIB_SHM_HEADER_MEMFD_SIZE);
    *hdr = geo;
    hdr->state = 0;
    hdr->hosts_attached = 0;
    hdr->epoch = 7;
    memset(&srv, 0, sizeof srv);
    srv.hdr = hdr;
    srv.stats = (struct nib_stats *)(void *)((uint8_t *)hdr + NIB_SHM_STATS_OFFSET);
    srv.header_fd = -1; /* replies carry no descriptors here */
    srv.listen_fd = -1;
    srv.n_rings = RINGS;
    srv.uid = (uint32_t)getuid();
    for (int i = 0; i < NIB_HOSTS_MAX; i++) {
        srv.rings[i].conn = -1;
        srv.rings[i].mem_fd = -1;
    }
    for (int i = 0; i < RINGS; i++)
        srv.rings[i].base = rings[i];
    for (int c = 0; c < NIB_CONNS_MAX; c++) {
        srv.conns[c].fd = -1;
        srv.conns[c].ring = -1;
    }
    for (int i = 0; i < HOSTS; i++)
        host[i] = -1;
}

static void open_host(int i)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    /* Host 2 is another uid: it may attach, not stop. */
    FUZZ_ASSERT(nib_control_adopt(&srv, sv[0], srv.uid + (i == 2), 0, 1) >= 0);
    host[i] = sv[1];
}

static void drain_replies(int i)
{
    struct nib_ctl_msg m;
    ssize_t n;
    while ((n = recv(host[i], &m, sizeof m, MSG_DONTWAIT)) > 0) {
        FUZZ_ASSERT(n == (ssize_t)sizeof m);
        FUZZ_ASSERT(m.magic == NIB_CTL_MAGIC && m.version == NIB_CTL_VERSION);
        FUZZ_ASSERT(m.type == NIB_CTL_ATTACHED || m.type == NIB_CTL_REFUSED ||
                    m.type == NIB_CTL_STOPPING);
        if (m.type == NIB_CTL_ATTACHED)
            FUZZ_ASSERT(m.host_index < RINGS && m.ring_size == hdr->ring_size);
        if (m.type == NIB_CTL_REFUSED)
            FUZZ_ASSERT(m.status >= NIB_CTL_NO_RING && m.status <= NIB_CTL_NOT_READY);
    }
}

static void check_tables(void)
{
    uint32_t attached = 0;
    for (int i = 0; i < RINGS; i++) {
        int c = srv.rings[i].conn;
        if (c < 0)
            continue;
        attached++;
        FUZZ_ASSERT(c < NIB_CONNS_MAX && srv.conns[c].fd >= 0 && srv.conns[c].ring == i);
        const struct nib_ring_header *rh = (const void *)rings[i];
        FUZZ_ASSERT(rh->magic == NIB_RING_MAGIC && rh->host_index == (uint32_t)i);
    }
    for (int c = 0; c < NIB_CONNS_MAX; c++)
        if (srv.conns[c].fd >= 0 && srv.conns[c].ring >= 0)
            FUZZ_ASSERT(srv.rings[srv.conns[c].ring].conn == c);
    FUZZ_ASSERT(hdr->hosts_attached == attached);
    FUZZ_ASSERT(srv.stats->hosts_attached == attached);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int base_fds = -2;
    check_parse(data, size);
    server_reset();
    size_t at = 0;
    for (int steps = 0; at + 2 <= size && steps < 64; steps++) {
        int i = data[at] % HOSTS;
        size_t len = data[at + 1];
        at += 2;
        if (host[i] < 0)
            open_host(i);
        if (len == 0xff) {
            close(host[i]);
            host[i] = -1;
        } else {
            if (len > size - at)
                len = size - at;
            check_parse(data + at, len);
            /* Records of exactly one message's size that start with the
             * magic are made valid more often: the useful paths are behind
             * a good header. */
            uint8_t buf[256];
            memcpy(buf, data + at, len);
            if (len == sizeof(struct nib_ctl_msg) && buf[0] == 'N') {
                struct nib_ctl_msg m = nib_ctl_make((uint16_t)(buf[1] % 6));
                memcpy(buf, &m, 8);
            }
            send(host[i], buf, len, MSG_DONTWAIT);
            at += len;
        }
        nib_control_pass(&srv, 0);
        if (host[i] >= 0)
            drain_replies(i);
        check_tables();
    }
    server_reset();
    /* Every descriptor of the conversation is gone again. */
    if (base_fds == -2)
        base_fds = tu_count_fds();
    FUZZ_ASSERT(tu_count_fds() == base_fds);
    return 0;
}
