/* The appliance: boot sequence and serve loop.
 *
 *   1. validate the embedded blob (magic, version, every size and offset,
 *      CRC32C) and check the CPU has the ISA it was packed for;
 *   2. reserve the runtime memory (arena + KV cache) once, huge-page
 *      advised and prefaulted: nothing is allocated after this point;
 *   3. create the shared-memory segment (O_EXCL, mode 0600), write its
 *      header, set READY;
 *   4. serve requests until `nib stop`, SIGTERM or SIGINT; then post a final
 *      status for anything still queued, remove the segment and exit 0.
 *
 * Any failure before READY prints "nibble: refusing to boot: ..." and exits
 * non-zero. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "boot/cpu_isa.h"
#include "model_blob/blob_view.h"
#include "rt/serve.h"
#include "rt/shm_layout.h"
#include "rt/shm_name.h"

extern const unsigned char nib_blob_start[], nib_blob_end[];

static volatile int stop_signal;

static void on_signal(int sig)
{
    (void)sig;
    stop_signal = 1;
}

static int refuse(const char *what, const char *msg)
{
    fprintf(stderr, "nibble: refusing to boot: %s: %s\n", what, msg);
    return 2;
}

struct options {
    const char *name;
    unsigned spin_us;
    int group_access;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: appliance [--name NAME] [--spin-us N] [--group-access]\n"
               "  --name NAME      shared-memory segment name (default %s)\n"
               "  --spin-us N      microseconds to spin when idle before parking (default 1000)\n"
               "  --group-access   create the segment mode 0660 instead of 0600\n",
            NIB_SHM_DEFAULT_NAME);
}

static int parse_args(int argc, char **argv, struct options *o)
{
    o->name = NIB_SHM_DEFAULT_NAME;
    o->spin_us = 1000;
    o->group_access = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--name") && i + 1 < argc) {
            o->name = argv[++i];
        } else if (!strcmp(argv[i], "--spin-us") && i + 1 < argc) {
            char *end;
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end || v > 10000000) {
                fprintf(stderr, "appliance: --spin-us wants 0..10000000\n");
                return -1;
            }
            o->spin_us = (unsigned)v;
        } else if (!strcmp(argv[i], "--group-access")) {
            o->group_access = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "appliance: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

static int pid_alive(uint32_t pid)
{
    if (pid == 0)
        return 0;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* Create the segment exclusively. A segment left by an appliance that is no
 * longer running is removed (and said so); one whose appliance still runs
 * is never touched. */
