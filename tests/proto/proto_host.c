/* proto_host: host processes for the protocol scenarios (test_protocol.py
 * starts them against a real appliance). Each mode prints what it saw and
 * exits 0 only when every check held.
 *
 *   many NAME EXPECTED N          N pipelined requests, each answer checked
 *   stress NAME EXPECTED N SEED   mixed lengths, some cancelled; totals as JSON
 *   scribble NAME EXPECTED N SEED N raw requests, most of them random bytes,
 *                                 valid ones interleaved and checked exactly
 *   cancel-mid NAME               cancels a request mid-stream, checks the slot
 *   hog NAME                      long request; SIGSTOPs the appliance once
 *                                 it streams, prints "stopped", then pauses
 *   claim-die NAME                claims a slot by hand, prints, pauses
 *   lock-hang NAME                holds the claim lock, prints, pauses
 *   wait-gone NAME                submits, waits: must end with GONE
 *   attach-then NAME              attaches, waits for a line on stdin, then
 *                                 must get GONE, then attaches again
 *
 * EXPECTED holds one greedy reference per line:
 *   PROMPT<TAB>PROMPT_IDS<TAB>GENERATED_IDS<TAB>STATUS   (ids comma-separated)
 * as `nib ask --json` gave them for max_tokens = the generated count (or
 * more, when STATUS is eos). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt/sample.h"
#include "proto/private/sync.h"
#include "proto/shm_layout.h"
#include "tools/host/nibhost.h"

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
        snprintf(r->prompt, sizeof r->prompt, "%s", col[0]);
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
    if (nib_host_attach(&h, name) != NIB_HOST_OK)
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

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
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
    int fds0 = count_fds();
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
    int fds1 = count_fds();
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
    int fd;
    uint8_t *base;
    struct nib_shm_header *hdr;
};

static void raw_open(struct raw *r, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/nibble-%s", name);
    r->fd = shm_open(path, O_RDWR, 0);
    if (r->fd < 0)
        die("open %s: %s", path, strerror(errno));
    r->base = mmap(NULL, NIB_SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (r->base == MAP_FAILED)
        die("map %s: %s", path, strerror(errno));
    r->hdr = (struct nib_shm_header *)(void *)r->base;
}

static void raw_lock(struct raw *r, short type)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = NIB_CLAIM_LOCK_OFFSET,
                       .l_len = 1};
    while (fcntl(r->fd, type == F_UNLCK ? F_OFD_SETLK : F_OFD_SETLKW, &fl) != 0)
        if (errno != EINTR)
            die("claim lock: %s", strerror(errno));
}

/* Claim a FREE slot as the protocol says; -1 when the table is full. */
static int raw_claim(struct raw *r, uint32_t pid)
{
    raw_lock(r, F_WRLCK);
    int got = -1;
    for (uint32_t i = 0; i < NIB_SLOTS && got < 0; i++) {
        struct nib_slot *s = nib_shm_slot(r->base, i);
        if (nib_load_acq(&s->state) != NIB_SLOT_FREE)
            continue;
        nib_store_rel(&s->owner_pid, pid);
        uint64_t t = r->hdr->next_ticket++;
        nib_store_rel(&s->ticket, t);
        nib_store_rel(&s->state, NIB_SLOT_CLAIMED);
        got = (int)i;
    }
    raw_lock(r, F_UNLCK);
    return got;
}

