/* vision_run.h: open, fill, run and read a vision blob in memory. */
#include "tools/compiler/vision_run.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/cpu_isa.h"
#include "rt/team.h"
#include "tools/util/tool_util.h"

int vision_runner_open(struct vision_runner *r, uint8_t *blob, uint64_t len, uint32_t workers,
                       char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->blob = blob, r->len = len;
    if (nib_blob_open(&r->v, blob, len, 1, err, errlen))
        return -1;
    if (r->v.h->model_kind != NIB_MODEL_VISION)
        return nib_fail(err, errlen, "not a vision blob");
    for (uint32_t k = r->v.n_inputs; k < r->v.n_io; k++)
        if (r->v.io[k].dtype != NIB_IO_F32)
            return nib_fail(err, errlen, "output '%s' is not f32", r->v.io[k].name);
    r->mem = aligned_alloc(4096, (r->v.mem_size + 4095) & ~4095ull);
    if (!r->mem)
        return nib_fail(err, errlen, "out of memory for %llu bytes of runtime memory",
                        (unsigned long long)r->v.mem_size);
    memset(r->mem, 0, r->v.mem_size);
    r->e.v = &r->v;
    r->e.mem = r->mem;
    r->e.qk = nib_exec_kernels(nib_cpu_isa());
    if (workers > NIB_TEAM_MAX_WORKERS)
        workers = NIB_TEAM_MAX_WORKERS;
    return nib_tool_team_start(&r->tt, &r->e, workers, err, errlen);
}

int vision_runner_run(struct vision_runner *r, const uint8_t *const *in, char *err, size_t errlen)
{
    for (uint32_t k = 0; k < r->v.n_inputs; k++)
        memcpy(r->mem + r->v.io[k].off, in[k], r->v.io[k].bytes);
    if (nib_exec_run(&r->e))
        return nib_fail(err, errlen, "the plan did not run");
    return 0;
}

const float *vision_runner_out(const struct vision_runner *r, uint32_t j, uint64_t *n)
{
    const struct nib_io_rec *rec = &r->v.io[r->v.n_inputs + j];
    *n = rec->bytes / 4;
    return (const float *)(const void *)(r->mem + rec->off);
}

void vision_runner_close(struct vision_runner *r)
{
    nib_tool_team_stop(&r->tt);
    free(r->mem);
    free(r->blob);
    memset(r, 0, sizeof *r);
}

uint32_t vision_default_workers(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 16 ? 16 : (uint32_t)n;
}
