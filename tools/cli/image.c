/* nib image: a boot image for a blob (docs/appliance.md).
 *
 *   nib image BLOB -o DIR --appliance APP [--cpus N] [--numa N] [--memory SIZE]
 *   nib image BLOB --disk FILE --appliance APP [...]     (also, or instead of, -o)
 *   nib image --topology FILE [--cpus N] [--numa N]      (for -Dtopology=FILE)
 *
 * DIR gets the manifest (the virtual machine's geometry), the topology it
 * implies, Debian's kernel (copied; its version in the manifest) and an
 * initramfs (newc cpio) of nib-init as /init, APP as /appliance and its
 * arguments. APP is an appliance already linked around BLOB with the
 * topology of the geometry (meson -Dblob=BLOB -Dtopology=FILE, FILE from
 * --topology): nib image runs `APP --describe` and refuses one whose blob
 * or topology table differs, so the image and the machine always agree. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model_blob/blob_format.h"
#include "rt/topology.h"
#include "tools/cli/cli.h"
#include "tools/cli/image.h"
#include "tools/util/args.h"
#include "tools/util/cpio_newc.h"
#include "tools/util/tool_util.h"

#ifndef NIB_INIT_DEFAULT
#define NIB_INIT_DEFAULT "nib-init"
#endif
#define EFI_STUB_DEFAULT "/usr/lib/systemd/boot/efi/linuxx64.efi.stub"
#define IMAGE_CMDLINE "console=ttyS0 panic=-1 quiet loglevel=3"
#define MAX_CPUS 64
#define MAX_NODES 8

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib image BLOB -o DIR --appliance APP [OPTIONS]   a boot image (kernel, "
            "initramfs, manifest)\n"
            "       nib image BLOB --disk FILE --appliance APP [OPTIONS]  a flashable GPT/UEFI "
            "disk\n"
            "       nib image --topology FILE [--cpus N] [--numa N]   the topology to build APP "
            "with\n"
            "  --appliance APP   the appliance linked around BLOB (meson -Dblob=BLOB "
            "-Dtopology=FILE)\n"
            "  --cpus N          virtual CPUs (default 2, 1..%d)\n"
            "  --numa N          NUMA nodes, dividing the CPUs evenly (default 1, 1..%d)\n"
            "  --memory SIZE     guest memory, e.g. 1G or 512M (default 1G)\n"
            "  --kernel FILE     the kernel (default: the newest /boot/vmlinuz-*)\n"
            "  --init FILE       PID 1 (default: %s)\n"
            "  --efi-stub FILE   EFI stub for --disk (default: %s)\n"
            "  --arg ARG         one more appliance argument (repeatable)\n",
            MAX_CPUS, MAX_NODES, NIB_INIT_DEFAULT, EFI_STUB_DEFAULT);
}

int nib_image_run(char *const argv[], char *out, size_t out_cap, char *err, size_t errlen)
{
    int pfd[2] = {-1, -1};
    if (out && pipe2(pfd, O_CLOEXEC))
        return nib_fail(err, errlen, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        return nib_fail(err, errlen, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (out)
            dup2(pfd[1], 1);
        execvp(argv[0], argv);
        fprintf(stderr, "nib image: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    size_t used = 0;
    if (out) {
        close(pfd[1]);
        ssize_t n;
        char sink[4096];
        while ((n = read(pfd[0], used + 1 < out_cap ? out + used : sink,
                         used + 1 < out_cap ? out_cap - 1 - used : sizeof sink)) > 0)
            if (used + 1 < out_cap)
                used += (size_t)n;
        out[used] = 0;
        close(pfd[0]);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return nib_fail(err, errlen, "waiting for %s: %s", argv[0], strerror(errno));
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (WIFEXITED(st))
        return nib_fail(err, errlen, "%s exited with status %d", argv[0], WEXITSTATUS(st));
    return nib_fail(err, errlen, "%s was killed by signal %d", argv[0], WTERMSIG(st));
}

/* The guest's shape: cpus split evenly into nodes, one socket per node,
 * one thread per core, as `-smp N,sockets=K,cores=N/K,threads=1` and one
 * `-numa node` per socket make it. No caches: QEMU's are not the host's. */
static void geometry_topology(uint32_t cpus, uint32_t nodes, struct nib_topo *t)
{
    memset(t, 0, sizeof *t);
    uint32_t per = cpus / nodes;
    t->n_cpus = cpus;
    t->n_nodes = nodes;
    for (uint32_t i = 0; i < cpus; i++)
        t->cpus[i] = (struct nib_topo_cpu){
            .cpu = i, .node = i / per, .package = i / per, .core = i % per, .smt = 0};
}

