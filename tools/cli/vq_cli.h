/* The quantisation options of nib compile MODEL.onnx and nib eval
 * MODEL.onnx, parsed one way (docs/vision.md, "Quantisation"):
 *   --quant q4|q8|f32        the weighted nodes' default (q4)
 *   --precision NODE=q4|q8|f32  one node (repeatable; applied last)
 *   --calib DIR, --calib-count N, --calib-absmax, --calib-clip
 *   --method rtn|gptq        how 4-bit weights are rounded
 *   --auto-precision, --auto-budget F   measured per-node precision
 * A front end splices VQ_CLI_OPTS into its option table and hands each id
 * >= VQ_O_FIRST to vq_cli_take. */
#ifndef NIB_VQ_CLI_H
#define NIB_VQ_CLI_H

#include <stdio.h>

#include "tools/compiler/vision_autoprec.h"
#include "tools/compiler/vision_quant.h"
#include "tools/util/args.h"

enum {
    VQ_O_FIRST = 200,
    VQ_O_QUANT = VQ_O_FIRST,
    VQ_O_PRECISION,
    VQ_O_CALIB,
    VQ_O_CALIB_COUNT,
    VQ_O_AUTO,
    VQ_O_AUTO_BUDGET,
    VQ_O_CALIB_ABSMAX,
    VQ_O_CALIB_CLIP,
    VQ_O_METHOD,
};

#define VQ_CLI_OPTS                                                                                \
    {"--quant", VQ_O_QUANT, 1}, {"--precision", VQ_O_PRECISION, 1}, {"--calib", VQ_O_CALIB, 1},    \
        {"--calib-count", VQ_O_CALIB_COUNT, 1}, {"--calib-absmax", VQ_O_CALIB_ABSMAX, 0},          \
        {"--calib-clip", VQ_O_CALIB_CLIP, 0}, {"--auto-precision", VQ_O_AUTO, 0},                  \
        {"--method", VQ_O_METHOD, 1},                                                              \
    {                                                                                              \
        "--auto-budget", VQ_O_AUTO_BUDGET, 1                                                       \
    }

#define VQ_CLI_USAGE                                                                               \
    "  --quant q4|q8|f32  weights of every weighted node (Conv, Gemm, MatMul by a\n"               \
    "                     constant): q4 (default; the first and last at q8), q8, f32\n"            \
    "  --precision NODE=q4|q8|f32  one node's weights (repeatable), applied last\n"                \
    "  --calib DIR        calibration inputs (.npy, PNG, PPM, raw), in name order;\n"              \
    "                     default: a built-in synthetic set\n"                                     \
    "  --calib-count N    use at most N calibration inputs\n"                                      \
    "  --calib-absmax     activation scales from the absmax (the default)\n"                       \
    "  --calib-clip       activation scales from the least-error clip instead\n"                   \
    "  --method rtn|gptq  4-bit weights: nearest code (rtn) or error feedback against\n"           \
    "                     the calibration inputs (gptq, the default)\n"                            \
    "  --auto-precision   measure each weighted node's sensitivity to 4 bits and keep\n"           \
    "                     the most sensitive at 8 bits (prints the table)\n"                       \
    "  --auto-budget F    the fraction of weights --auto-precision may keep at 8 bits\n"           \
    "                     (default 0.25)\n"

struct vq_cli {
    struct vq_opts q;
    struct vq_override over[VQ_MAX_OVERRIDES];
    int auto_prec;
    struct vq_auto_opts auto_opts;
    /* after vq_cli_finish: what --auto-precision chose */
    struct vq_override auto_over[VQ_MAX_OVERRIDES];
    float *act_scale;
    int act_owned;
};

/* nib compile's defaults: q4, the ends at q8, synthetic calibration. */
void vq_cli_init(struct vq_cli *c);

/* Option id (>= VQ_O_FIRST) with a->value: 0, or 2 after a usage message. */
int vq_cli_take(struct vq_cli *c, struct nib_args *a, int id);

/* After import: with --auto-precision, measure and make c->q carry the
 * chosen overrides and the calibrated scales (the table to report, or
 * NULL). Then compile with &c->q. 0, or -1 with a message. */
int vq_cli_finish(struct vq_cli *c, const struct nx_graph *g, const struct vision_opts *o,
                  FILE *report, char *err, size_t errlen);

void vq_cli_free(struct vq_cli *c);

#endif
