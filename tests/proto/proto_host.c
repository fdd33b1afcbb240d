/* proto_host: host processes for the protocol scenarios (test_protocol.py
 * starts them against a real appliance). Each mode prints what it saw and
 * exits 0 only when every check held.
 *
 *   many NAME EXPECTED N          N pipelined requests, each answer checked
 *   stress NAME EXPECTED N SEED   mixed lengths, some cancelled; totals as JSON
 *   scribble NAME EXPECTED N SEED N raw requests in this host's own ring, most
 *                                 of them random bytes, valid ones interleaved
 *                                 and checked exactly; totals as JSON
 *   cancel-mid NAME               cancels a request mid-stream, checks the slot
 *   hog NAME                      long request; SIGSTOPs the appliance once
 *                                 it streams, prints "stopped", then pauses
 *   claim-die NAME                claims a slot of its ring by hand, prints
 *                                 "claimed SLOT", pauses
 *   wait-gone NAME                attaches, prints "attached", reads a line,
 *                                 submits, prints "submitted", waits: must
 *                                 end with GONE ("rc -2: MESSAGE")
 *   attach-then NAME              attaches, waits for a line on stdin, then
 *                                 must get GONE, then attaches again
 *   seal-attack NAME              every resize/write/seal attempt on the two
 *                                 descriptors it receives (and reopened
 *                                 through /proc/self/fd): one line each,
 *                                 "ATTEMPT refused (errno)" or "ATTEMPT
 *                                 allowed"; exit 0 only if all were refused
 *   fork NAME                     a child of an attached host uses the
 *                                 parent's handle: it must attach afresh and
 *                                 get its own exact answer; the parent's
 *                                 request queued across the fork is exact
 *
 * EXPECTED holds one greedy reference per line:
 *   PROMPT<TAB>PROMPT_IDS<TAB>GENERATED_IDS<TAB>STATUS   (ids comma-separated)
 * as `nib ask --json` gave them for max_tokens = the generated count (or
 * more, when STATUS is eos). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/ctl.h"
#include "proto/private/ctl_io.h"
#include "proto/private/sync.h"
#include "proto/shm_layout.h"
#include "proto/shm_name.h"
#include "rt/sample.h"
#include "tests/common/fds.h"
#include "tools/host/nibhost.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define MAX_CASES 64
#define MAX_IDS 512

struct ref {
    char prompt[256];
    uint32_t prompt_ids[MAX_IDS], n_prompt;
    uint32_t gen[MAX_IDS], n_gen;
    int eos; /* the reference stopped on EOS after n_gen tokens */
};

static struct ref refs[MAX_CASES];
static int n_refs;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "FAIL: ");
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static uint32_t parse_ids(char *s, uint32_t *out)
{
    uint32_t n = 0;
    for (char *tok = strtok(s, ","); tok && n < MAX_IDS; tok = strtok(NULL, ","))
        out[n++] = (uint32_t)strtoul(tok, NULL, 10);
    return n;
}

static void load_refs(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die("cannot open %s", path);
    static char line[16384];
    while (n_refs < MAX_CASES && fgets(line, sizeof line, f)) {
        char *col[4];
        char *p = line;
        for (int i = 0; i < 4; i++) {
            col[i] = p;
            p = strchr(p, i < 3 ? '\t' : '\n');
            if (!p && i < 3)
                die("bad line in %s", path);
            if (p)
                *p++ = 0;
        }
        struct ref *r = &refs[n_refs++];
        size_t len = strlen(col[0]);
        if (len >= sizeof r->prompt)
            die("prompt longer than %zu bytes in %s", sizeof r->prompt - 1, path);
        memcpy(r->prompt, col[0], len + 1);
        r->n_prompt = parse_ids(col[1], r->prompt_ids);
        r->n_gen = parse_ids(col[2], r->gen);
        r->eos = !strcmp(col[3], "eos");
    }
    fclose(f);
    if (!n_refs)
        die("no references in %s", path);
}

