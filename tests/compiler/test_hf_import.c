/* Hugging Face directory import (tools/compiler/hf_import.c) on tiny
 * directories the tests write (tests/compiler/hf_dir_fixture.h): every
 * model_type's views (rotate-half Q/K rows, fused phi3 sources, Gemma's
 * +1 norms, biases, per-head norms), config.json semantics (windows,
 * soft-capping, llama3 RoPE factors), F16/BF16, sharded checkpoints, and
 * every refusal; the logits of each compiled model (f32) against a float64
 * forward pass written from the transformers definitions; and the same
 * weights written as a GGUF with llama.cpp's Q/K permutation compile to
 * the same logits.
 *
 * Built a second time with -DHF_REAL (test hf_import_real): TinyStories-656K
 * from ../shared/models: greedy continuations equal
 * TinyStories-656K.reference.json and the f32 logits equal the float64
 * forward pass within f32 rounding (exit 77 when the model is absent). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/exec.h"
#include "rt/tokenizer.h"
#include "tests/common/test_util.h"
#include "tests/compiler/hf_dir_fixture.h"
#include "tools/compiler/evalcore.h"
#include "tools/compiler/gguf_write.h"
#include "tools/compiler/hf_import.h"
#include "tools/compiler/model_load.h"
#include "tools/compiler/tok_load.h"
#include "tools/util/json.h"

static char err[1024];

/* Run ids through a compiled f32 model and the float64 reference; the
 * largest difference of any logit relative to the largest logit seen. */
static double compare_logits(const struct llama_model *m, struct ref64 *r, const uint32_t *ids,
                             uint32_t n, uint32_t *argmax_out)
{
    struct plan_opts po = {0};
    ck_assert_int_eq(nib_plan_opts_quant(&po, "f32", err, sizeof err), 0);
    struct runner run;
    ck_assert_msg(runner_open(&run, m, &po, err, sizeof err) == 0, "compile: %s", err);
    uint32_t vocab = m->hp.vocab_size;
    double *ref = malloc(vocab * sizeof *ref), worst = 0, scale = 0;
    for (uint32_t pos = 0; pos < n; pos++) {
        const float *lg = nib_exec_token(&run.e, ids[pos], pos);
        ck_assert_ptr_nonnull(lg);
        ref_step(r, ids[pos], pos, ref);
        uint32_t best = 0;
        for (uint32_t i = 0; i < vocab; i++) {
            double d = fabs((double)lg[i] - ref[i]);
            worst = d > worst ? d : worst;
            scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
            best = ref[i] > ref[best] ? i : best;
        }
        if (argmax_out)
            argmax_out[pos] = best;
    }
    free(ref);
    runner_close(&run);
    return worst / (scale > 1 ? scale : 1);
}

#ifndef HF_REAL

static void load_dir(struct nib_loaded_model *lm, const char *dir)
{
    ck_assert_msg(nib_model_load(lm, dir, err, sizeof err) == 0, "%s: %s", dir, err);
}

/* A refusal whose message holds phrase. */
static void expect_refused(const char *dir, const char *phrase)
{
    struct nib_loaded_model lm;
    err[0] = 0;
    ck_assert_msg(nib_model_load(&lm, dir, err, sizeof err) == -1, "%s accepted (%s)", dir, phrase);
    ck_assert_msg(strstr(err, phrase), "error '%s' lacks '%s'", err, phrase);
}

/* Source entry of view entry j of a rotate-half view (head hd, rope rd). */
static uint32_t neox_src(uint32_t j, uint32_t hd, uint32_t rd)
{
    uint32_t h = j / hd, i = j % hd;
    if (i >= rd)
        return j;
    return h * hd + (i % 2 ? rd / 2 + i / 2 : i / 2);
}

/* View w equals rows [row0, row0 + rows) of fixture tensor t, rows (or a
 * vector's elements) reordered as rotate-half when neox, plus add. */
static void check_view(const struct llama_weight *w, const struct hd_tensor *t, uint32_t row0,
                       int neox, uint32_t hd, uint32_t rd, float add)
{
    ck_assert_msg(w->t != NULL, "%s: not bound", t->name);
    ck_assert_msg(w->neox_head == (neox ? hd : 0) && w->neox_rope_dim == (neox ? rd : 0),
                  "%s: neox %u/%u", t->name, w->neox_head, w->neox_rope_dim);
    ck_assert_msg(w->add == add, "%s: add %g", t->name, (double)w->add);
    float *row = malloc(w->cols * sizeof *row);
    if (t->nd == 1) {
        ck_assert_uint_eq(w->rows, 1);
        ck_assert_int_eq(llama_weight_row_f32(w, 0, row), 0);
        for (uint32_t i = 0; i < w->cols; i++)
            ck_assert_msg(row[i] == t->v[neox ? neox_src(i, hd, rd) : i] + add, "%s[%u]", t->name,
                          i);
    } else {
        for (uint32_t r = 0; r < w->rows; r++) {
            ck_assert_int_eq(llama_weight_row_f32(w, r, row), 0);
            uint32_t s = row0 + (neox ? neox_src(r, hd, rd) : r);
            for (uint32_t c = 0; c < w->cols; c++)
                ck_assert_msg(row[c] == t->v[(uint64_t)s * w->cols + c], "%s[%u][%u]", t->name, r,
                              c);
        }
        ck_assert_int_eq(llama_weight_row_f32(w, w->rows, row), -1);
    }
    free(row);
}

static const struct hd_tensor *T(struct hd_model *fm, const char *fmt, uint32_t l)
{
    char n[128];
    snprintf(n, sizeof n, fmt, l);
    const struct hd_tensor *t = hd_find(fm, n);
    ck_assert_msg(t != NULL, "fixture lacks %s", n);
    return t;
}

