/* The appliance: boot sequence and serve loop (docs/runtime.md).
 *
 *   1. validate the embedded blob (magic, version, every size and offset,
 *      CRC32C) and check the CPU has the ISA it was packed for;
 *   2. compare the machine with the topology table built in; choose the
 *      workers (one per physical core); pin this thread as worker 0;
 *   3. copy the blob into huge-page memory, each worker's weight shards on
 *      its node; release the file-backed pages; reserve and prefault the
 *      arena, KV cache and team; mlockall; report huge pages from smaps;
 *   4. start the other workers: pinned, verified, under seccomp;
 *   5. write the header memfd (made with the rings in step 3, boot/channel.c)
 *      and the boot report, seal it, bind the control socket, seccomp this
 *      thread, set READY;
 *   6. serve requests until `nib stop`, SIGTERM or SIGINT; then post a final
 *      status for anything still queued, remove the socket (if still ours)
 *      and exit 0.
 *
 * The name is locked (flock) right after the arguments and the blob are
 * checked, so a second appliance on a live name is refused at once. After
 * step 5 nothing is allocated or mapped and the token path makes no system
 * call. Any failure before READY prints "nibble: refusing to boot: ..." and
 * exits 2. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "boot/boot.h"
#include "boot/ivshmem.h"
#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "proto/private/sync.h"
#include "proto/shm_layout.h"
#include "proto/shm_name.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/prefetch_tune.h"
#include "rt/serve.h"
#include "rt/team.h"
#include "rt/tokenizer.h"
#include "rt/topology.h"
#include "rt/vm_link.h"
#include "proto/vm_region.h"

/* model_blob/blob_incbin.S. Only the start and the size are referenced from
 * C: the blob is the last thing in the image (linker/nib_blob.ld), so its
 * start is near the code but its end may be gigabytes away, beyond what a
 * 32-bit PC-relative reference reaches; the size is a 64-bit constant in
 * .rodata. */
extern const unsigned char nib_blob_start[];
extern const uint64_t nib_blob_size;

#ifndef NIB_VERSION
#error "NIB_VERSION (the meson project version) is passed by linker/link-appliance.sh --version"
#endif

/* The chat renderer (rt/chat) recurses, bounded by the program's checked
 * depth, on the serving thread, which is this main thread: up to about
 * 1 MiB of stack for the deepest template. A blob with a chat program needs
 * a stack limit with room to spare (raised to it when the hard limit
 * allows), and that stack touched now, so mlockall() holds it resident and
 * no request faults it in. */
#define BOOT_CHAT_STACK_LIMIT (8u << 20)
#define BOOT_CHAT_STACK_TOUCH (2u << 20)

static void __attribute__((noinline)) touch_stack(size_t n)
{
    volatile char *p = __builtin_alloca(n);
    for (size_t i = 0; i < n; i += 4096)
        p[i] = 0;
}

static int chat_stack(char *err, size_t errlen)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < BOOT_CHAT_STACK_LIMIT) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < BOOT_CHAT_STACK_LIMIT) {
            snprintf(err, errlen,
                     "the stack limit is %llu KiB (hard); the chat template renderer needs "
                     "%u KiB: raise it (ulimit -s %u) or compile with --no-chat-template",
                     (unsigned long long)rl.rlim_max >> 10, BOOT_CHAT_STACK_LIMIT >> 10,
                     BOOT_CHAT_STACK_LIMIT >> 10);
            return -1;
        }
        rl.rlim_cur = BOOT_CHAT_STACK_LIMIT;
        if (setrlimit(RLIMIT_STACK, &rl)) {
            snprintf(err, errlen, "raising the stack limit to %u KiB: %s",
                     BOOT_CHAT_STACK_LIMIT >> 10, strerror(errno));
            return -1;
        }
    }
    touch_stack(BOOT_CHAT_STACK_TOUCH);
    return 0;
}

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

