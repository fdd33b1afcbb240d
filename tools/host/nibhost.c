#include "tools/host/nibhost.h"
#include "tools/host/nibhost_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proto/chat_msg.h"
#include "proto/ctl.h"
#include "proto/private/ctl_io.h"
#include "proto/private/sync.h"
#include "proto/shm_layout.h"
#include "proto/shm_name.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

_Static_assert(sizeof(((struct nib_progress *)0)->error) == NIB_ERRMSG_MAX, "error size");

#define HEADER_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | F_SEAL_FUTURE_WRITE)
#define RING_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define CHECK_NS ((uint64_t)NIB_HOST_CHECK_MS * 1000000ull)
#define SPINS 200           /* looks before a waiter starts sleeping */
#define NAP_MIN_NS 50000L   /* streaming backoff: 50 us doubling ... */
#define NAP_MAX_NS 2000000L /* ... to 2 ms */
#define SLOT_SIZE_LIMIT (64ull << 20)
#define SLOT_SIZE_LIMIT_TENSOR (2ull * NIB_TENSOR_AREA_LIMIT + 4096)

struct nib_host {
    char name[NIB_SHM_NAME_MAX];
    struct nib_name_paths paths;
    int sock;                         /* the connection: our liveness and the appliance's */
    const struct nib_shm_header *hdr; /* PROT_READ mapping of the header memfd */
    size_t hdr_size;
    uint8_t *ring; /* this host's ring, read-write */
    size_t ring_size;
    struct nib_ring_header *rh;
    struct nib_shm_header geo; /* private copy taken at attach: identity, limits,
                                            geometry; offsets are never read back */
    struct nib_shm_tensor tensors[NIB_TENSOR_MAX]; /* a vision model's table, checked */
    uint32_t host_index;
    pid_t pid;         /* the process that attached */
    unsigned fork_gen; /* fork_gen then (see own_process) */
    int timeout_ms;    /* attach's, for attaching afresh after fork */
    int gone;
    uint64_t next_check_ns;
    char err[320];
};

static int host_fail(struct nib_host *h, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int host_fail(struct nib_host *h, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
    return rc;
}

const char *nib_host_error(const struct nib_host *h)
{
    return h ? h->err : "out of memory";
}

const char *nib_status_name(uint32_t status)
{
    static const char *const names[] = {"pending",    "ok",          "eos",         "cancelled",
                                        "ctx_full",   "text_full",   "bad_request", "shutdown",
                                        "owner_gone", "host_changed"};
    _Static_assert(sizeof names / sizeof names[0] == NIB_ST_COUNT, "a name per status");
    return status < NIB_ST_COUNT ? names[status] : "unknown";
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
}

static uint64_t deadline_after(int timeout_ms)
{
    uint64_t ms = timeout_ms > 0 ? (uint64_t)timeout_ms : NIB_HOST_TIMEOUT_DEFAULT_MS;
    return nib_now_ns() + ms * 1000000ull;
}

static int ms_left(uint64_t deadline)
{
    uint64_t now = nib_now_ns();
    if (now >= deadline)
        return 0;
    uint64_t ms = (deadline - now + 999999) / 1000000;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ---- the socket ---- */

/* One message, never blocking past the deadline, never raising SIGPIPE. */
static int send_msg(int fd, uint16_t type, uint64_t deadline)
{
    struct nib_ctl_msg m = nib_ctl_make(type);
    for (;;) {
        ssize_t n = send(fd, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n == (ssize_t)sizeof m)
            return 0;
        if (n >= 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        int left = ms_left(deadline);
        if (!left) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        poll(&p, 1, left);
    }
}

/* Receive one message, with up to 2 descriptors, waiting until the
 * deadline. Returns its length, 0 at the connection's end, -1 with errno
 * (ETIMEDOUT when the deadline passed). Descriptors beyond 2, or any at all
 * when fds is NULL, are closed; *n_fds counts all that came (the first 2
 * are in fds). */
static ssize_t recv_msg(int fd, struct nib_ctl_msg *m, int *fds, int *n_fds, uint64_t deadline)
{
    int count;
    for (;;) {
        uint8_t buf[sizeof *m + 1];
        /* Always a control buffer: whatever descriptors come are closed
         * here, never left open in the caller's process. */
        ssize_t n = nib_ctl_recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_CMSG_CLOEXEC, fds,
                                 fds && n_fds ? 2 : 0, n_fds ? n_fds : &count);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            int left = ms_left(deadline);
            if (!left) {
                errno = ETIMEDOUT;
                return -1;
            }
            struct pollfd p = {fd, POLLIN, 0};
            poll(&p, 1, left);
            continue;
        }
        if (n > 0)
            memcpy(m, buf, (size_t)n < sizeof *m ? (size_t)n : sizeof *m);
        return n;
    }
}

/* The reply must be a well-formed appliance->host message. */
static int reply_ok(const struct nib_ctl_msg *m, ssize_t n)
{
    if (n != (ssize_t)sizeof *m || m->magic != NIB_CTL_MAGIC || m->version != NIB_CTL_VERSION)
        return 0;
    for (size_t i = 0; i < sizeof m->reserved; i++)
        if (m->reserved[i])
            return 0;
    return m->type == NIB_CTL_ATTACHED || m->type == NIB_CTL_REFUSED || m->type == NIB_CTL_STOPPING;
}

static const char *refusal(uint32_t status)
{
    switch (status) {
    case NIB_CTL_NO_RING:
        return "every host ring is attached (the appliance's --max-hosts): "
               "try again when a host detaches";
    case NIB_CTL_DENIED:
        return "this user may not do that (the appliance's uid, root, or with "
               "--group-access its group)";
    case NIB_CTL_MALFORMED: return "the appliance found the message malformed";
    case NIB_CTL_NOT_READY: return "the appliance is stopping";
    default: return "unknown reason";
    }
}

/* Connect to the name's socket before the deadline. Returns the fd or -1
 * with the message in err. */
static int connect_name(const char *name, struct nib_name_paths *paths, uint64_t deadline,
                        char *err, size_t errlen)
{
    if (nib_name_paths(name, paths, err, errlen))
        return -1;
    struct stat st;
    if (lstat(paths->sock, &st) != 0) {
        if (errno == EACCES)
            snprintf(err, errlen,
                     "permission denied: %s (run as the appliance's user, or in "
                     "its group when it runs with --group-access)",
                     paths->sock);
        else
            snprintf(err, errlen, "no appliance named %s is running (no socket at %s)", name,
                     paths->sock);
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "no appliance named %s is running (%s is not a socket)", name,
                 paths->sock);
        return -1;
    }
    struct stat dst;
    if (nib_runtime_dir_check_host(paths->dir, (uint32_t)geteuid(), err, errlen) ||
        lstat(paths->dir, &dst) != 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, paths->sock, strlen(paths->sock) + 1);
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        if (errno == EAGAIN || errno == EINTR) { /* the backlog is full: a moment */
            if (!ms_left(deadline)) {
                snprintf(err, errlen, "appliance %s did not accept a connection in time", name);
                close(fd);
                return -1;
            }
            sleep_ns(1000000);
            continue;
        }
        if (errno == EACCES || errno == EPERM)
            snprintf(err, errlen,
                     "permission denied: %s (run as the appliance's user, or in "
                     "its group when it runs with --group-access)",
                     paths->sock);
        else if (errno == ENOENT || errno == ECONNREFUSED)
            snprintf(err, errlen, "no appliance named %s is running (%s at %s)", name,
                     errno == ENOENT ? "no socket" : "nothing listens on the socket", paths->sock);
        else
            snprintf(err, errlen, "connect %s: %s", paths->sock, strerror(errno));
        close(fd);
        return -1;
    }
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        snprintf(err, errlen, "SO_PEERCRED on %s: %s", paths->sock, strerror(errno));
        close(fd);
        return -1;
    }
    if (cred.uid != geteuid() && cred.uid != 0 && cred.uid != dst.st_uid) {
        snprintf(err, errlen, "%s is served by uid %u, which owns neither it nor this process",
                 paths->sock, (unsigned)cred.uid);
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- fork ---- */

/* Bumped in every child fork() makes: a handle compares it with its own
 * copy on every call, which costs no system call (getpid() does). */
static volatile unsigned fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void in_child(void)
{
    fork_gen++;
}

static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, in_child);
}