/* Every view of an imported fixture model against the fixture's values. */
static void check_model(const struct llama_model *m, struct hd_model *fm)
{
    const struct hd_params *p = &fm->p;
    uint32_t hd = p->head_dim, rd = p->partial > 0 ? (uint32_t)(hd * p->partial) : hd;
    uint32_t q = p->n_heads * hd, kv = p->n_kv_heads * hd;
    float add = p->gemma ? 1.0f : 0.0f;
    ck_assert_uint_eq(m->hp.dim, p->dim);
    ck_assert_uint_eq(m->hp.n_layers, p->n_layers);
    ck_assert_uint_eq(m->hp.n_heads, p->n_heads);
    ck_assert_uint_eq(m->hp.n_kv_heads, p->n_kv_heads);
    ck_assert_uint_eq(m->hp.head_dim, hd);
    ck_assert_uint_eq(m->hp.rope_dim, rd);
    ck_assert_uint_eq(m->hp.ffn_dim, p->ffn);
    ck_assert_uint_eq(m->hp.vocab_size, p->vocab);
    ck_assert_uint_eq(m->hp.ctx_len, p->ctx);
    ck_assert(m->hp.norm_eps == p->eps && m->hp.rope_theta == p->theta);
    ck_assert_uint_eq(m->hp.arch, m->arch);
    ck_assert_uint_eq(m->tok.n_vocab, p->vocab); /* padded from n_tok */
    ck_assert_uint_eq(m->hp.bos_id, 1);
    ck_assert_uint_eq(m->hp.eos_id, 2);
    ck_assert_uint_eq(m->hp.add_bos, 1);
    for (uint32_t i = p->n_tok; i < p->vocab; i++) {
        char want[32];
        snprintf(want, sizeof want, "[PAD%u]", i);
        ck_assert(m->tok.tokens[i].len == strlen(want) &&
                  !memcmp(m->tok.tokens[i].bytes, want, strlen(want)));
        ck_assert_int_eq(m->tok.tokens[i].type, NIB_TOK_UNUSED);
    }
    check_view(&m->tok_embd, hd_find(fm, "model.embed_tokens.weight"), 0, 0, 0, 0, 0);
    check_view(&m->output_norm, hd_find(fm, "model.norm.weight"), 0, 0, 0, 0, add);
    ck_assert_int_eq(m->output_tied, p->tie);
    if (p->tie)
        ck_assert_ptr_eq(m->output.t, m->tok_embd.t);
    else
        check_view(&m->output, hd_find(fm, "lm_head.weight"), 0, 0, 0, 0, 0);
    ck_assert(m->embed_scale == (p->gemma ? sqrtf((float)p->dim) : 1.0f));
    for (uint32_t l = 0; l < p->n_layers; l++) {
        const struct llama_layer *L = &m->layers[l];
        check_view(&L->attn_norm, T(fm, "model.layers.%u.input_layernorm.weight", l), 0, 0, 0, 0,
                   add);
        if (p->fused) {
            const struct hd_tensor *qkv = T(fm, "model.layers.%u.self_attn.qkv_proj.weight", l);
            const struct hd_tensor *gu = T(fm, "model.layers.%u.mlp.gate_up_proj.weight", l);
            check_view(&L->wq, qkv, 0, 1, hd, rd, 0);
            check_view(&L->wk, qkv, q, 1, hd, rd, 0);
            check_view(&L->wv, qkv, q + kv, 0, 0, 0, 0);
            check_view(&L->w_gate, gu, 0, 0, 0, 0, 0);
            check_view(&L->w_up, gu, p->ffn, 0, 0, 0, 0);
            ck_assert(L->wq.row0 == 0 && L->wk.row0 == q && L->wv.row0 == q + kv);
        } else {
            check_view(&L->wq, T(fm, "model.layers.%u.self_attn.q_proj.weight", l), 0, 1, hd, rd,
                       0);
            check_view(&L->wk, T(fm, "model.layers.%u.self_attn.k_proj.weight", l), 0, 1, hd, rd,
                       0);
            check_view(&L->wv, T(fm, "model.layers.%u.self_attn.v_proj.weight", l), 0, 0, 0, 0, 0);
            check_view(&L->w_gate, T(fm, "model.layers.%u.mlp.gate_proj.weight", l), 0, 0, 0, 0, 0);
            check_view(&L->w_up, T(fm, "model.layers.%u.mlp.up_proj.weight", l), 0, 0, 0, 0, 0);
        }
        check_view(&L->wo, T(fm, "model.layers.%u.self_attn.o_proj.weight", l), 0, 0, 0, 0, 0);
        check_view(&L->w_down, T(fm, "model.layers.%u.mlp.down_proj.weight", l), 0, 0, 0, 0, 0);
        if (p->gemma) {
            check_view(&L->post_attn_norm,
                       T(fm, "model.layers.%u.post_attention_layernorm.weight", l), 0, 0, 0, 0, 1);
            check_view(&L->ffn_norm, T(fm, "model.layers.%u.pre_feedforward_layernorm.weight", l),
                       0, 0, 0, 0, 1);
            check_view(&L->post_ffn_norm,
                       T(fm, "model.layers.%u.post_feedforward_layernorm.weight", l), 0, 0, 0, 0,
                       1);
            ck_assert_uint_eq(L->window, l % 2 == 0 && p->window < p->ctx ? p->window : 0);
        } else {
            check_view(&L->ffn_norm, T(fm, "model.layers.%u.post_attention_layernorm.weight", l), 0,
                       0, 0, 0, 0);
            ck_assert_ptr_null(L->post_attn_norm.t);
            ck_assert_ptr_null(L->post_ffn_norm.t);
        }
        if (p->bias) {
            check_view(&L->bq, T(fm, "model.layers.%u.self_attn.q_proj.bias", l), 0, 1, hd, rd, 0);
            check_view(&L->bk, T(fm, "model.layers.%u.self_attn.k_proj.bias", l), 0, 1, hd, rd, 0);
            check_view(&L->bv, T(fm, "model.layers.%u.self_attn.v_proj.bias", l), 0, 0, 0, 0, 0);
        } else {
            ck_assert(!L->bq.t && !L->bk.t && !L->bv.t);
        }
        if (p->qk_norm) {
            check_view(&L->q_norm, T(fm, "model.layers.%u.self_attn.q_norm.weight", l), 0, 1, hd,
                       rd, 0);
            check_view(&L->k_norm, T(fm, "model.layers.%u.self_attn.k_norm.weight", l), 0, 1, hd,
                       rd, 0);
        } else {
            ck_assert(!L->q_norm.t && !L->k_norm.t);
        }
    }
}

