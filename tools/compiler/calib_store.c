/* tools/compiler/calib_store.h */
#include "tools/compiler/calib_store.h"

#include <stdlib.h>

struct nib_calib_matrix *nib_calib_find(const struct nib_calib *c, const struct llama_weight *w)
{
    for (uint32_t i = 0; c && i < c->n_ws; i++)
        if (c->ws[i].w == w)
            return &c->ws[i];
    return NULL;
}

uint32_t nib_calib_tokens(const struct nib_calib *c)
{
    return c->n_tokens;
}

const float *nib_calib_importance(const struct nib_calib *c, const struct llama_weight *w)
{
    const struct nib_calib_matrix *s = nib_calib_find(c, w);
    return s ? s->imp : NULL;
}

const uint8_t *nib_calib_packed(const struct nib_calib *c, const struct llama_weight *w,
                                struct nib_qspec spec)
{
    const struct nib_calib_matrix *s = nib_calib_find(c, w);
    for (uint32_t i = 0; s && i < s->n_prep; i++)
        if (s->prep[i].spec.dtype == spec.dtype && s->prep[i].spec.group == spec.group)
            return s->prep[i].bytes;
    return NULL;
}

void nib_calib_free(struct nib_calib *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->n_ws; i++) {
        free(c->ws[i].imp);
        for (uint32_t j = 0; j < c->ws[i].n_prep; j++)
            free(c->ws[i].prep[j].bytes);
    }
    free(c->ws);
    free(c);
}
