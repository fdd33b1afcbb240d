/* Writes the seed corpora of the fuzz targets (run by hand; the outputs are
 * committed under tests/fuzz/corpus/):
 *
 *   make_seeds OUTDIR
 *
 * gguf/    small LLaMA GGUFs from the test fixture (F32, F16, Q8_0, Q4_0,
 *          tied output, version 2), whole and cut at section bounds; two
 *          whose matrices mix the other GGUF types (random block bytes)
 * request/ requests: good text, good ids, and one bad field each
 * ctl/     control conversations (fuzz_ctl.c's record format) and one message
 *
 * The blob seeds come from `nib compile` of gguf/f32.gguf, cut to the bytes
 * before the weights (tests/fuzz/README.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/ctl.h"
#include "proto/shm_layout.h"
#include "tests/common/gguf_fixture.h"
#include "tools/compiler/gguf.h"

static int put(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        return -1;
    }
    fclose(f);
    return 0;
}

static int gguf_seed(const char *dir, const char *name, const struct fx_params *p, int cuts)
{
    struct fx_file f;
    fx_build_default(&f, p);
    char n[128];
    snprintf(n, sizeof n, "%s.gguf", name);
    int rc = put(dir, n, f.buf, f.size);
    /* Cut at a few section bounds: the reader's error paths. */
    for (size_t i = 0; cuts && i < f.n_bounds && rc == 0; i += f.n_bounds / 4 + 1) {
        snprintf(n, sizeof n, "%s-cut%zu.gguf", name, f.bounds[i]);
        rc = put(dir, n, f.buf, f.bounds[i]);
    }
    fx_file_free(&f);
    return rc;
}

/* The fixture's model with its matrices in the given types, round robin,
 * their payloads random block bytes (the reader and the row conversion
 * take any). K-quant rows need inputs that are multiples of 256. */
static int gguf_mix_seed(const char *dir, const char *name, const uint32_t *types, size_t n,
                         int kquant)
{
    struct fx_params p;
    fx_quant_params(&p, GGML_TYPE_F32);
    if (kquant) {
        p.dim = 256, p.ffn_dim = 256, p.n_layers = 1, p.n_heads = 4, p.n_kv_heads = 1;
    }
    struct fx_model m;
    fx_model_init(&m, &p);
    uint64_t rng = 11;
    size_t k = 0;
    for (size_t i = 0; i < m.n_t; i++) {
        struct fx_tensor *t = &m.t[i];
        if (t->n_dims != 2)
            continue;
        t->type = types[k++ % n];
        size_t len = (size_t)ggml_type_nbytes(t->type, t->ne[0] * t->ne[1]);
        uint8_t *raw = malloc(len ? len : 1);
        for (size_t b = 0; b < len; b++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            raw[b] = (uint8_t)(rng >> 56);
        }
        fx_tensor_set_raw(t, raw, len);
        free(raw);
    }
    struct fx_file f;
    fx_build(&m, &f);
    char file[128];
    snprintf(file, sizeof file, "%s.gguf", name);
    int rc = put(dir, file, f.buf, f.size);
    fx_file_free(&f);
    fx_model_free(&m);
    return rc;
}

