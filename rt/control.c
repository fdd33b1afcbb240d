/* The control channel (proto/ctl.h): the serving thread accepts hosts on
 * its Unix socket, reads their messages as hostile input, hands out rings
 * made at boot, and notices hang-ups. It runs only between passes of the
 * model (rt/serve.c calls nib_control_pass), so a host's message never
 * interrupts a token. System calls made here, all on the serving thread's
 * seccomp allow-list (boot/seccomp.c): poll, accept4, getsockopt
 * (SO_PEERCRED), recvmsg, sendmsg, close. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/ctl.h"
#include "proto/private/ctl_io.h"
#include "proto/private/sync.h"
#include "rt/serve.h"
#include "rt/vm_link.h"

/* Bounds on the work one pass does, so that no peer can hold the serving
 * thread: new connections accepted, messages read per connection. */
#define ACCEPTS_PER_PASS 8
#define MSGS_PER_PASS 8

/* Every reply: never blocking the serving thread, never raising SIGPIPE. */
#define SEND_FLAGS (MSG_DONTWAIT | MSG_NOSIGNAL)

static void reply(struct nib_server *s, int c, uint16_t type, uint32_t status)
{
    struct nib_ctl_msg m = nib_ctl_make(type);
    m.status = status;
    m.epoch = s->hdr->epoch;
    nib_ctl_send(s->conns[c].fd, &m, NULL, 0, SEND_FLAGS);
}

/* REFUSED, then the connection is closed (whatever the reason). */
static void refuse(struct nib_server *s, int c, uint32_t status)
{
    s->stats->attach_refused++;
    reply(s, c, NIB_CTL_REFUSED, status);
    nib_control_drop(s, c);
}

static void set_attached(struct nib_server *s, int delta)
{
    /* The header is written by this thread alone (no host can write it). */
    uint32_t n = s->hdr->hosts_attached + (uint32_t)delta;
    /* release: a counter nib stats reads (nibhost.c nib_host_stats()); no
     * data hangs on it */
    nib_store_rel(&s->hdr->hosts_attached, n);
    s->stats->hosts_attached = n;
}

void nib_control_drop(struct nib_server *s, int c)
{
    struct nib_conn *k = &s->conns[c];
    if (k->fd < 0 && !k->vm)
        return;
    /* Counters first: whoever sees the connection close sees them. */
    if (k->ring >= 0) {
        struct nib_host_ring *r = &s->rings[k->ring];
        r->conn = -1;
        r->last_uid = k->uid;
        set_attached(s, -1);
        s->stats->host_hangups++;
        /* Its running request stops at the next checkpoint; its queued ones
         * are forgotten with the ring (reset at the next attach). */
        if (s->run && s->run->ring == (uint32_t)k->ring)
            s->run->gone = 1;
    }
    if (k->fd >= 0)
        close(k->fd);
    k->fd = -1;
    k->ring = -1;
    k->stopper = 0;
    k->vm = 0;
}

/* A free connection slot (at most max_hosts + 16 in use), or -1. */
static int free_conn(const struct nib_server *s)
{
    int limit = (int)s->n_rings + (NIB_CONNS_MAX - NIB_HOSTS_MAX);
    for (int c = 0; c < limit; c++)
        if (s->conns[c].fd < 0 && !s->conns[c].vm)
            return c;
    return -1;
}

int nib_control_adopt(struct nib_server *s, int fd, uint32_t uid, uint32_t gid, uint32_t pid)
{
    /* At most max_hosts + 16 connections at once (attached or not). */
    int c = free_conn(s);
    if (c >= 0) {
        s->conns[c] = (struct nib_conn){
            .fd = fd, .uid = uid, .gid = gid, .pid = pid, .ring = -1, .since_ns = nib_now_ns()};
        return c;
    }
    struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_REFUSED);
    m.status = NIB_CTL_NO_RING;
    nib_ctl_send(fd, &m, NULL, 0, SEND_FLAGS);
    s->stats->attach_refused++;
    close(fd);
    return -1;
}

/* A free ring for a host of uid: one its own uid held last, else one never
 * handed out, else any other free one. Never the ring of the request being
 * served (its host just left; the request is still ending). */
