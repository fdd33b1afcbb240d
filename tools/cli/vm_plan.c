#include "tools/cli/vm_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vm_huge_plan(uint64_t free_pages, unsigned long long memory_mib, unsigned numa, char *why,
                 size_t whylen)
{
    if (!numa || memory_mib % numa || (memory_mib / numa) % VM_HUGE_PAGE_MIB) {
        snprintf(why, whylen, "each node's %llu MiB is not a whole number of 2 MiB pages",
                 numa ? memory_mib / numa : memory_mib);
        return 0;
    }
    uint64_t need = memory_mib / VM_HUGE_PAGE_MIB;
    if (free_pages < need) {
        snprintf(why, whylen, "%llu free 2 MiB huge pages, %llu needed",
                 (unsigned long long)free_pages, (unsigned long long)need);
        return 0;
    }
    snprintf(why, whylen, "%llu of %llu free 2 MiB huge pages", (unsigned long long)need,
             (unsigned long long)free_pages);
    return 1;
}

/* The first unsigned number in the file at path after the text key (the
 * whole file when key is NULL), or -1 when unreadable. */
static long long read_number(const char *path, const char *key)
{
    char buf[4096];
    if (nib_sysfs_read(path, buf, sizeof buf))
        return -1;
    const char *p = buf;
    if (key && !(p = strstr(buf, key)))
        return -1;
    p += key ? strlen(key) : 0;
    while (*p == ' ' || *p == ':')
        p++;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    return end != p ? (long long)v : -1;
}

uint64_t vm_huge_free(const char *root)
{
    char path[512];
    snprintf(path, sizeof path, "%s/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", root);
    long long v = read_number(path, NULL);
    return v > 0 ? (uint64_t)v : 0;
}

/* The host's node ids in order of first appearance among its physical
 * cores (they need not be 0..n-1): guest node n goes on ids[n % n_ids].
 * wcpu and wnode get nib_topo_workers' cores; returns n_ids. */
static uint32_t host_node_ids(const struct nib_topo *host, uint32_t *wcpu, uint32_t *wnode,
                              uint32_t *nw, uint32_t *ids)
{
    uint32_t n_ids = 0;
    *nw = nib_topo_workers(host, wcpu, wnode, NIB_TOPO_MAX_CPUS);
    for (uint32_t k = 0; k < *nw; k++) {
        uint32_t j = 0;
        while (j < n_ids && ids[j] != wnode[k])
            j++;
        if (j == n_ids)
            ids[n_ids++] = wnode[k];
    }
    return n_ids;
}

int vm_pin_plan(const struct nib_topo *host, unsigned cpus, unsigned numa, uint32_t *cpu_of,
                char *why, size_t whylen)
{
    static uint32_t wcpu[NIB_TOPO_MAX_CPUS], wnode[NIB_TOPO_MAX_CPUS], ids[NIB_TOPO_MAX_CPUS];
    if (!numa || !cpus || cpus % numa || !host->n_nodes) {
        snprintf(why, whylen, "%u vCPUs over %u nodes", cpus, numa);
        return -1;
    }
    uint32_t nw, n_ids = host_node_ids(host, wcpu, wnode, &nw, ids);
    unsigned per = cpus / numa;
    for (unsigned n = 0; n < numa; n++) {
        uint32_t node = ids[n % n_ids], cores = 0;
        unsigned placed = 0, before = 0; /* vCPUs on this host node: all, and of nodes < n */
        for (uint32_t k = 0; k < nw; k++)
            cores += wnode[k] == node;
        for (unsigned m = 0; m < numa; m++)
            if (ids[m % n_ids] == node) {
                placed += per;
                before += m < n ? per : 0;
            }
        if (cores < placed) {
            snprintf(why, whylen,
                     "host node %u has %u physical cores for the %u vCPUs placed on it: "
                     "not pinned",
                     node, cores, placed);
            return -1;
        }
        /* A core to spare: leave CPU 0 (interrupts, the host's own work) alone. */
        int skip0 = cores > placed;
        unsigned seen = 0, got = 0;
        for (uint32_t k = 0; k < nw && got < per; k++) {
            if (wnode[k] != node || (skip0 && wcpu[k] == 0))
                continue;
            if (seen++ < before)
                continue;
            cpu_of[n * per + got++] = wcpu[k];
        }
    }
    snprintf(why, whylen, "%u vCPUs on %u host node%s", cpus, n_ids < numa ? n_ids : numa,
             (n_ids < numa ? n_ids : numa) == 1 ? "" : "s");
    return 0;
}

