/* vq_cli.h: the quantisation options of nib compile / nib eval MODEL.onnx. */
#include "tools/cli/vq_cli.h"

#include <stdlib.h>
#include <string.h>

static int parse_bits(const char *s, uint32_t *bits)
{
    if (!strcmp(s, "q4"))
        *bits = 4;
    else if (!strcmp(s, "q8"))
        *bits = 8;
    else if (!strcmp(s, "f32"))
        *bits = 0;
    else
        return -1;
    return 0;
}

void vq_cli_init(struct vq_cli *c)
{
    memset(c, 0, sizeof *c);
    c->q.bits = 4;
    c->q.keep_ends = 1;
    c->q.over = c->over;
    c->auto_opts.budget = VQ_AUTO_BUDGET_DEFAULT;
}

int vq_cli_take(struct vq_cli *c, struct nib_args *a, int id)
{
    float f;
    switch (id) {
    case VQ_O_QUANT:
        if (parse_bits(a->value, &c->q.bits))
            return nib_args_fail(a, "--quant %s: q4, q8 or f32", a->value);
        return 0;
    case VQ_O_PRECISION: {
        const char *eq = strrchr(a->value, '=');
        uint32_t bits;
        if (!eq || eq == a->value || parse_bits(eq + 1, &bits))
            return nib_args_fail(a, "--precision %s: NODE=q4, NODE=q8 or NODE=f32", a->value);
        if ((size_t)(eq - a->value) >= sizeof c->over[0].node)
            return nib_args_fail(a, "--precision: the node name is longer than %zu bytes",
                                 sizeof c->over[0].node - 1);
        if (c->q.n_over == VQ_MAX_OVERRIDES)
            return nib_args_fail(a, "more than %d --precision", VQ_MAX_OVERRIDES);
        struct vq_override *o = &c->over[c->q.n_over++];
        memcpy(o->node, a->value, (size_t)(eq - a->value));
        o->node[eq - a->value] = 0;
        o->bits = bits;
        return 0;
    }
    case VQ_O_CALIB: c->q.calib_dir = a->value; return 0;
    case VQ_O_CALIB_COUNT: return nib_args_u32(a, 1, 100000, &c->q.calib_max);
    case VQ_O_CALIB_ABSMAX: c->q.calib_absmax = 1, c->q.calib_clip = 0; return 0;
    case VQ_O_CALIB_CLIP: c->q.calib_clip = 1, c->q.calib_absmax = 0; return 0;
    case VQ_O_METHOD:
        if (vq_method_parse(a->value, &c->q.method))
            return nib_args_fail(a, "--method %s: rtn or gptq", a->value);
        return 0;
    case VQ_O_AUTO: c->auto_prec = 1; return 0;
    case VQ_O_AUTO_BUDGET:
        if (nib_args_f32(a, 0.0f, 1.0f, &f))
            return 2;
        c->auto_opts.budget = f;
        return 0;
    default: return nib_args_fail(a, "unknown option");
    }
}

int vq_cli_finish(struct vq_cli *c, const struct nx_graph *g, const struct vision_opts *o,
                  FILE *report, char *err, size_t errlen)
{
    if (!c->auto_prec)
        return 0;
    uint32_t n = 0;
    c->auto_opts.report = report;
    if (vq_auto_precision(g, o, &c->q, &c->auto_opts, c->auto_over, &n, &c->act_scale,
                          &c->act_owned, err, errlen))
        return -1;
    c->q.over = c->auto_over;
    c->q.n_over = n;
    c->q.act_scale = c->act_scale;
    return 0;
}

void vq_cli_free(struct vq_cli *c)
{
    if (c->act_owned)
        free(c->act_scale);
    c->act_scale = NULL;
    c->act_owned = 0;
}
