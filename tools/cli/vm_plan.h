/* What `nib vm run` decides about the host before QEMU starts: whether
 * guest memory goes on 2 MiB huge pages, which host CPU each vCPU thread
 * is pinned to under KVM, and which host node holds each guest node's
 * memory (docs/appliance.md). Functions of a topology and of a sysfs
 * root, so they are unit-tested without a VM. */
#ifndef NIB_CLI_VM_PLAN_H
#define NIB_CLI_VM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "rt/topology.h"

#define VM_HUGE_PAGE_MIB 2u

/* 1 when guest RAM (memory_mib over numa nodes, each node's share a whole
 * number of huge pages) fits in free_pages free 2 MiB pages, else 0; why
 * says which, for stderr. */
int vm_huge_plan(uint64_t free_pages, unsigned long long memory_mib, unsigned numa, char *why,
                 size_t whylen);

/* The free 2 MiB pages the host offers (root is normally "/sys"); 0 when
 * it offers none or the count cannot be read. */
uint64_t vm_huge_free(const char *root);

/* vCPU i of `cpus`, split evenly over `numa` guest nodes (as -numa places
 * them), to cpu_of[i]: guest node n on the host's n-th node (modulo the
 * host's nodes), each vCPU on its own physical core of that node (its
 * first SMT sibling, nib_topo_workers' order), host CPU 0 left to the
 * host when the node has a core to spare. 0, or -1 with why (a node with
 * fewer cores than its vCPUs: no pinning rather than sharing). */
int vm_pin_plan(const struct nib_topo *host, unsigned cpus, unsigned numa, uint32_t *cpu_of,
                char *why, size_t whylen);

/* Where each guest node's memory lives (vm_pin_plan's placement: guest
 * node n on the host's n-th node, modulo its nodes, beside its vCPUs). */
enum vm_mem_policy {
    VM_MEM_ANY,       /* a host of one node: nothing to choose */
    VM_MEM_PREFERRED, /* on that node while it has room, else elsewhere */
    VM_MEM_BIND,      /* on that node only: its free memory covers it */
};

/* host_node[n] for guest node n of `numa` (memory_mib split evenly), and
 * the policy: BIND when every host node used has free memory (2 MiB huge
 * pages when huge, else MemFree; read under root, normally "/sys") for
 * all the guest nodes placed on it, PREFERRED when one has not or it
 * cannot be read (a bound node that runs out fails the guest; a
 * preferred one falls back), ANY on a host of one node. why says which,
 * for stderr. */
enum vm_mem_policy vm_mem_plan(const struct nib_topo *host, const char *root,
                               unsigned long long memory_mib, unsigned numa, int huge,
                               uint32_t *host_node, char *why, size_t whylen);

/* The -object argument of guest node i's memory (id mem<i>, mib MiB; on
 * memfd huge pages when huge; host_node and policy from vm_mem_plan). */
void vm_mem_backend_arg(char *out, size_t len, unsigned i, unsigned long long mib, int huge,
                        uint32_t host_node, enum vm_mem_policy policy);

/* The vCPU index of a QEMU thread named "CPU N/KVM" or "CPU N/TCG" (its
 * /proc comm with -name debug-threads=on; a trailing newline allowed),
 * else -1. */
int vm_vcpu_index(const char *comm);

#endif
