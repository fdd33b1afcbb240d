/* nib eval MODEL.gguf --quant SPEC [--text FILE] [--json] [--ctx N] [--tokens N]
 *
 * Accuracy of a compiled format against the same model compiled to f32, both
 * run by nibble's own executor over the same text (teacher forcing): mean KL
 * divergence of the next-token distributions (f32 || quantized), top-1
 * agreement, and the perplexity of each on the text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "rt/tokenizer.h"
#include "tools/measure/measure.h"
#include "tools/util/args.h"
#include "tools/util/tool_util.h"
#include "tools/compiler/calib.h"
#include "tools/compiler/evalcore.h"
#include "tools/compiler/model_load.h"
#include "tools/compiler/tok_load.h"

extern const char nib_eval_default_text[];

static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            } else
                buf = nb;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: nib eval MODEL.gguf [--quant SPEC] [--precision P=F,...] [--baseline OTHER.gguf]\n"
        "                [--text FILE] [--tokens N] [--ctx N] [--json]\n"
        "                [--method rtn|search|gptq] [--calib FILE] [--calib-tokens N]\n"
        "  compares SPEC (default f32) against the same model in f32 on the text;\n"
        "  MODEL and OTHER: a GGUF file or a Hugging Face directory (nib compile's input)\n"
        "  --method, --calib, --calib-tokens: as nib compile (default gptq on its built-in\n"
        "  calibration text, which is not the evaluation text)\n"
        "  --baseline: compares OTHER.gguf (e.g. a GGUF Q4_0 of the same model, kept\n"
        "  exactly as stored) instead of a compiled MODEL\n"
        "  (default: a short built-in story text); --tokens caps the positions scored (default "
        "512)\n");
}

enum {
    O_QUANT = NIB_ARGS_OPT,
    O_PRECISION,
    O_BASELINE,
    O_TEXT,
    O_TOKENS,
    O_CTX,
    O_JSON,
    O_METHOD,
    O_CALIB,
    O_CALIB_TOKENS
};

int nib_eval_main(int argc, char **argv)
{
    static const struct nib_opt opts[] = {
        {"--quant", O_QUANT, 1},
        {"--precision", O_PRECISION, 1},
        {"--baseline", O_BASELINE, 1},
        {"--text", O_TEXT, 1},
        {"--tokens", O_TOKENS, 1},
        {"--ctx", O_CTX, 1},
        {"--json", O_JSON, 0},
        {"--method", O_METHOD, 1},
        {"--calib", O_CALIB, 1},
        {"--calib-tokens", O_CALIB_TOKENS, 1},
        {NULL, 0, 0},
    };
    const char *in = NULL, *quant = "f32", *text_path = NULL, *precision = NULL, *baseline = NULL;
    uint32_t max_tokens = 512, ctx = 0;
    struct nib_calib_args ca = NIB_CALIB_ARGS_INIT;
    int json = 0, tokens_given = 0;
    struct nib_args a;
    nib_args_init(&a, "nib eval", argc, argv, opts, usage, &in);
    int o;
    while ((o = nib_args_next(&a)) > NIB_ARGS_END) {
        if (o == O_QUANT)
            quant = a.value;
        else if (o == O_PRECISION)
            precision = a.value;
        else if (o == O_BASELINE)
            baseline = a.value;
        else if (o == O_TEXT)
            text_path = a.value;
        else if (o == O_TOKENS) {
            if (nib_args_u32(&a, 2, NIB_MAX_CTX, &max_tokens))
                return 2;
            tokens_given = 1;
        } else if (o == O_CTX) {
            if (nib_args_u32(&a, 2, NIB_MAX_CTX, &ctx))
                return 2;
        } else if (o == O_JSON) {
            json = 1;
        } else if (o >= O_METHOD && o <= O_CALIB_TOKENS) {
            char why[160];
            if (nib_calib_arg(&ca, o - O_METHOD, a.value, why, sizeof why))
                return nib_args_fail(&a, "%s", why);
        }
    }
    if (o == NIB_ARGS_EXIT)
        return a.status;
    if (!in) {
        return nib_args_missing(&a);
    }
    struct plan_opts po_ref = {.max_ctx = ctx ? ctx : max_tokens};
    nib_plan_opts_quant(&po_ref, "f32", NULL, 0);
    struct plan_opts po_q = po_ref;
    char err[512];
    if (nib_plan_opts_quant(&po_q, quant, err, sizeof err)) {
        fprintf(stderr, "nib eval: --quant: %s\n", err);
        return 2;
    }
    po_q.precision = precision;
    size_t text_len;
    char *text = NULL;
    if (text_path) {
        text = read_text(text_path, &text_len);
        if (!text) {
            fprintf(stderr, "nib eval: cannot read %s\n", text_path);
            return 1;
        }
    }
    const char *t = text ? text : nib_eval_default_text;
    if (!text)
        text_len = strlen(nib_eval_default_text);

    struct nib_loaded_model lm, lb;
    memset(&lb, 0, sizeof lb);
    if (nib_model_load(&lm, in, err, sizeof err)) {
        fprintf(stderr, "nib eval: %s\n", err);
        free(text);
        return 1;
    }
    if (baseline) {
        if (nib_model_load(&lb, baseline, err, sizeof err)) {
            fprintf(stderr, "nib eval: %s\n", err);
            nib_model_unload(&lm);
            free(text);
            return 1;
        }
        if (lb.m.hp.vocab_size != lm.m.hp.vocab_size || lb.m.hp.dim != lm.m.hp.dim) {
            fprintf(stderr, "nib eval: %s is not the same model shape as %s\n", baseline, in);
            nib_model_unload(&lb);
            nib_model_unload(&lm);
            free(text);
            return 1;
        }
        nib_plan_opts_quant(&po_q, "source", err, sizeof err);
        quant = "baseline";
    }
    int rc = 1;
    struct nib_calib *calib = NULL;
    struct runner ref, q;
    memset(&ref, 0, sizeof ref);
    memset(&q, 0, sizeof q);
    uint32_t *ids = malloc((text_len + 2) * sizeof *ids);
    if (!baseline && nib_calib_setup(&lm.m, &po_q, &ca, NULL, 0, json ? NULL : stderr, &calib, err,
                                     sizeof err)) {
        fprintf(stderr, "nib eval: calibration for --method %s: %s\n", nib_qmethod_name(ca.method),
                err);
        goto out;
    }
    if (!ids || runner_open(&ref, &lm.m, &po_ref, err, sizeof err) ||
        runner_open(&q, baseline ? &lb.m : &lm.m, &po_q, err, sizeof err)) {
        fprintf(stderr, "nib eval: %s\n", ids ? err : "out of memory");
        goto out;
    }
    ref.e.qk = q.e.qk = nib_exec_kernels(nib_cpu_isa());
    int n = tok_encode_into(&ref.v, t, text_len, 1, ids, text_len + 2);
    if (n < 2) {
        fprintf(stderr, "nib eval: the text gives fewer than 2 tokens\n");
        goto out;
    }
    uint32_t n_ids = (uint32_t)n, held = ref.v.h->hp.ctx_len;
    if (ctx > held)
        nib_args_note(a.cmd, "--ctx %u: the model's context holds %u positions; using %u", ctx,
                      held, held);
    else if (tokens_given && max_tokens > held)
        nib_args_note(a.cmd, "--tokens %u: the context holds %u positions; scoring at most %u",
                      max_tokens, held, held);
    if (n_ids > ref.v.h->hp.ctx_len)
        n_ids = ref.v.h->hp.ctx_len;
    if (n_ids > max_tokens)
        n_ids = max_tokens;
    struct eval_result r;
    if (evaluate(&ref, &q, ids, n_ids, &r)) {
        fprintf(stderr, "nib eval: out of memory\n");
        goto out;
    }
    /* bits per matrix weight: as the GGUF stores them for a baseline, as
     * the blob does for a compiled format */
    double bpw = baseline ? model_matmul_bits(&lb.m) : runner_matmul_bits(&q);
    const char *mname = baseline ? "stored" : nib_qmethod_name(po_q.method);
    if (json)
        printf("{\"model\": \"%s\", \"quant\": \"%s\", \"method\": \"%s\", \"baseline\": \"%s\", "
               "\"positions\": %u, \"kl_mean\": %.6g, \"top1_agreement\": %.6f, \"ppl_f32\": %.6g, "
               "\"ppl_quant\": %.6g, \"bits_per_weight\": %.4f, \"calib_tokens\": %u}\n",
               in, quant, mname, baseline ? baseline : "", r.n, r.kl_mean, r.top1, r.ppl_ref,
               r.ppl_q, bpw, calib ? nib_calib_tokens(calib) : 0);
    else
        printf("model %s, format %s (%s), %u positions: mean KL %.6g, top-1 agreement %.2f%%, "
               "perplexity f32 %.4f vs %s %.4f, %.3f bits per matrix weight\n",
               in, quant, mname, r.n, r.kl_mean, 100.0 * r.top1, r.ppl_ref, quant, r.ppl_q, bpw);
    rc = 0;
out:
    runner_close(&ref);
    runner_close(&q);
    nib_calib_free(calib);
    free(ids);
    free(text);
    if (baseline)
        nib_model_unload(&lb);
    nib_model_unload(&lm);
    return rc;
}