#define DEFAULT_SPIN_US 20000u
#define DEFAULT_BARRIER_SPIN_US 200u

struct options {
    const char *name;
    unsigned spin_us;
    unsigned barrier_spin_us;
    int group_access;
    uint32_t max_hosts;
    uint32_t workers; /* 0: one per physical core */
    int ignore_topology;
    int seccomp;
    int digest;
    const char *debug_syscall; /* NULL, "serve" or "worker" */
    const char *vm_region;     /* NULL; "auto": the ivshmem device; else a file */
    int64_t prefetch;          /* -1: auto (the table's, else measured at boot); else bytes */
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: appliance [OPTIONS]\n"
            "  --name NAME        the name hosts attach to (default %s): socket\n"
            "                     <runtime dir>/NAME.sock (docs/ring.md)\n"
            "  --max-hosts N      hosts attached at once, one ring each (default %u, 1..%u)\n"
            "  --spin-us N        idle: spin N microseconds before parking (default %u)\n"
            "  --barrier-spin-us N  a barrier wait longer than this sleeps (default %u)\n"
            "  --group-access     let processes of this group attach: runtime dir 0750,\n"
            "                     socket 0660 (default: this uid and root only)\n"
            "  --workers N        use N workers (default: one per physical core)\n"
            "  --ignore-topology  boot even if the machine differs from the table built in\n"
            "  --digest           keep a CRC32C of every logit in the stats page\n"
            "  --no-seccomp       run without the seccomp filters (debugging only)\n"
            "  --prefetch auto|BYTES  how far ahead the kernels prefetch the weights: auto\n"
            "                     (default) takes the topology table's distance, else\n"
            "                     measures the candidates at boot (docs/runtime.md)\n"
            "  --vm-region auto|FILE  serve the hosts of the machine around this virtual\n"
            "                     machine through the region shared with its multiplexer\n"
            "                     (docs/ring.md 19): auto finds the ivshmem PCI device;\n"
            "                     FILE maps a file instead (tests)\n"
            "  --version          print the version and the embedded blob's format, and exit\n"
            "  --describe         print the embedded blob's size and CRC32C and the topology\n"
            "                     table built in, and exit (nib image checks them)\n"
            "  --debug-forbidden-syscall serve|worker\n"
            "                     after READY, make one system call outside the allow-list\n"
            "                     (the filter must kill the process: a test hook)\n",
            NIB_SHM_DEFAULT_NAME, NIB_HOSTS_DEFAULT, NIB_HOSTS_MAX, DEFAULT_SPIN_US,
            DEFAULT_BARRIER_SPIN_US);
}