static struct nib_host *attach(const char *name)
{
    struct nib_host *h;
    if (nib_host_attach(&h, name, 30000) != NIB_HOST_OK)
        die("attach: %s", nib_host_error(h));
    return h;
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Generated ids of a finished request of max_tokens for reference r: an
 * exact prefix of the reference; exactly max_tokens long unless the
 * reference hit EOS sooner. cancelled: any prefix will do. */
static void check_answer(const struct ref *r, const struct nib_progress *pr, uint32_t max_tokens,
                         int cancelled, const char *what)
{
    uint32_t n_gen = pr->n_tokens - pr->n_prompt;
    if (pr->n_prompt != r->n_prompt || memcmp(pr->tokens, r->prompt_ids, r->n_prompt * 4))
        die("%s: prompt ids differ for '%s'", what, r->prompt);
    if (n_gen > r->n_gen && !(n_gen <= max_tokens && !r->eos))
        die("%s: %u ids for '%s', the reference has %u", what, n_gen, r->prompt, r->n_gen);
    if (memcmp(pr->tokens + pr->n_prompt, r->gen, (n_gen < r->n_gen ? n_gen : r->n_gen) * 4))
        die("%s: generated ids for '%s' differ from the reference", what, r->prompt);
    if (cancelled)
        return;
    uint32_t want = max_tokens;
    if (r->eos && r->n_gen < want)
        want = r->n_gen;
    if (n_gen != want)
        die("%s: '%s' max_tokens %u gave %u ids (status %s), expected %u", what, r->prompt,
            max_tokens, n_gen, nib_status_name(pr->status), want);
    uint32_t want_st = n_gen < max_tokens ? NIB_ST_EOS : NIB_ST_OK;
    if (pr->status != want_st)
        die("%s: '%s' status %s, expected %s", what, r->prompt, nib_status_name(pr->status),
            nib_status_name(want_st));
}

/* ---- many: pipelined requests, each answer goes to its asker ---- */

struct pending {
    int used, ref, cancel_at;
    uint32_t max_tokens;
    uint64_t id;
    struct nib_req_handle h;
};

static int mode_many(const char *name, const char *expected, int n)
{
    load_refs(expected);
    struct nib_host *h = attach(name);
    struct pending q[4] = {{0}};
    int sent = 0, got = 0, busy = 0;
    uint64_t tag = (uint64_t)getpid() << 32;
    uint64_t retry_at = 0;
    while (got < n) {
        for (int i = 0; i < 4 && sent < n && now_us() >= retry_at; i++) {
            if (q[i].used)
                continue;
            int ref = (sent + (int)getpid()) % n_refs;
            struct nib_gen_params p = {.max_tokens = refs[ref].n_gen ? refs[ref].n_gen : 1,
                                       .request_id = tag | (uint64_t)sent};
            int rc = nib_host_submit(h, refs[ref].prompt, strlen(refs[ref].prompt), &p, &q[i].h);
            if (rc == NIB_HOST_BUSY) { /* back-pressure: look again in a while */
                busy++;
                retry_at = now_us() + 500;
                break;
            }
            if (rc != NIB_HOST_OK)
                die("submit: %s", nib_host_error(h));
            q[i] = (struct pending){1, ref, -1, p.max_tokens, p.request_id, q[i].h};
            sent++;
        }
        for (int i = 0; i < 4; i++) {
            if (!q[i].used)
                continue;
            struct nib_progress pr;
            int rc = nib_host_wait(h, &q[i].h, NIB_HOST_WAIT_DONE, 1, &pr);
            if (rc == NIB_HOST_TIMEOUT)
                continue;
            if (rc != NIB_HOST_OK)
                die("wait: %s", nib_host_error(h));
            if (pr.request_id != q[i].id)
                die("request id %" PRIx64 " came back as %" PRIx64, q[i].id, pr.request_id);
            check_answer(&refs[q[i].ref], &pr, q[i].max_tokens, 0, "many");
            if (nib_host_release(h, &q[i].h) != NIB_HOST_OK)
                die("release: %s", nib_host_error(h));
            q[i].used = 0;
            got++;
        }
    }
    nib_host_detach(h);
    printf("{\"requests\": %d, \"busy\": %d}\n", n, busy);
    return 0;
}

/* ---- stress: mixed lengths, some cancelled, totals for the driver ---- */

static int mode_stress(const char *name, const char *expected, int n, uint64_t seed)
{
    load_refs(expected);
    int fds0 = tu_count_fds();
    struct nib_host *h = attach(name);
    uint64_t rng = nib_rng_seed(seed);
    enum { WIN = 6 };
    struct pending q[WIN] = {{0}};
    static const uint32_t lens[] = {1, 2, 3, 5, 8, 16, 32, 64};
    uint64_t accepted = 0, finals = 0, cancelled = 0, generated = 0, busy = 0, cancel_sent = 0;
    uint64_t by_status[NIB_ST_COUNT] = {0};
    int sent = 0;
    uint64_t retry_at = 0;
    while ((int)finals < n) {
        for (int i = 0; i < WIN && sent < n && now_us() >= retry_at; i++) {
            if (q[i].used)
                continue;
            int ref = (int)(nib_rng_f32(&rng) * (float)n_refs);
            uint32_t max = lens[(int)(nib_rng_f32(&rng) * 8.0f)];
            struct nib_gen_params p = {.max_tokens = max, .request_id = (uint64_t)sent};
            int rc = nib_host_submit(h, refs[ref].prompt, strlen(refs[ref].prompt), &p, &q[i].h);
            if (rc == NIB_HOST_BUSY) { /* back-pressure: look again in a while */
                busy++;
                retry_at = now_us() + 500;
                break;
            }
            if (rc != NIB_HOST_OK)
                die("submit: %s", nib_host_error(h));
            accepted++;
            /* One in five is cancelled, after 0..max-1 tokens. */
            int cancel_at = nib_rng_f32(&rng) < 0.2f ? (int)(nib_rng_f32(&rng) * (float)max) : -1;
            q[i] = (struct pending){1, ref, cancel_at, max, p.request_id, q[i].h};
            sent++;
        }
        int progressed = 0;
        for (int i = 0; i < WIN; i++) {
            if (!q[i].used)
                continue;
            struct nib_progress pr;
            if (nib_host_poll(h, &q[i].h, &pr) != NIB_HOST_OK)
                die("poll: %s", nib_host_error(h));
            if (q[i].cancel_at >= 0 && (int)(pr.n_tokens - pr.n_prompt) >= q[i].cancel_at &&
                (pr.n_tokens > 0 || q[i].cancel_at == 0)) {
                nib_host_cancel(h, &q[i].h);
                q[i].cancel_at = -2; /* sent */
                cancel_sent++;
            }
            if (!pr.done)
                continue;
            if (pr.request_id != q[i].id)
                die("request id %" PRIu64 " came back as %" PRIu64, q[i].id, pr.request_id);
            if (pr.status >= NIB_ST_COUNT || pr.status == NIB_ST_BAD_REQUEST ||
                pr.status == NIB_ST_SHUTDOWN || pr.status == NIB_ST_PENDING)
                die("status %s for a good request", nib_status_name(pr.status));
            if (pr.status == NIB_ST_CANCELLED && q[i].cancel_at != -2)
                die("cancelled without asking");
            check_answer(&refs[q[i].ref], &pr, q[i].max_tokens, q[i].cancel_at == -2, "stress");
            by_status[pr.status]++;
            cancelled += pr.status == NIB_ST_CANCELLED;
            generated += pr.n_tokens - pr.n_prompt;
            finals++;
            if (nib_host_release(h, &q[i].h) != NIB_HOST_OK)
                die("release: %s", nib_host_error(h));
            q[i].used = 0;
            progressed = 1;
        }
        if (!progressed)
            sleep_us(50);
    }
    nib_host_detach(h);
    int fds1 = tu_count_fds();
    if (fds0 != fds1)
        die("%d file descriptors before attach, %d after detach", fds0, fds1);
    printf("{\"accepted\": %" PRIu64 ", \"finals\": %" PRIu64 ", \"cancelled\": %" PRIu64
           ", \"cancel_sent\": %" PRIu64 ", \"tokens_generated\": %" PRIu64 ", \"busy\": %" PRIu64
           ", \"ok\": %" PRIu64 ", \"eos\": %" PRIu64 "}\n",
           accepted, finals, cancelled, cancel_sent, generated, busy, by_status[NIB_ST_OK],
           by_status[NIB_ST_EOS]);
    return 0;
}

/* ---- raw access: the protocol by hand, for hosts that misbehave ---- */

struct raw {
    int sock, hfd, rfd;
    const struct nib_shm_header *hdr; /* read-only mapping */
    struct nib_shm_header g;          /* copy: the geometry */
    uint8_t *ring;
    size_t hsize, rsize;
    struct nib_ring_header *rh;
    uint32_t index;
};

/* Attach by hand (docs/ring.md): connect, ATTACH, two descriptors. The
 * descriptors stay open (seal-attack uses them). */
static void raw_attach(struct raw *r, const char *name)
{
    struct nib_name_paths paths;
    char err[256];
    if (nib_name_paths(name, &paths, err, sizeof err))
        die("%s", err);
    r->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", paths.sock);
    if (r->sock < 0 || connect(r->sock, (struct sockaddr *)&sa, sizeof sa) != 0)
        die("connect %s: %s", paths.sock, strerror(errno));
    struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_ATTACH);
    if (send(r->sock, &m, sizeof m, MSG_NOSIGNAL) != (ssize_t)sizeof m)
        die("send ATTACH: %s", strerror(errno));
    struct pollfd p = {r->sock, POLLIN, 0};
    if (poll(&p, 1, 30000) != 1)
        die("no answer to ATTACH");
    int fds[2], nfds;
    ssize_t n = nib_ctl_recv(r->sock, &m, sizeof m, MSG_CMSG_CLOEXEC, fds, 2, &nfds);
    if (n != (ssize_t)sizeof m || m.type != NIB_CTL_ATTACHED || nfds != 2)
        die("ATTACH: reply type 0x%x status %u", m.type, m.status);
    r->hfd = fds[0];
    r->rfd = fds[1];
    r->hsize = (size_t)m.header_size;
    r->rsize = (size_t)m.ring_size;
    r->index = m.host_index;
    r->hdr = mmap(NULL, r->hsize, PROT_READ, MAP_SHARED, r->hfd, 0);
    r->ring = mmap(NULL, r->rsize, PROT_READ | PROT_WRITE, MAP_SHARED, r->rfd, 0);
    if (r->hdr == MAP_FAILED || r->ring == MAP_FAILED)
        die("map: %s", strerror(errno));
    r->g = *r->hdr;
    r->rh = (struct nib_ring_header *)(void *)r->ring;
    if (r->g.magic != NIB_SHM_MAGIC || r->g.ring_size != r->rsize || r->rh->magic != NIB_RING_MAGIC)
        die("raw attach: not a version %u appliance", NIB_SHM_VERSION);
}

