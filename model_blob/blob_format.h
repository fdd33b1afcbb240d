/* The nibble blob: one file, produced offline by `nib compile`, embedded in
 * the appliance and read in place. This header is the only definition of the
 * format; the toolchain writes it and the runtime validates it.
 *
 * Layout (all integers little-endian, every section 64-byte aligned, the
 * weights section aligned to NIB_WEIGHT_ALIGN):
 *
 *   [header]      struct nib_blob_header
 *   [tensors]     n_tensors x struct nib_tensor_rec
 *   [plan]        n_ops x struct nib_op          (executed top to bottom per token)
 *   [tokenizer]   a decoder: struct nib_tok_header, then the tables its
 *                 ranges name (entries, sorted ids, piece bytes, merges,
 *                 added-token trie, normalizer and pre-tokenizer steps,
 *                 chat program); a vision model: its io table instead,
 *                 n_io x struct nib_io_rec (the model's interface either way)
 *   [weights]     tensor payloads in the order the plan streams them
 *
 * The CRC32C in the header covers bytes [NIB_CRC_START, blob_size).
 */
#ifndef NIB_BLOB_FORMAT_H
#define NIB_BLOB_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/dtype.h" /* enum nib_isa, enum nib_dtype: what the kernels consume */

#define NIB_BLOB_MAGIC "NIBBLOB1"
/* 6: vision models (model_kind, the io table); 7: conv residual; 8: a quantized
 * convolution's f32 and int8 outputs at once (qout 2); 9: an f32 convolution's
 * int8 copy; 10: element-wise ops' int8 outputs (qout in nib_vew_params) and
 * the fused scale-and-add NIB_VBIN_MULADD; 11: quantized tensors store their
 * N-blocks in pairs whose scale groups alternate (kernels/qformat.h); 12: the
 * KV cache's head stride (rope_kv.head_stride, attention.head_stride), so a
 * cache can be laid out head by head (docs/blob-format.md "The KV cache");
 * 13: a stored q4h pair interleaves its two blocks' 32-byte code chunks and
 * keeps both blocks' fields after them (kernels/qformat.h) */
#define NIB_BLOB_VERSION 13u
#define NIB_WEIGHT_ALIGN (2u * 1024u * 1024u) /* huge page */
#define NIB_SECTION_ALIGN 64u
#define NIB_CRC_START 12u /* magic[8] + crc32c[4] */
#define NIB_NAME_MAX 48
#define NIB_MAX_LAYERS 512
#define NIB_MAX_DIM (1u << 16)
#define NIB_MAX_VOCAB (1u << 20)
#define NIB_MAX_CTX (1u << 16)
#define NIB_MAX_PIECE 256
#define NIB_MAX_BATCH 64 /* token rows one plan pass may run (prefill chunk) */

struct nib_section {
    uint64_t offset; /* from the start of the blob */
    uint64_t size;   /* bytes */
};

struct nib_hparams {
    uint32_t dim; /* model width */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t ffn_dim;
    uint32_t vocab_size;
    uint32_t ctx_len;  /* positions the KV cache holds */
    uint32_t rope_dim; /* leading dims of each head that RoPE rotates */
    float rope_theta;
    float norm_eps;
    uint32_t bos_id;
    uint32_t eos_id;
    uint32_t add_bos; /* prepend BOS to every prompt */
    uint32_t arch;    /* the source architecture (tools/compiler/llama_import.h enum
                       * llama_arch; informational: the plan says what to run) */
    uint32_t reserved;
};

struct nib_blob_header {
    char magic[8];         /* NIB_BLOB_MAGIC, not NUL-terminated */
    uint32_t crc32c;       /* of bytes [NIB_CRC_START, blob_size) */
    uint32_t version;      /* NIB_BLOB_VERSION */
    uint32_t header_size;  /* sizeof(struct nib_blob_header) */
    uint32_t isa_required; /* enum nib_isa bits */
    uint64_t blob_size;    /* whole file */
    uint64_t topology_fp;  /* fingerprint of the topology packed for; 0 = any */
    struct nib_hparams hp;
    struct nib_section tensors, plan, tokenizer, weights;
    uint32_t n_tensors;
    uint32_t n_ops;
    uint64_t act_size;       /* bytes of activation scratch (arena) */
    uint64_t kv_size;        /* bytes of KV cache, placed after the activations */
    uint64_t logits_off;     /* arena offset of the vocab_size f32 logits */
    uint64_t token_slot_off; /* arena offset of the max_batch u32 tokens of a pass */
    uint64_t pos_slot_off;   /* arena offset of the u32 position of the pass's first token */
    uint64_t
        argmax_off; /* arena offset of the LM head's per-block argmax (struct nib_argmax_block) */
    uint32_t max_batch;     /* token rows every activation buffer holds (1..NIB_MAX_BATCH) */
    uint32_t argmax_blocks; /* entries at argmax_off: ceil(vocab_size / NIB_ARGMAX_BLOCK) */
    uint64_t wscratch_off;  /* arena offset of worker 0's private scratch (NIB_OPF_NORM_IN) */
    uint32_t wscratch_size; /* bytes of private scratch each worker needs (0: none) */
    uint32_t model_kind;    /* enum nib_model_kind */
    uint32_t n_io;          /* vision: records in the io table (0 for a decoder) */
    uint8_t reserved[4];
};

