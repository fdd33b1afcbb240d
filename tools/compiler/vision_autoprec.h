/* --auto-precision for a vision model (docs/vision.md, "Auto-precision"):
 * which weighted nodes stay at 8 bits, from each node's measured
 * sensitivity to 4 bits. */
#ifndef NIB_VISION_AUTOPREC_H
#define NIB_VISION_AUTOPREC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/compiler/vision_quant.h"

#define VQ_AUTO_BUDGET_DEFAULT 0.25 /* --auto-budget */
#define VQ_AUTO_SAMPLES_DEFAULT 8   /* tuning inputs when --calib-count says nothing */

struct vq_auto_opts {
    double budget;    /* fraction of the weighted nodes' weights allowed at 8 bits, 0..1 */
    uint32_t workers; /* threads of each run (0: the online CPUs) */
    FILE *report;     /* the per-node table, or NULL */
};

/* Calibrate once (vq_calibrate, unless q->act_scale is given) and measure,
 * on q->calib_dir's inputs (at most q->calib_max, default
 * VQ_AUTO_SAMPLES_DEFAULT) or the built-in tuning set, each weighted node
 * that q->over does not name: every weighted node at 8 bits, that one at
 * 4. A node's sensitivity is how much that raises the rms error against
 * f32 (relative to max |f32|, averaged over outputs: vision_diff_score). Most sensitive first,
 * a node stays at 8 bits while its sensitivity is > 0 and the 8-bit
 * weights (the nodes named in q->over at q8 included) stay within budget x
 * all weighted nodes' weights; the rest get 4 bits.
 *
 * On success over[0..*n_over) holds q->over followed by one override per
 * measured node (room for VQ_MAX_OVERRIDES), and *act_scale the calibrated
 * scales (malloc'd, or q->act_scale itself when given: then *act_owned is
 * 0) for the final compile. 0, or -1 with a message. */
int vq_auto_precision(const struct nx_graph *g, const struct vision_opts *o,
                      const struct vq_opts *q, const struct vq_auto_opts *ao,
                      struct vq_override *over, uint32_t *n_over, float **act_scale, int *act_owned,
                      char *err, size_t errlen);

#endif
