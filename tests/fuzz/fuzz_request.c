/* Fuzz target: what the appliance reads from a host's ring (protocol
 * version 4). Input: 64 request bytes, then prompt bytes.
 *
 *   1. the request check (nib_req_decode), with large and tiny limits,
 *      chat messages included (every decoded message inside the area),
 *      measurements too (their positions inside the context);
 *   2. for accepted text prompts, the tokenizer on the prompt bytes (the
 *      request's SPECIAL flag as given);
 *   3. with a blob ($NIB_TEST_BLOB, and $NIB_TEST_CHAT_BLOB: a model with a
 *      chat template, so chat requests are rendered and tokenized with
 *      taint): the serve loop over a ring whose slots
 *      hold the input (slot 0 as given, the others with the input's bytes
 *      as their state, ticket, cancel and request words), so pick-up,
 *      round-robin, the transitions and the response writes run on
 *      hostile rings. max_tokens is folded to 1..8 there (the model's
 *      speed is not under test).
 *   4. the same with an identity vision model (tests/common/vision_blob.h):
 *      kind TENSOR, checked against the model's exact input bytes; an
 *      accepted one runs and its answer is exactly the outputs' bytes.
 *
 * Any violated invariant aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/serve.h"
#include "rt/tokenizer.h"
#include "tests/common/vision_blob.h"
#include "tests/fuzz/fuzz.h"

#define IDS_CAP (NIB_PROMPT_LIMIT + 2)

/* A model served in-process: its blob, server, header and one ring. */
struct target {
    struct nib_blob_view view;
    struct nib_server srv;
    struct nib_shm_header *hdr;
    uint8_t *ring;
    void *tok_work;
};

static struct target targets[3];
static int n_targets;
static uint32_t *ids;
static struct nib_chat_part *parts;

static void load_blob(const char *env)
{
    const char *path = getenv(env);
    if (!path || !*path)
        return;
    struct target *t = &targets[n_targets];
    size_t size;
    uint8_t *b = fuzz_read_file(path, &size);
    char err[256];
    if (!b || nib_blob_open(&t->view, b, size, 0, err, sizeof err)) {
        fprintf(stderr, "fuzz_request: %s %s unusable; not served\n", env, path);
        return;
    }
    n_targets++;
    t->tok_work = aligned_alloc(
        64, (nib_tok_req_scratch_footprint(&t->view, NIB_PROMPT_LIMIT) + 64) & ~(size_t)63);
    uint8_t *mem = aligned_alloc(64, (t->view.mem_size + 63) & ~63ull);
    uint8_t *scratch = aligned_alloc(64, nib_server_scratch_footprint(&t->view));
    t->hdr = aligned_alloc(4096, NIB_SHM_HEADER_MEMFD_SIZE);
    memset(mem, 0, t->view.mem_size);
    memset(t->hdr, 0, NIB_SHM_HEADER_MEMFD_SIZE);
    nib_server_init(&t->srv, &t->view, mem, scratch, t->hdr, 1, 1, 1);
    t->ring = aligned_alloc(4096, t->hdr->ring_size);
    nib_server_set_ring(&t->srv, 0, t->ring, -1);
    t->srv.rings[0].conn = 0; /* attached (no socket: the control channel is fuzz_ctl's) */
}

/* The identity vision model, made here, served as the blobs above. */
static void load_vision(void)
{
    struct target *t = &targets[n_targets];
    uint8_t *b = aligned_alloc(64, NIB_TEST_VISION_BLOB_SIZE);
    char err[256];
    size_t size = nib_test_vision_blob(b, NIB_TEST_VISION_TWO);
    FUZZ_ASSERT(nib_blob_open(&t->view, b, size, 1, err, sizeof err) == 0);
    n_targets++;
    uint8_t *mem = aligned_alloc(64, (t->view.mem_size + 63) & ~63ull);
    uint8_t *scratch = aligned_alloc(64, nib_server_scratch_footprint(&t->view));
    t->hdr = aligned_alloc(4096, nib_server_header_size(&t->view));
    memset(mem, 0, t->view.mem_size);
    memset(t->hdr, 0, nib_server_header_size(&t->view));
    nib_server_init(&t->srv, &t->view, mem, scratch, t->hdr, 1, 1, 1);
    t->ring = aligned_alloc(4096, t->hdr->ring_size);
    nib_server_set_ring(&t->srv, 0, t->ring, -1);
    t->srv.rings[0].conn = 0;
}

