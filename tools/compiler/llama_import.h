/* LLaMA-family importer: turns a validated GGUF into a model description
 * (hyper-parameters, weight tensors, tokenizer) with every required piece
 * checked: architecture, metadata, tensor presence, shapes and dtypes. */
#ifndef NIB_LLAMA_IMPORT_H
#define NIB_LLAMA_IMPORT_H

#include "model_blob/blob_format.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/tok_spec.h"

/* The architectures nibble imports (GGUF general.architecture, Hugging
 * Face config.json model_type). Mistral is LLAMA_ARCH_LLAMA. */
enum llama_arch {
    LLAMA_ARCH_LLAMA = 1, /* Llama 1-3.x, Mistral, SmolLM2, TinyLlama */
    LLAMA_ARCH_QWEN2,     /* Q/K/V biases */
    LLAMA_ARCH_QWEN3,     /* per-head RMSNorm of Q and K before RoPE */
    LLAMA_ARCH_PHI3,      /* fused attn_qkv and gate|up sources */
    LLAMA_ARCH_GEMMA2,    /* GELU, post-norms, soft-capping, sliding window */
};
const char *llama_arch_name(uint32_t arch); /* "llama", "qwen2", ...; "?" */

/* The gated FFN's activation: act(gate) * up. */
enum llama_ffn_act {
    LLAMA_ACT_SILU = 0,      /* x * sigmoid(x) */
    LLAMA_ACT_GELU_TANH = 1, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
};

/* One weight as nibble reads it: a view of a source tensor (GGUF, or a
 * safetensors tensor described by the same struct gguf_tensor). A matrix
 * view has rows > 1 (outputs) of cols inputs; a vector view (norm weight,
 * bias) has rows == 1. Every reader goes through llama_weight_row_f32 /
 * llama_weight_src_row, which apply row0, the rotate-half reorder and add. */
struct llama_weight {
    const struct gguf_tensor *t; /* NULL when absent */
    uint32_t rows;               /* outputs (a vector: 1) */
    uint32_t cols;               /* inputs (a vector: its length) */
    uint32_t row0;               /* first source row: a view into a fused source (phi3
                                  * attn_qkv = Q|K|V rows, ffn_up = gate|up rows) */
    /* Rotate-half (NEOX) RoPE sources: the entries of a Q or K projection
     * (its rows), its bias, or a per-head Q/K norm weight (its elements)
     * come in heads of neox_head entries whose first neox_rope_dim rotate
     * as pairs (i, i + neox_rope_dim/2). nibble's RoPE rotates adjacent
     * pairs (2i, 2i+1), so the view reorders each head: view entry 2i =
     * source entry i, 2i+1 = source i + neox_rope_dim/2, the rest in
     * place. Attention scores are dot products of Q and K heads, which the
     * same reorder of both leaves unchanged (V is never reordered).
     * neox_head 0: no reorder. */
    uint32_t neox_head, neox_rope_dim;
    float add; /* added to every converted value (Hugging Face Gemma norms: 1) */
};

struct llama_layer {
    struct llama_weight attn_norm, wq, wk, wv, wo;
    struct llama_weight ffn_norm, w_gate, w_up, w_down;
    struct llama_weight bq, bk, bv;                    /* qwen2: Q/K/V biases; else absent */
    struct llama_weight q_norm, k_norm;                /* qwen3: per-head RMSNorm (head_dim) */
    struct llama_weight post_attn_norm, post_ffn_norm; /* gemma2: x += norm(Wo a), norm(down) */
    uint32_t window; /* sliding-window attention: a token at pos sees keys
                      * max(0, pos - window + 1) .. pos; 0 = all (gemma2: even layers) */
};

struct llama_model {
    struct nib_hparams hp;    /* ctx_len = the model's context_length; head_dim from
                            * metadata (gemma2, qwen3: not dim / n_heads) */
    uint32_t arch;            /* enum llama_arch */
    uint32_t ffn_act;         /* enum llama_ffn_act */
    float embed_scale;        /* embeddings are multiplied by this (gemma2: sqrt(dim)), else 1 */
    float attn_scale;         /* attention score scale (1/sqrt(head_dim), or as the arch says) */
    float attn_softcap;       /* scores -> c * tanh(s / c) before the softmax; 0 = none */
    float final_softcap;      /* logits -> c * tanh(l / c); 0 = none */
    float *rope_freq_factors; /* rope_dim / 2 divisors of the RoPE frequencies (Llama 3
                               * rope_freqs.weight or rope_scaling llama3), or NULL (malloc'd) */
    struct llama_weight tok_embd, output_norm, output;
    int output_tied;            /* output.weight absent: reuse tok_embd */
    struct llama_layer *layers; /* hp.n_layers entries (malloc'd) */
    struct tok_spec tok;        /* the tokenizer (tools/compiler/gguf_tok.h) */
};

/* 0 on success; -1 with a message naming the problem in err. */
int llama_import(struct llama_model *m, const struct gguf_file *g, char *err, size_t errlen);
void llama_model_free(struct llama_model *m);

/* Row r of the view as cols floats (a vector: r = 0, its elements
 * reordered as neox_* says), converted from any source type nibble reads
 * (tools/compiler/ggml_dequant.h), plus `add`. Returns 0, or -1 for an
 * unsupported type or a row outside the tensor. */
int llama_weight_row_f32(const struct llama_weight *w, uint32_t r, float *out);
/* The source row (in w->t) holding view row r of a matrix view: row0 plus
 * the rotate-half reorder. Exact repacks read source blocks through it. */
uint32_t llama_weight_src_row(const struct llama_weight *w, uint32_t r);

#endif
