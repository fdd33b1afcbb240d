/* Fuzz target: what the appliance reads from a host's ring (protocol
 * version 4). Input: 64 request bytes, then prompt bytes.
 *
 *   1. the request check (nib_req_decode), with large and tiny limits,
 *      chat messages included (every decoded message inside the area);
 *   2. for accepted text prompts, the tokenizer on the prompt bytes (the
 *      request's SPECIAL flag as given);
 *   3. with a blob ($NIB_TEST_BLOB): the serve loop over a ring whose slots
 *      hold the input (slot 0 as given, the others with the input's bytes
 *      as their state, ticket, cancel and request words), so pick-up,
 *      round-robin, the transitions and the response writes run on
 *      hostile rings. max_tokens is folded to 1..8 there (the model's
 *      speed is not under test).
 *
 * Any violated invariant aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/serve.h"
#include "rt/tokenizer.h"
#include "tests/fuzz/fuzz.h"

#define IDS_CAP (NIB_PROMPT_LIMIT + 2)

static struct nib_blob_view view;
static int have_view;
static uint32_t *ids;
static struct nib_chat_part *parts;
static void *tok_work;
static struct nib_server srv;
static struct nib_shm_header *hdr;
static uint8_t *ring;

static void load_blob(void)
{
    ids = malloc(IDS_CAP * sizeof *ids);
    parts = malloc(NIB_CHAT_MESSAGES_MAX * sizeof *parts);
    const char *path = getenv("NIB_TEST_BLOB");
    if (!path || !*path)
        return;
    size_t size;
    uint8_t *b = fuzz_read_file(path, &size);
    char err[256];
    if (!b || nib_blob_open(&view, b, size, 0, err, sizeof err)) {
        fprintf(stderr, "fuzz_request: NIB_TEST_BLOB %s unusable; tokenizer not fuzzed\n", path);
        return;
    }
    have_view = 1;
    tok_work = aligned_alloc(64, (nib_tok_req_scratch_footprint(&view, NIB_PROMPT_LIMIT) + 64) &
                                     ~(size_t)63);
    uint8_t *mem = aligned_alloc(64, (view.mem_size + 63) & ~63ull);
    uint8_t *scratch = aligned_alloc(64, nib_server_scratch_footprint(&view));
    hdr = aligned_alloc(4096, NIB_SHM_HEADER_MEMFD_SIZE);
    memset(mem, 0, view.mem_size);
    memset(hdr, 0, NIB_SHM_HEADER_MEMFD_SIZE);
    nib_server_init(&srv, &view, mem, scratch, hdr, 1, 1, 1);
    ring = aligned_alloc(4096, hdr->ring_size);
    nib_server_set_ring(&srv, 0, ring, -1);
    srv.rings[0].conn = 0; /* attached (no socket: the control channel is fuzz_ctl's) */
}

static void check(const uint8_t *data, size_t size, const struct nib_req_limits *lim)
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
    FUZZ_ASSERT(d.kind == NIB_REQ_KIND_TEXT || (d.kind == NIB_REQ_KIND_CHAT && lim->chat_messages));
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
    if (!have_view || (d.flags & NIB_REQ_PROMPT_IDS) || d.prompt_len > avail)
        return;
    /* The serve loop's next step: tokenize the (hostile) prompt bytes. */
    struct nib_tok_request rq = {.add_bos = !(d.flags & NIB_REQ_NO_BOS),
                                 .special = !!(d.flags & NIB_REQ_SPECIAL)};
    size_t cap = nib_tok_max_ids(&view, d.prompt_len);
    FUZZ_ASSERT(cap <= IDS_CAP);
    int n = nib_tok_encode_req(&view, (const char *)prompt, d.prompt_len, &rq, ids, cap, tok_work);
    FUZZ_ASSERT(n == -2 || (n >= 0 && (size_t)n <= cap));
    char piece[NIB_MAX_PIECE];
    for (int i = 0; i < n; i++) {
        FUZZ_ASSERT(ids[i] < view.h->hp.vocab_size);
        FUZZ_ASSERT(nib_tok_decode(&view, i ? ids[i - 1] : 0, ids[i], piece, sizeof piece) <=
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
static void serve_ring(const uint8_t *data, size_t size)
{
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
    uint64_t done0 = srv.stats->requests_done;
    int served = 0;
    while (nib_server_poll(&srv))
        FUZZ_ASSERT(++served <= (int)hdr->n_slots);
    FUZZ_ASSERT(served >= 1); /* slot 0 at least */
    FUZZ_ASSERT(srv.stats->requests_done - done0 == (uint64_t)served);
    for (uint32_t k = 0; k < hdr->n_slots; k++) {
        struct nib_slot *s = nib_ring_slot(ring, hdr, k);
        FUZZ_ASSERT(s->state != NIB_SLOT_SUBMITTED);
        if (s->state != NIB_SLOT_DONE || s->status == NIB_ST_PENDING)
            continue; /* not served: as the input left it */
        FUZZ_ASSERT(s->served_ticket == s->ticket);
        FUZZ_ASSERT(s->status >= NIB_ST_OK && s->status < NIB_ST_COUNT);
        FUZZ_ASSERT(s->n_tokens <= hdr->slot_tokens && s->n_prompt <= s->n_tokens);
        FUZZ_ASSERT(s->text_len <= hdr->slot_text);
        FUZZ_ASSERT(s->t_done_ns >= s->t_start_ns);
        FUZZ_ASSERT(memchr(s->error, 0, sizeof s->error) != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        load_blob();
        init = 1;
    }
    struct nib_req_limits big = {NIB_PROMPT_LIMIT, 1u << 17, 1u << 17, 512,
                                 nib_chat_max_messages(NIB_PROMPT_LIMIT)};
    if (have_view)
        big = srv.lim;
    const struct nib_req_limits tiny = {16, 8, 4, 3, 1};
    check(data, size, &big);
    check(data, size, &tiny);
    if (have_view)
        serve_ring(data, size);
    return 0;
}
