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
 *   [tokenizer]   struct nib_tok_header, n_vocab x struct nib_tok_entry,
 *                 n_vocab x u32 sorted ids (by piece bytes), piece bytes
 *   [weights]     tensor payloads in the order the plan streams them
 *
 * The CRC32C in the header covers bytes [NIB_CRC_START, blob_size).
 */
#ifndef NIB_BLOB_FORMAT_H
#define NIB_BLOB_FORMAT_H

#include <stdint.h>

#define NIB_BLOB_MAGIC "NIBBLOB1"
#define NIB_BLOB_VERSION 2u
#define NIB_WEIGHT_ALIGN (2u * 1024u * 1024u) /* huge page */
#define NIB_SECTION_ALIGN 64u
#define NIB_CRC_START 12u                     /* magic[8] + crc32c[4] */
#define NIB_NAME_MAX 48
#define NIB_MAX_LAYERS 512
#define NIB_MAX_DIM (1u << 16)
#define NIB_MAX_VOCAB (1u << 20)
#define NIB_MAX_CTX (1u << 16)
#define NIB_MAX_PIECE 256
#define NIB_MAX_BATCH 64 /* token rows one plan pass may run (prefill chunk) */

/* ISA bits a blob may require; the CPU must have every bit set. */
enum nib_isa {
    NIB_ISA_SCALAR = 0,
    NIB_ISA_AVX2 = 1u << 0, /* AVX2 + FMA + F16C */
    NIB_ISA_AVX512VNNI = 1u << 1,
    NIB_ISA_NEON_DOT = 1u << 2,
};

/* Weight formats. The packed layout of each is described by the tensor's
 * tile_n / tile_k / group fields. Only F32 is produced today; the numbering
 * is fixed so quantized formats slot in without a format break. */
enum nib_dtype {
    NIB_DT_F32 = 0, /* row-major [rows][cols] floats, tile 1x1 */
    NIB_DT_Q4 = 1,  /* symmetric int4 per group */
    NIB_DT_Q4A = 2, /* asymmetric int4 per group */
    NIB_DT_Q4C = 3, /* int4 per output channel */
    NIB_DT_Q8C = 4, /* int8 per output channel */
    NIB_DT_COUNT
};

struct nib_section {
    uint64_t offset; /* from the start of the blob */
    uint64_t size;   /* bytes */
};

struct nib_hparams {
    uint32_t dim;        /* model width */
    uint32_t n_layers;
    uint32_t n_heads;
    uint32_t n_kv_heads;
    uint32_t head_dim;
    uint32_t ffn_dim;
    uint32_t vocab_size;
    uint32_t ctx_len;    /* positions the KV cache holds */
    uint32_t rope_dim;   /* leading dims of each head that RoPE rotates */
    float rope_theta;
    float norm_eps;
    uint32_t bos_id;
    uint32_t eos_id;
    uint32_t add_bos;    /* prepend BOS to every prompt */
    uint32_t reserved[2];
};

struct nib_blob_header {
    char magic[8];           /* NIB_BLOB_MAGIC, not NUL-terminated */
    uint32_t crc32c;         /* of bytes [NIB_CRC_START, blob_size) */
    uint32_t version;        /* NIB_BLOB_VERSION */
    uint32_t header_size;    /* sizeof(struct nib_blob_header) */
    uint32_t isa_required;   /* enum nib_isa bits */
    uint64_t blob_size;      /* whole file */
    uint64_t topology_fp;    /* fingerprint of the topology packed for; 0 = any */
    struct nib_hparams hp;
    struct nib_section tensors, plan, tokenizer, weights;
    uint32_t n_tensors;
    uint32_t n_ops;
    uint64_t act_size;       /* bytes of activation scratch (arena) */
    uint64_t kv_size;        /* bytes of KV cache, placed after the activations */
    uint64_t logits_off;     /* arena offset of the vocab_size f32 logits */
    uint64_t token_slot_off; /* arena offset of the max_batch u32 tokens of a pass */
    uint64_t pos_slot_off;   /* arena offset of the u32 position of the pass's first token */
    uint64_t argmax_off;     /* arena offset of the LM head's per-block argmax (struct nib_argmax_block) */
    uint32_t max_batch;      /* token rows every activation buffer holds (1..NIB_MAX_BATCH) */
    uint32_t argmax_blocks;  /* entries at argmax_off: ceil(vocab_size / NIB_ARGMAX_BLOCK) */
    uint64_t wscratch_off;   /* arena offset of worker 0's private scratch (NIB_OPF_NORM_IN) */
    uint32_t wscratch_size;  /* bytes of private scratch each worker needs (0: none) */
    uint8_t reserved[12];
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
 * (kernels/qkernels.h), with its block in the op. */
enum nib_opcode {
    NIB_OP_EMBED = 1,     /* dst row t = row tokens[t] of tensor; n = width */
    NIB_OP_MATMUL = 3,    /* dst row[n] = tensor[n][k] . src0 row, then the epilogues in flags
                           * (a quantized tensor reads src0 as int8 activations) */
    NIB_OP_ATTENTION = 6, /* dst row = attention(q = src0 row at position pos+t, cache at src1):
                           * n heads, k = head_dim, p0 kv heads, p1 cache row stride,
                           * p2 v cache offset; f0 = scale; scratch: n x ctx floats.
                           * NIB_OPF_QOUT: dst is int8 activations (block p3); the work
                           * is split in units of p4 heads, p4 * k a multiple of p3 (or
                           * p4 = n: one unit), and
                           * each worker quantizes the blocks of the heads it computed
                           * (f32 rows at aux first) */
    NIB_OP_QUANT = 8,     /* int8 activations at dst (block p0) from the n f32 of each src0 row,
                           * for inputs no producer could quantize itself */
    NIB_OP_COUNT
};
/* Codes 2, 4, 5 and 7 (rmsnorm, rope, kv store, silu-mul) were separate
 * ops in blob version 1; version 2 runs them inside the matmuls (RMSNorm
 * as NIB_OPF_NORM_IN, the others as epilogues). */

/* Op flags. */
#define NIB_OPF_LAST_ROW 0x1u /* run row m-1 only (the LM head) */
#define NIB_OPF_NORM_IN 0x4u  /* matmul: src0 holds the f32 rows BEFORE their RMSNorm (weights
                               * norm_tensor, eps norm_eps); every worker normalizes them (and
                               * quantizes, for a quantized tensor) into its own scratch and
                               * reads its input there: no separate norm op, no barrier.
                               * Scratch: f32 rows of round_up(k * 4, 64) bytes for max_batch
                               * rows, then the int8 activations (max_batch rows) */
