/* Fuzz target: the blob validator (nib_blob_open), then what it promises:
 * code holding a nib_blob_view may index the tables it describes, so every
 * tensor's bytes are touched, the tokenizer is run, and one token and one
 * pass of several tokens go through the whole plan when the runtime memory
 * is small (a vision blob: one run of its plan).
 *
 * An input shorter than the blob_size its header claims is the blob's head,
 * zero-extended (blob_expand.h). */
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "rt/tokenizer.h"
#include "tests/fuzz/blob_expand.h"
#include "tests/fuzz/fuzz.h"

#define EXEC_MEM_MAX (16u << 20)

static void exercise(const struct nib_blob_view *v)
{
    const struct nib_blob_header *h = v->h;
    volatile uint8_t sink = 0;
    for (uint32_t t = 0; t < h->n_tensors; t++) {
        const uint8_t *p = v->weights + v->tensors[t].offset;
        if (v->tensors[t].size)
            sink ^= p[0] ^ p[v->tensors[t].size - 1];
    }
    (void)sink;
    if (h->model_kind == NIB_MODEL_VISION) { /* no tokenizer: its io table and one run */
        for (uint32_t i = 0; i < v->n_io; i++)
            FUZZ_ASSERT(v->io[i].off + v->io[i].bytes <= v->mem_size);
        if (v->mem_size > EXEC_MEM_MAX)
            return;
        uint8_t *mem = aligned_alloc(64, (size_t)(v->mem_size + 64 + 63) & ~(size_t)63);
        FUZZ_ASSERT(mem != NULL);
        memset(mem, 0, (size_t)v->mem_size);
        struct nib_exec e = {.v = v, .mem = mem};
        FUZZ_ASSERT(nib_exec_run(&e) == 0);
        free(mem);
        return;
    }
    static const char text[] = "Once upon a time, \xe2\x96\x81 \xff caf\xc3\xa9! <|im_start|>12345 "
                               "<s>\xed\xa0\x80 \xf0\x9f\x98\x81  \n\n";
    uint32_t ids[sizeof text + 2];
    int n = nib_tok_encode(v, text, sizeof text - 1, 1, ids, sizeof ids / sizeof ids[0]);
    FUZZ_ASSERT(v->tok->model == NIB_TOKM_SPM ? n >= 0 : n == -1);
    FUZZ_ASSERT(n <= (int)(sizeof ids / sizeof ids[0]));
    char piece[4 * NIB_MAX_PIECE];
    for (int i = 0; i < n; i++) {
        FUZZ_ASSERT(ids[i] < h->hp.vocab_size);
        nib_tok_decode(v, i ? ids[i - 1] : 0, ids[i], piece, sizeof piece);
    }
    for (uint32_t id = 0; id < h->hp.vocab_size && id < 64; id++)
        FUZZ_ASSERT(nib_tok_decode(v, 0, id, piece, sizeof piece) <= sizeof piece);
    /* every model through the request API, once the runtime checks passed
     * (regex and chat programs): special on and off, with taint */
    char err[256];
    if (nib_tok_check(v, err, sizeof err) == 0) {
        size_t len = sizeof text - 1, max = nib_tok_max_ids(v, len);
        size_t fp = (nib_tok_req_scratch_footprint(v, len) + 63) & ~(size_t)63;
        uint32_t *rid = malloc(max * sizeof *rid);
        void *scratch = aligned_alloc(64, fp);
        uint8_t taint[sizeof text];
        for (size_t i = 0; i < sizeof taint; i++)
            taint[i] = (uint8_t)(i % 7 == 0);
        FUZZ_ASSERT(rid && scratch);
        for (int mode = 0; mode < 3; mode++) {
            struct nib_tok_request rq = {
                .add_bos = 1, .special = mode == 1, .taint = mode == 2 ? taint : NULL};
            int k = nib_tok_encode_req(v, text, len, &rq, rid, max, scratch);
            FUZZ_ASSERT(k >= -2 && k != -1 && (size_t)(k < 0 ? 0 : k) <= max);
            uint32_t prev = NIB_TOK_NONE;
            for (int i = 0; i < k; i++) {
                FUZZ_ASSERT(rid[i] < h->hp.vocab_size);
                FUZZ_ASSERT(nib_tok_decode(v, prev, rid[i], piece, sizeof piece) <= sizeof piece);
                (void)nib_tok_is_eog(v, rid[i]);
                prev = rid[i];
            }
        }
        free(rid);
        free(scratch);
        size_t chat_len;
        (void)nib_tok_chat_program(v, &chat_len);
    }
    if (v->mem_size > EXEC_MEM_MAX || h->hp.ctx_len == 0)
        return;
    /* runtime memory is 64-byte aligned, as boot's huge pages are (the int8
     * activation buffers inside it need their alignment) */
    size_t mem_bytes = (size_t)(v->mem_size + 64 + 63) & ~(size_t)63;
    uint8_t *mem = aligned_alloc(64, mem_bytes);
    FUZZ_ASSERT(mem != NULL);
    memset(mem, 0, mem_bytes);
    struct nib_exec e = {.v = v, .mem = mem};
    uint32_t tok = h->hp.bos_id < h->hp.vocab_size ? h->hp.bos_id : 0;
    nib_exec_token(&e, tok, 0);
    /* and a pass of several tokens, as prefill runs them */
    uint32_t pass[3] = {tok, tok, tok}, m = h->max_batch < 3 ? h->max_batch : 3;
    if (h->hp.ctx_len > m)
        nib_exec_tokens(&e, pass, m, 1);
    (void)nib_exec_argmax(&e);
    free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n;
    int expand;
    uint8_t *buf = fuzz_blob_expand(data, size, &n, &expand);
    FUZZ_ASSERT(buf != NULL);
    struct nib_blob_view v;
    char err[256];
    if (nib_blob_open(&v, buf, n, !expand, err, sizeof err) == 0)
        exercise(&v);
    else
        FUZZ_ASSERT(err[0] != 0);
    free(buf);
    return 0;
}