static int write_topology(const char *path, const struct nib_topo *t)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nib image: %s: %s\n", path, strerror(errno));
        return -1;
    }
    nib_topo_write(f, t);
    if (fclose(f)) {
        fprintf(stderr, "nib image: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The newest /boot/vmlinuz-VERSION (by version order), into path/version. */
static int find_kernel(char *path, size_t cap, char *version, size_t vcap)
{
    DIR *d = opendir("/boot");
    if (!d)
        return -1;
    struct dirent *e;
    version[0] = 0;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "vmlinuz-", 8) && strverscmp(e->d_name + 8, version) > 0)
            snprintf(version, vcap, "%s", e->d_name + 8);
    closedir(d);
    if (!version[0])
        return -1;
    snprintf(path, cap, "/boot/vmlinuz-%s", version);
    return 0;
}

static int copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
    FILE *in = fopen(src, "rb");
    if (!in)
        return nib_fail(
            err, errlen, "%s: %s%s", src, strerror(errno),
            errno == EACCES
                ? " (a kernel readable by root only: copy it somewhere readable and give --kernel)"
                : "");
    FILE *out = fopen(dst, "wb");
    if (!out) {
        fclose(in);
        return nib_fail(err, errlen, "%s: %s", dst, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) {
            rc = nib_fail(err, errlen, "writing %s: %s", dst, strerror(errno));
            break;
        }
    if (ferror(in))
        rc = nib_fail(err, errlen, "reading %s", src);
    fclose(in);
    if (fclose(out) && !rc)
        rc = nib_fail(err, errlen, "%s: %s", dst, strerror(errno));
    return rc;
}

/* 1G, 512M, 1048576K, or bytes: MiB out, at least 128. */
static int parse_memory(const char *s, uint64_t *mib)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s < '0' || *s > '9')
        return -1;
    uint64_t shift = 0;
    if (!strcmp(end, "G") || !strcmp(end, "g"))
        shift = 30;
    else if (!strcmp(end, "M") || !strcmp(end, "m"))
        shift = 20;
    else if (!strcmp(end, "K") || !strcmp(end, "k"))
        shift = 10;
    else if (*end)
        return -1;
    if (v > (1ull << 40) >> shift)
        return -1;
    *mib = (v << shift) >> 20;
    return *mib >= 128 && *mib <= (1u << 20) ? 0 : -1;
}

struct image_opts {
    const char *blob, *out, *disk, *appliance, *kernel, *init, *stub, *topology;
    uint32_t cpus, nodes;
    uint64_t memory_mib;
    const char *args[32];
    uint32_t n_args;
};

/* `APP --describe` agrees with BLOB's header and with the geometry. */
static int check_appliance(const struct image_opts *o, const struct nib_topo *want)
{
    const uint8_t *data;
    size_t size;
    char err[512];
    if (nib_map_file(o->blob, &data, &size, err, sizeof err)) {
        fprintf(stderr, "nib image: %s\n", err);
        return -1;
    }
    struct nib_blob_header h;
    int small = size < sizeof h;
    if (!small)
        memcpy(&h, data, sizeof h);
    nib_unmap_file(data, size);
    if (small || memcmp(h.magic, NIB_BLOB_MAGIC, sizeof h.magic)) {
        fprintf(stderr, "nib image: %s is not a nibble blob (make one with nib compile)\n",
                o->blob);
        return -1;
    }
    static char text[64 * 1024];
    char app[4096]; /* with a '/': never searched on PATH */
    snprintf(app, sizeof app, "%s%s", strchr(o->appliance, '/') ? "" : "./", o->appliance);
    char *argv[] = {app, "--describe", NULL};
    if (nib_image_run(argv, text, sizeof text, err, sizeof err)) {
        fprintf(stderr, "nib image: --appliance %s: %s\n", o->appliance, err);
        return -1;
    }
    unsigned long long asize;
    unsigned acrc;
    if (sscanf(text, "blob size %llu crc32c %x", &asize, &acrc) != 2) {
        fprintf(stderr, "nib image: --appliance %s: `--describe` printed no blob line\n",
                o->appliance);
        return -1;
    }
    if (asize != size || acrc != h.crc32c) {
        fprintf(stderr,
                "nib image: --appliance %s embeds another blob (%llu bytes, crc32c %08x) than "
                "%s (%zu bytes, crc32c %08x): link it with meson -Dblob=%s\n",
                o->appliance, asize, acrc, o->blob, size, h.crc32c, o->blob);
        return -1;
    }
    static struct nib_topo have;
    const char *topo = strchr(text, '\n');
    topo = topo ? topo + 1 : text + strlen(text);
    if (nib_topo_parse(&have, topo, strlen(topo), err, sizeof err)) {
        fprintf(stderr, "nib image: --appliance %s: its topology table: %s\n", o->appliance, err);
        return -1;
    }
    char diff[2048];
    if (nib_topo_diff(&have, want, diff, sizeof diff) || have.n_caches) {
        fprintf(stderr,
                "nib image: --appliance %s was built for another machine than %u CPUs on %u "
                "node%s: %s%s; build it with -Dtopology=FILE from `nib image --topology FILE "
                "--cpus %u --numa %u`\n",
                o->appliance, o->cpus, o->nodes, o->nodes == 1 ? "" : "s", diff,
                have.n_caches ? " (its table has caches; the geometry has none)" : "", o->cpus,
                o->nodes);
        return -1;
    }
    return 0;
}