/* MiB free on host node `node`: its free 2 MiB huge pages when huge, else
 * its MemFree; -1 when unreadable. */
static long long node_free_mib(const char *root, uint32_t node, int huge)
{
    char path[600];
    if (huge) {
        snprintf(path, sizeof path,
                 "%s/devices/system/node/node%u/hugepages/hugepages-2048kB/free_hugepages", root,
                 node);
        long long pages = read_number(path, NULL);
        return pages < 0 ? -1 : pages * VM_HUGE_PAGE_MIB;
    }
    snprintf(path, sizeof path, "%s/devices/system/node/node%u/meminfo", root, node);
    long long kb = read_number(path, "MemFree");
    return kb < 0 ? -1 : kb / 1024;
}

enum vm_mem_policy vm_mem_plan(const struct nib_topo *host, const char *root,
                               unsigned long long memory_mib, unsigned numa, int huge,
                               uint32_t *host_node, char *why, size_t whylen)
{
    static uint32_t wcpu[NIB_TOPO_MAX_CPUS], wnode[NIB_TOPO_MAX_CPUS], ids[NIB_TOPO_MAX_CPUS];
    uint32_t nw, n_ids = numa ? host_node_ids(host, wcpu, wnode, &nw, ids) : 0;
    if (n_ids < 2) {
        snprintf(why, whylen, "the host has %s node", n_ids ? "one" : "no readable");
        return VM_MEM_ANY;
    }
    for (unsigned n = 0; n < numa; n++)
        host_node[n] = ids[n % n_ids];
    unsigned long long per = memory_mib / numa;
    for (uint32_t j = 0; j < n_ids && j < numa; j++) {
        unsigned long long need = per * ((numa - j + n_ids - 1) / n_ids); /* nodes j, j + n_ids.. */
        long long have = node_free_mib(root, ids[j], huge);
        if (have < 0 || (unsigned long long)have < need) {
            if (have < 0)
                snprintf(why, whylen, "host node %u's free %s could not be read", ids[j],
                         huge ? "huge pages" : "memory");
            else
                snprintf(why, whylen, "host node %u has %lld MiB free%s, %llu needed", ids[j], have,
                         huge ? " in huge pages" : "", need);
            return VM_MEM_PREFERRED;
        }
    }
    snprintf(why, whylen, "%u guest node%s on %u host nodes, each with room", numa,
             numa == 1 ? "" : "s", n_ids < numa ? n_ids : numa);
    return VM_MEM_BIND;
}

void vm_mem_backend_arg(char *out, size_t len, unsigned i, unsigned long long mib, int huge,
                        uint32_t host_node, enum vm_mem_policy policy)
{
    char where[64] = "";
    if (policy != VM_MEM_ANY)
        snprintf(where, sizeof where, ",host-nodes=%u,policy=%s", host_node,
                 policy == VM_MEM_BIND ? "bind" : "preferred");
    if (huge)
        snprintf(out, len, "memory-backend-memfd,id=mem%u,size=%lluM,hugetlb=on,hugetlbsize=2M%s",
                 i, mib, where);
    else
        snprintf(out, len, "memory-backend-ram,id=mem%u,size=%lluM%s", i, mib, where);
}

int vm_vcpu_index(const char *comm)
{
    unsigned i = 0;
    int digits = 0;
    if (strncmp(comm, "CPU ", 4))
        return -1;
    comm += 4;
    while (*comm >= '0' && *comm <= '9' && digits < 6)
        i = i * 10 + (unsigned)(*comm++ - '0'), digits++;
    if (!digits || (strcmp(comm, "/KVM") && strcmp(comm, "/KVM\n") && strcmp(comm, "/TCG") &&
                    strcmp(comm, "/TCG\n")))
        return -1;
    return (int)i;
}
