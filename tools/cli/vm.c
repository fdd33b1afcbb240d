/* nib vm run DIR --name NAME: the host side of a VM appliance (docs/ring.md
 * §19, docs/appliance.md). It makes the region (a sealed memfd), starts
 * QEMU with the manifest's geometry and the region as an ivshmem-plain
 * device, waits for the appliance in the guest to lay the region out, and
 * then serves local hosts exactly as a local appliance does: the same
 * socket, lock and sealed memfds (boot/channel.c), the same control channel
 * (rt/control.c), each host's ring relayed to the same-numbered ring of the
 * region (tools/cli/vm_relay.c). It returns once the appliance is ready,
 * the serving child going on in the background (--foreground: serve here).
 * `nib stop --name NAME` stops the guest's appliance through the mailbox;
 * the guest powers off and the server exits. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boot/boot.h"
#include "proto/ctl.h"
#include "proto/private/sync.h"
#include "proto/vm_region.h"
#include "rt/serve.h"
#include "tools/cli/cli.h"
#include "tools/cli/vm_plan.h"
#include "tools/cli/vm_relay.h"
#include "tools/host/nibhost_check.h"

#define PROBE_S 5           /* KVM probe: the kernel to its panic (about 1 s where KVM works) */
#define READY_S_DEFAULT 300 /* boot to READY under TCG: ~15 s; generous */
#define CMD_TIMEOUT_NS 5000000000ull

struct manifest {
    unsigned cpus, numa;
    unsigned long long memory_mib;
    char kernel[4200], initramfs[4200], cmdline[1024];
};

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig)
{
    (void)sig;
    stop_signal = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: nib vm run DIR --name NAME [--accel auto|kvm|tcg] [--region-mib N]\n"
               "                  [--console FILE] [--timeout S] [--qemu PROGRAM] [--foreground]\n"
               "                  [--pin auto|on|off]\n"
               "  DIR           an image made by nib image (its manifest gives the geometry)\n"
               "  --name NAME   the name local hosts attach to, as to a local appliance\n"
               "  --accel       auto (default): KVM when a probe guest runs under it, else TCG\n"
               "  --region-mib  the shared region's size (default 64; a power of two)\n"
               "  --console F   the guest's serial console (default <runtime dir>/NAME.console)\n"
               "  --timeout S   boot to READY (default 300)\n"
               "  --pin P       auto (default): pin vCPU threads to host cores under KVM;\n"
               "                on: also under TCG; off: never\n"
               "  --qemu P      the emulator (default qemu-system-x86_64; tests pass a\n"
               "                stand-in guest that takes the same arguments)\n"
               "  --foreground  serve in this process (systemd, tests): exits 0 when the\n"
               "                guest powered off cleanly after nib stop\n"
               "Returns 0 once the appliance is ready (or 1 with the console's last lines\n"
               "when it refused to boot), leaving a process that serves until nib stop\n"
               "--name NAME (or SIGTERM); it then logs to <runtime dir>/NAME.log.\n");
}

static int read_manifest(const char *dir, struct manifest *m)
{
    char path[4200], line[1200];
    snprintf(path, sizeof path, "%s/manifest", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nib vm run: %s: %s\n", path, strerror(errno));
        return -1;
    }
    memset(m, 0, sizeof *m);
    int version = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *v = strchr(line, ' ');
        if (line[0] == '#' || !v)
            continue;
        *v++ = 0;
        if (!strcmp(line, "nibble-image"))
            version = atoi(v);
        else if (!strcmp(line, "cpus"))
            m->cpus = (unsigned)atoi(v);
        else if (!strcmp(line, "numa"))
            m->numa = (unsigned)atoi(v);
        else if (!strcmp(line, "memory-mib"))
            m->memory_mib = strtoull(v, NULL, 10);
        else if (!strcmp(line, "kernel"))
            snprintf(m->kernel, sizeof m->kernel, "%s/%s", dir, v);
        else if (!strcmp(line, "initramfs"))
            snprintf(m->initramfs, sizeof m->initramfs, "%s/%s", dir, v);
        else if (!strcmp(line, "cmdline"))
            snprintf(m->cmdline, sizeof m->cmdline, "%s", v);
    }
    fclose(f);
    if (version != 1 || !m->cpus || !m->numa || m->cpus % m->numa || !m->memory_mib ||
        m->memory_mib % m->numa || !m->kernel[0] || !m->initramfs[0]) {
        fprintf(stderr,
                "nib vm run: %s: not a complete version 1 manifest (nib image writes "
                "one)\n",
                path);
        return -1;
    }
    return 0;
}

