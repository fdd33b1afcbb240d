/* Fuzz target: what follows the ONNX import in nib compile MODEL.onnx,
 * on any bytes the import accepts: the lowering into vision ops, the
 * buffer plan, the packing, and the quantised compile (calibration on the
 * built-in synthetic inputs, int8 activation scales, 4-bit weights by
 * GPTQ). Dynamic input dims are fixed at 2, as fuzz_onnx does.
 *
 * Each small graph is compiled twice, in f32 and in the quantised
 * default. A refusal carries a message. A blob that comes out has passed
 * the runtime's validator (vp_build_blob checks it as boot does), and it
 * must run: once on 1 worker with this machine's kernels and once on 2
 * workers with the scalar ones, giving the same bits in every output
 * (the plan's guarantee: same bits for any worker count and ISA). */
#include <stdlib.h>
#include <string.h>

#include "rt/cpu_isa.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_onnx_import.h"
#include "tools/compiler/onnx/onnx_ir.h"
#include "tools/compiler/vision_quant.h"
#include "tools/compiler/vision_run.h"

/* Run blob on `workers` threads with kernels of `isa`, every input record
 * filled with the same fixed bytes (f32 inputs get NaNs and infinities
 * too); the outputs, concatenated, in *out (malloc'd). 0, or -1 when the
 * runner refused (with a message). */
static int run_blob(const uint8_t *blob, uint64_t len, uint32_t workers, uint32_t isa,
                    uint8_t **out, uint64_t *out_len)
{
    uint8_t *copy = aligned_alloc(64, (len + 63) & ~63ull); /* as the runtime wants it */
    FUZZ_ASSERT(copy != NULL);
    memcpy(copy, blob, len);
    struct vision_runner r;
    char err[512];
    err[0] = 0;
    if (vision_runner_open(&r, copy, len, workers, err, sizeof err)) {
        FUZZ_ASSERT(err[0] != 0);
        vision_runner_close(&r);
        return -1;
    }
    r.e.qk = nib_exec_kernels(isa);
    const uint8_t *in[NIB_IO_MAX];
    uint8_t *bytes[NIB_IO_MAX] = {0};
    for (uint32_t k = 0; k < r.v.n_inputs; k++) {
        bytes[k] = malloc(r.v.io[k].bytes + 1);
        FUZZ_ASSERT(bytes[k] != NULL);
        for (uint64_t b = 0; b < r.v.io[k].bytes; b++)
            bytes[k][b] = (uint8_t)(b * 37 + k * 11 + 5);
        in[k] = bytes[k];
    }
    FUZZ_ASSERT(vision_runner_run(&r, in, err, sizeof err) == 0);
    uint64_t total = 0;
    for (uint32_t j = r.v.n_inputs; j < r.v.n_io; j++)
        total += r.v.io[j].bytes;
    *out = malloc(total + 1);
    FUZZ_ASSERT(*out != NULL);
    *out_len = 0;
    for (uint32_t j = 0; r.v.n_inputs + j < r.v.n_io; j++) {
        uint64_t n;
        const float *o = vision_runner_out(&r, j, &n);
        memcpy(*out + *out_len, o, n * 4);
        *out_len += n * 4;
    }
    for (uint32_t k = 0; k < r.v.n_inputs; k++)
        free(bytes[k]);
    vision_runner_close(&r);
    return 0;
}

static void compile_and_run(const struct nx_graph *g, const struct vq_opts *q)
{
    struct vision_opts vo;
    memset(&vo, 0, sizeof vo);
    uint8_t *blob = NULL;
    uint64_t len = 0;
    char err[512];
    err[0] = 0;
    if (vision_compile_mem(g, &vo, q, &blob, &len, NULL, err, sizeof err)) {
        FUZZ_ASSERT(err[0] != 0);
        free(blob);
        return;
    }
    uint8_t *a = NULL, *b = NULL;
    uint64_t na = 0, nb = 0;
    int ra = run_blob(blob, len, 1, nib_cpu_isa(), &a, &na);
    int rb = run_blob(blob, len, 2, 0, &b, &nb);
    FUZZ_ASSERT(ra == rb);
    if (!ra)
        FUZZ_ASSERT(na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    free(blob);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf;
    struct nx_graph g;
    char err[512];
    if (fuzz_onnx_import(&g, data, size, &buf, err, sizeof err) == 0) {
        /* Small graphs only: calibration runs the model 2 times per compile. */
        uint64_t total = 0;
        for (uint32_t t = 0; t < g.n_t; t++)
            if (g.t[t].shape_known)
                total += nx_elems(&g.t[t]);
        if (total <= 1 << 16 && g.n_order <= 64) {
            compile_and_run(&g, NULL);
            struct vq_opts q;
            memset(&q, 0, sizeof q);
            q.bits = 4, q.keep_ends = 1, q.calib_max = 2;
            compile_and_run(&g, &q);
        }
    }
    nx_free(&g);
    free(buf);
    return 0;
}
