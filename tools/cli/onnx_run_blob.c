/* nib onnx-run --blob OUT.blob: run a compiled vision blob on a thread
 * team in this process (no appliance), the way the appliance runs it:
 * nib_blob_open, the inputs' bytes at their io records, nib_exec_run, the
 * outputs' bytes from theirs. Writes each output as DIR/K.npy like the
 * reference run, so the two can be compared. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernels/qkernels.h"
#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/team.h"
#include "tools/cli/onnx_run_blob.h"
#include "tools/compiler/onnx/onnx_npy.h"
#include "tools/util/exec_team.h"
#include "tools/util/tool_util.h"

static int load_input(const struct nib_blob_view *v, uint8_t *mem, const char *arg, uint8_t *seen,
                      char *err, size_t errlen)
{
    struct nx_data_arg a;
    if (nx_data_open(&a, arg, err, errlen))
        return -1;
    for (uint32_t k = 0; k < v->n_inputs; k++) {
        const struct nib_io_rec *r = &v->io[k];
        if (strlen(r->name) != a.name_len || strncmp(r->name, a.name, a.name_len))
            continue;
        int64_t dims[NIB_IO_MAX_RANK];
        for (uint32_t d = 0; d < r->rank; d++)
            dims[d] = r->dims[d];
        int rc = nx_data_load(&a, r->rank, dims, err, errlen);
        const float *data = a.data;
        uint64_t n = r->dtype == NIB_IO_U8 ? r->bytes : r->bytes / 4;
        for (uint64_t i = 0; !rc && i < n; i++) {
            if (r->dtype == NIB_IO_F32) {
                memcpy(mem + r->off + i * 4, &data[i], 4);
            } else if (data[i] >= 0 && data[i] <= 255 && data[i] == floorf(data[i])) {
                mem[r->off + i] = (uint8_t)data[i];
            } else {
                rc = nib_fail(err, errlen, "--data %s: value %g is not a pixel (0..255)", arg,
                              (double)data[i]);
            }
        }
        nx_data_close(&a);
        seen[k] = 1;
        return rc;
    }
    return nib_fail(err, errlen, "--data %.*s: the blob has no such input", (int)a.name_len, arg);
}

static const struct nib_qkernels *pick_isa(const char *isa, char *err, size_t errlen)
{
    uint32_t have = nib_cpu_isa(), want;
    if (!isa || !strcmp(isa, "auto"))
        return nib_exec_kernels(have);
    if (!strcmp(isa, "scalar"))
        want = NIB_ISA_SCALAR;
    else if (!strcmp(isa, "avx2"))
        want = NIB_ISA_AVX2;
    else if (!strcmp(isa, "neon"))
        want = NIB_ISA_NEON_DOT;
    else {
        nib_fail(err, errlen, "--isa %s: scalar, avx2, neon or auto", isa);
        return NULL;
    }
    const struct nib_qkernels *k = nib_qkernels_get(want);
    if (!k || (want && !(have & want))) {
        nib_fail(err, errlen, "--isa %s: this build or this CPU does not have it", isa);
        return NULL;
    }
    return k;
}

static int write_outputs(const struct nib_blob_view *v, uint8_t *mem, const char *out_dir,
                         char *err, size_t errlen)
{
    if (out_dir && mkdir(out_dir, 0777) && errno != EEXIST)
        return nib_fail(err, errlen, "%s: cannot create the folder", out_dir);
    for (uint32_t k = v->n_inputs; k < v->n_io; k++) {
        const struct nib_io_rec *r = &v->io[k];
        struct nx_tensor t = {.name = (char *)r->name, .dtype = NX_F32, .rank = r->rank};
        for (uint32_t d = 0; d < r->rank; d++)
            t.dims[d] = r->dims[d];
        t.f = (float *)(void *)(mem + r->off);
        double mx = 0;
        for (uint64_t i = 0; i < r->bytes / 4; i++)
            mx = fabs(t.f[i]) > mx ? fabs(t.f[i]) : mx;
        printf("output %s ", r->name);
        for (uint32_t d = 0; d < r->rank; d++)
            printf(d ? "x%u" : "%u", r->dims[d]);
        printf(" max|x| %.9g\n", mx);
        if (out_dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%u.npy", out_dir, k - v->n_inputs);
            if (nx_npy_write(path, &t, err, errlen))
                return -1;
        }
    }
    return 0;
}

int nib_onnx_run_blob(const char *path, const char *const *data, uint32_t n_data,
                      const char *out_dir, uint32_t workers, const char *isa, char *err,
                      size_t errlen)
{
    const uint8_t *buf;
    size_t size;
    if (nib_map_file(path, &buf, &size, err, errlen))
        return -1;
    struct nib_blob_view v;
    uint8_t *mem = NULL, seen[NIB_IO_MAX] = {0};
    int rc = nib_blob_open(&v, buf, size, 1, err, errlen);
    if (!rc && v.h->model_kind != NIB_MODEL_VISION)
        rc = nib_fail(err, errlen, "not a vision blob (a decoder takes tokens: nib ask)");
    const struct nib_qkernels *qk = rc ? NULL : pick_isa(isa, err, errlen);
    if (!rc && !qk)
        rc = -1;
    if (!rc && (workers < 1 || workers > NIB_TEAM_MAX_WORKERS))
        rc = nib_fail(err, errlen, "--workers %u: 1..%u", workers, NIB_TEAM_MAX_WORKERS);
    if (!rc && !(mem = aligned_alloc(4096, (v.mem_size + 4095) & ~4095ull)))
        rc = nib_fail(err, errlen, "out of memory for %llu bytes of runtime memory",
                      (unsigned long long)v.mem_size);
    if (!rc)
        memset(mem, 0, v.mem_size);
    for (uint32_t k = 0; k < n_data && !rc; k++)
        rc = load_input(&v, mem, data[k], seen, err, errlen);
    for (uint32_t k = 0; k < v.n_inputs && !rc; k++)
        if (!seen[k])
            rc = nib_fail(err, errlen, "input '%s' has no --data", v.io[k].name);
    struct nib_exec e = {.v = &v, .mem = mem, .qk = qk};
    struct nib_tool_team tt = {0};
    if (!rc)
        rc = nib_tool_team_start(&tt, &e, workers, err, errlen);
    if (!rc && nib_exec_run(&e))
        rc = nib_fail(err, errlen, "the plan did not run");
    nib_tool_team_stop(&tt);
    if (!rc)
        rc = write_outputs(&v, mem, out_dir, err, errlen);
    free(mem);
    nib_unmap_file(buf, size);
    return rc;
}
