/* nib onnx-run: import an ONNX model (shapes fixed by --input, constants
 * and BatchNormalization folded, patterns fused) and run the imported
 * graph in the float64-accumulating reference executor. With --graph it
 * prints the imported graph instead of (or before) running it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/cli/cli.h"
#include "tools/cli/onnx_run_blob.h"
#include "tools/compiler/onnx/onnx_ir.h"
#include "tools/compiler/onnx/onnx_npy.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: nib onnx-run MODEL.onnx --input NAME=DIMS... [--data NAME=FILE.npy...]\n"
               "                    [-o DIR] [--graph]\n"
               "  --input NAME=DIMS  fix the dims of an input (1x3x48x192); required for each\n"
               "                     input with dynamic dims\n"
               "  --data NAME=FILE   the input's values: a float32 .npy of exactly those dims\n"
               "  -o DIR             write each output as DIR/K.npy (K: its index)\n"
               "  --graph            print the imported graph (one line per node)\n"
               "       nib onnx-run --blob OUT.blob [--data NAME=FILE.npy...] [-o DIR]\n"
               "                    [--workers N] [--isa scalar|avx2|neon|auto]\n"
               "  --blob FILE        run a compiled vision blob (nib compile MODEL.onnx) on a\n"
               "                     team of N threads instead (u8 inputs: .npy of 0..255)\n"
               "  Prints one line per output: name, dims, max |value|.\n");
}

enum { OPT_INPUT = NIB_ARGS_OPT, OPT_DATA, OPT_OUT, OPT_GRAPH, OPT_BLOB, OPT_WORKERS, OPT_ISA };

static const char *const op_names[] = {
    [NX_OP_CONV] = "Conv",
    [NX_OP_CONV_T] = "ConvTranspose",
    [NX_OP_BN] = "BatchNormalization",
    [NX_OP_RELU] = "Relu",
    [NX_OP_CLIP] = "Clip",
    [NX_OP_HSIGMOID] = "HardSigmoid",
    [NX_OP_HSWISH] = "HardSwish",
    [NX_OP_SIGMOID] = "Sigmoid",
    [NX_OP_ADD] = "Add",
    [NX_OP_SUB] = "Sub",
    [NX_OP_MUL] = "Mul",
    [NX_OP_DIV] = "Div",
    [NX_OP_POW] = "Pow",
    [NX_OP_SQRT] = "Sqrt",
    [NX_OP_REDUCEMEAN] = "ReduceMean",
    [NX_OP_MAXPOOL] = "MaxPool",
    [NX_OP_AVGPOOL] = "AveragePool",
    [NX_OP_GAP] = "GlobalAveragePool",
    [NX_OP_RESIZE] = "Resize",
    [NX_OP_CONCAT] = "Concat",
    [NX_OP_FLATTEN] = "Flatten",
    [NX_OP_RESHAPE] = "Reshape",
    [NX_OP_SQUEEZE] = "Squeeze",
    [NX_OP_UNSQUEEZE] = "Unsqueeze",
    [NX_OP_TRANSPOSE] = "Transpose",
    [NX_OP_SLICE] = "Slice",
    [NX_OP_SHAPE] = "Shape",
    [NX_OP_CAST] = "Cast",
    [NX_OP_GATHER] = "Gather",
    [NX_OP_GEMM] = "Gemm",
    [NX_OP_MATMUL] = "MatMul",
    [NX_OP_SOFTMAX] = "Softmax",
    [NX_OP_CONSTANT] = "Constant",
    [NX_OP_IDENTITY] = "Identity",
    [NX_OP_SE] = "SqueezeExcite",
    [NX_OP_LAYERNORM] = "LayerNorm",
    [NX_OP_DEAD] = "-",
};
static const char *const act_names[] = {"",           "+Relu",   "+Clip", "+HardSigmoid",
                                        "+HardSwish", "+Sigmoid"};

static void print_dims(const struct nx_tensor *t)
{
    for (uint32_t d = 0; d < t->rank; d++)
        printf(d ? "x%lld" : "%lld", (long long)t->dims[d]);
    if (!t->rank)
        printf("scalar");
}

static void print_graph(const struct nx_graph *g)
{
    for (uint32_t k = 0; k < g->n_order; k++) {
        const struct nx_node *nd = &g->n[g->order[k]];
        /* a fused residual shows where it is added: Conv+Add+Relu, Conv+HardSwish+Add */
        const int conv = nd->op == NX_OP_CONV;
        printf(
            "node %s %s%s%s%s%s", nd->name, op_names[nd->op], conv && nd->a.res == 1 ? "+Add" : "",
            conv || nd->op == NX_OP_CONV_T || nd->op == NX_OP_SE ? act_names[nd->a.act] : "",
            conv && nd->a.res == 2 ? "+Add" : "", nd->op == NX_OP_SE ? act_names[nd->a.act2] : "");
        if ((nd->op == NX_OP_CONV || nd->op == NX_OP_CONV_T) &&
            (nd->a.post_mul != 1.0f || nd->a.post_add != 0.0f))
            printf("+Affine");
        printf(" -> ");
        print_dims(&g->t[nd->out[0]]);
        printf("\n");
    }
}

