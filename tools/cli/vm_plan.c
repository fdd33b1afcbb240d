#include "tools/cli/vm_plan.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

uint64_t vm_huge_free(const char *root)
{
    char path[512], buf[32];
    snprintf(path, sizeof path, "%s/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", root);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    return end != buf ? v : 0;
}

int vm_pin_plan(const struct nib_topo *host, unsigned cpus, unsigned numa, uint32_t *cpu_of,
                char *why, size_t whylen)
{
    static uint32_t wcpu[NIB_TOPO_MAX_CPUS], wnode[NIB_TOPO_MAX_CPUS];
    if (!numa || !cpus || cpus % numa || !host->n_nodes) {
        snprintf(why, whylen, "%u vCPUs over %u nodes", cpus, numa);
        return -1;
    }
    uint32_t nw = nib_topo_workers(host, wcpu, wnode, NIB_TOPO_MAX_CPUS);
    /* the host's node ids in order of first appearance (they need not be 0..n-1) */
    uint32_t ids[NIB_TOPO_MAX_CPUS], n_ids = 0;
    for (uint32_t k = 0; k < nw; k++) {
        uint32_t j = 0;
        while (j < n_ids && ids[j] != wnode[k])
            j++;
        if (j == n_ids)
            ids[n_ids++] = wnode[k];
    }
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