static int pick_ring(const struct nib_server *s, uint32_t uid)
{
    for (int pass = 0; pass < 3; pass++)
        for (uint32_t i = 0; i < s->n_rings; i++) {
            const struct nib_host_ring *r = &s->rings[i];
            if (r->conn >= 0 || !r->base || (s->run && s->run->ring == i))
                continue;
            if ((pass == 0 && r->ever && r->last_uid == uid) || (pass == 1 && !r->ever) ||
                pass == 2)
                return (int)i;
        }
    return -1;
}

/* Back to a clean ring: every slot FREE and zero (nothing of the last
 * holder's requests or answers is left), the host line zero, line 0 the
 * identity of this attach. */
static void reset_ring(struct nib_server *s, uint32_t i)
{
    struct nib_host_ring *r = &s->rings[i];
    struct nib_ring_header *rh = (struct nib_ring_header *)(void *)r->base;
    memset(r->base, 0, s->hdr->ring_size);
    r->attach_seq++;
    r->done_seq = 0;
    rh->epoch = s->hdr->epoch;
    rh->host_index = i;
    rh->attach_seq = r->attach_seq;
    rh->done_seq = 0;
    /* release: the host reads the ring only after recvmsg() of ATTACHED, a
     * system call that orders these stores before it anyway */
    nib_store_rel(&rh->magic, NIB_RING_MAGIC);
}

static void attach(struct nib_server *s, int c)
{
    struct nib_conn *k = &s->conns[c];
    if (nib_server_stopping(s)) {
        refuse(s, c, NIB_CTL_NOT_READY);
        return;
    }
    int i = k->ring;
    if (i < 0) {
        i = pick_ring(s, k->uid);
        if (i < 0) {
            refuse(s, c, NIB_CTL_NO_RING);
            return;
        }
        reset_ring(s, (uint32_t)i);
        s->rings[i].conn = c;
        s->rings[i].ever = 1;
        s->rings[i].last_uid = k->uid;
        k->ring = i;
        set_attached(s, +1);
    }
    struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_ATTACHED);
    m.host_index = (uint32_t)i;
    m.epoch = s->hdr->epoch;
    m.header_size = s->hdr->header_memfd_size;
    m.ring_size = s->hdr->ring_size;
    int fds[2] = {s->header_fd, s->rings[i].mem_fd};
    int nfds = fds[0] >= 0 && fds[1] >= 0 ? 2 : 0;
    /* Counted before the reply, so a host that reads the stats page once
     * attached sees its own attach. */
    s->stats->attaches++;
    if (nib_ctl_send(k->fd, &m, fds, nfds, SEND_FLAGS)) {
        /* A host that cannot take its answer gets nothing: its ring goes
         * back to the pool. */
        nib_control_drop(s, c);
    }
}

uint32_t nib_control_vm_attach(struct nib_server *s, uint32_t i, uint32_t uid, uint32_t *attach_seq)
{
    if (nib_server_stopping(s))
        return NIB_CTL_NOT_READY;
    if (i >= s->n_rings)
        return NIB_CTL_NO_RING;
    struct nib_host_ring *r = &s->rings[i];
    if (!r->base || r->conn >= 0 || (s->run && s->run->ring == i))
        return NIB_CTL_NO_RING;
    int c = free_conn(s);
    if (c < 0)
        return NIB_CTL_NO_RING;
    s->conns[c] =
        (struct nib_conn){.fd = -1, .uid = uid, .ring = (int)i, .vm = 1, .since_ns = nib_now_ns()};
    reset_ring(s, i);
    r->conn = c;
    r->ever = 1;
    r->last_uid = uid;
    set_attached(s, +1);
    s->stats->attaches++;
    *attach_seq = r->attach_seq;
    return NIB_CTL_OK;
}

uint32_t nib_control_vm_detach(struct nib_server *s, uint32_t i)
{
    if (i >= s->n_rings || s->rings[i].conn < 0 || !s->conns[s->rings[i].conn].vm)
        return NIB_CTL_NO_RING;
    nib_control_drop(s, s->rings[i].conn);
    return NIB_CTL_OK;
}

static int allowed(const struct nib_server *s, uint32_t uid, uint32_t gid)
{
    return uid == s->uid || uid == 0 || (s->group_access && gid == s->gid);
}