/* ---- attach ---- */

static void unmap(struct nib_host *h)
{
    if (h->hdr)
        munmap((void *)h->hdr, h->hdr_size);
    if (h->ring)
        munmap(h->ring, h->ring_size);
    h->hdr = NULL;
    h->ring = NULL;
    h->rh = NULL;
}

static int fail_to(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_to(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The header must describe exactly what this library was built for, and
 * a ring geometry that fits in the ring received (nibhost_check.h). */
int nib_host_check_header(const struct nib_shm_header *s, uint32_t host_index, uint64_t epoch,
                          uint64_t hdr_size, uint64_t ring_size, const char *sock, char *err,
                          size_t errlen)
{
    if (s->magic != NIB_SHM_MAGIC)
        return fail_to(err, errlen, "%s handed over a header that is not nibble's (bad magic)",
                       sock);
    if (s->version != NIB_SHM_VERSION)
        return fail_to(err, errlen,
                       "%s speaks protocol version %u, this host library speaks version %u: use "
                       "a host built for the appliance's version",
                       sock, s->version, NIB_SHM_VERSION);
#define BAD(...) return fail_to(err, errlen, "inconsistent header from " __VA_ARGS__)
    if (s->header_size != sizeof *s)
        BAD("%s: header_size is %u, version %u has %zu", sock, s->header_size, NIB_SHM_VERSION,
            sizeof *s);
    if (s->header_memfd_size != hdr_size)
        BAD("%s: header_memfd_size is %llu, the memfd has %llu bytes", sock,
            (unsigned long long)s->header_memfd_size, (unsigned long long)hdr_size);
    if (s->epoch == 0 || s->epoch != epoch)
        BAD("%s: epoch %llu, the reply said %llu", sock, (unsigned long long)s->epoch,
            (unsigned long long)epoch);
    if (s->stats_offset != NIB_SHM_STATS_OFFSET || s->stats_size != sizeof(struct nib_stats))
        BAD("%s: stats_offset %llu, stats_size %u (version %u has %u, %zu)", sock,
            (unsigned long long)s->stats_offset, s->stats_size, NIB_SHM_VERSION,
            NIB_SHM_STATS_OFFSET, sizeof(struct nib_stats));
    if (s->max_hosts == 0 || s->max_hosts > NIB_HOSTS_MAX || host_index >= s->max_hosts)
        BAD("%s: max_hosts %u, this ring's index %u", sock, s->max_hosts, host_index);
    /* A vision model (tensors in, tensors out) has no vocabulary or
     * context, a second header page for its tensor table, fewer and larger
     * slots and no token area. */
    const int tensor = (s->features & NIB_FEAT_TENSOR) != 0;
    /* Its header memfd is two pages, a decoder's one: a decoder header in
     * a vision model's memfd (or the reverse) is refused here. */
    const uint32_t memfd_size =
        tensor ? NIB_SHM_HEADER_MEMFD_SIZE_TENSOR : NIB_SHM_HEADER_MEMFD_SIZE;
    if (s->header_memfd_size != memfd_size)
        BAD("%s: a %s model's header memfd is %llu bytes, not %u", sock,
            tensor ? "vision" : "decoder", (unsigned long long)s->header_memfd_size, memfd_size);
    if (tensor && (s->features != NIB_FEAT_TENSOR || s->tensors_offset != NIB_SHM_TENSORS_OFFSET ||
                   s->n_inputs == 0 || s->n_outputs == 0 ||
                   s->n_inputs + s->n_outputs > NIB_TENSOR_MAX || s->inputs_len > s->prompt_max ||
                   s->outputs_len > s->slot_text || s->errmsg_max != NIB_ERRMSG_MAX))
        BAD("%s: a vision model's features 0x%x, tensor table at %u, %u inputs (%u bytes), %u "
            "outputs (%u bytes)",
            sock, s->features, s->tensors_offset, s->n_inputs, s->inputs_len, s->n_outputs,
            s->outputs_len);
    if (!tensor &&
        (s->vocab_size == 0 || s->ctx_len == 0 || s->bos_id >= s->vocab_size ||
         s->eos_id >= s->vocab_size || s->add_bos > 1 || s->errmsg_max != NIB_ERRMSG_MAX))
        BAD("%s: model limits vocab_size %u, ctx_len %u, bos_id %u, eos_id %u, add_bos %u, "
            "errmsg_max %u",
            sock, s->vocab_size, s->ctx_len, s->bos_id, s->eos_id, s->add_bos, s->errmsg_max);
    /* Geometry: every area inside its slot, every slot inside the ring. */
    uint64_t tok_end = (uint64_t)s->tokens_offset + 4ull * s->slot_tokens;
    const char *why = NULL;
    if (s->ring_size != ring_size)
        why = "ring_size differs from the ring received";
    else if (s->ring_header_size != sizeof(struct nib_ring_header))
        why = "ring_header_size";
    else if (s->n_slots == 0 || s->n_slots > NIB_RING_SLOTS)
        why = "n_slots";
    else if (s->slots_offset < s->ring_header_size || s->slots_offset % NIB_CACHELINE)
        why = "slots_offset";
    else if (s->slot_size < sizeof(struct nib_slot) || s->slot_size % NIB_CACHELINE ||
             s->slot_size > (tensor ? SLOT_SIZE_LIMIT_TENSOR : SLOT_SIZE_LIMIT))
        why = "slot_size";
    else if (s->prompt_offset < sizeof(struct nib_slot) ||
             (tensor ? s->prompt_max > NIB_TENSOR_AREA_LIMIT
                     : s->prompt_max < NIB_PROMPT_MIN || s->prompt_max > NIB_PROMPT_LIMIT))
        why = "prompt area";
    else if (s->tokens_offset % 4 ||
             s->tokens_offset < (uint64_t)s->prompt_offset + s->prompt_max ||
             (tensor ? s->slot_tokens != 0
                     : s->slot_tokens == 0 || s->slot_tokens > NIB_PROMPT_LIMIT))
        why = "token area";
    else if (s->text_offset < tok_end ||
             (tensor ? s->slot_text > NIB_TENSOR_AREA_LIMIT
                     : s->slot_text < NIB_TEXT_MIN || s->slot_text > NIB_TEXT_LIMIT) ||
             (uint64_t)s->text_offset + s->slot_text > s->slot_size)
        why = "text area";
    else if (s->slots_offset + (uint64_t)s->n_slots * s->slot_size > s->ring_size)
        why = "slots beyond the ring's end";
    if (why)
        BAD("%s: ring geometry (%s): ring_size %llu, slots_offset %llu, n_slots %u, slot_size "
            "%llu, prompt %u+%u, tokens %u+4*%u, text %u+%u",
            sock, why, (unsigned long long)s->ring_size, (unsigned long long)s->slots_offset,
            s->n_slots, (unsigned long long)s->slot_size, s->prompt_offset, s->prompt_max,
            s->tokens_offset, s->slot_tokens, s->text_offset, s->slot_text);
#undef BAD
    return 0;
}

/* Each record of a vision model's tensor table (nibhost_check.h). */
int nib_host_check_tensors(const struct nib_shm_header *s, const struct nib_shm_tensor *t,
                           const char *sock, char *err, size_t errlen)
{
    uint64_t end[2] = {0, 0};
    uint32_t n = s->n_inputs + s->n_outputs;
    for (uint32_t i = 0; i < n && i < NIB_TENSOR_MAX; i++) {
        const struct nib_shm_tensor *r = &t[i];
        uint32_t dir = i >= s->n_inputs;
        uint64_t bytes = r->dtype == NIB_TENSOR_F32 ? 4 : 1;
        int ok = memchr(r->name, 0, sizeof r->name) && r->name[0] && r->dir == dir &&
                 (r->dtype == NIB_TENSOR_F32 || r->dtype == NIB_TENSOR_U8) && r->rank >= 1 &&
                 r->rank <= NIB_TENSOR_MAX_RANK && !r->reserved;
        for (uint32_t d = 0; ok && d < NIB_TENSOR_MAX_RANK; d++) {
            ok = d < r->rank ? r->dims[d] != 0 : r->dims[d] == 0;
            if (d < r->rank && (bytes *= r->dims[d]) > NIB_TENSOR_AREA_LIMIT)
                ok = 0;
        }
        uint64_t limit = dir ? s->outputs_len : s->inputs_len;
        if (!ok || r->bytes != bytes || r->area_off % 64 || r->area_off < end[dir] ||
            r->area_off > limit || r->bytes > limit - r->area_off ||
            (i + 1 == s->n_inputs || i + 1 == n ? r->area_off + r->bytes != limit : 0))
            return fail_to(err, errlen,
                           "inconsistent header from %s: tensor %u (%s, dtype %u, rank %u, %llu "
                           "bytes at %llu of %llu)",
                           sock, i, dir ? "output" : "input", r->dtype, r->rank,
                           (unsigned long long)r->bytes, (unsigned long long)r->area_off,
                           (unsigned long long)limit);
        end[dir] = r->area_off + r->bytes;
    }
    return 0;
}

static int check_fd(struct nib_host *h, int fd, uint64_t size, int seals, const char *what)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return host_fail(h, NIB_HOST_ERR, "%s: the %s descriptor is not a memory file",
                         h->paths.sock, what);
    if ((uint64_t)st.st_size != size)
        return host_fail(h, NIB_HOST_ERR, "%s: the %s memfd has %llu bytes, the reply said %llu",
                         h->paths.sock, what, (unsigned long long)st.st_size,
                         (unsigned long long)size);
    int got = fcntl(fd, F_GET_SEALS);
    if (got < 0 || (got & seals) != seals)
        return host_fail(h, NIB_HOST_ERR,
                         "%s: the %s memfd is not sealed against resizing "
                         "(seals 0x%x, want 0x%x)",
                         h->paths.sock, what, got < 0 ? 0 : got, seals);
    return NIB_HOST_OK;
}

static int do_attach(struct nib_host *h, int timeout_ms)
{
    uint64_t deadline = deadline_after(timeout_ms);
    h->sock = connect_name(h->name, &h->paths, deadline, h->err, sizeof h->err);
    if (h->sock < 0)
        return NIB_HOST_ERR;
    if (send_msg(h->sock, NIB_CTL_ATTACH, deadline))
        return host_fail(h, NIB_HOST_ERR, "%s: cannot send ATTACH: %s", h->paths.sock,
                         strerror(errno));
    struct nib_ctl_msg m;
    int fds[2] = {-1, -1}, n_fds = 0;
    ssize_t n = recv_msg(h->sock, &m, fds, &n_fds, deadline);
    int rc = NIB_HOST_ERR;
    if (n < 0 && errno == ETIMEDOUT)
        rc = host_fail(h, NIB_HOST_TIMEOUT, "appliance %s did not answer ATTACH in time", h->name);
    else if (n < 0)
        rc = host_fail(h, NIB_HOST_ERR, "%s: %s", h->paths.sock, strerror(errno));
    else if (n == 0)
        rc = host_fail(h, NIB_HOST_GONE,
                       "appliance %s closed the connection instead of "
                       "answering ATTACH",
                       h->name);
    else if (!reply_ok(&m, n) || m.type == NIB_CTL_STOPPING)
        rc = host_fail(h, NIB_HOST_ERR, "%s: malformed reply to ATTACH", h->paths.sock);
    else if (m.type == NIB_CTL_REFUSED)
        rc = host_fail(h, m.status == NIB_CTL_NO_RING ? NIB_HOST_BUSY : NIB_HOST_ERR,
                       "appliance %s refused to attach: %s", h->name, refusal(m.status));
    else if (n_fds != 2 || m.status != NIB_CTL_OK || m.epoch == 0 ||
             (m.header_size != NIB_SHM_HEADER_MEMFD_SIZE &&
              m.header_size != NIB_SHM_HEADER_MEMFD_SIZE_TENSOR) ||
             m.ring_size == 0 ||
             m.ring_size > (uint64_t)NIB_RING_SLOTS * SLOT_SIZE_LIMIT_TENSOR + 4096)
        rc = host_fail(h, NIB_HOST_ERR,
                       "%s: malformed ATTACHED reply (%d descriptors, status "
                       "%u, header %llu bytes, ring %llu bytes)",
                       h->paths.sock, n_fds, m.status, (unsigned long long)m.header_size,
                       (unsigned long long)m.ring_size);
    else if ((rc = check_fd(h, fds[0], m.header_size, HEADER_SEALS, "header")) == NIB_HOST_OK &&
             (rc = check_fd(h, fds[1], m.ring_size, RING_SEALS, "ring")) == NIB_HOST_OK) {
        h->hdr_size = (size_t)m.header_size;
        h->ring_size = (size_t)m.ring_size;
        void *p = mmap(NULL, h->hdr_size, PROT_READ, MAP_SHARED, fds[0], 0);
        void *q = mmap(NULL, h->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
        h->hdr = p == MAP_FAILED ? NULL : p;
        h->ring = q == MAP_FAILED ? NULL : q;
        if (!h->hdr || !h->ring)
            rc = host_fail(h, NIB_HOST_ERR, "%s: cannot map the memfds: %s", h->paths.sock,
                           strerror(errno));
    }
    for (int i = 0; i < n_fds && i < 2; i++)
        close(fds[i]);
    if (rc != NIB_HOST_OK)
        return rc;
    /* A booting appliance finishes its header before READY. */
    uint32_t state;
    while ((state = nib_load_acq(&h->hdr->state)) == NIB_APP_BOOTING && ms_left(deadline))
        sleep_ns(5000000);
    memcpy(&h->geo, h->hdr, sizeof h->geo);
    if (nib_host_check_header(&h->geo, m.host_index, m.epoch, h->hdr_size, h->ring_size,
                              h->paths.sock, h->err, sizeof h->err))
        return NIB_HOST_ERR;
    memset(h->tensors, 0, sizeof h->tensors);
    if (h->geo.features & NIB_FEAT_TENSOR) {
        /* checked above: the table's page lies inside the mapping */
        memcpy(h->tensors, (const uint8_t *)h->hdr + NIB_SHM_TENSORS_OFFSET, sizeof h->tensors);
        if (nib_host_check_tensors(&h->geo, h->tensors, h->paths.sock, h->err, sizeof h->err))
            return NIB_HOST_ERR;
    }
    if (state != NIB_APP_READY)
        return host_fail(h, NIB_HOST_ERR, "appliance %s is not ready (it is %s)", h->name,
                         state == NIB_APP_BOOTING    ? "still booting"
                         : state == NIB_APP_STOPPING ? "stopping"
                         : state == NIB_APP_STOPPED  ? "stopped"
                                                     : "in an unknown state");
    h->rh = (struct nib_ring_header *)(void *)h->ring;
    if (h->rh->magic != NIB_RING_MAGIC || h->rh->epoch != h->geo.epoch ||
        h->rh->host_index != m.host_index || h->rh->attach_seq == 0)
        return host_fail(h, NIB_HOST_ERR,
                         "%s handed over a ring that is not nibble's or not "
                         "this boot's (magic 0x%llx, epoch %llu, index %u of %u)",
                         h->paths.sock, (unsigned long long)h->rh->magic,
                         (unsigned long long)h->rh->epoch, h->rh->host_index, m.host_index);
    uint64_t beat = nib_load_acq(&h->hdr->heartbeat_ns), now = nib_now_ns();
    if (now > beat && now - beat > NIB_HEARTBEAT_STALE_NS)
        return host_fail(h, NIB_HOST_GONE,
                         "appliance %s is not responding (no heartbeat for "
                         "%llu ms)",
                         h->name, (unsigned long long)((now - beat) / 1000000));
    h->host_index = m.host_index;
    pthread_once(&fork_once, watch_forks);
    h->fork_gen = fork_gen;
    h->pid = getpid();
    h->gone = 0;
    h->next_check_ns = 0;
    return NIB_HOST_OK;
}

int nib_host_attach(struct nib_host **out, const char *name, int timeout_ms)
{
    struct nib_host *h = calloc(1, sizeof *h);
    *out = h;
    if (!h)
        return NIB_HOST_ERR;
    h->sock = -1;
    h->timeout_ms = timeout_ms;
    if (!name)
        name = NIB_SHM_DEFAULT_NAME;
    if (nib_name_check(name, h->err, sizeof h->err))
        return NIB_HOST_ERR;
    snprintf(h->name, sizeof h->name, "%s", name);
    return do_attach(h, timeout_ms);
}

static void drop(struct nib_host *h, int say_detach)
{
    if (h->sock >= 0) {
        if (say_detach)
            send_msg(h->sock, NIB_CTL_DETACH, nib_now_ns()); /* best effort: the close says it */
        close(h->sock);
        h->sock = -1;
    }
    unmap(h);
}

void nib_host_detach(struct nib_host *h)
{
    if (!h)
        return;
    /* A forked child closes its copies without DETACH: the connection is
     * the parent's. */
    drop(h, h->pid == getpid());
    free(h);
}

/* Every call starts here: a forked child (fork(), or anything else that
 * runs the pthread_atfork handlers) attaches afresh. */
static int own_process(struct nib_host *h)
{
    if (h->fork_gen == fork_gen || h->pid == getpid()) {
        h->fork_gen = fork_gen;
        return h->ring ? NIB_HOST_OK : host_fail(h, NIB_HOST_ERR, "not attached");
    }
    drop(h, 0);
    int rc = do_attach(h, h->timeout_ms);
    if (rc != NIB_HOST_OK) {
        drop(h, 0);
        h->gone = 1;
    }
    return rc;
}

uint64_t nib_host_epoch(const struct nib_host *h)
{
    return h->geo.epoch;
}
uint32_t nib_host_appliance_pid(const struct nib_host *h)
{
    return h->geo.appliance_pid;
}
uint32_t nib_host_vocab_size(const struct nib_host *h)
{
    return h->geo.vocab_size;
}
uint32_t nib_host_ctx_len(const struct nib_host *h)
{
    return h->geo.ctx_len;
}
uint32_t nib_host_host_index(const struct nib_host *h)
{
    return h->host_index;
}
uint32_t nib_host_slots(const struct nib_host *h)
{
    return h->geo.n_slots;
}
uint32_t nib_host_prompt_max(const struct nib_host *h)
{
    return h->geo.prompt_max;
}
uint32_t nib_host_slot_tokens(const struct nib_host *h)
{
    return h->geo.slot_tokens;
}
uint32_t nib_host_slot_text(const struct nib_host *h)
{
    return h->geo.slot_text;
}

/* ---- liveness ---- */

static int gone(struct nib_host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gone(struct nib_host *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof h->err, fmt, ap);
    va_end(ap);
    h->gone = 1;
    return NIB_HOST_GONE;
}

/* The socket (hang-up, STOPPING), the header's state and heartbeat; the
 * socket at most every NIB_HOST_CHECK_MS unless forced. */
static int alive(struct nib_host *h, int force)
{
    if (h->gone)
        return NIB_HOST_GONE;
    uint32_t st = nib_load_acq(&h->hdr->state);
    if (st == NIB_APP_STOPPING || st == NIB_APP_STOPPED)
        return gone(h, "appliance %s is %s", h->name,
                    st == NIB_APP_STOPPING ? "stopping" : "stopped");
    uint64_t now = nib_now_ns();
    if (!force && now < h->next_check_ns)
        return NIB_HOST_OK;
    h->next_check_ns = now + CHECK_NS;
    for (int i = 0; i < 8; i++) {
        struct pollfd p = {h->sock, POLLIN, 0};
        if (poll(&p, 1, 0) <= 0)
            break;
        if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
            return gone(h, "appliance %s exited (its connection hung up)", h->name);
        struct nib_ctl_msg m;
        ssize_t n = recv_msg(h->sock, &m, NULL, NULL, 0);
        if (n == 0 || (n < 0 && errno != ETIMEDOUT))
            return gone(h, "appliance %s exited (its connection hung up)", h->name);
        if (n > 0 && reply_ok(&m, n) && m.type == NIB_CTL_STOPPING)
            return gone(h, "appliance %s is stopping", h->name);
    }
    uint64_t beat = nib_load_acq(&h->hdr->heartbeat_ns);
    if (now > beat && now - beat > NIB_HEARTBEAT_STALE_NS)
        return gone(h, "appliance %s is not responding (no heartbeat for %llu ms)", h->name,
                    (unsigned long long)((now - beat) / 1000000));
    return NIB_HOST_OK;
}

int nib_host_check(struct nib_host *h)
{
    int rc = own_process(h);
    return rc != NIB_HOST_OK ? rc : alive(h, 1);
}

/* ---- requests ---- */

static struct nib_slot *slot_at(struct nib_host *h, uint32_t i)
{
    return nib_ring_slot(h->ring, &h->geo, i);
}

/* What every request shares: max_tokens, temperature, now_s. */
static int check_gen(struct nib_host *h, const struct nib_gen_params *p)
{
    if (p->max_tokens > h->geo.slot_tokens)
        return host_fail(h, NIB_HOST_ERR, "max_tokens %u is above the limit %u", p->max_tokens,
                         h->geo.slot_tokens);
    if (!(p->temperature >= 0.0f && p->temperature <= NIB_TEMPERATURE_MAX))
        return host_fail(h, NIB_HOST_ERR, "temperature must be a number in 0..%g",
                         (double)NIB_TEMPERATURE_MAX);
    if (p->now_s < 0 || p->now_s > NIB_CHAT_NOW_MAX)
        return host_fail(h, NIB_HOST_ERR, "now_s %lld is outside 0..%lld", (long long)p->now_s,
                         (long long)NIB_CHAT_NOW_MAX);
    return NIB_HOST_OK;
}

static int check_params(struct nib_host *h, size_t len, const struct nib_gen_params *p,
                        const void *prompt)
{
    if (nib_host_is_vision(h))
        return host_fail(h, NIB_HOST_ERR,
                         "this appliance serves a vision model (tensors in, tensors out): send "
                         "tensors (nib run, nib_host_submit_tensors): not sent");
    size_t bytes = p->prompt_ids ? len * 4 : len;
    if (p->prompt_ids ? (len == 0 || len > h->geo.prompt_max / 4) : len > h->geo.prompt_max)
        return host_fail(h, NIB_HOST_ERR,
                         "prompt is %zu %s (%zu bytes), the limit is %u bytes (the appliance's "
                         "prompt area, prompt_max): not sent",
                         len, p->prompt_ids ? "ids" : "bytes", bytes, h->geo.prompt_max);
    int rc = check_gen(h, p);
    if (rc != NIB_HOST_OK)
        return rc;
    if (p->prompt_ids)
        for (size_t i = 0; i < len; i++) {
            uint32_t id;
            memcpy(&id, (const uint8_t *)prompt + 4 * i, 4);
            if (id >= h->geo.vocab_size)
                return host_fail(h, NIB_HOST_ERR,
                                 "prompt token id %u at %zu is not below the "
                                 "vocabulary size %u",
                                 id, i, h->geo.vocab_size);
        }
    return NIB_HOST_OK;
}

/* A FREE slot of our ring, CLAIMED by compare-and-swap; -1 when none. */
static int claim(struct nib_host *h)
{
    for (uint32_t i = 0; i < h->geo.n_slots; i++) {
        uint32_t expect = NIB_SLOT_FREE;
        if (nib_load_relaxed(&slot_at(h, i)->state) == NIB_SLOT_FREE &&
            nib_cas(&slot_at(h, i)->state, &expect, NIB_SLOT_CLAIMED))
            return (int)i;
    }
    return -1;
}

/* What goes into the prompt area: bytes as they are, or a conversation
 * encoded there (proto/chat_msg.h). */
struct payload {
    const void *bytes;
    size_t len;
    const struct nib_chat_part *parts; /* chat: n_parts messages */
    uint32_t n_parts;
    const void *const *inputs; /* tensor: one per input, at the table's offsets */
};

static int submit(struct nib_host *h, const struct nib_gen_params *params, const struct payload *pl,
                  uint32_t kind, struct nib_req_handle *out);

int nib_host_submit(struct nib_host *h, const void *prompt, size_t len,
                    const struct nib_gen_params *params, struct nib_req_handle *out)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK || (rc = alive(h, 1)) != NIB_HOST_OK)
        return rc;
    struct nib_gen_params p = {0};
    if (params)
        p = *params;
    if ((rc = check_params(h, len, &p, prompt)) != NIB_HOST_OK)
        return rc;
    struct payload pl = {prompt, p.prompt_ids ? len * 4 : len, NULL, 0, NULL};
    return submit(h, &p, &pl, NIB_REQ_KIND_TEXT, out);
}

