/* What a calibration leaves for the packer (tools/compiler/calib.h makes
 * it): per matrix, the importance of its input channels and gptq's packed
 * bytes in the formats asked for. Kept apart from the calibration run so
 * that the packer reads it without depending on the executor. */
#ifndef NIB_CALIB_STORE_H
#define NIB_CALIB_STORE_H

#include <stdint.h>

#include "tools/compiler/llama_import.h"
#include "tools/compiler/quant.h"

#define NIB_CALIB_MAX_PREP 4 /* prepared formats per matrix */

struct nib_calib_prep {
    struct nib_qspec spec;
    uint8_t *bytes; /* nib_qformat_size(spec, rows, cols), malloc'd */
};

struct nib_calib_matrix { /* one matrix (a plan tensor's source) */
    const struct llama_weight *w;
    float *imp; /* w->cols: mean x^2 of each input channel (malloc'd) */
    struct nib_calib_prep prep[NIB_CALIB_MAX_PREP];
    uint32_t n_prep;
};

struct nib_calib {
    uint32_t n_tokens; /* tokens the statistics were taken over */
    uint32_t threads; /* worker threads for the packer's rounding (the bytes do not depend on it) */
    struct nib_calib_matrix *ws;
    uint32_t n_ws;
};

/* The entry of w, or NULL. */
struct nib_calib_matrix *nib_calib_find(const struct nib_calib *c, const struct llama_weight *w);
void nib_calib_free(struct nib_calib *c);

/* Tokens the statistics were taken over. */
uint32_t nib_calib_tokens(const struct nib_calib *c);
/* Importance of each of w's input columns (w->cols floats: mean x^2), or
 * NULL when w is no matrix input the run saw (an untied embedding table)
 * or c is NULL. */
const float *nib_calib_importance(const struct nib_calib *c, const struct llama_weight *w);
/* gptq's packed bytes of w in spec (nib_qformat_size(spec, w->rows,
 * w->cols) bytes), or NULL when not prepared or c is NULL. */
const uint8_t *nib_calib_packed(const struct nib_calib *c, const struct llama_weight *w,
                                struct nib_qspec spec);

#endif
