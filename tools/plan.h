/* The planner: turns an imported model into nibble's flat execution plan.
 * It fuses projections that read the same input (Q|K|V, gate|up), puts the
 * residual adds into the projections' epilogues, lays out every activation
 * buffer and the KV cache in one memory region, and lists the tensors in
 * the order the plan streams them. Nothing here touches weight data. */
#ifndef NIB_PLAN_H
#define NIB_PLAN_H

#include "model_blob/blob_format.h"
#include "tools/llama_import.h"

enum plan_tensor_kind {
    PT_ROWS = 0,    /* rows concatenated from up to 3 source weights */
    PT_ROPE_TABLE,  /* cos/sin per position, computed */
};

struct plan_tensor {
    struct nib_tensor_rec rec;          /* offset/size filled by the packer */
    enum plan_tensor_kind kind;
    const struct llama_weight *src[3];  /* PT_ROWS: stacked in this order */
    uint32_t n_src;
};

struct nib_plan {
    struct nib_hparams hp;
    struct plan_tensor *tensors;
    uint32_t n_tensors;
    struct nib_op *ops;
    uint32_t n_ops;
    uint64_t act_size, kv_size;
    uint64_t logits_off, token_off, pos_off;
};

struct plan_opts {
    uint32_t max_ctx;   /* cap on the model's context length (0: 2048) */
    uint32_t dtype;     /* enum nib_dtype for matrices; only NIB_DT_F32 today */
};

/* 0, or -1 with a message. Free with nib_plan_free. */
int nib_plan_build(struct nib_plan *p, const struct llama_model *m, const struct plan_opts *o,
                   char *err, size_t errlen);
void nib_plan_free(struct nib_plan *p);

#endif
