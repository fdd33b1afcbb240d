/* libnibhost (protocol version 4) against
 *   - a hand-made appliance on a thread of this process: a listening socket
 *     in a private runtime directory, a sealed header memfd and sealed ring
 *     memfds, answering ATTACH/DETACH/STOP/KICK and serving requests with
 *     made-up tokens. Each hostile case changes one thing it hands over
 *     (header field, ring identity, seals, sizes, descriptors, reply), and
 *     the library must refuse it with a message naming what is wrong; the
 *     liveness cases stop its heartbeat or hang up its sockets, and the
 *     library must say GONE (never TIMEOUT: the wait's bound is far away);
 *   - the real serve loop (rt/serve.c, rt/control.c) on a thread, over the
 *     same kind of memfds and a real socket: submit, stream, wait, cancel,
 *     release, back-pressure, stop, fork, a prompt as large as the area.
 * Chat requests: what the library writes is checked by decoding it
 * (proto/chat_msg.h); what it refuses never reaches the ring. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model_blob/blob_view.h"
#include "proto/chat_msg.h"
#include "proto/ctl.h"
#include "proto/private/ctl_io.h"
#include "proto/private/sync.h"
#include "proto/shm_layout.h"
#include "proto/stats_layout.h"
#include "rt/serve.h"
#include "tests/common/test_util.h"
#include "tests/common/vision_blob.h"
#include "tools/host/nibhost.h"
#include "tools/host/nibhost_check.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define MAX_RINGS 3
#define NAME "hl"

static char dir[64], sock_path[96];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A private runtime directory for this test (NIB_RUNTIME_DIR). */
static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/nibhl-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(chmod(dir, 0700), 0);
    setenv("NIB_RUNTIME_DIR", dir, 1);
    snprintf(sock_path, sizeof sock_path, "%s/%s.sock", dir, NAME);
}

static void drop_dir(void)
{
    unlink(sock_path);
    rmdir(dir);
}

static int listen_at(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    return fd;
}

static void *map_memfd(const char *what, uint64_t size, int *fd_out)
{
    int fd = memfd_create(what, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_ptr_ne(p, MAP_FAILED);
    *fd_out = fd;
    return p;
}

/* ======================= the hand-made appliance ======================= */

enum tamper {
    T_NONE,
    T_HEADER_UNSEALED, /* header memfd without F_SEAL_FUTURE_WRITE */
    T_RING_UNSEALED,   /* ring memfd that could shrink */
    T_RING_SIZE,       /* reply's ring_size differs from the memfd */
    T_ONE_FD,          /* only the header descriptor */
    T_THREE_FDS,       /* one too many (the extra is closed, the reply refused) */
    T_FDS_SWAPPED,     /* ring first, header second */
    T_REPLY_MAGIC,     /* reply with a bad magic */
    T_REPLY_EPOCH,     /* reply's epoch differs from the header's */
    T_RING_MAGIC,      /* ring header not written */
    T_RING_EPOCH,      /* ring of another boot */
    T_REFUSE_NO_RING,
    T_REFUSE_NOT_READY,
    T_NO_ANSWER, /* reads ATTACH, never answers */
    T_HANG_UP,   /* closes the connection instead of answering */
};

static struct fake {
    int lfd, hfd;
    struct nib_shm_header *hdr; /* writable: this side is the appliance */
    struct nib_shm_header geo;  /* its own copy: tests scribble on hdr */
    int rfd[MAX_RINGS];
    uint8_t *ring[MAX_RINGS];
    int conn[MAX_RINGS + 4]; /* connections; -1 free */
    int conn_ring[MAX_RINGS + 4];
    int ring_conn[MAX_RINGS];
    int bad_hfd, bad_rfd; /* unsealed / wrong-size memfds for the tamper cases */
    pthread_t thr;
    volatile int stop, beat, serve, hang_up, deny_stop, tamper;
    volatile int kicks, detaches, attaches, stops, token_ms, served;
    struct nib_request last_req; /* the last request served, and its prompt bytes */
    uint8_t last_prompt[4096];
    uint32_t last_len;
} F;

static void fake_header(struct nib_shm_header *h)
{
    memset(h, 0, sizeof *h);
    h->magic = NIB_SHM_MAGIC;
    h->version = NIB_SHM_VERSION;
    h->header_size = sizeof *h;
    h->header_memfd_size = NIB_SHM_HEADER_MEMFD_SIZE;
    h->epoch = 4242;
    h->stats_offset = NIB_SHM_STATS_OFFSET;
    h->stats_size = sizeof(struct nib_stats);
    h->appliance_pid = (uint32_t)getpid();
    h->max_hosts = MAX_RINGS;
    h->vocab_size = 512;
    h->ctx_len = 256;
    h->bos_id = 1;
    h->eos_id = 2;
    h->add_bos = 1;
    h->errmsg_max = NIB_ERRMSG_MAX;
    nib_ring_geometry(h, 256, 8);
    h->heartbeat_ns = now_ns();
    h->state = NIB_APP_READY;
}

static void fake_reset_ring(int i)
{
    struct nib_ring_header *rh = (void *)F.ring[i];
    memset(F.ring[i], 0, F.geo.ring_size);
    rh->magic = NIB_RING_MAGIC;
    rh->epoch = F.geo.epoch;
    rh->host_index = (uint32_t)i;
    static uint32_t seq;
    rh->attach_seq = ++seq;
    if (F.tamper == T_RING_MAGIC)
        rh->magic = 0;
    if (F.tamper == T_RING_EPOCH)
        rh->epoch = 7;
}

static void fake_close(int c)
{
    close(F.conn[c]);
    F.conn[c] = -1;
    if (F.conn_ring[c] >= 0)
        F.ring_conn[F.conn_ring[c]] = -1;
    F.conn_ring[c] = -1;
}

static void fake_attach(int c)
{
    struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_ATTACHED);
    if (F.tamper == T_NO_ANSWER)
        return;
    if (F.tamper == T_HANG_UP)
        return fake_close(c);
    int i = -1;
    for (int k = 0; k < MAX_RINGS && i < 0; k++)
        if (F.ring_conn[k] < 0)
            i = k;
    if (i < 0 || F.tamper == T_REFUSE_NO_RING || F.tamper == T_REFUSE_NOT_READY) {
        m = nib_ctl_make(NIB_CTL_REFUSED);
        m.status = F.tamper == T_REFUSE_NOT_READY ? NIB_CTL_NOT_READY : NIB_CTL_NO_RING;
        nib_ctl_send(F.conn[c], &m, NULL, 0, MSG_NOSIGNAL);
        return;
    }
    fake_reset_ring(i);
    F.ring_conn[i] = c;
    F.conn_ring[c] = i;
    m.host_index = (uint32_t)i;
    m.epoch = F.geo.epoch;
    m.header_size = NIB_SHM_HEADER_MEMFD_SIZE;
    m.ring_size = F.geo.ring_size;
    int fds[3] = {F.hfd, F.rfd[i], F.hfd}, nfds = 2;
    switch (F.tamper) {
    case T_HEADER_UNSEALED: fds[0] = F.bad_hfd; break;
    case T_RING_UNSEALED: fds[1] = F.bad_rfd; break;
    case T_RING_SIZE: m.ring_size += 4096; break;
    case T_ONE_FD: nfds = 1; break;
    case T_THREE_FDS: nfds = 3; break;
    case T_FDS_SWAPPED: fds[0] = F.rfd[i], fds[1] = F.hfd; break;
    case T_REPLY_MAGIC: m.magic ^= 1; break;
    case T_REPLY_EPOCH: m.epoch++; break;
    default: break;
    }
    F.attaches++;
    nib_ctl_send(F.conn[c], &m, fds, nfds, MSG_NOSIGNAL);
}

