/* nib compile MODEL.onnx --input NAME=DIMS [--input-type u8|f32]
 *     [--input-mean a,b,c --input-std a,b,c] [--quant q4|q8|f32]
 *     [--precision NODE=q4|q8|f32]... [--calib DIR] [--calib-count N] -o OUT.blob
 * Import (shapes fixed, constants and BatchNormalization folded, patterns
 * fused), calibrate and quantize (docs/vision.md, "Quantisation"), lower
 * to vision ops, place the buffers, pack the weights and write a vision
 * blob. Written to OUT.blob.tmp and renamed into place only when complete
 * and valid. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "tools/cli/vq_cli.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib compile MODEL.onnx --input NAME=DIMS... -o OUT.blob [--input-type u8|f32]\n"
            "                   [--input-mean A,B,C] [--input-std A,B,C]\n"
            "  --input NAME=DIMS  fix the dims of an input (1x3x224x224); required for each\n"
            "                     input with dynamic dims\n"
            "  --input-type T     the bytes a request carries for each image input: f32\n"
            "                     (default) or u8 pixels, NCHW either way\n"
            "  --input-mean/--input-std  per channel: the run feeds the model\n"
            "                     (x - mean) / std for f32, (x / 255 - mean) / std for "
            "u8\n" VQ_CLI_USAGE);
}

enum { O_OUT = NIB_ARGS_OPT, O_INPUT, O_TYPE, O_MEAN, O_STD };

static int write_file(const uint8_t *blob, uint64_t len, const char *out, char *err, size_t errlen)
{
    size_t tl = strlen(out) + 5;
    char *tmp = malloc(tl);
    if (!tmp)
        return nib_fail(err, errlen, "out of memory");
    snprintf(tmp, tl, "%s.tmp", out);
    FILE *f = fopen(tmp, "wb");
    int rc = !f ? nib_fail(err, errlen, "cannot create %s: %s", tmp, strerror(errno))
             : fwrite(blob, 1, len, f) != len ? nib_fail(err, errlen, "cannot write %s", tmp)
                                              : 0;
    if (f && fclose(f) != 0 && rc == 0)
        rc = nib_fail(err, errlen, "cannot finish writing %s", tmp);
    if (rc == 0 && rename(tmp, out) != 0)
        rc = nib_fail(err, errlen, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
    if (rc && f)
        remove(tmp);
    free(tmp);
    return rc;
}

int nib_compile_onnx_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {{"-o", O_OUT, 1},
                                          {"--input", O_INPUT, 1},
                                          {"--input-type", O_TYPE, 1},
                                          {"--input-mean", O_MEAN, 1},
                                          {"--input-std", O_STD, 1},
                                          VQ_CLI_OPTS,
                                          {NULL, 0, 0}};
    static struct vq_cli vq;
    vq_cli_init(&vq);
    const char *model = NULL, *out = NULL;
    struct nx_input_fix fix[NX_MAX_INPUT_FIXES];
    uint32_t n_fix = 0;
    struct vision_opts vo = {0};
    char err[512];
    struct nib_args a;
    nib_args_init(&a, "nib compile", argc, argv, opts, usage, &model);
    for (int o; (o = nib_args_next(&a)) != NIB_ARGS_END;) {
        if (o == NIB_ARGS_EXIT)
            return a.status;
        if (o == O_OUT) {
            out = a.value;
        } else if (o == O_INPUT) {
            if (n_fix == NX_MAX_INPUT_FIXES)
                return nib_args_fail(&a, "more than %d --input", NX_MAX_INPUT_FIXES);
            if (nx_parse_input_fix(a.value, &fix[n_fix], err, sizeof err))
                return nib_args_fail(&a, "%s", err);
            n_fix++;
        } else if (o >= VQ_O_FIRST) {
            int st = vq_cli_take(&vq, &a, o);
            if (st)
                return st;
        } else if (o == O_TYPE) {
            if (strcmp(a.value, "u8") && strcmp(a.value, "f32"))
                return nib_args_fail(&a, "--input-type %s: u8 or f32", a.value);
            vo.input_u8 = !strcmp(a.value, "u8");
        } else {
            float *dst = o == O_MEAN ? vo.mean : vo.std;
            uint32_t *n = o == O_MEAN ? &vo.n_mean : &vo.n_std;
            if (vp_parse_floats(a.value, dst, VP_MAX_CHANNELS, n, err, sizeof err))
                return nib_args_fail(&a, "%s", err);
            for (uint32_t i = 0; o == O_STD && i < *n; i++)
                if (!(dst[i] > 0))
                    return nib_args_fail(&a, "--input-std: every value must be > 0");
        }
    }
    if (!model || !out)
        return nib_args_missing(&a);
    const uint8_t *buf;
    size_t size;
    if (nib_map_file(model, &buf, &size, err, sizeof err)) {
        fprintf(stderr, "nib compile: %s\n", err);
        return 1;
    }
    struct nx_graph g;
    int rc = nx_import(&g, buf, size, fix, n_fix, err, sizeof err);
    nib_unmap_file(buf, size);
    if (rc) {
        fprintf(stderr, "nib compile: %s: %s\n", model, err);
        return 1;
    }
    uint8_t *blob = NULL;
    uint64_t len = 0;
    struct vision_compile_info info;
    rc = vq_cli_finish(&vq, &g, &vo, stderr, err, sizeof err);
    if (!rc)
        rc = vision_compile_mem(&g, &vo, &vq.q, &blob, &len, &info, err, sizeof err);
    vq_cli_free(&vq);
    nx_free(&g);
    if (!rc) {
        rc = write_file(blob, len, out, err, sizeof err);
        if (!rc)
            fprintf(stderr,
                    "nib compile: %s -> %s: vision model, %u ops, %u tensors, %.1f MB of "
                    "weights (f32 %.2f, q4c %.2f, q8c %.2f MB; weighted nodes %u q4, %u q8, "
                    "%u f32), %.1f MB runtime memory, %u inputs and outputs\n",
                    model, out, info.n_ops, info.n_tensors, (double)info.weight_bytes / 1e6,
                    (double)info.bytes_f32 / 1e6, (double)info.bytes_q4 / 1e6,
                    (double)info.bytes_q8 / 1e6, info.n_q4, info.n_q8, info.n_f32,
                    (double)info.arena_bytes / 1e6, info.n_io);
        free(blob);
    }
    if (rc)
        fprintf(stderr, "nib compile: %s: %s\n", model, err);
    return rc ? 1 : 0;
}
