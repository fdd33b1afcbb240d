#include "rt/serve.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rt/sample.h"
#include "rt/tokenizer.h"

/* Token scratch: the encoder needs prompt bytes + 2 ids. */
#define IDS_CAP (NIB_PROMPT_MAX + 2)

uint64_t nib_server_scratch_footprint(void)
{
    return (NIB_PROMPT_MAX + (uint64_t)IDS_CAP * sizeof(uint32_t) + 63) & ~63ull;
}

uint64_t nib_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void nib_server_init(struct nib_server *s, const struct nib_blob_view *v, void *mem,
                     void *scratch, void *shm, uint32_t pid, uint64_t epoch)
{
    memset(s, 0, sizeof *s);
    s->v = v;
    s->exec.v = v;
    s->exec.mem = mem;
    s->shm = shm;
    s->hdr = shm;
    s->stats = (struct nib_stats *)(void *)((uint8_t *)shm + NIB_SHM_STATS_OFFSET);
    s->prompt = scratch;
    s->ids = (uint32_t *)(void *)((uint8_t *)scratch + NIB_PROMPT_MAX);

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
    nib_store_rel(&h->heartbeat_ns, nib_now_ns());
}

static unsigned hist_bucket(uint64_t ns)
{
    unsigned b = 0;
    while (ns > 1 && b < NIB_HIST_BUCKETS - 1) {
        ns >>= 1;
        b++;
    }
    return b;
}

static void record(uint64_t *hist, uint64_t *max, uint64_t ns)
{
    hist[hist_bucket(ns)]++;
    if (ns > *max)
        *max = ns;
}

static void finish(struct nib_server *s, struct nib_slot *slot, uint32_t status)
{
    slot->status = status;
    slot->t_done_ns = nib_now_ns();
    if (status == NIB_ST_BAD_REQUEST)
        s->stats->requests_rejected++;
    else
        record(s->stats->request_ns_hist, &s->stats->request_ns_max,
               slot->t_done_ns - slot->t_start_ns);
    if (status == NIB_ST_CANCELLED)
        s->stats->requests_cancelled++;
    s->stats->requests_done++;
    nib_store_rel(&slot->state, NIB_SLOT_DONE);
}

static void reject(struct nib_server *s, struct nib_slot *slot, const char *field,
                   const char *why)
{
    snprintf(slot->error, sizeof slot->error, "%s: %s", field, why);
    finish(s, slot, NIB_ST_BAD_REQUEST);
}

/* The oldest SUBMITTED slot, by ticket; NULL when none. */
static struct nib_slot *next_submitted(struct nib_server *s)
{
    struct nib_slot *best = NULL;
    uint64_t best_ticket = 0;
    for (uint32_t i = 0; i < NIB_SLOTS; i++) {
        struct nib_slot *slot = nib_shm_slot(s->shm, i);
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

/* Append the text of `id` to the slot; 0 when it does not fit. */
static int emit_text(struct nib_server *s, struct nib_slot *slot, uint32_t prev, uint32_t id)
{
    char piece[NIB_MAX_PIECE];
    size_t n = nib_tok_decode(s->v, prev, id, piece, sizeof piece);
    uint32_t len = slot->text_len;
    if (n > NIB_SLOT_TEXT - len)
        return 0;
    memcpy(slot->text + len, piece, n);
    nib_store_rel(&slot->text_len, len + (uint32_t)n);
    return 1;
}

static void serve(struct nib_server *s, struct nib_slot *slot)
{
    const struct nib_hparams *hp = &s->v->h->hp;
    /* Take a private copy first: the host may still scribble on the slot. */
    struct nib_request req;
    memcpy(&req, &slot->req, sizeof req);
    slot->t_start_ns = nib_now_ns();
    slot->n_tokens = slot->n_prompt = slot->text_len = 0;
    slot->status = NIB_ST_PENDING;
    slot->error[0] = 0;
    nib_store_rel(&slot->state, NIB_SLOT_RUNNING);
    s->stats->requests_accepted++;

    if (req.prompt_len > NIB_PROMPT_MAX)
        return reject(s, slot, "prompt_len", "larger than the prompt buffer");
    if (req.max_tokens == 0 || req.max_tokens > NIB_SLOT_TOKENS)
        return reject(s, slot, "max_tokens", "must be 1..slot_tokens");
    if (!(req.temperature <= 100.0f) || req.temperature < 0.0f) /* also rejects NaN */
        return reject(s, slot, "temperature", "must be a number in 0..100");
    if (req.flags & ~NIB_REQ_NO_BOS)
        return reject(s, slot, "flags", "unknown bits set");
    memcpy(s->prompt, slot->prompt, req.prompt_len);

    int add_bos = hp->add_bos && !(req.flags & NIB_REQ_NO_BOS);
    int n = nib_tok_encode(s->v, (const char *)s->prompt, req.prompt_len, add_bos, s->ids, IDS_CAP);
    if (n <= 0)
        return reject(s, slot, "prompt_len", "empty prompt and no BOS to start from");
    if ((uint32_t)n > hp->ctx_len || (uint32_t)n > NIB_SLOT_TOKENS)
        return reject(s, slot, "prompt_len", "prompt has more tokens than the context holds");

    memcpy(slot->tokens, s->ids, (size_t)n * 4);
    slot->n_prompt = (uint32_t)n;
    nib_store_rel(&slot->n_tokens, (uint32_t)n);
    s->stats->tokens_prompt += (uint64_t)n;

    uint64_t rng = nib_rng_seed(req.seed);
    uint32_t pos = 0, status = NIB_ST_OK, prev = 0, produced = 0;
    const float *logits = NULL;
    /* Prefill: feed every prompt token; the last one's logits give the first
     * generated token. */
    for (; pos < (uint32_t)n; pos++)
        logits = nib_exec_token(&s->exec, s->ids[pos], pos);
    prev = s->ids[n - 1];
    uint64_t t_prev = nib_now_ns();
    while (produced < req.max_tokens) {
        uint32_t next = nib_sample((float *)logits, hp->vocab_size, req.temperature, &rng);
        uint64_t t = nib_now_ns();
        record(s->stats->token_ns_hist, &s->stats->token_ns_max, t - t_prev);
        t_prev = t;
        if (produced == 0)
            slot->t_first_ns = t;
        if (next == hp->eos_id) {
            status = NIB_ST_EOS;
            break;
        }
        uint32_t at = slot->n_tokens;
        if (at >= NIB_SLOT_TOKENS) {
            status = NIB_ST_CTX_FULL;
            break;
        }
        if (!emit_text(s, slot, prev, next)) {
            status = NIB_ST_TEXT_FULL;
            break;
        }
        slot->tokens[at] = next;
        nib_store_rel(&slot->n_tokens, at + 1);
        s->stats->tokens_generated++;
        produced++;
        prev = next;
        if (produced == req.max_tokens)
            break;
        if (nib_load_acq(&slot->cancel)) {
            status = NIB_ST_CANCELLED;
            break;
        }
        if (nib_load_acq(&s->hdr->stop_requested) || (s->stop_flag && *s->stop_flag)) {
            status = NIB_ST_SHUTDOWN;
            break;
        }
        if (pos >= hp->ctx_len) {
            status = NIB_ST_CTX_FULL;
            break;
        }
        logits = nib_exec_token(&s->exec, next, pos++);
    }
    finish(s, slot, status);
}

int nib_server_poll(struct nib_server *s)
{
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
        if (st == NIB_SLOT_FREE || st == NIB_SLOT_RUNNING)
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