static void fake_message(int c)
{
    struct nib_ctl_msg m;
    ssize_t n = recv(F.conn[c], &m, sizeof m, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN)
        return;
    if (n <= 0)
        return fake_close(c);
    char err[128];
    switch (nib_ctl_parse(&m, (size_t)n, err, sizeof err)) {
    case NIB_CTL_ATTACH: return fake_attach(c);
    case NIB_CTL_DETACH: F.detaches++; return;
    case NIB_CTL_KICK: F.kicks++; return;
    case NIB_CTL_STOP: {
        int deny = F.deny_stop;
        struct nib_ctl_msg r = nib_ctl_make(deny ? NIB_CTL_REFUSED : NIB_CTL_STOPPING);
        r.status = deny ? NIB_CTL_DENIED : 0;
        r.epoch = F.geo.epoch;
        nib_ctl_send(F.conn[c], &r, NULL, 0, MSG_NOSIGNAL);
        if (!deny) {
            F.stops++;
            nib_store_rel(&F.hdr->state, NIB_APP_STOPPING);
            F.hang_up = 1; /* "exits": every connection ends */
        }
        return;
    }
    default: return fake_close(c);
    }
}

/* Serve one request with made-up output: the prompt's bytes as ids after
 * BOS, then ids 100, 101, ...; text "t100 t101 ...". */
