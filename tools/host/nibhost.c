#include "tools/host/nibhost.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt/shm_layout.h"
#include "rt/shm_name.h"

struct nib_host {
    void *base;
    struct nib_shm_header *hdr;
    uint64_t epoch;
    uint32_t pid;
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
    static const char *const names[] = {"pending",   "ok",        "eos",         "cancelled",
                                        "ctx_full",  "text_full", "bad_request", "shutdown"};
    return status < sizeof names / sizeof names[0] ? names[status] : "unknown";
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The header must describe exactly the layout this library was built for. */
static int check_header(struct nib_host *h, const struct nib_shm_header *s, uint64_t size)
{
    if (s->magic != NIB_SHM_MAGIC)
        return host_fail(h, NIB_HOST_ERR, "segment is not a nibble segment (bad magic)");
    if (s->version != NIB_SHM_VERSION)
        return host_fail(h, NIB_HOST_ERR,
                         "segment layout version %u, this host library speaks version %u",
                         s->version, NIB_SHM_VERSION);
    if (s->header_size != sizeof *s || s->segment_size != NIB_SHM_SIZE || size < NIB_SHM_SIZE ||
        s->n_slots != NIB_SLOTS || s->slot_size != sizeof(struct nib_slot) ||
        s->slots_offset != NIB_SHM_SLOTS_OFFSET || s->stats_offset != NIB_SHM_STATS_OFFSET ||
        s->prompt_max != NIB_PROMPT_MAX || s->slot_tokens != NIB_SLOT_TOKENS ||
        s->slot_text != NIB_SLOT_TEXT)
        return host_fail(h, NIB_HOST_ERR, "segment header is inconsistent with layout version %u",
                         NIB_SHM_VERSION);
    return NIB_HOST_OK;
}

int nib_host_attach(struct nib_host **out, const char *name)
{
    struct nib_host *h = calloc(1, sizeof *h);
    *out = h;
    if (!h)
        return NIB_HOST_ERR;
    char path[NIB_SHM_NAME_MAX + 2];
    if (nib_shm_path(name ? name : NIB_SHM_DEFAULT_NAME, path, sizeof path, h->err, sizeof h->err))
        return NIB_HOST_ERR;
    int fd = shm_open(path, O_RDWR, 0);
    if (fd < 0)
        return host_fail(h, NIB_HOST_ERR, "no appliance is serving %s (%s)", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < sizeof(struct nib_shm_header)) {
        close(fd);
        return host_fail(h, NIB_HOST_ERR, "segment %s is too small to be a nibble segment", path);
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return host_fail(h, NIB_HOST_ERR, "cannot map %s: %s", path, strerror(errno));
    h->base = p;
    h->hdr = p;
    if (check_header(h, h->hdr, (uint64_t)st.st_size) != NIB_HOST_OK) {
        munmap(p, (size_t)st.st_size);
        h->base = NULL;
        return NIB_HOST_ERR;
    }
    if (nib_load_acq(&h->hdr->state) != NIB_APP_READY) {
        munmap(p, NIB_SHM_SIZE);
        h->base = NULL;
        return host_fail(h, NIB_HOST_ERR, "appliance on %s is not ready", path);
    }
    h->epoch = h->hdr->epoch;
    h->pid = (uint32_t)getpid();
    return NIB_HOST_OK;
}

void nib_host_detach(struct nib_host *h)
{
    if (!h)
        return;
    if (h->base)
        munmap(h->base, NIB_SHM_SIZE);
    free(h);
}

/* The appliance we attached to is still the one serving. */
static int alive(struct nib_host *h)
{
    if (h->hdr->epoch != h->epoch)
        return host_fail(h, NIB_HOST_GONE, "the appliance restarted (epoch changed)");
    uint32_t st = nib_load_acq(&h->hdr->state);
    if (st != NIB_APP_READY)
        return host_fail(h, NIB_HOST_GONE, "the appliance is %s",
                         st == NIB_APP_STOPPING ? "stopping" : "stopped");
    return NIB_HOST_OK;
}

static void ring_doorbell(struct nib_shm_header *hdr)
{
    __atomic_fetch_add(&hdr->doorbell, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &hdr->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

int nib_host_submit(struct nib_host *h, const char *prompt, size_t len,
                    const struct nib_gen_params *p, struct nib_req_handle *out)
{
    int rc = alive(h);
    if (rc != NIB_HOST_OK)
        return rc;
    if (len > NIB_PROMPT_MAX)
        return host_fail(h, NIB_HOST_ERR, "prompt is %zu bytes, the limit is %u", len,
                         NIB_PROMPT_MAX);
    for (uint32_t i = 0; i < NIB_SLOTS; i++) {
        struct nib_slot *slot = nib_shm_slot(h->base, i);
        uint32_t expect = NIB_SLOT_FREE;
        if (!nib_cas(&slot->state, &expect, NIB_SLOT_CLAIMED))
            continue;
        slot->owner_pid = h->pid;
        slot->cancel = 0;
        memset(&slot->req, 0, sizeof slot->req);
        slot->req.prompt_len = (uint32_t)len;
        slot->req.max_tokens = p && p->max_tokens ? p->max_tokens : 64;
        slot->req.temperature = p ? p->temperature : 0.0f;
        slot->req.seed = p ? p->seed : 0;
        slot->req.flags = p && p->no_bos ? NIB_REQ_NO_BOS : 0;
        memcpy(slot->prompt, prompt, len);
        slot->n_tokens = 0;
        slot->text_len = 0;
        slot->status = NIB_ST_PENDING;
        uint64_t ticket = __atomic_fetch_add(&h->hdr->next_ticket, 1, __ATOMIC_ACQ_REL);
        slot->ticket = ticket;
        nib_store_rel(&slot->state, NIB_SLOT_SUBMITTED);
        ring_doorbell(h->hdr);
        out->slot = i;
        out->ticket = ticket;
        return NIB_HOST_OK;
    }
    return host_fail(h, NIB_HOST_BUSY, "all %u slots are busy", NIB_SLOTS);
}

static struct nib_slot *own_slot(struct nib_host *h, const struct nib_req_handle *r)
{
    if (r->slot >= NIB_SLOTS)
        return NULL;
    struct nib_slot *slot = nib_shm_slot(h->base, r->slot);
    if (slot->ticket != r->ticket || slot->owner_pid != h->pid)
        return NULL;
    return slot;
}

int nib_host_poll(struct nib_host *h, const struct nib_req_handle *r, struct nib_progress *pr)
{
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return host_fail(h, NIB_HOST_ERR, "request handle does not name a slot this host owns");
    memset(pr, 0, sizeof *pr);
    uint32_t st = nib_load_acq(&slot->state);
    pr->done = st == NIB_SLOT_DONE;
    /* Counts are read after the state (acquire), so a DONE request's counts are final. */
    uint32_t n = nib_load_acq(&slot->n_tokens), t = nib_load_acq(&slot->text_len);
    pr->n_tokens = n <= NIB_SLOT_TOKENS ? n : NIB_SLOT_TOKENS;
    pr->n_prompt = slot->n_prompt <= pr->n_tokens ? slot->n_prompt : pr->n_tokens;
    pr->text_len = t <= NIB_SLOT_TEXT ? t : NIB_SLOT_TEXT;
    pr->tokens = slot->tokens;
    pr->text = (const char *)slot->text;
    slot->error[NIB_ERRMSG_MAX - 1] = 0;
    pr->error = slot->error;
    pr->status = pr->done ? slot->status : NIB_ST_PENDING;
    pr->t_start_ns = slot->t_start_ns;
    pr->t_first_ns = slot->t_first_ns;
    pr->t_done_ns = slot->t_done_ns;
    if (!pr->done && (st == NIB_SLOT_SUBMITTED || st == NIB_SLOT_RUNNING)) {
        int rc = alive(h);
        if (rc != NIB_HOST_OK)
            return rc;
    }
    return NIB_HOST_OK;
}

int nib_host_wait(struct nib_host *h, const struct nib_req_handle *r, uint32_t seen_tokens,
                  int timeout_ms, struct nib_progress *pr)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : mono_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (unsigned spins = 0;; spins++) {
        int rc = nib_host_poll(h, r, pr);
        if (rc != NIB_HOST_OK)
            return rc;
        if (pr->done || pr->n_tokens > seen_tokens)
            return NIB_HOST_OK;
        if (mono_ns() >= deadline)
            return NIB_HOST_TIMEOUT;
        if (spins > 200) {
            /* The appliance never makes a system call to wake hosts, so
             * hosts poll: briefly spin, then sleep in short steps. */
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

int nib_host_cancel(struct nib_host *h, const struct nib_req_handle *r)
{
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return host_fail(h, NIB_HOST_ERR, "request handle does not name a slot this host owns");
    nib_store_rel(&slot->cancel, 1u);
    return NIB_HOST_OK;
}

int nib_host_release(struct nib_host *h, const struct nib_req_handle *r)
{
    struct nib_slot *slot = own_slot(h, r);
    if (!slot)
        return host_fail(h, NIB_HOST_ERR, "request handle does not name a slot this host owns");
    uint32_t expect = NIB_SLOT_DONE;
    if (!nib_cas(&slot->state, &expect, NIB_SLOT_FREE))
        return host_fail(h, NIB_HOST_ERR, "request is not finished (cancel it first)");
    return NIB_HOST_OK;
}

int nib_host_stop(struct nib_host *h, int timeout_ms)
{
    nib_store_rel(&h->hdr->stop_requested, 1u);
    ring_doorbell(h->hdr);
    uint64_t deadline = mono_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    while (nib_load_acq(&h->hdr->state) != NIB_APP_STOPPED) {
        if (timeout_ms >= 0 && mono_ns() >= deadline)
            return host_fail(h, NIB_HOST_TIMEOUT, "the appliance did not stop in %d ms", timeout_ms);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NIB_HOST_OK;
}

const void *nib_host_stats(const struct nib_host *h)
{
    return (const uint8_t *)h->base + NIB_SHM_STATS_OFFSET;
}
