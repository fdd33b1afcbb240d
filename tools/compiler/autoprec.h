/* nib compile --auto-precision: keep the most sensitive weight matrices in
 * q8c within a byte budget (or until a KL target), measured on calibration
 * text against the model in f32. */
#ifndef NIB_AUTOPREC_H
#define NIB_AUTOPREC_H

#include <stdint.h>
#include <stdio.h>

#include "tools/compiler/plan.h"

struct autoprec_opts {
    uint64_t max_bytes; /* weight bytes allowed (0: no byte budget) */
    double max_kl;      /* stop once the estimated mean KL is below (0: none) */
    uint32_t positions; /* calibration positions */
    FILE *report;       /* the per-tensor table, or NULL */
};

/* On success *precision_out is a malloc'd --precision string for po
 * (free it after planning). 0, or -1 with a message. */
int nib_autoprec(const struct llama_model *m, struct plan_opts *po, const struct autoprec_opts *ao,
                 char **precision_out, char *err, size_t errlen);

#endif
