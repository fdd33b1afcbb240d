/* The reference loop (rt/refloop.h) reads per iteration what the plan says
 * a single token reads: every matmul's packed weights (the blob's tensor
 * records, summed over the plan's matmuls) and the K and V cache rows up
 * to the position (from the model's shape), summed over the workers'
 * shares; and its iterations on a team read exactly what that accounting
 * says, position after position. */
#include <check.h>
#include <stdlib.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "rt/refloop.h"
#include "rt/team.h"
#include "tests/common/test_util.h"
#include "tests/rt/rt_fixture.h"

/* The plan's weight bytes per token, from the tensor records alone. */
static uint64_t plan_weight_bytes(void)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < rtf_view.h->n_ops; i++)
        if (rtf_view.ops[i].code == NIB_OP_MATMUL)
            sum += rtf_view.tensors[rtf_view.ops[i].tensor].size;
    return sum;
}

/* K and V bytes a token at pos reads with one worker, from the shape. */
static uint64_t shape_kv_bytes(uint32_t pos)
{
    const struct nib_hparams *hp = &rtf_view.h->hp;
    return 2ull * hp->n_layers * (pos + 1ull) * hp->n_kv_heads * hp->head_dim * 4;
}

static uint32_t attention_ops(void)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < rtf_view.h->n_ops; i++) {
        const struct nib_op *op = &rtf_view.ops[i];
        n += op->code == NIB_OP_ATTENTION;
        ck_assert_uint_eq(op->code == NIB_OP_ATTENTION ? op->attention.window : 0, 0);
    }
    return n;
}

START_TEST(one_worker_reads_what_a_token_reads)
{
    ck_assert_uint_eq(attention_ops(), rtf_view.h->hp.n_layers);
    uint64_t weights = plan_weight_bytes();
    ck_assert_uint_gt(weights, 0);
    uint32_t ctx = rtf_view.h->hp.ctx_len;
    const uint32_t at[] = {0, 1, 7, ctx / 2, ctx - 1};
    for (unsigned k = 0; k < sizeof at / sizeof at[0]; k++) {
        struct nib_ref_bytes b;
        nib_ref_bytes(&rtf_view, at[k], 1, &b);
        ck_assert_uint_eq(b.weights, weights);
        ck_assert_uint_eq(b.kv, shape_kv_bytes(at[k]));
    }
}
END_TEST

START_TEST(shares_read_every_weight_once)
{
    uint64_t weights = plan_weight_bytes();
    for (uint32_t n = 2; n <= 9; n++) {
        struct nib_ref_bytes b;
        nib_ref_bytes(&rtf_view, 5, n, &b);
        ck_assert_msg(b.weights == weights, "%u workers: %llu weight bytes, the plan has %llu", n,
                      (unsigned long long)b.weights, (unsigned long long)weights);
        /* a KV head shared by two workers' query heads is read by both */
        ck_assert_uint_ge(b.kv, shape_kv_bytes(5));
        ck_assert_uint_le(b.kv, shape_kv_bytes(5) * n);
    }
}
END_TEST

/* Iterations read what nib_ref_bytes says, alone and on teams, with the
 * plan's barriers and without. */
START_TEST(iterations_read_the_accounted_bytes)
{
    for (uint32_t n = 1; n <= 3; n++) {
        uint8_t *arena = rtf_arena();
        struct nib_exec e = {.v = &rtf_view, .mem = arena};
        struct rtf_team f;
        if (n > 1)
            rtf_team_start(&f, &e, n, 50000000, 200000);
        struct nib_ref *r = aligned_alloc(64, sizeof *r);
        ck_assert_ptr_nonnull(r);
        *r = (struct nib_ref){.e = &e};
        uint64_t want = 0;
        for (uint32_t pos = 0; pos < 12; pos++) {
            struct nib_ref_bytes b;
            nib_ref_bytes(&rtf_view, pos, n, &b);
            r->free_running = pos % 2; /* the same shares without the barriers */
            ck_assert_int_eq(nib_ref_iteration(r, pos), 0);
            want += b.weights + b.kv;
            ck_assert_msg(nib_ref_bytes_read(r) == want,
                          "%u workers, position %u: read %llu bytes, accounted %llu", n, pos,
                          (unsigned long long)nib_ref_bytes_read(r), (unsigned long long)want);
        }
        ck_assert_int_eq(nib_ref_iteration(r, rtf_view.h->hp.ctx_len), -1);
        ck_assert_uint_eq(nib_ref_bytes_read(r), want);
        if (n > 1)
            rtf_team_stop(&f);
        free(r);
        free(arena);
    }
}
END_TEST

TU_SUITE("refloop", "reference loop", rtf_setup, rtf_teardown, 120,
         one_worker_reads_what_a_token_reads, shares_read_every_weight_once,
         iterations_read_the_accounted_bytes)