/* The messages as encoder parts (malloc'd; NULL with the error set). */
static struct nib_chat_part *chat_parts(struct nib_host *h, const struct nib_chat_msg *msgs,
                                        size_t n)
{
    if (n > NIB_CHAT_MESSAGES_MAX) {
        host_fail(h, NIB_HOST_ERR, "%zu messages, a conversation holds at most %u", n,
                  NIB_CHAT_MESSAGES_MAX);
        return NULL;
    }
    struct nib_chat_part *m = calloc(n ? n : 1, sizeof *m);
    if (!m) {
        host_fail(h, NIB_HOST_ERR, "out of memory for %zu messages", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *role = msgs[i].role ? msgs[i].role : "";
        size_t rl = strnlen(role, NIB_CHAT_ROLE_MAX + 1);
        size_t cl = msgs[i].content_len ? msgs[i].content_len
                    : msgs[i].content   ? strlen(msgs[i].content)
                                        : 0;
        char why[96];
        if (nib_chat_check_role((const uint8_t *)role, rl, why, sizeof why)) {
            host_fail(h, NIB_HOST_ERR, "message %zu: role: %s", i, why);
            free(m);
            return NULL;
        }
        if (cl > UINT32_MAX) {
            host_fail(h, NIB_HOST_ERR, "message %zu: content of %zu bytes is too large", i, cl);
            free(m);
            return NULL;
        }
        m[i] = (struct nib_chat_part){(const uint8_t *)role, (const uint8_t *)msgs[i].content,
                                      (uint32_t)rl, (uint32_t)cl};
    }
    return m;
}

size_t nib_host_chat_size(const struct nib_chat_msg *msgs, size_t n)
{
    struct nib_host tmp;
    struct nib_chat_part *m = chat_parts(&tmp, msgs, n);
    if (!m)
        return 0;
    size_t size = nib_chat_encoded_size(m, (uint32_t)n);
    free(m);
    return size;
}

int nib_host_submit_measure(struct nib_host *h, uint32_t first_pos, uint32_t passes,
                            struct nib_req_handle *out)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK || (rc = alive(h, 1)) != NIB_HOST_OK)
        return rc;
    if (!(h->geo.features & NIB_FEAT_MEASURE))
        return host_fail(h, NIB_HOST_ERR, "this appliance does not serve measurements");
    if (passes == 0 || passes > h->geo.slot_tokens)
        return host_fail(h, NIB_HOST_ERR, "%u passes: a measurement runs 1..%u", passes,
                         h->geo.slot_tokens);
    if (first_pos >= h->geo.ctx_len || passes > h->geo.ctx_len - first_pos)
        return host_fail(h, NIB_HOST_ERR, "positions %u.. for %u passes pass the context (%u)",
                         first_pos, passes, h->geo.ctx_len);
    uint8_t pos_le[4] = {(uint8_t)first_pos, (uint8_t)(first_pos >> 8), (uint8_t)(first_pos >> 16),
                         (uint8_t)(first_pos >> 24)};
    struct nib_gen_params p = {.max_tokens = passes, .busy_wait_ms = -1};
    struct payload pl = {pos_le, 4, NULL, 0, NULL};
    return submit(h, &p, &pl, NIB_REQ_KIND_MEASURE, out);
}

