/* Prefill: a prompt fed in passes of several tokens leaves bitwise the
 * state token-by-token decode leaves (logits of every pass's last token,
 * the whole KV cache, and the decode that follows), with one worker and
 * with a team; the fused argmax agrees with a scan of the logits; passes
 * out of range are refused; the KV cache's two layouts give the same
 * bits. Runs on NIB_TEST_BLOB (f32, and q4 in the -q4 variant). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_format.h"
#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/sample.h"
#include "rt/team.h"
#include "tests/common/test_util.h"
#include "tests/rt/rt_fixture.h"

static void setup(void)
{
    rtf_setup();
    ck_assert_uint_gt(rtf_view.h->max_batch, 1);
}

static uint8_t *new_arena(void)
{
    return rtf_arena();
}

static uint32_t token_at(uint32_t pos)
{
    return rtf_token(pos, 5u);
}

/* The CPU's best kernels (the same bits as the scalar ones) on blob v. */
static struct nib_exec exec_on(const struct nib_blob_view *v, uint8_t *arena)
{
    return (struct nib_exec){.v = v, .mem = arena, .qk = nib_exec_kernels(nib_cpu_isa())};
}

#define N_PROMPT 45
#define N_DECODE 5

/* Token by token: logits of every position, and the KV cache after the
 * prompt. */
static float *reference(uint8_t **kv_out)
{
    const uint32_t vocab = rtf_view.h->hp.vocab_size;
    float *ref = malloc((size_t)(N_PROMPT + N_DECODE) * vocab * 4);
    uint8_t *arena = new_arena();
    struct nib_exec e = exec_on(&rtf_view, arena);
    for (uint32_t p = 0; p < N_PROMPT + N_DECODE; p++) {
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        memcpy(ref + (size_t)p * vocab, l, (size_t)vocab * 4);
        ck_assert_uint_eq(nib_exec_argmax(&e), nib_argmax(l, vocab));
        if (p + 1 == N_PROMPT) {
            *kv_out = malloc(rtf_view.h->kv_size);
            memcpy(*kv_out, arena + rtf_view.h->act_size, rtf_view.h->kv_size);
        }
    }
    free(arena);
    return ref;
}

static void prefill_matches(uint32_t workers, const uint32_t *pass_sizes, int n_sizes)
{
    const uint32_t vocab = rtf_view.h->hp.vocab_size, M = rtf_view.h->max_batch;
    uint8_t *ref_kv = NULL;
    float *ref = reference(&ref_kv);
    uint8_t *arena = new_arena();
    struct nib_exec e = exec_on(&rtf_view, arena);
    struct rtf_team f;
    rtf_team_start(&f, &e, workers, 50000000, 200000);
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
    ck_assert_msg(memcmp(arena + rtf_view.h->act_size, ref_kv, rtf_view.h->kv_size) == 0,
                  "%u workers: KV cache after prefill differs from token-by-token", workers);
    for (uint32_t p = N_PROMPT; p < N_PROMPT + N_DECODE; p++) {
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        ck_assert_msg(memcmp(l, ref + (size_t)p * vocab, (size_t)vocab * 4) == 0,
                      "%u workers: decode at %u after prefill differs", workers, p);
    }
    rtf_team_stop(&f);
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
    struct nib_exec e = {.v = &rtf_view, .mem = arena};
    uint32_t ids[NIB_MAX_BATCH + 1] = {0};
    const uint32_t M = rtf_view.h->max_batch, ctx = rtf_view.h->hp.ctx_len;
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, 0, 0));
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, M + 1, 0));
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, 2, ctx - 1));
    ck_assert_ptr_nonnull(nib_exec_tokens(&e, ids, 1, ctx - 1));
    ids[1] = rtf_view.h->hp.vocab_size;
    ck_assert_ptr_null(nib_exec_tokens(&e, ids, 2, 0));
    free(arena);
}
END_TEST

