/* nib vm run's host plan (tools/cli/vm_plan.c): guest memory on huge pages
 * only when the free 2 MiB pages cover it, the vCPU pin plan over a
 * made-up host topology (each vCPU its own physical core of the right
 * node, CPU 0 spared when a core is to spare, refused rather than shared),
 * and each guest node's memory on its vCPUs' host node (bound only when
 * that node's free memory, read from a made-up sysfs, covers it). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/common/test_util.h"
#include "tools/cli/vm_plan.h"

START_TEST(huge_plan)
{
    char why[256];
    ck_assert_int_eq(vm_huge_plan(256, 512, 1, why, sizeof why), 1);
    ck_assert_int_eq(vm_huge_plan(1000, 1024, 2, why, sizeof why), 1);
    ck_assert_int_eq(vm_huge_plan(255, 512, 1, why, sizeof why), 0);
    ck_assert_msg(strstr(why, "255 free") && strstr(why, "256 needed"), "%s", why);
    ck_assert_int_eq(vm_huge_plan(0, 512, 1, why, sizeof why), 0);
    /* 1026 MiB over 2 nodes: 513 MiB each, not whole 2 MiB pages */
    ck_assert_int_eq(vm_huge_plan(100000, 1026, 2, why, sizeof why), 0);
    ck_assert_msg(strstr(why, "513 MiB"), "%s", why);
    ck_assert_int_eq(vm_huge_plan(100000, 512, 0, why, sizeof why), 0);
}
END_TEST

/* text to root/rel, every directory on the way made (the rest of the
 * path's directories: rel's slashes). */
static void put(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        mkdir(path, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* root and everything under it */
static void rm_tree(const char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(huge_free)
{
    char root[] = "/tmp/nib-vm-plan-XXXXXX";
    const char *rel = "kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
    ck_assert_ptr_nonnull(mkdtemp(root));
    ck_assert_uint_eq(vm_huge_free(root), 0); /* nothing offered */
    put(root, rel, "300\n");
    ck_assert_uint_eq(vm_huge_free(root), 300);
    put(root, rel, "junk\n");
    ck_assert_uint_eq(vm_huge_free(root), 0);
    rm_tree(root);
}
END_TEST

/* nodes x cores_per_node physical cores with 2 SMT siblings each: node n's
 * cores are CPUs n*cores.. and their siblings that plus nodes*cores. */
static void host(struct nib_topo *t, unsigned nodes, unsigned cores)
{
    memset(t, 0, sizeof *t);
    unsigned total = nodes * cores;
    for (unsigned c = 0; c < 2 * total; c++) {
        struct nib_topo_cpu *p = &t->cpus[t->n_cpus++];
        unsigned core = c % total;
        p->cpu = c;
        p->node = core / cores;
        p->package = p->node;
        p->core = core % cores;
        p->smt = c >= total;
    }
    t->n_nodes = nodes;
}

START_TEST(pin_two_nodes)
{
    static struct nib_topo t;
    uint32_t cpu[8];
    char why[256];
    host(&t, 2, 4); /* node 0: cores 0-3 (siblings 8-11); node 1: 4-7 (12-15) */
    ck_assert_int_eq(vm_pin_plan(&t, 4, 2, cpu, why, sizeof why), 0);
    /* guest node 0 on host node 0, CPU 0 spared; guest node 1 on host node 1 */
    ck_assert_uint_eq(cpu[0], 1);
    ck_assert_uint_eq(cpu[1], 2);
    ck_assert_uint_eq(cpu[2], 4);
    ck_assert_uint_eq(cpu[3], 5);
    /* every core of node 0 taken: CPU 0 too, no SMT sibling ever */
    ck_assert_int_eq(vm_pin_plan(&t, 8, 2, cpu, why, sizeof why), 0);
    for (unsigned i = 0; i < 8; i++)
        ck_assert_uint_eq(cpu[i], i);
}
END_TEST

START_TEST(pin_more_guest_nodes)
{
    static struct nib_topo t;
    uint32_t cpu[4];
    char why[256];
    host(&t, 1, 4);
    /* two guest nodes on the one host node: disjoint cores */
    ck_assert_int_eq(vm_pin_plan(&t, 4, 2, cpu, why, sizeof why), 0);
    for (unsigned i = 0; i < 4; i++)
        ck_assert_uint_eq(cpu[i], i);
    ck_assert_int_eq(vm_pin_plan(&t, 2, 2, cpu, why, sizeof why), 0);
    ck_assert_uint_eq(cpu[0], 1);
    ck_assert_uint_eq(cpu[1], 2);
}
END_TEST

START_TEST(pin_refused)
{
    static struct nib_topo t;
    uint32_t cpu[16];
    char why[256];
    host(&t, 1, 4);
    ck_assert_int_eq(vm_pin_plan(&t, 8, 1, cpu, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "4 physical cores for the 8 vCPUs"), "%s", why);
    ck_assert_int_eq(vm_pin_plan(&t, 3, 2, cpu, why, sizeof why), -1);
    ck_assert_int_eq(vm_pin_plan(&t, 0, 1, cpu, why, sizeof why), -1);
}
END_TEST

static void node_free(const char *root, unsigned node, unsigned long long mib, int huge)
{
    char rel[160], text[160];
    if (huge) {
        snprintf(rel, sizeof rel,
                 "devices/system/node/node%u/hugepages/hugepages-2048kB/free_hugepages", node);
        snprintf(text, sizeof text, "%llu\n", mib / 2);
    } else {
        snprintf(rel, sizeof rel, "devices/system/node/node%u/meminfo", node);
        snprintf(text, sizeof text,
                 "Node %u MemTotal:       65536000 kB\nNode %u MemFree:        %llu kB\n"
                 "Node %u MemUsed:        1000 kB\n",
                 node, node, mib * 1024, node);
    }
    put(root, rel, text);
}

START_TEST(mem_plan)
{
    static struct nib_topo t;
    uint32_t node[4];
    char why[256], root[] = "/tmp/nib-vm-mem-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    host(&t, 1, 4); /* one host node: nothing to bind */
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 0, node, why, sizeof why), VM_MEM_ANY);
    ck_assert_msg(strstr(why, "one node"), "%s", why);

    host(&t, 2, 4);
    /* nothing readable: preferred, never a bind that could fail the guest */
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 0, node, why, sizeof why), VM_MEM_PREFERRED);
    ck_assert_msg(strstr(why, "host node 0's free memory could not be read"), "%s", why);
    node_free(root, 0, 2048, 0);
    node_free(root, 1, 512, 0);
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 0, node, why, sizeof why), VM_MEM_BIND);
    ck_assert_uint_eq(node[0], 0);
    ck_assert_uint_eq(node[1], 1);
    /* four guest nodes of 256 MiB: two on each host node, 512 MiB there */
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 4, 0, node, why, sizeof why), VM_MEM_BIND);
    ck_assert_uint_eq(node[2], 0);
    ck_assert_uint_eq(node[3], 1);
    node_free(root, 1, 511, 0);
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 0, node, why, sizeof why), VM_MEM_PREFERRED);
    ck_assert_msg(strstr(why, "host node 1 has 511 MiB free, 512 needed"), "%s", why);
    /* the two 256 MiB guest nodes on host node 1 need 512 MiB together */
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 4, 0, node, why, sizeof why), VM_MEM_PREFERRED);
    /* one guest node uses host node 0 only */
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 1, 0, node, why, sizeof why), VM_MEM_BIND);
    ck_assert_uint_eq(node[0], 0);

    /* huge pages: the node's free 2 MiB pages count, not its MemFree */
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 1, node, why, sizeof why), VM_MEM_PREFERRED);
    node_free(root, 0, 512, 1);
    node_free(root, 1, 510, 1);
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 1, node, why, sizeof why), VM_MEM_PREFERRED);
    ck_assert_msg(strstr(why, "host node 1 has 510 MiB free in huge pages, 512 needed"), "%s", why);
    node_free(root, 1, 512, 1);
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 1, node, why, sizeof why), VM_MEM_BIND);

    /* node ids need not be 0..n-1: guest node 1 on host node 2 */
    for (uint32_t i = 0; i < t.n_cpus; i++)
        t.cpus[i].node *= 2;
    node_free(root, 2, 4096, 0);
    ck_assert_int_eq(vm_mem_plan(&t, root, 1024, 2, 0, node, why, sizeof why), VM_MEM_BIND);
    ck_assert_uint_eq(node[0], 0);
    ck_assert_uint_eq(node[1], 2);
    rm_tree(root);
}
END_TEST

