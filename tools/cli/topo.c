/* nib topo: describe this machine (CPUs, cores and SMT siblings, NUMA
 * nodes, caches) for the appliance's topology table; turn a description
 * into the C table the build compiles in; compare a description with this
 * machine. Format: docs/runtime.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/topology.h"
#include "tools/cli/cli.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nib topo [-o FILE] [--sysfs DIR]   describe this machine (default: stdout)\n"
               "       nib topo --c TOPO -o FILE.c         C table for the appliance (the build "
               "runs this)\n"
               "       nib topo --check TOPO               compare TOPO with this machine\n");
}

static int load(const char *path, struct nib_topo *t)
{
    const uint8_t *data;
    size_t size;
    char err[256];
    if (nib_map_file(path, &data, &size, err, sizeof err)) {
        fprintf(stderr, "nib topo: %s\n", err);
        return -1;
    }
    int rc = nib_topo_parse(t, (const char *)data, size, err, sizeof err);
    nib_unmap_file(data, size);
    if (rc)
        fprintf(stderr, "nib topo: %s: %s\n", path, err);
    return rc;
}

enum { O_OUT = NIB_ARGS_OPT, O_C, O_CHECK, O_SYSFS };

int nib_topo_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"-o", O_OUT, 1},        {"--c", O_C, 1}, {"--check", O_CHECK, 1},
        {"--sysfs", O_SYSFS, 1}, {NULL, 0, 0},
    };
    const char *out = NULL, *c_from = NULL, *check = NULL, *sysfs = NULL;
    struct nib_args a;
    nib_args_init(&a, "nib topo", argc, argv, opts, usage, NULL);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        *(o == O_OUT ? &out : o == O_C ? &c_from : o == O_CHECK ? &check : &sysfs) = a.value;
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (check && c_from)
        return nib_args_fail(&a, "--check and --c are two different jobs: give one");
    if (check && out)
        nib_args_note(a.cmd, "-o is ignored: --check only compares");
    if (c_from && sysfs)
        nib_args_note(a.cmd, "--sysfs is ignored: --c reads its table from %s", c_from);
    if (!sysfs)
        sysfs = "/sys";
    static struct nib_topo t, here;
    char err[512];
    if (check) {
        if (load(check, &t)) /* it said why */
            return 1;
        if (nib_topo_read_sys(&here, sysfs, err, sizeof err)) {
            fprintf(stderr, "nib topo: %s\n", err);
            return 1;
        }
        char diff[4096];
        int n = nib_topo_diff(&t, &here, diff, sizeof diff);
        if (n) {
            printf("%s differs from this machine (%d difference%s): %s\n", check, n,
                   n == 1 ? "" : "s", diff);
            return 1;
        }
        printf("%s matches this machine\n", check);
        return 0;
    }
    if (c_from) {
        if (load(c_from, &t))
            return 1;
    } else if (nib_topo_read_sys(&t, sysfs, err, sizeof err)) {
        fprintf(stderr, "nib topo: %s\n", err);
        return 1;
    }
    FILE *f = stdout;
    char tmp[4096];
    if (out) {
        snprintf(tmp, sizeof tmp, "%s.tmp", out);
        f = fopen(tmp, "w");
        if (!f) {
            perror(tmp);
            return 1;
        }
    }
    if (c_from)
        nib_topo_write_c(f, &t, c_from);
    else
        nib_topo_write(f, &t);
    if (out) {
        if (fclose(f) != 0 || rename(tmp, out) != 0) {
            perror(out);
            remove(tmp);
            return 1;
        }
    }
    return 0;
}