/* What a blob holds. A decoder takes tokens and gives tokens: hparams,
 * tokenizer, KV cache, logits. A vision model takes tensors and gives
 * tensors: its hparams are all zero, it has no tokenizer and no KV cache
 * (kv_size 0), max_batch is 1, and the tokenizer section holds the io
 * table instead. One run of its plan (rt/exec.h nib_exec_run) reads the
 * inputs where their records say and leaves the outputs where theirs say. */
enum nib_model_kind {
    NIB_MODEL_DECODER = 0,
    NIB_MODEL_VISION = 1,
};

/* The io table of a vision model: its inputs, then its outputs, each the
 * bytes a request carries (or an answer returns) exactly as they lie in
 * runtime memory for the run: dense, row-major over dims as the model
 * declares them (NCHW for an image), elements little-endian. The plan's
 * first ops convert an input into the runtime's own layout; its last ops
 * write each output in this one. */
#define NIB_IO_MAX 16 /* records */
#define NIB_IO_MAX_RANK 8
#define NIB_IO_MAX_BYTES (1ull << 30) /* one tensor */

enum nib_io_dir { NIB_IO_INPUT = 0, NIB_IO_OUTPUT = 1 };
enum nib_io_dtype {
    NIB_IO_F32 = 1, /* 4 bytes */
    NIB_IO_U8 = 2,  /* 1 byte (an image's pixels; the plan scales them as compiled) */
};

/* Bytes of one element of an io tensor of this (known) dtype. */
static inline uint32_t nib_io_elem_size(uint32_t dtype)
{
    return dtype == NIB_IO_F32 ? 4u : 1u;
}

struct nib_io_rec {
    char name[NIB_NAME_MAX];        /* the model's name for it, NUL-terminated */
    uint32_t dir;                   /* enum nib_io_dir: every input precedes every output */
    uint32_t dtype;                 /* enum nib_io_dtype */
    uint32_t rank;                  /* 1..NIB_IO_MAX_RANK */
    uint32_t dims[NIB_IO_MAX_RANK]; /* each >= 1; unused ones 0 */
    uint32_t reserved;
    uint64_t off;   /* runtime memory offset of its bytes, 64-byte aligned, inside the arena */
    uint64_t bytes; /* product of dims x element size, <= NIB_IO_MAX_BYTES */
};

struct nib_tensor_rec {
    char name[NIB_NAME_MAX]; /* NUL-terminated */
    uint32_t dtype;          /* enum nib_dtype */
    uint32_t rows;           /* N: outputs */
    uint32_t cols;           /* K: inputs */
    uint32_t tile_n;         /* packed tile rows */
    uint32_t tile_k;         /* packed tile cols */
    uint32_t group;          /* quantization group along K (0 = none) */
    uint64_t offset;         /* within the weights section */
    uint64_t size;           /* bytes */
};

/* Plan opcodes. One pass of the plan runs m token rows (1 <= m <=
 * max_batch) at positions pos..pos+m-1: decode is a pass of one row,
 * prefill a pass of up to max_batch prompt tokens, and every op computes
 * each row with exactly the instructions a pass of one row would use, so
 * prefill leaves bitwise the state token-by-token decode leaves.
 *
 * Every offset is a byte offset into the runtime memory region
 * [0, act_size + kv_size); the KV cache starts at act_size. An f32 row
 * operand holds its rows `*_stride` bytes apart; a quantized activation
 * operand is a struct nib_qact laid out for max_batch rows
 * (kernels/qkernels.h), with its block in the op's parameters. */
enum nib_opcode {
    NIB_OP_EMBED = 1,     /* dst row t = row tokens[t] of tensor times embed.scale; n = width.
                           * The tensor may be in any format: the row is dequantized
                           * (exactly: kernels/qformat.h nib_qrow_f32) */
    NIB_OP_MATMUL = 3,    /* dst row[n] = tensor[n][k] . src0 row, then the epilogues in flags
                           * (a quantized tensor reads src0 as int8 activations);
                           * struct nib_matmul_params */
    NIB_OP_ATTENTION = 6, /* dst row = attention(q = src0 row at position pos+t, cache at src1):
                           * n heads of k = head_dim floats; struct nib_attention_params */
    NIB_OP_QUANT = 8,     /* int8 activations at dst from the n f32 of each src0 row, for
                           * inputs no producer could quantize itself; struct nib_quant_params */
    NIB_OP_NORM_ADD = 9,  /* dst row += RMSNorm(src0 row) * tensor (an f32 1 x n weight),
                           * n floats, eps in norm_add (gemma2's post-attention and
                           * post-FFN norms: a reduction over the whole row, so an op of
                           * its own after a barrier); struct nib_norm_add_params */
    NIB_OP_COUNT
};
/* Codes 2, 4, 5 and 7 (rmsnorm, rope, kv store, silu-mul) were separate
 * ops in blob version 1; since version 2 they run inside the matmuls
 * (RMSNorm as NIB_OPF_NORM_IN, the others as epilogues). */