int nib_host_measures(const struct nib_host *h)
{
    return (h->geo.features & NIB_FEAT_MEASURE) != 0;
}

int nib_host_has_chat(const struct nib_host *h)
{
    return (h->geo.features & NIB_FEAT_CHAT) != 0;
}

int nib_host_is_vision(const struct nib_host *h)
{
    return (h->geo.features & NIB_FEAT_TENSOR) != 0;
}

uint32_t nib_host_n_inputs(const struct nib_host *h)
{
    return nib_host_is_vision(h) ? h->geo.n_inputs : 0;
}

uint32_t nib_host_n_outputs(const struct nib_host *h)
{
    return nib_host_is_vision(h) ? h->geo.n_outputs : 0;
}

static const struct nib_shm_tensor *tensor_at(const struct nib_host *h, int output, uint32_t i)
{
    if (!nib_host_is_vision(h) || i >= (output ? h->geo.n_outputs : h->geo.n_inputs))
        return NULL;
    return &h->tensors[output ? h->geo.n_inputs + i : i];
}

int nib_host_tensor_info(const struct nib_host *h, int output, uint32_t i,
                         struct nib_tensor_info *out)
{
    const struct nib_shm_tensor *t = tensor_at(h, output, i);
    memset(out, 0, sizeof *out);
    if (!t)
        return NIB_HOST_ERR;
    out->name = t->name;
    out->dtype = t->dtype;
    out->rank = t->rank;
    memcpy(out->dims, t->dims, sizeof out->dims);
    out->bytes = (size_t)t->bytes;
    return NIB_HOST_OK;
}

