/* Hugging Face model directories: config.json, model.safetensors (or the
 * shards named by model.safetensors.index.json), tokenizer.json with
 * tokenizer_config.json and generation_config.json, imported into the same
 * struct llama_model a GGUF becomes (tools/compiler/llama_import.h).
 *
 * model_type llama and mistral (LLAMA_ARCH_LLAMA), qwen2, qwen3, phi3 and
 * gemma2. Weights are views of the safetensors tensors (F32, F16, BF16),
 * never copies:
 *   - every q_proj / k_proj (and their biases, q_norm / k_norm) is stored in
 *     Hugging Face's rotate-half order: the views carry neox_head =
 *     head_dim, neox_rope_dim = rope_dim, which turns them into the
 *     interleaved order nibble's RoPE rotates (llama.cpp's converter
 *     permutes the same rows for GGUF);
 *   - phi3's fused qkv_proj and gate_up_proj are viewed with row0;
 *   - Gemma's RMSNorm multiplies by (1 + w): its norm views get add = 1;
 *   - a tied LM head reuses the embedding (which a checkpoint may store
 *     under lm_head.weight only, as TinyStories-656K does).
 * Every shape is checked against config.json; every refusal names the file
 * and the field or tensor. */
#ifndef NIB_HF_IMPORT_H
#define NIB_HF_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_format.h"
#include "tools/compiler/llama_import.h"

/* config.json as nibble reads it. */
struct hf_config {
    uint32_t arch;    /* enum llama_arch */
    uint32_t ffn_act; /* enum llama_ffn_act */
    uint32_t dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, ctx_len;
    uint32_t rope_dim;
    float norm_eps, rope_theta;
    int tie;         /* tie_word_embeddings: 1, 0, or -1 when absent */
    int rope_llama3; /* rope_scaling rope_type llama3 */
    float rs_linear; /* rope_type linear: its factor (0: none) */
    float rs_factor, rs_low_freq, rs_high_freq;
    uint32_t rs_orig_ctx;
    float attn_scale; /* 1/sqrt(head_dim), gemma2: query_pre_attn_scalar^-1/2 */
    float attn_softcap, final_softcap;
    float embed_scale;               /* gemma2: sqrt(hidden_size) as an f32, else 1 */
    int norm_add_one;                /* gemma2 */
    uint32_t window[NIB_MAX_LAYERS]; /* per layer; 0 = full attention */
};

/* Parse a config.json text. 0, or -1 with "config.json: FIELD ..." in err. */
int hf_config_parse(const char *text, size_t len, struct hf_config *c, char *err, size_t errlen);

/* The llama3 rope_scaling divisors of the rope_dim / 2 RoPE frequencies,
 * computed in f32 as llama.cpp's converter does (rope_freqs.weight). A
 * linear rope_scaling divides every frequency by its factor instead. */
void hf_llama3_freq_factors(const struct hf_config *c, float *out);

struct hf_dir;

/* Import the model directory dir. 0 with *m filled and *d holding the
 * mapped files its weights point into (free m with llama_model_free first,
 * then hf_dir_close), or -1 with a message naming the file and the problem
 * in err and nothing to free. */
int hf_import(struct hf_dir **d, struct llama_model *m, const char *dir, char *err, size_t errlen);
void hf_dir_close(struct hf_dir *d);

#endif