START_TEST(mem_backend_arg)
{
    char a[256];
    vm_mem_backend_arg(a, sizeof a, 0, 512, 0, 0, VM_MEM_ANY);
    ck_assert_str_eq(a, "memory-backend-ram,id=mem0,size=512M");
    vm_mem_backend_arg(a, sizeof a, 1, 512, 0, 3, VM_MEM_BIND);
    ck_assert_str_eq(a, "memory-backend-ram,id=mem1,size=512M,host-nodes=3,policy=bind");
    vm_mem_backend_arg(a, sizeof a, 1, 256, 1, 1, VM_MEM_PREFERRED);
    ck_assert_str_eq(a, "memory-backend-memfd,id=mem1,size=256M,hugetlb=on,hugetlbsize=2M,"
                        "host-nodes=1,policy=preferred");
}
END_TEST

START_TEST(vcpu_names)
{
    ck_assert_int_eq(vm_vcpu_index("CPU 0/KVM\n"), 0);
    ck_assert_int_eq(vm_vcpu_index("CPU 17/KVM"), 17);
    ck_assert_int_eq(vm_vcpu_index("CPU 3/TCG\n"), 3);
    ck_assert_int_eq(vm_vcpu_index("CPU /KVM"), -1);
    ck_assert_int_eq(vm_vcpu_index("CPU 1/KVMx"), -1);
    ck_assert_int_eq(vm_vcpu_index("qemu-system-x86"), -1);
    ck_assert_int_eq(vm_vcpu_index("IO mon_iothread"), -1);
    ck_assert_int_eq(vm_vcpu_index("CPU 1234567/KVM"), -1);
}
END_TEST

TU_SUITE("vm-plan", "plan", NULL, NULL, 0, huge_plan, huge_free, pin_two_nodes,
         pin_more_guest_nodes, pin_refused, mem_plan, mem_backend_arg, vcpu_names)
