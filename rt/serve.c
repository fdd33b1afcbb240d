#include "rt/serve.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proto/private/sync.h"
#include "proto/stats.h"
#include "proto/utf8.h"
#include "rt/chat/chat.h"
#include "rt/sample.h"
#include "rt/tokenizer.h"

void nib_server_geometry(const struct nib_blob_view *v, struct nib_shm_header *h)
{
    uint64_t in_len, out_len;
    if (v->h->model_kind == NIB_MODEL_VISION) {
        nib_tensor_layout(v, NULL, &in_len, &out_len);
        nib_ring_geometry_tensor(h, in_len, out_len);
        return;
    }
    nib_ring_geometry(h, v->h->hp.ctx_len, v->tok->max_piece_len);
}

/* The private scratch, all sized at boot from the geometry: the prompt
 * copy, ids, the tokenizer's work for the longest text it is given (a
 * prompt, or a rendered conversation), and for a blob with a chat template
 * the decoded messages, the rendered text with its taint bytes and the
 * renderer's work. */
struct scratch_plan {
    uint64_t prompt_max, text_max; /* longest prompt; longest text tokenized */
    uint32_t ids_cap, messages;
    uint64_t off_ids, off_tok, off_parts, off_msgs, off_render, off_taint, off_chat, chat_size,
        total;
};

static uint64_t up64(uint64_t x)
{
    return (x + 63) & ~63ull;
}

static void scratch_plan(const struct nib_blob_view *v, struct scratch_plan *p)
{
    struct nib_shm_header h;
    memset(&h, 0, sizeof h);
    memset(p, 0, sizeof *p);
    if (v->h->model_kind == NIB_MODEL_VISION) {
        /* Tensors go from the slot straight to their io offsets in the
         * arena and back (rt/serve_tensor.c): no private copy, no ids. */
        p->total = 64;
        return;
    }
    nib_server_geometry(v, &h);
    size_t prog_len = 0;
    int chat = nib_tok_chat_program(v, &prog_len) != NULL;
    p->prompt_max = h.prompt_max;
    p->text_max = chat ? (uint64_t)NIB_CHAT_RENDER_FACTOR * h.prompt_max : h.prompt_max;
    p->messages = chat ? nib_chat_max_messages(h.prompt_max) : 0;
    /* + 1: a conversation's BOS goes in front of what the tokenizer gives */
    uint64_t ids = nib_tok_max_ids(v, p->text_max) + 1;
    if (ids < h.prompt_max / 4 + 1)
        ids = h.prompt_max / 4 + 1; /* PROMPT_IDS requests */
    p->ids_cap = (uint32_t)ids;
    p->off_ids = up64(p->prompt_max);
    p->off_tok = p->off_ids + up64(ids * 4);
    p->off_parts = p->off_tok + up64(nib_tok_req_scratch_footprint(v, p->text_max));
    p->off_msgs = p->off_parts + up64((uint64_t)p->messages * sizeof(struct nib_chat_part));
    p->off_render = p->off_msgs + up64((uint64_t)p->messages * sizeof(struct nib_chat_message));
    p->off_taint = p->off_render + (chat ? up64(p->text_max) : 0);
    p->off_chat = p->off_taint + (chat ? up64(p->text_max) : 0);
    p->chat_size = chat ? up64(nib_chat_scratch_footprint(p->prompt_max, p->text_max)) : 0;
    p->total = p->off_chat + p->chat_size;
}

uint64_t nib_server_scratch_footprint(const struct nib_blob_view *v)
{
    struct scratch_plan p;
    scratch_plan(v, &p);
    return p.total;
}

int nib_req_fail(char *err, size_t errlen, const char *field, const char *why, uint64_t a,
                 uint64_t b)
{
    char msg[96];
    snprintf(msg, sizeof msg, why, (unsigned long long)a, (unsigned long long)b);
    snprintf(err, errlen, "%s: %s", field, msg);
    return -1;
}

/* kind MEASURE (docs/ring.md 6.3): max_tokens reference-loop passes at
 * the positions from the prompt's one u32 on. */
static int decode_measure(const struct nib_request *r, const uint8_t *prompt, size_t prompt_avail,
                          const struct nib_req_limits *lim, struct nib_req_decoded *out, char *err,
                          size_t errlen)
{
    if (r->flags)
        return nib_req_fail(err, errlen, "flags", "a measurement takes no flags (0x%llx set)",
                            r->flags, 0);
    if (r->temperature != 0.0f)
        return nib_req_fail(err, errlen, "temperature", "must be 0 for a measurement", 0, 0);
    if (r->prompt_len != 4)
        return nib_req_fail(err, errlen, "prompt_len",
                            "%llu: a measurement's prompt is its first position, one u32 (4 bytes)",
                            r->prompt_len, 0);
    if (prompt_avail < 4)
        return nib_req_fail(err, errlen, "prompt_len", "4 bytes of position were not provided", 0,
                            0);
    uint32_t pos = (uint32_t)prompt[0] | (uint32_t)prompt[1] << 8 | (uint32_t)prompt[2] << 16 |
                   (uint32_t)prompt[3] << 24;
    if (pos >= lim->ctx_len || r->max_tokens > lim->ctx_len - pos)
        return nib_req_fail(err, errlen, "prompt",
                            "position %llu + max_tokens passes the context (%llu positions)", pos,
                            lim->ctx_len);
    out->prompt_len = 4;
    out->max_tokens = r->max_tokens;
    out->kind = NIB_REQ_KIND_MEASURE;
    out->measure_pos = pos;
    return 0;
}

