/* nib-init: PID 1 of a nibble boot image (docs/appliance.md).
 *
 *   1. mount /proc, /sys, /dev (devtmpfs), /run and /tmp (tmpfs); stdio on
 *      /dev/console;
 *   2. start /appliance with the arguments of /etc/nibble/appliance.args
 *      (one per line) and NIB_RUNTIME_DIR=/run/nibble;
 *   3. wait for it; a line "stop" typed on the console sends it SIGTERM
 *      (the clean stop of a machine with no other way in);
 *   4. when it ends, for whatever reason, print why on the console and power
 *      the machine off: first through QEMU's isa-debug-exit port (0x501),
 *      with a value per cause (exit_cause.h; QEMU exits with value*2+1),
 *      then with reboot(POWER_OFF) on a machine without that device.
 *
 * PID 1 never returns: the kernel would panic. Static musl, no allocation
 * beyond the stack. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "boot/init/args_file.h"
#include "boot/init/exit_cause.h"

#define DEBUG_EXIT_PORT 0x501
#define ARGS_FILE "/etc/nibble/appliance.args"
#define APPLIANCE "/appliance"
#define MAX_ARGS 64

static void __attribute__((format(printf, 1, 2))) say(const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    dprintf(2, "nib-init: %s\n", line);
}

static void mount_one(const char *src, const char *dir, const char *type, const char *opts)
{
    mkdir(dir, 0755);
    if (mount(src, dir, type, MS_NOSUID, opts) && errno != EBUSY)
        say("mounting %s on %s: %s", type, dir, strerror(errno));
}

static void console_stdio(void)
{
    int fd = open("/dev/console", O_RDWR | O_NOCTTY);
    if (fd < 0)
        return;
    for (int i = 0; i < 3; i++)
        dup2(fd, i);
    if (fd > 2)
        close(fd);
}

/* /etc/nibble/appliance.args into argv (args_file.h); none: no arguments. */
static void read_args(char *buf, size_t cap, char **argv, int max)
{
    ssize_t len = 0;
    int fd = open(ARGS_FILE, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        len = read(fd, buf, cap - 1);
        close(fd);
    }
    nib_init_split_args(buf, len > 0 ? (size_t)len : 0, APPLIANCE, argv, max);
}

static void __attribute__((noreturn)) power_off(enum nib_init_cause c)
{
    say("the appliance %s; powering off (status %d)", nib_init_cause_words(c), (int)c);
    sync();
    /* QEMU stops the instant the port is written: let the serial line
     * carry the message out first. */
    tcdrain(2);
    if (ioperm(DEBUG_EXIT_PORT, 2, 1) == 0)
        outb((unsigned char)c, DEBUG_EXIT_PORT);
    /* Not under QEMU with isa-debug-exit: an ordinary power-off. */
    reboot(RB_POWER_OFF);
    for (;;)
        pause();
}

/* A "stop" line on the console. Reads what is there without blocking. */
static int console_says_stop(char *line, size_t cap, size_t *used)
{
    char c;
    while (read(0, &c, 1) == 1) {
        if (c == '\n' || c == '\r') {
            line[*used] = 0;
            int stop = !strcmp(line, "stop");
            *used = 0;
            if (stop)
                return 1;
        } else if (*used + 1 < cap) {
            line[(*used)++] = c;
        }
    }
    return 0;
}

int main(void)
{
    mount_one("proc", "/proc", "proc", NULL);
    mount_one("sysfs", "/sys", "sysfs", NULL);
    mount_one("devtmpfs", "/dev", "devtmpfs", "mode=0755");
    mount_one("tmpfs", "/run", "tmpfs", "mode=0755");
    mount_one("tmpfs", "/tmp", "tmpfs", "mode=1777");
    console_stdio();
    setenv("NIB_RUNTIME_DIR", "/run/nibble", 1);
    setenv("PATH", "/", 1);

    static char argbuf[4096];
    char *argv[MAX_ARGS] = {0};
    read_args(argbuf, sizeof argbuf, argv, MAX_ARGS);
    say("starting %s%s", APPLIANCE, argv[1] ? " with the arguments of " ARGS_FILE : "");

    pid_t app = fork();
    if (app < 0)
        power_off(NIB_INIT_NO_START);
    if (app == 0) {
        execv(APPLIANCE, argv);
        say("cannot run %s: %s", APPLIANCE, strerror(errno));
        _exit(127);
    }

    int nonblock = fcntl(0, F_GETFL);
    if (nonblock >= 0)
        fcntl(0, F_SETFL, nonblock | O_NONBLOCK);
    char line[64];
    size_t used = 0;
    for (;;) {
        int st;
        pid_t p;
        while ((p = waitpid(-1, &st, WNOHANG)) > 0)
            if (p == app)
                power_off(nib_init_cause(st));
        struct pollfd pf = {.fd = 0, .events = POLLIN};
        if (poll(&pf, 1, 200) > 0 && (pf.revents & POLLIN) &&
            console_says_stop(line, sizeof line, &used)) {
            say("stop typed on the console: sending SIGTERM to the appliance");
            kill(app, SIGTERM);
        }
    }
}
