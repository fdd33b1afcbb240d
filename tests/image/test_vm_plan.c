/* nib vm run's host plan (tools/cli/vm_plan.c): guest memory on huge pages
 * only when the free 2 MiB pages cover it, and the vCPU pin plan over a
 * made-up host topology (each vCPU its own physical core of the right
 * node, CPU 0 spared when a core is to spare, refused rather than shared). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

START_TEST(huge_free)
{
    char root[] = "/tmp/nib-vm-plan-XXXXXX", path[512];
    ck_assert_ptr_nonnull(mkdtemp(root));
    ck_assert_uint_eq(vm_huge_free(root), 0); /* nothing offered */
    const char *dirs[] = {"/kernel", "/kernel/mm", "/kernel/mm/hugepages",
                          "/kernel/mm/hugepages/hugepages-2048kB"};
    for (unsigned i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s%s", root, dirs[i]);
        ck_assert_int_eq(mkdir(path, 0700), 0);
    }
    snprintf(path, sizeof path, "%s%s/free_hugepages", root, dirs[3]);
    FILE *f = fopen(path, "w");
    fputs("300\n", f);
    fclose(f);
    ck_assert_uint_eq(vm_huge_free(root), 300);
    f = fopen(path, "w");
    fputs("junk\n", f);
    fclose(f);
    ck_assert_uint_eq(vm_huge_free(root), 0);
    unlink(path);
    for (int i = 3; i >= 0; i--) {
        snprintf(path, sizeof path, "%s%s", root, dirs[i]);
        rmdir(path);
    }
    rmdir(root);
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
         pin_more_guest_nodes, pin_refused, vcpu_names)