int nib_req_decode(const struct nib_request *raw, const uint8_t *prompt, size_t prompt_avail,
                   const struct nib_req_limits *lim, struct nib_req_decoded *out, uint32_t *ids,
                   size_t ids_cap, struct nib_chat_part *parts, char *err, size_t errlen)
{
    /* Read every field once into a local: the caller's copy came from
     * shared memory and is checked here, nowhere else. */
    struct nib_request r;
    memcpy(&r, raw, sizeof r);
    memset(out, 0, sizeof *out);
    if (r.prompt_len > lim->prompt_max)
        return nib_req_fail(err, errlen, "prompt_len", "%llu is larger than prompt_max %llu",
                            r.prompt_len, lim->prompt_max);
    if (lim->tensor_in && r.kind != NIB_REQ_KIND_TENSOR)
        return nib_req_fail(err, errlen, "kind",
                            "%llu: this is a vision model, it serves only kind 3 (TENSOR)", r.kind,
                            0);
    if (!lim->tensor_in && r.kind == NIB_REQ_KIND_TENSOR)
        return nib_req_fail(err, errlen, "kind", "3 (TENSOR): this model takes tokens, not tensors",
                            0, 0);
    if (r.kind == NIB_REQ_KIND_TENSOR)
        return nib_req_decode_tensor(&r, lim, out, err, errlen);
    if (r.max_tokens == 0 || r.max_tokens > lim->slot_tokens)
        return nib_req_fail(err, errlen, "max_tokens", "%llu is outside 1..slot_tokens (%llu)",
                            r.max_tokens, lim->slot_tokens);
    if (!(r.temperature >= 0.0f && r.temperature <= NIB_TEMPERATURE_MAX)) /* NaN fails too */
        return nib_req_fail(err, errlen, "temperature", "must be a number in 0..%llu",
                            (uint64_t)NIB_TEMPERATURE_MAX, 0);
    if (r.flags & ~NIB_REQ_FLAGS_KNOWN)
        return nib_req_fail(err, errlen, "flags", "unknown bits 0x%llx set",
                            r.flags & ~NIB_REQ_FLAGS_KNOWN, 0);
    if (r.kind != NIB_REQ_KIND_TEXT && r.kind != NIB_REQ_KIND_CHAT &&
        r.kind != NIB_REQ_KIND_MEASURE)
        return nib_req_fail(
            err, errlen, "kind",
            "%llu is not a kind this appliance serves (0: text, 1: chat, 2: measure)", r.kind, 0);
    if (r.kind == NIB_REQ_KIND_CHAT && !lim->chat_messages)
        return nib_req_fail(err, errlen, "kind", "this model has no chat template", 0, 0);
    if (r.kind == NIB_REQ_KIND_CHAT && (r.flags & NIB_REQ_PROMPT_IDS))
        return nib_req_fail(err, errlen, "flags", "PROMPT_IDS does not apply to a chat request", 0,
                            0);
    for (size_t i = 0; i < sizeof r.reserved; i++)
        if (r.reserved[i])
            return nib_req_fail(err, errlen, "reserved", "byte %llu is not zero", i, 0);
    if (r.kind == NIB_REQ_KIND_MEASURE)
        return decode_measure(&r, prompt, prompt_avail, lim, out, err, errlen);
    if (r.kind == NIB_REQ_KIND_CHAT) {
        if (r.prompt_len > prompt_avail)
            return nib_req_fail(err, errlen, "prompt_len",
                                "%llu bytes of messages were not provided", r.prompt_len, 0);
        if (nib_chat_decode(prompt, r.prompt_len, &out->chat, parts, lim->chat_messages, err,
                            errlen))
            return -1;
    }
    if (r.flags & NIB_REQ_PROMPT_IDS) {
        uint32_t n = r.prompt_len / 4;
        if (r.prompt_len % 4)
            return nib_req_fail(err, errlen, "prompt_len",
                                "%llu is not a whole number of token ids", r.prompt_len, 0);
        if (n == 0)
            return nib_req_fail(err, errlen, "prompt_len", "no prompt token ids", 0, 0);
        if (n > lim->ctx_len || n > lim->slot_tokens)
            return nib_req_fail(err, errlen, "prompt_len",
                                "%llu token ids, more than the context holds (%llu)", n,
                                lim->ctx_len < lim->slot_tokens ? lim->ctx_len : lim->slot_tokens);
        if (r.prompt_len > prompt_avail || n > ids_cap)
            return nib_req_fail(err, errlen, "prompt_len", "%llu bytes of ids were not provided",
                                r.prompt_len, 0);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t id = (uint32_t)prompt[4 * i] | (uint32_t)prompt[4 * i + 1] << 8 |
                          (uint32_t)prompt[4 * i + 2] << 16 | (uint32_t)prompt[4 * i + 3] << 24;
            if (id >= lim->vocab_size)
                return nib_req_fail(err, errlen, "prompt",
                                    "token id %llu is not below vocab_size %llu", id,
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
    out->kind = r.kind;
    return 0;
}

void nib_server_init(struct nib_server *s, const struct nib_blob_view *v, void *mem, void *scratch,
                     void *header, uint32_t max_hosts, uint32_t pid, uint64_t epoch)
{
    memset(s, 0, sizeof *s);
    s->v = v;
    s->exec.v = v;
    s->exec.mem = mem;
    s->hdr = header;
    s->stats = (struct nib_stats *)(void *)((uint8_t *)header + NIB_SHM_STATS_OFFSET);
    s->exec.stats = s->stats;
    s->header_fd = -1;
    s->listen_fd = -1;
    s->n_rings = max_hosts < 1 ? 1 : max_hosts > NIB_HOSTS_MAX ? NIB_HOSTS_MAX : max_hosts;
    s->rr_last = s->n_rings - 1;
    for (uint32_t i = 0; i < NIB_HOSTS_MAX; i++) {
        s->rings[i].mem_fd = -1;
        s->rings[i].conn = -1;
    }
    for (uint32_t i = 0; i < NIB_CONNS_MAX; i++) {
        s->conns[i].fd = -1;
        s->conns[i].ring = -1;
    }
    struct scratch_plan sp;
    scratch_plan(v, &sp);
    uint8_t *base = scratch;
    s->prompt = base;
    s->ids = (uint32_t *)(void *)(base + sp.off_ids);
    s->ids_cap = sp.ids_cap;
    s->tok_work = base + sp.off_tok;
    s->chat_prog = nib_tok_chat_program(v, &s->chat_prog_len);
    if (s->chat_prog) {
        s->parts = (struct nib_chat_part *)(void *)(base + sp.off_parts);
        s->messages = base + sp.off_msgs;
        s->render = base + sp.off_render;
        s->taint = base + sp.off_taint;
        s->render_cap = sp.text_max;
        s->chat_work = base + sp.off_chat;
        s->chat_work_size = sp.chat_size;
    }

    const struct nib_hparams *hp = &v->h->hp;
    struct nib_shm_header *h = s->hdr;
    h->magic = NIB_SHM_MAGIC;
    h->version = NIB_SHM_VERSION;
    h->header_size = sizeof *h;
    h->header_memfd_size = nib_server_header_size(v);
    h->epoch = epoch;
    h->stats_offset = NIB_SHM_STATS_OFFSET;
    h->stats_size = sizeof(struct nib_stats);
    h->appliance_pid = pid;
    h->max_hosts = s->n_rings;
    h->vocab_size = hp->vocab_size;
    h->ctx_len = hp->ctx_len;
    h->bos_id = hp->bos_id;
    h->eos_id = hp->eos_id;
    h->add_bos = hp->add_bos ? 1 : 0;
    h->errmsg_max = NIB_ERRMSG_MAX;
    h->features = (s->chat_prog ? NIB_FEAT_CHAT : 0) | NIB_FEAT_MEASURE;
    if (v->h->model_kind == NIB_MODEL_VISION)
        nib_server_init_tensors(s);
    s->ref.e = &s->exec; /* runs on whatever team exec runs on */
    nib_server_geometry(v, h);
    s->lim = (struct nib_req_limits){h->prompt_max,  h->slot_tokens, hp->ctx_len,
                                     hp->vocab_size, sp.messages,    h->inputs_len};
    s->stats->version = NIB_STATS_VERSION;
    /* release: pairs with the acquire of heartbeat_ns in nibhost.c alive() */
    nib_store_rel(&h->heartbeat_ns, nib_now_ns());
}

void nib_server_set_ring(struct nib_server *s, uint32_t i, void *base, int mem_fd)
{
    if (i >= s->n_rings)
        return;
    s->rings[i].base = base;
    s->rings[i].mem_fd = mem_fd;
}

int nib_server_stopping(const struct nib_server *s)
{
    return s->stop || (s->stop_flag && *s->stop_flag);
}

static struct nib_slot *slot_at(const struct nib_server *s, uint32_t ring, uint32_t i)
{
    return nib_ring_slot(s->rings[ring].base, s->hdr, i);
}

/* Is the slot still the request's own: RUNNING under the ticket it was
 * picked up with? Checked before every write into it. */
int nib_serve_own(const struct nib_server *s, const struct nib_run *r)
{
    struct nib_slot *slot = slot_at(s, r->ring, r->slot);
    /* acquire: pairs with the releases of state in nibhost.c nib_host_submit()
     * and nib_host_release(), so a slot the host freed or published again
     * reads as such; the ticket (relaxed) is read after it */
    return nib_load_acq(&slot->state) == NIB_SLOT_RUNNING &&
           nib_load_relaxed(&slot->ticket) == r->ticket;
}

/* done_seq += 1 (the appliance's own count, stored: never read back), and
 * a wake-up when the host says it sleeps on it (once per request, never per
 * token). */
static void announce_done(struct nib_server *s, uint32_t ring)
{
    struct nib_host_ring *hr = &s->rings[ring];
    struct nib_ring_header *rh = (struct nib_ring_header *)(void *)hr->base;
    hr->done_seq++;
    /* seq_cst store then load: pairs with nibhost.c sleep_on_done()'s seq_cst
     * store of done_waiters then load of done_seq. Either the host sees the
     * new seq (or DONE) and does not sleep, or we see it waiting. The wake
     * is a shared futex (the word is in a shared mapping). */
    nib_store_seqcst(&rh->done_seq, hr->done_seq);
    if (nib_load_seqcst(&rh->done_waiters))
        syscall(SYS_futex, &rh->done_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Post the final status: only into a slot that is still the request's own
 * (else the request ends HOST_CHANGED and nothing is written). */
void nib_serve_finish(struct nib_server *s, struct nib_run *r, uint32_t status, const char *why)
{
    struct nib_stats *st = s->stats;
    uint64_t t = nib_now_ns();
    s->run = NULL;
    st->requests_done++;
    if (status == NIB_ST_OWNER_GONE) {
        /* The host hung up: nobody reads the slot, whose ring is free. */
        st->slots_reclaimed++;
        return;
    }
    struct nib_slot *slot = slot_at(s, r->ring, r->slot);
    if (status != NIB_ST_HOST_CHANGED && nib_serve_own(s, r)) {
        /* The whole text now, a trailing partial character included (it
         * will never be completed). release: pairs with the acquire of
         * text_len in nibhost.c nib_host_poll() */
        nib_store_rel(&slot->text_len, r->text_len);
        if (why)
            snprintf(slot->error, sizeof slot->error, "%s", why);
        slot->status = status;
        slot->t_done_ns = t;
        uint32_t want = NIB_SLOT_RUNNING;
        /* CAS, so a slot the host changed under us stays as it is. release:
         * pairs with the acquire of state in nibhost.c nib_host_poll(), so a
         * DONE request's status, error, times and counts are final there */
        if (nib_cas(&slot->state, &want, NIB_SLOT_DONE)) {
            announce_done(s, r->ring);
            if (status == NIB_ST_BAD_REQUEST)
                st->requests_rejected++;
            else
                nib_stats_request(st, t - r->t_start);
            if (status == NIB_ST_CANCELLED)
                st->requests_cancelled++;
            return;
        }
    }
    st->requests_host_changed++;
}

/* The lowest-ticket SUBMITTED slot of ring i, or -1. */
static int ring_next(const struct nib_server *s, uint32_t i)
{
    int best = -1;
    uint64_t best_ticket = 0;
    for (uint32_t k = 0; k < s->hdr->n_slots; k++) {
        struct nib_slot *slot = slot_at(s, i, k);
        /* acquire: pairs with the release of SUBMITTED in nibhost.c
         * nib_host_submit(); the ticket was stored before it */
        if (nib_load_acq(&slot->state) != NIB_SLOT_SUBMITTED)
            continue;
        uint64_t t = nib_load_relaxed(&slot->ticket);
        if (best < 0 || t < best_ticket) {
            best = (int)k;
            best_ticket = t;
        }
    }
    return best;
}

/* Round-robin: the first attached ring after the one served last that has
 * a submitted request. */
static int next_request(struct nib_server *s, uint32_t *ring, uint32_t *slot)
{
    for (uint32_t k = 1; k <= s->n_rings; k++) {
        uint32_t i = (s->rr_last + k) % s->n_rings;
        if (s->rings[i].conn < 0 || !s->rings[i].base)
            continue;
        int j = ring_next(s, i);
        if (j >= 0) {
            *ring = i;
            *slot = (uint32_t)j;
            return 1;
        }
    }
    return 0;
}

static int any_submitted(const struct nib_server *s)
{
    for (uint32_t i = 0; i < s->n_rings; i++)
        if (s->rings[i].conn >= 0 && s->rings[i].base && ring_next(s, i) >= 0)
            return 1;
    return 0;
}

void nib_server_housekeeping(struct nib_server *s, uint64_t now)
{
    /* release: pairs with the acquire of heartbeat_ns in nibhost.c alive() */
    nib_store_rel(&s->hdr->heartbeat_ns, now);
    s->last_beat_ns = now;
    if (!s->sock_path || s->hdr->socket_lost || now - s->last_watch_ns < NIB_HEARTBEAT_NS)
        return;
    s->last_watch_ns = now;
    struct stat st;
    if (lstat(s->sock_path, &st) == 0 && (uint64_t)st.st_dev == s->sock_dev &&
        (uint64_t)st.st_ino == s->sock_ino)
        return;
    /* release: a flag nib stats shows; no data hangs on it */
    nib_store_rel(&s->hdr->socket_lost, 1u);
    s->stats->socket_lost = 1;
    fprintf(stderr, "nibble: socket path %s was removed or replaced; new hosts cannot attach\n",
            s->sock_path);
}

/* Append the text of `id`; 0 when it does not fit. r->text_len is the
 * appliance's own count; text_len in the slot is published only up to the
 * last whole UTF-8 character (nib_utf8_ready looks at the last three bytes
 * at most, kept privately in r->tail), so a streaming host never sees half
 * a character; nib_serve_finish() publishes the rest. */
static int emit_text(struct nib_server *s, struct nib_slot *slot, struct nib_run *r, uint32_t prev,
                     uint32_t id)
{
    char piece[NIB_MAX_PIECE];
    size_t n = nib_tok_decode(s->v, prev, id, piece, sizeof piece);
    if (n > s->hdr->slot_text - r->text_len)
        return 0;
    memcpy(nib_slot_text(slot, s->hdr) + r->text_len, piece, n);
    r->text_len += (uint32_t)n;
    uint8_t last[3 + NIB_MAX_PIECE];
    memcpy(last, r->tail, r->tail_n);
    memcpy(last + r->tail_n, piece, n);
    size_t all = r->tail_n + n, keep = all < 3 ? all : 3;
    memcpy(r->tail, last + all - keep, keep);
    r->tail_n = (uint32_t)keep;
    uint32_t held = (uint32_t)(keep - nib_utf8_ready(r->tail, keep));
    /* release: pairs with the acquire of text_len in nibhost.c nib_host_poll() */
    nib_store_rel(&slot->text_len, r->text_len - held);
    return 1;
}

/* A chat request's prompt text: the messages (in the private prompt copy)
 * rendered by the model's template, with a taint byte per output byte.
 * Returns the text's length, or -1 with "messages: why" in err. */
static int render_chat(struct nib_server *s, const struct nib_req_decoded *d, char *err,
                       size_t errlen)
{
    struct nib_chat_message *m = s->messages;
    for (uint32_t i = 0; i < d->chat.n_messages; i++)
        m[i] = (struct nib_chat_message){s->parts[i].role, s->parts[i].content,
                                         s->parts[i].role_len, s->parts[i].content_len};
    struct nib_chat_args a = {.messages = m,
                              .n_messages = d->chat.n_messages,
                              .add_generation_prompt =
                                  !!(d->chat.flags & NIB_CHAT_ADD_GENERATION_PROMPT),
                              .now_s = d->chat.now_s};
    /* The tokenizer's own BOS and EOS (none: the template sees them
     * undefined, as Qwen's does). */
    if (s->v->tok->bos_id != NIB_TOK_NONE)
        a.bos_token = nib_tok_piece(s->v, s->v->tok->bos_id, &a.bos_len);
    if (s->v->tok->eos_id != NIB_TOK_NONE)
        a.eos_token = nib_tok_piece(s->v, s->v->tok->eos_id, &a.eos_len);
    if (!a.now_s) {
        /* Once per request: the vDSO's clock (no system call; seccomp
         * allows clock_gettime on this thread in any case). */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        a.now_s = ts.tv_sec;
    }
    size_t len = 0;
    char why[NIB_ERRMSG_MAX - 16];
    if (nib_chat_render(s->chat_prog, s->chat_prog_len, &a, s->chat_work, s->chat_work_size,
                        s->render, s->taint, s->render_cap, &len, why, sizeof why)) {
        snprintf(err, errlen, "messages: %s", why);
        return -1;
    }
    return (int)len;
}

/* The prompt's ids into s->ids: as given (PROMPT_IDS), a text prompt
 * tokenized, or a conversation rendered then tokenized. BOS for a
 * conversation only when the model adds one and the rendered text did not
 * already begin with it (templates that write bos_token get no second).
 * Returns the count (> 0), or 0 with "field: why" in err. */
static int prompt_ids(struct nib_server *s, const struct nib_req_decoded *d, char *err,
                      size_t errlen)
{
    const struct nib_hparams *hp = &s->v->h->hp;
    if (d->flags & NIB_REQ_PROMPT_IDS)
        return (int)d->n_ids;
    int want_bos = hp->add_bos && !(d->flags & NIB_REQ_NO_BOS);
    struct nib_tok_request rq = {.add_bos = want_bos, .special = !!(d->flags & NIB_REQ_SPECIAL)};
    const char *text = (const char *)s->prompt;
    size_t len = d->prompt_len;
    const char *field = "prompt";
    if (d->kind == NIB_REQ_KIND_CHAT) {
        int rl = render_chat(s, d, err, errlen);
        if (rl < 0)
            return 0;
        text = (const char *)s->render;
        len = (size_t)rl;
        rq.add_bos = 0;
        rq.taint = s->taint;
        field = "messages";
    }
    /* One id is kept free in front for a conversation's BOS. */
    int n = nib_tok_encode_req(s->v, text, len, &rq, s->ids + 1, s->ids_cap - 1, s->tok_work);
    if (n == -2) {
        snprintf(err, errlen, "%s: the text exceeds the tokenizer's work bound", field);
        return 0;
    }
    if (n < 0) {
        snprintf(err, errlen, "%s: more tokens than the id scratch holds", field);
        return 0;
    }
    if (d->kind == NIB_REQ_KIND_CHAT && want_bos && (n == 0 || s->ids[1] != hp->bos_id)) {
        s->ids[0] = hp->bos_id;
        n++;
    } else {
        memmove(s->ids, s->ids + 1, (size_t)n * sizeof *s->ids);
    }
    if (n == 0) {
        snprintf(err, errlen, "%s: empty prompt and no BOS to start from",
                 d->kind == NIB_REQ_KIND_CHAT ? "messages" : "prompt_len");
        return 0;
    }
    if ((uint32_t)n > hp->ctx_len || (uint32_t)n > s->hdr->slot_tokens) {
        snprintf(err, errlen, "%s: %d prompt tokens, more than the context holds (%u)",
                 d->kind == NIB_REQ_KIND_CHAT ? "messages" : "prompt_len", n,
                 hp->ctx_len < s->hdr->slot_tokens ? hp->ctx_len : s->hdr->slot_tokens);
        return 0;
    }
    return n;
}

struct check {
    uint32_t since; /* tokens since the control channel last ran */
    uint64_t next;  /* ... or the time it runs again */
};

/* Between passes. Every time: the stop flags, the slot still ours, the
 * cancel flag (loads only). Every NIB_CONTROL_CHECK_TOKENS tokens or
 * NIB_CONTROL_CHECK_NS: heartbeat, socket path, the control channel (one
 * poll(): never a system call per token), and whether the host hung up.
 * Returns a final status, or 0 to go on. */
static uint32_t checkpoint(struct nib_server *s, struct nib_run *r, struct check *c,
                           uint32_t tokens, uint64_t now)
{
    if (s->pass_hook)
        s->pass_hook(s, s->pass_hook_arg);
    if (nib_server_stopping(s))
        return NIB_ST_SHUTDOWN;
    if (!nib_serve_own(s, r))
        return NIB_ST_HOST_CHANGED;
    /* acquire: pairs with the release of cancel in nibhost.c nib_host_cancel() */
    if (nib_load_acq(&slot_at(s, r->ring, r->slot)->cancel))
        return NIB_ST_CANCELLED;
    c->since += tokens;
    if (c->since < NIB_CONTROL_CHECK_TOKENS && now < c->next)
        return 0;
    c->since = 0;
    c->next = now + NIB_CONTROL_CHECK_NS;
    nib_server_housekeeping(s, now);
    nib_control_pass(s, 0);
    if (r->gone)
        return NIB_ST_OWNER_GONE;
    if (nib_server_stopping(s))
        return NIB_ST_SHUTDOWN;
    return 0;
}

/* kind MEASURE: d->max_tokens reference-loop passes (rt/refloop.h) at
 * positions measure_pos.., each one's nanoseconds (saturated to u32) in
 * the token area as it is done. A request of its own, so it never runs
 * during another one; the same checkpoints as generation between passes. */
static void serve_measure(struct nib_server *s, struct nib_run *r, struct nib_slot *slot,
                          const struct nib_req_decoded *d)
{
    uint32_t *times = nib_slot_tokens(slot, s->hdr), status = 0;
    struct check c = {0, r->t_start + NIB_CONTROL_CHECK_NS};
    for (uint32_t i = 0; i < d->max_tokens && !status; i++) {
        uint64_t t0 = nib_now_ns();
        nib_ref_iteration(&s->ref, d->measure_pos + i); /* in the context: decode_measure */
        uint64_t t = nib_now_ns(), ns = t - t0;
        if (!nib_serve_own(s, r)) {
            status = NIB_ST_HOST_CHANGED;
            break;
        }
        if (i == 0)
            slot->t_first_ns = t;
        times[i] = ns < UINT32_MAX ? (uint32_t)ns : UINT32_MAX;
        /* release: pairs with the acquire of n_tokens in nibhost.c nib_host_poll() */
        nib_store_rel(&slot->n_tokens, i + 1);
        s->stats->ref_iterations++;
        status = checkpoint(s, r, &c, 1, t);
    }
    nib_serve_finish(s, r, status ? status : NIB_ST_OK, NULL);
}

static void serve(struct nib_server *s, uint32_t ring, uint32_t slot_i)
{
    const struct nib_shm_header *h = s->hdr;
    struct nib_slot *slot = slot_at(s, ring, slot_i);
    /* acquire (the CAS): pairs with the release of SUBMITTED in nibhost.c
     * nib_host_submit(), so the request, prompt and ticket are the host's */
    uint32_t st = NIB_SLOT_SUBMITTED;
    if (!nib_cas(&slot->state, &st, NIB_SLOT_RUNNING))
        return; /* changed under us: not a request to serve */
    /* The private record, and private copies of the request and prompt,
     * first: from here on the ring is only written, never trusted. */
    struct nib_run r = {.ring = ring,
                        .slot = slot_i,
                        .ticket = nib_load_relaxed(&slot->ticket),
                        .t_start = nib_now_ns()};
    s->run = &r;
    struct nib_request req;
    memcpy(&req, &slot->req, sizeof req);
    /* A vision model's inputs are copied later, straight to the arena. */
    uint32_t plen = req.prompt_len <= h->prompt_max && !s->lim.tensor_in ? req.prompt_len : 0;
    memcpy(s->prompt, nib_slot_prompt(slot, h), plen);
    s->stats->requests_accepted++;
    if (!nib_serve_own(s, &r)) {
        nib_serve_finish(s, &r, NIB_ST_HOST_CHANGED, NULL);
        return;
    }
    slot->t_start_ns = r.t_start;
    slot->t_first_ns = slot->t_done_ns = 0;
    slot->served_ticket = r.ticket;
    slot->n_prompt = 0;
    /* releases: pair with the acquires of n_tokens and text_len in nibhost.c
     * nib_host_poll() */
    nib_store_rel(&slot->n_tokens, 0u);
    nib_store_rel(&slot->text_len, 0u);
    slot->status = NIB_ST_PENDING;
    slot->error[0] = 0;

    const struct nib_hparams *hp = &s->v->h->hp;
    struct nib_req_decoded d;
    char why[NIB_ERRMSG_MAX];
    if (nib_req_decode(&req, s->prompt, plen, &s->lim, &d, s->ids, s->ids_cap, s->parts, why,
                       sizeof why)) {
        nib_serve_finish(s, &r, NIB_ST_BAD_REQUEST, why);
        return;
    }
    if (d.kind == NIB_REQ_KIND_MEASURE) {
        serve_measure(s, &r, slot, &d);
        return;
    }
    if (d.kind == NIB_REQ_KIND_TENSOR) {
        nib_serve_tensor(s, &r, slot);
        return;
    }
    int n = prompt_ids(s, &d, why, sizeof why);
    if (n <= 0) {
        nib_serve_finish(s, &r, NIB_ST_BAD_REQUEST, why);
        return;
    }
    if (!nib_serve_own(s, &r)) {
        nib_serve_finish(s, &r, NIB_ST_HOST_CHANGED, NULL);
        return;
    }
    uint32_t *tokens = nib_slot_tokens(slot, h);
    memcpy(tokens, s->ids, (size_t)n * 4);
    slot->n_prompt = (uint32_t)n;
    uint32_t n_tok = (uint32_t)n;
    /* release: pairs with the acquire of n_tokens in nibhost.c nib_host_poll(),
     * which then reads tokens[0, n_tokens) and n_prompt */
    nib_store_rel(&slot->n_tokens, n_tok);
    s->stats->tokens_prompt += (uint64_t)n;

    struct check c = {0, r.t_start + NIB_CONTROL_CHECK_NS};
    uint64_t rng = nib_rng_seed(d.seed);
    uint32_t pos = 0, status = 0, prev, produced = 0;
    const float *logits = NULL;
    /* Prefill in passes of up to max_batch tokens; the last token's logits
     * give the first generated token. */
    while (pos < (uint32_t)n && !status) {
        uint32_t m =
            (uint32_t)n - pos < s->v->h->max_batch ? (uint32_t)n - pos : s->v->h->max_batch;
        logits = nib_exec_tokens(&s->exec, s->ids + pos, m, pos);
        pos += m;
        status = checkpoint(s, &r, &c, m, nib_now_ns());
    }
    prev = s->ids[n - 1];
    while (!status) {
        uint32_t next = d.temperature > 0.0f
                            ? nib_sample((float *)logits, hp->vocab_size, d.temperature, &rng)
                            : nib_exec_argmax(&s->exec);
        uint64_t t = nib_now_ns();
        if (!nib_serve_own(s, &r)) {
            status = NIB_ST_HOST_CHANGED;
            break;
        }
        if (produced == 0)
            slot->t_first_ns = t;
        if (nib_tok_is_eog(s->v, next)) {
            status = NIB_ST_EOS;
            break;
        }
        if (n_tok >= h->slot_tokens) {
            status = NIB_ST_CTX_FULL;
            break;
        }
        if (!emit_text(s, slot, &r, prev, next)) {
            status = NIB_ST_TEXT_FULL;
            break;
        }
        tokens[n_tok++] = next;
        /* release: pairs with the acquire of n_tokens in nibhost.c nib_host_poll() */
        nib_store_rel(&slot->n_tokens, n_tok);
        s->stats->tokens_generated++;
        produced++;
        prev = next;
        if (produced == d.max_tokens) {
            status = NIB_ST_OK;
            break;
        }
        if ((status = checkpoint(s, &r, &c, 1, t)))
            break;
        if (pos >= hp->ctx_len) {
            status = NIB_ST_CTX_FULL;
            break;
        }
        logits = nib_exec_token(&s->exec, next, pos++);
    }
    nib_serve_finish(s, &r, status, NULL);
}

int nib_server_poll(struct nib_server *s)
{
    uint64_t now = nib_now_ns();
    nib_server_housekeeping(s, now);
    nib_control_pass(s, 0);
    s->last_control_ns = now;
    if (nib_server_stopping(s))
        return 0;
    uint32_t ring, slot;
    if (!next_request(s, &ring, &slot))
        return 0;
    s->rr_last = ring;
    serve(s, ring, slot);
    return 1;
}

void nib_server_idle(struct nib_server *s, uint64_t spin_ns)
{
    uint64_t t0 = nib_now_ns();
    uint64_t next_ctl = t0 + (s->conns_waiting ? NIB_CONTROL_FAST_NS : NIB_CONTROL_CHECK_NS);
    for (;;) {
        if (any_submitted(s) || nib_server_stopping(s))
            return;
        uint64_t now = nib_now_ns();
        if (now - t0 >= spin_ns)
            break;
        if (now >= next_ctl) {
            nib_server_housekeeping(s, now);
            if (nib_control_pass(s, 0))
                return;
            /* A host waiting for its ATTACH answer is answered within
             * NIB_CONTROL_FAST_NS (idle time: no token pays for it). */
            next_ctl = now + (s->conns_waiting ? NIB_CONTROL_FAST_NS : NIB_CONTROL_CHECK_NS);
        }
        for (int i = 0; i < 64; i++)
            nib_cpu_relax();
    }
    /* Sleep. A host publishes SUBMITTED, fences, then reads sleeping; we
     * store sleeping, fence, then look at the rings: one of the two sees
     * the other (the host then sends KICK, which ends the poll). */
    /* seq_cst store, then a full fence before the rings are read again:
     * pairs with nibhost.c nib_host_submit()'s release of SUBMITTED, seq_cst
     * fence, then load of sleeping */
    nib_store_seqcst(&s->hdr->sleeping, 1u);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (!any_submitted(s) && !nib_server_stopping(s)) {
        nib_server_housekeeping(s, nib_now_ns());
        nib_control_pass(s, NIB_IDLE_SLEEP_MS);
    }
    /* a hint once we are awake (a late KICK is harmless) */
    nib_store_seqcst(&s->hdr->sleeping, 0u);
    nib_server_housekeeping(s, nib_now_ns());
}

void nib_server_shutdown(struct nib_server *s)
{
    struct nib_shm_header *h = s->hdr;
    /* release: pairs with the acquire of state in nibhost.c alive() */
    nib_store_rel(&h->state, NIB_APP_STOPPING);
    /* A final status for every queued request, so no host waits for one. */
    for (uint32_t i = 0; i < s->n_rings; i++) {
        if (s->rings[i].conn < 0 || !s->rings[i].base)
            continue;
        int posted = 0;
        for (uint32_t k = 0; k < h->n_slots; k++) {
            struct nib_slot *slot = slot_at(s, i, k);
            /* acquire (the CAS): as in serve() */
            uint32_t st = NIB_SLOT_SUBMITTED;
            if (!nib_cas(&slot->state, &st, NIB_SLOT_RUNNING))
                continue;
            slot->status = NIB_ST_SHUTDOWN;
            slot->t_done_ns = nib_now_ns();
            st = NIB_SLOT_RUNNING;
            /* release: pairs with the acquire of state in nibhost.c nib_host_poll() */
            posted |= nib_cas(&slot->state, &st, NIB_SLOT_DONE);
        }
        if (posted)
            announce_done(s, i);
    }
    /* release: pairs with the acquire of state in nibhost.c alive() */
    nib_store_rel(&h->state, NIB_APP_STOPPED);
}