static void raw_close(struct raw *r)
{
    munmap((void *)r->hdr, r->hsize);
    munmap(r->ring, r->rsize);
    close(r->hfd);
    close(r->rfd);
    close(r->sock);
}

static struct nib_slot *raw_slot(struct raw *r, uint32_t i)
{
    return nib_ring_slot(r->ring, &r->g, i);
}

/* A FREE slot of our ring, CLAIMED; -1 when none. */
static int raw_claim(struct raw *r)
{
    for (uint32_t i = 0; i < r->g.n_slots; i++) {
        uint32_t expect = NIB_SLOT_FREE;
        if (nib_cas(&raw_slot(r, i)->state, &expect, NIB_SLOT_CLAIMED))
            return (int)i;
    }
    return -1;
}

static void raw_submit(struct raw *r, struct nib_slot *s)
{
    s->cancel = 0;
    s->n_tokens = s->n_prompt = s->text_len = s->status = 0;
    if (!s->ticket)
        s->ticket = ++r->rh->next_ticket;
    nib_store_rel(&s->state, NIB_SLOT_SUBMITTED);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (nib_load_relaxed(&r->hdr->sleeping)) {
        struct nib_ctl_msg m = nib_ctl_make(NIB_CTL_KICK);
        send(r->sock, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
}

/* ---- scribble: random bytes in this host's own ring, valid ones interleaved ---- */

enum kind {
    K_VALID,
    K_RANDOM_REQ,
    K_ONE_FIELD,
    K_RANDOM_PROMPT,
    K_RANDOM_IDS,
    K_SCRIBBLE_LATER,
    K_COUNT
};

struct inflight {
    int used, kind, ref;
    uint32_t max_tokens;
    uint64_t ticket;
    int slot;
};

static uint8_t rbyte(uint64_t *rng)
{
    return (uint8_t)(nib_rng_f32(rng) * 256.0f);
}

static void rfill(uint64_t *rng, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)p)[i] = rbyte(rng);
}

