#include "rt/team.h"

#include <errno.h>
#include <linux/futex.h>
#include <limits.h>
#include <sched.h>
#include <stdalign.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt/exec.h"

enum { JOB_NONE, JOB_TOKEN, JOB_CALL, JOB_STOP };

struct nib_team {
    /* line 0: read-only after nib_team_new */
    alignas(64) const struct nib_blob_view *v;
    uint8_t *arena;
    uint8_t *barrier_before; /* n_ops flags, right after this struct */
    uint8_t *wscratch;       /* workers 1..n-1's private scratch, wscratch_size each */
    uint32_t n_workers;
    uint32_t n_ops;
    uint32_t n_barriers;
    uint32_t leader_sense;   /* worker 0's barrier sense (only it touches it) */
    uint64_t spin_ns;
    uint64_t barrier_spin_ns;
    /* line 1: the job, written by the leader before it bumps seq */
    alignas(64) uint32_t job;
    uint32_t m, pos;         /* the pass: m tokens from position pos */
    void (*fn)(uint32_t w, void *arg);
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
};

#define load_acq(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define store_rel(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

uint64_t nib_team_align(void)
{
    return 64;
}

/* Per-worker scratch stride: whole pages, so no two workers share a line. */
static uint64_t scratch_stride(const struct nib_blob_view *v)
{
    return ((uint64_t)v->h->wscratch_size + 4095) & ~4095ull;
}

static uint64_t map_bytes(const struct nib_blob_view *v)
{
    return (sizeof(struct nib_team) + v->h->n_ops + 4095) & ~4095ull;
}

uint64_t nib_team_footprint(uint32_t n_workers, const struct nib_blob_view *v)
{
    return map_bytes(v) + (n_workers > 1 ? (uint64_t)(n_workers - 1) * scratch_stride(v) : 0);
}

/* Worker w's private scratch. */
static uint8_t *worker_scratch(const struct nib_team *t, uint32_t w)
{
    if (w == 0)
        return t->arena + t->v->h->wscratch_off;
    return t->wscratch + (uint64_t)(w - 1) * scratch_stride(t->v);
}

/* An access by worker w since the last barrier. Two conflict when they are
 * by different workers, overlap, and at least one writes. */
struct tagged {
    uint64_t begin, end;
    uint32_t w, write;
};

#define EPOCH_MAX 1024

static void plan_barriers(struct nib_team *t)
{
    struct tagged epoch[EPOCH_MAX];
    uint32_t n_epoch = 0, W = t->n_workers;
    t->n_barriers = 0;
    for (uint32_t i = 0; i < t->n_ops; i++) {
        const struct nib_op *op = &t->v->ops[i];
        int need = 0;
        uint32_t n_new = 0;
        for (uint32_t w = 0; w < W; w++) {
            struct nib_access a[NIB_ACCESS_MAX];
            int na = nib_exec_access(t->v, op, w, W, a);
            n_new += (uint32_t)na;
            for (int k = 0; k < na && !need; k++)
                for (uint32_t j = 0; j < n_epoch && !need; j++) {
                    const struct tagged *b = &epoch[j];
                    need = b->w != w && (a[k].write || b->write) && a[k].begin < b->end &&
                           b->begin < a[k].end;
                }
        }
        /* An epoch that cannot hold this op's accesses ends here too (and a
         * team too big to list one op's accesses barriers before every op). */
        if (W > 1 && (need || n_epoch + n_new > EPOCH_MAX || W * NIB_ACCESS_MAX > EPOCH_MAX)) {
            t->barrier_before[i] = 1;
            t->n_barriers++;
            n_epoch = 0;
        } else {
            t->barrier_before[i] = 0;
        }
        for (uint32_t w = 0; w < W && n_epoch + NIB_ACCESS_MAX <= EPOCH_MAX; w++) {
            struct nib_access a[NIB_ACCESS_MAX];
            int na = nib_exec_access(t->v, op, w, W, a);
            for (int k = 0; k < na; k++)
                epoch[n_epoch++] = (struct tagged){a[k].begin, a[k].end, w, a[k].write};
        }
    }
    if (W > 1)
        t->n_barriers++; /* the one that ends every token */
}

struct nib_team *nib_team_new(void *mem, const struct nib_blob_view *v, uint8_t *arena,
                              uint32_t n_workers, uint64_t spin_ns, uint64_t barrier_spin_ns)
{
    if (n_workers < 1 || n_workers > NIB_TEAM_MAX_WORKERS || ((uintptr_t)mem & 63))
        return NULL;
    struct nib_team *t = mem;
    memset(t, 0, sizeof *t);
    t->v = v;
    t->arena = arena;
    t->barrier_before = (uint8_t *)mem + sizeof *t;
    t->wscratch = (uint8_t *)mem + map_bytes(v);
    t->n_workers = n_workers;
    t->n_ops = v->h->n_ops;
    t->spin_ns = spin_ns;
    t->barrier_spin_ns = barrier_spin_ns;
    plan_barriers(t);
    return t;
}

uint32_t nib_team_workers(const struct nib_team *t)
{
    return t->n_workers;
}

uint32_t nib_team_barriers(const struct nib_team *t)
{
    return t->n_barriers;
}

const uint8_t *nib_team_barrier_map(const struct nib_team *t)
{
    return t->barrier_before;
}

uint32_t nib_team_parked(const struct nib_team *t)
{
    return __atomic_load_n(&t->n_parked, __ATOMIC_SEQ_CST);
}