/* Op flags. */
#define NIB_OPF_LAST_ROW 0x1u /* run row m-1 only (the LM head) */
#define NIB_OPF_NORM_IN                                                                            \
    0x4u                  /* matmul: src0 holds the f32 rows BEFORE their RMSNorm
                               * (matmul.norm); every worker normalizes them (and
                               * quantizes, for a quantized tensor) into its own scratch and
                               * reads its input there: no separate norm op, no barrier.
                               * Scratch: f32 rows of round_up(k * 4, 64) bytes for max_batch
                               * rows, then the int8 activations (max_batch rows) */
#define NIB_OPF_QOUT 0x2u /* attention, gate|up: int8 output, see each */
/* Matmul epilogues, applied to each block of NIB_EXEC_ROW_BLOCK rows right
 * after the kernel computed it, by the worker that computed it. */
#define NIB_EPI_ADD 0x10u /* dst row += src1 row (residual; src1 may be dst) */
#define NIB_EPI_ROPE_KV                                                                            \
    0x20u                      /* fused QKV: RoPE on Q and K, K and V to the cache
                               * (matmul.rope_kv) */
#define NIB_EPI_SILU_MUL 0x40u /* fused gate|up: silu(gate) * up (matmul.silu_mul) */
#define NIB_EPI_ARGMAX                                                                             \
    0x80u /* LM head: per NIB_ARGMAX_BLOCK rows, the largest logit and its
                               * index to the header's argmax_off (greedy sampling reduces
                               * ceil(n / 16) entries instead of scanning n) */

#define NIB_EPI_SOFTCAP                                                                            \
    0x100u /* LM head: y = c * tanh(y / c) (matmul.softcap), before the argmax */
#define NIB_EPI_BIAS                                                                               \
    0x200u /* y += bias (matmul.bias, an f32 1 x n tensor), before any other
                                * epilogue (qwen2's Q/K/V biases, before RoPE) */

#define NIB_ARGMAX_BLOCK 16u /* = the matmul row block (rt/exec.h) */

struct nib_argmax_block {
    float value; /* largest non-NaN logit of the block, -INFINITY if none */
    uint32_t index;
};

/* NIB_OPF_NORM_IN: the RMSNorm applied to src0 first. */
struct nib_norm_in_params {
    uint32_t tensor; /* the norm weight: f32, 1 x k */
    float eps;
};

/* NIB_EPI_ROPE_KV on the fused QKV rows: Q is rows [0, q_rows), K rows
 * [k_off, k_off + kv_rows), V rows [v_off, v_off + kv_rows), in that order.
 * Q and K are rotated by RoPE head by head; then K and V are copied to the
 * cache at position pos + t: K at aux, V at aux + v_cache_off, KV head g's
 * row of position t at g x head_stride + t x aux_stride bytes from there. */
struct nib_rope_kv_params {
    uint32_t table; /* the cos/sin tensor: ctx rows of rope_dim floats (the
                     * compiler folds any frequency scaling into it) */
    uint32_t q_rows;
    uint32_t k_off;
    uint32_t v_off;
    uint32_t kv_rows;
    uint32_t head_dim;
    uint32_t rope_dim;    /* leading dims of each head that RoPE rotates */
    uint32_t v_cache_off; /* bytes from aux to the V cache */
    /* Per-head RMSNorm of Q and K before RoPE (qwen3): each head of Q rows
     * and of K rows is normalized with eps qk_eps and multiplied by q_norm
     * (K: k_norm), f32 1 x head_dim tensors; UINT32_MAX = none (both or
     * neither). With them the op's worker shares and epilogue steps cover
     * whole heads. */
    uint32_t q_norm, k_norm;
    float qk_eps;
    uint32_t head_stride; /* bytes between KV heads in the cache */
};

/* Bytes from the first KV head's first row to the end of the last head's
 * row of position ctx - 1: the span of a K (or V) cache of `heads` KV heads
 * of hd floats, head g's row of position t at g x head_stride + t x
 * pos_stride (heads, hd, ctx > 0). */
static inline uint64_t nib_kv_cache_bytes(uint64_t heads, uint64_t hd, uint64_t ctx,
                                          uint64_t pos_stride, uint64_t head_stride)
{
    return (heads - 1) * head_stride + (ctx - 1) * pos_stride + hd * 4;
}

