/* Boot step: is this the machine the appliance was built for? */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "boot/boot.h"
#include "kernels/qkernels.h"

void boot_log(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "nibble: %s\n", line);
}

int boot_topology(int ignore, uint32_t max_workers, struct boot_workers *out, char *err,
                  size_t errlen)
{
    static struct nib_topo here; /* 20 KiB: not on the stack */
    const struct nib_topo *table = &nib_topology_table;
    memset(out, 0, sizeof *out);
    if (nib_topo_read_sys(&here, "/sys", err, errlen))
        return -1;
    char diff[768];
    int n = nib_topo_diff(table, &here, diff, sizeof diff);
    const struct nib_topo *use = table;
    if (n) {
        if (!ignore) {
            snprintf(err, errlen,
                     "this machine does not match the topology table built in (from %s): %s; "
                     "rebuild for this machine (-Dtopology, `nib topo`) or pass "
                     "--ignore-topology to boot anyway",
                     nib_topology_from, diff);
            return -1;
        }
        boot_log("topology: WARNING: this machine differs from the table built in (from %s): "
                 "%s; booting anyway because of --ignore-topology, workers taken from this machine",
                 nib_topology_from, diff);
        use = &here;
        out->overridden = 1;
    } else {
        boot_log("topology: this machine matches the table built in (%u cpus, %u node%s, from %s)",
                 table->n_cpus, table->n_nodes, table->n_nodes == 1 ? "" : "s", nib_topology_from);
    }
    /* the table's, even when --ignore-topology boots on this machine's shape:
     * /sys cannot say it, and it changes no bit of any result */
    if (table->prefetch && nib_prefetch_set(table->prefetch) == 0)
        boot_log("kernels: weights prefetched %u bytes ahead (the topology table's)",
                 table->prefetch);
    uint32_t all = nib_topo_workers(use, out->cpus, out->nodes, NIB_TEAM_MAX_WORKERS);
    if (max_workers > all) {
        snprintf(err, errlen, "--workers %u: this machine has %u physical cores", max_workers, all);
        return -1;
    }
    out->n = max_workers ? max_workers : all;
    uint64_t seen[NIB_TOPO_MAX_CPUS / 64] = {0};
    for (uint32_t i = 0; i < out->n; i++) {
        uint32_t nd = out->nodes[i];
        if (!(seen[nd / 64] >> (nd % 64) & 1))
            out->n_nodes++;
        seen[nd / 64] |= 1ull << (nd % 64);
    }
    return 0;
}

int boot_pin_self(uint32_t cpu, uint32_t node, char *err, size_t errlen)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        snprintf(err, errlen,
                 "cannot pin to cpu %u: %s (offline, or outside the CPUs this "
                 "process may use: taskset, cgroup cpuset)",
                 cpu, strerror(errno));
        return -1;
    }
    unsigned got_cpu = 0, got_node = 0;
    if (syscall(SYS_getcpu, &got_cpu, &got_node, NULL) != 0) {
        snprintf(err, errlen, "getcpu failed: %s", strerror(errno));
        return -1;
    }
    if (got_cpu != cpu) {
        snprintf(err, errlen, "pinned to cpu %u but getcpu says cpu %u", cpu, got_cpu);
        return -1;
    }
    if (got_node != node) {
        snprintf(err, errlen, "cpu %u is on node %u here, the table says node %u", cpu, got_node,
                 node);
        return -1;
    }
    return 0;
}