/* The test blob relaid with each position's KV heads side by side (the
 * layout before blob format 12, which the validator and the kernels still
 * take): the same logits at every position, bit for bit, with a team of
 * two, and after the prompt the same cache rows, each where its layout
 * puts it. The planner's layout (head by head) is checked on the way. */
START_TEST(kv_layouts_agree)
{
    const struct nib_blob_view *v = &rtf_view;
    const uint32_t vocab = v->h->hp.vocab_size;
    uint8_t *copy = aligned_alloc(64, (v->size + 63) & ~63ull);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, v->base, v->size);
    struct nib_blob_header *h = (struct nib_blob_header *)(void *)copy;
    struct nib_op *ops = (struct nib_op *)(void *)(copy + ((const uint8_t *)v->ops - v->base));
    uint32_t relaid = 0;
    for (uint32_t i = 0; i < h->n_ops; i++) {
        struct nib_op *op = &ops[i];
        if (op->code == NIB_OP_MATMUL && (op->flags & NIB_EPI_ROPE_KV)) {
            struct nib_rope_kv_params *p = &op->matmul.rope_kv;
            ck_assert_uint_eq(op->aux_stride, p->head_dim * 4);
            ck_assert_uint_eq(p->head_stride, (uint64_t)h->hp.ctx_len * p->head_dim * 4);
            op->aux_stride = p->kv_rows * 4;
            p->head_stride = p->head_dim * 4;
            relaid++;
        } else if (op->code == NIB_OP_ATTENTION) {
            struct nib_attention_params *p = &op->attention;
            ck_assert_uint_eq(p->cache_stride, op->k * 4);
            ck_assert_uint_eq(p->head_stride, (uint64_t)h->hp.ctx_len * op->k * 4);
            p->cache_stride = p->n_kv_heads * op->k * 4;
            p->head_stride = op->k * 4;
            relaid++;
        }
    }
    ck_assert_uint_eq(relaid, 2 * h->hp.n_layers);
    h->crc32c = nib_blob_crc(copy, v->size);
    struct nib_blob_view rows;
    char err[256];
    ck_assert_msg(nib_blob_open(&rows, copy, v->size, 1, err, sizeof err) == 0, "%s", err);

    uint8_t *ref_kv = NULL;
    float *ref = reference(&ref_kv);
    uint8_t *arena = tu_new_arena(&rows);
    struct nib_exec e = exec_on(&rows, arena);
    struct rtf_team f;
    rtf_team_start(&f, &e, 2, 50000000, 200000);
    for (uint32_t p = 0; p < N_PROMPT + N_DECODE; p++) {
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        ck_assert_msg(memcmp(l, ref + (size_t)p * vocab, (size_t)vocab * 4) == 0,
                      "logits at %u differ between the KV layouts", p);
        if (p + 1 != N_PROMPT)
            continue;
        for (uint32_t i = 0; i < h->n_ops; i++) {
            const struct nib_op *op = &rows.ops[i];
            if (op->code != NIB_OP_ATTENTION)
                continue;
            const struct nib_attention_params *a = &op->attention;
            const uint64_t row = op->k * 4ull, by_head = (uint64_t)h->hp.ctx_len * row;
            for (uint32_t kv = 0; kv < 2; kv++)
                for (uint32_t g = 0; g < a->n_kv_heads; g++)
                    for (uint32_t t = 0; t < N_PROMPT; t++) {
                        uint64_t base = op->src1 + kv * a->v_cache_off;
                        ck_assert_msg(
                            memcmp(arena + base + t * a->cache_stride + g * row,
                                   ref_kv + (base - h->act_size) + g * by_head + t * row, row) == 0,
                            "op %u: %c of KV head %u at %u differs", i, kv ? 'V' : 'K', g, t);
                    }
        }
    }
    rtf_team_stop(&f);
    free(arena);
    free(ref);
    free(ref_kv);
    free(copy);
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

TU_SUITE("prefill", "prefill", setup, rtf_teardown, 240, full_passes_one_worker,
         ragged_passes_two_workers, full_passes_two_workers, bad_passes_refused, kv_layouts_agree,
         argmax_rule)