static void raw_submit(struct raw *r, struct nib_slot *s)
{
    s->cancel = 0;
    s->n_tokens = s->n_prompt = s->text_len = s->status = 0;
    nib_store_rel(&s->state, NIB_SLOT_SUBMITTED);
    __atomic_fetch_add(&r->hdr->doorbell, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &r->hdr->doorbell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* ---- scribble: random bytes in request fields, valid ones interleaved ---- */

enum kind { K_VALID, K_RANDOM_REQ, K_ONE_FIELD, K_RANDOM_PROMPT, K_RANDOM_IDS, K_SCRIBBLE_LATER,
            K_BAD_OWNER, K_COUNT };

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

static void write_valid(struct nib_slot *s, const struct ref *ref, uint32_t max_tokens)
{
    memset(&s->req, 0, sizeof s->req);
    s->req.prompt_len = (uint32_t)strlen(ref->prompt);
    s->req.max_tokens = max_tokens;
    memcpy(s->prompt, ref->prompt, s->req.prompt_len);
}

static void write_garbage(struct nib_slot *s, int kind, uint64_t *rng, uint32_t vocab)
{
    uint32_t n;
    switch (kind) {
    case K_RANDOM_REQ: /* every byte of the request and some prompt bytes */
        rfill(rng, &s->req, sizeof s->req);
        rfill(rng, s->prompt, 64);
        if (ru32(rng) % 4 == 0) { /* sometimes far enough to reach the tokenizer */
            memset(s->req.reserved, 0, sizeof s->req.reserved);
            s->req.prompt_len %= 9;
        }
        if (s->req.max_tokens > 2 && s->req.max_tokens <= NIB_SLOT_TOKENS)
            s->req.max_tokens = 1 + s->req.max_tokens % 2;
        break;
    case K_ONE_FIELD: { /* a good request with one field random */
        memset(&s->req, 0, sizeof s->req);
        s->req.prompt_len = 3;
        s->req.max_tokens = 1;
        memcpy(s->prompt, "abc", 3);
        uint32_t v = ru32(rng);
        switch (ru32(rng) % 16) {
        case 0: s->req.prompt_len = v; break;
        case 1: s->req.max_tokens = v % 2 ? 0 : v | (NIB_SLOT_TOKENS + 1); break;
        case 2: memcpy(&s->req.temperature, &v, 4); break;
        case 3: s->req.flags = v; break;
        case 4: case 6: case 7: case 8: case 9: case 10: case 11: case 12: case 13: case 14:
            s->req.reserved[v % sizeof s->req.reserved] = (uint8_t)(v >> 8 | 1);
            break;
        default: s->req.seed = (uint64_t)v << 32 | ru32(rng); break; /* valid: served */
        }
        break;
    }
    case K_RANDOM_PROMPT: /* valid header, random prompt bytes through the tokenizer */
        memset(&s->req, 0, sizeof s->req);
        s->req.prompt_len = ru32(rng) % 9;
        s->req.max_tokens = 1 + ru32(rng) % 2;
        s->req.flags = ru32(rng) & NIB_REQ_NO_BOS;
        rfill(rng, s->prompt, s->req.prompt_len);
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
            memcpy(s->prompt + 4 * i, &id, 4);
        }
        break;
    default:
        break;
    }
}

/* Mostly garbage that is refused at once; a little that gets served (the
 * model is the slow part, so it is kept to short prompts and 1-2 tokens). */
static int pick_kind(uint64_t *rng)
{
    static const int weights[K_COUNT] = {0, 40, 35, 4, 11, 5, 5};
    int x = (int)(ru32(rng) % 100);
    for (int k = 1; k < K_COUNT; k++)
        if ((x -= weights[k]) < 0)
            return k;
    return K_RANDOM_REQ;
}

static int mode_scribble(const char *name, const char *expected, int n, uint64_t seed)
{
    load_refs(expected);
    struct nib_host *h = attach(name); /* for the header checks and the vocabulary size */
    uint32_t vocab = nib_host_vocab_size(h);
    struct raw r;
    raw_open(&r, name);
    uint32_t me = (uint32_t)getpid();
    uint64_t rng = nib_rng_seed(seed);
    enum { WIN = 8 };
    struct inflight q[WIN] = {{0}};
    uint64_t count[K_COUNT] = {0}, done = 0, rejected = 0, abandoned = 0, valid_ok = 0;
    int sent = 0;
    while ((int)done < n) {
        for (int i = 0; i < WIN && sent < n; i++) {
            if (q[i].used)
                continue;
            int slot = raw_claim(&r, me);
            if (slot < 0)
                break;
            struct nib_slot *s = nib_shm_slot(r.base, (uint32_t)slot);
            int kind = sent % 16 == 0 ? K_VALID : pick_kind(&rng);
            q[i] = (struct inflight){1, kind, 0, 0, 0, slot};
            if (kind == K_VALID) {
                q[i].ref = (int)(ru32(&rng) % (uint32_t)n_refs);
                q[i].max_tokens = 1 + ru32(&rng) % 2;
                write_valid(s, &refs[q[i].ref], q[i].max_tokens);
            } else if (kind == K_SCRIBBLE_LATER || kind == K_BAD_OWNER) {
                write_garbage(s, K_RANDOM_PROMPT, &rng, vocab);
            } else {
                write_garbage(s, kind, &rng, vocab);
            }
            if (kind == K_BAD_OWNER) /* no such process: the appliance drops it */
                s->owner_pid = ru32(&rng) % 2 ? 0 : (1u << 22) + ru32(&rng) % 1000;
            if (kind != K_VALID && ru32(&rng) % 8 == 0)
                s->ticket = (uint64_t)ru32(&rng) << 32 | ru32(&rng); /* jump the queue */
            q[i].ticket = s->ticket;
            raw_submit(&r, s);
            if (kind == K_SCRIBBLE_LATER) {
                /* Race the appliance: rewrite the request and the response
                 * counters while it may be reading or running it. */
                for (int k = 0; k < 4; k++) {
                    rfill(&rng, &s->req, sizeof s->req);
                    rfill(&rng, &s->n_tokens, 12);
                    rfill(&rng, s->prompt, 16);
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
            struct nib_slot *s = nib_shm_slot(r.base, (uint32_t)q[i].slot);
            uint32_t st = nib_load_acq(&s->state);
            /* A dropped slot may already hold a newer request of ours. */
            if (st == NIB_SLOT_FREE || nib_load_relaxed(&s->ticket) != q[i].ticket) {
                if (q[i].kind != K_BAD_OWNER)
                    die("slot %d went FREE under a live host (kind %d)", q[i].slot, q[i].kind);
                abandoned++;
            } else if (st == NIB_SLOT_DONE) {
                if (q[i].kind == K_VALID) {
                    struct nib_progress pr = {0};
                    pr.n_tokens = nib_load_acq(&s->n_tokens);
                    pr.n_prompt = s->n_prompt;
                    pr.tokens = s->tokens;
                    pr.status = s->status;
                    if (pr.n_tokens > NIB_SLOT_TOKENS || pr.n_prompt > pr.n_tokens)
                        die("valid request: counts %u/%u out of range", pr.n_prompt, pr.n_tokens);
                    if (pr.status == NIB_ST_BAD_REQUEST)
                        die("valid request rejected: %s", s->error);
                    check_answer(&refs[q[i].ref], &pr, q[i].max_tokens, 0, "scribble");
                    valid_ok++;
                } else {
                    if (nib_load_acq(&s->text_len) > NIB_SLOT_TEXT && q[i].kind != K_SCRIBBLE_LATER)
                        die("text_len out of range");
                    if (s->status == NIB_ST_BAD_REQUEST) {
                        rejected++;
                        if (!memchr(s->error, 0, sizeof s->error) || !strchr(s->error, ':'))
                            die("error message '%.*s' names no field", NIB_ERRMSG_MAX, s->error);
                    }
                }
                nib_store_rel(&s->state, NIB_SLOT_FREE);
            } else {
                continue;
            }
            q[i].used = 0;
            done++;
            progressed = 1;
        }
        if (!progressed) {
            if (kill((pid_t)nib_host_appliance_pid(h), 0) != 0)
                die("the appliance died");
            sleep_us(10); /* leave the CPU to the appliance */
        }
    }
    munmap(r.base, NIB_SHM_SIZE);
    close(r.fd);
    nib_host_detach(h);
    printf("{\"requests\": %d, \"valid_ok\": %" PRIu64 ", \"rejected\": %" PRIu64
           ", \"abandoned\": %" PRIu64 ", \"scribbled_late\": %" PRIu64 "}\n",
           n, valid_ok, rejected, abandoned, count[K_SCRIBBLE_LATER]);
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

static int mode_hog(const char *name)
{
    struct nib_host *h = attach(name);
    struct nib_gen_params p = {.max_tokens = NIB_SLOT_TOKENS};
    struct nib_req_handle r;
    if (nib_host_submit(h, "Once upon a time", 16, &p, &r) != NIB_HOST_OK)
        die("submit: %s", nib_host_error(h));
    struct nib_progress pr;
    for (;;) {
        if (nib_host_poll(h, &r, &pr) != NIB_HOST_OK)
            die("poll: %s", nib_host_error(h));
        if (pr.done) {
            printf("missed\n");
            return 2;
        }
        if (pr.n_tokens > pr.n_prompt)
            break;
    }
    kill((pid_t)nib_host_appliance_pid(h), SIGSTOP);
    nib_host_poll(h, &r, &pr);
    printf("stopped %u %u %" PRIu64 "\n", r.slot, pr.n_tokens - pr.n_prompt, r.ticket);
    fflush(stdout);
    return pause_forever();
}

/* Cancel in the middle of a generation (the appliance held still by
 * SIGSTOP so "the middle" is certain), then check the slot came back. */
static int mode_cancel_mid(const char *name)
{
    struct nib_host *h = attach(name);
    struct nib_gen_params p = {.max_tokens = NIB_SLOT_TOKENS};
    struct nib_req_handle r;
    if (nib_host_submit(h, "Once upon a time", 16, &p, &r) != NIB_HOST_OK)
        die("submit: %s", nib_host_error(h));
    struct nib_progress pr;
    do {
        if (nib_host_poll(h, &r, &pr) != NIB_HOST_OK)
            die("poll: %s", nib_host_error(h));
        if (pr.done) {
            printf("missed\n");
            nib_host_release(h, &r);
            return 2;
        }
    } while (pr.n_tokens <= pr.n_prompt);
    pid_t app = (pid_t)nib_host_appliance_pid(h);
    kill(app, SIGSTOP);
    nib_host_poll(h, &r, &pr);
    uint32_t at_stop = pr.n_tokens - pr.n_prompt;
    nib_host_cancel(h, &r);
    kill(app, SIGCONT);
    if (nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK)
        die("wait: %s", nib_host_error(h));
    uint32_t n_gen = pr.n_tokens - pr.n_prompt;
    if (pr.status != NIB_ST_CANCELLED)
        die("status %s after a cancel mid-stream", nib_status_name(pr.status));
    if (n_gen < at_stop || n_gen > at_stop + 1)
        die("%u tokens at the cancel, %u at the end", at_stop, n_gen);
    if (nib_host_release(h, &r) != NIB_HOST_OK)
        die("release: %s", nib_host_error(h));
    /* Every slot can be had again. */
    struct nib_req_handle all[NIB_SLOTS];
    p.max_tokens = 1;
    for (int i = 0; i < NIB_SLOTS; i++)
        if (nib_host_submit(h, "a", 1, &p, &all[i]) != NIB_HOST_OK)
            die("slot %d after the cancel: %s", i, nib_host_error(h));
    for (int i = 0; i < NIB_SLOTS; i++)
        if (nib_host_wait(h, &all[i], NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK ||
            nib_host_release(h, &all[i]) != NIB_HOST_OK)
            die("after the cancel: %s", nib_host_error(h));
    printf("cancelled after %u tokens (%u at the cancel), all %d slots free again\n", n_gen,
           at_stop, NIB_SLOTS);
    nib_host_detach(h);
    return 0;
}

static int mode_claim_die(const char *name)
{
    struct nib_host *h = attach(name);
    struct raw r;
    raw_open(&r, name);
    int slot = raw_claim(&r, (uint32_t)getpid());
    if (slot < 0)
        die("no free slot");
    printf("claimed %d\n", slot);
    fflush(stdout);
    (void)h;
    return pause_forever();
}

static int mode_lock_hang(const char *name)
{
    struct raw r;
    raw_open(&r, name);
    raw_lock(&r, F_WRLCK);
    printf("locked\n");
    fflush(stdout);
    return pause_forever();
}

static int mode_wait_gone(const char *name)
{
    struct nib_host *h = attach(name);
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
    if (argc == 3 && !strcmp(argv[1], "lock-hang"))
        return mode_lock_hang(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "wait-gone"))
        return mode_wait_gone(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "attach-then"))
        return mode_attach_then(argv[2]);
    fprintf(stderr, "usage: proto_host many|stress|scribble|hog|claim-die|lock-hang|wait-gone|"
                    "attach-then NAME ...\n");
    return 2;
}
