/* A vision plan's executor on a team of threads inside a tool (nib
 * onnx-run --blob, nib bench --model): the team's memory and the
 * executor's barrier map and scratch on the heap, the threads started
 * unpinned. The appliance does the same on pinned CPUs from its boot-time
 * memory (boot/workers.c). */
#ifndef NIB_EXEC_TEAM_H
#define NIB_EXEC_TEAM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/exec.h"
#include "rt/team.h"

struct nib_tool_team {
    uint8_t *mem;          /* NULL: no team */
    struct nib_team *team; /* NULL: not running */
    pthread_t tids[NIB_TEAM_MAX_WORKERS];
};

/* Run e's passes on a new team of `workers` threads from now on; with one
 * worker there is nothing to start and e runs on the caller. t is zeroed
 * first. 0, or -1 with a message (then nib_tool_team_stop still frees). */
int nib_tool_team_start(struct nib_tool_team *t, struct nib_exec *e, uint32_t workers, char *err,
                        size_t errlen);

/* Stop and join the threads, free the memory. */
void nib_tool_team_stop(struct nib_tool_team *t);

#endif
