/* The thread team: fixed shares cover every op exactly once; barriers stand
 * wherever two workers' shares touch the same bytes; and the logits are
 * bit-identical with one worker and with a team, token after token, also
 * after the workers have parked on their futex. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "proto/stats.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/team.h"
#include "tests/common/test_util.h"
#include "tests/rt/rt_fixture.h"

static uint32_t token_at(uint32_t pos)
{
    return rtf_token(pos, 17u);
}

#define N_TOKENS 24

/* Logits of N_TOKENS positions run on the calling thread alone. */
static float *reference_logits(void)
{
    uint32_t vocab = rtf_view.h->hp.vocab_size;
    float *ref = malloc((size_t)N_TOKENS * vocab * 4);
    uint8_t *arena = rtf_arena();
    struct nib_exec e = {.v = &rtf_view, .mem = arena};
    for (uint32_t p = 0; p < N_TOKENS; p++) {
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        memcpy(ref + (size_t)p * vocab, l, (size_t)vocab * 4);
    }
    free(arena);
    return ref;
}

/* A team against the reference: workers, spin_ns, barrier_spin_ns, and
 * whether to let the workers park between tokens. The team runs the
 * CPU's best kernels, the reference the scalar ones: the same bits. */
static const struct team_case {
    const char *what;
    uint32_t workers;
    uint64_t spin_ns, barrier_spin_ns;
    int pause_between;
} team_cases[] = {
    {"one worker equals the plain executor", 1, 1000000, 200000, 0},
    {"two workers", 2, 50000000, 200000, 0},
    {"two workers after parking (spin 0: park after every token)", 2, 0, 200000, 1},
    {"two workers, sleeping barriers (barrier spin 0: every wait sleeps)", 2, 50000000, 0, 0},
    {"three workers", 3, 50000000, 200000, 0},
};

START_TEST(team_bit_identical)
{
    const struct team_case *c = &team_cases[_i];
    uint32_t vocab = rtf_view.h->hp.vocab_size;
    float *ref = reference_logits();
    uint8_t *arena = rtf_arena();
    struct nib_stats *st = calloc(1, sizeof *st);
    struct nib_exec e = {
        .v = &rtf_view, .mem = arena, .qk = nib_exec_kernels(nib_cpu_isa()), .stats = st};
    struct rtf_team f;
    rtf_team_start(&f, &e, c->workers, c->spin_ns, c->barrier_spin_ns);
    for (uint32_t p = 0; p < N_TOKENS; p++) {
        if (c->pause_between && p % 8 == 4) {
            /* Let the workers run out of spin time and park. */
            for (int i = 0; i < 2000 && nib_team_parked(f.t) < c->workers - 1; i++)
                nanosleep(&(struct timespec){0, 1000000}, NULL);
            ck_assert_uint_eq(nib_team_parked(f.t), c->workers - 1);
        }
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        ck_assert_msg(memcmp(l, ref + (size_t)p * vocab, (size_t)vocab * 4) == 0,
                      "%s: logits at position %u differ from one worker's", c->what, p);
    }
    ck_assert_uint_eq(st->tokens_run, N_TOKENS);
    struct nib_latency lat;
    nib_hist_summary(&nib_token_hist_shape, st->token_hist, st->token_pass_ns_max, &lat);
    ck_assert_uint_eq(lat.count, N_TOKENS);
    ck_assert(lat.p50 > 0 && lat.p50 <= lat.p99 && lat.p99 <= lat.max);
    rtf_team_stop(&f);
    free(st);
    free(arena);
    free(ref);
}
END_TEST

static void count_call(uint32_t w, void *arg)
{
    __atomic_fetch_add((uint32_t *)arg, 1u << (8 * (w - 1)), __ATOMIC_RELAXED);
}

START_TEST(call_runs_on_every_other_worker)
{
    uint8_t *arena = rtf_arena();
    struct nib_exec e = {.v = &rtf_view, .mem = arena};
    struct rtf_team f;
    rtf_team_start(&f, &e, 3, 0, 200000);
    uint32_t hits = 0;
    nib_team_call(f.t, count_call, &hits);
    ck_assert_uint_eq(hits, 0x0101u); /* workers 1 and 2 once each, not the leader */
    rtf_team_stop(&f);
    free(arena);
}
END_TEST

