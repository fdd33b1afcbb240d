/* Machine topology: reading a sysfs tree (a fake one with SMT siblings and
 * two nodes, and this machine's), the text form round trip, parse errors
 * that name the line, differences that say what differs, and the default
 * worker set (one per physical core). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/topology.h"
#include "tests/common/test_util.h"

static char root[64];

static void put(const char *rel, const char *text)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    ck_assert_int_eq(system(cmd), 0);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s\n", text);
    fclose(f);
}

/* 4 CPUs: cores 0 and 1 with two threads each (0/2 and 1/3), node 0 holds
 * CPUs 0 and 2, node 1 CPUs 1 and 3. */
static void fake_sysfs(void)
{
    strcpy(root, "/tmp/nib-topo-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    put("devices/system/cpu/online", "0-3");
    for (int c = 0; c < 4; c++) {
        char rel[128], v[32];
        snprintf(rel, sizeof rel, "devices/system/cpu/cpu%d/topology/physical_package_id", c);
        put(rel, "0");
        snprintf(rel, sizeof rel, "devices/system/cpu/cpu%d/topology/core_id", c);
        snprintf(v, sizeof v, "%d", c % 2);
        put(rel, v);
        snprintf(rel, sizeof rel, "devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
        put(rel, c % 2 ? "1,3" : "0,2");
    }
    put("devices/system/node/online", "0-1");
    put("devices/system/node/node0/cpulist", "0,2");
    put("devices/system/node/node1/cpulist", "1,3");
    put("devices/system/cpu/cpu0/cache/index0/level", "1");
    put("devices/system/cpu/cpu0/cache/index0/type", "Data");
    put("devices/system/cpu/cpu0/cache/index0/size", "32K");
    put("devices/system/cpu/cpu0/cache/index0/shared_cpu_list", "0,2");
    put("devices/system/cpu/cpu0/cache/index1/level", "3");
    put("devices/system/cpu/cpu0/cache/index1/type", "Unified");
    put("devices/system/cpu/cpu0/cache/index1/size", "16384K");
    put("devices/system/cpu/cpu0/cache/index1/shared_cpu_list", "0-3");
}

static void rm_fake(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

static struct nib_topo a, b;

START_TEST(reads_fake_sysfs)
{
    char err[256];
    fake_sysfs();
    ck_assert_msg(nib_topo_read_sys(&a, root, err, sizeof err) == 0, "%s", err);
    rm_fake();
    ck_assert_uint_eq(a.n_cpus, 4);
    ck_assert_uint_eq(a.n_nodes, 2);
    ck_assert_uint_eq(a.cpus[2].core, 0);
    ck_assert_uint_eq(a.cpus[2].smt, 1);
    ck_assert_uint_eq(a.cpus[2].node, 0);
    ck_assert_uint_eq(a.cpus[3].node, 1);
    ck_assert_uint_eq(a.cpus[1].smt, 0);
    ck_assert_uint_eq(a.n_caches, 2);
    ck_assert_str_eq(a.caches[0].name, "L1d");
    ck_assert_uint_eq(a.caches[0].size, 32768);
    ck_assert_uint_eq(a.caches[0].shared, 2);
    ck_assert_str_eq(a.caches[1].name, "L3");
    ck_assert_uint_eq(a.caches[1].size, 16u << 20);

    uint32_t cpus[8], nodes[8];
    ck_assert_uint_eq(nib_topo_workers(&a, cpus, nodes, 8), 2); /* SMT siblings idle */
    ck_assert_uint_eq(cpus[0], 0);
    ck_assert_uint_eq(nodes[0], 0);
    ck_assert_uint_eq(cpus[1], 1);
    ck_assert_uint_eq(nodes[1], 1);
    ck_assert_uint_eq(nib_topo_workers(&a, cpus, nodes, 1), 1);
}
END_TEST

START_TEST(text_round_trip_and_diff)
{
    char err[256], buf[4096];
    fake_sysfs();
    ck_assert(nib_topo_read_sys(&a, root, err, sizeof err) == 0);
    rm_fake();
    FILE *f = fmemopen(buf, sizeof buf, "w");
    nib_topo_write(f, &a);
    fclose(f);
    ck_assert_msg(nib_topo_parse(&b, buf, strlen(buf), err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    ck_assert_int_eq(nib_topo_diff(&a, &b, err, sizeof err), 0);
    ck_assert_msg(!strstr(buf, "prefetch"), "%s", buf); /* 0: the build's default, not written */

    /* The prefetch tuning goes through the text form but is not compared:
     * /sys cannot say it. */
    a.prefetch = 8192;
    f = fmemopen(buf, sizeof buf, "w");
    nib_topo_write(f, &a);
    fclose(f);
    ck_assert_msg(strstr(buf, "\nprefetch 8192\n"), "%s", buf);
    ck_assert_msg(nib_topo_parse(&b, buf, strlen(buf), err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(b.prefetch, 8192);
    b.prefetch = 0;
    ck_assert_int_eq(nib_topo_diff(&a, &b, err, sizeof err), 0);
    b.prefetch = 8192;

    /* CPU 3 gone, CPU 1 on another node. */
    b.n_cpus = 3;
    b.cpus[1].node = 0;
    char d[512];
    int n = nib_topo_diff(&a, &b, d, sizeof d);
    ck_assert_int_ge(n, 2);
    ck_assert_msg(strstr(d, "cpu 3 is in the table but missing or offline here"), "%s", d);
    ck_assert_msg(strstr(d, "cpu 1 is on node 1 in the table, node 0 here"), "%s", d);
    /* The other way round: a CPU the table does not know. */
    n = nib_topo_diff(&b, &a, d, sizeof d);
    ck_assert_msg(strstr(d, "cpu 3 is online here but not in the table"), "%s", d);
    /* A tiny buffer still gets a terminated (cut) message. */
    char tiny[8];
    ck_assert_int_ge(nib_topo_diff(&a, &b, tiny, sizeof tiny), 2);
    ck_assert_uint_lt(strlen(tiny), sizeof tiny);
}
END_TEST

static void bad(const char *text, const char *want)
{
    char err[256];
    ck_assert_int_eq(nib_topo_parse(&a, text, strlen(text), err, sizeof err), -1);
    ck_assert_msg(strstr(err, want), "parse of %s said '%s', wanted '%s'", text, err, want);
}

START_TEST(parse_errors_name_the_line)
{
    bad("cpu 0 node 0 package 0 core 0 smt 0\n", "line 1: expected \"nibble-topology 1\"");
    bad("nibble-topology 7\n", "format version 7");
    bad("nibble-topology 1\ncpu 0 node x\n", "line 2: expected \"cpu N node N");
    bad("nibble-topology 1\ncpu 0 node 0 package 0 core 0 smt 0\ncpu 0 node 0 package 0 core 0 smt "
        "0\n",
        "line 3: cpu 0 listed twice");
    bad("nibble-topology 1\n# no cpus\n", "no cpu lines");
    bad("nibble-topology 1\ngpu 0\n", "line 2: unknown entry");
    bad("nibble-topology 1\ncpu 9999 node 0 package 0 core 0 smt 0\n", "must be below");
    bad("nibble-topology 1\nprefetch 100\n",
        "line 2: expected \"prefetch BYTES\", a multiple of 64");
    bad("nibble-topology 1\nprefetch 131072\n", "line 2: expected \"prefetch BYTES\"");
    bad("nibble-topology 1\nprefetch 4096 ahead\n", "line 2: expected \"prefetch BYTES\"");
    bad("nibble-topology 1\nprefetch\n", "line 2: unknown entry");
    bad("", "not a topology file");
}
END_TEST

START_TEST(reads_this_machine)
{
    char err[256];
    ck_assert_msg(nib_topo_read_sys(&a, "/sys", err, sizeof err) == 0, "%s", err);
    ck_assert_uint_ge(a.n_cpus, 1);
    ck_assert_uint_ge(a.n_nodes, 1);
    ck_assert_uint_eq(a.cpus[0].smt, 0);
    ck_assert_uint_eq((unsigned long)sysconf(_SC_NPROCESSORS_ONLN), a.n_cpus);
    uint32_t cpus[NIB_TOPO_MAX_CPUS];
    ck_assert_uint_ge(nib_topo_workers(&a, cpus, NULL, NIB_TOPO_MAX_CPUS), 1);
    ck_assert_uint_eq(nib_topo_read_sys(&a, "/nonexistent", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "online CPU list"), "%s", err);
}
END_TEST

START_TEST(cpulist)
{
    uint64_t bits[2];
    ck_assert_int_eq(nib_cpulist_parse("0-3,8,10-11", bits, 128), 7);
    ck_assert_uint_eq(bits[0], 0xD0Full);
    ck_assert_int_eq(nib_cpulist_parse("3-1", bits, 128), -1);
    ck_assert_int_eq(nib_cpulist_parse("200", bits, 128), -1);
    ck_assert_int_eq(nib_cpulist_parse("1;2", bits, 128), -1);
}
END_TEST

TU_SUITE("topology", "topology", NULL, NULL, 0, reads_fake_sysfs, text_round_trip_and_diff,
         parse_errors_name_the_line, reads_this_machine, cpulist)
