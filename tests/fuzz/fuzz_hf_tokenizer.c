/* Fuzz target: the tokenizer.json importer (tools/compiler/hf_tokenizer.h)
 * on arbitrary bytes. The input is up to three texts separated by a line
 * holding only "@@": tokenizer.json, then tokenizer_config.json, then
 * generation_config.json (a missing one is absent).
 *
 *   - a refusal names its file ("tokenizer.json: ...");
 *   - an accepted tokenizer is coherent: every id it holds (merges, added
 *     tokens, byte table, BOS/EOS/unk, end-of-generation set) is inside
 *     the vocabulary, pieces are within the length limit, patterns are
 *     NUL-terminated at their length, and a byte-level vocabulary has a
 *     token for every byte.
 *
 * Any violated invariant aborts. */
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_format.h"
#include "tests/fuzz/fuzz.h"
#include "tools/compiler/hf_tokenizer.h"

static const char *next_part(const char *p, const char *end, size_t *len)
{
    const char *sep = NULL;
    for (const char *q = p; q + 4 <= end; q++)
        if (q[0] == '\n' && q[1] == '@' && q[2] == '@' && q[3] == '\n') {
            sep = q;
            break;
        }
    *len = (size_t)((sep ? sep : end) - p);
    return sep ? sep + 4 : NULL;
}

static void check(const struct tok_spec *s)
{
    FUZZ_ASSERT(s->model == TOK_MODEL_BPE && s->n_vocab > 0 && s->n_vocab <= NIB_MAX_VOCAB);
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        FUZZ_ASSERT(s->tokens[i].bytes != NULL && s->tokens[i].len <= NIB_MAX_PIECE);
        FUZZ_ASSERT(s->tokens[i].type >= NIB_TOK_NORMAL && s->tokens[i].type <= NIB_TOK_BYTE);
    }
    for (uint32_t r = 0; r < s->n_merges; r++)
        FUZZ_ASSERT(s->merges[r].left < s->n_vocab && s->merges[r].right < s->n_vocab &&
                    s->merges[r].result < s->n_vocab);
    for (uint32_t i = 0; i < s->n_added; i++)
        FUZZ_ASSERT(s->added[i].id < s->n_vocab);
    for (int b = 0; b < 256; b++) {
        FUZZ_ASSERT(s->byte_id[b] == UINT32_MAX || s->byte_id[b] < s->n_vocab);
        FUZZ_ASSERT(!s->byte_level || s->byte_id[b] != UINT32_MAX);
    }
    int32_t ids[] = {s->bos_id, s->eos_id, s->unk_id};
    for (int i = 0; i < 3; i++)
        FUZZ_ASSERT(ids[i] >= -1 && ids[i] < (int32_t)s->n_vocab);
    FUZZ_ASSERT(!s->add_bos || s->bos_id >= 0);
    FUZZ_ASSERT(s->n_eog <= TOK_SPEC_MAX_EOG);
    for (uint32_t i = 0; i < s->n_eog; i++)
        FUZZ_ASSERT(s->eog[i] < s->n_vocab && (i == 0 || s->eog[i - 1] < s->eog[i]));
    for (uint32_t i = 0; i < s->n_pre; i++)
        FUZZ_ASSERT(!s->pre[i].pattern || s->pre[i].pattern[s->pre[i].pattern_len] == 0);
    for (uint32_t i = 0; i < s->n_norm; i++)
        FUZZ_ASSERT(s->norm[i].kind >= TOK_NORM_NFC && s->norm[i].kind <= TOK_NORM_REPLACE);
    FUZZ_ASSERT(!s->chat_template || strlen(s->chat_template) < (1u << 30));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size, *parts[3] = {NULL, NULL, NULL};
    size_t lens[3] = {0, 0, 0};
    for (int i = 0; i < 3 && p; i++) {
        parts[i] = p;
        p = next_part(p, end, &lens[i]);
    }
    struct tok_spec s;
    char err[512];
    if (hf_tokenizer_parse(parts[0], lens[0], parts[1], lens[1], parts[2], lens[2], &s, err,
                           sizeof err)) {
        FUZZ_ASSERT(strstr(err, ".json: ") != NULL);
        FUZZ_ASSERT(s.tokens == NULL && s.merges == NULL && s.added == NULL);
        return 0;
    }
    check(&s);
    tok_spec_free(&s);
    return 0;
}
