/* Boot step: memory. The blob is copied out of the executable's file-backed
 * .nib_blob segment into anonymous huge-page memory (hugetlbfs pages when
 * enough are reserved, else transparent huge pages via MADV_HUGEPAGE), each
 * worker's matmul row shards are bound to that worker's node before the
 * copy touches them (and where they landed is read back after it), and the
 * file pages are unmapped. The arena is reserved
 * once and prefaulted. What we actually got is read back from
 * /proc/self/smaps, never assumed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if NIB_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#endif

#include "boot/boot.h"
#include "rt/exec.h"

#define HUGE_2M (2ull << 20)

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* Free reserved hugetlbfs 2 MiB pages (HugePages_Free), 0 if unknown. */
static uint64_t hugetlb_free_pages(void)
{
    char buf[4096];
    int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *p = strstr(buf, "HugePages_Free:");
    const char *sz = strstr(buf, "Hugepagesize:");
    if (!p || !sz || strtoull(sz + 13, NULL, 10) != 2048)
        return 0;
    return strtoull(p + 15, NULL, 10);
}

/* bytes of anonymous memory at a 2 MiB-aligned address. */
static uint8_t *map_aligned(uint64_t bytes, int *hugetlb)
{
    if (hugetlb && hugetlb_free_pages() >= bytes / HUGE_2M) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
        if (p != MAP_FAILED) {
            *hugetlb = 1;
            return p;
        }
    }
    if (hugetlb)
        *hugetlb = 0;
    uint8_t *p = mmap(NULL, bytes + HUGE_2M, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uint8_t *a = (uint8_t *)round_up((uintptr_t)p, HUGE_2M);
    if (a > p)
        munmap(p, (size_t)(a - p));
    uint8_t *end = p + bytes + HUGE_2M;
    if (end > a + bytes)
        munmap(a + bytes, (size_t)(end - (a + bytes)));
    madvise(a, bytes, MADV_HUGEPAGE);
    return a;
}

#if NIB_HAVE_NUMA
/* The node that should hold blob byte `off`: the node of the worker whose
 * matmul rows it belongs to; -1 when it is not matmul weight (embedding
 * rows, norms, tables: left to first touch, i.e. worker 0's node). */
static int owner_node(const struct nib_blob_view *v, uint64_t off, const struct boot_workers *w)
{
    uint64_t wbase = (uint64_t)(v->weights - v->base);
    if (off < wbase)
        return -1;
    off -= wbase;
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        if (op->code != NIB_OP_MATMUL)
            continue;
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        if (off < t->offset || off >= t->offset + t->size)
            continue;
        for (uint32_t k = 0; k < w->n; k++) {
            uint32_t b, e;
            nib_exec_share(op, k, w->n, &b, &e);
            uint64_t lo = t->offset + t->size * b / t->rows, hi = t->offset + t->size * e / t->rows;
            if (off >= lo && off < hi)
                return (int)w->nodes[k];
        }
    }
    return -1;
}
#endif

#if NIB_HAVE_NUMA
#define PAGE_4K 4096ull

/* The smallest non-empty row shard of any matmul, in bytes. */
static uint64_t smallest_shard(const struct nib_blob_view *v, const struct boot_workers *w)
{
    uint64_t least = UINT64_MAX;
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        if (op->code != NIB_OP_MATMUL)
            continue;
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        for (uint32_t k = 0; k < w->n; k++) {
            uint32_t b, e;
            nib_exec_share(op, k, w->n, &b, &e);
            uint64_t bytes = t->size * e / t->rows - t->size * b / t->rows;
            if (bytes && bytes < least)
                least = bytes;
        }
    }
    return least;
}

/* 1 when every worker runs on the same node. */
static int one_node(const struct boot_workers *w)
{
    for (uint32_t k = 1; k < w->n; k++)
        if (w->nodes[k] != w->nodes[0])
            return 0;
    return 1;
}

