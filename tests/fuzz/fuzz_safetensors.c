/* Fuzz target: what nib compile reads from a Hugging Face directory before
 * any weight is used. An input starting with '{' is a config.json
 * (hf_config_parse: refused with a message naming config.json, or accepted
 * with every hyper-parameter in range); anything else is a safetensors
 * file (st_open: refused with a message, or accepted with every tensor
 * inside the data section, no two overlapping, sizes matching their
 * shapes; every byte of every tensor is read, so ASan sees any escape). */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/compiler/hf_import.h"
#include "tools/compiler/safetensors.h"

static void config(const uint8_t *buf, size_t size)
{
    struct hf_config c;
    char err[256];
    err[0] = 0;
    if (hf_config_parse((const char *)buf, size, &c, err, sizeof err)) {
        FUZZ_ASSERT(strncmp(err, "config.json: ", 13) == 0);
        return;
    }
    FUZZ_ASSERT(c.dim >= 1 && c.dim <= NIB_MAX_DIM && c.n_layers >= 1 &&
                c.n_layers <= NIB_MAX_LAYERS);
    FUZZ_ASSERT(c.n_kv_heads >= 1 && c.n_heads % c.n_kv_heads == 0);
    FUZZ_ASSERT(c.head_dim >= 2 && c.head_dim % 2 == 0 &&
                (uint64_t)c.n_heads * c.head_dim <= NIB_MAX_DIM);
    FUZZ_ASSERT(c.rope_dim >= 2 && c.rope_dim % 2 == 0 && c.rope_dim <= c.head_dim);
    FUZZ_ASSERT(c.vocab_size >= 1 && c.vocab_size <= NIB_MAX_VOCAB && c.ctx_len >= 1);
    FUZZ_ASSERT(c.norm_eps > 0 && c.rope_theta > 0 && c.attn_scale > 0);
    for (uint32_t l = 0; l < c.n_layers; l++)
        FUZZ_ASSERT(c.window[l] < c.ctx_len);
    if (c.rope_llama3) {
        float f[NIB_MAX_DIM / 2];
        hf_llama3_freq_factors(&c, f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so any over-read is caught. */
    uint8_t *buf = malloc(size ? size : 1);
    FUZZ_ASSERT(buf != NULL);
    if (size)
        memcpy(buf, data, size);
    if (size && buf[0] == '{') {
        config(buf, size);
        free(buf);
        return 0;
    }
    struct st_file f;
    char err[256];
    err[0] = 0;
    if (st_open(&f, buf, size, err, sizeof err) != 0) {
        FUZZ_ASSERT(err[0] != 0);
        free(buf);
        return 0;
    }
    unsigned sum = 0;
    for (uint32_t i = 0; i < f.n_tensors; i++) {
        const struct gguf_tensor *t = &f.tensors[i];
        FUZZ_ASSERT(t->data >= f.data && t->offset + t->nbytes <= f.data_size);
        FUZZ_ASSERT(t->data + t->nbytes <= buf + size);
        FUZZ_ASSERT(t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS);
        FUZZ_ASSERT(t->name.len >= 1 && t->name.ptr[t->name.len] == 0);
        FUZZ_ASSERT(st_find(&f, t->name.ptr) == t); /* names are unique */
        uint64_t n = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
            n *= t->ne[d];
        FUZZ_ASSERT(n == t->n_elems && t->nbytes == n * (t->type == GGML_TYPE_F32 ? 4u : 2u));
        for (uint32_t j = 0; j < f.n_tensors; j++) /* no two share a byte */
            FUZZ_ASSERT(j == i || t->offset + t->nbytes <= f.tensors[j].offset ||
                        f.tensors[j].offset + f.tensors[j].nbytes <= t->offset);
        for (uint64_t k = 0; k < t->nbytes; k++)
            sum += t->data[k];
    }
    st_metadata(&f, "format");
    st_close(&f);
    free(buf);
    return (int)(sum & 0);
}
