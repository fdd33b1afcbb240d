#include "rt/team.h"

#include <linux/futex.h>
#include <limits.h>
#include <sched.h>
#include <stdalign.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto/private/sync.h"

enum { JOB_NONE, JOB_RUN, JOB_STOP };

struct nib_team {
    /* line 0: read-only after nib_team_new */
    alignas(64) uint32_t n_workers;
    uint64_t spin_ns;
    uint64_t barrier_spin_ns;
    /* line 1: the job, written by the leader before it bumps seq */
    alignas(64) uint32_t job;
    nib_team_fn *fn;
    void *arg;
    /* line 2: job sequence number; also the futex word workers park on */
    alignas(64) uint32_t seq;
    /* line 3: workers parked on seq */
    alignas(64) uint32_t n_parked;
    /* line 4: the barrier */
    alignas(64) uint32_t bar_count;
    /* line 5: its sense word (also a futex word) */
    alignas(64) uint32_t bar_sense;
    /* line 6: barrier waiters asleep, and how often one slept */
    alignas(64) uint32_t bar_sleepers;
    uint64_t bar_sleeps;
    /* then n_workers lines: each worker's barrier sense (only it touches it) */
};

struct sense {
    alignas(64) uint32_t s;
};

uint64_t nib_team_align(void)
{
    return 64;
}

uint64_t nib_team_footprint(uint32_t n_workers)
{
    return sizeof(struct nib_team) + (uint64_t)n_workers * sizeof(struct sense);
}

struct nib_team *nib_team_new(void *mem, uint32_t n_workers, uint64_t spin_ns,
                              uint64_t barrier_spin_ns)
{
    if (n_workers < 1 || n_workers > NIB_TEAM_MAX_WORKERS || ((uintptr_t)mem & 63))
        return NULL;
    memset(mem, 0, nib_team_footprint(n_workers));
    struct nib_team *t = mem;
    t->n_workers = n_workers;
    t->spin_ns = spin_ns;
    t->barrier_spin_ns = barrier_spin_ns;
    return t;
}

uint32_t nib_team_workers(const struct nib_team *t)
{
    return t->n_workers;
}

uint32_t nib_team_parked(const struct nib_team *t)
{
    return nib_load_seqcst(&t->n_parked);
}

uint64_t nib_team_sleeps(const struct nib_team *t)
{
    return nib_load_relaxed(&t->bar_sleeps);
}

static void futex_wait(uint32_t *word, uint32_t val)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Wait while *word == val: spin for spin_ns (checking the clock, a vDSO
 * call, every check_mask + 1 rounds), then park on word, counted in
 * *parked while parked (and in *sleeps, if given, per sleep). The waker
 * stores word, then wakes if *parked: see wake_parked(). Returns the new
 * value of word. */
static uint32_t spin_then_park(uint32_t *word, uint32_t val, uint64_t spin_ns, uint32_t check_mask,
                               uint32_t *parked, uint64_t *sleeps)
{
    uint64_t start = 0;
    uint32_t i = 0, now_val;
    /* acquire: pairs with the store (seq_cst, so also release) in wake_parked() */
    while ((now_val = nib_load_acq(word)) == val) {
        nib_cpu_relax();
        if ((++i & check_mask) != 0)
            continue;
        uint64_t now = nib_now_ns();
        if (!start) {
            start = now;
        } else if (now - start >= spin_ns) {
            /* seq_cst increment then load: pairs with wake_parked()'s seq_cst
             * store then load. Either we see the new value and do not sleep,
             * or the waker sees us parked and wakes us (and the kernel's
             * own check of word closes the window in between). */
            nib_fetch_add_seqcst(parked, 1);
            if (nib_load_seqcst(word) == val) {
                if (sleeps)
                    nib_fetch_add_relaxed(sleeps, 1); /* a statistic only */
                futex_wait(word, val);
            }
            nib_fetch_sub_seqcst(parked, 1);
            start = 0;
        }
    }
    return now_val;
}

/* Publish val in word and wake whoever spin_then_park() parked on it. */
static void wake_parked(uint32_t *word, uint32_t val, uint32_t *parked)
{
    /* seq_cst store then load: pairs with spin_then_park()'s seq_cst
     * increment of parked then load of word; the store also releases
     * everything written before it to the acquire in spin_then_park(). */
    nib_store_seqcst(word, val);
    if (nib_load_seqcst(parked))
        futex_wake_all(word);
}

/* Sense-reversing central barrier: the last to arrive resets the count and
 * flips the shared sense; everyone else spins until it flips (and, after
 * barrier_spin_ns, sleeps on it: see team.h). */