static const char *const model_types[] = {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2"};
static const uint32_t model_archs[] = {LLAMA_ARCH_LLAMA, LLAMA_ARCH_LLAMA, LLAMA_ARCH_QWEN2,
                                       LLAMA_ARCH_QWEN3, LLAMA_ARCH_PHI3,  LLAMA_ARCH_GEMMA2};

START_TEST(test_views)
{
    for (int dt = HD_F32; dt <= HD_BF16; dt++)
        for (size_t a = 0; a < sizeof model_types / sizeof model_types[0]; a++) {
            struct hd_params p;
            hd_default(&p, model_types[a]);
            p.dtype = dt;
            struct hd_model fm;
            hd_init(&fm, &p, 1000 + a);
            char dir[4096];
            hd_mkdir(dir, sizeof dir, model_types[a]);
            hd_write_dir(&fm, dir);
            struct nib_loaded_model lm;
            load_dir(&lm, dir);
            ck_assert_uint_eq(lm.m.arch, model_archs[a]);
            ck_assert_uint_eq(lm.m.ffn_act, p.gemma ? LLAMA_ACT_GELU_TANH : LLAMA_ACT_SILU);
            ck_assert_uint_eq(lm.m.tok_embd.t->type, dt == HD_F32   ? GGML_TYPE_F32
                                                     : dt == HD_F16 ? GGML_TYPE_F16
                                                                    : GGML_TYPE_BF16);
            check_model(&lm.m, &fm);
            if (p.gemma) {
                ck_assert(lm.m.attn_scale == 0.25f);
                ck_assert(lm.m.attn_softcap == 2.5f && lm.m.final_softcap == 3.0f);
            } else {
                ck_assert(lm.m.attn_scale == (float)(1.0 / sqrt(p.head_dim)));
                ck_assert(lm.m.attn_softcap == 0 && lm.m.final_softcap == 0);
            }
            ck_assert_ptr_null(lm.m.rope_freq_factors);
            nib_model_unload(&lm);
            hd_rmdir(dir);
            hd_free(&fm);
        }
}
END_TEST

/* config.json semantics: windows, softcap nulls, llama3 factors, the
 * TinyStories-style tie (lm_head only), defaults. */
START_TEST(test_config)
{
    struct hf_config c;
    const char *base = "{\"model_type\": \"%s\", \"hidden_size\": 64, \"num_hidden_layers\": 4, "
                       "\"num_attention_heads\": 4, \"intermediate_size\": 96, \"vocab_size\": "
                       "100, \"max_position_embeddings\": 256%s}";
    char t[2048];
#define CFG(mt, extra)                                                                             \
    (snprintf(t, sizeof t, base, mt, extra), hf_config_parse(t, strlen(t), &c, err, sizeof err))
    ck_assert_msg(CFG("llama", "") == 0, "%s", err);
    ck_assert(c.arch == LLAMA_ARCH_LLAMA && c.n_kv_heads == 4 && c.head_dim == 16 &&
              c.rope_dim == 16);
    ck_assert(c.norm_eps == 1e-6f && c.rope_theta == 10000.0f && c.tie == -1);
    ck_assert(c.embed_scale == 1.0f && c.attn_scale == 0.25f && !c.rope_llama3);
    for (uint32_t l = 0; l < 4; l++)
        ck_assert_uint_eq(c.window[l], 0);
    /* mistral: every layer slides; a window the context never reaches is none */
    ck_assert(CFG("mistral", ", \"sliding_window\": 32") == 0);
    for (uint32_t l = 0; l < 4; l++)
        ck_assert_uint_eq(c.window[l], 32);
    ck_assert(CFG("mistral", ", \"sliding_window\": 4096") == 0 && c.window[0] == 0);
    ck_assert(CFG("mistral", ", \"sliding_window\": null") == 0 && c.window[0] == 0);
    /* qwen2: only with use_sliding_window, from max_window_layers on */
    ck_assert(CFG("qwen2", ", \"sliding_window\": 32, \"max_window_layers\": 2") == 0);
    ck_assert(c.window[3] == 0);
    ck_assert(CFG("qwen2", ", \"sliding_window\": 32, \"max_window_layers\": 2, "
                           "\"use_sliding_window\": true") == 0);
    ck_assert(c.window[0] == 0 && c.window[1] == 0 && c.window[2] == 32 && c.window[3] == 32);
    /* layer_types wins */
    ck_assert(CFG("qwen3", ", \"head_dim\": 16, \"num_key_value_heads\": 4, \"sliding_window\": "
                           "8, \"layer_types\": [\"sliding_attention\", "
                           "\"full_attention\", \"full_attention\", \"sliding_attention\"]") == 0);
    ck_assert(c.window[0] == 8 && c.window[1] == 0 && c.window[2] == 0 && c.window[3] == 8);
    /* gemma2: defaults as transformers has them, even layers slide */
    ck_assert_msg(CFG("gemma2", ", \"head_dim\": 32, \"num_key_value_heads\": 4, "
                                "\"sliding_window\": 16") == 0,
                  "%s", err);
    ck_assert(c.window[0] == 16 && c.window[1] == 0 && c.window[2] == 16 && c.window[3] == 0);
    ck_assert(c.attn_softcap == 50.0f && c.final_softcap == 30.0f);
    ck_assert(c.attn_scale == 1.0f / 16.0f); /* query_pre_attn_scalar 256 */
    ck_assert(c.embed_scale == 8.0f && c.norm_add_one && c.ffn_act == LLAMA_ACT_GELU_TANH);
    ck_assert(c.tie == 1); /* transformers' Gemma2 default: tied */
    ck_assert(CFG("gemma2", ", \"head_dim\": 16, \"num_key_value_heads\": 4, "
                            "\"attn_logit_softcapping\": null, \"final_logit_softcapping\": "
                            "null, \"query_pre_attn_scalar\": 144") == 0);
    ck_assert(c.attn_softcap == 0 && c.final_softcap == 0 && c.attn_scale == 1.0f / 12.0f);
    /* gemma2 and qwen3 head sizes and KV heads are class constants in
     * transformers, not hidden_size / heads: config.json must give them */
    ck_assert(CFG("gemma2", ", \"num_key_value_heads\": 4") != 0 && strstr(err, "head_dim"));
    ck_assert(CFG("qwen3", ", \"head_dim\": 16") != 0 && strstr(err, "num_key_value_heads"));
    /* phi3: partial rotary */
    ck_assert(CFG("phi3", ", \"partial_rotary_factor\": 0.75") == 0 && c.rope_dim == 12);
    /* rope_parameters (transformers 5) and theta inside it */
    ck_assert(CFG("llama", ", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": "
                           "500000.0}") == 0);
    ck_assert(c.rope_theta == 500000.0f && !c.rope_llama3);
    /* linear scaling: every frequency divided by the factor */
    ck_assert(CFG("llama", ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}") == 0);
    ck_assert(c.rs_linear == 2.0f && !c.rope_llama3);
    /* llama3 factors, as the converter computes them (here in double) */
    ck_assert(CFG("llama", ", \"rope_theta\": 500000.0, \"rope_scaling\": {\"factor\": 32.0, "
                           "\"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, "
                           "\"original_max_position_embeddings\": 8192, \"rope_type\": "
                           "\"llama3\"}") == 0);
    ck_assert(c.rope_llama3 && c.rs_factor == 32.0f && c.rs_orig_ctx == 8192);
    float f[8];
    hf_llama3_freq_factors(&c, f);
    int n1 = 0, nf = 0, nmid = 0;
    for (int i = 0; i < 8; i++) {
        double freq = 1.0 / pow(500000.0, 2.0 * i / 16), wl = 2 * M_PI / freq, want;
        if (wl < 8192 / 4.0)
            want = 1, n1++;
        else if (wl > 8192 / 1.0)
            want = 32, nf++;
        else {
            double s = (8192 / wl - 1) / 3;
            want = 1 / ((1 - s) / 32 + s);
            nmid++;
        }
        ck_assert_msg(fabs(f[i] - want) <= 1e-5 * want, "factor %d: %g vs %g", i, (double)f[i],
                      want);
    }
    ck_assert(n1 > 0 && nf > 0 && nmid > 0); /* all three branches taken */
#undef CFG
}
END_TEST

/* The published config.json of each model the issue names (their
 * architecture fields as released; tokenizer-only fields left out). */
START_TEST(test_real_configs)
{
    static const struct {
        const char *name, *json;
        uint32_t arch, dim, layers, heads, kv, head_dim, rope_dim, ffn, vocab, ctx;
        int tie, llama3;
        uint32_t window0, window1; /* layers 0 and 1 */
    } cfgs[] = {
        {"SmolLM2-135M",
         "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"bos_token_id\": "
         "0, \"eos_token_id\": 0, \"hidden_act\": \"silu\", \"hidden_size\": 576, "
         "\"initializer_range\": 0.041666666666666664, \"intermediate_size\": 1536, "
         "\"is_llama_config\": true, \"max_position_embeddings\": 8192, \"model_type\": \"llama\", "
         "\"num_attention_heads\": 9, \"num_hidden_layers\": 30, \"num_key_value_heads\": 3, "
         "\"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_interleaved\": false, "
         "\"rope_scaling\": null, \"rope_theta\": 100000, \"tie_word_embeddings\": true, "
         "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"vocab_size\": 49152}",
         LLAMA_ARCH_LLAMA, 576, 30, 9, 3, 64, 64, 1536, 49152, 8192, 1, 0, 0, 0},
        {"Qwen2.5-0.5B",
         "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, "
         "\"bos_token_id\": 151643, \"eos_token_id\": 151643, \"hidden_act\": \"silu\", "
         "\"hidden_size\": 896, \"initializer_range\": 0.02, \"intermediate_size\": 4864, "
         "\"max_position_embeddings\": 32768, \"max_window_layers\": 24, \"model_type\": "
         "\"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24, "
         "\"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, "
         "\"sliding_window\": 32768, \"tie_word_embeddings\": true, \"torch_dtype\": "
         "\"bfloat16\", \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": "
         "151936}",
         LLAMA_ARCH_QWEN2, 896, 24, 14, 2, 64, 64, 4864, 151936, 32768, 1, 0, 0, 0},
        {"Qwen3-0.6B",
         "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, "
         "\"attention_dropout\": 0.0, \"bos_token_id\": 151643, \"eos_token_id\": 151645, "
         "\"head_dim\": 128, \"hidden_act\": \"silu\", \"hidden_size\": 1024, "
         "\"initializer_range\": 0.02, \"intermediate_size\": 3072, \"max_position_embeddings\": "
         "40960, \"max_window_layers\": 28, \"model_type\": \"qwen3\", \"num_attention_heads\": "
         "16, \"num_hidden_layers\": 28, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, "
         "\"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": null, "
         "\"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"use_cache\": true, "
         "\"use_sliding_window\": false, \"vocab_size\": 151936}",
         LLAMA_ARCH_QWEN3, 1024, 28, 16, 8, 128, 128, 3072, 151936, 40960, 1, 0, 0, 0},
        {"Llama-3.2-1B",
         "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, "
         "\"attention_dropout\": 0.0, \"bos_token_id\": 128000, \"eos_token_id\": 128001, "
         "\"head_dim\": 64, \"hidden_act\": \"silu\", \"hidden_size\": 2048, "
         "\"initializer_range\": 0.02, \"intermediate_size\": 8192, \"max_position_embeddings\": "
         "131072, \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32, "
         "\"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, "
         "\"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, "
         "\"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": "
         "\"llama3\"}, \"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": "
         "\"bfloat16\", \"use_cache\": true, \"vocab_size\": 128256}",
         LLAMA_ARCH_LLAMA, 2048, 16, 32, 8, 64, 64, 8192, 128256, 131072, 1, 1, 0, 0},
        {"Phi-3-mini-4k-instruct",
         "{\"architectures\": [\"Phi3ForCausalLM\"], \"attention_bias\": false, "
         "\"attention_dropout\": 0.0, \"bos_token_id\": 1, \"embd_pdrop\": 0.0, \"eos_token_id\": "
         "32000, \"hidden_act\": \"silu\", \"hidden_size\": 3072, \"initializer_range\": 0.02, "
         "\"intermediate_size\": 8192, \"max_position_embeddings\": 4096, \"model_type\": "
         "\"phi3\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32, "
         "\"num_key_value_heads\": 32, \"original_max_position_embeddings\": 4096, "
         "\"pad_token_id\": 32000, \"resid_pdrop\": 0.0, \"rms_norm_eps\": 1e-05, "
         "\"rope_scaling\": null, \"rope_theta\": 10000.0, \"sliding_window\": 2047, "
         "\"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"use_cache\": true, "
         "\"vocab_size\": 32064}",
         LLAMA_ARCH_PHI3, 3072, 32, 32, 32, 96, 96, 8192, 32064, 4096, 0, 0, 2047, 2047},
        {"gemma-2-2b",
         "{\"architectures\": [\"Gemma2ForCausalLM\"], \"attention_bias\": false, "
         "\"attention_dropout\": 0.0, \"attn_logit_softcapping\": 50.0, \"bos_token_id\": 2, "
         "\"cache_implementation\": \"hybrid\", \"eos_token_id\": 1, "
         "\"final_logit_softcapping\": 30.0, \"head_dim\": 256, \"hidden_act\": "
         "\"gelu_pytorch_tanh\", \"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": "
         "2304, \"initializer_range\": 0.02, \"intermediate_size\": 9216, "
         "\"max_position_embeddings\": 8192, \"model_type\": \"gemma2\", "
         "\"num_attention_heads\": 8, \"num_hidden_layers\": 26, \"num_key_value_heads\": 4, "
         "\"pad_token_id\": 0, \"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06, "
         "\"rope_theta\": 10000.0, \"sliding_window\": 4096, \"torch_dtype\": \"float32\", "
         "\"use_cache\": true, \"vocab_size\": 256000}",
         LLAMA_ARCH_GEMMA2, 2304, 26, 8, 4, 256, 256, 9216, 256000, 8192, 1, 0, 4096, 0},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        struct hf_config c;
        ck_assert_msg(hf_config_parse(cfgs[i].json, strlen(cfgs[i].json), &c, err, sizeof err) == 0,
                      "%s: %s", cfgs[i].name, err);
        ck_assert_msg(c.arch == cfgs[i].arch && c.dim == cfgs[i].dim &&
                          c.n_layers == cfgs[i].layers && c.n_heads == cfgs[i].heads &&
                          c.n_kv_heads == cfgs[i].kv && c.head_dim == cfgs[i].head_dim &&
                          c.rope_dim == cfgs[i].rope_dim && c.ffn_dim == cfgs[i].ffn &&
                          c.vocab_size == cfgs[i].vocab && c.ctx_len == cfgs[i].ctx &&
                          c.tie == cfgs[i].tie && c.rope_llama3 == cfgs[i].llama3,
                      "%s: shape", cfgs[i].name);
        ck_assert_msg(c.window[0] == cfgs[i].window0 && c.window[1] == cfgs[i].window1,
                      "%s: windows %u %u", cfgs[i].name, c.window[0], c.window[1]);
    }
}
END_TEST

/* A checkpoint that stores its tied matrix as lm_head.weight only, with
 * tie_word_embeddings true (TinyStories-656K), and an untied one. */
START_TEST(test_tie)
{
    struct hd_params p;
    hd_default(&p, "llama");
    struct hd_model fm;
    hd_init(&fm, &p, 7);
    struct hd_tensor *e = hd_find(&fm, "model.embed_tokens.weight");
    snprintf(e->name, sizeof e->name, "lm_head.weight");
    char dir[4096];
    hd_mkdir(dir, sizeof dir, "tie");
    hd_write_dir(&fm, dir);
    struct nib_loaded_model lm;
    load_dir(&lm, dir);
    ck_assert(lm.m.output_tied && lm.m.output.t == lm.m.tok_embd.t);
    ck_assert(lm.m.tok_embd.t->name.len == 14 && !memcmp(lm.m.tok_embd.t->name.ptr, "lm_head", 7));
    nib_model_unload(&lm);
    /* tie false without lm_head is refused naming both */
    snprintf(e->name, sizeof e->name, "model.embed_tokens.weight");
    fm.p.tie = 0;
    hd_write_dir(&fm, dir);
    expect_refused(dir, "missing tensor 'lm_head.weight' (config.json tie_word_embeddings is "
                        "false)");
    hd_rmdir(dir);
    hd_free(&fm);
}
END_TEST

/* The same model in one file and in three shards with an index: the same
 * tensors, the same views. */
START_TEST(test_sharded)
{
    struct hd_params p;
    hd_default(&p, "qwen2");
    struct hd_model fm;
    hd_init(&fm, &p, 11);
    for (uint32_t i = 0; i < fm.n; i++)
        fm.t[i].shard = (int)(i % 3);
    char dir[4096], path[4200];
    hd_mkdir(dir, sizeof dir, "sharded");
    hd_write_config(&fm, dir);
    hd_write_tokenizer(dir, p.n_tok);
    char *idx = malloc(1 << 16);
    size_t at =
        (size_t)snprintf(idx, 1 << 16, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
    for (uint32_t i = 0; i < fm.n; i++)
        at += (size_t)snprintf(idx + at, (1 << 16) - at,
                               "%s\"%s\": \"model-%05d-of-00003.safetensors\"", i ? ", " : "",
                               fm.t[i].name, fm.t[i].shard + 1);
    snprintf(idx + at, (1 << 16) - at, "}}\n");
    hd_write_text(dir, "model.safetensors.index.json", idx);
    for (int s = 0; s < 3; s++) {
        snprintf(path, sizeof path, "%s/model-%05d-of-00003.safetensors", dir, s + 1);
        hd_write_st(&fm, path, s);
    }
    struct nib_loaded_model lm;
    load_dir(&lm, dir);
    check_model(&lm.m, &fm);
    nib_model_unload(&lm);

    /* a shard missing: its file named */
    snprintf(path, sizeof path, "%s/model-00002-of-00003.safetensors", dir);
    unlink(path);
    expect_refused(dir, "model-00002-of-00003.safetensors");
    /* a tensor in two shards */
    hd_write_st(&fm, path, 1);
    struct hd_tensor *q0 = hd_find(&fm, "model.layers.0.self_attn.q_proj.weight");
    int was = q0->shard;
    q0->shard = (was + 1) % 3;
    snprintf(path, sizeof path, "%s/model-%05d-of-00003.safetensors", dir, q0->shard + 1);
    hd_write_st(&fm, path, q0->shard);
    q0->shard = was;
    expect_refused(dir, "tensor 'model.layers.0.self_attn.q_proj.weight' is also in");
    hd_write_st(&fm, path, (was + 1) % 3);
    /* the index names a file for a tensor that is not in it */
    char *bad = strdup(idx);
    char *hit = strstr(bad, "\"model.norm.weight\": \"model-0000");
    ck_assert_ptr_nonnull(hit);
    char *digit = hit + strlen("\"model.norm.weight\": \"model-0000");
    *digit = *digit == '1' ? '2' : '1';
    hd_write_text(dir, "model.safetensors.index.json", bad);
    expect_refused(dir, "tensor 'model.norm.weight' is not in model-0000");
    /* file names that leave the directory, and a malformed index */
    hd_write_text(dir, "model.safetensors.index.json",
                  "{\"weight_map\": {\"model.norm.weight\": \"../model.safetensors\"}}");
    expect_refused(dir, "weight_map.model.norm.weight must name a file in the directory");
    hd_write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {}}");
    expect_refused(dir, "weight_map must be a non-empty object");
    hd_write_text(dir, "model.safetensors.index.json", "{\"weight_map\": [}");
    expect_refused(dir, "model.safetensors.index.json: line 1");
    /* a damaged shard names itself */
    hd_write_text(dir, "model.safetensors.index.json", idx);
    hd_write_text(dir, "model-00003-of-00003.safetensors", "12345678{}");
    expect_refused(dir, "model-00003-of-00003.safetensors: header length");
    free(bad);
    free(idx);
    hd_rmdir(dir);
    hd_free(&fm);
}
END_TEST

/* Write fm's directory with one change and expect a refusal naming it. */
static void refuse_with(struct hd_model *fm, const char *dir, const char *extra, const char *phrase)
{
    fm->p.extra = extra;
    hd_write_dir(fm, dir);
    expect_refused(dir, phrase);
    fm->p.extra = NULL;
}

START_TEST(test_refusals)
{
    struct hd_params p;
    hd_default(&p, "llama");
    struct hd_model fm;
    hd_init(&fm, &p, 3);
    char dir[4096], path[4200];
    hd_mkdir(dir, sizeof dir, "refusals");

    /* missing files name the file */
    expect_refused(dir, "/config.json");
    hd_write_config(&fm, dir);
    expect_refused(dir, "missing model.safetensors (or model.safetensors.index.json");
    hd_write_text(dir, "pytorch_model.bin", "x");
    expect_refused(dir, "pytorch_model.bin is not read");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    hd_write_st(&fm, path, -1);
    expect_refused(dir, "/tokenizer.json");
    hd_write_dir(&fm, dir);
    struct nib_loaded_model lm;
    load_dir(&lm, dir);
    nib_model_unload(&lm);

    /* config.json: model_type, fields, values */
    hd_write_text(dir, "config.json", "{\"model_type\": \"gpt2\"}");
    expect_refused(dir, "config.json: model_type 'gpt2' is not supported (nibble reads llama, "
                        "mistral, qwen2, qwen3, phi3, gemma2)");
    hd_write_text(dir, "config.json", "{\"hidden_size\": 8}");
    expect_refused(dir, "config.json: model_type is missing (nibble reads llama");
    hd_write_text(dir, "config.json", "[]");
    expect_refused(dir, "config.json: is array, not an object");
    hd_write_text(dir, "config.json", "{\"model_type\": \"llama\",}");
    expect_refused(dir, "config.json: line 1");
    hd_write_text(dir, "config.json", "{\"model_type\": \"llama\", \"hidden_size\": 8}");
    expect_refused(dir, "config.json: num_hidden_layers is missing");
    refuse_with(&fm, dir, "\"quantization_config\": {\"bits\": 4}", "quantization_config");
    refuse_with(&fm, dir, "\"num_local_experts\": 8", "num_local_experts: mixture-of-experts");
    refuse_with(&fm, dir, "\"mlp_bias\": true", "mlp_bias");
    refuse_with(&fm, dir, "\"hidden_act\": \"gelu\"",
                "hidden_act 'gelu' is not supported (nibble reads silu)");
    refuse_with(&fm, dir, "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}",
                "rope_scaling.rope_type 'yarn' is not supported (nibble reads default, linear, "
                "llama3)");
    refuse_with(&fm, dir, "\"rope_scaling\": {\"rope_type\": \"longrope\"}",
                "rope_type 'longrope' is not supported");
    refuse_with(&fm, dir, "\"rope_scaling\": {\"type\": \"linear\"}",
                "rope_scaling.factor is missing");
    refuse_with(&fm, dir, "\"rope_scaling\": 3", "rope_scaling is number, expected an object");
    refuse_with(&fm, dir,
                "\"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 4, "
                "\"high_freq_factor\": 4}",
                "high_freq_factor 4 must be larger than low_freq_factor 4");
    refuse_with(&fm, dir, "\"partial_rotary_factor\": 0.1", "partial_rotary_factor");
    refuse_with(&fm, dir, "\"layer_types\": [\"full_attention\"]", "layer_types must be an array");
    refuse_with(&fm, dir, "\"layer_types\": [\"full_attention\", \"chunked_attention\"]",
                "layer_types[1] is not supported");

    /* numbers */
    const struct {
        const char *json, *phrase;
    } bad[] = {
        {"\"hidden_size\": 0", "hidden_size 0 is out of range"},
        {"\"hidden_size\": 65537", "hidden_size 65537 is out of range"},
        {"\"hidden_size\": 32.5", "hidden_size is not an integer, expected an integer"},
        {"\"hidden_size\": \"32\"", "hidden_size is string, expected an integer"},
        {"\"num_hidden_layers\": 513", "num_hidden_layers 513 is out of range"},
        {"\"num_key_value_heads\": 3", "not a multiple of num_key_value_heads 3"},
        {"\"head_dim\": 7", "head_dim 7 is odd"},
        {"\"vocab_size\": 0", "vocab_size 0 is out of range"},
        {"\"max_position_embeddings\": -1", "max_position_embeddings -1 is out of range"},
        {"\"rms_norm_eps\": 0", "rms_norm_eps 0 must be positive"},
        {"\"rms_norm_eps\": -1e-5", "rms_norm_eps -1e-05 must be positive"},
        {"\"rope_theta\": 1e300", "rope_theta 1e+300 must be positive and finite"},
        {"\"tie_word_embeddings\": 1", "tie_word_embeddings is number, expected true or false"},
        {"\"model_type\": 3", "model_type is number, expected a string"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* a duplicate key would be refused by the JSON parser: rewrite the whole config */
        char c[2048];
        const char *key_end = strchr(bad[i].json + 1, '"');
        size_t klen = (size_t)(key_end - bad[i].json - 1);
        snprintf(c, sizeof c,
                 "{\"model_type\": \"llama\", \"hidden_size\": 32, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8, "
                 "\"intermediate_size\": 64, \"vocab_size\": 64, \"max_position_embeddings\": "
                 "64, \"rms_norm_eps\": 1e-5, \"rope_theta\": 10000.0, \"tie_word_embeddings\": "
                 "true}");
        /* drop the member being replaced, then append the bad one */
        char key[64];
        snprintf(key, sizeof key, "\"%.*s\": ", (int)klen, bad[i].json + 1);
        char *k = strstr(c, key);
        ck_assert_ptr_nonnull(k);
        char *end = strpbrk(k + strlen(key), ",}");
        if (*end == ',')
            memmove(k, end + 2, strlen(end + 2) + 1);
        else { /* the last member: drop the comma before it */
            k[-2] = '}';
            k[-1] = 0;
        }
        size_t n = strlen(c);
        snprintf(c + n - 1, sizeof c - n + 1, ", %s}", bad[i].json);
        hd_write_text(dir, "config.json", c);
        expect_refused(dir, bad[i].phrase);
    }

    /* tensors: missing, shapes against config.json, dtypes, unsupported biases */
    hd_write_dir(&fm, dir);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct hd_tensor *wk = hd_find(&fm, "model.layers.1.mlp.up_proj.weight");
    char keep[96];
    memcpy(keep, wk->name, sizeof keep);
    snprintf(wk->name, sizeof wk->name, "model.layers.1.mlp.upproj.weight");
    hd_write_st(&fm, path, -1);
    expect_refused(dir, "missing tensor 'model.layers.1.mlp.up_proj.weight'");
    memcpy(wk->name, keep, sizeof keep);
    wk->shape[0] = 32, wk->shape[1] = 64; /* transposed */
    hd_write_st(&fm, path, -1);
    expect_refused(dir, "tensor 'model.layers.1.mlp.up_proj.weight' has shape [32, 64]; "
                        "config.json makes it [64, 32]");
    wk->shape[0] = 64, wk->shape[1] = 32;
    struct hd_tensor *nw = hd_find(&fm, "model.norm.weight");
    nw->nd = 2, nw->shape[0] = 1, nw->shape[1] = 32;
    hd_write_st(&fm, path, -1);
    expect_refused(dir, "tensor 'model.norm.weight' has shape [1, 32]; config.json makes it [32]");
    nw->nd = 1, nw->shape[0] = 32;
    hd_add(&fm, "model.layers.0.self_attn.o_proj.bias", HD_F32, 0, 32, 0);
    hd_write_st(&fm, path, -1);
    expect_refused(dir, "tensor 'model.layers.0.self_attn.o_proj.bias' is not supported");
    hd_del(&fm, "model.layers.0.self_attn.o_proj.bias");
    hd_add(&fm, "model.layers.1.self_attn.q_proj.bias", HD_F32, 0, 32, 0);
    hd_write_st(&fm, path, -1);
    expect_refused(dir, "layer 1 has some of the q/k/v_proj biases but not all three");
    hd_del(&fm, "model.layers.1.self_attn.q_proj.bias");
    /* tensors of another architecture, or past num_hidden_layers: refused,
     * not dropped; RoPE inverse frequencies are computed, so ignored */
    static const char *const foreign[] = {"model.layers.0.self_attn.q_norm.weight",
                                          "model.layers.1.post_feedforward_layernorm.weight",
                                          "model.norm.bias",
                                          "model.layers.9.input_layernorm.weight"};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        char want[160];
        hd_add(&fm, foreign[i], HD_F32, 0, 32, 0);
        hd_write_st(&fm, path, -1);
        snprintf(want, sizeof want, "tensor '%s' has no place in a llama model", foreign[i]);
        expect_refused(dir, want);
        hd_del(&fm, foreign[i]);
    }
    hd_add(&fm, "model.layers.0.self_attn.rotary_emb.inv_freq", HD_F32, 0, 8, 0);
    hd_write_st(&fm, path, -1);
    struct nib_loaded_model ok;
    load_dir(&ok, dir);
    nib_model_unload(&ok);
    hd_del(&fm, "model.layers.0.self_attn.rotary_emb.inv_freq");
    /* an I64 tensor in the file: refused by name */
    {
        hd_write_st(&fm, path, -1);
        FILE *fp = fopen(path, "r+b");
        uint8_t len[8];
        ck_assert_uint_eq(fread(len, 1, 8, fp), 8);
        char *h = malloc(65536);
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--)
            hl = hl << 8 | len[i];
        ck_assert_uint_eq(fread(h, 1, hl, fp), hl);
        char *d = strstr(h, "\"F32\"");
        memcpy(d, "\"I32\"", 5);
        fseek(fp, 8, SEEK_SET);
        fwrite(h, 1, hl, fp);
        fclose(fp);
        free(h);
        expect_refused(dir, "model.safetensors: tensor 'model.embed_tokens.weight': dtype I32 is "
                            "not supported");
    }
    /* a tokenizer larger than the embedding */
    {
        struct hd_params p63 = p;
        p63.vocab = 63, p63.n_tok = 63;
        struct hd_model f63;
        hd_init(&f63, &p63, 5);
        hd_write_dir(&f63, dir);
        hd_write_tokenizer(dir, 64);
        expect_refused(dir, "tokenizer.json has 64 tokens, more than config.json vocab_size 63");
        hd_free(&f63);
    }
    /* a qwen2 directory without its biases */
    fm.p.model_type = "qwen2";
    hd_write_dir(&fm, dir);
    expect_refused(dir, "missing tensor 'model.layers.0.self_attn.q_proj.bias'");
    /* gemma2: activation */
    fm.p.model_type = "gemma2";
    refuse_with(&fm, dir, "\"hidden_activation\": \"gelu\"",
                "hidden_activation 'gelu' is not supported (nibble reads gelu_pytorch_tanh");
    hd_rmdir(dir);
    hd_free(&fm);
}
END_TEST

/* The logits of each compiled model type against the float64 reference. */
START_TEST(test_logits)
{
    static const char *const types[] = {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2"};
    for (size_t a = 0; a < sizeof types / sizeof types[0]; a++) {
        struct hd_params p;
        hd_default(&p, types[a]);
        if (!strcmp(types[a], "mistral"))
            p.window = 5;       /* every layer slides */
        p.dtype = (int)(a % 3); /* F32, F16 and BF16 sources in turn */
        struct hd_model fm;
        hd_init(&fm, &p, 500 + a);
        char dir[4096];
        hd_mkdir(dir, sizeof dir, types[a]);
        hd_write_dir(&fm, dir);
        struct nib_loaded_model lm;
        load_dir(&lm, dir);
        struct ref_cfg rc = hd_ref_cfg(&p);
        struct ref64 r;
        ck_assert_int_eq(ref_open(&r, &rc, dir, p.ctx), 0);
        uint32_t ids[16];
        for (uint32_t i = 0; i < 16; i++)
            ids[i] = (i * 7 + 1) % p.vocab;
        double d = compare_logits(&lm.m, &r, ids, 16, NULL);
        ck_assert_msg(d < 1e-5, "%s: logits differ from the float64 reference by %g", types[a], d);
        fprintf(stderr, "%s: f32 logits within %.3g of the float64 reference's largest\n", types[a],
                d);
        ref_close(&r);
        /* the comparison is sharp: a reference without one feature differs */
        for (int f = 0; f < 4; f++) {
            struct ref_cfg v = rc;
            if (f == 0 && rc.window)
                v.window = 0;
            else if (f == 1 && rc.attn_softcap > 0)
                v.attn_softcap = 0;
            else if (f == 2 && rc.final_softcap > 0)
                v.final_softcap = 0;
            else if (f == 3)
                v.rope_dim = rc.rope_dim - 2; /* the wrong rotary pairs */
            else
                continue;
            ck_assert_int_eq(ref_open(&r, &v, dir, p.ctx), 0);
            double dv = compare_logits(&lm.m, &r, ids, 16, NULL);
            ck_assert_msg(dv > 1e-4, "%s: feature %d changes the logits by only %g", types[a], f,
                          dv);
            ref_close(&r);
        }
        nib_model_unload(&lm);
        hd_rmdir(dir);
        hd_free(&fm);
    }
}
END_TEST

/* ---- the same weights as a GGUF with llama.cpp's Q/K permutation ---- */

struct perm_src {
    const struct hd_tensor *t;
    uint32_t heads; /* permute rows in heads (0: copy) */
    float *buf;
};

/* llama.cpp's convert_hf_to_gguf permute: rows of each head reshaped
 * (2, hd/2) -> (hd/2, 2). */
static float *permuted(const struct hd_tensor *t, uint32_t heads)
{
    uint64_t rows = t->shape[0], cols = t->shape[1], hd = rows / heads;
    float *o = malloc(t->n * sizeof *o);
    for (uint64_t h = 0; h < heads; h++)
        for (uint64_t i = 0; i < hd / 2; i++)
            for (uint64_t two = 0; two < 2; two++)
                memcpy(o + (h * hd + i * 2 + two) * cols, t->v + (h * hd + two * hd / 2 + i) * cols,
                       cols * sizeof *o);
    return o;
}

/* The fixture written as llama.cpp's converter writes it: GGUF names and
 * keys of its architecture, llama's Q/K rows permuted, Gemma norms + 1
 * (the GGUF importer reads them as they are). */
static void write_gguf(struct hd_model *fm, const char *path)
{
    const struct hd_params *p = &fm->p;
    const char *arch = !strcmp(p->model_type, "mistral") ? "llama" : p->model_type;
    int is_llama = !strcmp(arch, "llama");
    char k[128];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
    struct gguf_writer *w = gguf_writer_new(3, 32);
    gguf_w_str(w, "general.architecture", arch);
    gguf_w_u32(w, KEY("embedding_length"), p->dim);
    gguf_w_u32(w, KEY("block_count"), p->n_layers);
    gguf_w_u32(w, KEY("feed_forward_length"), p->ffn);
    gguf_w_u32(w, KEY("attention.head_count"), p->n_heads);
    gguf_w_u32(w, KEY("attention.head_count_kv"), p->n_kv_heads);
    gguf_w_u32(w, KEY("attention.key_length"), p->head_dim);
    gguf_w_u32(w, KEY("attention.value_length"), p->head_dim);
    gguf_w_u32(w, KEY("context_length"), p->ctx);
    gguf_w_u32(w, KEY("rope.dimension_count"),
               p->partial > 0 ? (uint32_t)(p->head_dim * p->partial) : p->head_dim);
    gguf_w_f32(w, KEY("rope.freq_base"), p->theta);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), p->eps);
    if (p->gemma) {
        gguf_w_f32(w, KEY("attn_logit_softcapping"), 2.5f);
        gguf_w_f32(w, KEY("final_logit_softcapping"), 3.0f);
        gguf_w_u32(w, KEY("attention.sliding_window"), p->window);
    }
#undef KEY
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    const char *toks[64];
    static char tbuf[64][16];
    float scores[64];
    int32_t types[64];
    ck_assert_uint_le(p->vocab, 64);
    for (uint32_t i = 0; i < p->vocab; i++) {
        snprintf(tbuf[i], sizeof tbuf[i], "t%u", i);
        toks[i] = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : tbuf[i];
        scores[i] = -(float)i;
        types[i] = i < 3 ? (i == 0 ? 2 : 3) : 1;
    }
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, p->vocab);
    gguf_w_arr_f32(w, "tokenizer.ggml.scores", scores, p->vocab);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, p->vocab);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 2);
    static const struct {
        const char *hf, *gguf;
        int perm; /* llama: 1 q (n_heads), 2 k (n_kv_heads) */
    } names[] = {
        {"model.embed_tokens.weight", "token_embd.weight", 0},
        {"lm_head.weight", "output.weight", 0},
        {"model.norm.weight", "output_norm.weight", 0},
        {"model.layers.%u.input_layernorm.weight", "blk.%u.attn_norm.weight", 0},
        {"model.layers.%u.self_attn.q_proj.weight", "blk.%u.attn_q.weight", 1},
        {"model.layers.%u.self_attn.k_proj.weight", "blk.%u.attn_k.weight", 2},
        {"model.layers.%u.self_attn.v_proj.weight", "blk.%u.attn_v.weight", 0},
        {"model.layers.%u.self_attn.q_proj.bias", "blk.%u.attn_q.bias", 0},
        {"model.layers.%u.self_attn.k_proj.bias", "blk.%u.attn_k.bias", 0},
        {"model.layers.%u.self_attn.v_proj.bias", "blk.%u.attn_v.bias", 0},
        {"model.layers.%u.self_attn.q_norm.weight", "blk.%u.attn_q_norm.weight", 0},
        {"model.layers.%u.self_attn.k_norm.weight", "blk.%u.attn_k_norm.weight", 0},
        {"model.layers.%u.self_attn.qkv_proj.weight", "blk.%u.attn_qkv.weight", 0},
        {"model.layers.%u.self_attn.o_proj.weight", "blk.%u.attn_output.weight", 0},
        {"model.layers.%u.mlp.gate_proj.weight", "blk.%u.ffn_gate.weight", 0},
        {"model.layers.%u.mlp.up_proj.weight", "blk.%u.ffn_up.weight", 0},
        {"model.layers.%u.mlp.gate_up_proj.weight", "blk.%u.ffn_up.weight", 0},
        {"model.layers.%u.mlp.down_proj.weight", "blk.%u.ffn_down.weight", 0},
    };
    static const char *const gemma_norms[][2] = {
        {"model.layers.%u.post_attention_layernorm.weight", "blk.%u.post_attention_norm.weight"},
        {"model.layers.%u.pre_feedforward_layernorm.weight", "blk.%u.ffn_norm.weight"},
        {"model.layers.%u.post_feedforward_layernorm.weight", "blk.%u.post_ffw_norm.weight"},
    };
    static char gn[512][64];
    static float *bufs[512];
    uint32_t ngn = 0;
    for (uint32_t l = 0; l < p->n_layers + 1; l++) { /* l == n_layers: the global tensors */
        for (size_t i = 0; i < sizeof names / sizeof names[0] + 3; i++) {
            const char *hf, *gg;
            int perm = 0;
            if (i < sizeof names / sizeof names[0]) {
                hf = names[i].hf, gg = names[i].gguf, perm = is_llama ? names[i].perm : 0;
            } else {
                hf = gemma_norms[i - sizeof names / sizeof names[0]][0];
                gg = gemma_norms[i - sizeof names / sizeof names[0]][1];
            }
            if ((strstr(hf, "%u") != NULL) != (l < p->n_layers))
                continue;
            if (!p->gemma && !strcmp(gg, "blk.%u.ffn_norm.weight"))
                hf = "model.layers.%u.post_attention_layernorm.weight";
            else if (!p->gemma && strstr(gg, "post_"))
                continue;
            char hn[128];
            snprintf(hn, sizeof hn, hf, l);
            const struct hd_tensor *t = hd_find(fm, hn);
            if (!t)
                continue;
            ck_assert_uint_lt(ngn, 512);
            float *data = malloc(t->n * sizeof *data);
            if (perm) {
                float *q = permuted(t, perm == 1 ? p->n_heads : p->n_kv_heads);
                memcpy(data, q, t->n * sizeof *data);
                free(q);
            } else {
                memcpy(data, t->v, t->n * sizeof *data);
            }
            if (p->gemma && strstr(hn, "norm.weight"))
                for (uint64_t e = 0; e < t->n; e++)
                    data[e] += 1.0f; /* exact: k/64 + 1 */
            bufs[ngn] = data;
            snprintf(gn[ngn], sizeof gn[ngn], gg, l);
            uint64_t ne[2] = {t->nd == 2 ? t->shape[1] : t->shape[0], t->shape[0]};
            gguf_w_tensor_data(w, gn[ngn], GGML_TYPE_F32, t->nd, ne, data);
            ngn++;
        }
    }
    FILE *fp = fopen(path, "wb");
    ck_assert_msg(gguf_writer_write(w, fp, err, sizeof err) == 0, "%s", err);
    fclose(fp);
    gguf_writer_free(w);
    for (uint32_t i = 0; i < ngn; i++)
        free(bufs[i]);
}