static void handle(struct nib_server *s, int c, int type)
{
    struct nib_conn *k = &s->conns[c];
    switch (type) {
    case NIB_CTL_ATTACH: attach(s, c); break;
    case NIB_CTL_DETACH: nib_control_drop(s, c); break;
    case NIB_CTL_STOP:
        if (k->uid != s->uid && k->uid != 0) {
            refuse(s, c, NIB_CTL_DENIED);
            break;
        }
        s->stop = 1;
        k->stopper = 1;
        reply(s, c, NIB_CTL_STOPPING, NIB_CTL_OK);
        break;
    default: /* KICK: waking the serving thread was all it had to do */ break;
    }
}

/* Read what the connection has (bounded); a hang-up, an error or anything
 * malformed closes it. */
static void conn_event(struct nib_server *s, int c, short revents)
{
    struct nib_conn *k = &s->conns[c];
    if (revents & POLLIN) {
        for (int n = 0; n < MSGS_PER_PASS && k->fd >= 0; n++) {
            uint8_t buf[sizeof(struct nib_ctl_msg) + 1];
            /* No control buffer (n_fds NULL): descriptors a peer sends are
             * never installed here (the kernel drops them, MSG_CTRUNC, and
             * the message is malformed: EMSGSIZE). */
            ssize_t got = nib_ctl_recv(k->fd, buf, sizeof buf, MSG_DONTWAIT, NULL, 0, NULL);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                return;
            if (got == 0 || (got < 0 && errno != EMSGSIZE)) {
                nib_control_drop(s, c);
                return;
            }
            char err[96];
            int type = got < 0 ? -1 : nib_ctl_parse(buf, (size_t)got, err, sizeof err);
            if (type < 0) {
                s->stats->ctl_malformed++;
                refuse(s, c, NIB_CTL_MALFORMED);
                return;
            }
            handle(s, c, type);
        }
        return;
    }
    if (revents & (POLLHUP | POLLERR | POLLNVAL))
        nib_control_drop(s, c);
}

static void accept_some(struct nib_server *s)
{
    for (int n = 0; n < ACCEPTS_PER_PASS; n++) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred cr;
        socklen_t len = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) {
            close(fd);
            continue;
        }
        if (!allowed(s, (uint32_t)cr.uid, (uint32_t)cr.gid)) {
            struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_REFUSED);
            m.status = NIB_CTL_DENIED;
            m.epoch = s->hdr->epoch;
            nib_ctl_send(fd, &m, NULL, 0, SEND_FLAGS);
            s->stats->attach_refused++;
            close(fd);
            continue;
        }
        int c = nib_control_adopt(s, fd, (uint32_t)cr.uid, (uint32_t)cr.gid, (uint32_t)cr.pid);
        /* A host sends ATTACH right after connecting: answer it in this
         * pass when it is already there (else the next pass reads it). */
        if (c >= 0)
            conn_event(s, c, POLLIN);
    }
}

int nib_control_pass(struct nib_server *s, int timeout_ms)
{
    struct pollfd pf[1 + NIB_CONNS_MAX];
    int who[1 + NIB_CONNS_MAX];
    nfds_t n = 0;
    if (s->listen_fd >= 0) {
        pf[n] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        who[n++] = -1;
    }
    for (int c = 0; c < NIB_CONNS_MAX; c++)
        if (s->conns[c].fd >= 0) {
            pf[n] = (struct pollfd){.fd = s->conns[c].fd, .events = POLLIN};
            who[n++] = c;
        }
    int ready = poll(pf, n, timeout_ms);
    int events = 0, listen_ready = 0;
    /* Connections first, new ones last: a host that hung up frees its ring
     * before an ATTACH accepted in the same pass looks for one. */
    for (nfds_t i = 0; ready > 0 && i < n; i++) {
        if (!pf[i].revents)
            continue;
        events++;
        if (who[i] < 0)
            listen_ready = 1;
        else if (s->conns[who[i]].fd == pf[i].fd)
            conn_event(s, who[i], pf[i].revents);
    }
    if (listen_ready)
        accept_some(s);
    /* Connections that never attached nor asked anything are closed. */
    uint64_t now = nib_now_ns();
    uint32_t waiting = 0;
    for (int c = 0; c < NIB_CONNS_MAX; c++) {
        struct nib_conn *k = &s->conns[c];
        if (k->fd < 0 || k->ring >= 0 || k->stopper)
            continue;
        if (now - k->since_ns > NIB_CONN_IDLE_NS)
            nib_control_drop(s, c);
        else
            waiting++;
    }
    s->conns_waiting = waiting;
    if (s->vm)
        events += nib_vm_link_pass(s);
    return events;
}
