#include "rt/serve.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/private/sync.h"
#include "proto/stats.h"
#include "rt/sample.h"
#include "rt/tokenizer.h"

/* Token scratch: the encoder needs prompt bytes + 2 ids. */
#define IDS_CAP (NIB_PROMPT_MAX + 2)
/* Linux never hands out pids above this (PID_MAX_LIMIT). */
#define PID_LIMIT (1u << 22)

uint64_t nib_server_scratch_footprint(void)
{
    return (NIB_PROMPT_MAX + (uint64_t)IDS_CAP * sizeof(uint32_t) +
            nib_tok_scratch_footprint(NIB_PROMPT_MAX) + 63) & ~63ull;
}

int nib_pid_alive(uint32_t pid)
{
    /* 0 and huge values would mean "process group" to kill(): a pid read
     * from shared memory that is not a plausible pid is a dead owner. */
    if (pid == 0 || pid >= PID_LIMIT)
        return 0;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static int fail(char *err, size_t errlen, const char *field, const char *why, uint64_t a,
                uint64_t b)
{
    char msg[96];
    snprintf(msg, sizeof msg, why, (unsigned long long)a, (unsigned long long)b);
    snprintf(err, errlen, "%s: %s", field, msg);
    return -1;
}

int nib_req_decode(const struct nib_request *raw, const uint8_t *prompt, size_t prompt_avail,
                   const struct nib_req_limits *lim, struct nib_req_decoded *out, uint32_t *ids,
                   size_t ids_cap, char *err, size_t errlen)
{
    /* Read every field once into a local: the caller's copy came from
     * shared memory and is checked here, nowhere else. */
    struct nib_request r;
    memcpy(&r, raw, sizeof r);
    memset(out, 0, sizeof *out);
    if (r.prompt_len > lim->prompt_max)
        return fail(err, errlen, "prompt_len", "%llu is larger than prompt_max %llu",
                    r.prompt_len, lim->prompt_max);
    if (r.max_tokens == 0 || r.max_tokens > lim->slot_tokens)
        return fail(err, errlen, "max_tokens", "%llu is outside 1..slot_tokens (%llu)",
                    r.max_tokens, lim->slot_tokens);
    if (!(r.temperature >= 0.0f && r.temperature <= NIB_TEMPERATURE_MAX)) /* NaN fails too */
        return fail(err, errlen, "temperature", "must be a number in 0..%llu", 
                    (uint64_t)NIB_TEMPERATURE_MAX, 0);
    if (r.flags & ~NIB_REQ_FLAGS_KNOWN)
        return fail(err, errlen, "flags", "unknown bits 0x%llx set", r.flags & ~NIB_REQ_FLAGS_KNOWN,
                    0);
    for (size_t i = 0; i < sizeof r.reserved; i++)
        if (r.reserved[i])
            return fail(err, errlen, "reserved", "byte %llu is not zero", i, 0);
    if (r.flags & NIB_REQ_PROMPT_IDS) {
        uint32_t n = r.prompt_len / 4;
        if (r.prompt_len % 4)
            return fail(err, errlen, "prompt_len", "%llu is not a whole number of token ids",
                        r.prompt_len, 0);
        if (n == 0)
            return fail(err, errlen, "prompt_len", "no prompt token ids", 0, 0);
        if (n > lim->ctx_len || n > lim->slot_tokens)
            return fail(err, errlen, "prompt_len", "%llu token ids, more than the context holds (%llu)",
                        n, lim->ctx_len < lim->slot_tokens ? lim->ctx_len : lim->slot_tokens);
        if (r.prompt_len > prompt_avail || n > ids_cap)
            return fail(err, errlen, "prompt_len", "%llu bytes of ids were not provided", r.prompt_len,
                        0);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t id = (uint32_t)prompt[4 * i] | (uint32_t)prompt[4 * i + 1] << 8 |
                          (uint32_t)prompt[4 * i + 2] << 16 | (uint32_t)prompt[4 * i + 3] << 24;
            if (id >= lim->vocab_size)
                return fail(err, errlen, "prompt", "token id %llu is not below vocab_size %llu", id,
                            lim->vocab_size);
            ids[i] = id;
        }
        out->n_ids = n;
    }
    out->prompt_len = r.prompt_len;
    out->max_tokens = r.max_tokens;
    out->temperature = r.temperature;
    out->flags = r.flags;
    out->seed = r.seed;
    return 0;
}

