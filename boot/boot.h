/* The appliance's boot steps, one file each (docs/runtime.md has the
 * sequence and every message):
 *
 *   topo_check.c  the machine against the compiled topology table; worker set
 *   memory.c      blob into huge pages, NUMA placement, arena, mlockall,
 *                 the /proc/self/smaps report
 *   workers.c     worker threads: pin, verify, block signals, seccomp
 *   channel.c     the name: runtime dir, lock, socket; header and ring memfds
 *   seccomp.c     the hand-written BPF filters and their allow-lists
 *   alloc_count.c malloc/mmap/... counters (-DNIB_COUNT_ALLOC=1 builds)
 *
 * Every step returns 0 or -1 with a message in err; main.c prints
 * "nibble: refusing to boot: STEP: MESSAGE" and exits 2. */
#ifndef NIB_BOOT_H
#define NIB_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"
#include "proto/shm_layout.h"
#include "proto/shm_name.h"
#include "rt/team.h"
#include "rt/topology.h"

/* Log one line to stderr, prefixed "nibble: ". */
void boot_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- topo_check.c ---------------------------------------------------------- */

struct boot_workers {
    uint32_t n;
    uint32_t cpus[NIB_TEAM_MAX_WORKERS];
    uint32_t nodes[NIB_TEAM_MAX_WORKERS];
    uint32_t n_nodes; /* distinct nodes among the workers */
    int overridden;   /* the machine differs and --ignore-topology was given */
};

/* Compare this machine with nib_topology_table. When they differ: -1 with
 * the differences in err, unless ignore (then logged, and the worker set is
 * taken from the machine). max_workers 0: one per physical core. */
int boot_topology(int ignore, uint32_t max_workers, struct boot_workers *out, char *err,
                  size_t errlen);

/* Pin the calling thread to cpu and check with getcpu that it runs there,
 * on node. */
int boot_pin_self(uint32_t cpu, uint32_t node, char *err, size_t errlen);

/* --- memory.c ---------------------------------------------------------------- */

#define BOOT_NODES_REPORTED 8

struct boot_memory {
    uint8_t *blob;           /* the anonymous copy, 2 MiB aligned */
    uint64_t blob_size;      /* bytes of blob */
    uint64_t blob_map;       /* bytes mapped (2 MiB multiple) */
    int hugetlb;             /* MAP_HUGETLB pages (else THP) */
    int numa;                /* shards placed with libnuma */
    uint32_t numa_nodes;     /* nodes the kernel reports (1 without libnuma) */
    uint64_t placement_page; /* bytes: shards bound per 4 KiB or per 2 MiB page */
    uint64_t shard_bytes;    /* matmul shard bytes bound to a node */
    int verified;            /* move_pages answered for every shard page */
    uint64_t shard_on_node[BOOT_NODES_REPORTED]; /* found on their worker's node */
    uint64_t shard_misplaced;                    /* found on another node */
    uint8_t *arena;                              /* runtime memory, 2 MiB aligned, prefaulted */
    uint64_t arena_map;
    uint64_t blob_huge, arena_huge; /* huge-page bytes read back from smaps */
    int mlocked;
    char mlock_err[96];
};

/* Copy the validated blob at src into huge-page-backed anonymous memory,
 * placing each worker's matmul row shards on its node; release the file
 * pages of src; re-open *v on the copy. */
int boot_move_blob(struct nib_blob_view *v, const uint8_t *src, uint64_t size,
                   const struct boot_workers *w, struct boot_memory *m, char *err, size_t errlen);

/* Reserve bytes of runtime memory, huge-page advised and prefaulted. */
int boot_reserve_arena(uint64_t bytes, struct boot_memory *m, char *err, size_t errlen);

/* mlockall(MCL_CURRENT | MCL_FUTURE); a failure is recorded, not fatal. */
void boot_lock_memory(struct boot_memory *m);

/* Fill blob_huge / arena_huge from /proc/self/smaps. */
int boot_hugepage_report(struct boot_memory *m, char *err, size_t errlen);

/* --- seccomp.c -------------------------------------------------------------------- */

enum boot_filter { BOOT_FILTER_WORKER, BOOT_FILTER_SERVE };

/* Install the filter on the calling thread (no_new_privs first). */
int boot_seccomp(enum boot_filter which, char *err, size_t errlen);
/* The allow-list, for the log. */
const char *boot_seccomp_allowed(enum boot_filter which);

/* --- workers.c ------------------------------------------------------------------ */

/* Start workers 1..n-1 of team t on w->cpus[1..]: each pins itself, checks
 * getcpu, blocks every signal, installs the worker filter (when seccomp)
 * and enters nib_team_worker. Returns when all have reported. */
int boot_start_workers(struct nib_team *t, const struct boot_workers *w, int seccomp, char *err,
                       size_t errlen);

/* --- channel.c ------------------------------------------------------------------ */

struct boot_channel {
    struct nib_name_paths paths;
    int group_access;
    int lock_fd; /* flock held until exit */
    int listen_fd;
    uint64_t sock_dev, sock_ino;
    int header_fd;
    void *header; /* header_size bytes (boot_memfds), writable (ours only) */
    uint32_t n_rings;
    uint64_t ring_size;
    int ring_fd[NIB_HOSTS_MAX];
    void *ring[NIB_HOSTS_MAX];
};

/* Paths of name, the runtime directory (created, then checked), the name
 * lock. Refuses when another appliance holds the name. */
int boot_name(const char *name, int group_access, struct boot_channel *c, char *err, size_t errlen);
/* Replace whatever is at the socket path (the lock is ours), bind, listen. */
int boot_listen(struct boot_channel *c, char *err, size_t errlen);
/* At exit: unlink the socket path if it still is the socket we bound. */
void boot_unlisten(struct boot_channel *c);
/* The header memfd (mapped, zero) and n_rings ring memfds of ring_size
 * bytes (mapped, prefaulted, sealed SHRINK | GROW | SEAL). */
int boot_memfds(struct boot_channel *c, uint32_t header_size, uint32_t n_rings, uint64_t ring_size,
                char *err, size_t errlen);
/* Seal the header memfd FUTURE_WRITE | SHRINK | GROW | SEAL, once written. */
int boot_seal_header(struct boot_channel *c, char *err, size_t errlen);

/* --- alloc_count.c --------------------------------------------------------------- */

#define BOOT_ALLOC_KINDS 8
extern const char *const boot_alloc_names[BOOT_ALLOC_KINDS];
/* 1 in a -DNIB_COUNT_ALLOC=1 build (linked with -Wl,--wrap=malloc,...). */
int boot_alloc_counting(void);
void boot_alloc_read(uint64_t out[BOOT_ALLOC_KINDS]);

#endif