static int load_data(struct nx_graph *g, const char *arg, char *err, size_t errlen)
{
    struct nx_data_arg a;
    if (nx_data_open(&a, arg, err, errlen))
        return -1;
    for (uint32_t k = 0; k < g->n_inputs; k++) {
        struct nx_tensor *t = &g->t[g->inputs[k]];
        if (strlen(t->name) != a.name_len || strncmp(t->name, a.name, a.name_len))
            continue;
        int rc = nx_data_load(&a, t->rank, t->dims, err, errlen);
        if (!rc && nx_alloc_data(t))
            rc = nib_fail(err, errlen, "out of memory");
        if (!rc)
            memcpy(t->f, a.data, nx_elems(t) * 4);
        nx_data_close(&a);
        return rc;
    }
    return nib_fail(err, errlen, "--data %.*s: the model has no such input", (int)a.name_len, arg);
}

int nib_onnx_run_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {{"--input", OPT_INPUT, 1}, {"--data", OPT_DATA, 1},
                                          {"-o", OPT_OUT, 1},        {"--graph", OPT_GRAPH, 0},
                                          {"--blob", OPT_BLOB, 1},   {"--workers", OPT_WORKERS, 1},
                                          {"--isa", OPT_ISA, 1},     {NULL, 0, 0}};
    const char *model = NULL, *out_dir = NULL, *data[NX_MAX_INPUT_FIXES], *blob = NULL;
    const char *isa = NULL;
    unsigned long workers = 1;
    struct nx_input_fix fix[NX_MAX_INPUT_FIXES];
    uint32_t n_fix = 0, n_data = 0;
    int graph = 0;
    char err[512];
    struct nib_args a;
    nib_args_init(&a, "nib onnx-run", argc, argv, opts, usage, &model);
    for (int o; (o = nib_args_next(&a)) != NIB_ARGS_END;) {
        if (o == NIB_ARGS_EXIT)
            return a.status;
        if (o == OPT_INPUT) {
            if (n_fix == NX_MAX_INPUT_FIXES)
                return nib_args_fail(&a, "more than %d --input", NX_MAX_INPUT_FIXES);
            if (nx_parse_input_fix(a.value, &fix[n_fix], err, sizeof err))
                return nib_args_fail(&a, "%s", err);
            n_fix++;
        } else if (o == OPT_DATA) {
            if (n_data == NX_MAX_INPUT_FIXES)
                return nib_args_fail(&a, "more than %d --data", NX_MAX_INPUT_FIXES);
            data[n_data++] = a.value;
        } else if (o == OPT_OUT) {
            out_dir = a.value;
        } else if (o == OPT_BLOB) {
            blob = a.value;
        } else if (o == OPT_ISA) {
            isa = a.value;
        } else if (o == OPT_WORKERS) {
            char *end;
            workers = strtoul(a.value, &end, 10);
            if (*end || end == a.value || workers < 1 || workers > 256)
                return nib_args_fail(&a, "--workers %s: 1..256", a.value);
        } else {
            graph = 1;
        }
    }
    if (blob) {
        if (model || n_fix || graph)
            return nib_args_fail(&a, "--blob runs a compiled blob: no model, --input or --graph");
        if (nib_onnx_run_blob(blob, data, n_data, out_dir, (uint32_t)workers, isa, err,
                              sizeof err)) {
            fprintf(stderr, "nib onnx-run: %s: %s\n", blob, err);
            return 1;
        }
        return 0;
    }
    if (!model)
        return nib_args_missing(&a);
    const uint8_t *buf;
    size_t size;
    if (nib_map_file(model, &buf, &size, err, sizeof err)) {
        fprintf(stderr, "nib onnx-run: %s\n", err);
        return 1;
    }
    struct nx_graph g;
    int rc = nx_import(&g, buf, size, fix, n_fix, err, sizeof err);
    nib_unmap_file(buf, size);
    if (!rc && graph)
        print_graph(&g);
    if (!rc && (n_data || !graph)) {
        for (uint32_t k = 0; k < n_data && !rc; k++)
            rc = load_data(&g, data[k], err, sizeof err);
        for (uint32_t k = 0; k < g.n_inputs && !rc; k++)
            if (!g.t[g.inputs[k]].f)
                rc = nib_fail(err, sizeof err, "input '%s' has no --data", g.t[g.inputs[k]].name);
        if (!rc)
            rc = nx_run(&g, err, sizeof err);
        if (!rc && out_dir && mkdir(out_dir, 0777) && errno != EEXIST)
            rc = nib_fail(err, sizeof err, "%s: cannot create the folder", out_dir);
        for (uint32_t k = 0; k < g.n_outputs && !rc; k++) {
            const struct nx_tensor *t = &g.t[g.outputs[k]];
            double mx = 0;
            for (uint64_t i = 0; i < nx_elems(t); i++) {
                double v = t->dtype == NX_F32 ? t->f[i] : (double)t->i[i];
                mx = v < 0 ? (-v > mx ? -v : mx) : (v > mx ? v : mx);
            }
            printf("output %s ", t->name);
            print_dims(t);
            printf(" max|x| %.9g\n", mx);
            if (out_dir) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%u.npy", out_dir, k);
                rc = nx_npy_write(path, t, err, sizeof err);
            }
        }
    }
    if (rc)
        fprintf(stderr, "nib onnx-run: %s: %s\n", model, err);
    nx_free(&g);
    return rc ? 1 : 0;
}
