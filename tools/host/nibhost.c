#include "tools/host/nibhost.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proto/private/sync.h"
#include "proto/shm_layout.h"
#include "proto/shm_name.h"

_Static_assert(sizeof(((struct nib_progress *)0)->error) == NIB_ERRMSG_MAX, "error size");

/* How often the expensive liveness checks run (kill(pid, 0), re-opening the
 * segment name), and how stale a heartbeat must be before the name is
 * re-opened to look for a restarted appliance. */
#define CHECK_EVERY_NS 100000000ull
#define STALE_NS 1000000000ull

struct nib_host {
    void *base;
    struct nib_shm_header *hdr;
    int fd;                 /* kept open: the claim lock is taken on it */
    uint64_t epoch;
    uint32_t pid;
    uint32_t app_pid;
    uint32_t vocab_size, ctx_len;
    uint64_t next_check_ns;
    char path[NIB_SHM_NAME_MAX + 2];
    char err[256];
};

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
    static const char *const names[] = {"pending",   "ok",          "eos",      "cancelled",
                                        "ctx_full",  "text_full",   "bad_request",
                                        "shutdown",  "owner_gone"};
    _Static_assert(sizeof names / sizeof names[0] == NIB_ST_COUNT, "a name per status");
    return status < NIB_ST_COUNT ? names[status] : "unknown";
}

static void sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* The header must describe exactly the layout this library was built for;
 * anything else is refused before a single slot is touched. */
static int check_header(struct nib_host *h, const struct nib_shm_header *s, uint64_t file_size)
{
    if (s->magic != NIB_SHM_MAGIC)
        return host_fail(h, NIB_HOST_ERR, "%s is not a nibble segment (bad magic)", h->path);
    if (s->version != NIB_SHM_VERSION)
        return host_fail(h, NIB_HOST_ERR,
                         "%s has segment layout version %u, this host library speaks version %u: "
                         "use a host built for the appliance's version",
                         h->path, s->version, NIB_SHM_VERSION);
#define FIELD(name, want)                                                                      \
    if ((uint64_t)s->name != (uint64_t)(want))                                                 \
        return host_fail(h, NIB_HOST_ERR,                                                      \
                         "%s: inconsistent header: " #name " is %llu, layout version %u has %llu", \
                         h->path, (unsigned long long)s->name, NIB_SHM_VERSION,                \
                         (unsigned long long)(want));
    FIELD(header_size, sizeof *s)
    FIELD(segment_size, NIB_SHM_SIZE)
    FIELD(n_slots, NIB_SLOTS)
    FIELD(slot_size, sizeof(struct nib_slot))
    FIELD(slots_offset, NIB_SHM_SLOTS_OFFSET)
    FIELD(stats_offset, NIB_SHM_STATS_OFFSET)
    FIELD(prompt_max, NIB_PROMPT_MAX)
    FIELD(slot_tokens, NIB_SLOT_TOKENS)
    FIELD(slot_text, NIB_SLOT_TEXT)
    FIELD(errmsg_max, NIB_ERRMSG_MAX)
    FIELD(stats_size, sizeof(struct nib_stats))
#undef FIELD
    if (file_size < NIB_SHM_SIZE)
        return host_fail(h, NIB_HOST_ERR, "%s: inconsistent header: the file is %llu bytes, "
                         "segment_size says %llu", h->path, (unsigned long long)file_size,
                         (unsigned long long)NIB_SHM_SIZE);
    if (s->vocab_size == 0 || s->ctx_len == 0 || s->bos_id >= s->vocab_size ||
        s->eos_id >= s->vocab_size || s->add_bos > 1)
        return host_fail(h, NIB_HOST_ERR, "%s: inconsistent header: model limits vocab_size %u, "
                         "ctx_len %u, bos_id %u, eos_id %u, add_bos %u",
                         h->path, s->vocab_size, s->ctx_len, s->bos_id, s->eos_id, s->add_bos);
    if (s->appliance_pid == 0 || s->epoch == 0)
        return host_fail(h, NIB_HOST_ERR, "%s: inconsistent header: appliance_pid %u, epoch %llu",
                         h->path, s->appliance_pid, (unsigned long long)s->epoch);
    if (nib_load_acq(&s->state) > NIB_APP_STOPPED)
        return host_fail(h, NIB_HOST_ERR, "%s: inconsistent header: appliance state %u", h->path,
                         nib_load_acq(&s->state));
    return NIB_HOST_OK;
}

