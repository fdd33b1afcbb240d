/* Boot step: worker threads. Each pins itself to its CPU, checks with
 * getcpu that it runs there and on the expected node, blocks every signal
 * (SIGTERM and friends go to the serving thread), installs the worker
 * seccomp filter, reports, and only then enters the team loop. The boot
 * waits for every report: a worker that cannot do all of that stops the
 * boot with its message. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "boot/boot.h"
#include "proto/private/sync.h"

struct worker_arg {
    struct nib_team *t;
    uint32_t w, cpu, node;
    int seccomp;
    uint32_t state; /* 0 starting, 1 ready, 2 failed */
    char err[192];
};

static struct worker_arg args[NIB_TEAM_MAX_WORKERS];

static void *worker_main(void *p)
{
    struct worker_arg *a = p;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    int bad = boot_pin_self(a->cpu, a->node, a->err, sizeof a->err) ||
              (a->seccomp && boot_seccomp(BOOT_FILTER_WORKER, a->err, sizeof a->err));
    /* release: pairs with the acquire in boot_start_workers(); a->err is written */
    nib_store_rel(&a->state, bad ? 2u : 1u);
    if (bad)
        return NULL;
    nib_team_worker(a->t, a->w); /* never returns in the appliance */
    return NULL;
}

int boot_start_workers(struct nib_team *t, const struct boot_workers *w, int seccomp, char *err,
                       size_t errlen)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (uint32_t i = 1; i < w->n; i++) {
        struct worker_arg *a = &args[i];
        *a = (struct worker_arg){
            .t = t, .w = i, .cpu = w->cpus[i], .node = w->nodes[i], .seccomp = seccomp};
        pthread_t tid;
        int rc = pthread_create(&tid, &attr, worker_main, a);
        if (rc) {
            snprintf(err, errlen, "cannot start worker %u: %s", i, strerror(rc));
            return -1;
        }
        uint32_t st;
        /* acquire: pairs with the release in worker_main() */
        while ((st = nib_load_acq(&a->state)) == 0)
            sched_yield();
        if (st == 2) {
            snprintf(err, errlen, "worker %u (cpu %u): %s", i, w->cpus[i], a->err);
            return -1;
        }
    }
    pthread_attr_destroy(&attr);
    return 0;
}