/* Start QEMU; stdout and stderr to console, the region inherited as fd. */
static pid_t spawn(char **argv, const char *console, int keep_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int out = open(console, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
        _exit(127);
    if (keep_fd >= 0)
        fcntl(keep_fd, F_SETFD, 0);
    execvp(argv[0], argv);
    _exit(127);
}

/* Wait up to ms for pid; its exit status, or -1 (still running: killed). */
static int wait_bounded(pid_t pid, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* KVM works when the image's kernel, booted under it with no initramfs,
 * reaches its "no root file system" panic (panic=-1 reboots, -no-reboot
 * exits) within PROBE_S seconds. Here, nested KVM guests hang in early
 * boot (a guest that only writes a port finishes, Linux does not), so the
 * probe boots Linux itself. */
static int kvm_works(const char *tmpdir, const char *kernel, char *why, size_t whylen)
{
    if (access("/dev/kvm", R_OK | W_OK)) {
        snprintf(why, whylen, "/dev/kvm is not usable (%s)", strerror(errno));
        return 0;
    }
    char console[4200];
    snprintf(console, sizeof console, "%s/kvm-probe.out", tmpdir);
    char *argv[] = {"qemu-system-x86_64",
                    "-machine",
                    "q35",
                    "-accel",
                    "kvm",
                    "-cpu",
                    "host",
                    "-m",
                    "256M",
                    "-display",
                    "none",
                    "-monitor",
                    "none",
                    "-serial",
                    "stdio",
                    "-no-reboot",
                    "-kernel",
                    (char *)kernel,
                    "-append",
                    "console=ttyS0 panic=-1 loglevel=3",
                    NULL};
    int rc = wait_bounded(spawn(argv, console, -1), PROBE_S * 1000);
    unlink(console);
    if (rc == 0)
        return 1;
    if (rc < 0)
        snprintf(why, whylen,
                 "its kernel did not boot under KVM within %d s (a probe; nested KVM hangs "
                 "on some hosts)",
                 PROBE_S);
    else
        snprintf(why, whylen, "a probe boot under KVM failed (QEMU exit %d)", rc);
    return 0;
}

static int qemu_argv(const char *qemu, const struct manifest *m, int kvm, int huge,
                     const uint32_t *host_node, enum vm_mem_policy policy, int fd, uint64_t size,
                     char **argv, char store[][4300], int max)
{
    int n = 0, k = 0;
#define ARG(...) (snprintf(store[k], sizeof store[k], __VA_ARGS__), argv[n++] = store[k++])
    ARG("%s", qemu);
    ARG("-machine");
    ARG("q35");
    ARG("-accel");
    ARG("%s", kvm ? "kvm" : "tcg");
    ARG("-cpu");
    ARG("%s", kvm ? "host" : "max");
    ARG("-m");
    ARG("%lluM", m->memory_mib);
    ARG("-smp");
    ARG("%u,sockets=%u,cores=%u,threads=1", m->cpus, m->numa, m->cpus / m->numa);
    for (unsigned i = 0; i < m->numa; i++) {
        unsigned per = m->cpus / m->numa;
        ARG("-object");
        vm_mem_backend_arg(store[k], sizeof store[k], i, m->memory_mib / m->numa, huge,
                           policy == VM_MEM_ANY ? 0 : host_node[i], policy);
        argv[n++] = store[k++];
        ARG("-numa");
        ARG("node,nodeid=%u,cpus=%u-%u,memdev=mem%u", i, i * per, (i + 1) * per - 1, i);
    }
    ARG("-object");
    ARG("memory-backend-file,id=vmr,share=on,mem-path=/proc/self/fd/%d,size=%llu", fd,
        (unsigned long long)size);
    ARG("-device");
    ARG("ivshmem-plain,memdev=vmr");
    ARG("-name");
    ARG("nibble,debug-threads=on"); /* vCPU threads named "CPU N/KVM": pinning finds them */
    ARG("-display");
    ARG("none");
    ARG("-monitor");
    ARG("none");
    ARG("-serial");
    ARG("stdio");
    ARG("-no-reboot");
    ARG("-device");
    ARG("isa-debug-exit,iobase=0x501,iosize=2");
    ARG("-kernel");
    ARG("%s", m->kernel);
    ARG("-initrd");
    ARG("%s", m->initramfs);
    ARG("-append");
    ARG("%s", m->cmdline);
#undef ARG
    argv[n] = NULL;
    return n < max ? 0 : -1;
}

/* Pin each vCPU thread of QEMU not pinned yet (done[i] 0) to cpu_of[i].
 * Returns how many are pinned in all. */
static unsigned pin_vcpus(pid_t qemu, const uint32_t *cpu_of, unsigned cpus, unsigned char *done)
{
    char path[128];
    snprintf(path, sizeof path, "/proc/%d/task", (int)qemu);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            char comm[64] = {0};
            snprintf(path, sizeof path, "/proc/%d/task/%.20s/comm", (int)qemu, e->d_name);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t n = read(fd, comm, sizeof comm - 1);
            close(fd);
            int i = n > 0 ? vm_vcpu_index(comm) : -1;
            if (i < 0 || (unsigned)i >= cpus || done[i])
                continue;
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu_of[i], &set);
            if (!sched_setaffinity((pid_t)atoi(e->d_name), sizeof set, &set))
                done[i] = 1;
        }
        closedir(d);
    }
    unsigned pinned = 0;
    for (unsigned i = 0; i < cpus; i++)
        pinned += done[i];
    return pinned;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                          .tv_nsec = (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
}