static void fake_serve(int i, uint32_t k)
{
    struct nib_shm_header *g = &F.geo;
    struct nib_slot *s = nib_ring_slot(F.ring[i], g, k);
    uint32_t expect = NIB_SLOT_SUBMITTED;
    if (!nib_cas(&s->state, &expect, NIB_SLOT_RUNNING))
        return;
    uint64_t ticket = s->ticket;
    F.last_req = s->req;
    F.last_len = s->req.prompt_len < sizeof F.last_prompt ? s->req.prompt_len : 0;
    memcpy(F.last_prompt, nib_slot_prompt(s, g), F.last_len);
    F.served++;
    uint32_t *tok = nib_slot_tokens(s, g), n = 0, max = s->req.max_tokens;
    char *text = nib_slot_text(s, g);
    tok[n++] = g->bos_id;
    for (uint32_t b = 0; b < s->req.prompt_len && n < 64; b++)
        tok[n++] = nib_slot_prompt(s, g)[b];
    nib_store_rel(&s->n_prompt, n);
    nib_store_rel(&s->n_tokens, n);
    s->t_start_ns = now_ns();
    uint32_t status = NIB_ST_OK, tl = 0;
    for (uint32_t j = 0; j < max; j++) {
        if (nib_load_acq(&s->cancel)) {
            status = NIB_ST_CANCELLED;
            break;
        }
        if (F.token_ms)
            sleep_ms(F.token_ms);
        tok[n] = 100 + j;
        nib_store_rel(&s->n_tokens, ++n);
        tl += (uint32_t)snprintf(text + tl, 16, "t%u ", 100 + j);
        nib_store_rel(&s->text_len, tl);
        if (j == 0)
            s->t_first_ns = now_ns();
    }
    s->status = status;
    s->t_done_ns = now_ns();
    s->served_ticket = ticket;
    nib_store_rel(&s->state, NIB_SLOT_DONE);
    struct nib_ring_header *rh = (void *)F.ring[i];
    __atomic_fetch_add(&rh->done_seq, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&rh->done_waiters, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &rh->done_seq, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void *fake_thread(void *arg)
{
    (void)arg;
    while (!F.stop) {
        if (F.beat)
            nib_store_rel(&F.hdr->heartbeat_ns, now_ns());
        if (F.hang_up) {
            for (int c = 0; c < MAX_RINGS + 4; c++)
                if (F.conn[c] >= 0)
                    fake_close(c);
            F.hang_up = 0;
        }
        struct pollfd p[1 + MAX_RINGS + 4];
        int np = 0;
        p[np++] = (struct pollfd){F.lfd, POLLIN, 0};
        for (int c = 0; c < MAX_RINGS + 4; c++)
            p[np++] = (struct pollfd){F.conn[c], POLLIN, 0};
        poll(p, (nfds_t)np, 1);
        if (p[0].revents & POLLIN) {
            int fd = accept4(F.lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
            int c = 0;
            while (c < MAX_RINGS + 4 && F.conn[c] >= 0)
                c++;
            if (fd >= 0 && c < MAX_RINGS + 4)
                F.conn[c] = fd;
            else if (fd >= 0)
                close(fd);
        }
        for (int c = 0; c < MAX_RINGS + 4; c++)
            if (F.conn[c] >= 0 && (p[1 + c].revents & (POLLIN | POLLHUP | POLLERR)))
                fake_message(c);
        for (int i = 0; F.serve && i < MAX_RINGS; i++)
            for (uint32_t k = 0; F.ring_conn[i] >= 0 && k < F.geo.n_slots; k++)
                if (nib_load_acq(&nib_ring_slot(F.ring[i], &F.geo, k)->state) == NIB_SLOT_SUBMITTED)
                    fake_serve(i, k);
    }
    return NULL;
}

static void fake_setup(void)
{
    memset(&F, 0, sizeof F);
    make_dir();
    F.hdr = map_memfd("nibble-header", NIB_SHM_HEADER_MEMFD_SIZE, &F.hfd);
    fake_header(F.hdr);
    F.geo = *F.hdr;
    ck_assert_int_eq(
        fcntl(F.hfd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
        0);
    for (int i = 0; i < MAX_RINGS; i++) {
        F.ring[i] = map_memfd("nibble-ring", F.hdr->ring_size, &F.rfd[i]);
        ck_assert_int_eq(fcntl(F.rfd[i], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
                         0);
        F.ring_conn[i] = -1;
    }
    void *p = map_memfd("unsealed-header", NIB_SHM_HEADER_MEMFD_SIZE, &F.bad_hfd);
    memcpy(p, F.hdr, NIB_SHM_HEADER_MEMFD_SIZE);
    munmap(p, NIB_SHM_HEADER_MEMFD_SIZE);
    munmap(map_memfd("unsealed-ring", F.hdr->ring_size, &F.bad_rfd), F.hdr->ring_size);
    for (int c = 0; c < MAX_RINGS + 4; c++)
        F.conn[c] = F.conn_ring[c] = -1;
    F.lfd = listen_at(sock_path);
    F.beat = F.serve = 1;
    ck_assert_int_eq(pthread_create(&F.thr, NULL, fake_thread, NULL), 0);
}

static void fake_teardown(void)
{
    F.stop = 1;
    pthread_join(F.thr, NULL);
    for (int c = 0; c < MAX_RINGS + 4; c++)
        if (F.conn[c] >= 0)
            close(F.conn[c]);
    for (int i = 0; i < MAX_RINGS; i++) {
        munmap(F.ring[i], F.hdr->ring_size);
        close(F.rfd[i]);
    }
    munmap(F.hdr, NIB_SHM_HEADER_MEMFD_SIZE);
    close(F.hfd);
    close(F.bad_hfd);
    close(F.bad_rfd);
    close(F.lfd);
    drop_dir();
}

static struct nib_host *attach_ok(void)
{
    struct nib_host *h;
    int rc = nib_host_attach(&h, NAME, 10000);
    ck_assert_msg(rc == NIB_HOST_OK, "attach: %s", nib_host_error(h));
    return h;
}

/* Attach must fail with rc and a message containing `want`. */
static void refused(int rc_want, const char *want)
{
    struct nib_host *h;
    int rc = nib_host_attach(&h, NAME, 3000);
    ck_assert_msg(rc == rc_want, "attach gave %d (%s), want %d (%s)", rc, nib_host_error(h),
                  rc_want, want);
    ck_assert_msg(strstr(nib_host_error(h), want), "error '%s' should mention '%s'",
                  nib_host_error(h), want);
    nib_host_detach(h);
}

static int count_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

START_TEST(no_appliance_is_a_clear_error)
{
    make_dir();
    refused(NIB_HOST_ERR, "no appliance named hl is running (no socket at");
    /* A socket file nobody listens on (an appliance that crashed). */
    int fd = listen_at(sock_path);
    close(fd);
    refused(NIB_HOST_ERR, "nothing listens");
    unlink(sock_path);
    /* Something else at the name. */
    fd = open(sock_path, O_CREAT | O_WRONLY, 0600);
    close(fd);
    refused(NIB_HOST_ERR, "is not a socket");
    unlink(sock_path);
    /* A runtime directory others can write. */
    fd = listen_at(sock_path);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    refused(NIB_HOST_ERR, "others can write");
    ck_assert_int_eq(chmod(dir, 0700), 0);
    close(fd);
    drop_dir();
    struct nib_host *h;
    ck_assert_int_eq(nib_host_attach(&h, "bad/name", 100), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "may only hold"));
    nib_host_detach(h);
    char err[256];
    ck_assert_int_eq(nib_host_stop_name("nosuch", 100, err, sizeof err), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(err, "no appliance named nosuch"));
}
END_TEST

START_TEST(attach_reads_the_header)
{
    int fds0 = count_fds();
    struct nib_host *h = attach_ok();
    ck_assert_uint_eq(nib_host_epoch(h), 4242);
    ck_assert_uint_eq(nib_host_vocab_size(h), 512);
    ck_assert_uint_eq(nib_host_ctx_len(h), 256);
    ck_assert_uint_eq(nib_host_slots(h), NIB_RING_SLOTS);
    ck_assert_uint_eq(nib_host_prompt_max(h), F.hdr->prompt_max);
    ck_assert_uint_eq(nib_host_slot_tokens(h), 256);
    ck_assert_uint_lt(nib_host_host_index(h), MAX_RINGS);
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_OK);
    ck_assert_int_eq(F.attaches, 1);
    nib_host_detach(h);
    for (int i = 0; i < 200 && !F.detaches; i++)
        sleep_ms(5);
    ck_assert_int_eq(F.detaches, 1);
    /* The socket and both memfds closed (once the appliance closed its end
     * of the connection too). */
    for (int i = 0; i < 200 && count_fds() != fds0; i++)
        sleep_ms(5);
    ck_assert_int_eq(count_fds(), fds0);
}
END_TEST

START_TEST(everything_handed_over_is_checked)
{
    static const struct {
        int tamper, rc;
        const char *want;
    } cases[] = {
        {T_HEADER_UNSEALED, NIB_HOST_ERR, "header memfd is not sealed"},
        {T_RING_UNSEALED, NIB_HOST_ERR, "ring memfd is not sealed"},
        {T_RING_SIZE, NIB_HOST_ERR, "the ring memfd has"},
        {T_ONE_FD, NIB_HOST_ERR, "malformed ATTACHED reply (1 descriptors"},
        {T_THREE_FDS, NIB_HOST_ERR, "malformed ATTACHED reply"},
        {T_FDS_SWAPPED, NIB_HOST_ERR, "memfd has"},
        {T_REPLY_MAGIC, NIB_HOST_ERR, "malformed reply"},
        {T_REPLY_EPOCH, NIB_HOST_ERR, "epoch 4242, the reply said 4243"},
        {T_RING_MAGIC, NIB_HOST_ERR, "ring that is not nibble's"},
        {T_RING_EPOCH, NIB_HOST_ERR, "not this boot's"},
        {T_REFUSE_NO_RING, NIB_HOST_BUSY, "every host ring is attached"},
        {T_REFUSE_NOT_READY, NIB_HOST_ERR, "stopping"},
        {T_NO_ANSWER, NIB_HOST_TIMEOUT, "did not answer ATTACH in time"},
        {T_HANG_UP, NIB_HOST_GONE, "closed the connection"},
    };
    int fds0 = count_fds();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        F.tamper = cases[i].tamper;
        refused(cases[i].rc, cases[i].want);
        F.tamper = T_NONE;
        F.hang_up = 1; /* forget that connection's ring */
        for (int k = 0; k < 200 && F.hang_up; k++)
            sleep_ms(2);
    }
    ck_assert_int_eq(count_fds(), fds0); /* nothing received was left open */
    struct nib_host *h = attach_ok();    /* and a good one still attaches */
    nib_host_detach(h);
}
END_TEST

/* Every header field a host relies on, made wrong one at a time (through
 * the appliance's own writable mapping, as a buggy appliance would). */
START_TEST(inconsistent_header_refused_field_by_field)
{
    struct {
        size_t off, width;
        uint64_t value;
        const char *want;
    } cases[] = {
        {offsetof(struct nib_shm_header, magic), 8, 1, "bad magic"},
        {offsetof(struct nib_shm_header, version), 4, 3, "speaks protocol version 3"},
        {offsetof(struct nib_shm_header, version), 4, 5, "speaks protocol version 5"},
        {offsetof(struct nib_shm_header, header_size), 4, 128, "header_size"},
        {offsetof(struct nib_shm_header, header_memfd_size), 8, 8192, "header_memfd_size"},
        {offsetof(struct nib_shm_header, epoch), 8, 0, "epoch 0"},
        {offsetof(struct nib_shm_header, stats_offset), 8, 8, "stats_offset"},
        {offsetof(struct nib_shm_header, stats_size), 4, 1u << 20, "stats_size"},
        {offsetof(struct nib_shm_header, max_hosts), 4, 0, "max_hosts"},
        {offsetof(struct nib_shm_header, max_hosts), 4, NIB_HOSTS_MAX + 1, "max_hosts"},
        {offsetof(struct nib_shm_header, vocab_size), 4, 0, "vocab_size"},
        {offsetof(struct nib_shm_header, ctx_len), 4, 0, "ctx_len"},
        {offsetof(struct nib_shm_header, bos_id), 4, 512, "bos_id"},
        {offsetof(struct nib_shm_header, eos_id), 4, 99999, "eos_id"},
        {offsetof(struct nib_shm_header, add_bos), 4, 7, "add_bos"},
        {offsetof(struct nib_shm_header, errmsg_max), 4, 4096, "errmsg_max"},
        {offsetof(struct nib_shm_header, ring_size), 8, 1ull << 40, "ring_size differs"},
        {offsetof(struct nib_shm_header, ring_header_size), 4, 64, "ring_header_size"},
        {offsetof(struct nib_shm_header, n_slots), 4, 0, "n_slots"},
        {offsetof(struct nib_shm_header, n_slots), 4, NIB_RING_SLOTS + 1, "n_slots"},
        {offsetof(struct nib_shm_header, slots_offset), 8, 8, "slots_offset"},
        {offsetof(struct nib_shm_header, slots_offset), 8, 1ull << 40, "slots beyond"},
        {offsetof(struct nib_shm_header, slot_size), 8, 64, "slot_size"},
        {offsetof(struct nib_shm_header, slot_size), 8, 1ull << 62, "slot_size"},
        {offsetof(struct nib_shm_header, prompt_offset), 4, 0, "prompt area"},
        {offsetof(struct nib_shm_header, prompt_max), 4, 1u << 30, "prompt area"},
        {offsetof(struct nib_shm_header, tokens_offset), 4, 400, "token area"},
        {offsetof(struct nib_shm_header, slot_tokens), 4, 0, "token area"},
        {offsetof(struct nib_shm_header, slot_tokens), 4, 0xFFFFFFFFu, "token area"},
        {offsetof(struct nib_shm_header, text_offset), 4, 0xFFFFFFF0u, "text area"},
        {offsetof(struct nib_shm_header, slot_text), 4, 0, "text area"},
        {offsetof(struct nib_shm_header, slot_text), 4, 0x7FFFFFFF, "text area"},
        {offsetof(struct nib_shm_header, state), 4, NIB_APP_STOPPED, "not ready (it is stopped)"},
        {offsetof(struct nib_shm_header, state), 4, 9, "unknown state"},
    };
    struct nib_shm_header good;
    memcpy(&good, F.hdr, sizeof good);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *p = (uint8_t *)F.hdr + cases[i].off;
        if (cases[i].width == 4) {
            uint32_t v = (uint32_t)cases[i].value;
            memcpy(p, &v, 4);
        } else {
            memcpy(p, &cases[i].value, 8);
        }
        if (cases[i].off == offsetof(struct nib_shm_header, epoch))
            F.tamper = T_REPLY_EPOCH; /* the reply says 1 */
        refused(NIB_HOST_ERR, cases[i].want);
        F.tamper = T_NONE;
        memcpy(F.hdr, &good, sizeof good);
        F.hang_up = 1;
        for (int k = 0; k < 200 && F.hang_up; k++)
            sleep_ms(2);
    }
    struct nib_host *h = attach_ok();
    nib_host_detach(h);
}
END_TEST

START_TEST(stale_heartbeat_at_attach_is_gone)
{
    F.beat = 0;
    nib_store_rel(&F.hdr->heartbeat_ns, now_ns() - NIB_HEARTBEAT_STALE_NS - 1000000);
    refused(NIB_HOST_GONE, "is not responding");
}
END_TEST

START_TEST(submit_wait_release)
{
    struct nib_host *h = attach_ok();
    struct nib_gen_params p = {.max_tokens = 5, .request_id = 0xABCDEF};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "hey", 3, &p, &r), NIB_HOST_OK);
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert(pr.done);
    ck_assert_uint_eq(pr.status, NIB_ST_OK);
    ck_assert_uint_eq(pr.request_id, 0xABCDEF);
    ck_assert_uint_eq(pr.n_prompt, 4);
    ck_assert_uint_eq(pr.n_tokens, 9);
    ck_assert_uint_eq(pr.tokens[1], 'h');
    ck_assert_uint_eq(pr.tokens[8], 104);
    ck_assert_uint_eq(pr.text_len, 25);
    ck_assert(!memcmp(pr.text, "t100 t101 t102 t103 t104 ", 25));
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_ERR); /* twice */
    ck_assert_int_eq(nib_host_poll(h, &r, &pr), NIB_HOST_ERR);
    /* Tickets grow; the slot's ticket is the ring's counter. */
    struct nib_req_handle r2;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r2), NIB_HOST_OK);
    ck_assert_uint_gt(r2.ticket, r.ticket);
    ck_assert_int_eq(nib_host_wait(h, &r2, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r2), NIB_HOST_OK);
    /* Arguments the appliance would refuse are refused here first. */
    uint32_t bad = 100000;
    p.prompt_ids = 1;
    ck_assert_int_eq(nib_host_submit(h, &bad, 1, &p, &r), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "vocabulary"));
    ck_assert_int_eq(nib_host_submit(h, &bad, 0, &p, &r), NIB_HOST_ERR);
    p.prompt_ids = 0;
    p.temperature = -1;
    ck_assert_int_eq(nib_host_submit(h, "x", 1, &p, &r), NIB_HOST_ERR);
    p.temperature = 0;
    p.max_tokens = nib_host_slot_tokens(h) + 1;
    ck_assert_int_eq(nib_host_submit(h, "x", 1, &p, &r), NIB_HOST_ERR);
    p.max_tokens = 1;
    static char big[1u << 20];
    ck_assert_int_eq(nib_host_submit(h, big, nib_host_prompt_max(h) + 1, &p, &r), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "the limit is"));
    nib_host_detach(h);
}
END_TEST

