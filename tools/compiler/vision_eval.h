/* The comparison of nib eval MODEL.onnx and --auto-precision: a candidate
 * vision blob (quantized) against the f32 blob of the same model, output
 * by output, on the same samples. */
#ifndef NIB_VISION_EVAL_H
#define NIB_VISION_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "tools/compiler/vision_run.h"
#include "tools/compiler/vision_samples.h"

/* The f32 run's outputs of every sample, kept to compare candidates with. */
struct vision_ref {
    uint32_t n_samples, n_out;
    float **out;     /* out[s * n_out + j] */
    uint64_t *len;   /* floats of output j */
    double *max_ref; /* max |f32| of output j over every sample */
};

int vision_ref_make(struct vision_ref *rf, struct vision_runner *f32,
                    const struct vision_samples *s, char *err, size_t errlen);
void vision_ref_free(struct vision_ref *rf);

struct vision_out_diff {
    double max_abs, mean_abs; /* |candidate - f32| over every element of every sample */
    double rms;               /* the root of the mean squared difference */
    double max_ref;           /* max |f32| */
    int classifier;           /* one row of scores: top-1 is compared */
    uint32_t top1_same;       /* samples whose argmax agrees */
    uint64_t steps;           /* a sequence of score rows: rows compared, over every sample */
    uint64_t steps_changed;   /* rows whose argmax differs from f32's */
};

/* 1 when an output of these dims is one row of scores (every dim but the
 * last is 1, the last >= 2). */
int vision_is_classifier(const struct nib_io_rec *rec);

/* The rows of an output read as a sequence of score rows: dims 1 x T x C
 * with T > 1 and C >= 2 (a CTC recogniser's steps); 0 otherwise. */
uint64_t vision_sequence_steps(const struct nib_io_rec *rec);

/* Run cand on every sample of s and compare with rf. d: rf->n_out
 * entries. 0, or -1 with a message. */
int vision_compare(const struct vision_ref *rf, struct vision_runner *cand,
                   const struct vision_samples *s, struct vision_out_diff *d, char *err,
                   size_t errlen);

/* One number for a comparison, the score --auto-precision ranks nodes by:
 * the mean over outputs of rms / max_ref. Squares, so that a few large
 * differences (a class or a pixel that flips) outweigh diffuse noise over
 * the many near-zero scores of a softmax. (Adding a sequence output's
 * share of changed steps was tried and ranked worse: docs/vision.md.) */
double vision_diff_score(const struct vision_out_diff *d, uint32_t n_out);

#endif
