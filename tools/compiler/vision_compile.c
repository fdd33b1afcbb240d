/* vision_compile_mem (vision_quant.h): lower, place and build a vision
 * blob in memory, the one path nib compile, nib eval and --auto-precision
 * take. */
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/vision_quant.h"
#include "tools/util/tool_util.h"

int vision_compile_mem(const struct nx_graph *g, const struct vision_opts *o,
                       const struct vq_opts *q, uint8_t **blob, uint64_t *len,
                       struct vision_compile_info *info, char *err, size_t errlen)
{
    uint8_t *bits = calloc(g->n_n + 1, 1);
    float *own_scale = NULL;
    if (!bits)
        return nib_fail(err, errlen, "out of memory");
    int rc = vq_node_bits(g, q, bits, err, errlen);
    int any = 0;
    for (uint32_t i = 0; i < g->n_n; i++)
        any |= bits[i] != 0;
    const float *scale = q ? q->act_scale : NULL;
    int any4 = 0;
    for (uint32_t i = 0; i < g->n_n; i++)
        any4 |= bits[i] == 4;
    enum vq_method m = q && q->method ? q->method : vq_method_default();
    struct vq_capture cap = {0};
    const int keep = !rc && any4 && m == VQ_METHOD_GPTQ;
    if (!rc && ((any && !scale) || keep)) {
        rc = vq_calibrate_capture(g, o, q, keep ? bits : NULL, scale ? NULL : &own_scale,
                                  keep ? &cap : NULL, err, errlen);
        if (!scale)
            scale = own_scale;
    }
    struct vision_plan p;
    struct vp_quant vq = {bits, scale, keep ? &cap : NULL};
    if (!rc)
        rc = vp_lower(g, o, any ? &vq : NULL, &p, err, errlen);
    vq_capture_free(&cap);
    if (rc) {
        free(bits);
        free(own_scale);
        return -1;
    }
    vp_place(&p);
    rc = vp_build_blob(&p, blob, len, err, errlen);
    if (!rc && info) {
        memset(info, 0, sizeof *info);
        info->n_ops = p.n_ops, info->n_tensors = p.n_w, info->n_io = p.n_io;
        info->arena_bytes = p.arena;
        for (uint32_t i = 0; i < p.n_w; i++) {
            const struct vp_weight *w = &p.w[i];
            info->weight_bytes += w->size;
            *(w->dtype == NIB_DT_Q4C   ? &info->bytes_q4
              : w->dtype == NIB_DT_Q8C ? &info->bytes_q8
                                       : &info->bytes_f32) += w->size;
        }
        for (uint32_t k = 0; k < g->n_order; k++) {
            uint32_t i = g->order[k];
            if (vq_weighted(g, i))
                *(bits[i] == 4 ? &info->n_q4 : bits[i] == 8 ? &info->n_q8 : &info->n_f32) += 1;
        }
    }
    vp_free(&p);
    free(bits);
    free(own_scale);
    return rc;
}