void nib_team_barrier(struct nib_team *t, uint32_t w)
{
    uint32_t *sense = &((struct sense *)(void *)(t + 1))[w].s;
    uint32_t s = *sense ^ 1u;
    *sense = s;
    /* acq_rel: the release publishes this worker's writes of the job so
     * far; the last arrival's acquire takes every worker's, and its flip of
     * bar_sense passes them on to the waiters (wake_parked()). */
    if (nib_fetch_add_acq_rel(&t->bar_count, 1) + 1 == t->n_workers) {
        /* relaxed: ordered before the flip below, which no worker passes
         * before it arrives here again */
        nib_store_relaxed(&t->bar_count, 0);
        wake_parked(&t->bar_sense, s, &t->bar_sleepers);
        return;
    }
    spin_then_park(&t->bar_sense, s ^ 1u, t->barrier_spin_ns, 1023u, &t->bar_sleepers,
                   &t->bar_sleeps);
}

/* Leader: publish the job written into t, waking parked workers. The job's
 * fields are plain stores, released by wake_parked()'s store of seq to the
 * acquire in nib_team_worker()'s spin_then_park(). */
static void post(struct nib_team *t, uint32_t job, nib_team_fn *fn, void *arg)
{
    t->job = job;
    t->fn = fn;
    t->arg = arg;
    wake_parked(&t->seq, t->seq + 1, &t->n_parked);
}

void nib_team_run(struct nib_team *t, nib_team_fn *fn, void *arg)
{
    if (t->n_workers < 2) {
        fn(0, arg);
        return;
    }
    post(t, JOB_RUN, fn, arg);
    fn(0, arg);
    nib_team_barrier(t, 0);
}

struct call {
    nib_team_fn *fn;
    void *arg;
};

static void call_workers(uint32_t w, void *arg)
{
    const struct call *c = arg;
    if (w)
        c->fn(w, c->arg);
}

void nib_team_call(struct nib_team *t, nib_team_fn *fn, void *arg)
{
    if (t->n_workers < 2)
        return;
    struct call c = {fn, arg}; /* on this stack until the job's barrier */
    nib_team_run(t, call_workers, &c);
}

void nib_team_stop(struct nib_team *t)
{
    if (t->n_workers < 2)
        return;
    post(t, JOB_STOP, NULL, NULL);
}

void nib_team_worker(struct nib_team *t, uint32_t w)
{
    /* Workers join before the first job is posted (seq 0), so starting
     * from 0 never misses one, however late this thread gets here. */
    uint32_t seen = 0;
    for (;;) {
        /* acquire (in spin_then_park): pairs with the release of seq in post() */
        seen = spin_then_park(&t->seq, seen, t->spin_ns, 255u, &t->n_parked, NULL);
        if (t->job == JOB_STOP)
            return;
        if (t->job == JOB_RUN) {
            t->fn(w, t->arg);
            nib_team_barrier(t, w);
        }
    }
}

/* --- plain threads ------------------------------------------------------------ */

struct spawn_arg {
    struct nib_team *t;
    uint32_t w;
    int pin;
    uint32_t cpu;
    uint32_t started;
};

static void *spawn_main(void *p)
{
    struct spawn_arg *a = p;
    struct nib_team *t = a->t;
    uint32_t w = a->w;
    if (a->pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(a->cpu, &set);
        sched_setaffinity(0, sizeof set, &set); /* best effort */
    }
    /* release: pairs with the acquire in nib_team_spawn(); a is dead after it */
    nib_store_rel(&a->started, 1);
    nib_team_worker(t, w);
    return NULL;
}

int nib_team_spawn(struct nib_team *t, const uint32_t *cpus, pthread_t *tids)
{
    if (cpus) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[0], &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    for (uint32_t w = 1; w < t->n_workers; w++) {
        struct spawn_arg a = {t, w, cpus != NULL, cpus ? cpus[w] : 0, 0};
        int rc = pthread_create(&tids[w - 1], NULL, spawn_main, &a);
        if (rc) {
            /* Workers 1..w-1 run; the team cannot work without w: stop them. */
            post(t, JOB_STOP, NULL, NULL);
            for (uint32_t j = 1; j < w; j++)
                pthread_join(tids[j - 1], NULL);
            return rc;
        }
        /* a lives on this stack: wait until the thread has read it.
         * acquire: pairs with the release in spawn_main() */
        while (!nib_load_acq(&a.started))
            nib_cpu_relax();
    }
    return 0;
}

void nib_team_join(struct nib_team *t, pthread_t *tids)
{
    nib_team_stop(t);
    for (uint32_t w = 1; w < t->n_workers; w++)
        pthread_join(tids[w - 1], NULL);
}