struct mux {
    struct nib_vmr_header *h;
    uint64_t size, epoch, beat, beat_ns;
    uint32_t seq;
    pid_t qemu;
    int qemu_status; /* -1 while it runs */
    struct nib_vmr_watch guest;
};

static void mux_tick(struct mux *x)
{
    uint64_t now = nib_now_ns();
    if (now - x->beat_ns >= NIB_VMR_BEAT_NS / 2) {
        nib_vmr_beat(&x->h->mux_beat, &x->beat);
        x->beat_ns = now;
    }
    int st;
    if (x->qemu_status < 0 && waitpid(x->qemu, &st, WNOHANG) == x->qemu)
        x->qemu_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Post a command and wait (bounded) for its answer: the status, or -1. */
static int mux_command(struct mux *x, uint32_t type, uint32_t ring, uint32_t uid,
                       uint32_t *attach_seq)
{
    struct nib_vmr_cmd c = {.seq = ++x->seq, .type = type, .ring = ring, .uid = uid};
    nib_vmr_cmd_post(x->h, &c);
    uint64_t t0 = nib_now_ns(), pause = 0;
    while (nib_now_ns() - t0 < CMD_TIMEOUT_NS) {
        struct nib_vmr_ans a;
        if (nib_vmr_ans_take(x->h, c.seq, &a)) {
            char err[128];
            if (nib_vmr_parse_ans(&a, &c, err, sizeof err)) {
                fprintf(stderr, "nib vm run: the guest's answer: %s\n", err);
                return -1;
            }
            if (attach_seq)
                *attach_seq = a.attach_seq;
            return (int)a.status;
        }
        mux_tick(x);
        if (x->qemu_status >= 0)
            return -1;
        pause = nib_vmr_backoff(pause);
        sleep_ns(pause);
    }
    fprintf(stderr, "nib vm run: the guest did not answer command %u within 5 s\n", type);
    return -1;
}

static void console_tail(const char *console)
{
    FILE *f = fopen(console, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, n > 2000 ? n - 2000 : 0, SEEK_SET);
    char buf[2048];
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    buf[got] = 0;
    fclose(f);
    fprintf(stderr, "---- the guest's console (%s), last lines ----\n%s\n----\n", console, buf);
}

/* Fork: the child goes on to serve, the parent waits for its word. The
 * parent returns 0 when the child is ready, else the child's exit status
 * (its messages, the console's tail among them, are on the stderr both
 * share until then). In the child returns -1 with *ready_fd to write the
 * word to. */
static int serve_in_background(int *ready_fd)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC)) {
        fprintf(stderr, "nib vm run: pipe: %s\n", strerror(errno));
        return 1;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "nib vm run: fork: %s\n", strerror(errno));
        return 1;
    }
    if (child == 0) {
        close(p[0]);
        *ready_fd = p[1];
        return -1;
    }
    close(p[1]);
    char word;
    ssize_t n;
    do
        n = read(p[0], &word, 1);
    while (n < 0 && errno == EINTR);
    close(p[0]);
    if (n == 1)
        return 0;
    int st;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
}