START_TEST(repeat_runs_same_digest)
{
    uint32_t d[2];
    for (int r = 0; r < 2; r++) {
        uint8_t *arena = rtf_arena();
        struct nib_exec e = {.v = &rtf_view, .mem = arena, .digest = 1};
        for (uint32_t p = 0; p < 8; p++)
            ck_assert_ptr_nonnull(nib_exec_token(&e, token_at(p), p));
        d[r] = e.digest_crc;
        free(arena);
    }
    ck_assert_uint_ne(d[0], 0);
    ck_assert_uint_eq(d[0], d[1]);
}
END_TEST

START_TEST(shares_cover_every_unit_once)
{
    for (uint32_t n = 1; n <= 9; n++)
        for (uint32_t i = 0; i < rtf_view.h->n_ops; i++) {
            const struct nib_op *op = &rtf_view.ops[i];
            uint32_t next = 0, last_end = 0;
            for (uint32_t w = 0; w < n; w++) {
                uint32_t b, e;
                nib_exec_share(op, w, n, &b, &e);
                if (b >= e)
                    continue;
                ck_assert_msg(b == next, "op %u, %u workers: worker %u starts at %u, not %u", i, n,
                              w, b, next);
                next = e;
                last_end = e;
            }
            uint32_t b0, e0;
            nib_exec_share(op, 0, 1, &b0, &e0);
            ck_assert_msg(last_end == e0, "op %u, %u workers: shares end at %u, not %u", i, n,
                          last_end, e0);
        }
}
END_TEST

static int conflict(const struct nib_access *a, const struct nib_access *b)
{
    return (a->write || b->write) && a->begin < b->end && b->begin < a->end;
}

START_TEST(barriers_where_data_depends)
{
    for (uint32_t n = 1; n <= 4; n++) {
        uint8_t *bar = malloc(rtf_view.h->n_ops);
        uint32_t per_pass = nib_exec_plan_barriers(&rtf_view, n, bar);
        uint32_t count = 0;
        for (uint32_t i = 0; i < rtf_view.h->n_ops; i++)
            count += bar[i];
        if (n == 1) {
            ck_assert_uint_eq(per_pass, 0);
        } else {
            ck_assert_uint_eq(per_pass, count + 1);
            ck_assert_uint_eq(bar[0], 0); /* the previous token ended with one */
        }
        /* Brute force: between two barriers, no two workers touch the same
         * bytes with a write, across all pairs of ops. */
        uint32_t start = 0;
        for (uint32_t j = 0; j < rtf_view.h->n_ops; j++) {
            if (bar[j])
                start = j;
            for (uint32_t i = start; i < j; i++)
                for (uint32_t wi = 0; wi < n; wi++)
                    for (uint32_t wj = 0; wj < n; wj++) {
                        if (wi == wj)
                            continue;
                        struct nib_access a[NIB_ACCESS_MAX], b[NIB_ACCESS_MAX];
                        int na = nib_exec_access(&rtf_view, &rtf_view.ops[i], wi, n, a);
                        int nb = nib_exec_access(&rtf_view, &rtf_view.ops[j], wj, n, b);
                        for (int x = 0; x < na; x++)
                            for (int y = 0; y < nb; y++)
                                ck_assert_msg(!conflict(&a[x], &b[y]),
                                              "%u workers: op %u (worker %u) and op %u (worker %u) "
                                              "share bytes without a barrier",
                                              n, i, wi, j, wj);
                    }
        }
        free(bar);
    }
}
END_TEST

START_TEST(team_rejects_bad_worker_counts)
{
    void *tmem = aligned_alloc(64, nib_team_footprint(NIB_TEAM_MAX_WORKERS + 1));
    ck_assert_ptr_null(nib_team_new(tmem, 0, 0, 0));
    ck_assert_ptr_null(nib_team_new(tmem, NIB_TEAM_MAX_WORKERS + 1, 0, 0));
    free(tmem);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("team");
    TU_CASE(s, "team", rtf_setup, rtf_teardown, 120, call_runs_on_every_other_worker,
            repeat_runs_same_digest, shares_cover_every_unit_once, barriers_where_data_depends,
            team_rejects_bad_worker_counts);
    TCase *tc = tcase_create("bit-identical");
    tcase_add_checked_fixture(tc, rtf_setup, rtf_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, team_bit_identical, 0, sizeof team_cases / sizeof team_cases[0]);
    suite_add_tcase(s, tc);
    return s;
}