static uint32_t ru32(uint64_t *rng)
{
    uint32_t v;
    rfill(rng, &v, 4);
    return v;
}

static void write_valid(struct raw *r, struct nib_slot *s, const struct ref *ref,
                        uint32_t max_tokens)
{
    memset(&s->req, 0, sizeof s->req);
    s->req.prompt_len = (uint32_t)strlen(ref->prompt);
    s->req.max_tokens = max_tokens;
    memcpy(nib_slot_prompt(s, &r->g), ref->prompt, s->req.prompt_len);
}

static void write_garbage(struct raw *r, struct nib_slot *s, int kind, uint64_t *rng)
{
    uint32_t n, vocab = r->g.vocab_size, slot_tokens = r->g.slot_tokens;
    uint8_t *prompt = nib_slot_prompt(s, &r->g);
    switch (kind) {
    case K_RANDOM_REQ: /* every byte of the request and some prompt bytes */
        rfill(rng, &s->req, sizeof s->req);
        rfill(rng, prompt, 64);
        if (ru32(rng) % 4 == 0) { /* sometimes far enough to reach the tokenizer */
            memset(s->req.reserved, 0, sizeof s->req.reserved);
            s->req.kind = 0;
            s->req.prompt_len %= 9;
        }
        if (s->req.max_tokens > 2 && s->req.max_tokens <= slot_tokens)
            s->req.max_tokens = 1 + s->req.max_tokens % 2;
        break;
    case K_ONE_FIELD: { /* a good request with one field random */
        memset(&s->req, 0, sizeof s->req);
        s->req.prompt_len = 3;
        s->req.max_tokens = 1;
        memcpy(prompt, "abc", 3);
        uint32_t v = ru32(rng);
        switch (ru32(rng) % 16) {
        case 0: s->req.prompt_len = v; break;
        case 1: s->req.max_tokens = v % 2 ? 0 : v | (slot_tokens + 1); break;
        case 2: memcpy(&s->req.temperature, &v, 4); break;
        case 3: s->req.flags = v; break;
        case 4: s->req.kind = v | 1; break;
        case 6:
        case 7:
        case 8:
        case 9:
        case 10:
        case 11:
        case 12:
        case 13:
        case 14: s->req.reserved[v % sizeof s->req.reserved] = (uint8_t)(v >> 8 | 1); break;
        default: s->req.seed = (uint64_t)v << 32 | ru32(rng); break; /* valid: served */
        }
        break;
    }
    case K_RANDOM_PROMPT: /* valid header, random prompt bytes through the tokenizer */
        memset(&s->req, 0, sizeof s->req);
        s->req.prompt_len = ru32(rng) % 9;
        s->req.max_tokens = 1 + ru32(rng) % 2;
        s->req.flags = ru32(rng) & NIB_REQ_NO_BOS;
        rfill(rng, prompt, s->req.prompt_len);
        break;
    case K_RANDOM_IDS: /* ids, some out of range, odd lengths */
        memset(&s->req, 0, sizeof s->req);
        n = 1 + ru32(rng) % 6;
        s->req.prompt_len = n * 4 + (ru32(rng) % 8 == 0 ? ru32(rng) % 4 : 0);
        s->req.max_tokens = 1 + ru32(rng) % 2;
        s->req.flags = NIB_REQ_PROMPT_IDS;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t id = ru32(rng);
            id = ru32(rng) % 16 == 0 ? id : id % vocab;
            memcpy(prompt + 4 * i, &id, 4);
        }
        break;
    default: break;
    }
}

/* Mostly garbage that is refused at once; a little that gets served (the
 * model is the slow part, so it is kept to short prompts and 1-2 tokens). */
