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
#define NIB_BLOB_VERSION 1u
#define NIB_WEIGHT_ALIGN (2u * 1024u * 1024u) /* huge page */
#define NIB_SECTION_ALIGN 64u
#define NIB_CRC_START 12u                     /* magic[8] + crc32c[4] */
#define NIB_NAME_MAX 48
#define NIB_MAX_LAYERS 512
#define NIB_MAX_DIM (1u << 16)
#define NIB_MAX_VOCAB (1u << 20)
#define NIB_MAX_CTX (1u << 16)
#define NIB_MAX_PIECE 256

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
    uint64_t token_slot_off; /* arena offset of the u32 current token */
    uint64_t pos_slot_off;   /* arena offset of the u32 current position */
    uint8_t reserved[40];
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

/* Plan opcodes. Every offset is a byte offset into the runtime memory
 * region [0, act_size + kv_size); the KV cache starts at act_size. */
enum nib_opcode {
    NIB_OP_EMBED = 1,    /* dst[0..n) = row(token) of tensor */
    NIB_OP_RMSNORM = 2,  /* dst = src0 * rsqrt(mean(src0^2) + f0) * tensor; n */
    NIB_OP_MATMUL = 3,   /* dst[n] = tensor[n][k] . src0[k] (+ src1[n] if p0 & NIB_EPI_ADD);
                          * a quantized tensor reads src0 as a NIB_OP_QUANT result */
    NIB_OP_ROPE = 4,     /* rotate src0 in place: p0 heads of k=head_dim, p1=rope_dim; tensor = cos/sin table */
    NIB_OP_KV_STORE = 5, /* copy src0 (k) and src1 (v), n floats each, to dst + pos*p0 and dst + p1 + pos*p0 */
    NIB_OP_ATTENTION = 6,/* dst = attention(q=src0, cache at src1); n=heads, k=head_dim, p0=kv heads, p1=row stride, p2=v offset; f0 = scale */
    NIB_OP_SILU_MUL = 7, /* dst[i] = silu(src0[i]) * src1[i]; n */
    NIB_OP_QUANT = 8,    /* int8 activations at dst (kernels/qkernels.h struct nib_qact, one row)
                          * from n floats at src0, in blocks of p0 inputs (0 = one block) */
    NIB_OP_COUNT
};

#define NIB_EPI_ADD 1u

struct nib_op {
    uint32_t code;
    uint32_t tensor;  /* index into the tensor table, or UINT32_MAX */
    uint64_t src0, src1, dst;
    uint32_t n, k;
    uint32_t p0, p1, p2;
    float f0;
    uint64_t scratch; /* arena offset of op scratch (attention scores) */
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
_Static_assert(sizeof(struct nib_op) == 64, "op layout");
_Static_assert(sizeof(struct nib_tok_entry) == 12, "token entry layout");

#endif
