/* nib_logits: nibble's logits and greedy tokens for the reference tests,
 * in process (no appliance): the model is planned and packed into memory
 * (tools/compiler/evalcore.h) and run by rt/exec.c, the executor the
 * appliance runs, one token per pass.
 *
 *   nib_logits MODEL --ids 1,2,3 [--quant SPEC] [--gen N] [--ctx N] [--out FILE.f32]
 *              [--precision P=F,...] [--method M] [--scalar]
 *
 * MODEL: a GGUF file or a Hugging Face directory. Writes the logits after
 * each of --ids (positions x vocab f32, little-endian) to --out, then
 * continues greedily for --gen tokens (nib_exec_argmax, as the appliance
 * picks). Prints one JSON line: vocab, positions, top1 (per position),
 * generated, and qact: for each matmul of the plan, its weight's blob
 * tensor name (the LM head as "output") and the int8 activation block its
 * kernel quantizes inputs in (0: f32, no quantization), which
 * tests/reference/ref64.py --qact-json emulates. --scalar runs the scalar
 * reference kernels instead of the best ones for this CPU. Exit 1 with a message on
 * any failure, 2 on bad usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/qformat.h"
#include "model_blob/blob_format.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "tools/compiler/calib.h"
#include "tools/compiler/evalcore.h"
#include "tools/compiler/model_load.h"

static void usage(void)
{
    fprintf(stderr, "usage: nib_logits MODEL --ids 1,2,3 [--quant SPEC] [--gen N] [--ctx N] "
                    "[--out FILE.f32] [--precision P=F,...] [--method M] [--scalar]\n");
}

static int parse_ids(const char *s, uint32_t **ids, uint32_t *n)
{
    uint32_t cap = 16, k = 0;
    uint32_t *v = malloc(cap * sizeof *v);
    while (v && *s) {
        char *end;
        unsigned long x = strtoul(s, &end, 10);
        if (end == s || x > 0xFFFFFFFFul) {
            free(v);
            return -1;
        }
        if (k == cap) {
            uint32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[k++] = (uint32_t)x;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            break;
    }
    if (!v || *s || !k) {
        free(v);
        return -1;
    }
    *ids = v;
    *n = k;
    return 0;
}

static void print_qact(const struct nib_blob_view *v)
{
    const struct nib_blob_header *h = v->h;
    int first = 1;
    printf("\"qact\": {");
    for (uint32_t i = 0; i < h->n_ops; i++) {
        const struct nib_op *op = &v->ops[i];
        if (op->code != NIB_OP_MATMUL || op->tensor >= h->n_tensors)
            continue;
        const struct nib_tensor_rec *t = &v->tensors[op->tensor];
        const char *name = op->dst == h->logits_off ? "output" : t->name; /* the LM head */
        printf("%s\"%s\": %u", first ? "" : ", ", name, nib_qformat_act_block(t->dtype, t->group));
        first = 0;
    }
    printf("}");
}

int main(int argc, char **argv)
{
    const char *model = NULL, *quant = "f32", *out = NULL, *ids_arg = NULL, *precision = NULL;
    uint32_t gen = 0, ctx = 0;
    int scalar = 0;
    /* the rounding of a library caller that names none (search), unless
     * --method says which: nib compile's default is gptq */
    struct nib_calib_args ca = {NIB_QM_SEARCH, NULL, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--ids") && i + 1 < argc)
            ids_arg = argv[++i];
        else if (!strcmp(a, "--quant") && i + 1 < argc)
            quant = argv[++i];
        else if (!strcmp(a, "--precision") && i + 1 < argc)
            precision = argv[++i];
        else if (!strcmp(a, "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(a, "--gen") && i + 1 < argc)
            gen = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(a, "--ctx") && i + 1 < argc)
            ctx = (uint32_t)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(a, "--scalar"))
            scalar = 1;
        else if (!strcmp(a, "--method") && i + 1 < argc) {
            char why[160];
            if (nib_calib_arg(&ca, NIB_CALIB_ARG_METHOD, argv[++i], why, sizeof why)) {
                fprintf(stderr, "nib_logits: %s\n", why);
                return 2;
            }
        } else if (a[0] != '-' && !model)
            model = a;
        else {
            usage();
            return 2;
        }
    }
    uint32_t *ids = NULL, n_ids = 0;
    if (!model || !ids_arg || parse_ids(ids_arg, &ids, &n_ids)) {
        usage();
        return 2;
    }
    char err[512];
    struct plan_opts po = {.max_ctx = ctx ? ctx : n_ids + gen + 1};
    if (nib_plan_opts_quant(&po, quant, err, sizeof err)) {
        fprintf(stderr, "nib_logits: --quant: %s\n", err);
        free(ids);
        return 2;
    }
    po.precision = precision;
    struct nib_loaded_model lm;
    if (nib_model_load(&lm, model, err, sizeof err)) {
        fprintf(stderr, "nib_logits: %s\n", err);
        free(ids);
        return 1;
    }
    int rc = 1;
    struct runner r;
    memset(&r, 0, sizeof r);
    FILE *f = NULL;
    struct nib_calib *calib = NULL;
    int bad = nib_calib_setup(&lm.m, &po, &ca, NULL, 0, NULL, &calib, err, sizeof err) ||
              runner_open(&r, &lm.m, &po, err, sizeof err);
    nib_calib_free(calib); /* the blob is built */
    if (bad) {
        fprintf(stderr, "nib_logits: %s\n", err);
        runner_close(&r);
        nib_model_unload(&lm);
        free(ids);
        return 1;
    }
    nib_model_unload(&lm); /* the blob in memory holds everything */
    r.e.qk = scalar ? NULL : nib_exec_kernels(nib_cpu_isa());
    const uint32_t vocab = r.v.h->hp.vocab_size;
    if (out && !(f = fopen(out, "wb"))) {
        fprintf(stderr, "nib_logits: cannot write %s\n", out);
        goto done;
    }
    printf("{\"model\": \"%s\", \"quant\": \"%s\", \"vocab\": %u, \"positions\": %u, \"top1\": [",
           model, quant, vocab, n_ids);
    uint32_t pos = 0, next = 0;
    for (; pos < n_ids; pos++) {
        const float *logits = nib_exec_token(&r.e, ids[pos], pos);
        if (!logits) {
            fprintf(stderr, "\nnib_logits: token %u at position %u refused (vocab %u, ctx %u)\n",
                    ids[pos], pos, vocab, r.v.h->hp.ctx_len);
            goto done;
        }
        if (f && fwrite(logits, sizeof *logits, vocab, f) != vocab) {
            fprintf(stderr, "\nnib_logits: writing %s failed\n", out);
            goto done;
        }
        next = nib_exec_argmax(&r.e);
        printf("%s%u", pos ? ", " : "", next);
    }
    printf("], \"generated\": [");
    for (uint32_t g = 0; g < gen; g++, pos++) {
        printf("%s%u", g ? ", " : "", next);
        if (g + 1 < gen) {
            if (!nib_exec_token(&r.e, next, pos)) {
                fprintf(stderr, "\nnib_logits: position %u past the context\n", pos);
                goto done;
            }
            next = nib_exec_argmax(&r.e);
        }
    }
    printf("], ");
    print_qact(&r.v);
    printf("}\n");
    rc = 0;
done:
    if (f && fclose(f) && !rc) {
        fprintf(stderr, "nib_logits: writing %s failed\n", out);
        rc = 1;
    }
    runner_close(&r);
    free(ids);
    return rc;
}
