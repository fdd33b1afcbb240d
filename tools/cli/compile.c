/* nib compile MODEL.gguf|HF_DIR -o OUT.blob [--quant SPEC] [--precision ...] [--ctx N] [--batch N]
 * Import, plan, pack. The blob is written to OUT.blob.tmp and renamed into
 * place only when complete, so a failed compile never leaves a half blob. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model_blob/blob_view.h"
#include "tools/cli/cli.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"
#include "tools/compiler/autoprec.h"
#include "tools/compiler/calib.h"
#include "tools/compiler/chat_compile.h"
#include "tools/compiler/model_load.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: nib compile MODEL.gguf|HF_DIR -o OUT.blob [--quant SPEC] [--precision P=F,...] "
        "[--ctx N] [--batch N] [--chat-template FAMILY | --no-chat-template]\n"
        "                [--method rtn|search|gptq] [--calib FILE] [--calib-tokens N]\n"
        "  HF_DIR        a Hugging Face model directory: config.json, model.safetensors (or\n"
        "                shards with model.safetensors.index.json), tokenizer.json\n"
        "  --quant SPEC  f32 (exact reference), q4 (q4h layers; the LM head in q8c when\n"
        "                that costs at most 0.5 bit per weight), source (keep GGUF\n"
        "                Q4_0/Q8_0 tensors exactly), or one format for every\n"
        "                matrix: q4[/G] q4a[/G] (G = 32, 64, 128), q4c, q8c[/G],\n"
        "                q4f[/G] q8f[/G] (f32 scale and minimum, G = 16, 32), q4h[/G]\n"
        "                (sub-scales per 16 under a scale per G = 32, 64, 128; q4h\n"
        "                alone: the largest G each matrix's input length allows)\n"
        "  --precision   per-tensor overrides, e.g. 'output=q8c,blk.0.*=q8c' (shell globs\n"
        "                over GGUF names and nibble's fused names; later entries win)\n"
        "  --auto-precision --max-bytes N | --max-kl X\n"
        "                keep the matrices whose q8c copy saves the most KL per byte\n"
        "                (measured against f32 on calibration text) in q8c, within N\n"
        "                weight bytes or until the mean KL is below X; prints the table\n"
        "  --method M    how quantized weights are rounded (docs/accuracy.md): rtn (round to\n"
        "                nearest, llama.cpp's reference rounding), search (scales searched\n"
        "                for the least error weighted by calibration), gptq (default: error\n"
        "                feedback through the calibration Hessian)\n"
        "  --calib FILE  calibration text for search and gptq (default: a built-in story)\n"
        "  --calib-tokens N  calibration tokens at most (default %d)\n"
        "  --ctx N       context positions the appliance holds (default: the model's, at most "
        "2048)\n"
        "  --batch N     prompt tokens per prefill pass, 1..64 (default 16): each weight is read\n"
        "                once per pass; every activation buffer holds N rows\n"
        "  --chat-template FAMILY  nibble's own chat template for a model family (llama2,\n"
        "                llama3, chatml, phi3, gemma, mistral, zephyr) instead of the model's\n"
        "  --no-chat-template      no chat template in the blob\n",
        NIB_CALIB_TOKENS);
}

static int write_blob(const struct llama_model *m, const struct plan_opts *po, const char *out,
                      const char *in)
{
    char err[512];
    size_t tl = strlen(out) + 5;
    char *tmp = malloc(tl);
    if (!tmp)
        return 1;
    snprintf(tmp, tl, "%s.tmp", out);
    FILE *f = fopen(tmp, "w+b");
    if (!f) {
        fprintf(stderr, "nib compile: cannot create %s: %s\n", tmp, strerror(errno));
        free(tmp);
        return 1;
    }
    struct nib_plan p;
    int rc = nib_blob_build(m, po, f, &p, err, sizeof err);
    if (fclose(f) != 0 && rc == 0) {
        snprintf(err, sizeof err, "cannot finish writing %s", tmp);
        rc = -1;
        nib_plan_free(&p);
    }
    if (rc == 0 && rename(tmp, out) != 0) {
        snprintf(err, sizeof err, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
        rc = -1;
        nib_plan_free(&p);
    }
    if (rc) {
        fprintf(stderr, "nib compile: %s\n", err);
        unlink(tmp);
        free(tmp);
        return 1;
    }
    uint64_t wbytes = 0;
    for (uint32_t i = 0; i < p.n_tensors; i++)
        wbytes += p.tensors[i].rec.size;
    fprintf(stderr,
            "nib compile: %s -> %s: %u layers, dim %u, vocab %u, ctx %u; %u tensors, "
            "%u ops, %.1f MB of weights, %.1f MB runtime memory\n",
            in, out, p.h.hp.n_layers, p.h.hp.dim, p.h.hp.vocab_size, p.h.hp.ctx_len, p.n_tensors,
            p.n_ops, (double)wbytes / 1e6, (double)(p.h.act_size + p.h.kv_size) / 1e6);
    nib_plan_free(&p);
    free(tmp);
    return 0;
}

enum {
    O_OUT = NIB_ARGS_OPT,
    O_QUANT,
    O_PRECISION,
    O_AUTO,
    O_MAX_BYTES,
    O_MAX_KL,
    O_BATCH,
    O_CTX,
    O_CHAT,
    O_NO_CHAT,
    O_METHOD,
    O_CALIB,
    O_CALIB_TOKENS,
};

/* --chat-template FAMILY / --no-chat-template replace the model's own
 * template before packing (a template nib cannot compile is refused by the
 * packer, naming these two options). */