static int parse_args(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof *o);
    o->name = NIB_SHM_DEFAULT_NAME;
    o->spin_us = DEFAULT_SPIN_US;
    o->barrier_spin_us = DEFAULT_BARRIER_SPIN_US;
    o->seccomp = 1;
    o->max_hosts = NIB_HOSTS_DEFAULT;
    o->prefetch = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--name") && has_val) {
            o->name = argv[++i];
        } else if (!strcmp(a, "--max-hosts") && has_val) {
            char *end;
            const char *s = argv[++i];
            unsigned long v = strtoul(s, &end, 10);
            if (*s < '0' || *s > '9' || *end || v < 1 || v > NIB_HOSTS_MAX) {
                fprintf(stderr, "appliance: --max-hosts wants 1..%u, not '%s'\n", NIB_HOSTS_MAX, s);
                return -1;
            }
            o->max_hosts = (uint32_t)v;
        } else if ((!strcmp(a, "--spin-us") || !strcmp(a, "--barrier-spin-us") ||
                    !strcmp(a, "--workers")) &&
                   has_val) {
            char *end;
            const char *s = argv[++i];
            unsigned long v = strtoul(s, &end, 10);
            int workers = !strcmp(a, "--workers");
            if (*s < '0' || *s > '9' || *end ||
                (workers ? (v < 1 || v > NIB_TEAM_MAX_WORKERS) : v > 10000000)) {
                fprintf(stderr, "appliance: %s wants %s, not '%s'\n", a,
                        workers ? "1..256" : "0..10000000", s);
                return -1;
            }
            if (workers)
                o->workers = (uint32_t)v;
            else if (!strcmp(a, "--spin-us"))
                o->spin_us = (unsigned)v;
            else
                o->barrier_spin_us = (unsigned)v;
        } else if (!strcmp(a, "--group-access")) {
            o->group_access = 1;
        } else if (!strcmp(a, "--ignore-topology")) {
            o->ignore_topology = 1;
        } else if (!strcmp(a, "--digest")) {
            o->digest = 1;
        } else if (!strcmp(a, "--vm-region") && has_val) {
            o->vm_region = argv[++i];
        } else if (!strcmp(a, "--prefetch") && has_val) {
            char *end;
            const char *s = argv[++i];
            unsigned long v = strtoul(s, &end, 10);
            if (!strcmp(s, "auto")) {
                o->prefetch = -1;
            } else if (*s < '0' || *s > '9' || *end || v > NIB_PREFETCH_MAX ||
                       !nib_prefetch_valid((uint32_t)v)) {
                fprintf(stderr,
                        "appliance: --prefetch wants auto or a multiple of 64 up to %d, "
                        "not '%s'\n",
                        NIB_PREFETCH_MAX, s);
                return -1;
            } else {
                o->prefetch = (int64_t)v;
            }
        } else if (!strcmp(a, "--no-seccomp")) {
            o->seccomp = 0;
        } else if (!strcmp(a, "--debug-forbidden-syscall") && has_val) {
            o->debug_syscall = argv[++i];
            if (strcmp(o->debug_syscall, "serve") && strcmp(o->debug_syscall, "worker")) {
                fprintf(stderr, "appliance: --debug-forbidden-syscall wants serve or worker\n");
                return -1;
            }
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--describe")) {
            /* what `nib image` checks against its BLOB and manifest: the
             * embedded header as it is (not validated: a corrupt blob must
             * still reach the boot that refuses it) and the topology table */
            struct nib_blob_header bh;
            memcpy(&bh, nib_blob_start, sizeof bh);
            printf("blob size %llu crc32c %08x format %u\n", (unsigned long long)nib_blob_size,
                   bh.crc32c, bh.version);
            nib_topo_write(stdout, &nib_topology_table);
            exit(0);
        } else if (!strcmp(a, "--version")) {
            /* the header's version as embedded: readable even when the blob is not */
            uint32_t bv;
            memcpy(&bv, nib_blob_start + offsetof(struct nib_blob_header, version), sizeof bv);
            printf("appliance %s (blob format %u)\n", NIB_VERSION, bv);
            exit(0);
        } else {
            fprintf(stderr, "appliance: unknown argument '%s'\n", a);
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

static double pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static double mib(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

static void forbidden_on_worker(uint32_t w, void *arg)
{
    (void)arg;
    if (w == 1)
        syscall(SYS_getppid); /* not on the worker allow-list: the filter kills us */
}

int main(int argc, char **argv)
{
    struct options o;
    char err[1024];
    if (parse_args(argc, argv, &o))
        return 2;
    char nerr[256];
    if (nib_name_check(o.name, nerr, sizeof nerr))
        return refuse("--name", nerr);

    /* 1. the blob, as embedded */
    struct nib_blob_view v;
    uint64_t blob_size = nib_blob_size;
    if (nib_blob_open(&v, nib_blob_start, blob_size, 1, err, sizeof err))
        return refuse("blob", err);
    /* A vision model has no tokenizer: tensors in, tensors out. */
    const int vision = v.h->model_kind == NIB_MODEL_VISION;
    if (vision ? nib_server_tensor_check(&v, err, sizeof err) : nib_tok_check(&v, err, sizeof err))
        return refuse("blob", err);
    size_t chat_len;
    if (nib_tok_chat_program(&v, &chat_len) && chat_stack(err, sizeof err))
        return refuse("stack", err);
    if (nib_cpu_check(v.h->isa_required, err, sizeof err))
        return refuse("cpu", err);
    uint32_t blob_crc = v.h->crc32c;

    /* The name: runtime dir, then the lock (held until exit). */
    static struct boot_channel ch;
    if (boot_name(o.name, o.group_access, &ch, err, sizeof err))
        return refuse("name", err);
    /* The executor, bound to its memory and team in step 3; the server runs it. */
    struct nib_exec ex = {.v = &v, .qk = nib_exec_kernels(nib_cpu_isa())};
    fprintf(stderr, "nibble: quantized kernels: %s\n", nib_qkernels_label(ex.qk));

    /* 2. the machine */
    static struct boot_workers w;
    if (boot_topology(o.ignore_topology, o.workers, &w, err, sizeof err))
        return refuse("topology", err);
    if (boot_pin_self(w.cpus[0], w.nodes[0], err, sizeof err))
        return refuse("topology", err);

    /* 3. memory */
    static struct boot_memory m;
    if (boot_move_blob(&v, nib_blob_start, blob_size, &w, &m, err, sizeof err))
        return refuse("memory", err);
    const struct nib_hparams *hp = &v.h->hp;
    uint64_t mem_size = (v.mem_size + 63) & ~63ull;
    uint64_t scratch_size = (nib_server_scratch_footprint(&v) + 63) & ~63ull;
    uint64_t team_size = (nib_team_footprint(w.n) + 63) & ~63ull;
    uint64_t plan_size = nib_exec_team_footprint(w.n, &v);
    if (boot_reserve_arena(mem_size + scratch_size + team_size + plan_size, &m, err, sizeof err))
        return refuse("memory", err);
    uint8_t *mem = m.arena, *scratch = mem + mem_size, *team_mem = scratch + scratch_size;
    struct nib_team *team = nib_team_new(team_mem, w.n, (uint64_t)o.spin_us * 1000u,
                                         (uint64_t)o.barrier_spin_us * 1000u);
    if (!team)
        return refuse("workers", "cannot lay out the thread team");
    ex.mem = mem;
    uint32_t n_barriers = nib_exec_set_team(&ex, team, team_mem + team_size);
    /* Everything a host will get, before mlockall (so it is locked too). */
    struct nib_shm_header geo;
    memset(&geo, 0, sizeof geo);
    nib_server_geometry(&v, &geo);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t epoch = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    struct nib_vmr_header *region = NULL;
    static uint64_t ring_offset[NIB_VMR_RINGS_MAX];
    if (o.vm_region) {
        region = boot_vm_region(o.vm_region, &geo, nib_server_header_size(&v), &o.max_hosts, epoch,
                                ring_offset, err, sizeof err);
        if (!region)
            return refuse("vm-region", err);
    } else if (boot_memfds(&ch, nib_server_header_size(&v), o.max_hosts, geo.ring_size, err,
                           sizeof err)) {
        return refuse("memfd", err);
    }
    boot_lock_memory(&m);
    if (boot_hugepage_report(&m, err, sizeof err))
        return refuse("memory", err);
#if NIB_HAVE_NUMA
    if (m.numa) {
        char per[256] = "";
        size_t used = 0;
        for (uint32_t n = 0; n < BOOT_NODES_REPORTED && n < m.numa_nodes; n++)
            used += (size_t)snprintf(per + used, sizeof per - used, "%snode %u %.2f MiB",
                                     n ? ", " : "", n, mib(m.shard_on_node[n]));
        boot_log("numa: %u node%s (libnuma); pages of matmul weight shards (%.2f MiB) bound to "
                 "their worker's node per %s page; found there (move_pages): %s; elsewhere %.2f "
                 "MiB%s",
                 m.numa_nodes, m.numa_nodes == 1 ? "" : "s", mib(m.shard_bytes),
                 m.placement_page == 4096 ? "4 KiB" : "2 MiB", per, mib(m.shard_misplaced),
                 m.verified ? "" : " (move_pages failed: not verified)");
    }
#else
    boot_log("numa: built without libnuma; weights stay where first touched (worker 0's node)");
#endif
    boot_log("memory: blob %.1f MiB copied to anonymous %s memory, file-backed copy released; "
             "huge pages: blob %.1f%% (%.1f of %.1f MiB), arena %.1f%% (%.1f of %.1f MiB)",
             mib(m.blob_size), m.hugetlb ? "hugetlbfs" : "THP", pct(m.blob_huge, m.blob_map),
             mib(m.blob_huge), mib(m.blob_map), pct(m.arena_huge, m.arena_map), mib(m.arena_huge),
             mib(m.arena_map));
    if (m.mlocked)
        boot_log("mlockall: all memory locked");
    else
        boot_log("mlockall: WARNING: failed (%s): pages may be swapped out; give the appliance "
                 "CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK",
                 m.mlock_err);

    /* 4. workers */
    if (boot_start_workers(team, &w, o.seccomp, err, sizeof err))
        return refuse("workers", err);
    {
        char list[512] = "";
        size_t used = 0;
        for (uint32_t i = 0; i < w.n && used < sizeof list - 16; i++)
            used +=
                (size_t)snprintf(list + used, sizeof list - used, "%s%u", i ? "," : "", w.cpus[i]);
        boot_log("workers: %u on cpus %s (%u node%s), %u barriers per token over %u ops; idle: "
                 "spin %u us, then park; barrier waits over %u us sleep",
                 w.n, list, w.n_nodes, w.n_nodes == 1 ? "" : "s", n_barriers, v.h->n_ops, o.spin_us,
                 o.barrier_spin_us);
    }
    /* the weight prefetch distance: --prefetch, else the table's (set in
     * step 2), else measured here on the team (rt/prefetch_tune.h) */
    if (o.prefetch >= 0) {
        nib_prefetch_set((uint32_t)o.prefetch);
        boot_log("kernels: weights prefetched %u bytes ahead (--prefetch)", nib_prefetch_bytes);
    } else if (!nib_topology_table.prefetch && !vision) {
        static struct nib_prefetch_tune tune;
        nib_prefetch_tune_init(&tune);
        if (nib_prefetch_tune_run(&ex, &tune, NIB_TUNE_ROUNDS, NIB_TUNE_BUDGET_NS) == 0) {
            char line[256];
            nib_prefetch_tune_describe(&tune, line, sizeof line);
            boot_log("kernels: weights prefetched %u bytes ahead (measured at boot, median pass "
                     "at each distance (ratio to the default's, paired by round): %s)",
                     nib_prefetch_bytes, line);
        }
    }

    /* 5. the header, the socket */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    static struct nib_server s;
    void *header = region ? (uint8_t *)region + NIB_VMR_APP_HEADER_OFFSET : ch.header;
    nib_server_init(&s, &v, mem, scratch, header, o.max_hosts, (uint32_t)getpid(), epoch);
    for (uint32_t i = 0; i < o.max_hosts; i++) {
        if (region)
            nib_server_set_ring(&s, i, (uint8_t *)region + ring_offset[i], -1);
        else
            nib_server_set_ring(&s, i, ch.ring[i], ch.ring_fd[i]);
    }
    s.header_fd = region ? -1 : ch.header_fd;
    s.uid = (uint32_t)geteuid();
    s.gid = (uint32_t)getegid();
    s.group_access = o.group_access;
    s.stop_flag = &stop_signal;
    ex.stats = s.stats;
    ex.digest = o.digest;
    s.exec = ex;
    struct nib_stats *st = s.stats;
    st->version = NIB_STATS_VERSION;
    st->n_workers = w.n;
    st->barriers_per_token = n_barriers;
    st->numa_nodes = m.numa_nodes;
    if (m.numa && m.verified) {
        st->placement_kib = (uint32_t)(m.placement_page / 1024);
        st->shard_bytes = m.shard_bytes;
        for (uint32_t n = 0; n < NIB_STATS_NODES; n++)
            st->node_shard_bytes[n] = m.shard_on_node[n];
        st->shard_misplaced_bytes = m.shard_misplaced;
        for (uint32_t i = 0; i < w.n && i < NIB_STATS_WORKER_NODES; i++)
            st->worker_nodes[i / 16] |= (uint64_t)(w.nodes[i] < 15 ? w.nodes[i] : 15)
                                        << (4 * (i % 16));
    }
    st->blob_bytes = m.blob_map;
    st->blob_huge_bytes = m.blob_huge;
    st->arena_bytes = m.arena_map;
    st->arena_huge_bytes = m.arena_huge;
    st->boot_flags = (m.mlocked ? NIB_BOOT_MLOCKED : 0) | (m.hugetlb ? NIB_BOOT_HUGETLB : 0) |
                     (m.numa ? NIB_BOOT_NUMA : 0) | (m.numa && m.verified ? NIB_BOOT_PLACED : 0) |
                     (w.overridden ? NIB_BOOT_TOPO_OVERRIDE : 0) |
                     (o.seccomp ? NIB_BOOT_SECCOMP : 0);
    static struct nib_vm_link vm;
    if (region) {
        /* The hosts are on the other side of the region: no socket here. */
        nib_vm_link_init(&vm, region, o.max_hosts, nib_now_ns());
        s.vm = &vm;
        boot_log("hosts: up to %u attached at once through the VM region, a ring of %llu bytes "
                 "each (%u slots: prompt %u bytes, %u token ids, text %u bytes)",
                 o.max_hosts, (unsigned long long)geo.ring_size, geo.n_slots, geo.prompt_max,
                 geo.slot_tokens, geo.slot_text);
    } else {
        if (boot_seal_header(&ch, err, sizeof err))
            return refuse("memfd", err);
        if (boot_listen(&ch, err, sizeof err))
            return refuse("socket", err);
        s.listen_fd = ch.listen_fd;
        s.sock_path = ch.paths.sock;
        s.sock_dev = ch.sock_dev;
        s.sock_ino = ch.sock_ino;
        s.last_watch_ns = nib_now_ns();
        boot_log("hosts: up to %u attached at once, a ring of %llu bytes each (%u slots: prompt "
                 "%u bytes, %u token ids, text %u bytes); socket %s%s",
                 o.max_hosts, (unsigned long long)geo.ring_size, geo.n_slots, geo.prompt_max,
                 geo.slot_tokens, geo.slot_text, ch.paths.sock,
                 o.group_access ? " (group access)" : "");
    }
    if (o.seccomp) {
        boot_log("seccomp: workers allow %s", boot_seccomp_allowed(BOOT_FILTER_WORKER));
        boot_log("seccomp: serving thread allows %s", boot_seccomp_allowed(BOOT_FILTER_SERVE));
        if (boot_seccomp(BOOT_FILTER_SERVE, err, sizeof err)) {
            boot_unlisten(&ch);
            return refuse("seccomp", err);
        }
    } else {
        boot_log("seccomp: WARNING: disabled by --no-seccomp");
    }
    uint64_t allocs_ready[BOOT_ALLOC_KINDS];
    boot_alloc_read(allocs_ready);

    struct nib_shm_header *h = s.hdr;
    /* release: pairs with the acquire of state in nibhost.c nib_host_attach():
     * the header above is complete */
    nib_store_rel(&h->state, NIB_APP_READY);
    if (region)
        /* release: pairs with the multiplexer's acquire of guest_state
         * (docs/ring.md §19): the layout and the header page are complete */
        nib_store_rel(&region->guest_state, NIB_VMR_GUEST_READY);
    if (vision)
        fprintf(stderr,
                "nibble: ready on %s: vision model, %u inputs (%u bytes), %u outputs (%u bytes), "
                "%u ops; blob %llu bytes, crc32c %08x ok; runtime memory %llu bytes\n",
                region ? "the VM region" : ch.paths.sock, h->n_inputs, h->inputs_len, h->n_outputs,
                h->outputs_len, v.h->n_ops, (unsigned long long)blob_size, blob_crc,
                (unsigned long long)v.mem_size);
    else
        fprintf(stderr,
                "nibble: ready on %s: dim %u, %u layers, %u heads (%u kv), vocab %u, ctx %u; "
                "blob %llu bytes, crc32c %08x ok; runtime memory %llu bytes\n",
                region ? "the VM region" : ch.paths.sock, hp->dim, hp->n_layers, hp->n_heads,
                hp->n_kv_heads, hp->vocab_size, hp->ctx_len, (unsigned long long)blob_size,
                blob_crc, (unsigned long long)v.mem_size);

    if (o.debug_syscall && !strcmp(o.debug_syscall, "serve")) {
        boot_log("debug: making a forbidden system call (getppid) on the serving thread");
        syscall(SYS_getppid);
        boot_log("debug: the forbidden system call returned: the filter is NOT active");
    } else if (o.debug_syscall) {
        if (w.n < 2) {
            boot_log("debug: --debug-forbidden-syscall worker needs 2 or more workers");
        } else {
            boot_log("debug: making a forbidden system call (getppid) on worker 1");
            nib_team_call(team, forbidden_on_worker, NULL);
            boot_log("debug: the forbidden system call returned: the filter is NOT active");
        }
    }

    /* 6. serve */
    uint64_t spin_ns = (uint64_t)o.spin_us * 1000u;
    while (!nib_server_stopping(&s)) {
        if (nib_server_poll(&s))
            st->barrier_sleeps = nib_team_sleeps(team);
        else
            nib_server_idle(&s, spin_ns);
    }
    if (region)
        /* release: the multiplexer reads the final statuses after this */
        nib_store_rel(&region->guest_state, NIB_VMR_GUEST_STOPPING);
    nib_server_shutdown(&s);
    if (region)
        nib_store_rel(&region->guest_state, NIB_VMR_GUEST_STOPPED);
    fprintf(stderr, "nibble: stopped (%llu requests, %llu tokens generated)\n",
            (unsigned long long)st->requests_done, (unsigned long long)st->tokens_generated);
    boot_log("barrier waits that slept (oversubscribed CPUs): %llu",
             (unsigned long long)nib_team_sleeps(team));
    if (o.digest)
        boot_log("digest: logits crc32c %08x over %llu forward passes", s.exec.digest_crc,
                 (unsigned long long)st->tokens_run);
    if (boot_alloc_counting()) {
        uint64_t now_counts[BOOT_ALLOC_KINDS];
        boot_alloc_read(now_counts);
        char line[512] = "";
        size_t used = 0;
        for (int k = 0; k < BOOT_ALLOC_KINDS; k++)
            used += (size_t)snprintf(line + used, sizeof line - used, "%s%s %llu", k ? ", " : "",
                                     boot_alloc_names[k],
                                     (unsigned long long)(now_counts[k] - allocs_ready[k]));
        boot_log("allocation calls after READY: %s", line);
    }
    /* No munmap, and _exit rather than exit: the kernel releases
     * everything, while libc and libnuma destructors would free memory
     * (munmap), which the serving thread's seccomp filter forbids. */
    boot_unlisten(&ch);
    _exit(0);
}
