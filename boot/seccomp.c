/* Boot step: seccomp. Hand-written classic BPF (no libseccomp): check the
 * architecture, then allow a short list of system calls and kill the whole
 * process on anything else. The lists (docs/runtime.md explains each):
 *
 *   workers: futex (park/wake between requests), clock_gettime (the vDSO's
 *            fallback), restart_syscall;
 *   serving thread: the same, plus the control channel between passes
 *            (poll/ppoll, accept4, getsockopt(SO_PEERCRED), recvmsg, sendmsg,
 *            close), newfstatat/lstat (is the socket path still ours?),
 *            write/writev to fd 2 (the log), unlink (the socket at shutdown),
 *            rt_sigreturn (SIGTERM/SIGINT handler), exit, exit_group.
 *
 * Nothing that maps, unmaps, opens or allocates memory from the kernel is
 * on either list, so "no mmap/munmap/brk after boot" is enforced, not just
 * hoped for. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "boot/boot.h"

#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000u
#endif

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp filter: unknown architecture"
#endif

struct prog {
    struct sock_filter f[128];
    unsigned n;
};

static void emit(struct prog *p, struct sock_filter s)
{
    if (p->n < sizeof p->f / sizeof p->f[0])
        p->f[p->n] = s;
    p->n++;
}

#define NR_OFF offsetof(struct seccomp_data, nr)
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i)) /* little-endian low half */

static void allow(struct prog *p, long nr)
{
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
}

/* Allow nr only when argument i equals val; otherwise kill. */
static void allow_if(struct prog *p, long nr, unsigned i, uint32_t val)
{
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)ARG_LO(i)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, val, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
}

static void build(struct prog *p, enum boot_filter which)
{
    p->n = 0;
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                         offsetof(struct seccomp_data, arch)));
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    emit(p, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, NR_OFF));
#if defined(__x86_64__)
    /* x32 system calls share the architecture token: refuse them all. */
    emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
#endif
    allow(p, SYS_futex);
    allow(p, SYS_clock_gettime);
    allow(p, SYS_restart_syscall);
    if (which == BOOT_FILTER_SERVE) {
        allow(p, SYS_rt_sigreturn);
        allow(p, SYS_exit);
        allow(p, SYS_exit_group);
#ifdef SYS_unlink
        allow(p, SYS_unlink);
#endif
#ifdef SYS_unlinkat
        allow(p, SYS_unlinkat);
#endif
        /* The control channel (rt/control.c), between passes only. */
#ifdef SYS_poll
        allow(p, SYS_poll);
#endif
#ifdef SYS_ppoll
        allow(p, SYS_ppoll);
#endif
        allow(p, SYS_accept4);
        allow(p, SYS_recvmsg);
        allow(p, SYS_sendmsg);
        allow(p, SYS_close);
        allow_if(p, SYS_getsockopt, 2, SO_PEERCRED);
        /* lstat of the socket path every heartbeat (still ours?) */
#ifdef SYS_newfstatat
        allow(p, SYS_newfstatat);
#endif
#ifdef SYS_fstatat
        allow(p, SYS_fstatat);
#endif
#ifdef SYS_lstat
        allow(p, SYS_lstat);
#endif
        allow_if(p, SYS_write, 0, 2); /* the log */
        allow_if(p, SYS_writev, 0, 2);
    }
    emit(p, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
}

const char *boot_seccomp_allowed(enum boot_filter which)
{
    if (which == BOOT_FILTER_WORKER)
        return "futex, clock_gettime, restart_syscall";
    return "futex, clock_gettime, restart_syscall, rt_sigreturn, exit, exit_group, unlink, "
           "poll, ppoll, accept4, getsockopt(SO_PEERCRED), recvmsg, sendmsg, close, newfstatat, "
           "lstat, write(2, ...), writev(2, ...)";
}

int boot_seccomp(enum boot_filter which, char *err, size_t errlen)
{
    struct prog p;
    build(&p, which);
    if (p.n > sizeof p.f / sizeof p.f[0]) {
        snprintf(err, errlen, "seccomp program too long (%u instructions)", p.n);
        return -1;
    }
    struct sock_fprog fp = {.len = (unsigned short)p.n, .filter = p.f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        snprintf(err, errlen, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
        return -1;
    }
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) != 0) {
        snprintf(err, errlen,
                 "installing the seccomp filter: %s (a kernel without "
                 "CONFIG_SECCOMP_FILTER? --no-seccomp boots without it)",
                 strerror(errno));
        return -1;
    }
    return 0;
}
