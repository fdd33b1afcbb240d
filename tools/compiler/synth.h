/* `nib synth`: random-weight models of real shapes (llama, qwen2, qwen3,
 * phi3, gemma2), written as GGUF v3 with the metadata and tensor names
 * llama.cpp's converters write, so that llama.cpp and nibble's own importer
 * both load them. Everything is a pure function of (shape, dtype, seed):
 * same arguments, same bytes. */
#ifndef NIB_SYNTH_H
#define NIB_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kernels/f16.h"

struct nib_synth_shape {
    const char *name;
    uint32_t dim, n_layers, ffn, n_heads, n_kv_heads, vocab, ctx;
    uint32_t dtype; /* default ggml type of the matrices: F32 or F16 */
    int tied;       /* no output.weight: the classifier reuses token_embd */
    /* Beyond the original LLaMA shapes; zero means llama's defaults. */
    uint32_t arch;       /* enum llama_arch (tools/compiler/llama_import.h); 0: llama */
    uint32_t head_dim;   /* attention.key_length/value_length; 0: dim / n_heads, unwritten */
    float rope_theta;    /* 0: 10000 */
    float norm_eps;      /* 0: 1e-5 */
    float llama3_factor; /* Llama 3 RoPE scaling written as rope_freqs.weight (low/high
                            * frequency factors 1 and 4); 0: none */
    uint32_t llama3_ctx; /* its original_max_position_embeddings */
    float attn_softcap;  /* gemma2 attn_logit_softcapping */
    float final_softcap; /* gemma2 final_logit_softcapping */
    uint32_t window;     /* attention.sliding_window (gemma2; phi3 writes it, llama.cpp
                            * ignores it); 0: unwritten */
    int random_norms;    /* norm weights 1 + U[-1/2, 1/2) rather than ones (so a norm
                            * applied to the wrong entries shows); biases U[-1/2, 1/2) */
};

/* The built-in shapes; *n receives their count. */
const struct nib_synth_shape *nib_synth_shapes(size_t *n);
/* NULL when there is no shape of that name. */
const struct nib_synth_shape *nib_synth_find(const char *name);
/* The architecture a shape writes (enum llama_arch, never 0). */
uint32_t nib_synth_arch(const struct nib_synth_shape *s);
/* Parameters (elements of all tensors) and payload bytes in dtype. */
uint64_t nib_synth_params(const struct nib_synth_shape *s);
uint64_t nib_synth_bytes(const struct nib_synth_shape *s, uint32_t dtype);

/* SentencePiece-style vocabulary: <unk>, <s>, </s>, 256 byte tokens, then
 * unique normal pieces, each of whose character prefixes is also a piece
 * with a lower id (so left-to-right merges can reach every piece). */
struct nib_synth_vocab {
    uint32_t n;
    const char **pieces; /* NUL-terminated, point into storage */
    uint32_t *lens;
    float *scores;
    int32_t *types; /* enum nib_tok_type */
    char *storage;
};

/* n >= NIB_SYNTH_MIN_VOCAB. 0, or -1 with a message in err. */
#define NIB_SYNTH_MIN_VOCAB (259u + 96u) /* specials + bytes + ASCII + "▁" */
int nib_synth_vocab_build(struct nib_synth_vocab *v, uint32_t n, char *err, size_t errlen);
void nib_synth_vocab_free(struct nib_synth_vocab *v);

/* Write the model to out. dtype is GGML_TYPE_F32 or GGML_TYPE_F16; progress
 * non-zero prints progress to stderr. 0, or -1 with a message in err. */
int nib_synth_write(FILE *out, const struct nib_synth_shape *s, uint32_t dtype, uint64_t seed,
                    int progress, char *err, size_t errlen);

/* The same with a real tokenizer (nib synth --vocab): s's vocabulary size
 * is replaced by tok's, the output matrix is tied to the embeddings (a
 * 128k-token vocabulary stays small), and the tokenizer is written by
 * nib_synth_tok_metadata. */
struct tok_spec;
int nib_synth_write_vocab(FILE *out, const struct nib_synth_shape *s, uint32_t dtype, uint64_t seed,
                          const struct tok_spec *tok, int progress, char *err, size_t errlen);

/* The shape --vocab uses when none is named: small, f16, tied. */
extern const struct nib_synth_shape nib_synth_vocab_shape;

/* tok as GGUF tokenizer.ggml.* metadata (tools/compiler/synth_vocab.c):
 * model "gpt2" for byte-level vocabularies (with the tokenizer.ggml.pre
 * name of its pre-tokenizer), "llama" for SentencePiece-style ones.
 * 0, or -1 with a message when the tokenizer has no such form. */
struct gguf_writer;
int nib_synth_tok_metadata(struct gguf_writer *w, const struct tok_spec *tok, char *err,
                           size_t errlen);

/* CLI entry: argv[0] is "synth". Exit status: 0 ok, 1 failure, 2 usage. */
int nib_synth_main(int argc, char **argv);

/* Models of other formats that `nib synth` also writes (the ONNX vision
 * models, whose writer lives with the ONNX code): a name, a line for
 * --list, and a writer of the whole file from a seed (0, or -1 with a
 * message). nib_synth_main is this with none. */
struct nib_synth_graph {
    const char *name;
    const char *what;
    int (*write)(FILE *out, uint64_t seed, char *err, size_t errlen);
};
int nib_synth_main_graphs(int argc, char **argv, const struct nib_synth_graph *graphs,
                          size_t n_graphs);

#endif
