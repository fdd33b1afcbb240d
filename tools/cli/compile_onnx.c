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
#include "tools/compiler/vision_autoprec.h"
#include "tools/compiler/vision_quant.h"
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
            "                     (x - mean) / std for f32, (x / 255 - mean) / std for u8\n"
            "  --quant q4|q8|f32  weights of Conv (groups 1) and Gemm/MatMul nodes: 4 bits\n"
            "                     (default; the first and the last such node 8 bits), 8 bits\n"
            "                     or f32; quantized convolutions read int8 activations\n"
            "  --precision NODE=q4|q8|f32  one weighted node's precision (repeatable)\n"
            "  --calib DIR        calibration inputs, one file each (.npy, PNG, PPM, raw),\n"
            "                     in name order; default: a built-in synthetic set\n"
            "  --calib-count N    use at most N calibration inputs (default %d)\n"
            "  --calib-absmax     activation scales from the absmax (the default)\n"
            "  --calib-clip       activation scales from the clip with the least squared\n"
            "                     error instead of the absmax\n"
            "  --method rtn|gptq  4-bit weights: nearest code after a per-channel scale\n"
            "                     search (rtn), or those scales with error feedback against\n"
            "                     the calibration inputs (gptq, the default)\n"
            "  --auto-precision   measure each weighted node's sensitivity to 4 bits and keep\n"
            "                     the most sensitive at 8 bits (prints the table)\n"
            "  --auto-budget F    the fraction of weights --auto-precision may keep at 8 bits\n"
            "                     (default 0.25)\n",
            VQ_CALIB_DEFAULT);
}

enum {
    O_OUT = NIB_ARGS_OPT,
    O_INPUT,
    O_TYPE,
    O_MEAN,
    O_STD,
    O_QUANT,
    O_PREC,
    O_CALIB,
    O_CALIB_N,
    O_CALIB_ABSMAX,
    O_CALIB_CLIP,
    O_AUTO,
    O_AUTO_BUDGET,
    O_METHOD
};

/* "q4" -> 4, "q8" -> 8, "f32" -> 0; -1 otherwise. */
static int parse_bits(const char *s)
{
    return !strcmp(s, "q4") ? 4 : !strcmp(s, "q8") ? 8 : !strcmp(s, "f32") ? 0 : -1;
}

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
                                          {"--quant", O_QUANT, 1},
                                          {"--precision", O_PREC, 1},
                                          {"--calib", O_CALIB, 1},
                                          {"--calib-count", O_CALIB_N, 1},
                                          {"--calib-absmax", O_CALIB_ABSMAX, 0},
                                          {"--calib-clip", O_CALIB_CLIP, 0},
                                          {"--auto-precision", O_AUTO, 0},
                                          {"--auto-budget", O_AUTO_BUDGET, 1},
                                          {"--method", O_METHOD, 1},
                                          {NULL, 0, 0}};
    static struct vq_override auto_over[VQ_MAX_OVERRIDES];
    struct vq_auto_opts ao = {.budget = VQ_AUTO_BUDGET_DEFAULT, .report = stderr};
    int auto_prec = 0;
    static struct vq_override over[VQ_MAX_OVERRIDES];
    struct vq_opts q = {.bits = 4, .keep_ends = 1, .over = over};
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
        } else if (o == O_QUANT) {
            int b = parse_bits(a.value);
            if (b < 0)
                return nib_args_fail(&a, "--quant %s: q4, q8 or f32", a.value);
            q.bits = (uint32_t)b;
        } else if (o == O_PREC) {
            const char *eq = strrchr(a.value, '=');
            int b = eq ? parse_bits(eq + 1) : -1;
            if (!eq || eq == a.value || b < 0 || (size_t)(eq - a.value) >= NIB_NAME_MAX)
                return nib_args_fail(&a, "--precision %s: NODE=q4|q8|f32 (a name under %d bytes)",
                                     a.value, NIB_NAME_MAX);
            if (q.n_over == VQ_MAX_OVERRIDES)
                return nib_args_fail(&a, "more than %d --precision", VQ_MAX_OVERRIDES);
            memcpy(over[q.n_over].node, a.value, (size_t)(eq - a.value));
            over[q.n_over].node[eq - a.value] = 0;
            over[q.n_over++].bits = (uint32_t)b;
        } else if (o == O_CALIB) {
            q.calib_dir = a.value;
        } else if (o == O_CALIB_N) {
            char *end;
            unsigned long n = strtoul(a.value, &end, 10);
            if (*end || end == a.value || n < 1 || n > 100000)
                return nib_args_fail(&a, "--calib-count %s: a count from 1 to 100000", a.value);
            q.calib_max = (uint32_t)n;
        } else if (o == O_CALIB_ABSMAX) {
            q.calib_absmax = 1, q.calib_clip = 0;
        } else if (o == O_CALIB_CLIP) {
            q.calib_clip = 1, q.calib_absmax = 0;
        } else if (o == O_METHOD) {
            if (vq_method_parse(a.value, &q.method))
                return nib_args_fail(&a, "--method %s: rtn or gptq", a.value);
        } else if (o == O_AUTO) {
            auto_prec = 1;
        } else if (o == O_AUTO_BUDGET) {
            float f;
            if (nib_args_f32(&a, 0.0f, 1.0f, &f))
                return 2;
            ao.budget = f;
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
    float *act_scale = NULL;
    int act_owned = 0;
    if (auto_prec) {
        /* the measured overrides (the user's first), from one calibration */
        uint32_t n_over = 0;
        rc = vq_auto_precision(&g, &vo, &q, &ao, auto_over, &n_over, &act_scale, &act_owned, err,
                               sizeof err);
        q.over = auto_over, q.n_over = n_over, q.act_scale = act_scale;
    }
    if (!rc)
        rc = vision_compile_mem(&g, &vo, &q, &blob, &len, &info, err, sizeof err);
    if (act_owned)
        free(act_scale);
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