uint64_t nib_team_sleeps(const struct nib_team *t)
{
    return __atomic_load_n(&t->bar_sleeps, __ATOMIC_RELAXED);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void futex_wait(uint32_t *word, uint32_t val)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Sense-reversing central barrier: the last to arrive resets the count and
 * flips the shared sense; everyone else spins until it flips (and, after
 * barrier_spin_ns, sleeps on it: see team.h). */
static void barrier(struct nib_team *t, uint32_t *sense)
{
    uint32_t s = *sense ^ 1u;
    *sense = s;
    if (__atomic_add_fetch(&t->bar_count, 1, __ATOMIC_ACQ_REL) == t->n_workers) {
        __atomic_store_n(&t->bar_count, 0, __ATOMIC_RELAXED);
        /* seq_cst store then load, against the sleeper's seq_cst increment
         * then the kernel's check of bar_sense (as in post()). */
        __atomic_store_n(&t->bar_sense, s, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&t->bar_sleepers, __ATOMIC_SEQ_CST))
            futex_wake_all(&t->bar_sense);
        return;
    }
    uint64_t start = 0;
    uint32_t i = 0;
    while (load_acq(&t->bar_sense) != s) {
        cpu_relax();
        if ((++i & 1023u) != 0)
            continue;
        uint64_t now = now_ns();
        if (!start) {
            start = now;
        } else if (now - start >= t->barrier_spin_ns) {
            __atomic_add_fetch(&t->bar_sleepers, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&t->bar_sense, __ATOMIC_SEQ_CST) != s) {
                __atomic_add_fetch(&t->bar_sleeps, 1, __ATOMIC_RELAXED);
                futex_wait(&t->bar_sense, s ^ 1u);
            }
            __atomic_sub_fetch(&t->bar_sleepers, 1, __ATOMIC_SEQ_CST);
            start = 0;
        }
    }
}

static void run_ops(struct nib_team *t, uint32_t w, uint32_t *sense)
{
    const struct nib_op *ops = t->v->ops;
    const uint32_t m = t->m, pos = t->pos, n = t->n_workers;
    uint8_t *scratch = worker_scratch(t, w);
    for (uint32_t i = 0; i < t->n_ops; i++) {
        if (t->barrier_before[i])
            barrier(t, sense);
        nib_exec_op(t->v, t->arena, scratch, &ops[i], m, pos, w, n);
    }
    if (n > 1)
        barrier(t, sense);
}

/* Leader: publish the job written into t, waking parked workers. */
static void post(struct nib_team *t)
{
    /* seq_cst store then seq_cst load, against the worker's seq_cst
     * increment of n_parked then the kernel's check of seq: either the
     * worker sees the new seq and does not sleep, or we see it parked. */
    __atomic_store_n(&t->seq, t->seq + 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&t->n_parked, __ATOMIC_SEQ_CST))
        futex_wake_all(&t->seq);
}

void nib_team_run(struct nib_team *t, uint32_t m, uint32_t pos)
{
    t->m = m;
    t->pos = pos;
    if (t->n_workers > 1) {
        t->job = JOB_TOKEN;
        post(t);
    }
    run_ops(t, 0, &t->leader_sense);
}

void nib_team_call(struct nib_team *t, void (*fn)(uint32_t w, void *arg), void *arg)
{
    if (t->n_workers < 2)
        return;
    t->job = JOB_CALL;
    t->fn = fn;
    t->arg = arg;
    post(t);
    barrier(t, &t->leader_sense);
}

void nib_team_stop(struct nib_team *t)
{
    if (t->n_workers < 2)
        return;
    t->job = JOB_STOP;
    post(t);
}

/* Wait until seq moves past seen: spin for spin_ns (checking the clock,
 * a vDSO call, every 256 rounds), then park. */
static uint32_t wait_job(struct nib_team *t, uint32_t seen)
{
    uint64_t start = 0;
    uint32_t i = 0, s;
    while ((s = load_acq(&t->seq)) == seen) {
        cpu_relax();
        if ((++i & 255u) != 0)
            continue;
        uint64_t now = now_ns();
        if (!start) {
            start = now;
        } else if (now - start >= t->spin_ns) {
            __atomic_add_fetch(&t->n_parked, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&t->seq, __ATOMIC_SEQ_CST) == seen)
                futex_wait(&t->seq, seen);
            __atomic_sub_fetch(&t->n_parked, 1, __ATOMIC_SEQ_CST);
            start = 0;
        }
    }
    return s;
}

void nib_team_worker(struct nib_team *t, uint32_t w)
{
    /* Workers join before the first job is posted (seq 0), so starting
     * from 0 never misses one, however late this thread gets here. */
    uint32_t seen = 0, sense = 0;
    for (;;) {
        seen = wait_job(t, seen);
        switch (t->job) {
        case JOB_STOP:
            return;
        case JOB_TOKEN:
            run_ops(t, w, &sense);
            break;
        case JOB_CALL:
            t->fn(w, t->arg);
            barrier(t, &sense);
            break;
        default:
            break;
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
    store_rel(&a->started, 1);
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
            t->job = JOB_STOP;
            post(t);
            for (uint32_t j = 1; j < w; j++)
                pthread_join(tids[j - 1], NULL);
            return rc;
        }
        /* a lives on this stack: wait until the thread has read it. */
        while (!load_acq(&a.started))
            cpu_relax();
    }
    return 0;
}

void nib_team_join(struct nib_team *t, pthread_t *tids)
{
    nib_team_stop(t);
    for (uint32_t w = 1; w < t->n_workers; w++)
        pthread_join(tids[w - 1], NULL);
}