static inline uint32_t nib_gcd_u32(uint32_t a, uint32_t b)
{
    while (b) {
        uint32_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* The least multiple of `unit` rows that is also whole heads of hd rows:
 * the planner starts K of a fused QKV with per-head norms on such a row,
 * and the runtime's shares and epilogue steps of it are such units (the
 * caller keeps the product in range: the runtime's hd <= n <= 4 x
 * NIB_MAX_VOCAB is checked at boot). */
static inline uint32_t nib_whole_heads(uint32_t unit, uint32_t hd)
{
    return unit / nib_gcd_u32(unit, hd) * hd;
}

/* NIB_EPI_SILU_MUL on the fused gate|up rows: they come in pairs of 8-row
 * tiles (gate rows 8j..8j+7, then up rows 8j..8j+7); the raw rows go to aux
 * and dst row gets silu(gate) * up for n_out outputs. With NIB_OPF_QOUT dst
 * is int8 activations of block qblock, and the worker split is by 2 x qblock
 * rows, so each worker quantizes whole blocks of its own outputs. */
struct nib_silu_mul_params {
    uint32_t n_out;
    uint32_t qblock; /* NIB_OPF_QOUT only */
    uint32_t act;    /* 0: silu(gate) * up; 1: gelu_tanh(gate) * up (gemma2) */
};

/* NIB_OP_MATMUL. NIB_EPI_ADD reads src1 and NIB_EPI_ARGMAX writes the
 * header's argmax_off: neither has parameters of its own. */
struct nib_matmul_params {
    struct nib_norm_in_params norm;      /* NIB_OPF_NORM_IN */
    struct nib_rope_kv_params rope_kv;   /* NIB_EPI_ROPE_KV */
    struct nib_silu_mul_params silu_mul; /* NIB_EPI_SILU_MUL */
    uint32_t bias;                       /* NIB_EPI_BIAS: the bias tensor */
    float softcap;                       /* NIB_EPI_SOFTCAP: c > 0 */
};

/* NIB_OP_ATTENTION: n heads of k floats against the cache at src1. With
 * NIB_OPF_QOUT dst is int8 activations of block qblock, the heads' f32 rows
 * go to aux first, and the work is split in units of unit_heads heads
 * (unit_heads * k a multiple of qblock, or unit_heads = n: one unit), so
 * each worker quantizes the blocks of the heads it computed. */
struct nib_attention_params {
    uint32_t n_kv_heads;
    uint32_t cache_stride; /* bytes between a KV head's rows (positions) */
    uint32_t v_cache_off;  /* bytes from src1 (the K cache) to the V cache */
    uint32_t qblock;       /* NIB_OPF_QOUT only */
    uint32_t unit_heads;   /* NIB_OPF_QOUT only */
    float scale;           /* of the scores: 1 / sqrt(k), or as the architecture says */
    uint64_t scratch;      /* the scores: n x ctx floats */
    uint32_t window;       /* a query at pos sees keys max(0, pos - window + 1) .. pos;
                            * 0 = all (sliding-window layers) */
    float softcap;         /* scores -> c * tanh(s / c) before the softmax; 0 = none */
    uint32_t head_stride;  /* bytes between KV heads: head g's row of position t is at
                            * g x head_stride + t x cache_stride */
};

/* NIB_OP_QUANT. */
struct nib_quant_params {
    uint32_t block; /* activation block of the int8 rows at dst */
};

/* NIB_OP_EMBED. */
struct nib_embed_params {
    float scale; /* every element times this (1: none; gemma2: sqrt(dim)) */
};

/* NIB_OP_NORM_ADD. */
struct nib_norm_add_params {
    float eps;
};

/* ---- Vision opcodes (a NIB_MODEL_VISION plan; docs/blob-format.md
 * "Vision ops"). Activations are f32 in the runtime's layout: a 4-D value
 * with N = 1 is NHWC (rows h of w pixels of c channels, channel fastest),
 * anything else row-major as the model declares it. Every op reads src0
 * (and src1) and writes dst, all arena offsets; the weights are tensors
 * of the tensor table. One run executes the plan once, top to bottom. */
enum nib_vision_opcode {
    NIB_VOP_FIRST = 32,
    NIB_VOP_INPUT = 32,     /* NCHW u8|f32 io bytes at src0 -> NHWC f32 at dst:
                           * y = fma(x, scale[c], shift[c]), tensor = 2 x c floats */
    NIB_VOP_CONV = 33,      /* convolution (groups, depthwise), bias, activation, affine */
    NIB_VOP_POOL = 34,      /* max / average / global average pooling */
    NIB_VOP_BINARY = 35,    /* dst = src0 op src1, numpy broadcasting as strides */
    NIB_VOP_UNARY = 36,     /* dst = post(act(src0)), element-wise */
    NIB_VOP_COPY = 37,      /* strided copy: layout changes, transposes, slices, concat parts */
    NIB_VOP_MATMUL = 38,    /* dst[m][n] = src0[m][:] . W[n][:] + bias[n] */
    NIB_VOP_SOFTMAX = 39,   /* rows of n */
    NIB_VOP_RESIZE = 40,    /* ONNX Resize on the spatial axes of an NHWC image */
    NIB_VOP_LAYERNORM = 41, /* rows of n: (x - mean) / sqrt(var + eps) * gamma + beta */
    NIB_VOP_BMATMUL = 42,   /* batched matmul of two arena operands (strided) */
    NIB_VOP_QUANT = 43,     /* f32 src0 -> int8 dst, one calibrated scale (nib_vquant_params) */
    NIB_VOP_QCONV = 44,     /* int8 NHWC src0 (x_scale) by q4c|q8c weights (groups 1), f32 or
                             * int8 (qout) dst: kernels/conv.h's quantized convolution */
    NIB_VOP_END
};

/* Element-wise functions (NIB_VOP_UNARY act and post_act of a conv). */
enum nib_vact {
    NIB_VACT_NONE = 0,
    NIB_VACT_RELU,
    NIB_VACT_CLIP,     /* min(max(v, p0), p1) */
    NIB_VACT_HSIGMOID, /* clip(fma(p0, v, p1), 0, 1) */
    NIB_VACT_HSWISH,   /* v * clip(fma(p0, v, p1), 0, 1) */
    NIB_VACT_SIGMOID,  /* 1 / (1 + exp(-v)), nibble's exp */
    NIB_VACT_SQRT,
    NIB_VACT_COUNT
};

enum nib_vbin {
    NIB_VBIN_ADD = 0,
    NIB_VBIN_SUB,
    NIB_VBIN_MUL,
    NIB_VBIN_DIV,
    NIB_VBIN_POW,
    NIB_VBIN_MULADD, /* a + a * b, two roundings: squeeze-excite's x * s + x (since format 10) */
    NIB_VBIN_COUNT
};

/* NIB_VOP_CONV / NIB_VOP_POOL / NIB_VOP_QCONV: one NHWC image. y =
 * act(conv + bias); then y = y * post_mul + post_add when post is 1 (two
 * roundings). NIB_VOP_QCONV: src0 holds int8 codes of the input (x =
 * x_scale * q, q in [-127, 127]); the weight tensor is NIB_DT_Q4C or
 * NIB_DT_Q8C, c_out rows by kh * kw * c_in columns in the order (ky, kx,
 * ic) (kernels/conv.h nib_qconv_pack), groups 1 and not depthwise; the
 * workers' private scratch (header wscratch_size) holds at least
 * nib_qconv_scratch_size. With qout = 1 dst is int8 codes of scale
 * y_scale (the quantized epilogue's rounding; post must be 0), else f32;
 * with qout = 2 (since format 8) dst is f32 and aux receives the int8
 * codes of those same values (as a NIB_VOP_QUANT of dst would), under
 * qout 1's restrictions. aux is 0 unless qout is 2.
 * x_scale, qout and y_scale are 0 in every other op. With res (CONV of
 * mode 0, QCONV) the epilogue adds src1's f32 value at the same place, one
 * f32 addition before (1) or after (2) the activation, in the kernel: the
 * activation must be one the kernels run (at most hard-swish) and post 0.
 * src1 is 0 when res is. */
struct nib_vconv_params {
    uint32_t h, w, c_in, oh, ow, c_out, groups, kh, kw;
    uint32_t stride_h, stride_w, pad_top, pad_left, dil_h, dil_w;
    uint32_t depthwise; /* conv: weights in the depthwise packing */
    uint32_t mode;      /* pool: enum nib_pool; conv: 0 direct, 1 transposed (ConvTranspose,
                         * gathered; weights w[(ic * kh * kw + ky * kw + kx) * ocg8 + oc],
                         * oc < ocg = c_out / groups, ocg8 = ocg rounded up to 8, zeros
                         * past ocg: ONNX's W[ic][oc][ky][kx]; since format 7) */
    uint32_t bias;      /* conv: f32 tensor of c_out, or UINT32_MAX */
    uint32_t act;       /* enum nib_vact (SQRT excluded) */
    float p0, p1;
    uint32_t post;
    float post_mul, post_add;
    float x_scale; /* QCONV: the scale of src0's codes (> 0, finite) */
    uint32_t qout; /* QCONV: 1 = int8 dst of scale y_scale; 2 = f32 dst and int8 aux;
                    * CONV (since format 9): 0, or 2 = f32 dst and its int8 copy at aux,
                    * rounded after the whole epilogue as NIB_VOP_QUANT rounds; since
                    * format 10 also 1 = only the codes, at dst: the f32 rows are made
                    * NIB_VCONV_CHUNK_FLOATS at a time in the worker's private scratch */
    float y_scale; /* QCONV, CONV with qout: > 0, finite */
    uint32_t res;  /* CONV (mode 0), QCONV: 0 none; an f32 residual of dst's shape at src1,
                    * added before (1) or after (2) the activation (since format 7) */
};

/* A convolution that rounds its output to int8 (CONV qout 1 or 2, element-wise
 * qout 2) makes and rounds about this many floats at a time, while they are in
 * cache; CONV qout 1 makes them in the worker's private scratch, which must
 * hold 4 x max(NIB_VCONV_CHUNK_FLOATS, ow x c_out) bytes. */
#define NIB_VCONV_CHUNK_FLOATS 16384u

/* NIB_VOP_QUANT: n f32 values at src0 -> n int8 codes at dst,
 * q = clamp(rne(x * (1 / scale)), -127, 127) as kernels/common/conv-epi.h
 * nib_requant_s8 rounds (NaN -> 0). Split in blocks of 64 elements. */
struct nib_vquant_params {
    uint64_t n;
    float scale; /* > 0, finite */
};

/* NIB_VOP_BINARY, NIB_VOP_COPY, NIB_VOP_UNARY: four loops over dims
 * (outermost first); element (i0..i3) of an operand is at its offset +
 * 4 x sum(i_k x stride_k) (strides in elements, 0 to broadcast). dst is
 * dense in that order (copy: dst strides given). A src may also be a
 * weight tensor (a_tensor / b_tensor, UINT32_MAX: the arena). */
struct nib_vew_params {
    uint32_t dims[4];
    uint32_t sa[4], sb[4], sd[4];
    uint32_t fn;  /* binary: enum nib_vbin; unary: enum nib_vact */
    float p0, p1; /* unary activation parameters */
    uint32_t a_tensor, b_tensor;
    /* Since format 10: int8 codes of the output, rounded as NIB_VOP_QUANT
     * rounds (y_scale > 0, finite; 0 without). qout 0: none (aux 0);
     * 2: f32 dst and the code of the dst element at element offset o at
     * byte aux + o; 1 (copy only): the codes instead of the floats, at
     * byte dst + o (a concat that only a quantized convolution reads). */
    uint32_t qout;
    float y_scale;
};

/* NIB_VOP_MATMUL: m rows of k (src0, row-major) by the f32 tensor W of n
 * rows of k (packed [n][k]); bias an f32 tensor of n or UINT32_MAX.
 * W may also be NIB_DT_Q4C or NIB_DT_Q8C (per output channel, n x k in
 * kernels/qformat.h's layout): then each worker quantizes all m rows of
 * src0 itself (nib_qact, one block per row: a dynamic per-row scale, the
 * same bits on every worker) into its private scratch (wscratch_size >=
 * nib_qact_footprint(m, k, 0)) and runs the ISA's matmul kernel on its
 * columns, the bias as the kernel's add. */
struct nib_vmatmul_params {
    uint32_t m, n, k, bias;
};

/* NIB_VOP_SOFTMAX: rows of n contiguous floats. NIB_VOP_INPUT: c x h x w
 * (NCHW) in, u8 = 1 when the io bytes are u8. */
struct nib_vrows_params {
    uint32_t rows, n;
    uint32_t c, h, w, u8;
};

/* NIB_VOP_LAYERNORM: rows of n contiguous floats; gamma and beta f32
 * tensors of n, or UINT32_MAX for 1 and 0. */
struct nib_vnorm_params {
    uint32_t rows, n, gamma, beta;
    float eps;
};

/* NIB_VOP_BMATMUL: for batch (b0, b1) and row i, dst[((b0 * nb1 + b1) * m +
 * i) * n + j] = sum over k of A[b0 sa[0] + b1 sa[1] + i sa[2] + k sa[3]] *
 * B[b0 sb[0] + b1 sb[1] + k sb[2] + j sb[3]] (strides in elements, 0 to
 * broadcast), one fma per k in order. A at src0, B at src1. */
struct nib_vbmm_params {
    uint32_t nb0, nb1, m, n, k;
    uint32_t sa[4], sb[4];
};

/* NIB_VOP_RESIZE: kernels/conv.h struct nib_resize's fields. */
struct nib_vresize_params {
    uint32_t h, w, c, oh, ow;
    float scale_h, scale_w;
    uint32_t linear, coord, nearest_mode;
};

struct nib_op {
    uint32_t code;   /* enum nib_opcode */
    uint32_t tensor; /* index into the tensor table, or UINT32_MAX */
    uint32_t flags;  /* NIB_OPF_* and NIB_EPI_* */
    uint32_t n, k;
    uint32_t src0_stride, src1_stride, dst_stride, aux_stride; /* bytes between rows */
    uint32_t reserved;
    uint64_t src0, src1, dst, aux;
    union { /* the parameters of the op's code; bytes a code does not use are 0 */
        struct nib_matmul_params matmul;
        struct nib_attention_params attention;
        struct nib_quant_params quant;
        struct nib_embed_params embed;
        struct nib_norm_add_params norm_add;
        struct nib_vconv_params vconv;
        struct nib_vew_params vew;
        struct nib_vmatmul_params vmatmul;
        struct nib_vrows_params vrows;
        struct nib_vresize_params vresize;
        struct nib_vnorm_params vnorm;
        struct nib_vbmm_params vbmm;
        struct nib_vquant_params vquant;
        uint8_t params[120];
    };
};

/* ---- Tokenizer section (format 4; docs/blob-format.md, docs/tokenizers.md).
 * The section starts with struct nib_tok_header; every table is a range of
 * the section (offset from the section's start, element count), 8-byte
 * aligned, and the validator checks each one as hostile input. */

#define NIB_TOK_NONE 0xFFFFFFFFu /* "no token" in any id field */
#define NIB_TOK_MAX_EOG 16
#define NIB_TOK_MAX_STEPS 8           /* normalizer steps; pre-tokenizer steps */
#define NIB_TOK_MAX_ARG 64            /* bytes of a normalizer/decoder string */
#define NIB_TOK_MAX_MERGES (1u << 22) /* merge table slots */
#define NIB_TOK_MAX_TRIE (1u << 22)   /* added-token trie nodes */
#define NIB_TOK_MAX_DATA (1u << 22)   /* step data: patterns, regex programs */
#define NIB_TOK_MAX_CHAT (1u << 22)   /* chat program bytes */

enum nib_tok_model {
    NIB_TOKM_SPM = 1, /* SentencePiece BPE by piece score (the blob format 3 tokenizer) */
    NIB_TOKM_BPE = 2, /* BPE by merge rank, with the pre-tokenizer pipeline */
};

/* nib_tok_header.flags */
#define NIB_TOKF_BYTE_LEVEL 0x1u    /* BPE: words start as byte tokens (byte_ids) */
#define NIB_TOKF_BYTE_FALLBACK 0x2u /* unknown characters become byte tokens (byte_ids) */
#define NIB_TOKF_FUSE_UNK 0x4u      /* consecutive unknowns of a text piece: one unk */
#define NIB_TOKF_IGNORE_MERGES 0x8u /* a word that is a token is that token */
#define NIB_TOKF_ADD_BOS 0x10u      /* the model's rule: BOS starts every sequence */
#define NIB_TOKF_ADD_EOS 0x20u      /* the model's rule: EOS ends every sequence */
#define NIB_TOKF_ALL 0x3Fu

struct nib_tok_range {
    uint32_t offset; /* bytes from the start of the tokenizer section, 8-aligned */
    uint32_t count;  /* elements (bytes for byte ranges) */
};

struct nib_tok_header {
    uint32_t n_vocab;
    uint32_t max_piece_len;
    uint32_t model;  /* enum nib_tok_model */
    uint32_t flags;  /* NIB_TOKF_* */
    uint32_t unk_id; /* NIB_TOK_NONE: none */
    uint32_t bos_id; /* NIB_TOK_NONE: none */
    uint32_t eos_id; /* NIB_TOK_NONE: none */
    uint32_t n_eog;  /* end-of-generation set: eog[0..n_eog) */
    uint32_t eog[NIB_TOK_MAX_EOG];
    uint32_t merge_max_probe;            /* longest probe any merge key needs (validated) */
    uint32_t strip_leading;              /* decoding: spaces dropped at the start of a text */
    struct nib_tok_range entries;        /* n_vocab x struct nib_tok_entry */
    struct nib_tok_range sorted;         /* n_vocab x u32: ids sorted by piece bytes */
    struct nib_tok_range bytes;          /* piece bytes */
    struct nib_tok_range byte_ids;       /* 256 x u32: token of byte b (NIB_TOK_NONE: none) */
    struct nib_tok_range merges;         /* 0 or a power of two x struct nib_tok_merge */
    struct nib_tok_range trie_nodes;     /* struct nib_tok_trie_node; node 0 is the root */
    struct nib_tok_range trie_edges;     /* struct nib_tok_trie_edge */
    struct nib_tok_range norm;           /* struct nib_tok_norm_step, applied in order */
    struct nib_tok_range pre;            /* struct nib_tok_pre_step, applied in order */
    struct nib_tok_range data;           /* bytes the steps and the decoder point into */
    struct nib_tok_range chat;           /* compiled chat template (rt/chat/chat.h); 0: none */
    uint32_t dec_from_off, dec_from_len; /* decoding: in data, replaced by ... */
    uint32_t dec_to_off, dec_to_len;     /* ... this (U+2581 -> ' ') */
    char pre_name[32];                   /* pre-tokenizer name (GGUF), NUL-terminated */
    uint32_t reserved[4];
};

enum nib_tok_type {
    NIB_TOK_NORMAL = 1,
    NIB_TOK_UNKNOWN = 2,
    NIB_TOK_CONTROL = 3,
    NIB_TOK_USER = 4,
    NIB_TOK_UNUSED = 5,
    NIB_TOK_BYTE = 6
};

struct nib_tok_entry {
    float score;     /* SPM: the piece's score */
    uint32_t offset; /* into the piece bytes */
    uint16_t len;
    uint16_t type; /* enum nib_tok_type */
};

/* One merge, in an open-addressing hash table keyed by (left, right):
 * home slot nib_tok_merge_hash(left, right) & (slots - 1), linear probing;
 * an empty slot has left = NIB_TOK_NONE. */
struct nib_tok_merge {
    uint32_t left, right;
    uint32_t rank; /* lower merges first */
    uint32_t result;
};

static inline uint32_t nib_tok_merge_hash(uint32_t left, uint32_t right)
{
    uint64_t k = ((uint64_t)left << 32 | right) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32);
}

