/* Fuzz target: the request check (nib_req_decode) that every request copied
 * out of shared memory goes through, then, for requests it accepts, the
 * tokenizer on the prompt bytes (with the blob named by $NIB_TEST_BLOB, when
 * set). Input: 64 request bytes, then prompt bytes. Any violated invariant
 * aborts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/serve.h"
#include "rt/tokenizer.h"
#include "tests/fuzz/fuzz.h"

static struct nib_blob_view view;
static int have_view;
static uint32_t ids[NIB_PROMPT_MAX + 2];

static void load_blob(void)
{
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
    if (nib_req_decode(&r, prompt, avail, lim, &d, ids, sizeof ids / sizeof ids[0], err,
                       sizeof err) != 0) {
        FUZZ_ASSERT(strchr(err, ':') != NULL);
        return;
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
    int n = nib_tok_encode(&view, (const char *)prompt, d.prompt_len, !(d.flags & NIB_REQ_NO_BOS),
                           ids, d.prompt_len + 2);
    FUZZ_ASSERT(n >= 0 && (size_t)n <= d.prompt_len + 2);
    char piece[NIB_MAX_PIECE];
    for (int i = 0; i < n; i++) {
        FUZZ_ASSERT(ids[i] < view.h->hp.vocab_size);
        FUZZ_ASSERT(nib_tok_decode(&view, i ? ids[i - 1] : 0, ids[i], piece, sizeof piece) <=
                    sizeof piece);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        load_blob();
        init = 1;
    }
    const struct nib_req_limits big = {NIB_PROMPT_MAX, NIB_SLOT_TOKENS,
                                       have_view ? view.h->hp.ctx_len : 256,
                                       have_view ? view.h->hp.vocab_size : 512};
    const struct nib_req_limits tiny = {16, 8, 4, 3};
    check(data, size, &big);
    check(data, size, &tiny);
    return 0;
}
