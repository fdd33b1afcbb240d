/* What `nib vm run` decides about the host before QEMU starts: whether
 * guest memory goes on 2 MiB huge pages, and which host CPU each vCPU
 * thread is pinned to under KVM (docs/appliance.md). Pure functions over
 * values read elsewhere, so they are unit-tested without a VM. */
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

/* The vCPU index of a QEMU thread named "CPU N/KVM" or "CPU N/TCG" (its
 * /proc comm with -name debug-threads=on; a trailing newline allowed),
 * else -1. */
int vm_vcpu_index(const char *comm);

#endif
