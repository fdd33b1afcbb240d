#include "tools/util/exec_team.h"

#include <stdlib.h>
#include <string.h>

#include "tools/util/tool_util.h"

int nib_tool_team_start(struct nib_tool_team *t, struct nib_exec *e, uint32_t workers, char *err,
                        size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (workers <= 1)
        return 0;
    /* the team's own state, then the executor's barrier map and scratch */
    const uint64_t ts = (nib_team_footprint(workers) + 4095) & ~4095ull;
    t->mem = aligned_alloc(4096, (ts + nib_exec_team_footprint(workers, e->v) + 4095) & ~4095ull);
    struct nib_team *team = t->mem ? nib_team_new(t->mem, workers, 1000000ull, 1000000ull) : NULL;
    if (!team)
        return nib_fail(err, errlen, "cannot make a team of %u workers", workers);
    nib_exec_set_team(e, team, t->mem + ts);
    if (nib_team_spawn(team, NULL, t->tids))
        return nib_fail(err, errlen, "cannot start %u worker threads", workers - 1);
    t->team = team;
    return 0;
}

void nib_tool_team_stop(struct nib_tool_team *t)
{
    if (t->team)
        nib_team_join(t->team, t->tids);
    free(t->mem);
    memset(t, 0, sizeof *t);
}