/* A conversation as the library writes it: decoded back, field by field;
 * the special flag on text and chat; what the appliance would refuse is
 * refused before anything reaches the ring. */
START_TEST(chat_and_special_requests)
{
    struct nib_host *h = attach_ok();
    const struct nib_chat_msg msgs[] = {
        {"system", "Be brief.", 0},
        {"user", "a\0b<|im_end|>", 14}, /* explicit length: a NUL inside */
        {"assistant", NULL, 0},
        {"user", "\xc3\xa9", 0},
    };
    struct nib_gen_params p = {.max_tokens = 2, .special = 1, .now_s = 1234567};
    struct nib_req_handle r;
    struct nib_progress pr;
    /* The header says the model has no chat template: refused here. */
    ck_assert_int_eq(nib_host_has_chat(h), 0);
    ck_assert_int_eq(nib_host_submit_chat(h, msgs, 4, &p, &r), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "chat template"));
    nib_host_detach(h);
    F.hdr->features = NIB_FEAT_CHAT;
    h = attach_ok();
    ck_assert_int_eq(nib_host_has_chat(h), 1);
    ck_assert_int_eq(nib_host_submit_chat(h, msgs, 4, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    ck_assert_uint_eq(F.last_req.kind, NIB_REQ_KIND_CHAT);
    ck_assert_uint_eq(F.last_req.flags, NIB_REQ_SPECIAL);
    ck_assert_uint_eq(F.last_req.prompt_len, nib_host_chat_size(msgs, 4));
    struct nib_chat_head head;
    struct nib_chat_part parts[8];
    char err[128];
    ck_assert_msg(nib_chat_decode(F.last_prompt, F.last_len, &head, parts, 8, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_uint_eq(head.n_messages, 4);
    ck_assert_uint_eq(head.flags, NIB_CHAT_ADD_GENERATION_PROMPT);
    ck_assert(head.now_s == 1234567);
    ck_assert_uint_eq(parts[1].content_len, 14);
    ck_assert_mem_eq(parts[1].content, "a\0b<|im_end|>", 14);
    ck_assert_uint_eq(parts[2].content_len, 0);
    ck_assert_uint_eq(parts[2].role_len, 9);
    ck_assert_mem_eq(parts[3].content, "\xc3\xa9", 2);
    /* No generation prompt, the appliance's clock, no special. */
    p = (struct nib_gen_params){.max_tokens = 1, .no_generation_prompt = 1};
    ck_assert_int_eq(nib_host_submit_chat(h, msgs, 1, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    ck_assert_uint_eq(F.last_req.flags, 0);
    ck_assert_int_eq(nib_chat_decode(F.last_prompt, F.last_len, &head, parts, 8, err, sizeof err),
                     0);
    ck_assert_uint_eq(head.flags, 0);
    ck_assert(head.now_s == 0);
    /* The special flag on a text request. */
    p = (struct nib_gen_params){.max_tokens = 1, .special = 1, .no_bos = 1};
    ck_assert_int_eq(nib_host_submit(h, "<|eot_id|>", 10, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    ck_assert_uint_eq(F.last_req.kind, NIB_REQ_KIND_TEXT);
    ck_assert_uint_eq(F.last_req.flags, NIB_REQ_SPECIAL | NIB_REQ_NO_BOS);
    /* Refused before sending: nothing more is served. */
    int served = F.served;
    static char big[1u << 20];
    memset(big, 'x', sizeof big);
    struct nib_chat_msg large[] = {
        {"user", big, nib_host_prompt_max(h) - NIB_CHAT_HEADER_SIZE - 12}};
    p = (struct nib_gen_params){.max_tokens = 1};
    ck_assert_uint_eq(nib_host_chat_size(large, 1), nib_host_prompt_max(h));
    ck_assert_int_eq(nib_host_submit_chat(h, large, 1, &p, &r), NIB_HOST_OK); /* exactly fits */
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    served++;
    large[0].content_len++;
    ck_assert_int_eq(nib_host_submit_chat(h, large, 1, &p, &r), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "the limit is"));
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "not sent"));
    const struct nib_chat_msg bad_roles[][1] = {
        {{"", "x", 0}},
        {{NULL, "x", 0}},
        {{"us er", "x", 0}},
        {{"r\xc3\xa9le", "x", 0}},
        {{"a234567890123456789012345678901234567890123456789"
          "0123456789012345",
          "x", 0}}};
    for (size_t i = 0; i < sizeof bad_roles / sizeof bad_roles[0]; i++) {
        ck_assert_int_eq(nib_host_submit_chat(h, bad_roles[i], 1, &p, &r), NIB_HOST_ERR);
        ck_assert_ptr_nonnull(strstr(nib_host_error(h), "role"));
        ck_assert_uint_eq(nib_host_chat_size(bad_roles[i], 1), 0);
    }
    p.prompt_ids = 1;
    ck_assert_int_eq(nib_host_submit_chat(h, msgs, 1, &p, &r), NIB_HOST_ERR);
    p.prompt_ids = 0;
    p.now_s = -5;
    ck_assert_int_eq(nib_host_submit_chat(h, msgs, 1, &p, &r), NIB_HOST_ERR);
    ck_assert_int_eq(nib_host_submit_chat(h, msgs, NIB_CHAT_MESSAGES_MAX + 1, &p, &r),
                     NIB_HOST_ERR);
    sleep_ms(20);
    ck_assert_int_eq(F.served, served);
    nib_host_detach(h);
}
END_TEST

START_TEST(full_ring_is_busy_and_waits_are_bounded)
{
    F.serve = 0;
    struct nib_host *h = attach_ok();
    struct nib_req_handle r[NIB_RING_SLOTS + 1];
    struct nib_gen_params p = {.max_tokens = 2};
    for (int i = 0; i < NIB_RING_SLOTS; i++) {
        p.request_id = (uint64_t)i;
        ck_assert_int_eq(nib_host_submit(h, "abc", 3, &p, &r[i]), NIB_HOST_OK);
    }
    ck_assert_int_eq(nib_host_submit(h, "abc", 3, &p, &r[NIB_RING_SLOTS]), NIB_HOST_BUSY);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "busy"));
    p.busy_wait_ms = 30;
    ck_assert_int_eq(nib_host_submit(h, "abc", 3, &p, &r[NIB_RING_SLOTS]), NIB_HOST_BUSY);
    /* Nothing served yet: a wait times out, and says so. */
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r[0], NIB_HOST_WAIT_DONE, 20, &pr), NIB_HOST_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "not finished"));
    ck_assert_int_eq(nib_host_wait(h, &r[0], 0, 20, &pr), NIB_HOST_TIMEOUT);
    ck_assert_int_eq(nib_host_release(h, &r[0]), NIB_HOST_ERR); /* not done */
    F.serve = 1;
    for (int i = 0; i < NIB_RING_SLOTS; i++) {
        ck_assert_int_eq(nib_host_wait(h, &r[i], NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
        ck_assert_uint_eq(pr.request_id, (uint64_t)i);
        ck_assert_int_eq(nib_host_release(h, &r[i]), NIB_HOST_OK);
    }
    nib_host_detach(h);
}
END_TEST

START_TEST(streaming_wait_and_cancel)
{
    F.token_ms = 2;
    struct nib_host *h = attach_ok();
    struct nib_gen_params p = {.max_tokens = 200};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "x", 1, &p, &r), NIB_HOST_OK);
    struct nib_progress pr;
    uint32_t seen = 0;
    int steps = 0;
    /* Each wait returns as soon as there is more than we saw. */
    while (steps < 5) {
        ck_assert_int_eq(nib_host_wait(h, &r, seen, 10000, &pr), NIB_HOST_OK);
        ck_assert(pr.done || pr.n_tokens > seen);
        ck_assert(!pr.done);
        if (pr.n_tokens > pr.n_prompt)
            steps++;
        seen = pr.n_tokens;
    }
    ck_assert_int_eq(nib_host_cancel(h, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_uint_eq(pr.status, NIB_ST_CANCELLED);
    ck_assert_uint_lt(pr.n_tokens - pr.n_prompt, 200);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    nib_host_detach(h);
}
END_TEST

START_TEST(kick_only_when_sleeping)
{
    struct nib_host *h = attach_ok();
    struct nib_gen_params p = {.max_tokens = 1};
    struct nib_req_handle r;
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    nib_host_release(h, &r);
    F.hdr->sleeping = 1;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    nib_host_release(h, &r);
    for (int i = 0; i < 200 && !F.kicks; i++)
        sleep_ms(5);
    ck_assert_int_eq(F.kicks, 1);
    nib_host_detach(h);
}
END_TEST

START_TEST(stale_heartbeat_is_gone)
{
    F.serve = 0;
    struct nib_host *h = attach_ok();
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_OK);
    /* The appliance stops beating (stopped, stuck): within
     * NIB_HEARTBEAT_STALE_NS plus a check the wait says GONE; its own bound
     * (60 s) is far away. */
    F.beat = 0;
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 60000, &pr), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "not responding"));
    /* The handle stays gone. */
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_GONE);
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_GONE);
    nib_host_detach(h);
}
END_TEST

