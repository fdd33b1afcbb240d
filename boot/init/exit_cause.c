/* The appliance's end as PID 1 classifies it (exit_cause.h). */
#include "boot/init/exit_cause.h"

#include <signal.h>
#include <sys/wait.h>

enum nib_init_cause nib_init_cause(int wstatus)
{
    if (WIFEXITED(wstatus)) {
        int code = WEXITSTATUS(wstatus);
        return code == 0 ? NIB_INIT_STOPPED : code == 2 ? NIB_INIT_REFUSED : NIB_INIT_FAILED;
    }
    if (WIFSIGNALED(wstatus))
        return WTERMSIG(wstatus) == SIGSYS ? NIB_INIT_SECCOMP : NIB_INIT_CRASHED;
    return NIB_INIT_FAILED;
}

const char *nib_init_cause_words(enum nib_init_cause c)
{
    switch (c) {
    case NIB_INIT_STOPPED: return "stopped cleanly";
    case NIB_INIT_REFUSED: return "refused to boot";
    case NIB_INIT_FAILED: return "failed";
    case NIB_INIT_CRASHED: return "crashed";
    case NIB_INIT_SECCOMP: return "was killed by its seccomp filter";
    case NIB_INIT_NO_START: return "could not be started";
    }
    return "ended";
}
