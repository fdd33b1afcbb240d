/* Calibration (`nib compile --method search|gptq`, docs/accuracy.md): the
 * statistics of every matrix's inputs, collected by running the model in
 * f32 on calibration text, and what the rounding methods make of them.
 *
 * The text's tokens are cut into sequences of NIB_CALIB_SEQ (each from
 * position 0, starting with BOS). The model runs layer by layer over every
 * calibration token (the
 * residual stream of all tokens kept between layers, the KV cache filled
 * as the tokens go), so only one layer's inputs and Hessians exist at a
 * time: for each matrix input, the importance of each input channel (the
 * mean of x^2 over the tokens) and, for gptq, the Hessian X X^T, from
 * which every matrix reading that input is quantized by
 * tools/compiler/gptq.h before the next layer runs. The packer
 * (tools/compiler/pack.c) then takes the prepared bytes (gptq) or
 * quantizes with the importance (search).
 *
 * Deterministic: sums run in token order and a fixed loop order, and the
 * f32 run is nibble's own executor (bitwise the same on every ISA and for
 * any split of its ops among workers), so the same model and text give the
 * same blob on every machine. Every phase (the f32 run, the Hessians, gptq,
 * the packer's rounding) runs on the worker threads. Tests check it
 * with NIB_CALIB_THREADS=N (worker threads; default: the online CPUs) and
 * NIB_CALIB_SCALAR=1 (the scalar kernels for the f32 run). */
#ifndef NIB_CALIB_H
#define NIB_CALIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/compiler/calib_store.h"
#include "tools/compiler/llama_import.h"
#include "tools/compiler/plan.h"
#include "tools/compiler/quant.h"

#define NIB_CALIB_TOKENS 1024 /* --calib-tokens default */
#define NIB_CALIB_SEQ 512     /* tokens per calibration sequence (or the context, if shorter) */
#define NIB_CALIB_MAX_THREADS 16

extern const char nib_calib_default_text[];

struct nib_calib_opts {
    enum nib_qmethod method; /* search: importance only; gptq: also prepared weights */
    const char *text;        /* calibration text, or NULL: nib_calib_default_text */
    size_t text_len;
    uint32_t max_tokens; /* tokens used, BOS included (0: NIB_CALIB_TOKENS); also capped
                          * by the context length */
    uint32_t threads;    /* worker threads (0: 1); results do not depend on it */
    FILE *progress;      /* a progress line per layer, or NULL */
    /* gptq: formats to prepare besides each matrix's own in po's plan
     * (auto-precision's upgrade), NULL-terminated by n_extra */
    const struct nib_qspec *extra;
    uint32_t n_extra;
};

/* Calibrate m for the blob that po describes (its formats). 0 and *out
 * (free with nib_calib_free, tools/compiler/calib_store.h), or -1 with a message (text too short,
 * out of memory, a matrix gptq could not quantize). */
int nib_calib_run(const struct llama_model *m, const struct plan_opts *po,
                  const struct nib_calib_opts *co, struct nib_calib **out, char *err,
                  size_t errlen);

/* nib compile's and nib eval's --method, --calib and --calib-tokens. */
struct nib_calib_args {
    enum nib_qmethod method; /* NIB_QM_DEFAULT */
    const char *path;        /* NULL: the built-in text */
    uint32_t tokens;         /* 0: NIB_CALIB_TOKENS */
};
#define NIB_CALIB_ARGS_INIT                                                                        \
    {                                                                                              \
        NIB_QM_DEFAULT, NULL, 0                                                                    \
    }
enum { NIB_CALIB_ARG_METHOD, NIB_CALIB_ARG_FILE, NIB_CALIB_ARG_TOKENS };
/* One of them (which: NIB_CALIB_ARG_*) with its value: 0, or -1 with a
 * message naming the option and the value. */
int nib_calib_arg(struct nib_calib_args *ca, int which, const char *value, char *err,
                  size_t errlen);

/* What nib compile and nib eval do with --method, --calib and
 * --calib-tokens: set po->method and, when the method uses calibration
 * and po quantizes anything (not --quant source), run it on the text of
 * path (NULL: the built-in text) and set po->calib (*out: free with
 * nib_calib_free after the blob is built; NULL when none was needed).
 * 0, or -1 with a message. */
int nib_calib_setup(const struct llama_model *m, struct plan_opts *po,
                    const struct nib_calib_args *ca, const struct nib_qspec *extra,
                    uint32_t n_extra, FILE *progress, struct nib_calib **out, char *err,
                    size_t errlen);

#endif
