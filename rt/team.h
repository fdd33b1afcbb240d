/* Thread team: n workers run the jobs of one leader in lockstep. Worker 0
 * is the calling (serving) thread; workers 1..n-1 sit in nib_team_worker.
 * The team knows nothing of what it runs: a job is a function and its
 * argument (rt/exec.c runs a pass's ops as one, with barriers inside).
 *
 *   - idle policy: between jobs a worker spins on the job word for
 *     spin_ns, then parks on it with FUTEX_WAIT; the leader issues one
 *     FUTEX_WAKE only when someone is parked. Inside a job nothing but
 *     loads, stores and atomics happen: no system call;
 *   - except on an oversubscribed machine: a barrier wait longer than
 *     barrier_spin_ns means a worker lost its CPU (to a host process, say),
 *     and spinning on would only keep it off longer, so the waiter sleeps
 *     on the barrier word (FUTEX_WAIT) and the last arrival wakes it.
 *     nib_team_sleeps counts these; on a dedicated machine it stays 0.
 *
 * Memory: caller-owned (nib_team_footprint / nib_team_new); nothing is
 * allocated. Threads: created by the caller (boot/workers.c pins them and
 * installs seccomp first; nib_team_spawn is the plain version). */
#ifndef NIB_TEAM_H
#define NIB_TEAM_H

#include <pthread.h>
#include <stdint.h>

#define NIB_TEAM_MAX_WORKERS 256

struct nib_team;

/* A job: worker w's part of it. */
typedef void nib_team_fn(uint32_t w, void *arg);

uint64_t nib_team_align(void);
uint64_t nib_team_footprint(uint32_t n_workers);
/* mem: nib_team_footprint bytes, nib_team_align aligned. n_workers in
 * 1..NIB_TEAM_MAX_WORKERS; NULL otherwise. */
struct nib_team *nib_team_new(void *mem, uint32_t n_workers, uint64_t spin_ns,
                              uint64_t barrier_spin_ns);

uint32_t nib_team_workers(const struct nib_team *t);
/* Workers currently parked in FUTEX_WAIT. */
uint32_t nib_team_parked(const struct nib_team *t);
/* Barrier waits that ended in FUTEX_WAIT (see barrier_spin_ns). */
uint64_t nib_team_sleeps(const struct nib_team *t);

/* Leader: run fn(w, arg) on every worker, fn(0, arg) on this thread, and
 * return when all are done (one barrier ends the job). */
void nib_team_run(struct nib_team *t, nib_team_fn *fn, void *arg);

/* Leader: run fn(w, arg) once on every worker 1..n-1 and wait for them. */
void nib_team_call(struct nib_team *t, nib_team_fn *fn, void *arg);

/* Inside a job: worker w waits until every worker has reached its barrier
 * (and sees everything they wrote before it). Every worker must call it
 * the same number of times in a job. */
void nib_team_barrier(struct nib_team *t, uint32_t w);

/* Leader: make every worker return from nib_team_worker. */
void nib_team_stop(struct nib_team *t);

/* Body of worker w (1..n-1): serve jobs until nib_team_stop. */
void nib_team_worker(struct nib_team *t, uint32_t w);

/* Plain threads for workers 1..n-1 (tests, nib bench): worker w pinned to
 * cpus[w] when cpus != NULL (best effort). tids: n-1 entries. 0, or an
 * errno value (threads already started are stopped and joined). */
int nib_team_spawn(struct nib_team *t, const uint32_t *cpus, pthread_t *tids);
/* nib_team_stop, then join the threads nib_team_spawn made. */
void nib_team_join(struct nib_team *t, pthread_t *tids);

#endif
