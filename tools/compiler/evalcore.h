/* The measuring core of nib eval and nib compile --auto-precision: a blob
 * built in memory with its executor, and the comparison of two of them on
 * a token sequence (teacher forcing). */
#ifndef NIB_EVALCORE_H
#define NIB_EVALCORE_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "tools/compiler/model_load.h"

struct runner {
    uint8_t *blob;
    size_t size;
    struct nib_blob_view v;
    uint8_t *mem;
    struct nib_exec e;
};

int runner_open(struct runner *r, const struct llama_model *m, const struct plan_opts *po,
                char *err, size_t errlen);
void runner_close(struct runner *r);

struct eval_result {
    uint32_t n; /* predictions scored */
    double kl_mean, top1, ppl_ref, ppl_q;
};

/* Score q against ref on ids[0..n_ids). 0, or -1 when out of memory. */
int evaluate(struct runner *ref, struct runner *q, const uint32_t *ids, uint32_t n_ids,
             struct eval_result *res);

/* Bits per weight over every matrix a matmul reads (the LM head
 * included; scales, minima and padding counted): of a blob as packed, or
 * of a model's tensors as its file stores them. */
double runner_matmul_bits(const struct runner *r);
double model_matmul_bits(const struct llama_model *m);

/* Weight bytes of a blob (all tensors). */
uint64_t runner_weight_bytes(const struct runner *r);

#endif