#define NIB_OPF_QOUT 0x2u     /* attention, gate|up: int8 output, see each */
/* Matmul epilogues, applied to each block of NIB_EXEC_ROW_BLOCK rows right
 * after the kernel computed it, by the worker that computed it. */
#define NIB_EPI_ADD 0x10u     /* dst row += src1 row (residual; src1 may be dst) */
#define NIB_EPI_ROPE_KV 0x20u /* fused QKV: rotate the Q rows [0, p0) and K rows [p1, p1 + p3)
                               * by RoPE (head_dim p4, first p5 dims; table = tensor2), then
                               * copy K and V rows [p2, p2 + p3) to the cache at aux (row
                               * stride aux_stride, v at aux + p6), cache row pos + t */
#define NIB_EPI_SILU_MUL 0x40u/* fused gate|up: tensor rows come in pairs of 8-row tiles
                               * (gate rows 8j..8j+7, then up rows 8j..8j+7); dst row gets
                               * silu(gate) * up for p0 outputs; the raw rows go to aux.
                               * With NIB_OPF_QOUT, dst is int8 activations (block p1) and
                               * the worker split is by 2 x p1 rows, so each worker
                               * quantizes whole blocks of its own outputs */
#define NIB_EPI_ARGMAX 0x80u  /* LM head: per NIB_ARGMAX_BLOCK rows, the largest logit and its
                               * index to the header's argmax_off (greedy sampling reduces
                               * ceil(n / 16) entries instead of scanning n) */

#define NIB_ARGMAX_BLOCK 16u /* = the matmul row block (rt/exec.h) */

struct nib_argmax_block {
    float value; /* largest non-NaN logit of the block, -INFINITY if none */
    uint32_t index;
};

struct nib_op {
    uint32_t code;
    uint32_t tensor;  /* index into the tensor table, or UINT32_MAX */
    uint32_t tensor2; /* second tensor (RoPE table), or UINT32_MAX */
    uint32_t flags;   /* NIB_OPF_* and NIB_EPI_* */
    uint64_t src0, src1, dst, aux;
    uint32_t src0_stride, src1_stride, dst_stride, aux_stride; /* bytes between rows */
    uint32_t n, k;
    uint32_t p0, p1, p2, p3, p4, p5, p6;
    float f0;
    uint64_t scratch; /* arena offset of op scratch (attention scores) */
    uint32_t norm_tensor; /* NIB_OPF_NORM_IN: the RMSNorm weight (f32, 1 x k) */
    float norm_eps;
    uint8_t reserved[8];
};

struct nib_tok_header {
    uint32_t n_vocab;
    uint32_t max_piece_len;
    uint32_t byte_fallback; /* ids of <0x00>..<0xFF> are byte_base + b */
    uint32_t byte_base;
    uint32_t unk_id;
    uint32_t reserved[3];
};

enum nib_tok_type { NIB_TOK_NORMAL = 1, NIB_TOK_UNKNOWN = 2, NIB_TOK_CONTROL = 3, NIB_TOK_USER = 4, NIB_TOK_UNUSED = 5, NIB_TOK_BYTE = 6 };

struct nib_tok_entry {
    float score;
    uint32_t offset; /* into the piece bytes */
    uint16_t len;
    uint16_t type;   /* enum nib_tok_type */
};

_Static_assert(sizeof(struct nib_hparams) == 64, "hparams layout");
_Static_assert(sizeof(struct nib_blob_header) == 256, "header layout");
_Static_assert(sizeof(struct nib_tensor_rec) == 88, "tensor layout");
_Static_assert(sizeof(struct nib_op) == 128, "op layout");
_Static_assert(sizeof(struct nib_tok_entry) == 12, "token entry layout");

#endif
