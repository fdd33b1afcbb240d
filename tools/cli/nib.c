/* nib: the nibble toolchain and host CLI. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/qkernels.h"
#include "tools/cli/cli.h"
#include "tools/compiler/onnx/onnx_synth.h"
#include "tools/compiler/synth.h"
#include "tools/measure/measure.h"
#include "tools/util/args.h"

static void version_usage(FILE *f)
{
    fprintf(f,
            "usage: nib version (or nib --version): nib's version and the blob format it writes\n");
}

static int version_main(int argc, char **argv)
{
    struct nib_args a;
    nib_args_init(&a, "nib version", argc, argv, NULL, version_usage, NULL);
    if (nib_args_next(&a) == NIB_ARGS_EXIT)
        return a.status;
    nib_print_version(stdout);
    return 0;
}

/* nib synth with the ONNX vision models, whose writer needs protobuf-c. */
static int synth_main(int argc, char **argv)
{
    static const struct nib_synth_graph graphs[] = {
        {"resnet50", "ResNet-50 v1.5 as ONNX, opset 13, input 1x3x224x224 (25.6M params)",
         nx_synth_resnet50},
    };
    return nib_synth_main_graphs(argc, argv, graphs, sizeof graphs / sizeof graphs[0]);
}

/* nib eval: an .onnx model (vision) or the decoder's accuracy on a text. */
static int eval_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (n > 5 && !strcmp(argv[i] + n - 5, ".onnx"))
            return nib_eval_onnx_main(argc, argv);
    }
    return nib_eval_main(argc, argv);
}

static const struct {
    const char *name;
    int (*main)(int, char **);
    const char *help;
} commands[] = {
    {"synth", synth_main, "write a random-weight model of a named shape (GGUF, or ONNX)"},
    {"compile", nib_compile_main, "import a GGUF, plan and pack it into a blob"},
    {"inspect", nib_inspect_main, "print and verify a blob"},
    {"tokenize", nib_tokenize_main,
     "token ids of texts (hex lines on stdin) by a model's tokenizer"},
    {"chat-render", nib_chat_render_main, "render a conversation with a chat template"},
    {"onnx-run", nib_onnx_run_main,
     "import an ONNX model and run it in the float64 reference executor"},
    {"eval", eval_main,
     "accuracy of a quantised model against f32 (a text; or an .onnx model's outputs)"},
    {"ask", nib_ask_main, "send a prompt to a running appliance"},
    {"run", nib_run_main, "run a vision appliance's model on input tensors"},
    {"stop", nib_stop_main, "shut a running appliance down"},
    {"stats", nib_stats_main, "print a running appliance's counters and latencies"},
    {"topo", nib_topo_main, "describe this machine's CPUs, nodes and caches"},
    {"image", nib_image_main, "a boot image (kernel, initramfs, UEFI disk) for an appliance"},
    {"vm", nib_vm_main, "run an image under QEMU and serve its appliance to local hosts"},
    {"bench", nib_bench_main, "memory bandwidth and kernel throughput"},
    {"version", version_main, "print nib's version and the blob format it writes"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: nib COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f,
            "\n'nib COMMAND --help' describes each; every command takes --help, --version\n"
            "and '--' (the end of options: an argument after it may start with '-').\n"
            "NIB_PREFETCH=BYTES: how far ahead the kernels that nib runs prefetch weights\n"
            "(a multiple of 64 up to %d; default %d; docs/kernels.md, \"Prefetch\").\n"
            "NIB_AVX512=0: nib's kernels use no AVX-512 where the CPU has it (the AVX2\n"
            "ones, the same bits: to compare the two; docs/kernels.md, \"AVX-512\").\n",
            NIB_PREFETCH_MAX, NIB_PF_DIST);
}

/* NIB_PREFETCH, when set, before any kernel runs: 0, or -1 with a message. */
static int prefetch_from_env(void)
{
    const char *v = getenv("NIB_PREFETCH");
    if (!v)
        return 0;
    char *end;
    errno = 0;
    unsigned long long b = strtoull(v, &end, 10);
    if (!*v || *end || errno || v[0] == '-' || b > NIB_PREFETCH_MAX ||
        nib_prefetch_set((uint32_t)b)) {
        fprintf(stderr, "nib: NIB_PREFETCH wants a multiple of 64 in 0..%d bytes, not '%s'\n",
                NIB_PREFETCH_MAX, v);
        return -1;
    }
    return 0;
}

/* NIB_AVX512, when set: 0 or 1 (the CPU decides), else -1 with a message. */
static int avx512_from_env(void)
{
    const char *v = getenv("NIB_AVX512");
    if (!v)
        return 0;
    if (strcmp(v, "0") && strcmp(v, "1")) {
        fprintf(stderr, "nib: NIB_AVX512 wants 0 (no AVX-512 kernels) or 1, not '%s'\n", v);
        return -1;
    }
    nib_avx512vnni_allow(v[0] == '1');
    return 0;
}

int main(int argc, char **argv)
{
    if (prefetch_from_env() || avx512_from_env())
        return 2;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version"))
        return version_main(argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "nib: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