static int pick_kind(uint64_t *rng)
{
    static const int weights[K_COUNT] = {0, 40, 35, 4, 11, 10};
    int x = (int)(ru32(rng) % 100);
    for (int k = 1; k < K_COUNT; k++)
        if ((x -= weights[k]) < 0)
            return k;
    return K_RANDOM_REQ;
}

static int mode_scribble(const char *name, const char *expected, int n, uint64_t seed)
{
    load_refs(expected);
    struct raw r;
    raw_attach(&r, name);
    uint64_t rng = nib_rng_seed(seed);
    enum { WIN = NIB_RING_SLOTS };
    struct inflight q[WIN] = {{0}};
    uint64_t count[K_COUNT] = {0}, done = 0, rejected = 0, valid_ok = 0, jumped = 0;
    uint64_t by_status[NIB_ST_COUNT + 1] = {0};
    int sent = 0;
    pid_t app = (pid_t)r.g.appliance_pid;
    while ((int)done < n) {
        for (int i = 0; i < WIN && sent < n; i++) {
            if (q[i].used)
                continue;
            int slot = raw_claim(&r);
            if (slot < 0)
                break;
            struct nib_slot *s = raw_slot(&r, (uint32_t)slot);
            int kind = sent % 16 == 0 ? K_VALID : pick_kind(&rng);
            q[i] = (struct inflight){1, kind, 0, 0, 0, slot};
            if (kind == K_VALID) {
                q[i].ref = (int)(ru32(&rng) % (uint32_t)n_refs);
                q[i].max_tokens = 1 + ru32(&rng) % 2;
                write_valid(&r, s, &refs[q[i].ref], q[i].max_tokens);
            } else if (kind == K_SCRIBBLE_LATER) {
                write_garbage(&r, s, K_RANDOM_PROMPT, &rng);
            } else {
                write_garbage(&r, s, kind, &rng);
            }
            s->ticket = 0;
            if (kind != K_VALID && ru32(&rng) % 8 == 0) { /* jump our own queue */
                s->ticket = (uint64_t)ru32(&rng) << 32 | ru32(&rng);
                jumped++;
            }
            raw_submit(&r, s);
            q[i].ticket = s->ticket;
            if (kind == K_SCRIBBLE_LATER) {
                /* Race the appliance: rewrite the request and the response
                 * counters while it may be reading or running it. */
                for (int k = 0; k < 4; k++) {
                    rfill(&rng, &s->req, sizeof s->req);
                    rfill(&rng, &s->n_tokens, 12);
                    rfill(&rng, nib_slot_prompt(s, &r.g), 16);
                    s->cancel = ru32(&rng);
                }
            }
            count[kind]++;
            sent++;
        }
        int progressed = 0;
        for (int i = 0; i < WIN; i++) {
            if (!q[i].used)
                continue;
            struct nib_slot *s = raw_slot(&r, (uint32_t)q[i].slot);
            uint32_t st = nib_load_acq(&s->state);
            if (st == NIB_SLOT_FREE || nib_load_relaxed(&s->ticket) != q[i].ticket)
                die("slot %d changed under its only writer (kind %d, state %u)", q[i].slot,
                    q[i].kind, st);
            if (st != NIB_SLOT_DONE)
                continue;
            uint32_t status = s->status;
            by_status[status < NIB_ST_COUNT ? status : NIB_ST_COUNT]++;
            if (q[i].kind == K_VALID) {
                struct nib_progress pr = {0};
                pr.n_tokens = nib_load_acq(&s->n_tokens);
                pr.n_prompt = s->n_prompt;
                pr.tokens = nib_slot_tokens(s, &r.g);
                pr.status = status;
                if (pr.n_tokens > r.g.slot_tokens || pr.n_prompt > pr.n_tokens)
                    die("valid request: counts %u/%u out of range", pr.n_prompt, pr.n_tokens);
                if (pr.status == NIB_ST_BAD_REQUEST)
                    die("valid request rejected: %s", s->error);
                if (s->served_ticket != q[i].ticket)
                    die("valid request: served ticket %llu, submitted %llu",
                        (unsigned long long)s->served_ticket, (unsigned long long)q[i].ticket);
                check_answer(&refs[q[i].ref], &pr, q[i].max_tokens, 0, "scribble");
                valid_ok++;
            } else {
                if (nib_load_acq(&s->text_len) > r.g.slot_text && q[i].kind != K_SCRIBBLE_LATER)
                    die("text_len out of range");
                if (status == NIB_ST_BAD_REQUEST) {
                    rejected++;
                    if (!memchr(s->error, 0, sizeof s->error) || !strchr(s->error, ':'))
                        die("error message '%.*s' names no field", NIB_ERRMSG_MAX, s->error);
                }
            }
            nib_store_rel(&s->state, NIB_SLOT_FREE);
            q[i].used = 0;
            done++;
            progressed = 1;
        }
        if (!progressed) {
            struct pollfd p = {r.sock, POLLIN, 0};
            if (poll(&p, 1, 0) == 1 || (app > 0 && kill(app, 0) != 0))
                die("the appliance died (or hung up)");
            sleep_us(10); /* leave the CPU to the appliance */
        }
    }
    raw_close(&r);
    printf("{\"requests\": %d, \"valid_ok\": %" PRIu64 ", \"rejected\": %" PRIu64
           ", \"scribbled_late\": %" PRIu64 ", \"tickets_jumped\": %" PRIu64 ", \"ok\": %" PRIu64
           ", \"eos\": %" PRIu64 ", \"cancelled\": %" PRIu64 ", \"host_changed\": %" PRIu64 "}\n",
           n, valid_ok, rejected, count[K_SCRIBBLE_LATER], jumped, by_status[NIB_ST_OK],
           by_status[NIB_ST_EOS], by_status[NIB_ST_CANCELLED], by_status[NIB_ST_HOST_CHANGED]);
    return 0;
}