/* Added-token trie over raw bytes, nodes in breadth-first order: the edges
 * of all nodes, taken in node order, lead to nodes 1, 2, 3, ... exactly
 * once each (so every node has one parent, which comes first). */
#define NIB_TOKA_TERMINAL 0x1u /* a token ends here: id */
#define NIB_TOKA_SPECIAL 0x2u  /* matched only when the request allows it */
#define NIB_TOKA_LSTRIP 0x4u   /* swallows whitespace before it */
#define NIB_TOKA_RSTRIP 0x8u   /* swallows whitespace after it */
#define NIB_TOKA_NORMALIZED                                                                        \
    0x10u /* matched in the normalized text of a piece, by its normalized bytes */

struct nib_tok_trie_node {
    uint32_t edge_start; /* its edges: [edge_start, +n_edges), sorted by byte */
    uint16_t n_edges;
    uint16_t flags; /* NIB_TOKA_* */
    uint32_t id;    /* TERMINAL: the token */
};

struct nib_tok_trie_edge {
    uint32_t child;
    uint32_t byte; /* 0..255 */
};

/* Normalizer steps (kinds as in tools/compiler/tok_spec.h). */
enum nib_tok_norm_kind { NIB_TOKN_NFC = 1, NIB_TOKN_PREPEND = 2, NIB_TOKN_REPLACE = 3 };