static int write_initramfs(const struct image_opts *o, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return nib_fail(err, errlen, "%s: %s", path, strerror(errno));
    struct nib_cpio c;
    nib_cpio_begin(&c, f);
    static const char *const dirs[] = {"dev", "proc", "sys", "run", "tmp", "etc", "etc/nibble"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        nib_cpio_dir(&c, dirs[i], 0755);
    nib_cpio_chardev(&c, "dev/console", 0600, 5, 1);
    nib_cpio_file(&c, "init", 0755, o->init);
    nib_cpio_file(&c, "appliance", 0755, o->appliance);
    char args[4096];
    size_t used = 0;
    for (uint32_t i = 0; i < o->n_args && used < sizeof args; i++)
        used += (size_t)snprintf(args + used, sizeof args - used, "%s\n", o->args[i]);
    if (used >= sizeof args)
        used = sizeof args - 1;
    nib_cpio_bytes(&c, "etc/nibble/appliance.args", 0644, args, used);
    int rc = nib_cpio_end(&c);
    if (fclose(f) && !rc)
        return nib_fail(err, errlen, "%s: %s", path, strerror(errno));
    if (rc)
        return nib_fail(err, errlen, "%s: %s", path, c.err);
    return 0;
}

static int write_manifest(const struct image_opts *o, const char *path, const char *kversion)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nib image: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f,
            "# nibble boot image, written by `nib image`; format: docs/appliance.md\n"
            "nibble-image 1\n"
            "cpus %u\n"
            "numa %u\n"
            "memory-mib %llu\n"
            "kernel vmlinuz\n"
            "kernel-version %s\n"
            "initramfs initramfs.cpio\n"
            "cmdline %s\n"
            "topology topology.txt\n",
            o->cpus, o->nodes, (unsigned long long)o->memory_mib, kversion, IMAGE_CMDLINE);
    if (fclose(f)) {
        fprintf(stderr, "nib image: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

enum {
    O_OUT = NIB_ARGS_OPT,
    O_DISK,
    O_APP,
    O_CPUS,
    O_NUMA,
    O_MEM,
    O_KERNEL,
    O_INIT,
    O_STUB,
    O_TOPO,
    O_ARG
};

int nib_image_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"-o", O_OUT, 1},          {"--disk", O_DISK, 1}, {"--appliance", O_APP, 1},
        {"--cpus", O_CPUS, 1},     {"--numa", O_NUMA, 1}, {"--memory", O_MEM, 1},
        {"--kernel", O_KERNEL, 1}, {"--init", O_INIT, 1}, {"--efi-stub", O_STUB, 1},
        {"--topology", O_TOPO, 1}, {"--arg", O_ARG, 1},   {NULL, 0, 0},
    };
    struct image_opts o = {.cpus = 2,
                           .nodes = 1,
                           .memory_mib = 1024,
                           .init = NIB_INIT_DEFAULT,
                           .stub = EFI_STUB_DEFAULT};
    struct nib_args a;
    nib_args_init(&a, "nib image", argc, argv, opts, usage, &o.blob);
    int id;
    while ((id = nib_args_next(&a)) > NIB_ARGS_END) {
        switch (id) {
        case O_OUT: o.out = a.value; break;
        case O_DISK: o.disk = a.value; break;
        case O_APP: o.appliance = a.value; break;
        case O_KERNEL: o.kernel = a.value; break;
        case O_INIT: o.init = a.value; break;
        case O_STUB: o.stub = a.value; break;
        case O_TOPO: o.topology = a.value; break;
        case O_CPUS:
            if (nib_args_u32(&a, 1, MAX_CPUS, &o.cpus))
                return 2;
            break;
        case O_NUMA:
            if (nib_args_u32(&a, 1, MAX_NODES, &o.nodes))
                return 2;
            break;
        case O_MEM:
            if (parse_memory(a.value, &o.memory_mib))
                return nib_args_fail(&a,
                                     "--memory wants a size of 128M or more, like 1G or "
                                     "512M, not '%s'",
                                     a.value);
            break;
        case O_ARG:
            if (o.n_args == sizeof o.args / sizeof o.args[0])
                return nib_args_fail(&a, "at most %zu --arg", sizeof o.args / sizeof o.args[0]);
            if (strchr(a.value, '\n') || !*a.value)
                return nib_args_fail(&a, "--arg: an argument may not be empty or hold a newline");
            o.args[o.n_args++] = a.value;
            break;
        }
    }
    if (id == NIB_ARGS_EXIT)
        return a.status;
    if (o.cpus % o.nodes)
        return nib_args_fail(&a, "--cpus %u does not split evenly into --numa %u nodes", o.cpus,
                             o.nodes);
    static struct nib_topo want;
    geometry_topology(o.cpus, o.nodes, &want);
    if (o.topology) {
        if (o.out || o.disk || o.blob)
            return nib_args_fail(&a, "--topology only writes the topology: no BLOB, -o or --disk");
        return write_topology(o.topology, &want) ? 1 : 0;
    }
    if (!o.blob)
        return nib_args_missing(&a);
    if (!o.out && !o.disk)
        return nib_args_fail(&a, "say where the image goes: -o DIR, --disk FILE or both");
    if (!o.appliance)
        return nib_args_fail(&a,
                             "--appliance APP is needed: the appliance linked around %s "
                             "(meson setup BUILD -Dblob=%s -Dtopology=FILE -Dtests=false, "
                             "FILE from nib image --topology FILE)",
                             o.blob, o.blob);
    if (check_appliance(&o, &want))
        return 1;

    char kpath[4096], kversion[256];
    if (o.kernel) {
        snprintf(kpath, sizeof kpath, "%s", o.kernel);
        const char *b = strrchr(o.kernel, '/');
        b = b ? b + 1 : o.kernel;
        snprintf(kversion, sizeof kversion, "%s", strncmp(b, "vmlinuz-", 8) ? "unknown" : b + 8);
    } else if (find_kernel(kpath, sizeof kpath, kversion, sizeof kversion)) {
        fprintf(stderr, "nib image: no /boot/vmlinuz-*: apt-get install linux-image-amd64, or "
                        "give --kernel FILE\n");
        return 1;
    }

    char dir[4096];
    int temp_dir = !o.out;
    if (o.out)
        snprintf(dir, sizeof dir, "%s", o.out);
    else
        snprintf(dir, sizeof dir, "%s.parts", o.disk);
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "nib image: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char err[1024], p_kernel[4200], p_initrd[4200], p_manifest[4200], p_topo[4200];
    snprintf(p_kernel, sizeof p_kernel, "%s/vmlinuz", dir);
    snprintf(p_initrd, sizeof p_initrd, "%s/initramfs.cpio", dir);
    snprintf(p_manifest, sizeof p_manifest, "%s/manifest", dir);
    snprintf(p_topo, sizeof p_topo, "%s/topology.txt", dir);
    int rc = 0;
    if (copy_file(kpath, p_kernel, err, sizeof err) ||
        write_initramfs(&o, p_initrd, err, sizeof err)) {
        fprintf(stderr, "nib image: %s\n", err);
        rc = 1;
    } else if (write_topology(p_topo, &want) || write_manifest(&o, p_manifest, kversion)) {
        rc = 1;
    } else if (o.disk && nib_image_disk(o.disk, dir, o.stub, p_kernel, p_initrd, IMAGE_CMDLINE, err,
                                        sizeof err)) {
        fprintf(stderr, "nib image: --disk %s: %s\n", o.disk, err);
        rc = 1;
    }
    if (temp_dir || rc) { /* no half-made image is left behind */
        unlink(p_kernel);
        unlink(p_initrd);
        unlink(p_manifest);
        unlink(p_topo);
        char p[4200];
        snprintf(p, sizeof p, "%s/os-release", dir);
        unlink(p);
        snprintf(p, sizeof p, "%s/cmdline", dir);
        unlink(p);
        snprintf(p, sizeof p, "%s/layout.sfdisk", dir);
        unlink(p);
        rmdir(dir);
    }
    if (!rc)
        printf("nib image: %s%s%s (%u CPUs, %u node%s, %llu MiB, kernel %s)\n", o.out ? o.out : "",
               o.out && o.disk ? " and " : "", o.disk ? o.disk : "", o.cpus, o.nodes,
               o.nodes == 1 ? "" : "s", (unsigned long long)o.memory_mib, kversion);
    return rc;
}
