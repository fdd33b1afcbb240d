/* Why the appliance ended, as PID 1 of a boot image reports it: the
 * isa-debug-exit value it powers the machine off with (QEMU exits with
 * value * 2 + 1) and the words on the console (docs/appliance.md). */
#ifndef NIB_INIT_EXIT_CAUSE_H
#define NIB_INIT_EXIT_CAUSE_H

enum nib_init_cause {
    NIB_INIT_STOPPED = 1, /* exit 0: nib stop, SIGTERM */
    NIB_INIT_REFUSED = 2, /* exit 2: "refusing to boot" */
    NIB_INIT_FAILED = 3,  /* any other exit status */
    NIB_INIT_CRASHED = 4, /* killed by a signal other than SIGSYS */
    NIB_INIT_SECCOMP = 5, /* SIGSYS: a seccomp filter killed it */
    NIB_INIT_NO_START = 6 /* init could not start it at all */
};

/* The cause of a waitpid() status. */
enum nib_init_cause nib_init_cause(int wstatus);
/* "stopped cleanly", "refused to boot", ... */
const char *nib_init_cause_words(enum nib_init_cause c);

#endif