struct nib_tok_norm_step {
    uint32_t kind;
    uint32_t pat_off, pat_len; /* REPLACE: the literal pattern, in data */
    uint32_t arg_off, arg_len; /* PREPEND: the prefix; REPLACE: the replacement */
    uint32_t reserved;
};

/* Pre-tokenizer steps: each splits every word of the step before. */
enum nib_tok_pre_kind {
    NIB_TOKP_SPLIT_REGEX = 1,     /* pat: a regex program (rt/text/regex.h) */
    NIB_TOKP_SPLIT_STRING = 2,    /* pat: a literal string */
    NIB_TOKP_DIGITS = 3,          /* runs of ASCII digits (each alone: INDIVIDUAL) */
    NIB_TOKP_METASPACE = 4,       /* ' ' -> replacement, prefix by prepend scheme */
    NIB_TOKP_BYTELEVEL_REGEX = 5, /* pat: the GPT-2 split regex program */
};

/* What a split keeps (struct nib_tok_pre_step.behavior). */
enum nib_tok_split {
    NIB_TOKS_ISOLATED = 1, /* gaps and matches, each a word */
    NIB_TOKS_REMOVED = 2,  /* gaps only */
    NIB_TOKS_MATCHES = 3,  /* matches only (invert) */
};

#define NIB_TOKP_INDIVIDUAL 0x1u     /* DIGITS */
#define NIB_TOKP_PREPEND_FIRST 0x2u  /* METASPACE: prefix only the text's first piece */
#define NIB_TOKP_PREPEND_ALWAYS 0x4u /* METASPACE: prefix every word */
#define NIB_TOKP_PREFIX_SPACE 0x8u   /* BYTELEVEL_REGEX: ' ' before a word without one */
#define NIB_TOKP_ALL 0xFu