/* The node a placement page [page, page + len) is bound to: with all
 * workers on one node, that node whenever the page holds any matmul weight
 * (no shard boundary to honour, so whole huge pages stay whole); else the
 * owner of its first byte. -1: not bound. */
static int page_owner(const struct nib_blob_view *v, uint64_t page, uint64_t len,
                      const struct boot_workers *w)
{
    if (!one_node(w))
        return owner_node(v, page, w);
    uint64_t wbase = (uint64_t)(v->weights - v->base);
    for (uint32_t i = 0; i < v->h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        if (op->code != NIB_OP_MATMUL)
            continue;
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        uint64_t lo = wbase + t->offset, hi = lo + t->size;
        if (lo < page + len && hi > page)
            return (int)w->nodes[0];
    }
    return -1;
}

/* Ask the kernel which node holds each placement page that has an owner
 * (move_pages with no target nodes only reports), and sum them per node. */
static void verify_shards(const struct nib_blob_view *v, const uint8_t *dst, uint64_t map,
                          const struct boot_workers *w, struct boot_memory *m)
{
    enum { BATCH = 512 };
    void *pages[BATCH];
    int want[BATCH], status[BATCH];
    unsigned n = 0;
    for (uint64_t page = 0; page <= map; page += m->placement_page) {
        int node = page < map ? page_owner(v, page, m->placement_page, w) : -1;
        if (node >= 0) {
            pages[n] = (void *)(dst + page);
            want[n++] = node;
        }
        if (n == BATCH || (page >= map && n)) {
            if (move_pages(0, n, pages, NULL, status, 0) != 0) {
                m->verified = 0;
                return;
            }
            for (unsigned i = 0; i < n; i++) {
                if (status[i] == want[i] && want[i] < BOOT_NODES_REPORTED)
                    m->shard_on_node[want[i]] += m->placement_page;
                else
                    m->shard_misplaced += m->placement_page;
            }
            n = 0;
        }
    }
    m->verified = 1;
}
#endif

/* Bind runs of placement pages to their owner's node: whole 2 MiB pages
 * when every shard fills one (a policy boundary inside a huge page would
 * split it) or when all workers share one node, else 4 KiB pages so that
 * small blobs are placed too; hugetlbfs pages cannot be split, so they are
 * always bound whole. */
static void place_shards(const struct nib_blob_view *v, uint8_t *dst, uint64_t map,
                         const struct boot_workers *w, struct boot_memory *m)
{
    m->numa = 0;
    m->numa_nodes = 1;
#if NIB_HAVE_NUMA
    if (numa_available() < 0) {
        boot_log("numa: libnuma linked, but the kernel has no NUMA support: nothing placed");
        return;
    }
    m->numa = 1;
    m->numa_nodes = (uint32_t)numa_num_configured_nodes();
    m->placement_page =
        m->hugetlb || one_node(w) || smallest_shard(v, w) >= HUGE_2M ? HUGE_2M : PAGE_4K;
    uint64_t run_start = 0;
    int run_node = -2;
    for (uint64_t page = 0; page <= map; page += m->placement_page) {
        int node = page < map ? page_owner(v, page, m->placement_page, w) : -3;
        if (node == run_node)
            continue;
        if (run_node >= 0) {
            numa_tonode_memory(dst + run_start, (size_t)(page - run_start), run_node);
            m->shard_bytes += page - run_start;
        }
        run_start = page;
        run_node = node;
    }
#else
    (void)v, (void)dst, (void)map, (void)w;
#endif
}

