/* The boot-time prefetch measurement (rt/prefetch_tune.h): what it picks
 * from its medians, that a run on a team picks one of its candidates and
 * leaves that distance set, that the passes it times change no bit of the
 * logits a request then gets, and that it touches neither the latency
 * statistics nor the digest; that the scoring compares each round's slots
 * pair-wise, so a slow spell that covers a whole round cancels and one
 * slow slot is an outlier. How fast each distance runs is the machine's
 * and is not asserted. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/qkernels.h"
#include "proto/stats.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/prefetch_tune.h"
#include "tests/common/test_util.h"
#include "tests/rt/rt_fixture.h"

START_TEST(pick_keeps_the_default_within_two_percent)
{
    const double close[] = {1, 0.985, 0.99};  /* 1.5 % below: noise */
    const double faster[] = {1, 0.99, 0.975}; /* 2.5 % below */
    const double tie[] = {1, 1, 1};
    const double slower[] = {1, 1.5, 1.2};
    ck_assert_uint_eq(nib_prefetch_tune_pick(close, 3), 0);
    ck_assert_uint_eq(nib_prefetch_tune_pick(faster, 3), 2);
    ck_assert_uint_eq(nib_prefetch_tune_pick(tie, 3), 0);
    ck_assert_uint_eq(nib_prefetch_tune_pick(slower, 3), 0);
    const double second[] = {1, 0.9, 0.95};
    ck_assert_uint_eq(nib_prefetch_tune_pick(second, 3), 1);
}
END_TEST

/* Five rounds of one pass: candidate 2 is 3 % faster than the default in
 * every round but one, where its slot alone hit a slow spell; rounds 2
 * and 4 ran slow throughout. Pair-wise it is 0.97-0.971; the medians of whole
 * candidates (100 against 160) would have called it much slower. */
START_TEST(score_pairs_slots_within_rounds)
{
    static const uint64_t d[5] = {100, 100, 180, 100, 170}, c1[5] = {101, 100, 181, 101, 171},
                          c2[5] = {97, 160, 175, 97, 165}, c3[5] = {120, 99, 200, 130, 150};
    ck_assert_uint_eq(NIB_TUNE_CANDIDATES, 4);
    struct nib_prefetch_tune *t = calloc(1, sizeof *t);
    nib_prefetch_tune_init(t);
    t->rounds = 5;
    t->passes = 1;
    memcpy(t->samples[0], d, sizeof d);
    memcpy(t->samples[1], c1, sizeof c1);
    memcpy(t->samples[2], c2, sizeof c2);
    memcpy(t->samples[3], c3, sizeof c3);
    nib_prefetch_tune_score(t);
    ck_assert_uint_eq(t->chosen, 2);
    ck_assert_double_eq_tol(t->ratio[0], 1.0, 1e-12);
    ck_assert_double_eq_tol(t->ratio[2], 165.0 / 170, 1e-12); /* 0.97, 0.97, this, 175 / 180, 1.6 */
    ck_assert(t->ratio[1] > 1.0);
    /* 1.2, 0.99, 1.11, 1.3, 0.88: two faster rounds of five do not make it faster */
    ck_assert_double_eq_tol(t->ratio[3], 200.0 / 180, 1e-12);
    ck_assert_uint_eq(t->median_ns[0], 100);
    ck_assert_uint_eq(t->median_ns[2], 160); /* what the old rule compared */

    /* two passes a slot: each slot's median is what is paired */
    t->rounds = 2;
    t->passes = 2;
    static const uint64_t d2[4] = {100, 102, 200, 204}, c12[4] = {110, 112, 220, 224},
                          c22[4] = {90, 400, 180, 182}, c32[4] = {105, 105, 210, 210};
    memcpy(t->samples[0], d2, sizeof d2);
    memcpy(t->samples[1], c12, sizeof c12);
    memcpy(t->samples[2], c22, sizeof c22);
    memcpy(t->samples[3], c32, sizeof c32);
    nib_prefetch_tune_score(t);
    ck_assert_double_eq_tol(t->ratio[1], 111.0 / 101, 1e-12);
    ck_assert_uint_eq(t->chosen, 0); /* candidate 2: (245 / 101 + 181 / 202) / 2 */
    free(t);
}
END_TEST

START_TEST(candidates_start_with_the_default_and_differ)
{
    struct nib_prefetch_tune *t = calloc(1, sizeof *t);
    nib_prefetch_tune_init(t);
    ck_assert_uint_eq(t->bytes[0], NIB_PF_DIST);
    for (int i = 0; i < NIB_TUNE_CANDIDATES; i++) {
        ck_assert(nib_prefetch_valid(t->bytes[i]));
        for (int j = 0; j < i; j++)
            ck_assert_uint_ne(t->bytes[i], t->bytes[j]);
    }
    free(t);
}
END_TEST