struct nib_tok_pre_step {
    uint32_t kind;
    uint32_t behavior;         /* SPLIT_*: enum nib_tok_split */
    uint32_t flags;            /* NIB_TOKP_* */
    uint32_t replacement;      /* METASPACE: the code point */
    uint32_t pat_off, pat_len; /* in data */
    uint32_t reserved[2];
};

_Static_assert(sizeof(struct nib_hparams) == 64, "hparams layout");
_Static_assert(sizeof(struct nib_blob_header) == 256, "header layout");
_Static_assert(NIB_CRC_START == offsetof(struct nib_blob_header, crc32c) + 4,
               "crc32c precedes the bytes it covers");
_Static_assert(sizeof(struct nib_tensor_rec) == 88, "tensor layout");
_Static_assert(sizeof(struct nib_io_rec) == 112, "io record layout");
_Static_assert(sizeof(struct nib_op) == 192, "op layout");
_Static_assert(offsetof(struct nib_op, params) == 72, "op parameters layout");
_Static_assert(sizeof(struct nib_matmul_params) <= sizeof(((struct nib_op *)0)->params) &&
                   sizeof(struct nib_attention_params) <= sizeof(((struct nib_op *)0)->params) &&
                   sizeof(struct nib_quant_params) <= sizeof(((struct nib_op *)0)->params) &&
                   sizeof(struct nib_vconv_params) <= 120 && sizeof(struct nib_vew_params) <= 120,
               "op parameters fit the op");
_Static_assert(sizeof(struct nib_tok_entry) == 12, "token entry layout");
_Static_assert(sizeof(struct nib_tok_header) % 8 == 0, "tokenizer header keeps tables aligned");
_Static_assert(sizeof(struct nib_tok_merge) == 16 && sizeof(struct nib_tok_trie_node) == 12 &&
                   sizeof(struct nib_tok_trie_edge) == 8 &&
                   sizeof(struct nib_tok_norm_step) == 24 && sizeof(struct nib_tok_pre_step) == 32,
               "tokenizer table layouts");

#endif
