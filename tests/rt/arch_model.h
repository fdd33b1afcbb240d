/* A small model of every blob-format-5 feature, built by hand for the
 * runtime and validator tests: a struct llama_model over f32 tensors made
 * here (seeded, so every build gives the same weights), with the test
 * fixture's tokenizer; and a compile into a validated blob view. */
#ifndef NIB_TESTS_RT_ARCH_MODEL_H
#define NIB_TESTS_RT_ARCH_MODEL_H

#include <stdint.h>

#include "model_blob/blob_view.h"
#include "tests/common/gguf_fixture.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"

#define AM_DIM 32
#define AM_HEADS 4
#define AM_KV 2
#define AM_FFN 64
#define AM_LAYERS 2
#define AM_CTX 64
#define AM_ROPE_DIM 6

/* Which features the model has (0: none, the LLaMA default). */
struct am_cfg {
    const char *what;
    uint32_t head_dim; /* 0: AM_DIM / AM_HEADS */
    int bias, qk_norm, post_norms, gelu, tied, freq_factors;
    uint32_t window; /* on even layers, as gemma2 */
    float embed_scale, attn_scale, attn_softcap, final_softcap;
};

#define AM_MAX_T 64
struct am_model {
    struct fx_file file;
    struct gguf_file g;
    struct llama_model m;
    struct gguf_tensor t[AM_MAX_T];
    float *data[AM_MAX_T];
    uint32_t n_t;
    uint64_t rng;
};

void am_build(struct am_model *b, const struct am_cfg *c);
void am_free(struct am_model *b);

/* Compile with --quant `quant` (max_batch 8, ctx AM_CTX) into *v; returns
 * the blob's memory (free() it). The test fails when any step refuses. */
uint8_t *am_compile(const struct llama_model *m, const char *quant, struct nib_blob_view *v);
/* The same: 0 with the blob in *blob (size bytes), or -1 with the message in err. */
int am_compile_raw(const struct llama_model *m, const char *quant, uint8_t **blob, size_t *size,
                   char *err, size_t errlen);

#endif