static void check(const uint8_t *data, size_t size, const struct nib_req_limits *lim,
                  struct target *t)
{
    struct nib_request r;
    memset(&r, 0, sizeof r);
    memcpy(&r, data, size < sizeof r ? size : sizeof r);
    const uint8_t *prompt = size > sizeof r ? data + sizeof r : data;
    size_t avail = size > sizeof r ? size - sizeof r : 0;
    if (avail > lim->prompt_max)
        avail = lim->prompt_max;
    struct nib_req_decoded d;
    char err[NIB_ERRMSG_MAX];
    if (nib_req_decode(&r, prompt, avail, lim, &d, ids, IDS_CAP, parts, err, sizeof err) != 0) {
        FUZZ_ASSERT(strchr(err, ':') != NULL);
        return;
    }
    FUZZ_ASSERT(r.kind == d.kind);
    /* a vision model takes only tensors, exactly its inputs' bytes; a
     * decoder never does */
    FUZZ_ASSERT((d.kind == NIB_REQ_KIND_TENSOR) == (lim->tensor_in != 0));
    if (d.kind == NIB_REQ_KIND_TENSOR) {
        FUZZ_ASSERT(d.prompt_len == lim->tensor_in && r.max_tokens == 0 && r.flags == 0 &&
                    r.temperature == 0.0f);
        return;
    }
    FUZZ_ASSERT(d.kind == NIB_REQ_KIND_TEXT || d.kind == NIB_REQ_KIND_MEASURE ||
                (d.kind == NIB_REQ_KIND_CHAT && lim->chat_messages));
    if (d.kind == NIB_REQ_KIND_MEASURE) { /* positions inside the context, nothing else set */
        FUZZ_ASSERT(d.prompt_len == 4 && avail >= 4 && d.flags == 0 && d.temperature == 0.0f);
        FUZZ_ASSERT(d.max_tokens >= 1 && d.max_tokens <= lim->slot_tokens);
        FUZZ_ASSERT(d.measure_pos < lim->ctx_len && d.max_tokens <= lim->ctx_len - d.measure_pos);
        return; /* the passes: the serve loop below, with a blob */
    }
    if (d.kind == NIB_REQ_KIND_CHAT) {
        FUZZ_ASSERT(d.prompt_len <= avail && !(d.flags & NIB_REQ_PROMPT_IDS));
        FUZZ_ASSERT(d.chat.n_messages <= lim->chat_messages);
        for (uint32_t i = 0; i < d.chat.n_messages; i++) {
            FUZZ_ASSERT(parts[i].role >= prompt && parts[i].role_len >= 1 &&
                        parts[i].role + parts[i].role_len <= prompt + d.prompt_len);
            FUZZ_ASSERT(parts[i].content >= prompt &&
                        parts[i].content + parts[i].content_len <= prompt + d.prompt_len);
        }
        return; /* rendering: the serve loop below, with a template blob */
    }
    FUZZ_ASSERT(d.prompt_len <= lim->prompt_max);
    FUZZ_ASSERT(d.max_tokens >= 1 && d.max_tokens <= lim->slot_tokens);
    FUZZ_ASSERT(d.temperature >= 0.0f && d.temperature <= NIB_TEMPERATURE_MAX);
    FUZZ_ASSERT(!(d.flags & ~NIB_REQ_FLAGS_KNOWN));
    FUZZ_ASSERT(d.n_ids <= lim->ctx_len && d.n_ids <= lim->slot_tokens);
    for (uint32_t i = 0; i < d.n_ids; i++)
        FUZZ_ASSERT(ids[i] < lim->vocab_size);
    if (!t || (d.flags & NIB_REQ_PROMPT_IDS) || d.prompt_len > avail)
        return;
    /* The serve loop's next step: tokenize the (hostile) prompt bytes. */
    struct nib_tok_request rq = {.add_bos = !(d.flags & NIB_REQ_NO_BOS),
                                 .special = !!(d.flags & NIB_REQ_SPECIAL)};
    size_t cap = nib_tok_max_ids(&t->view, d.prompt_len);
    FUZZ_ASSERT(cap <= IDS_CAP);
    int n = nib_tok_encode_req(&t->view, (const char *)prompt, d.prompt_len, &rq, ids, cap,
                               t->tok_work);
    FUZZ_ASSERT(n == -2 || (n >= 0 && (size_t)n <= cap));
    char piece[NIB_MAX_PIECE];
    for (int i = 0; i < n; i++) {
        FUZZ_ASSERT(ids[i] < t->view.h->hp.vocab_size);
        FUZZ_ASSERT(nib_tok_decode(&t->view, i ? ids[i - 1] : 0, ids[i], piece, sizeof piece) <=
                    sizeof piece);
    }
}

