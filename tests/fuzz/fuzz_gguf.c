/* Fuzz target: the GGUF reader (gguf_open) and the LLaMA importer
 * (llama_import) on arbitrary bytes; for files both accept, every weight's
 * first and last rows are converted to f32, the way nib compile reads them. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"

static void rows(const struct llama_weight *w)
{
    if (!w->t || w->cols == 0 || w->cols > (1u << 16))
        return;
    float *out = malloc((size_t)w->cols * sizeof *out);
    FUZZ_ASSERT(out != NULL);
    llama_weight_row_f32(w, 0, out);
    llama_weight_row_f32(w, w->rows - 1, out);
    llama_weight_row_f32(w, w->rows, out); /* one past the end: must refuse */
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so any over-read is caught. */
    uint8_t *buf = malloc(size ? size : 1);
    FUZZ_ASSERT(buf != NULL);
    if (size)
        memcpy(buf, data, size);
    struct gguf_file g;
    char err[256];
    if (gguf_open(&g, buf, size, err, sizeof err) != 0) {
        FUZZ_ASSERT(err[0] != 0);
        free(buf);
        return 0;
    }
    uint32_t u;
    float f;
    struct gguf_str s;
    gguf_get_u32(&g, "llama.block_count", &u);
    gguf_get_f32(&g, "llama.rope.freq_base", &f);
    gguf_get_str(&g, "general.architecture", &s);
    struct llama_model m;
    if (llama_import(&m, &g, err, sizeof err) == 0) {
        rows(&m.tok_embd);
        rows(&m.output);
        for (uint32_t l = 0; l < m.hp.n_layers; l++) {
            const struct llama_layer *L = &m.layers[l];
            const struct llama_weight *ws[] = {&L->wq,     &L->wk,        &L->wv,
                                               &L->wo,     &L->w_gate,    &L->w_up,
                                               &L->w_down, &L->attn_norm, &L->ffn_norm};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
                rows(ws[i]);
        }
        for (uint32_t i = 0; i < m.tok.n_vocab; i++)
            FUZZ_ASSERT(m.tok.tokens[i].len <= NIB_MAX_PIECE && m.tok.tokens[i].len <= size);
        llama_model_free(&m);
    } else {
        FUZZ_ASSERT(err[0] != 0);
    }
    gguf_close(&g);
    free(buf);
    return 0;
}