int boot_move_blob(struct nib_blob_view *v, const uint8_t *src, uint64_t size,
                   const struct boot_workers *w, struct boot_memory *m, char *err, size_t errlen)
{
    m->blob_size = size;
    m->blob_map = round_up(size, HUGE_2M);
    m->blob = map_aligned(m->blob_map, &m->hugetlb);
    if (!m->blob) {
        snprintf(err, errlen, "cannot map %llu bytes for the blob: %s",
                 (unsigned long long)m->blob_map, strerror(errno));
        return -1;
    }
    place_shards(v, m->blob, m->blob_map, w, m); /* policy first, then first touch */
    memcpy(m->blob, src, size);
    mprotect(m->blob, m->blob_map, PROT_READ);
#if NIB_HAVE_NUMA
    if (m->numa)
        verify_shards(v, m->blob, m->blob_map, w, m); /* the pages exist now: where are they? */
#endif
    struct nib_blob_view copy;
    if (nib_blob_open(&copy, m->blob, size, 0, err, errlen))
        return -1;
    *v = copy;
    /* The file-backed original: its segment holds nothing else (linker/
     * nib_blob.ld), so whole pages from its start are ours to drop. */
    long pg = sysconf(_SC_PAGESIZE);
    if (munmap((void *)src, (size_t)round_up(size, (uint64_t)pg)) != 0) {
        snprintf(err, errlen, "cannot unmap the file-backed blob: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int boot_reserve_arena(uint64_t bytes, struct boot_memory *m, char *err, size_t errlen)
{
    m->arena_map = round_up(bytes, HUGE_2M);
    m->arena = map_aligned(m->arena_map, NULL);
    if (!m->arena) {
        snprintf(err, errlen, "cannot reserve %llu bytes for the arena and KV cache: %s",
                 (unsigned long long)m->arena_map, strerror(errno));
        return -1;
    }
    memset(m->arena, 0, m->arena_map); /* prefault: no page fault on the token path */
    return 0;
}

void boot_lock_memory(struct boot_memory *m)
{
    m->mlocked = mlockall(MCL_CURRENT | MCL_FUTURE) == 0;
    if (!m->mlocked)
        snprintf(m->mlock_err, sizeof m->mlock_err, "%s", strerror(errno));
}

/* --- /proc/self/smaps ---------------------------------------------------------- */

struct range_sum {
    uintptr_t lo, hi;
    uint64_t huge;
};

/* One smaps line: a mapping header ("lo-hi perms ...") or a "Key: N kB". */
static void smaps_line(const char *s, uintptr_t *cur_lo, uintptr_t *cur_hi, struct range_sum *r,
                       int nr)
{
    char *end;
    unsigned long long a = strtoull(s, &end, 16);
    if (end != s && *end == '-') {
        unsigned long long b = strtoull(end + 1, &end, 16);
        if (*end == ' ') {
            *cur_lo = (uintptr_t)a;
            *cur_hi = (uintptr_t)b;
            return;
        }
    }
    static const char *keys[] = {"AnonHugePages:", "Private_Hugetlb:", "Shared_Hugetlb:"};
    for (int k = 0; k < 3; k++) {
        size_t kl = strlen(keys[k]);
        if (strncmp(s, keys[k], kl))
            continue;
        uint64_t kb = strtoull(s + kl, NULL, 10);
        for (int i = 0; i < nr; i++)
            if (*cur_lo >= r[i].lo && *cur_hi <= r[i].hi)
                r[i].huge += kb * 1024;
    }
}

int boot_hugepage_report(struct boot_memory *m, char *err, size_t errlen)
{
    struct range_sum r[2] = {
        {(uintptr_t)m->blob, (uintptr_t)m->blob + m->blob_map, 0},
        {(uintptr_t)m->arena, (uintptr_t)m->arena + m->arena_map, 0},
    };
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot read /proc/self/smaps: %s", strerror(errno));
        return -1;
    }
    static char buf[65536];
    size_t have = 0;
    uintptr_t lo = 0, hi = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            *nl = 0;
            smaps_line(line, &lo, &hi, r, 2);
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof buf - 1)
            have = 0; /* an absurd line: drop it */
    }
    close(fd);
    m->blob_huge = r[0].huge;
    m->arena_huge = r[1].huge;
    return 0;
}
