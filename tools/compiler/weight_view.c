/* Reading a weight through its view (struct llama_weight): which source
 * row or element holds each view entry (row0 for fused sources, the
 * rotate-half reorder of NEOX RoPE sources), conversion of the source's
 * type to f32 (tools/compiler/ggml_dequant.c), and `add`. */
#include "tools/compiler/ggml_dequant.h"
#include "tools/compiler/llama_import.h"

#include <stdlib.h>

/* View entry i -> entry of the un-reordered source (both counted from the
 * view's start): within each head of neox_head entries, view 2j is source
 * j and view 2j+1 is source j + neox_rope_dim/2 for j < neox_rope_dim/2;
 * the entries past neox_rope_dim keep their place. UINT32_MAX when the
 * reorder parameters are inconsistent. */
static uint32_t neox_src(const struct llama_weight *w, uint32_t i)
{
    uint32_t hd = w->neox_head, rd = w->neox_rope_dim;
    if (hd == 0)
        return i;
    if (rd == 0 || rd % 2 || rd > hd)
        return UINT32_MAX;
    uint32_t h = i / hd, j = i % hd;
    if (j >= rd)
        return i;
    return h * hd + (j % 2 ? rd / 2 + j / 2 : j / 2);
}

/* Rows of the source tensor, each t->ne[0] elements long. */
static uint64_t src_rows(const struct gguf_tensor *t)
{
    return t->ne[0] ? t->n_elems / t->ne[0] : 0;
}

uint32_t llama_weight_src_row(const struct llama_weight *w, uint32_t r)
{
    if (r >= w->rows)
        return UINT32_MAX;
    uint32_t s = neox_src(w, r);
    if (s == UINT32_MAX || (uint64_t)w->row0 + s >= UINT32_MAX)
        return UINT32_MAX;
    return w->row0 + s;
}

/* A matrix view reads source rows of cols == ne[0] elements. */
static int matrix_row(const struct llama_weight *w, uint32_t r, float *out)
{
    const struct gguf_tensor *t = w->t;
    const struct ggml_type_info *ti = ggml_type_info(t->type);
    uint32_t s = llama_weight_src_row(w, r);
    if (!ti || t->ne[0] != w->cols || s == UINT32_MAX || s >= src_rows(t))
        return -1;
    uint64_t rb = (uint64_t)w->cols / ti->blck * ti->bytes;
    if (w->cols % ti->blck || (uint64_t)s * rb + rb > t->nbytes)
        return -1;
    return ggml_dequant_row(t->type, t->data + (uint64_t)s * rb, w->cols, out);
}

/* A vector view (rows == 1) of a 1-D source reads elements row0 ..
 * row0 + cols - 1 (a slice of a fused vector), reordered as neox_* says;
 * of a 2-D source, source row row0. The slice starts on a block. */
static int vector_row(const struct llama_weight *w, float *out)
{
    const struct gguf_tensor *t = w->t;
    const struct ggml_type_info *ti = ggml_type_info(t->type);
    if (!ti)
        return -1;
    uint64_t e0 = src_rows(t) > 1 ? (uint64_t)w->row0 * t->ne[0] : w->row0;
    if (e0 % ti->blck || w->cols % ti->blck || e0 + w->cols > t->n_elems)
        return -1;
    const uint8_t *p = t->data + e0 / ti->blck * ti->bytes;
    if (w->neox_head == 0)
        return ggml_dequant_row(t->type, p, w->cols, out);
    float *tmp = malloc((size_t)w->cols * sizeof *tmp);
    int rc = tmp ? ggml_dequant_row(t->type, p, w->cols, tmp) : -1;
    for (uint32_t i = 0; i < w->cols && rc == 0; i++) {
        uint32_t s = neox_src(w, i);
        if (s >= w->cols)
            rc = -1;
        else
            out[i] = tmp[s];
    }
    free(tmp);
    return rc;
}

int llama_weight_row_f32(const struct llama_weight *w, uint32_t r, float *out)
{
    if (!w->t || r >= w->rows || w->cols == 0)
        return -1;
    int rc = w->rows == 1 ? vector_row(w, out) : matrix_row(w, r, out);
    if (rc == 0 && w->add != 0.0f)
        for (uint32_t i = 0; i < w->cols; i++)
            out[i] += w->add;
    return rc;
}