#define N_TOKENS 12

/* Logits of N_TOKENS positions (position 64 among them is the row the
 * measurement writes) through e. */
static void run_tokens(struct nib_exec *e, float *out)
{
    const uint32_t vocab = rtf_view.h->hp.vocab_size;
    for (uint32_t i = 0; i < N_TOKENS; i++) {
        uint32_t p = 58 + i;
        const float *l = nib_exec_token(e, rtf_token(p, 5u), p);
        ck_assert_ptr_nonnull(l);
        memcpy(out + (size_t)i * vocab, l, (size_t)vocab * 4);
    }
}

START_TEST(run_on_a_team_picks_a_candidate_and_changes_no_bit)
{
    ck_assert_uint_gt(rtf_view.h->hp.ctx_len, 58 + N_TOKENS);
    const uint32_t vocab = rtf_view.h->hp.vocab_size;
    float *before = malloc((size_t)N_TOKENS * vocab * 4),
          *after = malloc((size_t)N_TOKENS * vocab * 4);
    uint8_t *arena = rtf_arena();
    struct nib_stats *st = calloc(1, sizeof *st), *st_copy = malloc(sizeof *st);
    struct nib_exec e = {.v = &rtf_view,
                         .mem = arena,
                         .qk = nib_exec_kernels(nib_cpu_isa()),
                         .stats = st,
                         .digest = 1};
    struct rtf_team f;
    rtf_team_start(&f, &e, 2, 50000000, 200000);
    const uint32_t was = nib_prefetch_bytes;
    run_tokens(&e, before);
    memcpy(st_copy, st, sizeof *st);
    const uint32_t digest = e.digest_crc;

    struct nib_prefetch_tune *t = calloc(1, sizeof *t);
    nib_prefetch_tune_init(t);
    ck_assert_int_eq(nib_prefetch_tune_run(&e, t, 0, NIB_TUNE_BUDGET_NS), -1); /* no rounds */
    ck_assert_int_eq(nib_prefetch_tune_run(&e, t, NIB_TUNE_ROUNDS_MAX + 1, 1), -1);
    ck_assert_uint_eq(nib_prefetch_bytes, was);
    ck_assert_int_eq(nib_prefetch_tune_run(&e, t, 3, 20000000ull), 0);
    ck_assert_uint_lt(t->chosen, NIB_TUNE_CANDIDATES);
    ck_assert_uint_eq(nib_prefetch_bytes, t->bytes[t->chosen]);
    ck_assert_uint_eq(t->rounds, 3);
    ck_assert(t->passes >= 1 && t->passes <= NIB_TUNE_PASSES_MAX);
    for (int i = 0; i < NIB_TUNE_CANDIDATES; i++)
        ck_assert_uint_gt(t->median_ns[i], 0);
    ck_assert_uint_eq(nib_prefetch_tune_pick(t->ratio, NIB_TUNE_CANDIDATES), t->chosen);
    ck_assert_double_eq_tol(t->ratio[0], 1.0, 1e-12);
    ck_assert_msg(memcmp(st, st_copy, sizeof *st) == 0, "the measurement recorded statistics");
    ck_assert_uint_eq(e.digest_crc, digest);
    char line[256];
    nib_prefetch_tune_describe(t, line, sizeof line);
    ck_assert_msg(strstr(line, "3 rounds of") != NULL, "%s", line);

    /* the same requests again, at every candidate: the same bits */
    for (int i = 0; i < NIB_TUNE_CANDIDATES; i++) {
        ck_assert_int_eq(nib_prefetch_set(t->bytes[i]), 0);
        run_tokens(&e, after);
        ck_assert_msg(memcmp(before, after, (size_t)N_TOKENS * vocab * 4) == 0,
                      "logits differ at prefetch %u", t->bytes[i]);
    }
    nib_prefetch_set(was);
    rtf_team_stop(&f);
    free(t), free(st), free(st_copy), free(arena), free(before), free(after);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("prefetch-tune");
    TU_CASE(s, "prefetch-tune", rtf_setup, rtf_teardown, 120,
            pick_keeps_the_default_within_two_percent, score_pairs_slots_within_rounds,
            candidates_start_with_the_default_and_differ,
            run_on_a_team_picks_a_candidate_and_changes_no_bit);
    return s;
}