static void *create_segment(const char *path, int mode, char *err, size_t errlen)
{
    int fd = shm_open(path, O_CREAT | O_EXCL | O_RDWR, (mode_t)mode);
    if (fd < 0 && errno == EEXIST) {
        int ofd = shm_open(path, O_RDONLY, 0);
        struct stat st;
        uint32_t pid = 0, state = NIB_APP_STOPPED;
        if (ofd >= 0 && fstat(ofd, &st) == 0 && (uint64_t)st.st_size >= sizeof(struct nib_shm_header)) {
            const struct nib_shm_header *h =
                mmap(NULL, sizeof *h, PROT_READ, MAP_SHARED, ofd, 0);
            if (h != MAP_FAILED) {
                if (h->magic == NIB_SHM_MAGIC) {
                    pid = h->appliance_pid;
                    state = nib_load_acq(&h->state);
                }
                munmap((void *)h, sizeof *h);
            }
        }
        if (ofd >= 0)
            close(ofd);
        if (pid && (uint32_t)getpid() != pid && pid_alive(pid) && state != NIB_APP_STOPPED) {
            snprintf(err, errlen, "segment %s is in use by a running appliance (pid %u); "
                     "stop it or choose another --name", path, pid);
            return NULL;
        }
        fprintf(stderr, "nibble: removing stale segment %s (left by pid %u)\n", path, pid);
        shm_unlink(path);
        fd = shm_open(path, O_CREAT | O_EXCL | O_RDWR, (mode_t)mode);
    }
    if (fd < 0) {
        snprintf(err, errlen, "cannot create segment %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fchmod(fd, (mode_t)mode) != 0 || ftruncate(fd, (off_t)NIB_SHM_SIZE) != 0) {
        snprintf(err, errlen, "cannot size segment %s: %s", path, strerror(errno));
        close(fd);
        shm_unlink(path);
        return NULL;
    }
    void *p = mmap(NULL, NIB_SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cannot map segment %s: %s", path, strerror(errno));
        shm_unlink(path);
        return NULL;
    }
    return p;
}

/* Runtime memory: reserved once, huge-page advised, touched so that no page
 * fault happens on the token path. */
static void *reserve_memory(uint64_t bytes)
{
    const uint64_t huge = 2u << 20;
    uint64_t len = (bytes + huge - 1) / huge * huge;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    madvise(p, len, MADV_HUGEPAGE);
    memset(p, 0, len);
    return p;
}

static void park(struct nib_shm_header *h, uint32_t seen, long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    syscall(SYS_futex, &h->doorbell, FUTEX_WAIT, seen, &ts, NULL, 0);
}

/* Post a final status for every request still queued so no host waits forever. */
static void drain(void *shm)
{
    for (uint32_t i = 0; i < NIB_SLOTS; i++) {
        struct nib_slot *slot = nib_shm_slot(shm, i);
        uint32_t st = NIB_SLOT_SUBMITTED;
        if (nib_cas(&slot->state, &st, NIB_SLOT_RUNNING)) {
            slot->status = NIB_ST_SHUTDOWN;
            nib_store_rel(&slot->state, NIB_SLOT_DONE);
        }
    }
}

int main(int argc, char **argv)
{
    struct options o;
    char err[256];
    if (parse_args(argc, argv, &o))
        return 2;
    char path[NIB_SHM_NAME_MAX + 2];
    if (nib_shm_path(o.name, path, sizeof path, err, sizeof err))
        return refuse("--name", err);

    /* 1. the blob */
    struct nib_blob_view v;
    uint64_t blob_size = (uint64_t)(nib_blob_end - nib_blob_start);
    if (nib_blob_open(&v, nib_blob_start, blob_size, 1, err, sizeof err))
        return refuse("blob", err);
    if (nib_cpu_check(v.h->isa_required, err, sizeof err))
        return refuse("cpu", err);
    const struct nib_hparams *hp = &v.h->hp;

    /* 2. memory */
    uint64_t scratch_size = nib_server_scratch_footprint();
    uint64_t mem_size = (v.mem_size + 63) & ~63ull;
    uint8_t *mem = reserve_memory(mem_size + scratch_size);
    if (!mem)
        return refuse("memory", "cannot reserve the arena and KV cache");

    /* 3. the segment */
    void *shm = create_segment(path, o.group_access ? 0660 : 0600, err, sizeof err);
    if (!shm)
        return refuse("segment", err);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t epoch = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    struct nib_server s;
    nib_server_init(&s, &v, mem, mem + mem_size, shm, (uint32_t)getpid(), epoch);
    s.stop_flag = &stop_signal;
    struct nib_shm_header *h = s.hdr;
    nib_store_rel(&h->state, NIB_APP_READY);
    fprintf(stderr,
            "nibble: ready on %s: dim %u, %u layers, %u heads (%u kv), vocab %u, ctx %u; "
            "blob %llu bytes, crc32c %08x ok; runtime memory %llu bytes\n",
            path, hp->dim, hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->vocab_size,
            hp->ctx_len, (unsigned long long)blob_size, v.h->crc32c,
            (unsigned long long)v.mem_size);

    /* 4. serve */
    uint64_t last_reclaim = 0;
    while (!stop_signal && !nib_load_acq(&h->stop_requested)) {
        uint32_t bell = nib_load_acq(&h->doorbell);
        uint64_t now = nib_now_ns();
        nib_store_rel(&h->heartbeat_ns, now);
        if (nib_server_poll(&s))
            continue;
        if (now - last_reclaim > 100000000ull) {
            nib_server_reclaim(&s, pid_alive);
            last_reclaim = now;
        }
        /* Idle: spin a while (a request that arrives now is picked up at
         * once), then park on the doorbell until a host rings it. */
        uint64_t spin_until = now + (uint64_t)o.spin_us * 1000u;
        while (nib_load_acq(&h->doorbell) == bell && nib_now_ns() < spin_until &&
               !nib_load_acq(&h->stop_requested) && !stop_signal)
            nib_cpu_relax();
        if (nib_load_acq(&h->doorbell) == bell)
            park(h, bell, 100000000L);
    }

    nib_store_rel(&h->state, NIB_APP_STOPPING);
    drain(shm);
    nib_store_rel(&h->state, NIB_APP_STOPPED);
    fprintf(stderr, "nibble: stopped (%llu requests, %llu tokens generated)\n",
            (unsigned long long)s.stats->requests_done,
            (unsigned long long)s.stats->tokens_generated);
    shm_unlink(path);
    munmap(shm, NIB_SHM_SIZE);
    return 0;
}