static int choose_template(struct tok_spec *t, const char *family, int none)
{
    if (!family && !none)
        return 0;
    const char *text = family ? nib_chat_builtin(family) : NULL;
    if (family && !text) {
        fprintf(stderr, "nib compile: --chat-template: unknown family '%s'; known:", family);
        for (size_t i = 0; nib_chat_families[i]; i++)
            fprintf(stderr, " %s", nib_chat_families[i]);
        fprintf(stderr, "\n");
        return 2;
    }
    free(t->chat_template);
    t->chat_template = text ? strdup(text) : NULL;
    if (text && !t->chat_template)
        return 1;
    return 0;
}

/* An .onnx model (not the argument of -o) is a vision model. */
static int is_onnx_model(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        size_t n = strlen(argv[i]);
        if (n > 5 && !strcmp(argv[i] + n - 5, ".onnx") && strcmp(argv[i - 1], "-o"))
            return 1;
    }
    return 0;
}

int nib_compile_main(int argc, char **argv)
{
    if (is_onnx_model(argc, argv))
        return nib_compile_onnx_main(argc, argv);
    static const struct nib_opt opts[] = {
        {"-o", O_OUT, 1},
        {"--quant", O_QUANT, 1},
        {"--precision", O_PRECISION, 1},
        {"--auto-precision", O_AUTO, 0},
        {"--max-bytes", O_MAX_BYTES, 1},
        {"--max-kl", O_MAX_KL, 1},
        {"--batch", O_BATCH, 1},
        {"--ctx", O_CTX, 1},
        {"--chat-template", O_CHAT, 1},
        {"--no-chat-template", O_NO_CHAT, 0},
        {"--method", O_METHOD, 1},
        {"--calib", O_CALIB, 1},
        {"--calib-tokens", O_CALIB_TOKENS, 1},
        {NULL, 0, 0},
    };
    const char *in = NULL, *out = NULL, *quant = "f32", *precision = NULL, *family = NULL;
    int auto_prec = 0, no_chat = 0;
    struct autoprec_opts ao = {.max_bytes = 0, .max_kl = 0, .positions = 256, .report = stdout};
    struct plan_opts po = {.max_ctx = 0};
    struct nib_calib_args ca = NIB_CALIB_ARGS_INIT;
    struct nib_args a;
    nib_args_init(&a, "nib compile", argc, argv, opts, usage, &in);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        float kl;
        if (o == O_OUT)
            out = a.value;
        else if (o == O_QUANT)
            quant = a.value;
        else if (o == O_PRECISION)
            precision = a.value;
        else if (o == O_AUTO)
            auto_prec = 1;
        else if (o == O_MAX_BYTES) {
            if (nib_parse_u64(a.value, &ao.max_bytes) || ao.max_bytes == 0)
                return nib_args_fail(&a, "--max-bytes wants a positive byte count, not '%s'",
                                     a.value);
        } else if (o == O_MAX_KL) {
            if (nib_parse_f32(a.value, &kl) || !(kl > 0))
                return nib_args_fail(&a, "--max-kl wants a positive number, not '%s'", a.value);
            ao.max_kl = kl;
        } else if (o == O_BATCH) {
            if (nib_args_u32(&a, 1, NIB_MAX_BATCH, &po.max_batch))
                return 2;
        } else if (o == O_CTX) {
            if (nib_args_u32(&a, 1, NIB_MAX_CTX, &po.max_ctx))
                return 2;
        } else if (o == O_CHAT) {
            family = a.value;
        } else if (o == O_NO_CHAT) {
            no_chat = 1;
        } else if (o >= O_METHOD && o <= O_CALIB_TOKENS) {
            char why[160];
            if (nib_calib_arg(&ca, o - O_METHOD, a.value, why, sizeof why))
                return nib_args_fail(&a, "%s", why);
        }
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (!in || !out) {
        return nib_args_missing(&a);
    }
    if (family && no_chat)
        return nib_args_fail(&a, "--chat-template and --no-chat-template exclude each other");
    char err[512];
    if (nib_plan_opts_quant(&po, quant, err, sizeof err)) {
        fprintf(stderr, "nib compile: --quant: %s\n", err);
        return 2;
    }
    po.precision = precision;
    struct nib_loaded_model lm;
    if (nib_model_load(&lm, in, err, sizeof err)) {
        fprintf(stderr, "nib compile: %s\n", err);
        return 1;
    }
    int crc = choose_template(&lm.m.tok, family, no_chat);
    if (crc) {
        nib_model_unload(&lm);
        return crc;
    }
    if (po.max_ctx > lm.m.hp.ctx_len) /* the planner never holds more than the model knows */
        fprintf(stderr, "nib compile: --ctx %u clamped to %u, the model's context length\n",
                po.max_ctx, lm.m.hp.ctx_len);
    /* auto-precision's upgrade (q8c) is prepared by the calibration too */
    static const struct nib_qspec upgrade = {NIB_DT_Q8C, 0};
    struct nib_calib *calib = NULL;
    if (nib_calib_setup(&lm.m, &po, &ca, auto_prec ? &upgrade : NULL, auto_prec ? 1 : 0, stderr,
                        &calib, err, sizeof err)) {
        fprintf(stderr, "nib compile: calibration for --method %s: %s\n",
                nib_qmethod_name(ca.method), err);
        nib_model_unload(&lm);
        return 1;
    }
    char *auto_p = NULL;
    if (auto_prec) {
        if (!ao.max_bytes && !(ao.max_kl > 0)) {
            fprintf(stderr, "nib compile: --auto-precision needs --max-bytes N or --max-kl X\n");
            nib_calib_free(calib);
            nib_model_unload(&lm);
            return 2;
        }
        if (nib_autoprec(&lm.m, &po, &ao, &auto_p, err, sizeof err)) {
            fprintf(stderr, "nib compile: --auto-precision: %s\n", err);
            nib_calib_free(calib);
            nib_model_unload(&lm);
            return 1;
        }
        po.precision = auto_p;
    }
    int rc = write_blob(&lm.m, &po, out, in);
    free(auto_p);
    nib_calib_free(calib);
    nib_model_unload(&lm);
    return rc;
}