START_TEST(hung_up_socket_is_gone)
{
    F.serve = 0;
    struct nib_host *h = attach_ok();
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r[2];
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r[0]), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r[1]), NIB_HOST_OK);
    F.hang_up = 1; /* as when the appliance exits: the kernel closes its end */
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r[0], NIB_HOST_WAIT_DONE, 60000, &pr), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "exited"));
    /* A streaming wait too, and a submit. */
    ck_assert_int_eq(nib_host_wait(h, &r[1], 0, 60000, &pr), NIB_HOST_GONE);
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r[0]), NIB_HOST_GONE);
    /* Requests of a gone handle can be released (nobody serves them). */
    ck_assert_int_eq(nib_host_release(h, &r[1]), NIB_HOST_OK);
    nib_host_detach(h);
}
END_TEST

START_TEST(stopping_state_is_gone)
{
    F.serve = 0;
    struct nib_host *h = attach_ok();
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_OK);
    nib_store_rel(&F.hdr->state, NIB_APP_STOPPING);
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 60000, &pr), NIB_HOST_GONE);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "stopping"));
    nib_host_detach(h);
}
END_TEST

START_TEST(stop_over_the_socket)
{
    /* Every ring taken, and the header scribbled: stop needs neither. */
    struct nib_host *hs[MAX_RINGS];
    for (int i = 0; i < MAX_RINGS; i++)
        hs[i] = attach_ok();
    refused(NIB_HOST_BUSY, "every host ring is attached");
    F.deny_stop = 1;
    char err[256];
    ck_assert_int_eq(nib_host_stop_name(NAME, 5000, err, sizeof err), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(err, "refused to stop"));
    F.deny_stop = 0;
    F.hdr->magic = 0;
    ck_assert_int_eq(nib_host_stop_name(NAME, 5000, err, sizeof err), NIB_HOST_OK);
    ck_assert_int_eq(F.stops, 1);
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(hs[0], "a", 1, &p, &r), NIB_HOST_GONE);
    for (int i = 0; i < MAX_RINGS; i++)
        nib_host_detach(hs[i]);
}
END_TEST