int nib_host_attach(struct nib_host **out, const char *name)
{
    struct nib_host *h = calloc(1, sizeof *h);
    *out = h;
    if (!h)
        return NIB_HOST_ERR;
    h->fd = -1;
    if (nib_shm_path(name ? name : NIB_SHM_DEFAULT_NAME, h->path, sizeof h->path, h->err,
                     sizeof h->err))
        return NIB_HOST_ERR;
    h->fd = shm_open(h->path, O_RDWR | O_CLOEXEC, 0);
    if (h->fd < 0)
        return host_fail(h, NIB_HOST_ERR, "no appliance is serving %s (%s)", h->path,
                         strerror(errno));
    struct stat st;
    if (fstat(h->fd, &st) != 0 || (uint64_t)st.st_size < sizeof(struct nib_shm_header))
        return host_fail(h, NIB_HOST_ERR, "%s is too small to be a nibble segment", h->path);
    /* Map the header alone first: a segment of another version may have
     * another size, and that must be told as a version mismatch. */
    void *p = mmap(NULL, sizeof(struct nib_shm_header), PROT_READ, MAP_SHARED, h->fd, 0);
    if (p == MAP_FAILED)
        return host_fail(h, NIB_HOST_ERR, "cannot map %s: %s", h->path, strerror(errno));
    int rc = check_header(h, p, (uint64_t)st.st_size);
    munmap(p, sizeof(struct nib_shm_header));
    if (rc != NIB_HOST_OK)
        return rc;
    p = mmap(NULL, NIB_SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
    if (p == MAP_FAILED)
        return host_fail(h, NIB_HOST_ERR, "cannot map %s: %s", h->path, strerror(errno));
    h->base = p;
    h->hdr = p;
    /* Check again on the mapping we keep (the file could have been swapped). */
    if (check_header(h, h->hdr, (uint64_t)st.st_size) != NIB_HOST_OK)
        return NIB_HOST_ERR;
    /* The appliance writes the header, then READY; give a booting one a moment. */
    for (int i = 0; i < 200 && nib_load_acq(&h->hdr->state) == NIB_APP_BOOTING; i++)
        sleep_ns(10000000L);
    uint32_t state = nib_load_acq(&h->hdr->state);
    if (state != NIB_APP_READY)
        return host_fail(h, NIB_HOST_ERR, "the appliance on %s is not ready (it is %s)", h->path,
                         state == NIB_APP_BOOTING    ? "still booting"
                         : state == NIB_APP_STOPPING ? "stopping"
                                                     : "stopped");
    h->epoch = h->hdr->epoch;
    h->app_pid = h->hdr->appliance_pid;
    h->vocab_size = h->hdr->vocab_size;
    h->ctx_len = h->hdr->ctx_len;
    h->pid = (uint32_t)getpid();
    if (kill((pid_t)h->app_pid, 0) != 0 && errno == ESRCH)
        return host_fail(h, NIB_HOST_ERR, "%s is a stale segment: its appliance (pid %u) is not "
                         "running", h->path, h->app_pid);
    return NIB_HOST_OK;
}

void nib_host_detach(struct nib_host *h)
{
    if (!h)
        return;
    if (h->base)
        munmap(h->base, NIB_SHM_SIZE);
    if (h->fd >= 0)
        close(h->fd);
    free(h);
}

uint64_t nib_host_epoch(const struct nib_host *h)
{
    return h->epoch;
}

uint32_t nib_host_appliance_pid(const struct nib_host *h)
{
    return h->app_pid;
}

uint32_t nib_host_vocab_size(const struct nib_host *h)
{
    return h->vocab_size;
}

uint32_t nib_host_ctx_len(const struct nib_host *h)
{
    return h->ctx_len;
}

/* Epoch of the segment now under our name: 0 when there is none. */
static uint64_t name_epoch(struct nib_host *h)
{
    int fd = shm_open(h->path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct stat st;
    uint64_t epoch = 0;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size >= sizeof(struct nib_shm_header)) {
        const struct nib_shm_header *s = mmap(NULL, sizeof *s, PROT_READ, MAP_SHARED, fd, 0);
        if (s != MAP_FAILED) {
            epoch = s->epoch;
            munmap((void *)s, sizeof *s);
        }
    }
    close(fd);
    return epoch;
}

/* The appliance is gone; say whether a new boot already took the name. */
static int gone(struct nib_host *h, const char *what)
{
    uint64_t e = name_epoch(h);
    if (e && e != h->epoch)
        return host_fail(h, NIB_HOST_GONE, "%s; %s now belongs to a new boot (epoch %llu, this "
                         "handle has epoch %llu): attach again", what, h->path,
                         (unsigned long long)e, (unsigned long long)h->epoch);
    if (!e)
        return host_fail(h, NIB_HOST_GONE, "%s; %s was removed", what, h->path);
    return host_fail(h, NIB_HOST_GONE, "%s", what);
}

/* Cheap checks every time (the header); the pid and, when the heartbeat is
 * stale, the name, every CHECK_EVERY_NS unless forced. */
static int check(struct nib_host *h, int force)
{
    char what[96];
    if (h->hdr->epoch != h->epoch)
        return host_fail(h, NIB_HOST_GONE, "the appliance restarted (epoch changed)");
    uint32_t st = nib_load_acq(&h->hdr->state);
    if (st != NIB_APP_READY)
        return host_fail(h, NIB_HOST_GONE, "the appliance is %s",
                         st == NIB_APP_STOPPING ? "stopping" : "stopped");
    uint64_t now = nib_now_ns();
    if (!force && now < h->next_check_ns)
        return NIB_HOST_OK;
    h->next_check_ns = now + CHECK_EVERY_NS;
    if (kill((pid_t)h->app_pid, 0) != 0 && errno == ESRCH) {
        snprintf(what, sizeof what, "the appliance (pid %u) died", h->app_pid);
        return gone(h, what);
    }
    /* A live pid may have been reused by another process after a crash:
     * a stale heartbeat sends us to look at the name. */
    /* acquire: pairs with the release of heartbeat_ns in rt/serve.c checkpoint() */
    uint64_t beat = nib_load_acq(&h->hdr->heartbeat_ns);
    if (now > beat && now - beat > STALE_NS) {
        uint64_t e = name_epoch(h);
        if (e != h->epoch) {
            snprintf(what, sizeof what, "the appliance stopped answering (no heartbeat for %llu ms)",
                     (unsigned long long)((now - beat) / 1000000));
            return gone(h, what);
        }
    }
    return NIB_HOST_OK;
}

int nib_host_check(struct nib_host *h)
{
    return check(h, 1);
}

static void ring_doorbell(struct nib_shm_header *hdr)
{
    /* release: pairs with the acquire of doorbell in boot/main.c's serve loop */
    nib_fetch_add_rel(&hdr->doorbell, 1);
    syscall(SYS_futex, &hdr->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static int claim_lock(int fd, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET,
                       .l_start = NIB_CLAIM_LOCK_OFFSET, .l_len = 1};
    /* OFD locks: owned by this handle's open file, so two handles in one
     * process exclude each other too; dropped by the kernel if we die. */
    while (fcntl(fd, type == F_UNLCK ? F_OFD_SETLK : F_OFD_SETLKW, &fl) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

/* Claim a FREE slot under the lock: owner first, then the ticket, then
 * CLAIMED (release), so the appliance never sees CLAIMED with a stale
 * owner. Returns the slot index, -1 when none is free, -2 on lock failure. */
static int claim(struct nib_host *h, uint64_t *ticket)
{
    if (claim_lock(h->fd, F_WRLCK))
        return -2;
    int got = -1;
    for (uint32_t i = 0; i < NIB_SLOTS && got < 0; i++) {
        struct nib_slot *slot = nib_shm_slot(h->base, i);
        if (nib_load_acq(&slot->state) != NIB_SLOT_FREE)
            continue;
        nib_store_rel(&slot->owner_pid, h->pid);
        /* acq_rel: tickets are ordered among the hosts that take them */
        *ticket = nib_fetch_add_acq_rel(&h->hdr->next_ticket, 1);
        nib_store_rel(&slot->ticket, *ticket);
        nib_store_rel(&slot->state, NIB_SLOT_CLAIMED);
        got = (int)i;
    }
    claim_lock(h->fd, F_UNLCK);
    return got;
}

static int check_params(struct nib_host *h, size_t len, const struct nib_gen_params *p,
                        const void *prompt)
{
    if (p->prompt_ids ? (len == 0 || len > NIB_PROMPT_MAX / 4) : len > NIB_PROMPT_MAX)
        return host_fail(h, NIB_HOST_ERR, "prompt is %zu %s, the limit is %u bytes", len,
                         p->prompt_ids ? "ids" : "bytes", NIB_PROMPT_MAX);
    if (p->max_tokens > NIB_SLOT_TOKENS)
        return host_fail(h, NIB_HOST_ERR, "max_tokens %u is above the limit %u", p->max_tokens,
                         NIB_SLOT_TOKENS);
    if (!(p->temperature >= 0.0f && p->temperature <= NIB_TEMPERATURE_MAX))
        return host_fail(h, NIB_HOST_ERR, "temperature must be a number in 0..%g",
                         (double)NIB_TEMPERATURE_MAX);
    if (p->prompt_ids)
        for (size_t i = 0; i < len; i++)
            if (((const uint32_t *)prompt)[i] >= h->vocab_size)
                return host_fail(h, NIB_HOST_ERR, "prompt token id %u at %zu is not below the "
                                 "vocabulary size %u", ((const uint32_t *)prompt)[i], i,
                                 h->vocab_size);
    return NIB_HOST_OK;
}

int nib_host_submit(struct nib_host *h, const void *prompt, size_t len,
                    const struct nib_gen_params *params, struct nib_req_handle *out)
{
    struct nib_gen_params p = {0};
    if (params)
        p = *params;
    int rc = check_params(h, len, &p, prompt);
    if (rc != NIB_HOST_OK)
        return rc;
    uint64_t deadline = p.busy_wait_ms < 0 ? UINT64_MAX
                                           : nib_now_ns() + (uint64_t)p.busy_wait_ms * 1000000ull;
    long nap = 20000;
    int i;
    uint64_t ticket = 0;
    for (;;) {
        if ((rc = check(h, 1)) != NIB_HOST_OK)
            return rc;
        i = claim(h, &ticket);
        if (i == -2)
            return host_fail(h, NIB_HOST_ERR, "cannot take the claim lock on %s: %s", h->path,
                             strerror(errno));
        if (i >= 0)
            break;
        if (nib_now_ns() >= deadline)
            return host_fail(h, NIB_HOST_BUSY, "all %u slots are busy", NIB_SLOTS);
        sleep_ns(nap);
        nap = nap < 1000000 ? nap * 2 : nap;
    }
    struct nib_slot *slot = nib_shm_slot(h->base, (uint32_t)i);
    size_t bytes = p.prompt_ids ? len * 4 : len;
    slot->cancel = 0;
    slot->request_id = p.request_id;
    memset(&slot->req, 0, sizeof slot->req);
    slot->req.prompt_len = (uint32_t)bytes;
    slot->req.max_tokens = p.max_tokens ? p.max_tokens : 64;
    slot->req.temperature = p.temperature;
    slot->req.seed = p.seed;
    slot->req.flags = (p.no_bos ? NIB_REQ_NO_BOS : 0) | (p.prompt_ids ? NIB_REQ_PROMPT_IDS : 0);
    if (bytes)
        memcpy(slot->prompt, prompt, bytes);
    slot->n_tokens = slot->n_prompt = slot->text_len = 0;
    slot->status = NIB_ST_PENDING;
    slot->error[0] = 0;
    /* release: pairs with the acquire of SUBMITTED in rt/serve.c
     * next_submitted() and serve()'s CAS: the request above is complete */
    nib_store_rel(&slot->state, NIB_SLOT_SUBMITTED);
    ring_doorbell(h->hdr);
    out->slot = (uint32_t)i;
    out->ticket = ticket;
    return NIB_HOST_OK;
}

/* The slot named by r, if it still holds this host's request. */
static struct nib_slot *own_slot(struct nib_host *h, const struct nib_req_handle *r)
{
    if (r->slot >= NIB_SLOTS) {
        host_fail(h, NIB_HOST_ERR, "request handle names slot %u of %u", r->slot, NIB_SLOTS);
        return NULL;
    }
    struct nib_slot *slot = nib_shm_slot(h->base, r->slot);
    uint32_t st = nib_load_acq(&slot->state);
    if (nib_load_relaxed(&slot->ticket) != r->ticket ||
        nib_load_relaxed(&slot->owner_pid) != h->pid || st == NIB_SLOT_FREE) {
        host_fail(h, NIB_HOST_ERR, "slot %u no longer holds request %llu of this host "
                  "(released, or reclaimed by the appliance)", r->slot,
                  (unsigned long long)r->ticket);
        return NULL;
    }
    return slot;
}

int nib_host_poll(struct nib_host *h, const struct nib_req_handle *r, struct nib_progress *pr)
{
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return NIB_HOST_ERR;
    memset(pr, 0, sizeof *pr);
    /* acquire: pairs with the release (CAS to DONE) in rt/serve.c finish() */
    uint32_t st = nib_load_acq(&slot->state);
    pr->done = st == NIB_SLOT_DONE;
    /* Counts are read after the state (acquire), so a DONE request's counts
     * are final. Everything is clamped: the segment is shared with others. */
    /* acquire: pair with the releases of n_tokens and text_len in rt/serve.c */
    uint32_t n = nib_load_acq(&slot->n_tokens), t = nib_load_acq(&slot->text_len);
    uint32_t np = nib_load_relaxed(&slot->n_prompt);
    pr->n_tokens = n <= NIB_SLOT_TOKENS ? n : NIB_SLOT_TOKENS;
    pr->n_prompt = np <= pr->n_tokens ? np : pr->n_tokens;
    pr->text_len = t <= NIB_SLOT_TEXT ? t : NIB_SLOT_TEXT;
    pr->tokens = slot->tokens;
    pr->text = (const char *)slot->text;
    memcpy(pr->error, slot->error, sizeof pr->error);
    pr->error[sizeof pr->error - 1] = 0;
    pr->status = pr->done ? slot->status : NIB_ST_PENDING;
    pr->request_id = slot->request_id;
    pr->t_start_ns = slot->t_start_ns;
    pr->t_first_ns = slot->t_first_ns;
    pr->t_done_ns = slot->t_done_ns;
    if (!pr->done)
        return check(h, 0);
    return NIB_HOST_OK;
}

/* Sleep on done_seq until the appliance posts some final status, or ns. */
static void sleep_on_done(struct nib_host *h, struct nib_slot *slot, uint64_t ns)
{
    /* seq_cst add then load: pairs with rt/serve.c announce_done()'s seq_cst
     * add of done_seq then load of done_waiters (and FUTEX_WAIT rechecks seq). */
    nib_fetch_add_seqcst(&h->hdr->done_waiters, 1);
    uint32_t seq = nib_load_seqcst(&h->hdr->done_seq);
    if (nib_load_acq(&slot->state) != NIB_SLOT_DONE) {
        struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
        syscall(SYS_futex, &h->hdr->done_seq, FUTEX_WAIT, seq, &ts, NULL, 0);
    }
    nib_fetch_sub_seqcst(&h->hdr->done_waiters, 1);
}

int nib_host_wait(struct nib_host *h, const struct nib_req_handle *r, uint32_t seen_tokens,
                  int timeout_ms, struct nib_progress *pr)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
                                       : nib_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    long nap = 10000;
    for (unsigned spins = 0;; spins++) {
        int rc = nib_host_poll(h, r, pr);
        if (rc != NIB_HOST_OK)
            return rc;
        if (pr->done || (seen_tokens != NIB_HOST_WAIT_DONE && pr->n_tokens > seen_tokens))
            return NIB_HOST_OK;
        uint64_t now = nib_now_ns();
        if (now >= deadline)
            return NIB_HOST_TIMEOUT;
        if (seen_tokens == NIB_HOST_WAIT_DONE) {
            /* Short sleeps so the liveness checks in poll still run. */
            uint64_t left = deadline - now;
            sleep_on_done(h, nib_shm_slot(h->base, r->slot), left < 50000000ull ? left : 50000000ull);
        } else if (spins > 100) {
            /* Streaming: the appliance makes no system call per token, so
             * hosts poll, backing off to at most 1 ms between looks. */
            sleep_ns(nap);
            nap = nap < 1000000 ? nap * 2 : nap;
        }
    }
}

int nib_host_cancel(struct nib_host *h, const struct nib_req_handle *r)
{
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return NIB_HOST_ERR;
    /* release: pairs with the acquires of cancel in rt/serve.c */
    nib_store_rel(&slot->cancel, 1u);
    return NIB_HOST_OK;
}

int nib_host_release(struct nib_host *h, const struct nib_req_handle *r)
{
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return NIB_HOST_ERR;
    uint32_t expect = NIB_SLOT_DONE;
    if (!nib_cas(&slot->state, &expect, NIB_SLOT_FREE))
        return host_fail(h, NIB_HOST_ERR, "request is not finished (cancel it and wait first)");
    return NIB_HOST_OK;
}

int nib_host_stop(struct nib_host *h, int timeout_ms)
{
    /* release: pairs with the acquires of stop_requested in rt/serve.c and boot/main.c */
    nib_store_rel(&h->hdr->stop_requested, 1u);
    ring_doorbell(h->hdr);
    uint64_t deadline = nib_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    while (nib_load_acq(&h->hdr->state) != NIB_APP_STOPPED) {
        if (kill((pid_t)h->app_pid, 0) != 0 && errno == ESRCH)
            return NIB_HOST_OK; /* gone is stopped */
        if (timeout_ms >= 0 && nib_now_ns() >= deadline)
            return host_fail(h, NIB_HOST_TIMEOUT, "the appliance did not stop in %d ms", timeout_ms);
        sleep_ns(1000000L);
    }
    return NIB_HOST_OK;
}

const void *nib_host_stats(const struct nib_host *h)
{
    return (const uint8_t *)h->base + NIB_SHM_STATS_OFFSET;
}