static int request_seed(const char *dir, const char *name, const struct nib_request *r,
                        const void *prompt, size_t n)
{
    uint8_t buf[sizeof *r + 256];
    memcpy(buf, r, sizeof *r);
    memcpy(buf + sizeof *r, prompt, n);
    char file[128];
    snprintf(file, sizeof file, "%s.bin", name);
    return put(dir, file, buf, sizeof *r + n);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUTDIR (with gguf/, request/ and ctl/ inside)\n");
        return 2;
    }
    char gdir[400], rdir[400];
    snprintf(gdir, sizeof gdir, "%s/gguf", argv[1]);
    snprintf(rdir, sizeof rdir, "%s/request", argv[1]);
    struct fx_params p;
    int rc = 0;
    fx_default_params(&p);
    rc |= gguf_seed(gdir, "f32", &p, 1);
    p.version = 2;
    p.tied = 1;
    rc |= gguf_seed(gdir, "v2-tied", &p, 0);
    fx_default_params(&p);
    p.wtype = GGML_TYPE_F16;
    rc |= gguf_seed(gdir, "f16", &p, 0);
    fx_quant_params(&p, GGML_TYPE_Q8_0);
    rc |= gguf_seed(gdir, "q8_0", &p, 0);
    fx_quant_params(&p, GGML_TYPE_Q4_0);
    rc |= gguf_seed(gdir, "q4_0", &p, 0);
    static const uint32_t legacy[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                      GGML_TYPE_IQ4_NL};
    rc |= gguf_mix_seed(gdir, "mix-legacy", legacy, 4, 0);
    /* embd, q, k, v, o, gate, up, down, output: small types on the big ones */
    static const uint32_t kq[] = {GGML_TYPE_Q6_K, GGML_TYPE_Q2_K, GGML_TYPE_Q5_K,
                                  GGML_TYPE_Q6_K, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_XS,
                                  GGML_TYPE_Q4_K, GGML_TYPE_Q2_K, GGML_TYPE_Q5_K};
    rc |= gguf_mix_seed(gdir, "mix-kquant", kq, 9, 1);
    /* every architecture llama_import reads (fx_arch_params): biases, Q/K
     * norms, fused attn_qkv and gate|up, post-norms, Llama 3 RoPE factors */
    static const char *const archs[] = {"qwen2", "qwen3", "phi3", "gemma2"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        char name[32];
        fx_arch_params(&p, archs[i]);
        p.qkv_bias |= !strcmp(archs[i], "phi3"); /* a fused bias too */
        snprintf(name, sizeof name, "arch-%s", archs[i]);
        rc |= gguf_seed(gdir, name, &p, 0);
    }
    fx_arch_params(&p, "llama");
    p.rope_freqs = 1;
    p.tied = 1;
    rc |= gguf_seed(gdir, "arch-llama3", &p, 0);

    struct nib_request r;
    memset(&r, 0, sizeof r);
    r.prompt_len = 16;
    r.max_tokens = 8;
    rc |= request_seed(rdir, "text", &r, "Once upon a time", 16);
    r.temperature = 0.8f;
    r.seed = 42;
    r.flags = NIB_REQ_NO_BOS;
    rc |= request_seed(rdir, "text-sampled", &r, "Once upon a time", 16);
    const uint32_t ids[] = {1, 300, 301, 2, 511};
    memset(&r, 0, sizeof r);
    r.prompt_len = sizeof ids;
    r.max_tokens = 2;
    r.flags = NIB_REQ_PROMPT_IDS;
    rc |= request_seed(rdir, "ids", &r, ids, sizeof ids);
    r.prompt_len = 6;
    rc |= request_seed(rdir, "ids-odd-length", &r, ids, sizeof ids);
    memset(&r, 0, sizeof r);
    r.prompt_len = 3;
    r.max_tokens = 0;
    rc |= request_seed(rdir, "bad-max-tokens", &r, "abc", 3);
    r.max_tokens = 1;
    r.reserved[35] = 1;
    rc |= request_seed(rdir, "bad-reserved", &r, "abc", 3);
    r.reserved[35] = 0;
    r.kind = NIB_REQ_KIND_CHAT;
    rc |= request_seed(rdir, "bad-kind", &r, "abc", 3);
    const uint8_t first_pos[4] = {5, 0, 0, 0}; /* kind MEASURE: one u32, little-endian */
    memset(&r, 0, sizeof r);
    r.kind = NIB_REQ_KIND_MEASURE;
    r.prompt_len = 4;
    r.max_tokens = 3;
    rc |= request_seed(rdir, "measure", &r, first_pos, 4);
    r.temperature = 0.5f;
    rc |= request_seed(rdir, "measure-bad-temperature", &r, first_pos, 4);
    memset(&r, 0, sizeof r);
    r.prompt_len = 0xFFFFFFFFu;
    r.max_tokens = 1;
    memcpy(&r.temperature, "\xff\xff\xff\x7f", 4); /* NaN */
    rc |= request_seed(rdir, "bad-everything", &r, "", 0);

    /* ctl/: conversations of [connection][length][message] records
     * (fuzz_ctl.c): attach, kick, detach; three hosts for two rings; a
     * hang-up while attached; stop from the right and the wrong uid;
     * malformed messages. */
    char cdir[400];
    snprintf(cdir, sizeof cdir, "%s/ctl", argv[1]);
    const struct nib_ctl_msg at = nib_ctl_make(NIB_CTL_ATTACH), de = nib_ctl_make(NIB_CTL_DETACH),
                             st = nib_ctl_make(NIB_CTL_STOP), ki = nib_ctl_make(NIB_CTL_KICK);
    struct nib_ctl_msg bad = at;
    bad.reserved[5] = 1;
    const struct {
        uint8_t conn;
        const struct nib_ctl_msg *m;
    } convs[][6] = {
        {{0, &at}, {0, &ki}, {0, &de}},
        {{0, &at}, {1, &at}, {2, &at}, {1, NULL}, {2, &at}},
        {{0, &at}, {2, &st}, {1, &at}, {0, &st}, {1, &at}},
        {{1, &bad}, {1, &at}, {0, &at}, {0, &at}},
    };
    const char *const conv_names[] = {"attach-kick-detach", "three-hosts-two-rings",
                                      "stop-denied-then-stop", "malformed-then-attach"};
    for (size_t c = 0; c < sizeof convs / sizeof convs[0]; c++) {
        uint8_t buf[6 * 66];
        size_t n = 0;
        for (size_t k = 0; k < 6 && (convs[c][k].m || convs[c][k].conn); k++) {
            buf[n++] = convs[c][k].conn;
            if (!convs[c][k].m) {
                buf[n++] = 0xff; /* hang up */
                continue;
            }
            buf[n++] = (uint8_t)sizeof(struct nib_ctl_msg);
            memcpy(buf + n, convs[c][k].m, sizeof(struct nib_ctl_msg));
            n += sizeof(struct nib_ctl_msg);
        }
        char file[128];
        snprintf(file, sizeof file, "%s.bin", conv_names[c]);
        rc |= put(cdir, file, buf, n);
    }
    rc |= put(cdir, "one-attach.bin", &at, sizeof at);
    return rc ? 1 : 0;
}