void nib_server_init(struct nib_server *s, const struct nib_blob_view *v, void *mem,
                     void *scratch, void *shm, uint32_t pid, uint64_t epoch)
{
    memset(s, 0, sizeof *s);
    s->v = v;
    s->exec.v = v;
    s->exec.mem = mem;
    s->exec.stats = (struct nib_stats *)(void *)((uint8_t *)shm + NIB_SHM_STATS_OFFSET);
    s->shm = shm;
    s->hdr = shm;
    s->stats = (struct nib_stats *)(void *)((uint8_t *)shm + NIB_SHM_STATS_OFFSET);
    s->prompt = scratch;
    s->ids = (uint32_t *)(void *)((uint8_t *)scratch + NIB_PROMPT_MAX);
    s->tok_work = (uint8_t *)scratch + NIB_PROMPT_MAX + (uint64_t)IDS_CAP * sizeof(uint32_t);
    s->owner_alive = nib_pid_alive;

    struct nib_shm_header *h = s->hdr;
    h->magic = NIB_SHM_MAGIC;
    h->version = NIB_SHM_VERSION;
    h->header_size = sizeof *h;
    h->segment_size = NIB_SHM_SIZE;
    h->epoch = epoch;
    h->n_slots = NIB_SLOTS;
    h->slot_size = sizeof(struct nib_slot);
    h->slots_offset = NIB_SHM_SLOTS_OFFSET;
    h->stats_offset = NIB_SHM_STATS_OFFSET;
    h->appliance_pid = pid;
    h->vocab_size = v->h->hp.vocab_size;
    h->prompt_max = NIB_PROMPT_MAX;
    h->slot_tokens = NIB_SLOT_TOKENS;
    h->slot_text = NIB_SLOT_TEXT;
    h->ctx_len = v->h->hp.ctx_len;
    h->bos_id = v->h->hp.bos_id;
    h->eos_id = v->h->hp.eos_id;
    h->add_bos = v->h->hp.add_bos ? 1 : 0;
    h->errmsg_max = NIB_ERRMSG_MAX;
    h->stats_size = sizeof(struct nib_stats);
    /* release: pairs with the acquire of heartbeat_ns in nibhost.c check() */
    nib_store_rel(&h->heartbeat_ns, nib_now_ns());
}

/* Wake hosts sleeping on done_seq; a system call only when one says it
 * sleeps (once per request, never per token). */