static uint32_t word(const uint8_t *data, size_t size, size_t at)
{
    uint32_t w = 0;
    for (size_t i = 0; i < 4; i++)
        w |= (uint32_t)(at + i < size ? data[at + i] : 0) << (8 * i);
    return w;
}

/* The ring filled from the input, then served until nothing is left. */
static void serve_ring(const uint8_t *data, size_t size, struct target *t)
{
    struct nib_shm_header *hdr = t->hdr;
    uint8_t *ring = t->ring;
    struct nib_server *srv = &t->srv;
    memset(ring, 0, hdr->ring_size);
    size_t plen = size > 64 ? size - 64 : 0;
    if (plen > hdr->prompt_max)
        plen = hdr->prompt_max;
    for (uint32_t k = 0; k < hdr->n_slots; k++) {
        struct nib_slot *s = nib_ring_slot(ring, hdr, k);
        memcpy(&s->req, data, size < 64 ? size : 64);
        memcpy(nib_slot_prompt(s, hdr), data + 64, plen);
        if (s->req.max_tokens >= 1 && s->req.max_tokens <= hdr->slot_tokens)
            s->req.max_tokens = 1 + s->req.max_tokens % 8;
        s->state = k == 0 ? NIB_SLOT_SUBMITTED : word(data, size, 4 * k) % 6;
        s->ticket = word(data, size, 16 + 4 * k);
        s->cancel = k == 0 ? 0 : word(data, size, 32 + 4 * k) & 1;
    }
    uint64_t done0 = srv->stats->requests_done;
    int served = 0;
    while (nib_server_poll(srv))
        FUZZ_ASSERT(++served <= (int)hdr->n_slots);
    FUZZ_ASSERT(served >= 1); /* slot 0 at least */
    FUZZ_ASSERT(srv->stats->requests_done - done0 == (uint64_t)served);
    for (uint32_t k = 0; k < hdr->n_slots; k++) {
        struct nib_slot *s = nib_ring_slot(ring, hdr, k);
        FUZZ_ASSERT(s->state != NIB_SLOT_SUBMITTED);
        if (s->state != NIB_SLOT_DONE || s->status == NIB_ST_PENDING)
            continue; /* not served: as the input left it */
        FUZZ_ASSERT(s->served_ticket == s->ticket);
        FUZZ_ASSERT(s->status >= NIB_ST_OK && s->status < NIB_ST_COUNT);
        FUZZ_ASSERT(s->n_tokens <= hdr->slot_tokens && s->n_prompt <= s->n_tokens);
        FUZZ_ASSERT(s->text_len <= hdr->slot_text);
        if (s->req.kind == NIB_REQ_KIND_TENSOR && s->status == NIB_ST_OK) {
            /* the identity model's outputs are its inputs, as the slot held them */
            FUZZ_ASSERT(s->text_len == hdr->outputs_len);
            const struct nib_shm_tensor *tt = nib_shm_tensors(hdr);
            const uint8_t *in = nib_slot_prompt(s, hdr),
                          *out = (const uint8_t *)nib_slot_text(s, hdr);
            FUZZ_ASSERT(!memcmp(out + tt[2].area_off, in + tt[1].area_off, tt[1].bytes));
            FUZZ_ASSERT(!memcmp(out + tt[3].area_off, in + tt[0].area_off, tt[0].bytes));
        }
        FUZZ_ASSERT(s->t_done_ns >= s->t_start_ns);
        FUZZ_ASSERT(memchr(s->error, 0, sizeof s->error) != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        ids = malloc(IDS_CAP * sizeof *ids);
        parts = malloc(NIB_CHAT_MESSAGES_MAX * sizeof *parts);
        load_blob("NIB_TEST_BLOB");
        load_blob("NIB_TEST_CHAT_BLOB");
        load_vision();
        init = 1;
    }
    const struct nib_req_limits big = {
        NIB_PROMPT_LIMIT, 1u << 17, 1u << 17, 512, nib_chat_max_messages(NIB_PROMPT_LIMIT), 0};
    const struct nib_req_limits tiny = {16, 8, 4, 3, 1, 0};
    const struct nib_req_limits vision = {1024, 0, 0, 0, 0, 778};
    check(data, size, &vision, NULL);
    check(data, size, &big, NULL);
    check(data, size, &tiny, NULL);
    for (int i = 0; i < n_targets; i++) {
        check(data, size, &targets[i].srv.lim, &targets[i]);
        serve_ring(data, size, &targets[i]);
    }
    return 0;
}