/* ---- faults ---- */

/* Wait to be killed. */
static int pause_forever(void)
{
    for (;;)
        pause();
    return 0;
}

/* SIGSTOP takes effect asynchronously: wait until every thread of the
 * appliance is stopped (state T in /proc/PID/task/TID/stat), so the counts
 * read next stay final until SIGCONT. */
static int all_threads_stopped(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int stopped = 1;
    struct dirent *e;
    while (stopped && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char stat_path[384], buf[512];
        snprintf(stat_path, sizeof stat_path, "%s/%s/stat", path, e->d_name);
        FILE *f = fopen(stat_path, "r");
        if (!f)
            continue; /* a thread that just exited */
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *r = strrchr(buf, ')');
        stopped = r && r[1] == ' ' && (r[2] == 'T' || r[2] == 't');
    }
    closedir(d);
    return stopped;
}

static void stop_appliance(pid_t pid)
{
    kill(pid, SIGSTOP);
    for (int i = 0; i < 10000; i++) {
        if (all_threads_stopped(pid))
            return;
        sleep_us(100);
    }
    die("the appliance did not stop within 1 s of SIGSTOP");
}

/* Submits a long request (p) and holds the appliance still (SIGSTOP) with
 * it mid-stream: a token or more out, and not its last. Returns the
 * appliance's pid, or 0 when the request got past that first (it is
 * then done and released; the caller reports "missed" and the driver
 * tries again). A host preempted for the whole generation can stop the
 * appliance with the last token out, or in the pass the stop held: that
 * request ends OK on its own (no checkpoint follows its last token)
 * whatever the host does (CI, 2026-12-07). */
static pid_t hold_mid_stream(struct nib_host *h, const struct nib_gen_params *p,
                             struct nib_req_handle *r, struct nib_progress *pr)
{
    if (nib_host_submit(h, "Once upon a time", 16, p, r) != NIB_HOST_OK)
        die("submit: %s", nib_host_error(h));
    do {
        if (nib_host_poll(h, r, pr) != NIB_HOST_OK)
            die("poll: %s", nib_host_error(h));
    } while (!pr->done && pr->n_tokens <= pr->n_prompt);
    if (!pr->done) {
        pid_t app = (pid_t)nib_host_appliance_pid(h);
        stop_appliance(app);
        nib_host_poll(h, r, pr);
        if (!pr->done && pr->n_tokens - pr->n_prompt + 1 < p->max_tokens)
            return app;
        kill(app, SIGCONT);
    }
    nib_host_wait(h, r, NIB_HOST_WAIT_DONE, 30000, pr);
    nib_host_release(h, r);
    return 0;
}

static int mode_hog(const char *name)
{
    struct nib_host *h = attach(name);
    struct nib_gen_params p = {.max_tokens = nib_host_slot_tokens(h) - 32};
    struct nib_req_handle r;
    struct nib_progress pr;
    if (!hold_mid_stream(h, &p, &r, &pr)) {
        printf("missed\n");
        return 2;
    }
    printf("stopped %u %u %" PRIu64 "\n", r.slot, pr.n_tokens - pr.n_prompt, r.ticket);
    fflush(stdout);
    return pause_forever();
}

/* Cancel in the middle of a generation (the appliance held still by
 * SIGSTOP so "the middle" is certain), then check the slot came back. */
