/* config.json of a Hugging Face model directory (hf_import.h): the
 * hyper-parameters, per-architecture defaults as transformers has them, and
 * refusals naming the field. Only the JSON parser, tools/util's helpers and
 * libm: fuzzed by tests/fuzz/fuzz_safetensors.c. */
#include "tools/compiler/hf_import.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/util/json.h"
#include "tools/util/tool_util.h"

/* ---- config.json ---- */

static const struct {
    const char *model_type;
    uint32_t arch;
} hf_archs[] = {
    {"llama", LLAMA_ARCH_LLAMA}, {"mistral", LLAMA_ARCH_LLAMA}, {"qwen2", LLAMA_ARCH_QWEN2},
    {"qwen3", LLAMA_ARCH_QWEN3}, {"phi3", LLAMA_ARCH_PHI3},     {"gemma2", LLAMA_ARCH_GEMMA2},
};
#define HF_SUPPORTED "llama, mistral, qwen2, qwen3, phi3, gemma2"

struct cfg {
    const struct json_value *root;
    char *err;
    size_t errlen;
};

static int cfail(struct cfg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cfail(struct cfg *c, const char *fmt, ...)
{
    int n = snprintf(c->err, c->errlen, "config.json: ");
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < c->errlen)
        nib_vfail(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* A member that is present and not null, or NULL. */
static const struct json_value *get(const struct json_value *obj, const char *key)
{
    const struct json_value *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

/* An integer field in [lo, hi]; dflt when absent (required: refused). */
static int cfg_u32(struct cfg *c, const struct json_value *obj, const char *path, const char *key,
                   uint32_t *out, uint32_t dflt, int required, uint32_t lo, uint32_t hi)
{
    const struct json_value *v = get(obj, key);
    if (!v) {
        if (required)
            return cfail(c, "%s%s is missing", path, key);
        *out = dflt;
        return 0;
    }
    if (!json_is(v, JSON_NUMBER) || !v->is_int)
        return cfail(c, "%s%s is %s, expected an integer", path, key,
                     json_is(v, JSON_NUMBER) ? "not an integer" : json_type_name(v));
    if (v->i < (int64_t)lo || v->i > (int64_t)hi)
        return cfail(c, "%s%s %lld is out of range [%u, %u]", path, key, (long long)v->i, lo, hi);
    *out = (uint32_t)v->i;
    return 0;
}

/* A number field, positive and finite as an f32. */
static int cfg_pos_f32(struct cfg *c, const struct json_value *obj, const char *path,
                       const char *key, float *out, float dflt, int required)
{
    const struct json_value *v = get(obj, key);
    if (!v) {
        if (required)
            return cfail(c, "%s%s is missing", path, key);
        *out = dflt;
        return 0;
    }
    if (!json_is(v, JSON_NUMBER))
        return cfail(c, "%s%s is %s, expected a number", path, key, json_type_name(v));
    float f = (float)v->num;
    if (!(f > 0) || !isfinite(f))
        return cfail(c, "%s%s %g must be positive and finite", path, key, v->num);
    *out = f;
    return 0;
}

static int cfg_bool(struct cfg *c, const char *key, int *out, int dflt)
{
    const struct json_value *v = get(c->root, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_bool(v))
        return cfail(c, "%s is %s, expected true or false", key, json_type_name(v));
    *out = v->type == JSON_TRUE;
    return 0;
}

/* A string field: its value, dflt when absent, NULL (with err set) when of
 * another type. */
static const char *cfg_str(struct cfg *c, const struct json_value *obj, const char *path,
                           const char *key, const char *dflt, int *bad)
{
    const struct json_value *v = get(obj, key);
    if (!v)
        return dflt;
    if (!json_is(v, JSON_STRING) || memchr(v->str, 0, v->n)) {
        *bad = 1;
        cfail(c, "%s%s is %s, expected a string", path, key, json_type_name(v));
        return NULL;
    }
    return v->str;
}

static int read_arch(struct cfg *c, struct hf_config *hc)
{
    int bad = 0;
    const char *mt = cfg_str(c, c->root, "", "model_type", NULL, &bad);
    if (bad)
        return -1;
    if (!mt)
        return cfail(c, "model_type is missing (nibble reads " HF_SUPPORTED ")");
    for (size_t i = 0; i < sizeof hf_archs / sizeof hf_archs[0]; i++)
        if (!strcmp(mt, hf_archs[i].model_type)) {
            hc->arch = hf_archs[i].arch;
            return 0;
        }
    char b[72];
    return cfail(c, "model_type '%s' is not supported (nibble reads " HF_SUPPORTED ")",
                 nib_show(mt, strlen(mt), b));
}

/* Things nibble does not run, refused by name before anything else. */
static int refuse_unsupported(struct cfg *c)
{
    if (get(c->root, "quantization_config"))
        return cfail(c, "quantization_config: quantized checkpoints are not supported (nibble "
                        "reads F32, F16 and BF16 weights; quantize with nib compile --quant)");
    static const char *const experts[] = {"num_local_experts", "num_experts", "n_routed_experts"};
    for (size_t i = 0; i < sizeof experts / sizeof experts[0]; i++) {
        const struct json_value *v = get(c->root, experts[i]);
        if (v && json_is(v, JSON_NUMBER) && v->num > 0)
            return cfail(c, "%s: mixture-of-experts models are not supported", experts[i]);
    }
    int b = 0;
    if (cfg_bool(c, "mlp_bias", &b, 0))
        return -1;
    if (b)
        return cfail(c, "mlp_bias: biases on the MLP projections are not supported");
    return 0;
}

static int read_activation(struct cfg *c, struct hf_config *hc)
{
    int bad = 0;
    const char *act = NULL, *key = "hidden_act";
    if (hc->arch == LLAMA_ARCH_GEMMA2) {
        /* Gemma2 reads hidden_activation; hidden_act is the older name */
        act = cfg_str(c, c->root, "", "hidden_activation", NULL, &bad);
        if (act)
            key = "hidden_activation";
        else if (!bad)
            act = cfg_str(c, c->root, "", "hidden_act", "gelu_pytorch_tanh", &bad);
        if (bad)
            return -1;
        if (strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu_new")) {
            char b[72];
            return cfail(c, "%s '%s' is not supported (nibble reads gelu_pytorch_tanh, gelu_new)",
                         key, nib_show(act, strlen(act), b));
        }
        hc->ffn_act = LLAMA_ACT_GELU_TANH;
        return 0;
    }
    act = cfg_str(c, c->root, "", "hidden_act", "silu", &bad);
    if (bad)
        return -1;
    if (strcmp(act, "silu") && strcmp(act, "swish")) {
        char b[72];
        return cfail(c, "hidden_act '%s' is not supported (nibble reads silu)",
                     nib_show(act, strlen(act), b));
    }
    hc->ffn_act = LLAMA_ACT_SILU;
    return 0;
}

static int read_shape(struct cfg *c, struct hf_config *hc)
{
    const struct json_value *r = c->root;
    /* transformers' Gemma2 and Qwen3 configs default head_dim and
     * num_key_value_heads to class constants (256 and 4; 128 and 8), not to
     * hidden_size / heads and heads: rather than copy those, require both */
    const int explicit_heads = hc->arch == LLAMA_ARCH_GEMMA2 || hc->arch == LLAMA_ARCH_QWEN3;
    if (cfg_u32(c, r, "", "hidden_size", &hc->dim, 0, 1, 1, NIB_MAX_DIM) ||
        cfg_u32(c, r, "", "num_hidden_layers", &hc->n_layers, 0, 1, 1, NIB_MAX_LAYERS) ||
        cfg_u32(c, r, "", "num_attention_heads", &hc->n_heads, 0, 1, 1, NIB_MAX_DIM) ||
        cfg_u32(c, r, "", "num_key_value_heads", &hc->n_kv_heads, hc->n_heads, explicit_heads, 1,
                NIB_MAX_DIM) ||
        cfg_u32(c, r, "", "intermediate_size", &hc->ffn_dim, 0, 1, 1, NIB_MAX_DIM) ||
        cfg_u32(c, r, "", "vocab_size", &hc->vocab_size, 0, 1, 1, NIB_MAX_VOCAB) ||
        cfg_u32(c, r, "", "max_position_embeddings", &hc->ctx_len, 0, 1, 1, INT32_MAX) ||
        cfg_pos_f32(c, r, "", "rms_norm_eps", &hc->norm_eps,
                    hc->arch == LLAMA_ARCH_PHI3 ? 1e-5f : 1e-6f, 0)) /* transformers' defaults */
        return -1;
    if (hc->n_heads % hc->n_kv_heads)
        return cfail(c, "num_attention_heads %u is not a multiple of num_key_value_heads %u",
                     hc->n_heads, hc->n_kv_heads);
    uint32_t dflt = hc->dim / hc->n_heads;
    if (cfg_u32(c, r, "", "head_dim", &hc->head_dim, dflt, explicit_heads, 2, NIB_MAX_DIM))
        return -1;
    if (!get(r, "head_dim") && hc->dim % hc->n_heads)
        return cfail(c,
                     "hidden_size %u is not a multiple of num_attention_heads %u (and there "
                     "is no head_dim)",
                     hc->dim, hc->n_heads);
    if (hc->head_dim % 2)
        return cfail(c, "head_dim %u is odd (RoPE rotates pairs)", hc->head_dim);
    if ((uint64_t)hc->n_heads * hc->head_dim > NIB_MAX_DIM)
        return cfail(c, "num_attention_heads %u x head_dim %u is larger than %u", hc->n_heads,
                     hc->head_dim, NIB_MAX_DIM);
    return 0;
}

static int read_rope(struct cfg *c, struct hf_config *hc)
{
    const struct json_value *rs = get(c->root, "rope_scaling");
    const char *path = "rope_scaling.";
    if (!rs) {
        rs = get(c->root, "rope_parameters"); /* transformers 5 */
        path = "rope_parameters.";
    }
    if (rs && !json_is(rs, JSON_OBJECT))
        return cfail(c, "%.*s is %s, expected an object", (int)strlen(path) - 1, path,
                     json_type_name(rs));
    const struct json_value *theta_in = get(c->root, "rope_theta") ? c->root : rs;
    if (cfg_pos_f32(c, theta_in, theta_in == c->root ? "" : path, "rope_theta", &hc->rope_theta,
                    10000.0f, 0))
        return -1;
    /* partial rotary embedding: the first head_dim * factor dims rotate */
    const struct json_value *pin = get(c->root, "partial_rotary_factor") ? c->root : rs;
    float prf = 1.0f;
    if (cfg_pos_f32(c, pin, pin == c->root ? "" : path, "partial_rotary_factor", &prf, 1.0f, 0))
        return -1;
    if (prf > 1.0f)
        return cfail(c, "partial_rotary_factor %g is larger than 1", (double)prf);
    hc->rope_dim = (uint32_t)((double)hc->head_dim * prf);
    if (hc->rope_dim < 2 || hc->rope_dim % 2)
        return cfail(c,
                     "partial_rotary_factor %g leaves %u rotary dims of head_dim %u (must be "
                     "even, at least 2)",
                     (double)prf, hc->rope_dim, hc->head_dim);
    if (!rs)
        return 0;
    int bad = 0;
    const char *type = cfg_str(c, rs, path, "rope_type", NULL, &bad);
    if (!type && !bad)
        type = cfg_str(c, rs, path, "type", "default", &bad);
    if (bad)
        return -1;
    if (!strcmp(type, "default"))
        return 0;
    if (!strcmp(type, "linear")) /* positions / factor: every frequency divided by it */
        return cfg_pos_f32(c, rs, path, "factor", &hc->rs_linear, 0, 1);
    if (strcmp(type, "llama3")) {
        char b[72];
        return cfail(c, "%srope_type '%s' is not supported (nibble reads default, linear, llama3)",
                     path, nib_show(type, strlen(type), b));
    }
    hc->rope_llama3 = 1;
    if (cfg_pos_f32(c, rs, path, "factor", &hc->rs_factor, 8.0f, 0) ||
        cfg_pos_f32(c, rs, path, "low_freq_factor", &hc->rs_low_freq, 1.0f, 0) ||
        cfg_pos_f32(c, rs, path, "high_freq_factor", &hc->rs_high_freq, 4.0f, 0) ||
        cfg_u32(c, rs, path, "original_max_position_embeddings", &hc->rs_orig_ctx, 8192, 0, 1,
                INT32_MAX))
        return -1;
    if (!(hc->rs_high_freq > hc->rs_low_freq))
        return cfail(c, "%shigh_freq_factor %g must be larger than low_freq_factor %g", path,
                     (double)hc->rs_high_freq, (double)hc->rs_low_freq);
    return 0;
}

/* A soft-capping value: absent -> the Gemma2 default, null -> none. */
static int read_softcap(struct cfg *c, const char *key, float dflt, float *out)
{
    const struct json_value *v = json_get(c->root, key);
    if (v && v->type == JSON_NULL) {
        *out = 0;
        return 0;
    }
    return cfg_pos_f32(c, c->root, "", key, out, dflt, 0);
}

/* Sliding-window attention per layer, as transformers assigns it. */
static int read_windows(struct cfg *c, struct hf_config *hc)
{
    uint32_t sw = 0;
    const struct json_value *lt = get(c->root, "layer_types");
    if (cfg_u32(c, c->root, "", "sliding_window", &sw, hc->arch == LLAMA_ARCH_GEMMA2 ? 4096 : 0, 0,
                1, INT32_MAX))
        return -1;
    if (lt) {
        if (!json_is(lt, JSON_ARRAY) || lt->n != hc->n_layers)
            return cfail(c, "layer_types must be an array of num_hidden_layers (%u) strings",
                         hc->n_layers);
        for (uint32_t l = 0; l < hc->n_layers; l++) {
            const struct json_value *v = &lt->items[l];
            if (json_str_eq(v, "full_attention"))
                hc->window[l] = 0;
            else if (json_str_eq(v, "sliding_attention") && sw)
                hc->window[l] = sw;
            else if (json_str_eq(v, "sliding_attention"))
                return cfail(c,
                             "layer_types[%u] is sliding_attention but sliding_window is "
                             "missing",
                             l);
            else
                return cfail(c,
                             "layer_types[%u] is not supported (nibble reads full_attention, "
                             "sliding_attention)",
                             l);
        }
    } else if (hc->arch == LLAMA_ARCH_GEMMA2) {
        for (uint32_t l = 0; l < hc->n_layers; l += 2) /* even layers slide */
            hc->window[l] = sw;
    } else if (hc->arch == LLAMA_ARCH_QWEN2 || hc->arch == LLAMA_ARCH_QWEN3) {
        int use = 0;
        uint32_t from = 0;
        if (cfg_bool(c, "use_sliding_window", &use, 0) ||
            cfg_u32(c, c->root, "", "max_window_layers", &from, 28, 0, 0, INT32_MAX))
            return -1;
        if (use && !sw)
            return cfail(c, "use_sliding_window is true but sliding_window is missing");
        for (uint32_t l = from; use && l < hc->n_layers; l++)
            hc->window[l] = sw;
    } else if (hc->arch == LLAMA_ARCH_PHI3 || (hc->arch == LLAMA_ARCH_LLAMA && sw)) {
        for (uint32_t l = 0; l < hc->n_layers; l++) /* mistral, phi3: every layer */
            hc->window[l] = sw;
    }
    for (uint32_t l = 0; l < hc->n_layers; l++) /* a window the context never exceeds: none */
        if (hc->window[l] >= hc->ctx_len)
            hc->window[l] = 0;
    return 0;
}

static int read_gemma2(struct cfg *c, struct hf_config *hc)
{
    float qpas;
    if (cfg_pos_f32(c, c->root, "", "query_pre_attn_scalar", &qpas, 256.0f, 0) ||
        read_softcap(c, "attn_logit_softcapping", 50.0f, &hc->attn_softcap) ||
        read_softcap(c, "final_logit_softcapping", 30.0f, &hc->final_softcap))
        return -1;
    hc->attn_scale = (float)(1.0 / sqrt((double)qpas));
    hc->embed_scale = (float)sqrt((double)hc->dim);
    hc->norm_add_one = 1;
    return 0;
}

int hf_config_parse(const char *text, size_t len, struct hf_config *hc, char *err, size_t errlen)
{
    memset(hc, 0, sizeof *hc);
    struct json_doc *doc;
    char jerr[256];
    struct json_limits lim = {.max_bytes = 16u << 20, .max_depth = 32};
    if (json_parse(text, len, &lim, &doc, jerr, sizeof jerr))
        return nib_fail(err, errlen, "config.json: %s", jerr);
    struct cfg c = {json_root(doc), err, errlen};
    int rc = -1;
    if (!json_is(c.root, JSON_OBJECT)) {
        cfail(&c, "is %s, not an object", json_type_name(c.root));
        goto out;
    }
    if (read_arch(&c, hc) || refuse_unsupported(&c) || read_activation(&c, hc) ||
        read_shape(&c, hc) || read_rope(&c, hc) ||
        /* unset: Gemma2 ties (its transformers default); the others tie
         * when there is no lm_head.weight (hf_import.c) */
        cfg_bool(&c, "tie_word_embeddings", &hc->tie, hc->arch == LLAMA_ARCH_GEMMA2 ? 1 : -1))
        goto out;
    hc->attn_scale = (float)(1.0 / sqrt((double)hc->head_dim));
    hc->embed_scale = 1.0f;
    if (hc->arch == LLAMA_ARCH_GEMMA2 && read_gemma2(&c, hc))
        goto out;
    if (read_windows(&c, hc))
        goto out;
    rc = 0;
out:
    json_free(doc);
    return rc;
}

void hf_llama3_freq_factors(const struct hf_config *c, float *out)
{
    const float two_pi = (float)6.283185307179586;
    float old = (float)c->rs_orig_ctx;
    float low_wavelen = (float)((double)c->rs_orig_ctx / (double)c->rs_low_freq);
    float high_wavelen = (float)((double)c->rs_orig_ctx / (double)c->rs_high_freq);
    float span = (float)((double)c->rs_high_freq - (double)c->rs_low_freq);
    for (uint32_t i = 0; i < c->rope_dim / 2; i++) {
        /* the frequencies RoPE rotates with (the converter's head_dim: the same
         * for every model that has llama3 scaling, whose rotary dims are whole) */
        float freq = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->rope_dim);
        float wavelen = two_pi / freq;
        if (wavelen < high_wavelen) {
            out[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            out[i] = c->rs_factor;
        } else {
            float smooth = (old / wavelen - c->rs_low_freq) / span;
            out[i] = 1.0f / ((1.0f - smooth) / c->rs_factor + smooth);
        }
    }
}
