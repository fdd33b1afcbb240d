/* The thread team: fixed shares cover every op exactly once; barriers stand
 * wherever two workers' shares touch the same bytes; and the logits are
 * bit-identical with one worker and with a team, token after token, also
 * after the workers have parked on their futex. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "proto/stats.h"
#include "rt/team.h"
#include "tests/common/test_util.h"

static uint8_t *blob;
static struct nib_blob_view view;

static void setup(void)
{
    blob = tu_open_test_blob(&view);
}

static void teardown(void)
{
    free(blob);
}

static uint8_t *new_arena(void)
{
    return tu_new_arena(&view);
}

/* The ids a greedy run feeds: a fixed pseudo-random walk through the vocab. */
static uint32_t token_at(uint32_t pos)
{
    return (pos * 2654435761u + 17u) % view.h->hp.vocab_size;
}

#define N_TOKENS 24

/* Logits of N_TOKENS positions run on the calling thread alone. */
static float *reference_logits(void)
{
    uint32_t vocab = view.h->hp.vocab_size;
    float *ref = malloc((size_t)N_TOKENS * vocab * 4);
    uint8_t *arena = new_arena();
    struct nib_exec e = {.v = &view, .mem = arena};
    for (uint32_t p = 0; p < N_TOKENS; p++) {
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        memcpy(ref + (size_t)p * vocab, l, (size_t)vocab * 4);
    }
    free(arena);
    return ref;
}

static void run_team_and_compare(uint32_t workers, uint64_t spin_ns, uint64_t barrier_spin_ns,
                                 int pause_between)
{
    uint32_t vocab = view.h->hp.vocab_size;
    float *ref = reference_logits();
    uint8_t *arena = new_arena();
    void *tmem = aligned_alloc(nib_team_align(), nib_team_footprint(workers, &view));
    struct nib_team *t = nib_team_new(tmem, &view, arena, workers, spin_ns, barrier_spin_ns);
    ck_assert_ptr_nonnull(t);
    pthread_t tids[8];
    ck_assert_int_eq(nib_team_spawn(t, NULL, tids), 0);
    struct nib_stats *st = calloc(1, sizeof *st);
    struct nib_exec e = {.v = &view, .mem = arena, .team = t, .stats = st};
    for (uint32_t p = 0; p < N_TOKENS; p++) {
        if (pause_between && p % 8 == 4) {
            /* Let the workers run out of spin time and park. */
            for (int i = 0; i < 2000 && nib_team_parked(t) < workers - 1; i++)
                nanosleep(&(struct timespec){0, 1000000}, NULL);
            ck_assert_uint_eq(nib_team_parked(t), workers - 1);
        }
        const float *l = nib_exec_token(&e, token_at(p), p);
        ck_assert_ptr_nonnull(l);
        ck_assert_msg(memcmp(l, ref + (size_t)p * vocab, (size_t)vocab * 4) == 0,
                      "%u workers: logits at position %u differ from one worker's", workers, p);
    }
    ck_assert_uint_eq(st->tokens_run, N_TOKENS);
    struct nib_latency lat;
    nib_hist_summary(&nib_token_hist_shape, st->token_hist, st->token_pass_ns_max, &lat);
    ck_assert_uint_eq(lat.count, N_TOKENS);
    ck_assert(lat.p50 > 0 && lat.p50 <= lat.p99 && lat.p99 <= lat.max);
    nib_team_join(t, tids);
    free(st);
    free(tmem);
    free(arena);
    free(ref);
}

START_TEST(one_worker_team_equals_plain_executor)
{
    run_team_and_compare(1, 1000000, 200000, 0);
}
END_TEST

START_TEST(two_workers_bit_identical)
{
    run_team_and_compare(2, 50000000, 200000, 0);
}
END_TEST

START_TEST(two_workers_bit_identical_after_parking)
{
    /* spin 0: workers park right after every token */
    run_team_and_compare(2, 0, 200000, 1);
}
END_TEST

START_TEST(two_workers_bit_identical_sleeping_barriers)
{
    /* barrier spin 0: every barrier wait sleeps on the futex at once */
    run_team_and_compare(2, 50000000, 0, 0);
}
END_TEST

START_TEST(repeat_runs_same_digest)
{
    uint32_t d[2];
    for (int r = 0; r < 2; r++) {
        uint8_t *arena = new_arena();
        struct nib_exec e = {.v = &view, .mem = arena, .digest = 1};
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
        for (uint32_t i = 0; i < view.h->n_ops; i++) {
            const struct nib_op *op = &view.ops[i];
            uint32_t next = 0, last_end = 0;
            for (uint32_t w = 0; w < n; w++) {
                uint32_t b, e;
                nib_exec_share(op, w, n, &b, &e);
                if (b >= e)
                    continue;
                ck_assert_msg(b == next, "op %u, %u workers: worker %u starts at %u, not %u", i,
                              n, w, b, next);
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
        void *tmem = aligned_alloc(nib_team_align(), nib_team_footprint(n, &view));
        struct nib_team *t = nib_team_new(tmem, &view, NULL, n, 0, 0);
        ck_assert_ptr_nonnull(t);
        const uint8_t *bar = nib_team_barrier_map(t);
        uint32_t count = 0;
        for (uint32_t i = 0; i < view.h->n_ops; i++)
            count += bar[i];
        if (n == 1) {
            ck_assert_uint_eq(nib_team_barriers(t), 0);
        } else {
            ck_assert_uint_eq(nib_team_barriers(t), count + 1);
            ck_assert_uint_eq(bar[0], 0); /* the previous token ended with one */
        }
        /* Brute force: between two barriers, no two workers touch the same
         * bytes with a write, across all pairs of ops. */
        uint32_t start = 0;
        for (uint32_t j = 0; j < view.h->n_ops; j++) {
            if (bar[j])
                start = j;
            for (uint32_t i = start; i < j; i++)
                for (uint32_t wi = 0; wi < n; wi++)
                    for (uint32_t wj = 0; wj < n; wj++) {
                        if (wi == wj)
                            continue;
                        struct nib_access a[NIB_ACCESS_MAX], b[NIB_ACCESS_MAX];
                        int na = nib_exec_access(&view, &view.ops[i], wi, n, a);
                        int nb = nib_exec_access(&view, &view.ops[j], wj, n, b);
                        for (int x = 0; x < na; x++)
                            for (int y = 0; y < nb; y++)
                                ck_assert_msg(!conflict(&a[x], &b[y]),
                                              "%u workers: op %u (worker %u) and op %u (worker %u) "
                                              "share bytes without a barrier", n, i, wi, j, wj);
                    }
        }
        free(tmem);
    }
}
END_TEST

START_TEST(team_rejects_bad_worker_counts)
{
    void *tmem = aligned_alloc(64, nib_team_footprint(1, &view));
    ck_assert_ptr_null(nib_team_new(tmem, &view, NULL, 0, 0, 0));
    ck_assert_ptr_null(nib_team_new(tmem, &view, NULL, NIB_TEAM_MAX_WORKERS + 1, 0, 0));
    free(tmem);
}
END_TEST

TU_SUITE("team", "team", setup, teardown, 120, one_worker_team_equals_plain_executor,
         two_workers_bit_identical, two_workers_bit_identical_after_parking,
         two_workers_bit_identical_sleeping_barriers, repeat_runs_same_digest,
         shares_cover_every_unit_once, barriers_where_data_depends, team_rejects_bad_worker_counts)
