#include "tests/rt/arch_model.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/model_load.h"
#include "tools/compiler/plan.h"

static float urand(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) / 16777216.0f * 2.0f - 1.0f; /* [-1, 1) */
}

/* A rows x cols f32 weight (rows 1: a vector) of values base + amp * u. */
static struct llama_weight mk(struct am_model *b, uint32_t rows, uint32_t cols, float base,
                              float amp)
{
    ck_assert_uint_lt(b->n_t, AM_MAX_T);
    uint32_t i = b->n_t++;
    float *d = malloc((size_t)rows * cols * 4);
    for (uint64_t k = 0; k < (uint64_t)rows * cols; k++)
        d[k] = base + amp * urand(&b->rng);
    b->data[i] = d;
    struct gguf_tensor *t = &b->t[i];
    *t = (struct gguf_tensor){.name = {4, "test"},
                              .n_dims = rows > 1 ? 2 : 1,
                              .ne = {cols, rows, 1, 1},
                              .type = GGML_TYPE_F32,
                              .n_elems = (uint64_t)rows * cols,
                              .nbytes = (uint64_t)rows * cols * 4,
                              .data = (const uint8_t *)d};
    return (struct llama_weight){.t = t, .rows = rows, .cols = cols};
}

static struct llama_weight mat(struct am_model *b, uint32_t rows, uint32_t cols)
{
    return mk(b, rows, cols, 0.0f, 1.5f / sqrtf((float)cols));
}

static struct llama_weight norm_w(struct am_model *b, uint32_t n)
{
    return mk(b, 1, n, 1.0f, 0.3f);
}

/* The fixture's LLaMA model supplies the tokenizer and special ids; every
 * weight and hyper-parameter is replaced. */
void am_build(struct am_model *b, const struct am_cfg *c)
{
    memset(b, 0, sizeof *b);
    b->rng = 12345;
    struct fx_params fp;
    fx_default_params(&fp);
    fx_build_default(&b->file, &fp);
    char err[256];
    ck_assert_msg(gguf_open(&b->g, b->file.buf, b->file.size, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(llama_import(&b->m, &b->g, err, sizeof err) == 0, "%s", err);
    struct llama_model *m = &b->m;
    const uint32_t vocab = m->hp.vocab_size, hd = c->head_dim ? c->head_dim : AM_DIM / AM_HEADS;
    ck_assert_uint_eq(m->hp.n_layers, AM_LAYERS);
    m->hp.dim = AM_DIM;
    m->hp.n_heads = AM_HEADS;
    m->hp.n_kv_heads = AM_KV;
    m->hp.head_dim = hd;
    m->hp.ffn_dim = AM_FFN;
    m->hp.ctx_len = AM_CTX;
    m->hp.rope_dim = AM_ROPE_DIM;
    m->hp.rope_theta = 10000.0f;
    m->hp.norm_eps = 1e-5f;
    m->arch = LLAMA_ARCH_LLAMA;
    m->ffn_act = c->gelu ? LLAMA_ACT_GELU_TANH : LLAMA_ACT_SILU;
    m->embed_scale = c->embed_scale ? c->embed_scale : 1.0f;
    m->attn_scale = c->attn_scale ? c->attn_scale : 1.0f / sqrtf((float)hd);
    m->attn_softcap = c->attn_softcap;
    m->final_softcap = c->final_softcap;
    free(m->rope_freq_factors);
    m->rope_freq_factors = NULL;
    if (c->freq_factors) {
        m->rope_freq_factors = malloc(AM_ROPE_DIM / 2 * sizeof(float));
        for (uint32_t i = 0; i < AM_ROPE_DIM / 2; i++)
            m->rope_freq_factors[i] = 1.0f + 7.0f * (float)i; /* 1, 8, 15 */
    }
    m->tok_embd = mk(b, vocab, AM_DIM, 0.0f, 1.0f);
    m->output_norm = norm_w(b, AM_DIM);
    m->output_tied = c->tied;
    m->output = c->tied ? (struct llama_weight){0} : mat(b, vocab, AM_DIM);
    for (uint32_t l = 0; l < AM_LAYERS; l++) {
        struct llama_layer *L = &m->layers[l];
        memset(L, 0, sizeof *L);
        L->attn_norm = norm_w(b, AM_DIM);
        L->wq = mat(b, AM_HEADS * hd, AM_DIM);
        L->wk = mat(b, AM_KV * hd, AM_DIM);
        L->wv = mat(b, AM_KV * hd, AM_DIM);
        L->wo = mat(b, AM_DIM, AM_HEADS * hd);
        L->ffn_norm = norm_w(b, AM_DIM);
        L->w_gate = mat(b, AM_FFN, AM_DIM);
        L->w_up = mat(b, AM_FFN, AM_DIM);
        L->w_down = mat(b, AM_DIM, AM_FFN);
        if (c->bias) {
            L->bq = mk(b, 1, AM_HEADS * hd, 0.0f, 0.5f);
            L->bk = mk(b, 1, AM_KV * hd, 0.0f, 0.5f);
            L->bv = mk(b, 1, AM_KV * hd, 0.0f, 0.5f);
        }
        if (c->qk_norm) {
            L->q_norm = mk(b, 1, hd, 1.0f, 0.5f);
            L->k_norm = mk(b, 1, hd, 1.0f, 0.5f);
        }
        if (c->post_norms) {
            L->post_attn_norm = norm_w(b, AM_DIM);
            L->post_ffn_norm = norm_w(b, AM_DIM);
        }
        L->window = l % 2 == 0 ? c->window : 0;
    }
}

void am_free(struct am_model *b)
{
    llama_model_free(&b->m);
    gguf_close(&b->g);
    fx_file_free(&b->file);
    for (uint32_t i = 0; i < b->n_t; i++)
        free(b->data[i]);
}

int am_compile_raw(const struct llama_model *m, const char *quant, uint8_t **blob, size_t *size,
                   char *err, size_t errlen)
{
    struct plan_opts po = {.max_ctx = AM_CTX, .max_batch = 8};
    if (nib_plan_opts_quant(&po, quant, err, errlen))
        return -1;
    return nib_blob_build_mem(m, &po, blob, size, err, errlen);
}

uint8_t *am_compile(const struct llama_model *m, const char *quant, struct nib_blob_view *v)
{
    char err[512];
    uint8_t *blob = NULL;
    size_t size = 0;
    ck_assert_msg(am_compile_raw(m, quant, &blob, &size, err, sizeof err) == 0, "%s: %s", quant,
                  err);
    ck_assert_msg(nib_blob_open(v, blob, size, 1, err, sizeof err) == 0, "%s: %s", quant, err);
    return blob;
}