int nib_host_submit_tensors(struct nib_host *h, const void *const *inputs, const size_t *lens,
                            size_t n, int busy_wait_ms, struct nib_req_handle *out)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK || (rc = alive(h, 1)) != NIB_HOST_OK)
        return rc;
    if (!nib_host_is_vision(h))
        return host_fail(h, NIB_HOST_ERR,
                         "this appliance serves a decoder (tokens), not a vision model: not sent");
    if (n != h->geo.n_inputs)
        return host_fail(h, NIB_HOST_ERR, "%zu input tensors given, the model takes %u: not sent",
                         n, h->geo.n_inputs);
    for (uint32_t i = 0; i < h->geo.n_inputs; i++)
        if (lens[i] != h->tensors[i].bytes || (lens[i] && !inputs[i]))
            return host_fail(h, NIB_HOST_ERR,
                             "input %u (%s): %zu bytes given, the model takes %llu: not sent", i,
                             h->tensors[i].name, lens[i], (unsigned long long)h->tensors[i].bytes);
    struct nib_gen_params p = {.busy_wait_ms = busy_wait_ms};
    struct payload pl = {NULL, h->geo.inputs_len, NULL, 0, inputs};
    return submit(h, &p, &pl, NIB_REQ_KIND_TENSOR, out);
}

