/* The planner: turns an imported model into nibble's flat execution plan.
 * It fuses projections that read the same input (Q|K|V, gate|up), puts the
 * residual adds into the projections' epilogues, lays out every activation
 * buffer and the KV cache in one memory region, and lists the tensors in
 * the order the plan streams them. Nothing here touches weight data. */
#ifndef NIB_PLAN_H
#define NIB_PLAN_H

#include "model_blob/blob_format.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/quant.h"

struct nib_calib; /* tools/compiler/calib.h */

enum plan_tensor_kind {
    PT_ROWS = 0,   /* rows concatenated from up to 3 source weights */
    PT_ROPE_TABLE, /* cos/sin per position, computed */
    PT_TILE_PAIRS, /* (only as an argument to the planner's add_tensor) */
    PT_ROW_CAT,    /* one f32 row: the elements of each vector source at its row_off
                    * (a fused QKV's bias in the QKV row layout), zeros between */
};

struct plan_tensor {
    struct nib_tensor_rec rec; /* offset/size filled by the packer */
    enum plan_tensor_kind kind;
    const struct llama_weight *src[3]; /* PT_ROWS: stacked in this order
                                        * (PT_ROW_CAT: NULL = zeros) */
    uint32_t row_off[3];               /* first row of each source in the tensor */
    uint32_t n_src;
    int tile_pairs; /* 2 sources interleaved in 8-row tiles:
                                         * tile 2j = source 0 rows 8j.., 2j+1 = source 1's */
};

struct nib_plan {
    /* What the plan decides of the blob header: hp, max_batch and the
     * runtime memory layout (act_size .. wscratch_size); the packer adds
     * the rest. */
    struct nib_blob_header h;
    struct plan_tensor *tensors;
    uint32_t n_tensors;
    struct nib_op *ops;
    uint32_t n_ops;
    int source;              /* --quant source: the packer names any tensor it had to requantize */
    enum nib_qmethod method; /* plan_opts' */
    const struct nib_calib *calib; /* plan_opts' */
};

/* Weight formats. Matrices and the token-embedding table (read one row
 * per token, dequantized by the EMBED op) take `matrix`; the LM head takes
 * `output` (a tied head reads the embedding table itself when the two
 * formats agree, else it is a packed copy); norms, biases and the RoPE
 * table stay f32. With `source`, a quantized source tensor keeps a format
 * that holds its values exactly (repacked, never rounded again). `precision` overrides per
 * tensor: "PATTERN=FORMAT,..." where PATTERN is a shell glob matched
 * against the GGUF names (blk.0.attn_q.weight, or without ".weight") and
 * nibble's fused names (blk.0.attn_qkv, blk.0.ffn_gate_up, output); later
 * entries win; a fused tensor takes the most precise format any of its
 * parts asks for. */
#define NIB_PLAN_DEFAULT_BATCH 16

struct plan_opts {
    uint32_t max_ctx;        /* cap on the model's context length (0: 2048) */
    uint32_t max_batch;      /* prefill rows per pass (0: NIB_PLAN_DEFAULT_BATCH) */
    struct nib_qspec matrix; /* default format of the matrices */
    struct nib_qspec output; /* format of the LM head */
    int source;              /* keep Q4_0/Q8_0 source tensors as they are */
    const char *precision;   /* per-tensor overrides, or NULL */
    /* How quantized weights are rounded (tools/compiler/quant.h), and the
     * calibration they use (tools/compiler/calib.h): search reads its
     * importance, gptq its prepared results. Without calibration, search
     * and gptq fall back to search with every input weighted alike. */
    enum nib_qmethod method;
    const struct nib_calib *calib;
    /* q4's rule: a matrix whose input length is not a multiple of the
     * matrix format's group (q4h's smallest super-block, 32: its rows
     * would be padded, e.g. stories260K's ffn_down of 172) takes q8c, as
     * llama.cpp keeps such rows in F16 */
    int ragged_q8c;
    /* q4's head rule: the LM head takes `output` (q8c) only while that adds
     * at most NIB_HEAD_Q8C_MAX_BITS per matrix weight to the whole model
     * (a head that is a small share of the weights: tinyllama's 6 %,
     * stories260K's 13 %); a larger one (TinyStories-656K's tied table,
     * 40 %) takes `matrix`, as every other matrix does */
    int head_rule;
};

#define NIB_HEAD_Q8C_MAX_BITS 0.5

/* q4h's super-block for rows of `cols` inputs: of `group` and its halves
 * down to 32, the one that packs a row in the fewest bytes, padding
 * included (the larger on a tie). A 64-wide model takes 64 rather than pad
 * to 128; llama-3b's ffn_down (K = 8640) takes 128 with 64 inputs of
 * padding (4.53 bits a weight) rather than 64 (4.625), and the op took
 * 17 % less time a token at 128 (docs/benchmarks.md, "q4h's
 * super-block on llama-3b"). */
uint32_t nib_plan_q4h_group(uint32_t group, uint32_t cols);

/* What an int8 LM head adds to the model, in bits per matrix weight: its
 * share of the matrix weights (every layer's projections and the head, a
 * tied table counted once, as the head) times the bits q8c takes over
 * q4h/128 (8 + 32/K against 4.5, the f32 scale per row taken as 0.2 bits:
 * heads are at least 160 wide). */
double nib_plan_head_q8c_bits(const struct llama_model *m);

/* Defaults for a --quant argument: "f32", "source", "q4" (the default:
 * q4h/128 layers, q8c where K is ragged, the LM head by the head rule),
 * or any single format ("q4a/64", "q8c", ...) used for every matrix. 0,
 * or -1 with a message. */
int nib_plan_opts_quant(struct plan_opts *o, const char *quant, char *err, size_t errlen);

/* 0, or -1 with a message. Free with nib_plan_free. */
int nib_plan_build(struct nib_plan *p, const struct llama_model *m, const struct plan_opts *o,
                   char *err, size_t errlen);
void nib_plan_free(struct nib_plan *p);

#endif