START_TEST(stop_through_a_handle)
{
    struct nib_host *h = attach_ok();
    ck_assert_int_eq(nib_host_stop(h, 5000), NIB_HOST_OK);
    ck_assert_int_eq(F.stops, 1);
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_GONE);
    nib_host_detach(h);
}
END_TEST

START_TEST(stop_times_out_when_nobody_answers)
{
    /* A listener that never accepts: connect succeeds (backlog), STOP is
     * never answered: the bound holds. */
    F.stop = 1;
    pthread_join(F.thr, NULL);
    F.stop = 0;
    char err[256];
    ck_assert_int_eq(nib_host_stop_name(NAME, 200, err, sizeof err), NIB_HOST_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(err, "did not answer STOP in time"));
    struct nib_host *h;
    ck_assert_int_eq(nib_host_attach(&h, NAME, 200), NIB_HOST_TIMEOUT);
    nib_host_detach(h);
    ck_assert_int_eq(pthread_create(&F.thr, NULL, fake_thread, NULL), 0);
}
END_TEST

START_TEST(forked_child_attaches_afresh)
{
    F.token_ms = 1;
    struct nib_host *h = attach_ok();
    uint32_t parent_ring = nib_host_host_index(h);
    struct nib_gen_params p = {.max_tokens = 20};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "parent", 6, &p, &r), NIB_HOST_OK);
    pid_t child = fork();
    if (child == 0) {
        /* The parent's request handle means nothing here; the first call
         * attaches this process to its own ring. */
        struct nib_progress pr;
        int code = 0;
        if (nib_host_poll(h, &r, &pr) != NIB_HOST_ERR)
            code |= 1;
        if (nib_host_host_index(h) == parent_ring)
            code |= 2;
        struct nib_req_handle c;
        struct nib_gen_params q = {.max_tokens = 3};
        if (nib_host_submit(h, "kid", 3, &q, &c) != NIB_HOST_OK ||
            nib_host_wait(h, &c, NIB_HOST_WAIT_DONE, 10000, &pr) != NIB_HOST_OK ||
            pr.n_tokens != 7 || pr.tokens[1] != 'k' || nib_host_release(h, &c) != NIB_HOST_OK)
            code |= 4;
        nib_host_detach(h);
        _exit(code);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
    ck_assert_int_eq(F.attaches, 2);
    /* The parent's ring, connection and request are untouched. */
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_uint_eq(pr.status, NIB_ST_OK);
    ck_assert_uint_eq(pr.tokens[1], 'p');
    ck_assert_uint_eq(pr.n_tokens, 7 + 20);
    ck_assert_uint_eq(nib_host_host_index(h), parent_ring);
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    nib_host_detach(h);
}
END_TEST

START_TEST(the_memfds_cannot_be_resized_or_written)
{
    /* What any host gets: check the kernel refuses what the protocol says
     * it refuses (a library that mapped these can never SIGBUS). */
    struct nib_host *h = attach_ok();
    ck_assert_int_ne(ftruncate(F.hfd, 0), 0);
    ck_assert_int_ne(ftruncate(F.rfd[0], 0), 0);
    ck_assert_int_ne(ftruncate(F.rfd[0], (off_t)F.hdr->ring_size * 2), 0);
    ck_assert(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, F.hfd, 0) == MAP_FAILED);
    ck_assert_int_ne(fcntl(F.rfd[0], F_ADD_SEALS, F_SEAL_WRITE), 0);
    ck_assert_int_lt(pwrite(F.hfd, "x", 1, 0), 0);
    nib_host_detach(h);
}
END_TEST

/* ======================= the real serve loop ======================= */

static uint8_t *blob, *mem, *scratch;
static size_t blob_size;
static struct nib_blob_view view;
static struct nib_server srv;
static int hfd, rfds[MAX_RINGS], lfd;
static void *hmap, *rmaps[MAX_RINGS];
static pthread_t srv_thr;
static volatile int srv_stop;
static int srv_running;

static void *serve_thread(void *arg)
{
    (void)arg;
    while (!srv_stop && !nib_server_stopping(&srv))
        if (!nib_server_poll(&srv))
            nib_server_idle(&srv, 100000);
    if (nib_server_stopping(&srv))
        nib_server_shutdown(&srv);
    return NULL;
}