static int mode_cancel_mid(const char *name)
{
    struct nib_host *h = attach(name);
    struct nib_gen_params p = {.max_tokens = nib_host_slot_tokens(h) - 32};
    struct nib_req_handle r;
    struct nib_progress pr;
    pid_t app = hold_mid_stream(h, &p, &r, &pr);
    if (!app) {
        printf("missed\n");
        return 2;
    }
    uint32_t at_stop = pr.n_tokens - pr.n_prompt;
    nib_host_cancel(h, &r);
    kill(app, SIGCONT);
    if (nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK)
        die("wait: %s", nib_host_error(h));
    uint32_t n_gen = pr.n_tokens - pr.n_prompt;
    /* The token the stop held was an end token: it ended on its own
     * before its next look at the cancel flag. Any other status is a lost
     * cancel. */
    if (pr.status == NIB_ST_EOS && n_gen == at_stop) {
        printf("missed\n");
        nib_host_release(h, &r);
        return 2;
    }
    if (pr.status != NIB_ST_CANCELLED)
        die("status %s after a cancel mid-stream", nib_status_name(pr.status));
    if (n_gen < at_stop || n_gen > at_stop + 1)
        die("%u tokens at the cancel, %u at the end", at_stop, n_gen);
    if (nib_host_release(h, &r) != NIB_HOST_OK)
        die("release: %s", nib_host_error(h));
    /* Every slot can be had again. */
    uint32_t n = nib_host_slots(h);
    struct nib_req_handle all[NIB_RING_SLOTS];
    p.max_tokens = 1;
    for (uint32_t i = 0; i < n; i++)
        if (nib_host_submit(h, "a", 1, &p, &all[i]) != NIB_HOST_OK)
            die("slot %u after the cancel: %s", i, nib_host_error(h));
    for (uint32_t i = 0; i < n; i++)
        if (nib_host_wait(h, &all[i], NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK ||
            nib_host_release(h, &all[i]) != NIB_HOST_OK)
            die("after the cancel: %s", nib_host_error(h));
    printf("cancelled after %u tokens (%u at the cancel), all %u slots free again\n", n_gen,
           at_stop, n);
    nib_host_detach(h);
    return 0;
}

static int mode_claim_die(const char *name)
{
    struct raw r;
    raw_attach(&r, name);
    int slot = raw_claim(&r);
    if (slot < 0)
        die("no free slot");
    printf("claimed %d\n", slot);
    fflush(stdout);
    return pause_forever();
}

static int mode_wait_gone(const char *name)
{
    struct nib_host *h = attach(name);
    printf("attached %" PRIu64 "\n", nib_host_epoch(h));
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        die("no line on stdin");
    struct nib_gen_params p = {.max_tokens = 8};
    struct nib_req_handle r;
    if (nib_host_submit(h, "Once upon a time", 16, &p, &r) != NIB_HOST_OK)
        die("submit: %s", nib_host_error(h));
    printf("submitted\n");
    fflush(stdout);
    struct nib_progress pr;
    int rc = nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 60000, &pr);
    printf("rc %d: %s\n", rc, nib_host_error(h));
    nib_host_detach(h);
    return rc == NIB_HOST_GONE ? 0 : 1;
}

static int mode_attach_then(const char *name)
{
    struct nib_host *h = attach(name);
    printf("attached %" PRIu64 "\n", nib_host_epoch(h));
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
        die("no line on stdin");
    struct nib_gen_params p = {.max_tokens = 2};
    struct nib_req_handle r;
    int rc = nib_host_submit(h, "hi", 2, &p, &r);
    printf("submit rc %d: %s\n", rc, nib_host_error(h));
    if (rc != NIB_HOST_GONE)
        die("submit to a replaced appliance gave %d", rc);
    nib_host_detach(h);
    h = attach(name);
    printf("reattached %" PRIu64 "\n", nib_host_epoch(h));
    rc = nib_host_submit(h, "hi", 2, &p, &r);
    struct nib_progress pr;
    if (rc != NIB_HOST_OK || nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK)
        die("after re-attaching: %s", nib_host_error(h));
    nib_host_release(h, &r);
    nib_host_detach(h);
    return 0;
}

/* ---- seal-attack: what a host could try on the descriptors it receives ---- */

static int refused_all = 1;

static void attempt(const char *what, int rc)
{
    if (rc == 0) {
        printf("%s allowed\n", what);
        refused_all = 0;
    } else {
        printf("%s refused (%s)\n", what, strerror(errno));
    }
}

static int try_mmap(int fd, size_t size, int prot)
{
    void *p = mmap(NULL, size, prot, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    munmap(p, size);
    return 0;
}

static int reopen(int fd, int flags)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return open(path, flags | O_CLOEXEC);
}

static int mode_seal_attack(const char *name)
{
    struct raw r;
    raw_attach(&r, name);
    off_t hs = (off_t)r.hsize, rs = (off_t)r.rsize;
    /* The header: nothing may write, resize or seal it. */
    attempt("header-ftruncate-0", ftruncate(r.hfd, 0));
    attempt("header-ftruncate-half", ftruncate(r.hfd, hs / 2));
    attempt("header-ftruncate-grow", ftruncate(r.hfd, hs * 2));
    attempt("header-fallocate-grow", fallocate(r.hfd, 0, hs, 4096));
    attempt("header-punch-hole",
            fallocate(r.hfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, hs));
    attempt("header-pwrite", pwrite(r.hfd, "x", 1, 0) == 1 ? 0 : -1);
    attempt("header-mmap-rw", try_mmap(r.hfd, r.hsize, PROT_READ | PROT_WRITE));
    attempt("header-mprotect-rw", mprotect((void *)r.hdr, r.hsize, PROT_READ | PROT_WRITE));
    attempt("header-add-seal-write", fcntl(r.hfd, F_ADD_SEALS, F_SEAL_WRITE));
    int fd = reopen(r.hfd, O_RDWR);
    if (fd < 0) {
        attempt("header-reopen-rdwr", -1);
    } else {
        attempt("header-reopen-pwrite", pwrite(fd, "x", 1, 0) == 1 ? 0 : -1);
        attempt("header-reopen-mmap-rw", try_mmap(fd, r.hsize, PROT_READ | PROT_WRITE));
        attempt("header-reopen-ftruncate", ftruncate(fd, 0));
        close(fd);
    }
    /* The ring: its own host writes it, but nobody resizes or seals it. */
    attempt("ring-ftruncate-0", ftruncate(r.rfd, 0));
    attempt("ring-ftruncate-tail", ftruncate(r.rfd, rs - 4096));
    attempt("ring-ftruncate-grow", ftruncate(r.rfd, rs + 4096));
    attempt("ring-fallocate-grow", fallocate(r.rfd, 0, rs, 4096));
    attempt("ring-add-seal-write", fcntl(r.rfd, F_ADD_SEALS, F_SEAL_WRITE));
    attempt("ring-add-seal-future-write", fcntl(r.rfd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE));
    fd = reopen(r.rfd, O_RDWR);
    if (fd < 0) {
        attempt("ring-reopen-rdwr", -1);
    } else {
        attempt("ring-reopen-ftruncate", ftruncate(fd, 0));
        attempt("ring-reopen-add-seal", fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE));
        close(fd);
    }
    struct stat st;
    if (fstat(r.hfd, &st) != 0 || st.st_size != hs || fstat(r.rfd, &st) != 0 || st.st_size != rs)
        die("a memfd changed size");
    /* Still mapped and readable: no SIGBUS anywhere. */
    volatile uint8_t sink = ((const volatile uint8_t *)r.hdr)[r.hsize - 1];
    sink ^= ((volatile uint8_t *)r.ring)[r.rsize - 1];
    (void)sink;
    raw_close(&r);
    return refused_all ? 0 : 1;
}

