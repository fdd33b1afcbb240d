#include "tools/compiler/model_load.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/util/tool_util.h"
#include "tools/compiler/hf_import.h"
#include "tools/compiler/pack.h"

int nib_model_load(struct nib_loaded_model *lm, const char *path, char *err, size_t errlen)
{
    memset(lm, 0, sizeof *lm);
    char why[400];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) /* a Hugging Face directory */
        return hf_import(&lm->hf, &lm->m, path, err, errlen);
    if (nib_map_file(path, &lm->data, &lm->size, why, sizeof why)) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    if (gguf_open(&lm->g, lm->data, lm->size, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        nib_unmap_file(lm->data, lm->size);
        memset(lm, 0, sizeof *lm);
        return -1;
    }
    if (llama_import(&lm->m, &lm->g, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        gguf_close(&lm->g);
        nib_unmap_file(lm->data, lm->size);
        memset(lm, 0, sizeof *lm);
        return -1;
    }
    return 0;
}

void nib_model_unload(struct nib_loaded_model *lm)
{
    llama_model_free(&lm->m);
    if (lm->hf) {
        hf_dir_close(lm->hf);
        memset(lm, 0, sizeof *lm);
        return;
    }
    gguf_close(&lm->g);
    nib_unmap_file(lm->data, lm->size);
    memset(lm, 0, sizeof *lm);
}

int nib_blob_build(const struct llama_model *m, const struct plan_opts *po, FILE *out,
                   struct nib_plan *plan, char *err, size_t errlen)
{
    if (nib_plan_build(plan, m, po, err, errlen))
        return -1;
    if (nib_pack_blob(plan, m, out, err, errlen)) {
        nib_plan_free(plan);
        return -1;
    }
    return 0;
}

int nib_blob_build_mem(const struct llama_model *m, const struct plan_opts *po, uint8_t **blob,
                       size_t *size, char *err, size_t errlen)
{
    FILE *f = tmpfile();
    if (!f) {
        snprintf(err, errlen, "cannot create a temporary file");
        return -1;
    }
    struct nib_plan plan;
    int rc = nib_blob_build(m, po, f, &plan, err, errlen);
    if (rc == 0) {
        nib_plan_free(&plan);
        long n = (fseek(f, 0, SEEK_END) == 0) ? ftell(f) : -1;
        *blob = n > 0 ? aligned_alloc(64, ((size_t)n + 63) & ~(size_t)63) : NULL;
        if (!*blob || fseek(f, 0, SEEK_SET) != 0 || fread(*blob, 1, (size_t)n, f) != (size_t)n) {
            free(*blob);
            *blob = NULL;
            snprintf(err, errlen, "cannot read the blob back");
            rc = -1;
        } else {
            *size = (size_t)n;
        }
    }
    fclose(f);
    return rc;
}
