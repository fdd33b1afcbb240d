/* Loading a tokenizer alone: blob, GGUF or tokenizer.json. */
#include "tools/compiler/tok_load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/tokenizer.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/gguf_tok.h"
#include "tools/compiler/hf_tokenizer.h"
#include "tools/compiler/tok_pack.h"
#include "tools/util/tool_util.h"

static int from_spec(struct tok_loaded *t, struct tok_spec *spec, char *err, size_t errlen)
{
    size_t len;
    if (tok_pack(spec, NULL, 0, &t->sec, &len, err, errlen))
        return -1;
    return nib_tok_section_open(&t->v, t->sec, len, err, errlen);
}

static int is_dir(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char c;
    int dir = fread(&c, 1, 1, f) == 0 && errno == EISDIR;
    fclose(f);
    return dir;
}

static int load(const char *path, struct tok_loaded *t, char *err, size_t errlen)
{
    struct tok_spec spec;
    if (!is_dir(path)) {
        if (nib_map_file(path, &t->map, &t->map_size, err, errlen))
            return -1;
        if (t->map_size >= 8 && memcmp(t->map, NIB_BLOB_MAGIC, 8) == 0)
            return nib_blob_open(&t->v, t->map, t->map_size, 1, err, errlen);
        if (t->map_size >= 4 && memcmp(t->map, "GGUF", 4) == 0) {
            struct gguf_file g;
            if (gguf_open(&g, t->map, t->map_size, err, errlen))
                return -1;
            int rc = gguf_tok_load(&g, &spec, err, errlen);
            gguf_close(&g);
            if (rc)
                return -1;
            rc = from_spec(t, &spec, err, errlen);
            tok_spec_free(&spec);
            return rc;
        }
        size_t i = 0;
        while (i < t->map_size &&
               (t->map[i] == ' ' || t->map[i] == '\n' || t->map[i] == '\t' || t->map[i] == '\r'))
            i++;
        if (i == t->map_size || t->map[i] != '{') {
            snprintf(err, errlen, "not a nibble blob, a GGUF or a tokenizer.json");
            return -1;
        }
    }
    if (hf_tokenizer_load(path, &spec, err, errlen))
        return -1;
    int rc = from_spec(t, &spec, err, errlen);
    tok_spec_free(&spec);
    return rc;
}

int tok_load(const char *path, struct tok_loaded *t, char *err, size_t errlen)
{
    char why[512];
    memset(t, 0, sizeof *t);
    if (load(path, t, why, sizeof why) || nib_tok_check(&t->v, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", path, why);
        tok_unload(t);
        return -1;
    }
    return 0;
}

int tok_encode_into(const struct nib_blob_view *v, const char *text, size_t len, int add_bos,
                    uint32_t *ids, size_t cap)
{
    size_t max = nib_tok_max_ids(v, len);
    uint32_t *tmp = malloc(max * sizeof *tmp);
    void *scratch = aligned_alloc(64, (nib_tok_req_scratch_footprint(v, len) + 63) & ~(size_t)63);
    struct nib_tok_request rq = {.add_bos = add_bos};
    int n = tmp && scratch ? nib_tok_encode_req(v, text, len, &rq, tmp, max, scratch) : -1;
    if (n > 0 && (size_t)n > cap)
        n = -1;
    if (n > 0)
        memcpy(ids, tmp, (size_t)n * sizeof *ids);
    free(tmp);
    free(scratch);
    return n;
}

void tok_unload(struct tok_loaded *t)
{
    if (t->map)
        nib_unmap_file(t->map, t->map_size);
    free(t->sec);
    memset(t, 0, sizeof *t);
}
