/* What the executor tests share: the test blob (NIB_TEST_BLOB) opened once
 * per test, fresh runtime memory, a fixed token walk, and a thread team
 * running an executor's passes. */
#ifndef NIB_TESTS_RT_FIXTURE_H
#define NIB_TESTS_RT_FIXTURE_H

#include <pthread.h>
#include <stdint.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"

extern struct nib_blob_view rtf_view;

/* Check fixture: open the test blob into rtf_view / free it. */
void rtf_setup(void);
void rtf_teardown(void);

/* Zeroed runtime memory for rtf_view (free() it). */
uint8_t *rtf_arena(void);

/* The ids a run feeds: a fixed pseudo-random walk through the vocab. */
uint32_t rtf_token(uint32_t pos, uint32_t salt);

struct rtf_team {
    void *mem;
    struct nib_team *t;
    pthread_t tids[8];
};

/* Start a team of n (<= 9) workers and run e's passes (e->v, e->mem set) on it. */
void rtf_team_start(struct rtf_team *f, struct nib_exec *e, uint32_t n, uint64_t spin_ns,
                    uint64_t barrier_spin_ns);
/* Stop and join the workers; free the team's memory. */
void rtf_team_stop(struct rtf_team *f);

#endif