const void *nib_host_output(const struct nib_host *h, const struct nib_progress *pr, uint32_t i,
                            size_t *len)
{
    const struct nib_shm_tensor *t = tensor_at(h, 1, i);
    if (len)
        *len = 0;
    if (!t || !pr->done || pr->status != NIB_ST_OK || pr->text_len != h->geo.outputs_len)
        return NULL;
    if (len)
        *len = (size_t)t->bytes;
    return pr->text + t->area_off;
}

int nib_host_submit_chat(struct nib_host *h, const struct nib_chat_msg *msgs, size_t n,
                         const struct nib_gen_params *params, struct nib_req_handle *out)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK || (rc = alive(h, 1)) != NIB_HOST_OK)
        return rc;
    struct nib_gen_params p = {0};
    if (params)
        p = *params;
    if (p.prompt_ids)
        return host_fail(h, NIB_HOST_ERR, "prompt_ids does not apply to a chat request");
    if (!nib_host_has_chat(h))
        return host_fail(h, NIB_HOST_ERR,
                         "appliance %s serves a model without a chat template: send text", h->name);
    if ((rc = check_gen(h, &p)) != NIB_HOST_OK)
        return rc;
    struct nib_chat_part *m = chat_parts(h, msgs, n);
    if (!m)
        return NIB_HOST_ERR;
    struct payload pl = {NULL, nib_chat_encoded_size(m, (uint32_t)n), m, (uint32_t)n, NULL};
    if (pl.len == 0 || pl.len > h->geo.prompt_max) {
        free(m);
        if (pl.len == 0)
            return host_fail(h, NIB_HOST_ERR, "the conversation is larger than 4 GiB: not sent");
        return host_fail(h, NIB_HOST_ERR,
                         "the conversation is %zu bytes encoded (%zu messages), the limit is %u "
                         "bytes (the appliance's prompt area, prompt_max): not sent",
                         pl.len, n, h->geo.prompt_max);
    }
    rc = submit(h, &p, &pl, NIB_REQ_KIND_CHAT, out);
    free(m);
    return rc;
}