static void announce_done(struct nib_shm_header *h)
{
    /* seq_cst add then load: pairs with nibhost.c sleep_on_done()'s seq_cst
     * add of done_waiters then load of done_seq. Either the host sees the
     * new seq (or DONE) and does not sleep, or we see it waiting. */
    nib_fetch_add_seqcst(&h->done_seq, 1);
    if (nib_load_seqcst(&h->done_waiters))
        syscall(SYS_futex, &h->done_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void finish(struct nib_server *s, struct nib_slot *slot, uint32_t status)
{
    slot->status = status;
    slot->t_done_ns = nib_now_ns();
    if (status == NIB_ST_BAD_REQUEST)
        s->stats->requests_rejected++;
    else
        nib_stats_request(s->stats, slot->t_done_ns - slot->t_start_ns);
    if (status == NIB_ST_CANCELLED)
        s->stats->requests_cancelled++;
    s->stats->requests_done++;
    /* CAS: a slot a hostile host changed under us is left as it is.
     * release: pairs with the acquire of state in nibhost.c nib_host_poll(),
     * so a DONE request's status, times and counts are final there. */
    uint32_t st = NIB_SLOT_RUNNING;
    nib_cas(&slot->state, &st, NIB_SLOT_DONE);
    announce_done(s->hdr);
}

/* The owner died: nobody will read the result, so the slot goes straight
 * back to FREE. */
static void abandon(struct nib_server *s, struct nib_slot *slot)
{
    slot->status = NIB_ST_OWNER_GONE;
    slot->t_done_ns = nib_now_ns();
    s->stats->requests_done++;
    s->stats->slots_reclaimed++;
    uint32_t st = NIB_SLOT_RUNNING;
    nib_cas(&slot->state, &st, NIB_SLOT_FREE);
}

static void reject(struct nib_server *s, struct nib_slot *slot, const char *msg)
{
    snprintf(slot->error, sizeof slot->error, "%s", msg);
    finish(s, slot, NIB_ST_BAD_REQUEST);
}

/* The oldest SUBMITTED slot, by ticket; NULL when none. */
static struct nib_slot *next_submitted(struct nib_server *s)
{
    struct nib_slot *best = NULL;
    uint64_t best_ticket = 0;
    for (uint32_t i = 0; i < NIB_SLOTS; i++) {
        struct nib_slot *slot = nib_shm_slot(s->shm, i);
        /* acquire: pairs with the release of SUBMITTED in nibhost.c nib_host_submit() */
        if (nib_load_acq(&slot->state) != NIB_SLOT_SUBMITTED)
            continue;
        uint64_t t = nib_load_relaxed(&slot->ticket);
        if (!best || t < best_ticket) {
            best = slot;
            best_ticket = t;
        }
    }
    return best;
}

/* Append the text of `id` to the slot; 0 when it does not fit. *len is the
 * appliance's own count: nothing is read back from the slot. */
static int emit_text(struct nib_server *s, struct nib_slot *slot, uint32_t *len, uint32_t prev,
                     uint32_t id)
{
    char piece[NIB_MAX_PIECE];
    size_t n = nib_tok_decode(s->v, prev, id, piece, sizeof piece);
    if (n > NIB_SLOT_TEXT - *len)
        return 0;
    memcpy(slot->text + *len, piece, n);
    *len += (uint32_t)n;
    /* release: pairs with the acquire of text_len in nibhost.c nib_host_poll() */
    nib_store_rel(&slot->text_len, *len);
    return 1;
}

struct run {
    struct nib_slot *slot;
    uint32_t owner;
    uint32_t since_check;   /* tokens since the owner was last checked */
    uint64_t next_check;
};

/* Between passes: a cheap load of the stop flags each time; every
 * NIB_OWNER_CHECK_TOKENS tokens or NIB_OWNER_CHECK_NS, whichever comes
 * first, the heartbeat, whether the owner still lives (one kill(pid, 0):
 * never a system call per token) and the cancel flag (which the decode
 * loop in serve() also loads after every generated token; during prefill
 * this is the only check). Returns a final status, or 0 to go on. */
static uint32_t checkpoint(struct nib_server *s, struct run *r, uint64_t now)
{
    if (nib_load_acq(&s->hdr->stop_requested) || (s->stop_flag && *s->stop_flag))
        return NIB_ST_SHUTDOWN;
    if (++r->since_check < NIB_OWNER_CHECK_TOKENS && now < r->next_check)
        return 0;
    r->since_check = 0;
    r->next_check = now + NIB_OWNER_CHECK_NS;
    /* release: pairs with the acquire of heartbeat_ns in nibhost.c check() */
    nib_store_rel(&s->hdr->heartbeat_ns, now);
    s->last_beat_ns = now;
    if (!s->owner_alive(r->owner))
        return NIB_ST_OWNER_GONE;
    /* acquire: pairs with the release in nibhost.c nib_host_cancel() */
    if (nib_load_acq(&r->slot->cancel))
        return NIB_ST_CANCELLED;
    return 0;
}

static void serve(struct nib_server *s, struct nib_slot *slot)
{
    /* acquire (the CAS): pairs with the release of SUBMITTED in nibhost.c
     * nib_host_submit(), so the request and prompt are the host's. */
    uint32_t st = NIB_SLOT_SUBMITTED;
    if (!nib_cas(&slot->state, &st, NIB_SLOT_RUNNING))
        return; /* changed under us: not a request to serve */
    const struct nib_hparams *hp = &s->v->h->hp;
    /* Take private copies first: the host may still scribble on the slot. */
    struct run r = {.slot = slot, .owner = nib_load_relaxed(&slot->owner_pid)};
    struct nib_request req;
    memcpy(&req, &slot->req, sizeof req);
    uint64_t now = nib_now_ns();
    r.next_check = now + NIB_OWNER_CHECK_NS;
    slot->t_start_ns = now;
    slot->t_first_ns = slot->t_done_ns = 0;
    slot->n_prompt = 0;
    nib_store_rel(&slot->n_tokens, 0u);
    nib_store_rel(&slot->text_len, 0u);
    slot->status = NIB_ST_PENDING;
    slot->error[0] = 0;
    s->stats->requests_accepted++;
    if (!s->owner_alive(r.owner)) {
        abandon(s, slot);
        return;
    }

    uint32_t plen = req.prompt_len <= NIB_PROMPT_MAX ? req.prompt_len : 0;
    memcpy(s->prompt, slot->prompt, plen);
    const struct nib_req_limits lim = {NIB_PROMPT_MAX, NIB_SLOT_TOKENS, hp->ctx_len,
                                       hp->vocab_size};
    struct nib_req_decoded d;
    char why[NIB_ERRMSG_MAX];
    if (nib_req_decode(&req, s->prompt, plen, &lim, &d, s->ids, IDS_CAP, why, sizeof why)) {
        reject(s, slot, why);
        return;
    }

    int n;
    if (d.flags & NIB_REQ_PROMPT_IDS) {
        n = (int)d.n_ids;
    } else {
        int add_bos = hp->add_bos && !(d.flags & NIB_REQ_NO_BOS);
        n = nib_tok_encode_with(s->v, (const char *)s->prompt, d.prompt_len, add_bos, s->ids,
                                IDS_CAP, s->tok_work);
        if (n <= 0) {
            reject(s, slot, "prompt_len: empty prompt and no BOS to start from");
            return;
        }
        if ((uint32_t)n > hp->ctx_len || (uint32_t)n > NIB_SLOT_TOKENS) {
            reject(s, slot, "prompt_len: prompt has more tokens than the context holds");
            return;
        }
    }

    memcpy(slot->tokens, s->ids, (size_t)n * 4);
    slot->n_prompt = (uint32_t)n;
    uint32_t n_tok = (uint32_t)n, text_len = 0;
    /* release: pairs with the acquire of n_tokens in nibhost.c nib_host_poll(),
     * which then reads tokens[0, n_tokens) and n_prompt */
    nib_store_rel(&slot->n_tokens, n_tok);
    s->stats->tokens_prompt += (uint64_t)n;

    uint64_t rng = nib_rng_seed(d.seed);
    uint32_t pos = 0, status = 0, prev = 0, produced = 0;
    const float *logits = NULL;
    /* Prefill: feed the prompt in passes of up to max_batch tokens (each
     * weight is read once per pass, not once per token); the last token's
     * logits give the first generated token. */
    while (pos < (uint32_t)n && !status) {
        uint32_t m = (uint32_t)n - pos < s->v->h->max_batch ? (uint32_t)n - pos : s->v->h->max_batch;
        logits = nib_exec_tokens(&s->exec, s->ids + pos, m, pos);
        pos += m;
        r.since_check += m - 1; /* checks count tokens, not passes */
        status = checkpoint(s, &r, nib_now_ns());
    }
    prev = s->ids[n - 1];
    while (!status) {
        uint32_t next = d.temperature > 0.0f
                            ? nib_sample((float *)logits, hp->vocab_size, d.temperature, &rng)
                            : nib_exec_argmax(&s->exec);
        uint64_t t = nib_now_ns();
        if (produced == 0)
            slot->t_first_ns = t;
        if (next == hp->eos_id) {
            status = NIB_ST_EOS;
            break;
        }
        if (n_tok >= NIB_SLOT_TOKENS) {
            status = NIB_ST_CTX_FULL;
            break;
        }
        if (!emit_text(s, slot, &text_len, prev, next)) {
            status = NIB_ST_TEXT_FULL;
            break;
        }
        slot->tokens[n_tok++] = next;
        /* release: pairs with the acquire of n_tokens in nibhost.c nib_host_poll() */
        nib_store_rel(&slot->n_tokens, n_tok);
        s->stats->tokens_generated++;
        produced++;
        prev = next;
        if (produced == d.max_tokens) {
            status = NIB_ST_OK;
            break;
        }
        /* acquire: pairs with the release in nibhost.c nib_host_cancel() */
        if (nib_load_acq(&slot->cancel)) {
            status = NIB_ST_CANCELLED;
            break;
        }
        if ((status = checkpoint(s, &r, t)))
            break;
        if (pos >= hp->ctx_len) {
            status = NIB_ST_CTX_FULL;
            break;
        }
        logits = nib_exec_token(&s->exec, next, pos++);
    }
    if (status == NIB_ST_OWNER_GONE)
        abandon(s, slot);
    else
        finish(s, slot, status);
}

int nib_server_poll(struct nib_server *s)
{
    uint64_t now = nib_now_ns();
    if (now - s->last_reclaim_ns >= NIB_RECLAIM_NS) {
        nib_server_reclaim(s, s->owner_alive);
        s->last_reclaim_ns = now;
    }
    struct nib_slot *slot = next_submitted(s);
    if (!slot)
        return 0;
    serve(s, slot);
    return 1;
}

int nib_server_reclaim(struct nib_server *s, int (*alive)(uint32_t pid))
{
    int n = 0;
    for (uint32_t i = 0; i < NIB_SLOTS; i++) {
        struct nib_slot *slot = nib_shm_slot(s->shm, i);
        uint32_t st = nib_load_acq(&slot->state);
        /* Runs between requests on the serving thread, so even a RUNNING
         * (or unknown) state here is a leftover a dead owner can lose. */
        if (st == NIB_SLOT_FREE)
            continue;
        uint32_t pid = nib_load_relaxed(&slot->owner_pid);
        if (alive(pid))
            continue;
        /* CAS so a slot that changed hands meanwhile is left alone. */
        if (nib_cas(&slot->state, &st, NIB_SLOT_FREE)) {
            s->stats->slots_reclaimed++;
            n++;
        }
    }
    return n;
}
