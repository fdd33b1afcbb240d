/* Test fixture: a small LLaMA model described in memory (metadata list and
 * tensor list) that tests edit, then serialize to GGUF bytes with a tiny
 * byte-level writer of our own. The built file records where every section
 * and field starts, so tests can truncate or corrupt it at exact places.
 *
 * Tensor payloads are generated from simple formulas; fx_value() gives the
 * exact float each element must decode to. */
#ifndef NIB_TEST_GGUF_FIXTURE_H
#define NIB_TEST_GGUF_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

struct fx_params {
    uint32_t version; /* GGUF version written (2 or 3) */
    uint32_t dim, n_layers, n_heads, n_kv_heads, ffn_dim, vocab, ctx;
    uint32_t rope_dim;  /* written as llama.rope.dimension_count */
    uint32_t wtype;     /* ggml type of every matrix */
    uint32_t ntype;     /* ggml type of every norm */
    int tied;           /* omit output.weight */
    uint32_t alignment; /* 0: no general.alignment key (reader uses 32) */
    /* Architectures other than llama (fx_arch_params sets these). */
    const char *arch;  /* general.architecture and the key prefix; NULL: "llama" */
    uint32_t head_dim; /* 0: dim / n_heads, no key; else <arch>.attention.key_length and
                        * value_length (Q is n_heads * head_dim wide) */
    int fused_qkv;     /* blk.N.attn_qkv.weight (Q|K|V rows) instead of attn_q/k/v */
    int qkv_bias;      /* attn_q/k/v.bias (attn_qkv.bias when fused), F32 */
    int qk_norm;       /* attn_q_norm / attn_k_norm [head_dim] (qwen3) */
    int fused_up;      /* ffn_up of 2 * ffn_dim rows (gate | up) and no ffn_gate (phi3) */
    int post_norms;    /* post_attention_norm / post_ffw_norm (gemma2) */
    int rope_freqs;    /* rope_freqs.weight [rope_dim / 2], element i = fx_rope_freq(i) */
};

/* dim 8, 2 layers, 2 heads, 1 KV head, ffn 16, vocab 20, all F32. */
void fx_default_params(struct fx_params *p);
/* The default shape as architecture `arch` writes it ("llama", "qwen2",
 * "qwen3", "phi3", "gemma2"): qwen2 Q/K/V biases, qwen3 per-head norms and
 * head_dim 6 (Q wider than dim), phi3 fused attn_qkv and gate|up, gemma2
 * post-norms, head_dim 6 and tied output. Keys use the arch prefix. */
void fx_arch_params(struct fx_params *p, const char *arch);
/* Shapes whose input dims are multiples of 32 (dim 32, 4 heads, 2 KV heads,
 * ffn 64), matrices of `wtype`, norms F32. */
void fx_quant_params(struct fx_params *p, uint32_t wtype);

struct fx_kv {
    char *key;
    uint32_t type; /* gguf value type */
    uint8_t *val;  /* serialized value (for arrays: elem type, count, elems) */
    size_t val_len;
};

struct fx_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[4];
    uint32_t type;
    uint32_t seed; /* generated payload depends on it */
    uint8_t *raw;  /* payload override (NULL: generated) */
    size_t raw_len;
};

struct fx_model {
    struct fx_params p;
    struct fx_kv *kv;
    size_t n_kv;
    struct fx_tensor *t;
    size_t n_t;
};

void fx_model_init(struct fx_model *m, const struct fx_params *p);
void fx_model_free(struct fx_model *m);

/* Metadata edits: replace the value when the key exists, else append. */
void fx_set_u32(struct fx_model *m, const char *key, uint32_t v);
void fx_set_i32(struct fx_model *m, const char *key, int32_t v);
void fx_set_f32(struct fx_model *m, const char *key, float v);
void fx_set_bool(struct fx_model *m, const char *key, int v);
void fx_set_str(struct fx_model *m, const char *key, const char *v);
void fx_set_raw(struct fx_model *m, const char *key, uint32_t type, const void *val, size_t len);
/* Append without looking for an existing key (to make duplicates). */
void fx_add_raw(struct fx_model *m, const char *key, uint32_t type, const void *val, size_t len);
int fx_del(struct fx_model *m, const char *key); /* 1 if it was there */

struct fx_tensor *fx_tensor(struct fx_model *m, const char *name);
int fx_del_tensor(struct fx_model *m, const char *name);
/* Append a tensor (duplicates allowed); seed = its index. */
struct fx_tensor *fx_add_tensor(struct fx_model *m, const char *name, uint32_t type,
                                uint32_t n_dims, const uint64_t *ne);
void fx_tensor_set_raw(struct fx_tensor *t, const void *data, size_t len);

/* A serialized file and the byte offset of every section and field. */
struct fx_file {
    uint8_t *buf;
    size_t size;
    size_t header_end; /* 24 */
    size_t n_kv, n_t;
    size_t *kv_start;     /* n_kv: first byte of each key/value */
    size_t *kv_type_at;   /* n_kv: its u32 value type */
    size_t *kv_end;       /* n_kv */
    size_t *ti_start;     /* n_t: first byte of each tensor info */
    size_t *ti_ndims_at;  /* n_t */
    size_t *ti_type_at;   /* n_t */
    size_t *ti_offset_at; /* n_t */
    size_t *ti_end;       /* n_t */
    size_t data_start;
    size_t *t_start; /* n_t: absolute payload offsets */
    size_t *t_end;
    size_t *bounds; /* every offset above, ascending, ending with size */
    size_t n_bounds;
};

void fx_build(const struct fx_model *m, struct fx_file *f);
void fx_file_free(struct fx_file *f);

/* A default model built in one step. */
void fx_build_default(struct fx_file *f, const struct fx_params *p);

/* Exact value of element i of a generated payload of `type`. */
float fx_value(uint32_t type, uint32_t seed, uint64_t i);

/* Element i of a fixture's rope_freqs.weight (positive, exact). */
float fx_rope_freq(uint32_t i);

/* Little-endian patching of a built file. */
void fx_put_u32(uint8_t *p, uint32_t v);
void fx_put_u64(uint8_t *p, uint64_t v);
/* malloc'd copy of exactly n bytes, so ASan sees any over-read. */
uint8_t *fx_dup(const uint8_t *p, size_t n);

/* Pieces of the default vocabulary: id 0 "<unk>", 1 "<s>", 2 "</s>",
 * 3..5 "<0x00>".."<0x02>", then "\xe2\x96\x81w6", ... */
const char *fx_piece(uint32_t id, char buf[32]);
float fx_score(uint32_t id);
uint32_t fx_tok_type(uint32_t id);

#endif