/* Claim a slot (waiting up to busy_wait_ms), write the request and its
 * payload, publish it. */
static int submit(struct nib_host *h, const struct nib_gen_params *params, const struct payload *pl,
                  uint32_t kind, struct nib_req_handle *out)
{
    struct nib_gen_params p = *params;
    int rc;
    uint64_t deadline = p.busy_wait_ms == 0 ? 0 : deadline_after(p.busy_wait_ms);
    uint64_t nap = NAP_MIN_NS;
    int i;
    while ((i = claim(h)) < 0) {
        if (nib_now_ns() >= deadline)
            return host_fail(h, NIB_HOST_BUSY, "all %u slots of this host's ring are busy",
                             h->geo.n_slots);
        if ((rc = alive(h, 0)) != NIB_HOST_OK)
            return rc;
        sleep_ns(nap);
        nap = nap < NAP_MAX_NS ? nap * 2 : NAP_MAX_NS;
    }
    struct nib_slot *slot = slot_at(h, (uint32_t)i);
    slot->cancel = 0;
    slot->request_id = p.request_id;
    memset(&slot->req, 0, sizeof slot->req);
    slot->req.prompt_len = (uint32_t)pl->len;
    slot->req.max_tokens = kind == NIB_REQ_KIND_TENSOR ? 0 : p.max_tokens ? p.max_tokens : 64;
    slot->req.temperature = p.temperature;
    slot->req.seed = p.seed;
    slot->req.flags = (p.no_bos ? NIB_REQ_NO_BOS : 0) | (p.prompt_ids ? NIB_REQ_PROMPT_IDS : 0) |
                      (p.special ? NIB_REQ_SPECIAL : 0);
    slot->req.kind = kind;
    uint8_t *area = nib_slot_prompt(slot, &h->geo);
    if (kind == NIB_REQ_KIND_CHAT)
        nib_chat_encode(pl->parts, pl->n_parts,
                        p.no_generation_prompt ? 0 : NIB_CHAT_ADD_GENERATION_PROMPT, p.now_s, area,
                        pl->len);
    else if (kind == NIB_REQ_KIND_TENSOR)
        for (uint32_t k = 0; k < h->geo.n_inputs; k++)
            memcpy(area + h->tensors[k].area_off, pl->inputs[k], h->tensors[k].bytes);
    else if (pl->len)
        memcpy(area, pl->bytes, pl->len);
    slot->n_tokens = slot->n_prompt = slot->text_len = 0;
    slot->status = NIB_ST_PENDING;
    slot->t_start_ns = slot->t_first_ns = slot->t_done_ns = 0;
    slot->served_ticket = 0;
    slot->error[0] = 0;
    /* The ticket orders this host's own slots only; the appliance reads it
     * after its acquire of SUBMITTED, so relaxed is enough here. */
    uint64_t ticket = nib_fetch_add_relaxed(&h->rh->next_ticket, 1) + 1;
    nib_store_rel(&slot->ticket, ticket);
    nib_store_rel(&slot->state, NIB_SLOT_SUBMITTED);
    /* Pairs with the appliance's: sleeping = 1, fence, look at the rings. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (nib_load_relaxed(&h->hdr->sleeping))
        send_msg(h->sock, NIB_CTL_KICK, 0); /* a full socket buffer already holds kicks */
    out->slot = (uint32_t)i;
    out->ticket = ticket;
    return NIB_HOST_OK;
}

/* The slot named by r, if it still holds this request. */
static struct nib_slot *own_slot(struct nib_host *h, const struct nib_req_handle *r)
{
    if (r->slot >= h->geo.n_slots) {
        host_fail(h, NIB_HOST_ERR, "request handle names slot %u of %u", r->slot, h->geo.n_slots);
        return NULL;
    }
    struct nib_slot *slot = slot_at(h, r->slot);
    uint32_t st = nib_load_acq(&slot->state);
    if (nib_load_relaxed(&slot->ticket) != r->ticket || st == NIB_SLOT_FREE ||
        st == NIB_SLOT_CLAIMED) {
        host_fail(h, NIB_HOST_ERR,
                  "slot %u no longer holds request %llu of this host "
                  "(released, or this is a forked child)",
                  r->slot, (unsigned long long)r->ticket);
        return NULL;
    }
    return slot;
}

static void snapshot(struct nib_host *h, struct nib_slot *slot, struct nib_progress *pr)
{
    memset(pr, 0, sizeof *pr);
    /* acquire: pairs with the release (CAS to DONE) in rt/serve.c finish() */
    uint32_t st = nib_load_acq(&slot->state);
    pr->done = st == NIB_SLOT_DONE;
    /* Counts are read after the state (acquire), so a DONE request's counts
     * are final; clamped to the areas, so nothing read points outside. */
    uint32_t n = nib_load_acq(&slot->n_tokens), t = nib_load_acq(&slot->text_len);
    uint32_t np = nib_load_relaxed(&slot->n_prompt);
    pr->n_tokens = n <= h->geo.slot_tokens ? n : h->geo.slot_tokens;
    pr->n_prompt = np <= pr->n_tokens ? np : pr->n_tokens;
    pr->text_len = t <= h->geo.slot_text ? t : h->geo.slot_text;
    pr->tokens = nib_slot_tokens(slot, &h->geo);
    pr->text = nib_slot_text(slot, &h->geo);
    memcpy(pr->error, slot->error, sizeof pr->error);
    pr->error[sizeof pr->error - 1] = 0;
    pr->status = pr->done ? nib_load_relaxed(&slot->status) : NIB_ST_PENDING;
    pr->request_id = slot->request_id;
    pr->t_start_ns = slot->t_start_ns;
    pr->t_first_ns = slot->t_first_ns;
    pr->t_done_ns = slot->t_done_ns;
}