/* Logits of two models over the same ids: bit-identical (1) or not (0). */
static int same_logits(const struct llama_model *a, const struct llama_model *b, uint32_t vocab,
                       uint32_t n)
{
    struct plan_opts po = {0};
    ck_assert_int_eq(nib_plan_opts_quant(&po, "f32", err, sizeof err), 0);
    struct runner ra, rb;
    ck_assert_msg(runner_open(&ra, a, &po, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(runner_open(&rb, b, &po, err, sizeof err) == 0, "%s", err);
    int same = 1;
    for (uint32_t pos = 0; pos < n; pos++) {
        uint32_t id = (pos * 5 + 3) % vocab;
        const float *la = nib_exec_token(&ra.e, id, pos), *lb = nib_exec_token(&rb.e, id, pos);
        ck_assert(la && lb);
        same &= !memcmp(la, lb, vocab * sizeof(float));
    }
    runner_close(&ra);
    runner_close(&rb);
    return same;
}

/* Every model_type: the directory and the GGUF llama.cpp's converter would
 * write from it compile to bit-identical f32 logits (the HF importer gives
 * each architecture the GGUF importer's semantics). */
START_TEST(test_same_as_gguf)
{
    for (size_t a = 0; a < sizeof model_types / sizeof model_types[0]; a++) {
        struct hd_params p;
        hd_default(&p, model_types[a]);
        struct hd_model fm;
        hd_init(&fm, &p, 300 + a);
        char dir[4096], path[4200];
        hd_mkdir(dir, sizeof dir, model_types[a]);
        hd_write_dir(&fm, dir);
        snprintf(path, sizeof path, "%s.gguf", dir);
        write_gguf(&fm, path);
        struct nib_loaded_model x, y;
        load_dir(&x, dir);
        ck_assert_msg(nib_model_load(&y, path, err, sizeof err) == 0, "%s: %s", model_types[a],
                      err);
        ck_assert_uint_eq(x.m.arch, y.m.arch);
        ck_assert(x.m.attn_scale == y.m.attn_scale && x.m.embed_scale == y.m.embed_scale);
        ck_assert(x.m.attn_softcap == y.m.attn_softcap && x.m.final_softcap == y.m.final_softcap);
        ck_assert_uint_eq(x.m.hp.rope_dim, y.m.hp.rope_dim);
        for (uint32_t l = 0; l < p.n_layers; l++)
            ck_assert_uint_eq(x.m.layers[l].window, y.m.layers[l].window);
        ck_assert_msg(same_logits(&x.m, &y.m, p.vocab, 24), "%s: logits differ from the GGUF's",
                      model_types[a]);
        nib_model_unload(&x);
        nib_model_unload(&y);
        unlink(path);
        hd_rmdir(dir);
        hd_free(&fm);
    }
}
END_TEST

START_TEST(test_permutation_vs_gguf)
{
    struct hd_params p;
    hd_default(&p, "llama");
    p.n_tok = p.vocab; /* the GGUF vocabulary has every row */
    struct hd_model fm;
    hd_init(&fm, &p, 77);
    char dir[4096], path[4200];
    hd_mkdir(dir, sizeof dir, "perm");
    hd_write_dir(&fm, dir);
    snprintf(path, sizeof path, "%s.gguf", dir);
    write_gguf(&fm, path);

    struct nib_loaded_model a, b;
    load_dir(&a, dir);
    ck_assert_msg(nib_model_load(&b, path, err, sizeof err) == 0, "%s", err);
    /* the views read the same rows as the permuted GGUF's plain matrices */
    float ra[64], rb[64];
    for (uint32_t l = 0; l < p.n_layers; l++) {
        const struct llama_weight *wa[] = {&a.m.layers[l].wq, &a.m.layers[l].wk},
                                  *wb[] = {&b.m.layers[l].wq, &b.m.layers[l].wk};
        for (int k = 0; k < 2; k++)
            for (uint32_t r = 0; r < wa[k]->rows; r++) {
                ck_assert_int_eq(llama_weight_row_f32(wa[k], r, ra), 0);
                ck_assert_int_eq(llama_weight_row_f32(wb[k], r, rb), 0);
                ck_assert(!memcmp(ra, rb, p.dim * sizeof(float)));
            }
    }
    /* and the compiled models give bit-identical logits */
    struct plan_opts po = {0};
    ck_assert_int_eq(nib_plan_opts_quant(&po, "f32", err, sizeof err), 0);
    struct runner ra_, rb_;
    ck_assert_msg(runner_open(&ra_, &a.m, &po, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(runner_open(&rb_, &b.m, &po, err, sizeof err) == 0, "%s", err);
    for (uint32_t pos = 0; pos < 24; pos++) {
        uint32_t id = (pos * 5 + 3) % p.vocab;
        const float *la = nib_exec_token(&ra_.e, id, pos), *lb = nib_exec_token(&rb_.e, id, pos);
        ck_assert(la && lb);
        ck_assert_msg(!memcmp(la, lb, p.vocab * sizeof(float)), "logits differ at %u", pos);
    }
    /* without the reorder they would not: the test can fail */
    a.m.layers[0].wq.neox_head = 0;
    a.m.layers[0].wk.neox_head = 0;
    struct runner rc_;
    ck_assert_msg(runner_open(&rc_, &a.m, &po, err, sizeof err) == 0, "%s", err);
    int differ = 0;
    for (uint32_t pos = 0; pos < 24; pos++) {
        uint32_t id = (pos * 5 + 3) % p.vocab;
        const float *la = nib_exec_token(&rc_.e, id, pos), *lb = nib_exec_token(&rb_.e, id, pos);
        differ |= memcmp(la, lb, p.vocab * sizeof(float)) != 0;
    }
    ck_assert(differ);
    runner_close(&rc_);
    runner_close(&ra_);
    runner_close(&rb_);
    nib_model_unload(&a);
    nib_model_unload(&b);
    unlink(path);
    hd_rmdir(dir);
    hd_free(&fm);
}
END_TEST

/* llama3 RoPE scaling reaches the model and the runtime. */
START_TEST(test_llama3_rope)
{
    struct hd_params p;
    hd_default(&p, "llama");
    p.theta = 500000.0f;
    p.head_dim = 16, p.n_heads = 2, p.n_kv_heads = 1;
    p.extra = "\"rope_scaling\": {\"factor\": 8.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": "
              "1.0, \"original_max_position_embeddings\": 64, \"rope_type\": \"llama3\"}";
    struct hd_model fm;
    hd_init(&fm, &p, 99);
    char dir[4096];
    hd_mkdir(dir, sizeof dir, "llama3");
    hd_write_dir(&fm, dir);
    struct nib_loaded_model lm;
    load_dir(&lm, dir);
    ck_assert_ptr_nonnull(lm.m.rope_freq_factors);
    float f[8];
    struct hf_config c;
    memset(&c, 0, sizeof c);
    c.rope_theta = p.theta, c.head_dim = 16, c.rope_dim = 16, c.rs_factor = 8;
    c.rs_low_freq = 1, c.rs_high_freq = 4, c.rs_orig_ctx = 64;
    hf_llama3_freq_factors(&c, f);
    ck_assert(!memcmp(f, lm.m.rope_freq_factors, sizeof f));
    ck_assert(f[0] == 1.0f && f[7] == 8.0f);
    struct ref_cfg rc = hd_ref_cfg(&p);
    rc.freq_factors = f;
    struct ref64 r;
    ck_assert_int_eq(ref_open(&r, &rc, dir, p.ctx), 0);
    uint32_t ids[40];
    for (uint32_t i = 0; i < 40; i++)
        ids[i] = (i * 11 + 2) % p.vocab;
    double d = compare_logits(&lm.m, &r, ids, 40, NULL);
    ck_assert_msg(d < 1e-5, "llama3 RoPE: logits differ from the reference by %g", d);
    ref_close(&r);
    nib_model_unload(&lm);
    hd_rmdir(dir);
    hd_free(&fm);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("hf_import");
    TU_CASE(s, "import", NULL, NULL, 300, test_views, test_config, test_real_configs, test_tie,
            test_sharded, test_refusals);
    TU_CASE(s, "run", NULL, NULL, 300, test_logits, test_permutation_vs_gguf, test_same_as_gguf,
            test_llama3_rope);
    return s;
}

#else /* HF_REAL: TinyStories-656K from ../shared/models */

static char models[4096];

static const char *models_dir(void)
{
    const char *shared = getenv("NIB_SHARED_DIR");
    struct stat st;
    if (shared && *shared)
        snprintf(models, sizeof models, "%s/models", shared);
    else
        snprintf(models, sizeof models, "%s/../shared/models", NIB_SOURCE_ROOT);
    char probe[4300];
    snprintf(probe, sizeof probe, "%s/TinyStories-656K/model.safetensors", models);
    if (stat(probe, &st) != 0)
        return NULL;
    snprintf(probe, sizeof probe, "%s/TinyStories-656K.reference.json", models);
    return stat(probe, &st) == 0 ? models : NULL;
}

static struct json_doc *read_reference(void)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/TinyStories-656K.reference.json", models);
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    struct json_doc *d;
    ck_assert_msg(json_parse((const char *)b, n, NULL, &d, err, sizeof err) == 0, "%s", err);
    free(b);
    return d;
}

static uint32_t ids_of(const struct json_value *arr, uint32_t *out, uint32_t cap)
{
    ck_assert(json_is(arr, JSON_ARRAY) && arr->n <= cap);
    for (uint32_t i = 0; i < arr->n; i++) {
        ck_assert(arr->items[i].is_int);
        out[i] = (uint32_t)arr->items[i].i;
    }
    return arr->n;
}

/* The directory imports as the published shapes, and its weights equal
 * the Q8_0 GGUF's within the Q8_0 step. */
START_TEST(test_tinystories_import)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/TinyStories-656K", models);
    struct nib_loaded_model lm;
    ck_assert_msg(nib_model_load(&lm, dir, err, sizeof err) == 0, "%s", err);
    const struct nib_hparams *hp = &lm.m.hp;
    ck_assert(hp->dim == 128 && hp->n_layers == 2 && hp->n_heads == 8 && hp->n_kv_heads == 4);
    ck_assert(hp->head_dim == 16 && hp->rope_dim == 16 && hp->ffn_dim == 384);
    ck_assert(hp->vocab_size == 2048 && hp->ctx_len == 512 && hp->norm_eps == 1e-6f);
    ck_assert(hp->bos_id == 1 && hp->eos_id == 2 && hp->add_bos == 1);
    ck_assert(lm.m.output_tied && lm.m.output.t == lm.m.tok_embd.t);
    ck_assert_uint_eq(lm.m.layers[0].wq.neox_head, 16);
    ck_assert_uint_eq(lm.m.tok_embd.t->type, GGML_TYPE_F32);

    char path[4300];
    snprintf(path, sizeof path, "%s/TinyStories-656K-Q8_0.gguf", models);
    struct nib_loaded_model q8;
    ck_assert_msg(nib_model_load(&q8, path, err, sizeof err) == 0, "%s", err);
    /* llama.cpp's GGUF holds permuted Q/K rows: row r of both views is the
     * same source row, within one Q8_0 step of the block's maximum */
    float a[384], b[384];
    for (uint32_t l = 0; l < 2; l++) {
        const struct llama_weight *wa[] = {&lm.m.layers[l].wq, &lm.m.layers[l].wk,
                                           &lm.m.layers[l].w_down},
                                  *wb[] = {&q8.m.layers[l].wq, &q8.m.layers[l].wk,
                                           &q8.m.layers[l].w_down};
        for (int k = 0; k < 3; k++)
            for (uint32_t r = 0; r < wa[k]->rows; r++) {
                ck_assert_int_eq(llama_weight_row_f32(wa[k], r, a), 0);
                ck_assert_int_eq(llama_weight_row_f32(wb[k], r, b), 0);
                for (uint32_t blk = 0; blk < wa[k]->cols / 32; blk++) {
                    float amax = 0;
                    for (int j = 0; j < 32; j++)
                        amax = fmaxf(amax, fabsf(a[blk * 32 + j]));
                    for (int j = 0; j < 32; j++)
                        ck_assert_msg(fabsf(a[blk * 32 + j] - b[blk * 32 + j]) <=
                                          amax / 254 + amax * 0x1p-10f + 1e-7f,
                                      "layer %u weight %d row %u col %u: %g vs %g (amax %g)", l, k,
                                      r, blk * 32 + j, (double)a[blk * 32 + j],
                                      (double)b[blk * 32 + j], (double)amax);
                }
            }
    }
    nib_model_unload(&q8);
    nib_model_unload(&lm);
}
END_TEST

/* Greedy continuations from the directory at f32 equal the reference's
 * fp32_safetensors ones: 64 forward passes, prompt forced, EOS stops. The
 * prompt ids come from nibble's own tokenizer and must equal the
 * reference's. */
START_TEST(test_tinystories_greedy)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/TinyStories-656K", models);
    struct nib_loaded_model lm;
    ck_assert_msg(nib_model_load(&lm, dir, err, sizeof err) == 0, "%s", err);
    struct plan_opts po = {0};
    ck_assert_int_eq(nib_plan_opts_quant(&po, "f32", err, sizeof err), 0);
    struct json_doc *d = read_reference();
    const struct json_value *cases = json_get(json_root(d), "cases");
    ck_assert(json_is(cases, JSON_ARRAY) && cases->n >= 3);
    for (uint32_t c = 0; c < cases->n; c++) {
        const struct json_value *cs = &cases->items[c];
        const struct json_value *prompt = json_get(cs, "prompt");
        uint32_t want_prompt[64], want_gen[80], ids[128];
        uint32_t np = ids_of(json_get(cs, "prompt_token_ids"), want_prompt, 64);
        uint32_t ng =
            ids_of(json_get(json_get(cs, "fp32_safetensors"), "generated_token_ids"), want_gen, 80);
        struct runner run;
        ck_assert_msg(runner_open(&run, &lm.m, &po, err, sizeof err) == 0, "%s", err);
        int n = tok_encode_into(&run.v, prompt->str, prompt->n, 1, ids, 128);
        ck_assert_int_eq(n, (int)np);
        ck_assert_msg(!memcmp(ids, want_prompt, np * sizeof *ids), "case %u: prompt ids differ", c);
        /* the prompt in one prefill pass where the plan allows, then one token a pass */
        uint32_t gen[80], n_gen = 0, pos = 0;
        const float *lg = nib_exec_tokens(&run.e, ids, np, 0);
        ck_assert_ptr_nonnull(lg);
        pos = np;
        for (;;) {
            uint32_t next = nib_exec_argmax(&run.e);
            gen[n_gen++] = next;
            if (next == 2 || pos >= 64)
                break;
            ck_assert_ptr_nonnull(nib_exec_token(&run.e, next, pos));
            pos++;
        }
        ck_assert_msg(n_gen == ng, "case %u: %u tokens generated, the reference has %u", c, n_gen,
                      ng);
        for (uint32_t i = 0; i < ng; i++)
            ck_assert_msg(gen[i] == want_gen[i], "case %u ('%s'): token %u is %u, reference %u", c,
                          prompt->str, i, gen[i], want_gen[i]);
        runner_close(&run);
    }
    json_free(d);
    nib_model_unload(&lm);
}
END_TEST

/* f32 logits at every position of the first case's sequence against the
 * float64 forward pass: within f32 rounding (relative 1e-5 of the largest
 * logit), and the same argmax everywhere. */
START_TEST(test_tinystories_logits)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/TinyStories-656K", models);
    struct nib_loaded_model lm;
    ck_assert_msg(nib_model_load(&lm, dir, err, sizeof err) == 0, "%s", err);
    struct json_doc *d = read_reference();
    const struct json_value *cs = json_at(json_get(json_root(d), "cases"), 0);
    uint32_t ids[160];
    uint32_t np = ids_of(json_get(cs, "prompt_token_ids"), ids, 64);
    uint32_t ng =
        ids_of(json_get(json_get(cs, "fp32_safetensors"), "generated_token_ids"), ids + np, 96);
    uint32_t n = np + ng - 1; /* the last generated token is never fed */
    struct ref_cfg rc = {.dim = 128,
                         .n_layers = 2,
                         .n_heads = 8,
                         .n_kv_heads = 4,
                         .head_dim = 16,
                         .ffn = 384,
                         .vocab = 2048,
                         .rope_dim = 16,
                         .eps = 1e-6,
                         .theta = 10000.0,
                         .tied = 1,
                         .attn_scale = 0.25};
    struct ref64 r;
    ck_assert_int_eq(ref_open(&r, &rc, dir, 64), 0);
    uint32_t best[160];
    double dd = compare_logits(&lm.m, &r, ids, n, best);
    fprintf(stderr,
            "TinyStories-656K: f32 logits vs float64, largest difference %.3g of the "
            "largest logit over %u positions\n",
            dd, n);
    ck_assert_msg(dd < 1e-5, "logits differ from the float64 reference by %g", dd);
    for (uint32_t i = np - 1; i < n; i++) /* the reference's greedy choices are float64's too */
        ck_assert_uint_eq(best[i], ids[i + 1]);
    ref_close(&r);
    json_free(d);
    nib_model_unload(&lm);
}
END_TEST

Suite *nib_test_suite(void)
{
    if (!models_dir()) {
        fprintf(stderr, "SKIP: ../shared/models/TinyStories-656K (and its reference.json) not "
                        "found; the real-model checks did not run\n");
        exit(77);
    }
    Suite *s = suite_create("hf_import_real");
    TU_CASE(s, "tinystories", NULL, NULL, 300, test_tinystories_import, test_tinystories_greedy,
            test_tinystories_logits);
    return s;
}

#endif
