/* Prefill: a prompt fed in passes of several tokens leaves bitwise the
 * state token-by-token decode leaves (logits of every pass's last token,
 * the whole KV cache, and the decode that follows), with one worker and
 * with a team; the fused argmax agrees with a scan of the logits; passes
 * out of range are refused. Runs on NIB_TEST_BLOB (f32, and q4 in the
 * -q4 variant). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/sample.h"
#include "rt/team.h"
#include "tests/common/test_util.h"

static uint8_t *blob;
static struct nib_blob_view view;

static void setup(void)
{
    blob = tu_open_test_blob(&view);
    ck_assert_uint_gt(view.h->max_batch, 1);
    nib_exec_select_kernels(nib_cpu_isa());
}

static void teardown(void)
{
    free(blob);
}

static uint8_t *new_arena(void)
{
    return tu_new_arena(&view);
}

static uint32_t token_at(uint32_t pos)
{
    return (pos * 2654435761u + 5u) % view.h->hp.vocab_size;
}

#define N_PROMPT 45
#define N_DECODE 5

/* Token by token: logits of every position, and the KV cache after the
 * prompt. */
static float *reference(uint8_t **kv_out)
{
    const uint32_t vocab = view.h->hp.vocab_size;
    float *ref = malloc((size_t)(N_PROMPT + N_DECODE) * vocab * 4);
    uint8_t *arena = new_arena();
    struct nib_exec e = {.v = &view, .mem = arena};
    for (uint32_t p = 0; p < N_PROMPT + N_DECODE; p++) {
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        memcpy(ref + (size_t)p * vocab, l, (size_t)vocab * 4);
        ck_assert_uint_eq(nib_exec_argmax(&e), nib_argmax(l, vocab));
        if (p + 1 == N_PROMPT) {
            *kv_out = malloc(view.h->kv_size);
            memcpy(*kv_out, arena + view.h->act_size, view.h->kv_size);
        }
    }
    free(arena);
    return ref;
}

static void prefill_matches(uint32_t workers, const uint32_t *pass_sizes, int n_sizes)
{
    const uint32_t vocab = view.h->hp.vocab_size, M = view.h->max_batch;
    uint8_t *ref_kv = NULL;
    float *ref = reference(&ref_kv);
    uint8_t *arena = new_arena();
    void *tmem = aligned_alloc(nib_team_align(), nib_team_footprint(workers, &view));
    struct nib_team *t = nib_team_new(tmem, &view, arena, workers, 50000000, 200000);
    ck_assert_ptr_nonnull(t);
    pthread_t tids[8];
    ck_assert_int_eq(nib_team_spawn(t, NULL, tids), 0);
    struct nib_exec e = {.v = &view, .mem = arena, .team = t};
    uint32_t ids[N_PROMPT];
    for (uint32_t p = 0; p < N_PROMPT; p++)
        ids[p] = token_at(p);
    uint32_t pos = 0;
    for (int i = 0; pos < N_PROMPT; i++) {
        uint32_t m = pass_sizes[i % n_sizes];
        if (m > M)
            m = M;
        if (m > N_PROMPT - pos)
            m = N_PROMPT - pos;
        const float *l = nib_exec_tokens(&e, ids + pos, m, pos);
        ck_assert_ptr_nonnull(l);
        pos += m;
        ck_assert_msg(memcmp(l, ref + (size_t)(pos - 1) * vocab, (size_t)vocab * 4) == 0,
                      "%u workers: logits after a pass of %u ending at %u differ", workers, m,
                      pos - 1);
        ck_assert_uint_eq(nib_exec_argmax(&e), nib_argmax(l, vocab));
    }
    ck_assert_msg(memcmp(arena + view.h->act_size, ref_kv, view.h->kv_size) == 0,
                  "%u workers: KV cache after prefill differs from token-by-token", workers);
    for (uint32_t p = N_PROMPT; p < N_PROMPT + N_DECODE; p++) {
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        ck_assert_msg(memcmp(l, ref + (size_t)p * vocab, (size_t)vocab * 4) == 0,
                      "%u workers: decode at %u after prefill differs", workers, p);
    }
    nib_team_join(t, tids);
    free(tmem);
    free(arena);
    free(ref);
    free(ref_kv);
}

START_TEST(full_passes_one_worker)
{
    const uint32_t sizes[] = {NIB_MAX_BATCH};
    prefill_matches(1, sizes, 1);
}
END_TEST

START_TEST(ragged_passes_two_workers)
{
    const uint32_t sizes[] = {5, NIB_MAX_BATCH, 1, 3, 2, 7};
    prefill_matches(2, sizes, 6);
}
END_TEST

START_TEST(full_passes_two_workers)
{
    const uint32_t sizes[] = {NIB_MAX_BATCH};
    prefill_matches(2, sizes, 1);
}
END_TEST

START_TEST(bad_passes_refused)
{
    uint8_t *arena = new_arena();
    struct nib_exec e = {.v = &view, .mem = arena};
    uint32_t ids[NIB_MAX_BATCH + 1] = {0};
    const uint32_t M = view.h->max_batch, ctx = view.h->hp.ctx_len;
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, 0, 0));
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, M + 1, 0));
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, 2, ctx - 1));
    ck_assert_ptr_nonnull(nib_exec_tokens(&e, ids, 1, ctx - 1));
    ids[1] = view.h->hp.vocab_size;
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, 2, 0));
    free(arena);
}
END_TEST

START_TEST(argmax_rule)
{
    const float nan = __builtin_nanf("");
    float a[] = {nan, 1.0f, 3.0f, nan, 3.0f, -2.0f};
    ck_assert_uint_eq(nib_argmax(a, 6), 2);
    float b[] = {nan, nan};
    ck_assert_uint_eq(nib_argmax(b, 2), 0);
    float c[] = {-__builtin_inff(), -1.0f};
    ck_assert_uint_eq(nib_argmax(c, 2), 1);
}
END_TEST

TU_SUITE("prefill", "prefill", setup, teardown, 240, full_passes_one_worker,
         ragged_passes_two_workers, full_passes_two_workers, bad_passes_refused, argmax_rule)
