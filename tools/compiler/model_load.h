/* A model opened for the toolchain: a GGUF file mapped, parsed, imported,
 * or a Hugging Face directory (tools/compiler/hf_import.h). Shared by nib
 * compile, nib eval and nib inspect. */
#ifndef NIB_MODEL_LOAD_H
#define NIB_MODEL_LOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/compiler/gguf.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/plan.h"

struct hf_dir;

struct nib_loaded_model {
    const uint8_t *data; /* GGUF: the mapped file */
    size_t size;
    struct gguf_file g;
    struct hf_dir *hf; /* a Hugging Face directory's mapped safetensors, else NULL */
    struct llama_model m;
};

/* path: a GGUF file, or a Hugging Face model directory. 0, or -1 with a
 * message naming the file and the problem. */
int nib_model_load(struct nib_loaded_model *lm, const char *path, char *err, size_t errlen);
void nib_model_unload(struct nib_loaded_model *lm);

/* Plan and pack m into out (a seekable file). Returns 0 and fills *plan
 * (free with nib_plan_free), or -1 with a message. */
int nib_blob_build(const struct llama_model *m, const struct plan_opts *po, FILE *out,
                   struct nib_plan *plan, char *err, size_t errlen);

/* Build into memory: a 64-byte-aligned malloc'd buffer (free with free()). */
int nib_blob_build_mem(const struct llama_model *m, const struct plan_opts *po, uint8_t **blob,
                       size_t *size, char *err, size_t errlen);

#endif
