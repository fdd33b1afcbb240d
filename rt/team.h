/* Thread team: n workers run the plan of one pass in lockstep. Worker 0
 * is the calling (serving) thread; workers 1..n-1 sit in nib_team_worker.
 *
 *   - fixed work split: worker w always computes the same share of every op
 *     (nib_exec_share), so results never depend on thread timing;
 *   - barriers only where data depends: nib_team_new walks the plan once and
 *     puts a spin barrier before an op only when some worker's share of it
 *     touches bytes another worker wrote (or read, for a write) since the
 *     last barrier (nib_exec_access); one barrier ends every token;
 *   - idle policy: between tokens a worker spins on the job word for
 *     spin_ns, then parks on it with FUTEX_WAIT; the leader issues one
 *     FUTEX_WAKE only when someone is parked. Inside a token nothing but
 *     loads, stores and atomics happen: no system call;
 *   - except on an oversubscribed machine: a barrier wait longer than
 *     barrier_spin_ns means a worker lost its CPU (to a host process, say),
 *     and spinning on would only keep it off longer, so the waiter sleeps
 *     on the barrier word (FUTEX_WAIT) and the last arrival wakes it.
 *     nib_team_sleeps counts these; on a dedicated machine it stays 0.
 *
 * Memory: caller-owned (nib_team_footprint / nib_team_new), including each
 * worker's private scratch (NIB_OPF_NORM_IN: every worker normalizes the
 * same rows itself instead of waiting at a barrier for one); nothing is
 * allocated. Threads: created by the caller (boot/workers.c pins them and
 * installs seccomp first; nib_team_spawn is the plain version). */
#ifndef NIB_TEAM_H
#define NIB_TEAM_H

#include <pthread.h>
#include <stdint.h>

#include "model_blob/blob_view.h"

#define NIB_TEAM_MAX_WORKERS 256

struct nib_team;

uint64_t nib_team_align(void);
/* Bytes for a team of n_workers running v's plan: the barrier map and the
 * private scratch of workers 1..n-1 (worker 0's is in the arena). */
uint64_t nib_team_footprint(uint32_t n_workers, const struct nib_blob_view *v);
/* mem: nib_team_footprint bytes, nib_team_align aligned. arena: the
 * runtime memory the plan runs in. n_workers in 1..NIB_TEAM_MAX_WORKERS. */
struct nib_team *nib_team_new(void *mem, const struct nib_blob_view *v, uint8_t *arena,
                              uint32_t n_workers, uint64_t spin_ns, uint64_t barrier_spin_ns);

uint32_t nib_team_workers(const struct nib_team *t);
/* Barriers per token (including the final one); 0 with one worker. */
uint32_t nib_team_barriers(const struct nib_team *t);
/* n_ops flags: 1 where a barrier precedes op i. */
const uint8_t *nib_team_barrier_map(const struct nib_team *t);
/* Workers currently parked in FUTEX_WAIT. */
uint32_t nib_team_parked(const struct nib_team *t);
/* Barrier waits that ended in FUTEX_WAIT (see barrier_spin_ns). */
uint64_t nib_team_sleeps(const struct nib_team *t);

/* Leader (worker 0): run the plan for a pass of m tokens from position pos
 * with every worker. The token and position slots of the arena are
 * already written. */
void nib_team_run(struct nib_team *t, uint32_t m, uint32_t pos);

/* Leader: run fn(w, arg) once on every worker 1..n-1 and wait for them. */
void nib_team_call(struct nib_team *t, void (*fn)(uint32_t w, void *arg), void *arg);

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
