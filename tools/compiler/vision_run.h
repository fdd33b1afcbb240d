/* A vision blob built in memory and run in this process on a thread team
 * (nib eval MODEL.onnx, --auto-precision): the same open, io bytes and
 * executor as nib onnx-run --blob and the appliance. */
#ifndef NIB_VISION_RUN_H
#define NIB_VISION_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "tools/util/exec_team.h"

struct vision_runner {
    uint8_t *blob; /* owned */
    uint64_t len;
    struct nib_blob_view v;
    uint8_t *mem; /* the runtime memory */
    struct nib_exec e;
    struct nib_tool_team tt;
};

/* Take blob (malloc'd, len bytes; freed by vision_runner_close even when
 * this fails), open it as the runtime does and start `workers` threads.
 * Every output must be f32. 0, or -1 with a message. */
int vision_runner_open(struct vision_runner *r, uint8_t *blob, uint64_t len, uint32_t workers,
                       char *err, size_t errlen);

/* Run once on in[k] = the bytes of input record k (v.io[k].bytes each).
 * 0, or -1 with a message. */
int vision_runner_run(struct vision_runner *r, const uint8_t *const *in, char *err, size_t errlen);

/* Output j (0 = the first output record) after a run, and its length. */
const float *vision_runner_out(const struct vision_runner *r, uint32_t j, uint64_t *n);

void vision_runner_close(struct vision_runner *r);

/* The online CPUs, 1..16: the workers a tool run uses by default (a
 * vision plan gives the same bits for any count). */
uint32_t vision_default_workers(void);

#endif
