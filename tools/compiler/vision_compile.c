/* vision_compile_mem (vision_quant.h): lower, place and build a vision
 * blob in memory, the one path nib compile, nib eval and --auto-precision
 * take. */
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/vision_quant.h"
#include "tools/util/tool_util.h"

static int quantizes(const struct vq_opts *q)
{
    return q && (q->bits || q->n_over);
}

int vision_compile_mem(const struct nx_graph *g, const struct vision_opts *o,
                       const struct vq_opts *q, uint8_t **blob, uint64_t *len,
                       struct vision_compile_info *info, char *err, size_t errlen)
{
    if (quantizes(q))
        return nib_fail(err, errlen, "quantized vision blobs are not built yet");
    struct vision_plan p;
    if (vp_lower(g, o, &p, err, errlen))
        return -1;
    vp_place(&p);
    int rc = vp_build_blob(&p, blob, len, err, errlen);
    if (!rc && info) {
        memset(info, 0, sizeof *info);
        info->n_ops = p.n_ops, info->n_tensors = p.n_w, info->n_io = p.n_io;
        info->arena_bytes = p.arena;
        for (uint32_t i = 0; i < p.n_w; i++)
            info->weight_bytes += (uint64_t)p.w[i].rows * 256 * 4;
        for (uint32_t i = 0; i < g->n_order; i++)
            info->n_f32 += (uint32_t)vq_weighted(g, g->order[i]);
    }
    vp_free(&p);
    return rc;
}