/* Ready, in the background: our own session, the standard descriptors to
 * the log (so whoever waits on the caller's output sees it end), then the
 * word that lets the caller return. */
static void detach(int ready_fd, const char *log)
{
    setsid();
    int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out >= 0 && in >= 0) {
        fprintf(stderr, "nib vm run: serving in the background; log %s\n", log);
        fflush(stderr);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
    }
    if (out >= 0)
        close(out);
    if (in >= 0)
        close(in);
    signal(SIGPIPE, SIG_IGN); /* a caller already gone is no reason to stop */
    if (write(ready_fd, "R", 1) < 0) {
        /* the caller is gone; serve on */
    }
    close(ready_fd);
}

static int run(int argc, char **argv)
{
    const char *dir = NULL, *name = NULL, *accel = "auto", *console_opt = NULL;
    const char *qemu = "qemu-system-x86_64", *pin_opt = "auto";
    unsigned long region_mib = 64, ready_s = READY_S_DEFAULT;
    int foreground = 0;
    for (int i = 1; i < argc; i++) {
        int v = i + 1 < argc;
        if (!strcmp(argv[i], "--name") && v)
            name = argv[++i];
        else if (!strcmp(argv[i], "--accel") && v)
            accel = argv[++i];
        else if (!strcmp(argv[i], "--region-mib") && v)
            region_mib = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--console") && v)
            console_opt = argv[++i];
        else if (!strcmp(argv[i], "--pin") && v)
            pin_opt = argv[++i];
        else if (!strcmp(argv[i], "--foreground"))
            foreground = 1;
        else if (!strcmp(argv[i], "--qemu") && v)
            qemu = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && v)
            ready_s = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !dir)
            dir = argv[i];
        else {
            fprintf(stderr, "nib vm run: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!dir || !name || (strcmp(accel, "auto") && strcmp(accel, "kvm") && strcmp(accel, "tcg")) ||
        (strcmp(pin_opt, "auto") && strcmp(pin_opt, "on") && strcmp(pin_opt, "off")) ||
        region_mib < 1 || region_mib > 65536 || (region_mib & (region_mib - 1)) || !ready_s) {
        fprintf(stderr, "nib vm run: need DIR and --name; --accel auto|kvm|tcg; --pin "
                        "auto|on|off; --region-mib a power of two up to 65536; --timeout > 0\n");
        usage(stderr);
        return 2;
    }
    char nerr[256];
    if (nib_name_check(name, nerr, sizeof nerr)) {
        fprintf(stderr, "nib vm run: --name: %s\n", nerr);
        return 2;
    }
    struct manifest m;
    if (read_manifest(dir, &m))
        return 1;
    int ready_fd = -1;
    if (!foreground) {
        int rc = serve_in_background(&ready_fd);
        if (rc >= 0)
            return rc; /* the caller's side: ready, or the server's failure */
    }
    char err[1024];
    static struct boot_channel ch;
    if (boot_name(name, 0, &ch, err, sizeof err)) {
        fprintf(stderr, "nib vm run: %s\n", err);
        return 1;
    }
    char console[4200];
    if (console_opt)
        snprintf(console, sizeof console, "%s", console_opt);
    else
        snprintf(console, sizeof console, "%s/%s.console", ch.paths.dir, name);
    int kvm = !strcmp(accel, "kvm");
    if (!strcmp(accel, "auto")) {
        char why[512];
        kvm = kvm_works(ch.paths.dir, m.kernel, why, sizeof why);
        if (!kvm)
            fprintf(stderr,
                    "nib vm run: KVM not used: %s; running under TCG (-cpu max: AVX2, "
                    "FMA, F16C; no AVX-512), much slower\n",
                    why);
    }

    /* The region: sealed before QEMU sees it, so neither side can be sent a SIGBUS. */
    uint64_t size = (uint64_t)region_mib << 20;
    int fd = memfd_create("nibble-vm-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)size) ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
        fprintf(stderr, "nib vm run: the region memfd: %s\n", strerror(errno));
        return 1;
    }
    struct mux x = {.size = size, .qemu_status = -1};
    x.h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (x.h == MAP_FAILED) {
        fprintf(stderr, "nib vm run: mapping the region: %s\n", strerror(errno));
        return 1;
    }
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    x.epoch = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    nib_vmr_init(x.h, size, x.epoch, NIB_VMR_RINGS_MAX);

    /* Guest memory on huge pages when the host has enough free. */
    char plan_why[512];
    int huge = vm_huge_plan(vm_huge_free("/sys"), m.memory_mib, m.numa, plan_why, sizeof plan_why);
    fprintf(stderr, "nib vm run: guest memory on %s (%s)\n",
            huge ? "2 MiB huge pages" : "ordinary pages", plan_why);
    /* vCPU pinning: under KVM (auto), or asked for (on); each guest node's
     * memory then on the host node its vCPUs are pinned to. */
    static uint32_t pin_cpu[NIB_TOPO_MAX_CPUS], mem_node[NIB_TOPO_MAX_CPUS];
    static unsigned char pin_done[NIB_TOPO_MAX_CPUS];
    static struct nib_topo host;
    enum vm_mem_policy mem_policy = VM_MEM_ANY;
    int pin = !strcmp(pin_opt, "on") || (kvm && !strcmp(pin_opt, "auto"));
    if (pin) {
        if (m.cpus > NIB_TOPO_MAX_CPUS ||
            nib_topo_read_sys(&host, "/sys", plan_why, sizeof plan_why) ||
            vm_pin_plan(&host, m.cpus, m.numa, pin_cpu, plan_why, sizeof plan_why)) {
            fprintf(stderr, "nib vm run: vCPU threads not pinned: %s\n", plan_why);
            pin = 0;
        }
    }
    if (pin) { /* m.numa <= m.cpus <= NIB_TOPO_MAX_CPUS: mem_node holds them */
        mem_policy = vm_mem_plan(&host, "/sys", m.memory_mib, m.numa, huge, mem_node, plan_why,
                                 sizeof plan_why);
        if (mem_policy != VM_MEM_ANY)
            fprintf(stderr, "nib vm run: each guest node's memory %s its vCPUs' host node (%s)\n",
                    mem_policy == VM_MEM_BIND ? "bound to" : "preferring", plan_why);
    }
    unsigned pinned = 0;

    char *qargv[72];
    static char store[72][4300];
    if (qemu_argv(qemu, &m, kvm, huge, mem_node, mem_policy, fd, size, qargv, store, 72))
        return 1;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    x.qemu = spawn(qargv, console, fd);
    if (x.qemu < 0) {
        fprintf(stderr, "nib vm run: fork: %s\n", strerror(errno));
        return 1;
    }
    uint64_t t0 = nib_now_ns();
    /* acquire: pairs with the appliance's release of guest_state READY */
    while (nib_load_acq(&x.h->guest_state) != NIB_VMR_GUEST_READY) {
        mux_tick(&x);
        if (pin && pinned < m.cpus && x.qemu_status < 0)
            pinned = pin_vcpus(x.qemu, pin_cpu, m.cpus, pin_done);
        if (x.qemu_status >= 0 || stop_signal || nib_now_ns() - t0 > ready_s * 1000000000ull) {
            if (x.qemu_status >= 0)
                fprintf(stderr,
                        "nib vm run: the guest powered off before its appliance was ready "
                        "(QEMU exit %d)\n",
                        x.qemu_status);
            else
                fprintf(stderr, "nib vm run: the guest %s before its appliance was ready\n",
                        stop_signal ? "was stopped" : "timed out");
            console_tail(console);
            if (x.qemu_status < 0)
                wait_bounded(x.qemu, 0);
            return 1;
        }
        sleep_ns(10000000);
    }
    /* The layout and the appliance header, checked on private copies. */
    struct nib_vmr_header lay;
    struct nib_shm_header app;
    memcpy(&lay, x.h, sizeof lay);
    static struct nib_shm_tensor tensors[NIB_TENSOR_MAX];
    memcpy(&app, (uint8_t *)x.h + NIB_VMR_APP_HEADER_OFFSET, sizeof app);
    /* A vision model's tensor table (its second header page): checked as a
     * host checks it, once the header says the page is there. */
    int bad = nib_vmr_check_layout(&lay, &app, size, x.epoch, err, sizeof err) ||
              nib_host_check_header(&app, 0, app.epoch, lay.app_header_size, app.ring_size,
                                    "the guest", err, sizeof err);
    if (!bad && (app.features & NIB_FEAT_TENSOR)) {
        memcpy(tensors, (uint8_t *)x.h + NIB_VMR_APP_HEADER_OFFSET + NIB_SHM_TENSORS_OFFSET,
               sizeof tensors);
        bad = nib_host_check_tensors(&app, tensors, "the guest", err, sizeof err);
    }
    if (bad) {
        fprintf(stderr, "nib vm run: the guest's region: %s\n", err);
        wait_bounded(x.qemu, 0);
        return 1;
    }
    nib_vmr_watch_start(&x.guest, nib_vmr_beat_read(&x.h->guest_beat), nib_now_ns());

    /* The local side, as a local appliance makes it. */
    if (boot_memfds(&ch, lay.app_header_size, lay.n_rings, app.ring_size, err, sizeof err)) {
        fprintf(stderr, "nib vm run: %s\n", err);
        wait_bounded(x.qemu, 0);
        return 1;
    }
    struct nib_shm_header *hdr = ch.header;
    /* Both pages for a vision model: its tensor table is the second. Its
     * hosts check that table at attach, as they check a local appliance's. */
    memcpy(hdr, (uint8_t *)x.h + NIB_VMR_APP_HEADER_OFFSET, lay.app_header_size);
    memcpy(hdr, &app, sizeof app); /* the checked copies, not a second read */
    if (app.features & NIB_FEAT_TENSOR)
        memcpy((uint8_t *)hdr + NIB_SHM_TENSORS_OFFSET, tensors, sizeof tensors);
    hdr->state = NIB_APP_BOOTING; /* READY once the socket listens */
    hdr->sleeping = 0;            /* the relay never sleeps long: no KICK needed */
    hdr->appliance_pid = (uint32_t)getpid();
    hdr->hosts_attached = 0;
    hdr->heartbeat_ns = nib_now_ns();
    static struct nib_server s;
    memset(&s, 0, sizeof s);
    s.hdr = hdr;
    s.stats = (struct nib_stats *)(void *)((uint8_t *)hdr + NIB_SHM_STATS_OFFSET);
    s.n_rings = lay.n_rings;
    s.header_fd = ch.header_fd;
    s.uid = (uint32_t)geteuid();
    s.gid = (uint32_t)getegid();
    for (uint32_t i = 0; i < NIB_HOSTS_MAX; i++) {
        s.rings[i].conn = -1;
        s.rings[i].mem_fd = -1;
    }
    for (uint32_t i = 0; i < NIB_CONNS_MAX; i++) {
        s.conns[i].fd = -1;
        s.conns[i].ring = -1;
    }
    static struct vm_relay_ring relay[NIB_HOSTS_MAX];
    static uint32_t guest_attach[NIB_HOSTS_MAX]; /* attach_seq forwarded; 0: none */
    for (uint32_t i = 0; i < lay.n_rings; i++) {
        s.rings[i].base = ch.ring[i];
        s.rings[i].mem_fd = ch.ring_fd[i];
        relay[i].local = ch.ring[i];
        relay[i].remote = (uint8_t *)x.h + lay.ring_offset[i];
        relay[i].done_seq = &s.rings[i].done_seq;
    }
    if (boot_seal_header(&ch, err, sizeof err) || boot_listen(&ch, err, sizeof err)) {
        fprintf(stderr, "nib vm run: %s\n", err);
        wait_bounded(x.qemu, 0);
        return 1;
    }
    s.listen_fd = ch.listen_fd;
    /* release: pairs with the hosts' acquire of state (nib_host_attach) */
    nib_store_rel(&hdr->state, NIB_APP_READY);
    fprintf(stderr,
            "nib vm run: ready on %s (%s, %u CPUs, %u node%s; %u rings; boot to ready "
            "%.1f s; console %s; pid %d)\n",
            ch.paths.sock, kvm ? "KVM" : "TCG", m.cpus, m.numa, m.numa == 1 ? "" : "s", lay.n_rings,
            (double)(nib_now_ns() - t0) / 1e9, console, (int)getpid());
    if (pin) {
        if (pinned < m.cpus)
            pinned = pin_vcpus(x.qemu, pin_cpu, m.cpus, pin_done);
        char plan[1024];
        size_t o = 0;
        for (unsigned i = 0; i < m.cpus && o < sizeof plan - 32; i++)
            o += (size_t)snprintf(plan + o, sizeof plan - o, "%s%u->%u", i ? " " : "", i,
                                  pin_cpu[i]);
        fprintf(stderr, "nib vm run: pinned %u of %u vCPU threads (vCPU->host CPU: %s)\n", pinned,
                m.cpus, plan);
    }
    if (ready_fd >= 0) {
        char log[4200];
        snprintf(log, sizeof log, "%s/%s.log", ch.paths.dir, name);
        detach(ready_fd, log);
    }

    const char *why = NULL;
    uint64_t pause = 0;
    while (!why) {
        int moved = nib_control_pass(&s, 0);
        mux_tick(&x);
        uint64_t now = nib_now_ns();
        if (x.qemu_status >= 0)
            why = "the guest powered off";
        else if (!nib_vmr_watch_alive(&x.guest, nib_vmr_beat_read(&x.h->guest_beat), now,
                                      NIB_VMR_STALE_NS))
            why = "the guest's appliance stopped beating";
        else if (nib_load_acq(&x.h->guest_epoch) != lay.guest_epoch ||
                 nib_load_acq(&x.h->guest_state) != NIB_VMR_GUEST_READY)
            why = "the guest's appliance restarted or stopped";
        if (why)
            break;
        if (s.stop || stop_signal)
            break;
        for (uint32_t i = 0; i < lay.n_rings; i++) {
            int attached = s.rings[i].conn >= 0;
            if (attached && guest_attach[i] != s.rings[i].attach_seq) {
                if (guest_attach[i])
                    mux_command(&x, NIB_VMR_CMD_DETACH, i, 0, NULL);
                vm_relay_reset(&relay[i]);
                uint32_t aseq = 0, uid = s.conns[s.rings[i].conn].uid;
                int st = mux_command(&x, NIB_VMR_CMD_ATTACH, i, uid, &aseq);
                /* NO_RING: the guest is still ending its last holder's
                 * request (until its next checkpoint); retry briefly. */
                for (int tries = 0; st == NIB_CTL_NO_RING && tries < 20; tries++) {
                    sleep_ns(50000000);
                    mux_tick(&x);
                    st = mux_command(&x, NIB_VMR_CMD_ATTACH, i, uid, &aseq);
                }
                if (st != 0) {
                    nib_control_drop(&s, s.rings[i].conn);
                    guest_attach[i] = 0;
                    continue;
                }
                guest_attach[i] = s.rings[i].attach_seq;
                moved = 1;
            } else if (!attached && guest_attach[i]) {
                /* What the host left is cancelled in the guest (owner_gone). */
                mux_command(&x, NIB_VMR_CMD_DETACH, i, 0, NULL);
                vm_relay_reset(&relay[i]);
                guest_attach[i] = 0;
                moved = 1;
            }
            if (guest_attach[i])
                moved |= vm_relay_pass(&relay[i], hdr, 0);
        }
        /* The guest's statistics page and our heartbeat, as hosts read them. */
        if (now - s.last_beat_ns >= NIB_HEARTBEAT_NS / 4) {
            uint32_t attached = s.stats->hosts_attached;
            memcpy(s.stats, (uint8_t *)x.h + NIB_VMR_APP_HEADER_OFFSET + NIB_SHM_STATS_OFFSET,
                   sizeof *s.stats);
            s.stats->hosts_attached = attached;
            /* release: a word hosts read on its own (docs/ring.md §9) */
            nib_store_rel(&hdr->heartbeat_ns, now);
            s.last_beat_ns = now;
        }
        pause = moved ? 0 : nib_vmr_backoff(pause);
        if (pause)
            sleep_ns(pause);
    }
    /* Stop: the guest first, then the local side. */
    nib_store_rel(&hdr->state, NIB_APP_STOPPING);
    int rc = 0;
    if (!why) {
        if (mux_command(&x, NIB_VMR_CMD_STOP, 0, 0, NULL) != 0)
            why = "the guest did not take STOP";
        int qs = x.qemu_status >= 0 ? x.qemu_status : wait_bounded(x.qemu, 120000);
        x.qemu_status = qs;
        /* isa-debug-exit: 2 * 1 + 1 is init's "stopped cleanly" (docs/appliance.md) */
        if (qs != 3 && !why)
            why = "the guest did not power off cleanly";
        fprintf(stderr, "nib vm run: the guest powered off (QEMU exit %d)\n", qs);
    }
    if (why) {
        fprintf(stderr, "nib vm run: %s\n", why);
        console_tail(console);
        if (x.qemu_status < 0)
            wait_bounded(x.qemu, 0);
        rc = 1;
    }
    for (uint32_t i = 0; i < lay.n_rings; i++)
        if (guest_attach[i])
            vm_relay_pass(&relay[i], hdr, 1);
    nib_store_rel(&hdr->state, NIB_APP_STOPPED);
    for (int c = 0; c < NIB_CONNS_MAX; c++)
        if (s.conns[c].fd >= 0)
            nib_control_drop(&s, c);
    boot_unlisten(&ch);
    return rc;
}

int nib_vm_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "run")) {
        usage(argc >= 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
        return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    return run(argc - 1, argv + 1);
}
