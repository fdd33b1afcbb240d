/* nib eval MODEL.onnx: the quantised blob against the f32 blob of the same
 * model, both compiled in memory as nib compile would and run in this
 * process on the same inputs: per output the max and mean |error|, and
 * top-1 agreement for a classifier (docs/vision.md, "Eval"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli/cli.h"
#include "tools/cli/vq_cli.h"
#include "tools/compiler/vision_eval.h"
#include "tools/util/tool_util.h"

#define EVAL_SYNTH_DEFAULT 8

static void usage(FILE *f)
{
    fprintf(f,
            "usage: nib eval MODEL.onnx --input NAME=DIMS... [compile options] [--data DIR]\n"
            "                [--count N] [--workers N] [--json]\n"
            "  compiles MODEL.onnx in f32 and quantised (as nib compile MODEL.onnx with the\n"
            "  same options would), runs both on the same inputs and reports, per output,\n"
            "  max and mean |quantised - f32| (also / max |f32|), and for an output of one\n"
            "  row of scores how often both pick the same top-1\n"
            "  --input NAME=DIMS  fix an input's dims, as for nib compile\n"
            "  --input-type u8|f32, --input-mean A,B,C, --input-std A,B,C  as for nib "
            "compile\n" VQ_CLI_USAGE
            "  --data DIR         eval inputs: each file one input (.npy, PNG, PPM, raw), in\n"
            "                     name order; default: a built-in synthetic set (%d images)\n"
            "  --count N          use at most N eval inputs\n"
            "  --workers N        threads of each run (default: the online CPUs, at most 16)\n"
            "  --json             one JSON object on stdout\n",
            EVAL_SYNTH_DEFAULT);
}

enum { O_INPUT = NIB_ARGS_OPT, O_TYPE, O_MEAN, O_STD, O_DATA, O_COUNT, O_WORKERS, O_JSON };

struct eval_args {
    const char *model, *data;
    struct nx_input_fix fix[NX_MAX_INPUT_FIXES];
    uint32_t n_fix, count, workers;
    int json;
    struct vision_opts vo;
    struct vq_cli vq;
};

static int parse(struct eval_args *ea, int argc, char **argv)
{
    static const struct nib_opt opts[] = {{"--input", O_INPUT, 1},
                                          {"--input-type", O_TYPE, 1},
                                          {"--input-mean", O_MEAN, 1},
                                          {"--input-std", O_STD, 1},
                                          {"--data", O_DATA, 1},
                                          {"--count", O_COUNT, 1},
                                          {"--workers", O_WORKERS, 1},
                                          {"--json", O_JSON, 0},
                                          VQ_CLI_OPTS,
                                          {NULL, 0, 0}};
    char err[512];
    struct nib_args a;
    nib_args_init(&a, "nib eval", argc, argv, opts, usage, &ea->model);
    for (int o; (o = nib_args_next(&a)) != NIB_ARGS_END;) {
        int st = 0;
        if (o == NIB_ARGS_EXIT)
            return a.status ? a.status : -1;
        if (o >= VQ_O_FIRST) {
            st = vq_cli_take(&ea->vq, &a, o);
        } else if (o == O_INPUT) {
            if (ea->n_fix == NX_MAX_INPUT_FIXES)
                return nib_args_fail(&a, "more than %d --input", NX_MAX_INPUT_FIXES);
            if (nx_parse_input_fix(a.value, &ea->fix[ea->n_fix], err, sizeof err))
                return nib_args_fail(&a, "%s", err);
            ea->n_fix++;
        } else if (o == O_TYPE) {
            if (strcmp(a.value, "u8") && strcmp(a.value, "f32"))
                return nib_args_fail(&a, "--input-type %s: u8 or f32", a.value);
            ea->vo.input_u8 = !strcmp(a.value, "u8");
        } else if (o == O_MEAN || o == O_STD) {
            float *dst = o == O_MEAN ? ea->vo.mean : ea->vo.std;
            uint32_t *n = o == O_MEAN ? &ea->vo.n_mean : &ea->vo.n_std;
            if (vp_parse_floats(a.value, dst, VP_MAX_CHANNELS, n, err, sizeof err))
                return nib_args_fail(&a, "%s", err);
            for (uint32_t i = 0; o == O_STD && i < *n; i++)
                if (!(dst[i] > 0))
                    return nib_args_fail(&a, "--input-std: every value must be > 0");
        } else if (o == O_DATA) {
            ea->data = a.value;
        } else if (o == O_COUNT) {
            st = nib_args_u32(&a, 1, 1000000, &ea->count);
        } else if (o == O_WORKERS) {
            st = nib_args_u32(&a, 1, 16, &ea->workers);
        } else {
            ea->json = 1;
        }
        if (st)
            return st;
    }
    if (!ea->model)
        return nib_args_missing(&a);
    return 0;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static void report(const struct eval_args *ea, const struct vision_runner *q,
                   const struct vision_compile_info *fi, const struct vision_compile_info *qi,
                   const struct vision_samples *s, const struct vision_out_diff *d)
{
    const uint32_t n_out = q->v.n_io - q->v.n_inputs;
    const char *src = s->synthetic ? "synthetic" : ea->data;
    if (!ea->json) {
        printf("nib eval: %s on %u %s%s; weighted nodes %u q4, %u q8, %u f32; weights %.2f MB "
               "(f32 %.2f MB)\n",
               ea->model, s->n, s->synthetic ? "built-in synthetic inputs" : "inputs from ",
               s->synthetic ? "" : ea->data, qi->n_q4, qi->n_q8, qi->n_f32,
               (double)qi->weight_bytes / 1e6, (double)fi->weight_bytes / 1e6);
        for (uint32_t j = 0; j < n_out; j++) {
            const struct nib_io_rec *r = &q->v.io[q->v.n_inputs + j];
            const double m = d[j].max_ref > 0 ? d[j].max_ref : 1;
            printf("output %s ", r->name);
            for (uint32_t k = 0; k < r->rank; k++)
                printf(k ? "x%u" : "%u", r->dims[k]);
            printf(": max|err| %.4g (%.3g x max|f32|), mean|err| %.4g (%.3g x max|f32|), "
                   "max|f32| %.4g",
                   d[j].max_abs, d[j].max_abs / m, d[j].mean_abs, d[j].mean_abs / m, d[j].max_ref);
            if (d[j].classifier)
                printf(", top-1 agrees on %u of %u (%.1f %%)", d[j].top1_same, s->n,
                       100.0 * d[j].top1_same / s->n);
            if (d[j].steps)
                printf(", argmax agrees on %llu of %llu steps (%.1f %%)",
                       (unsigned long long)(d[j].steps - d[j].steps_changed),
                       (unsigned long long)d[j].steps,
                       100.0 * (double)(d[j].steps - d[j].steps_changed) / (double)d[j].steps);
            printf("\n");
        }
        return;
    }
    printf("{\"model\":");
    json_str(ea->model);
    printf(",\"inputs\":");
    json_str(src);
    printf(",\"samples\":%u,\"nodes\":{\"q4\":%u,\"q8\":%u,\"f32\":%u},"
           "\"weight_bytes\":%llu,\"weight_bytes_f32\":%llu,\"outputs\":[",
           s->n, qi->n_q4, qi->n_q8, qi->n_f32, (unsigned long long)qi->weight_bytes,
           (unsigned long long)fi->weight_bytes);
    for (uint32_t j = 0; j < n_out; j++) {
        const struct nib_io_rec *r = &q->v.io[q->v.n_inputs + j];
        const double m = d[j].max_ref > 0 ? d[j].max_ref : 1;
        printf("%s{\"name\":", j ? "," : "");
        json_str(r->name);
        printf(",\"dims\":[");
        for (uint32_t k = 0; k < r->rank; k++)
            printf(k ? ",%u" : "%u", r->dims[k]);
        printf("],\"max_abs\":%.9g,\"mean_abs\":%.9g,\"rms\":%.9g,\"max_ref\":%.9g,"
               "\"max_rel\":%.9g,\"mean_rel\":%.9g",
               d[j].max_abs, d[j].mean_abs, d[j].rms, d[j].max_ref, d[j].max_abs / m,
               d[j].mean_abs / m);
        if (d[j].classifier)
            printf(",\"top1\":%.9g", (double)d[j].top1_same / s->n);
        if (d[j].steps)
            printf(",\"steps\":%llu,\"steps_same\":%llu", (unsigned long long)d[j].steps,
                   (unsigned long long)(d[j].steps - d[j].steps_changed));
        printf("}");
    }
    printf("]}\n");
}

static int run(struct eval_args *ea, const struct nx_graph *g, char *err, size_t errlen)
{
    const uint32_t workers = ea->workers ? ea->workers : vision_default_workers();
    struct vision_compile_info fi, qi;
    struct vision_runner f32 = {0}, q = {0};
    struct vision_samples s = {0};
    struct vision_ref rf = {0};
    struct vision_out_diff *d = NULL;
    uint8_t *blob;
    uint64_t len;
    int rc = vision_compile_mem(g, &ea->vo, NULL, &blob, &len, &fi, err, errlen);
    if (!rc)
        rc = vision_runner_open(&f32, blob, len, workers, err, errlen);
    if (!rc)
        rc =
            ea->data
                ? vision_samples_dir(&s, &f32.v, ea->data, ea->count, err, errlen)
                : vision_samples_synth(&s, &f32.v, ea->vo.n_mean || ea->vo.n_std, VISION_SYNTH_EVAL,
                                       ea->count ? ea->count : EVAL_SYNTH_DEFAULT, err, errlen);
    if (!rc)
        rc = vision_ref_make(&rf, &f32, &s, err, errlen);
    vision_runner_close(&f32);
    if (!rc)
        rc = vq_cli_finish(&ea->vq, g, &ea->vo, ea->json ? stderr : stdout, err, errlen);
    if (!rc && !(rc = vision_compile_mem(g, &ea->vo, &ea->vq.q, &blob, &len, &qi, err, errlen)))
        rc = vision_runner_open(&q, blob, len, workers, err, errlen);
    if (!rc && !(d = calloc(rf.n_out + 1, sizeof *d)))
        rc = nib_fail(err, errlen, "out of memory");
    if (!rc)
        rc = vision_compare(&rf, &q, &s, d, err, errlen);
    if (!rc)
        report(ea, &q, &fi, &qi, &s, d);
    vision_runner_close(&q);
    free(d);
    vision_ref_free(&rf);
    vision_samples_free(&s);
    return rc;
}

int nib_eval_onnx_main(int argc, char **argv)
{
    struct eval_args *ea = calloc(1, sizeof *ea);
    if (!ea) {
        fprintf(stderr, "nib eval: out of memory\n");
        return 1;
    }
    vq_cli_init(&ea->vq);
    int rc = parse(ea, argc, argv);
    if (rc) {
        free(ea);
        return rc < 0 ? 0 : rc;
    }
    char err[512];
    const uint8_t *buf;
    size_t size;
    struct nx_graph g;
    if (nib_map_file(ea->model, &buf, &size, err, sizeof err)) {
        rc = 1;
    } else {
        rc = nx_import(&g, buf, size, ea->fix, ea->n_fix, err, sizeof err) ? 1 : 0;
        nib_unmap_file(buf, size);
        if (!rc) {
            rc = run(ea, &g, err, sizeof err) ? 1 : 0;
            nx_free(&g);
        }
    }
    if (rc)
        fprintf(stderr, "nib eval: %s: %s\n", ea->model, err);
    vq_cli_free(&ea->vq);
    free(ea);
    return rc;
}