/* ---- fork: a child of an attached host attaches afresh ---- */

static int mode_fork(const char *name)
{
    struct nib_host *h = attach(name);
    const char *prompt = "Lily and Ben";
    struct nib_gen_params p = {.max_tokens = 8};
    struct nib_req_handle r;
    struct nib_progress pr;
    /* The reference: the same prompt, asked before the fork. */
    if (nib_host_submit(h, prompt, strlen(prompt), &p, &r) != NIB_HOST_OK ||
        nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK)
        die("reference: %s", nib_host_error(h));
    uint32_t ref[64], n_ref = pr.n_tokens - pr.n_prompt;
    memcpy(ref, pr.tokens + pr.n_prompt, n_ref * 4);
    nib_host_release(h, &r);
    uint32_t parent_ring = nib_host_host_index(h);
    /* A request queued across the fork. */
    if (nib_host_submit(h, prompt, strlen(prompt), &p, &r) != NIB_HOST_OK)
        die("submit: %s", nib_host_error(h));
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        die("fork: %s", strerror(errno));
    if (child == 0) {
        struct nib_req_handle c;
        if (nib_host_poll(h, &r, &pr) != NIB_HOST_ERR)
            die("child: the parent's request handle worked in the child");
        if (nib_host_host_index(h) == parent_ring)
            die("child: still on the parent's ring %u", parent_ring);
        if (nib_host_submit(h, prompt, strlen(prompt), &p, &c) != NIB_HOST_OK ||
            nib_host_wait(h, &c, NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK)
            die("child: %s", nib_host_error(h));
        if (pr.n_tokens - pr.n_prompt != n_ref || memcmp(pr.tokens + pr.n_prompt, ref, n_ref * 4))
            die("child: answer differs from the parent's reference");
        printf("child: attached afresh on ring %u (parent's %u), exact answer of %u tokens\n",
               nib_host_host_index(h), parent_ring, n_ref);
        nib_host_release(h, &c);
        nib_host_detach(h);
        fflush(stdout);
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("the child failed (status 0x%x)", status);
    if (nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK)
        die("parent: %s", nib_host_error(h));
    if (pr.n_tokens - pr.n_prompt != n_ref || memcmp(pr.tokens + pr.n_prompt, ref, n_ref * 4))
        die("parent: the request queued across the fork differs from the reference");
    if (nib_host_host_index(h) != parent_ring || nib_host_check(h) != NIB_HOST_OK)
        die("parent: lost its ring or connection: %s", nib_host_error(h));
    nib_host_release(h, &r);
    printf("parent: request queued across the fork exact, still on ring %u\n", parent_ring);
    nib_host_detach(h);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && !strcmp(argv[1], "many") && argc == 5)
        return mode_many(argv[2], argv[3], atoi(argv[4]));
    if (argc == 6 && !strcmp(argv[1], "stress"))
        return mode_stress(argv[2], argv[3], atoi(argv[4]), strtoull(argv[5], NULL, 10));
    if (argc == 6 && !strcmp(argv[1], "scribble"))
        return mode_scribble(argv[2], argv[3], atoi(argv[4]), strtoull(argv[5], NULL, 10));
    if (argc == 3 && !strcmp(argv[1], "hog"))
        return mode_hog(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "cancel-mid"))
        return mode_cancel_mid(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "claim-die"))
        return mode_claim_die(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "wait-gone"))
        return mode_wait_gone(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "attach-then"))
        return mode_attach_then(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "seal-attack"))
        return mode_seal_attack(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "fork"))
        return mode_fork(argv[2]);
    fprintf(stderr, "usage: proto_host many|stress|scribble|hog|cancel-mid|claim-die|wait-gone|"
                    "attach-then|seal-attack|fork NAME ...\n");
    return 2;
}