int nib_host_poll(struct nib_host *h, const struct nib_req_handle *r, struct nib_progress *pr)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK)
        return rc;
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return NIB_HOST_ERR;
    snapshot(h, slot, pr);
    return pr->done ? NIB_HOST_OK : alive(h, 0);
}

/* Sleep on the ring's done_seq until the appliance posts a final status
 * in this ring, or ns pass. */
static void sleep_on_done(struct nib_host *h, struct nib_slot *slot, uint64_t ns)
{
    /* seq_cst add then load: pairs with rt/serve.c's seq_cst store of
     * done_seq then load of done_waiters (and FUTEX_WAIT rechecks seq). */
    nib_fetch_add_seqcst(&h->rh->done_waiters, 1);
    uint32_t seq = nib_load_seqcst(&h->rh->done_seq);
    if (nib_load_acq(&slot->state) != NIB_SLOT_DONE) {
        struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
        /* Shared (not PRIVATE): the appliance wakes it from another process. */
        syscall(SYS_futex, &h->rh->done_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
    }
    nib_fetch_sub_seqcst(&h->rh->done_waiters, 1);
}

int nib_host_wait(struct nib_host *h, const struct nib_req_handle *r, uint32_t seen_tokens,
                  int timeout_ms, struct nib_progress *pr)
{
    uint64_t deadline = deadline_after(timeout_ms);
    uint64_t nap = NAP_MIN_NS;
    for (unsigned spins = 0;; spins++) {
        int rc = nib_host_poll(h, r, pr);
        if (rc != NIB_HOST_OK)
            return rc;
        if (pr->done || (seen_tokens != NIB_HOST_WAIT_DONE && pr->n_tokens > seen_tokens))
            return NIB_HOST_OK;
        uint64_t now = nib_now_ns();
        if (now >= deadline)
            return host_fail(h, NIB_HOST_TIMEOUT,
                             "request %llu not %s after the wait's "
                             "timeout",
                             (unsigned long long)r->ticket,
                             seen_tokens == NIB_HOST_WAIT_DONE ? "finished" : "further");
        if (spins < SPINS) {
            __asm__ __volatile__("" ::: "memory");
            continue;
        }
        /* Sleep no longer than the liveness checks allow. */
        uint64_t left = deadline - now, slice = left < CHECK_NS ? left : CHECK_NS;
        if (seen_tokens == NIB_HOST_WAIT_DONE) {
            sleep_on_done(h, slot_at(h, r->slot), slice);
        } else {
            sleep_ns(nap < slice ? nap : slice);
            nap = nap < NAP_MAX_NS ? nap * 2 : NAP_MAX_NS;
        }
    }
}

int nib_host_cancel(struct nib_host *h, const struct nib_req_handle *r)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK)
        return rc;
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return NIB_HOST_ERR;
    /* release: pairs with the acquires of cancel in rt/serve.c */
    nib_store_rel(&slot->cancel, 1u);
    return NIB_HOST_OK;
}

int nib_host_release(struct nib_host *h, const struct nib_req_handle *r)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK)
        return rc;
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return NIB_HOST_ERR;
    uint32_t expect = NIB_SLOT_DONE;
    if (nib_cas(&slot->state, &expect, NIB_SLOT_FREE))
        return NIB_HOST_OK;
    if (h->gone) { /* nobody serves this ring any more */
        nib_store_rel(&slot->state, NIB_SLOT_FREE);
        return NIB_HOST_OK;
    }
    return host_fail(h, NIB_HOST_ERR, "request is not finished (cancel it and wait first)");
}

/* ---- stop ---- */

/* STOP on fd, then STOPPING, then the connection's end. */
static int stop_on(int fd, const char *name, uint64_t deadline, char *err, size_t errlen)
{
    if (send_msg(fd, NIB_CTL_STOP, deadline)) {
        snprintf(err, errlen, "cannot send STOP to appliance %s: %s", name, strerror(errno));
        return errno == EPIPE || errno == ECONNRESET ? NIB_HOST_OK : NIB_HOST_ERR;
    }
    int stopping = 0;
    for (;;) {
        struct nib_ctl_msg m;
        ssize_t n = recv_msg(fd, &m, NULL, NULL, deadline);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return NIB_HOST_OK; /* it exited (before or after saying STOPPING) */
        if (n < 0 && errno == ETIMEDOUT) {
            snprintf(err, errlen, "appliance %s %s", name,
                     stopping ? "is stopping but did not exit in time"
                              : "did not answer STOP in time");
            return NIB_HOST_TIMEOUT;
        }
        if (n < 0) {
            snprintf(err, errlen, "appliance %s: %s", name, strerror(errno));
            return NIB_HOST_ERR;
        }
        if (!reply_ok(&m, n))
            continue; /* not for us (a malformed one changes nothing) */
        if (m.type == NIB_CTL_REFUSED) {
            snprintf(err, errlen, "appliance %s refused to stop: %s", name, refusal(m.status));
            return NIB_HOST_ERR;
        }
        if (m.type == NIB_CTL_STOPPING)
            stopping = 1;
    }
}

int nib_host_stop(struct nib_host *h, int timeout_ms)
{
    int rc = own_process(h);
    if (rc != NIB_HOST_OK)
        return rc;
    rc = stop_on(h->sock, h->name, deadline_after(timeout_ms), h->err, sizeof h->err);
    if (rc == NIB_HOST_OK)
        h->gone = 1;
    return rc;
}

int nib_host_stop_name(const char *name, int timeout_ms, char *err, size_t errlen)
{
    if (!name)
        name = NIB_SHM_DEFAULT_NAME;
    uint64_t deadline = deadline_after(timeout_ms);
    struct nib_name_paths paths;
    int fd = connect_name(name, &paths, deadline, err, errlen);
    if (fd < 0)
        return NIB_HOST_ERR;
    int rc = stop_on(fd, name, deadline, err, errlen);
    close(fd);
    return rc;
}

const void *nib_host_stats(const struct nib_host *h)
{
    return (const uint8_t *)h->hdr + NIB_SHM_STATS_OFFSET;
}