static void live_setup(void)
{
    char err[256];
    make_dir();
    blob = tu_read_file(tu_env_path("NIB_TEST_BLOB"), &blob_size);
    ck_assert_int_eq(nib_blob_open(&view, blob, blob_size, 1, err, sizeof err), 0);
    mem = aligned_alloc(64, (view.mem_size + 63) & ~63ull);
    scratch = aligned_alloc(64, (nib_server_scratch_footprint(&view) + 63) & ~63ull);
    hmap = map_memfd("nibble-header", NIB_SHM_HEADER_MEMFD_SIZE, &hfd);
    memset(&srv, 0, sizeof srv);
    nib_server_init(&srv, &view, mem, scratch, hmap, MAX_RINGS, (uint32_t)getpid(), 42);
    for (int i = 0; i < MAX_RINGS; i++) {
        rmaps[i] = map_memfd("nibble-ring", srv.hdr->ring_size, &rfds[i]);
        ck_assert_int_eq(fcntl(rfds[i], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
        nib_server_set_ring(&srv, (uint32_t)i, rmaps[i], rfds[i]);
    }
    ck_assert_int_eq(
        fcntl(hfd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
        0);
    srv.header_fd = hfd;
    lfd = listen_at(sock_path);
    srv.listen_fd = lfd;
    srv.uid = (uint32_t)getuid();
    srv.gid = (uint32_t)getgid();
    srv.hdr->heartbeat_ns = nib_now_ns();
    nib_store_rel(&srv.hdr->state, NIB_APP_READY);
    srv_stop = 0;
    ck_assert_int_eq(pthread_create(&srv_thr, NULL, serve_thread, NULL), 0);
    srv_running = 1;
}

static void live_teardown(void)
{
    srv_stop = 1;
    if (srv_running)
        pthread_join(srv_thr, NULL);
    for (int c = 0; c < NIB_CONNS_MAX; c++)
        if (srv.conns[c].fd >= 0 && srv.conns[c].fd != 0)
            close(srv.conns[c].fd);
    close(lfd);
    for (int i = 0; i < MAX_RINGS; i++) {
        munmap(rmaps[i], srv.hdr->ring_size);
        close(rfds[i]);
    }
    munmap(hmap, NIB_SHM_HEADER_MEMFD_SIZE);
    close(hfd);
    drop_dir();
    free(blob);
    free(mem);
    free(scratch);
}

START_TEST(live_submit_stream_release)
{
    struct nib_host *h = attach_ok();
    ck_assert_uint_eq(nib_host_epoch(h), 42);
    ck_assert_uint_eq(nib_host_vocab_size(h), view.h->hp.vocab_size);
    struct nib_gen_params p = {.max_tokens = 6, .request_id = 0xABCDEF};
    struct nib_req_handle r;
    ck_assert_int_eq(nib_host_submit(h, "Once upon", 9, &p, &r), NIB_HOST_OK);
    struct nib_progress pr;
    uint32_t seen = 0;
    do
        ck_assert_int_eq(nib_host_wait(h, &r, seen, 10000, &pr), NIB_HOST_OK);
    while (!pr.done && (seen = pr.n_tokens, 1));
    ck_assert(pr.status == NIB_ST_OK || pr.status == NIB_ST_EOS);
    ck_assert_uint_eq(pr.request_id, 0xABCDEF);
    ck_assert_uint_eq(pr.tokens[0], view.h->hp.bos_id);
    ck_assert_uint_le(pr.n_tokens - pr.n_prompt, 6);
    ck_assert_uint_ge(pr.t_done_ns, pr.t_start_ns);
    /* The same prompt as ids gives the same continuation. */
    uint32_t ids[64], gen[8];
    uint32_t n_ids = pr.n_prompt, n_gen = pr.n_tokens - pr.n_prompt;
    memcpy(ids, pr.tokens, n_ids * 4);
    memcpy(gen, pr.tokens + n_ids, n_gen * 4);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    p.prompt_ids = 1;
    p.no_bos = 1;
    ck_assert_int_eq(nib_host_submit(h, ids, n_ids, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_uint_eq(pr.n_prompt, n_ids);
    ck_assert_uint_eq(pr.n_tokens - pr.n_prompt, n_gen);
    ck_assert_mem_eq(pr.tokens + n_ids, gen, n_gen * 4);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    const struct nib_stats *st = nib_host_stats(h);
    ck_assert_uint_eq(st->requests_done, 2);
    ck_assert_uint_eq(st->attaches, 1);
    nib_host_detach(h);
}
END_TEST

/* A prompt as large as the prompt area (at least 64 KiB) is sent and
 * answered: served, or refused naming the context, within bounds; one byte
 * more is refused by the library. */
START_TEST(live_prompt_at_the_limit)
{
    struct nib_host *h = attach_ok();
    uint32_t max = nib_host_prompt_max(h);
    ck_assert_uint_ge(max, 65536);
    static char big[1u << 20];
    for (uint32_t i = 0; i < max; i++)
        big[i] = "Once upon a time "[i % 17];
    struct nib_gen_params p = {.max_tokens = 1};
    struct nib_req_handle r;
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_submit(h, big, max, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr), NIB_HOST_OK);
    if (pr.status == NIB_ST_BAD_REQUEST)
        ck_assert_msg(strstr(pr.error, "context"), "error: %s", pr.error);
    else
        ck_assert_msg(pr.status == NIB_ST_OK || pr.status == NIB_ST_EOS, "status %s",
                      nib_status_name(pr.status));
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_submit(h, big, max + 1, &p, &r), NIB_HOST_ERR);
    ck_assert_ptr_nonnull(strstr(nib_host_error(h), "not sent"));
    nib_host_detach(h);
}
END_TEST

START_TEST(live_busy_cancel_and_all_slots_again)
{
    struct nib_host *h = attach_ok();
    uint32_t n = nib_host_slots(h);
    struct nib_req_handle r[NIB_RING_SLOTS + 1];
    struct nib_gen_params p = {.max_tokens = 200};
    for (uint32_t i = 0; i < n; i++)
        ck_assert_int_eq(nib_host_submit(h, "Once upon a time", 16, &p, &r[i]), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_submit(h, "x", 1, &p, &r[n]), NIB_HOST_BUSY);
    struct nib_progress pr;
    for (uint32_t i = 0; i < n; i++)
        ck_assert_int_eq(nib_host_cancel(h, &r[i]), NIB_HOST_OK);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_int_eq(nib_host_wait(h, &r[i], NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
        ck_assert_msg(pr.status == NIB_ST_CANCELLED || pr.status == NIB_ST_EOS ||
                          pr.status == NIB_ST_OK || pr.status == NIB_ST_CTX_FULL,
                      "status %s", nib_status_name(pr.status));
        ck_assert_int_eq(nib_host_release(h, &r[i]), NIB_HOST_OK);
    }
    p.max_tokens = 1;
    for (uint32_t i = 0; i < n; i++)
        ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r[i]), NIB_HOST_OK);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_int_eq(nib_host_wait(h, &r[i], NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
        ck_assert_int_eq(nib_host_release(h, &r[i]), NIB_HOST_OK);
    }
    nib_host_detach(h);
}
END_TEST

START_TEST(live_rings_are_per_host_and_come_back)
{
    struct nib_host *hs[MAX_RINGS];
    int seen[MAX_RINGS] = {0};
    for (int i = 0; i < MAX_RINGS; i++) {
        hs[i] = attach_ok();
        seen[nib_host_host_index(hs[i])]++;
    }
    for (int i = 0; i < MAX_RINGS; i++)
        ck_assert_int_eq(seen[i], 1);
    refused(NIB_HOST_BUSY, "every host ring is attached");
    nib_host_detach(hs[1]); /* its ring goes back to the pool */
    struct nib_host *again = NULL;
    for (int i = 0; i < 500; i++) {
        if (nib_host_attach(&again, NAME, 10000) == NIB_HOST_OK)
            break;
        nib_host_detach(again);
        again = NULL;
        sleep_ms(10);
    }
    ck_assert_ptr_nonnull(again);
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r;
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_submit(again, "a", 1, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(again, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    nib_host_detach(again);
    nib_host_detach(hs[0]);
    nib_host_detach(hs[2]);
}
END_TEST

START_TEST(live_stop_ends_queued_requests)
{
    struct nib_host *h = attach_ok();
    struct nib_gen_params p = {.max_tokens = 1};
    struct nib_req_handle r;
    struct nib_progress pr;
    ck_assert_int_eq(nib_host_submit(h, "a", 1, &p, &r), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 10000, &pr), NIB_HOST_OK);
    ck_assert_int_eq(nib_host_release(h, &r), NIB_HOST_OK);
    char err[256];
    /* The serve thread shuts down; it does not exit, so the connection
     * stays open: the stop waits for STOPPING, then for the end, bounded. */
    int rc = nib_host_stop_name(NAME, 2000, err, sizeof err);
    ck_assert_msg(rc == NIB_HOST_OK || rc == NIB_HOST_TIMEOUT, "stop: %d %s", rc, err);
    if (rc == NIB_HOST_TIMEOUT)
        ck_assert_ptr_nonnull(strstr(err, "did not exit in time"));
    pthread_join(srv_thr, NULL);
    srv_running = 0;
    ck_assert_uint_eq(nib_load_acq(&srv.hdr->state), NIB_APP_STOPPED);
    ck_assert_int_eq(nib_host_check(h), NIB_HOST_GONE);
    nib_host_detach(h);
}
END_TEST

/* A vision appliance's header and tensor table (made by the serve loop
 * from the identity blob), accepted; each lie in them refused, naming it. */
START_TEST(vision_header_and_tensor_table_checked)
{
    uint8_t *b = aligned_alloc(64, NIB_TEST_VISION_BLOB_SIZE);
    size_t n = nib_test_vision_blob(b, NIB_TEST_VISION_TWO);
    struct nib_blob_view v;
    char err[320];
    ck_assert_int_eq(nib_blob_open(&v, b, n, 1, err, sizeof err), 0);
    uint8_t *mem = aligned_alloc(64, (v.mem_size + 63) & ~63ull);
    uint8_t *scratch = aligned_alloc(64, nib_server_scratch_footprint(&v));
    uint8_t *page = aligned_alloc(4096, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    memset(page, 0, NIB_SHM_HEADER_MEMFD_SIZE_TENSOR);
    static struct nib_server srv;
    nib_server_init(&srv, &v, mem, scratch, page, 2, 1, 77);
    struct nib_shm_header good, s;
    memcpy(&good, page, sizeof good);
    struct nib_shm_tensor table[NIB_TENSOR_MAX], t[NIB_TENSOR_MAX];
    memcpy(table, page + NIB_SHM_TENSORS_OFFSET, sizeof table);
    const uint64_t rs = good.ring_size, big = NIB_SHM_HEADER_MEMFD_SIZE_TENSOR;
    ck_assert_msg(nib_host_check_header(&good, 1, 77, big, rs, "app", err, sizeof err) == 0, "%s",
                  err);
    ck_assert_msg(nib_host_check_tensors(&good, table, "app", err, sizeof err) == 0, "%s", err);
    /* the header: one page only, other features, counts, areas */
    ck_assert_int_eq(
        nib_host_check_header(&good, 1, 77, NIB_SHM_HEADER_MEMFD_SIZE, rs, "app", err, sizeof err),
        -1);
    ck_assert_ptr_nonnull(strstr(err, "header_memfd_size"));
    /* a decoder's header (valid limits) in a vision model's two pages */
    s = good;
    s.features = 0;
    s.vocab_size = 32;
    s.ctx_len = 16;
    ck_assert_int_eq(nib_host_check_header(&s, 1, 77, big, rs, "app", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "decoder model's header memfd") != NULL, "%s", err);
    struct {
        uint32_t *field;
        uint32_t value;
        const char *want;
    } hc[] = {
        {&s.features, NIB_FEAT_TENSOR | NIB_FEAT_CHAT, "vision model's features"},
        {&s.tensors_offset, 256, "tensor table at 256"},
        {&s.n_inputs, 0, "0 inputs"},
        {&s.n_outputs, 15, "15 outputs"},
        {&s.inputs_len, 1u << 20, "inputs"},
        {&s.outputs_len, 1u << 20, "outputs"},
        {&s.slot_tokens, 1, "token area"},
        {&s.prompt_max, NIB_TENSOR_AREA_LIMIT + 64, "prompt area"},
        {&s.slot_text, NIB_TENSOR_AREA_LIMIT + 64, "text area"},
    };
    for (size_t i = 0; i < sizeof hc / sizeof hc[0]; i++) {
        s = good;
        *hc[i].field = hc[i].value;
        ck_assert_int_eq(nib_host_check_header(&s, 1, 77, big, rs, "app", err, sizeof err), -1);
        ck_assert_msg(strstr(err, hc[i].want) != NULL, "'%s' does not say '%s'", err, hc[i].want);
    }
    /* the table, one lie at a time */
    for (int c = 0; c < 11; c++) {
        memcpy(t, table, sizeof t);
        uint32_t i = (uint32_t)c % 4;
        switch (c) {
        case 0: t[0].name[0] = 0; break;
        case 1: memset(t[1].name, 'x', sizeof t[1].name); break;
        case 2: t[2].dir = 0; break;
        case 3: t[3].dtype = 3; break;
        case 4: t[0].rank = 0; break;
        case 5: t[1].dims[4] = 2; break;
        case 6: t[2].bytes = 11; break;
        case 7: t[3].area_off = 32; break; /* misaligned */
        case 8:
            t[0].dims[1] = 4;
            t[0].bytes = 1024;
            break;                        /* past inputs_len */
        case 9: t[1].area_off = 0; break; /* overlaps input 0 */
        case 10: t[2].reserved = 1; break;
        }
        ck_assert_msg(nib_host_check_tensors(&good, t, "app", err, sizeof err) == -1,
                      "case %d accepted", c);
        char want[32];
        snprintf(want, sizeof want, "tensor %u", c == 8 ? 0 : c == 9 ? 1 : c == 10 ? 2 : i);
        ck_assert_msg(strstr(err, want) != NULL, "case %d: '%s' does not say '%s'", c, err, want);
    }
    free(page);
    free(scratch);
    free(mem);
    free(b);
}
END_TEST

Suite *nib_test_suite(void)
{
    signal(SIGPIPE, SIG_DFL); /* the library must never raise it */
    Suite *s = suite_create("hostlib");
    TU_CASE(s, "no appliance", NULL, NULL, 0, no_appliance_is_a_clear_error);
    TU_CASE(s, "vision header", NULL, NULL, 0, vision_header_and_tensor_table_checked);
    TU_CASE(s, "hand-made appliance", fake_setup, fake_teardown, 60, attach_reads_the_header,
            everything_handed_over_is_checked, inconsistent_header_refused_field_by_field,
            stale_heartbeat_at_attach_is_gone, submit_wait_release, chat_and_special_requests,
            full_ring_is_busy_and_waits_are_bounded, streaming_wait_and_cancel,
            kick_only_when_sleeping, stale_heartbeat_is_gone, hung_up_socket_is_gone,
            stopping_state_is_gone, stop_over_the_socket, stop_through_a_handle,
            stop_times_out_when_nobody_answers, forked_child_attaches_afresh,
            the_memfds_cannot_be_resized_or_written);
    TU_CASE(s, "serve loop", live_setup, live_teardown, 60, live_submit_stream_release,
            live_prompt_at_the_limit, live_busy_cancel_and_all_slots_again,
            live_rings_are_per_host_and_come_back, live_stop_ends_queued_requests);
    return s;
}
