/* LLaMA-family importer: turns a validated GGUF into a model description
 * (hyper-parameters, weight tensors, tokenizer) with every required piece
 * checked: architecture, metadata, tensor presence, shapes and dtypes. */
#ifndef NIB_LLAMA_IMPORT_H
#define NIB_LLAMA_IMPORT_H

#include "model_blob/blob_format.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/tok_spec.h"

struct llama_weight {
    const struct gguf_tensor *t; /* NULL when absent */
    uint32_t rows;               /* outputs (ne[1]) */
    uint32_t cols;               /* inputs (ne[0]) */
};

struct llama_layer {
    struct llama_weight attn_norm, wq, wk, wv, wo;
    struct llama_weight ffn_norm, w_gate, w_up, w_down;
};

struct llama_model {
    struct nib_hparams hp; /* ctx_len = the model's context_length */
    struct llama_weight tok_embd, output_norm, output;
    int output_tied;            /* output.weight absent: reuse tok_embd */
    struct llama_layer *layers; /* hp.n_layers entries (malloc'd) */
    struct tok_spec tok;        /* the tokenizer (tools/compiler/gguf_tok.h) */
};

/* 0 on success; -1 with a message naming the problem in err. */
int llama_import(struct llama_model *m, const struct gguf_file *g, char *err, size_t errlen);
void llama_model_free(struct llama_model *m);

/* Dequantize/convert row r of a 2-D weight (F32, F16, BF16, Q8_0, Q4_0; also
 * Q4_1, which the importer refuses for model weights) to cols floats.
 * Returns 0, or -1 for an unsupported type or a row outside the tensor. */
int llama_weight_row_f32(const struct llama_weight *w, uint32_t r, float *out);

#endif
