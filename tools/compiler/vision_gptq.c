/* GPTQ codes for vision weights (tools/compiler/vision_gptq.h). */
#include "tools/compiler/vision_gptq.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/qformat.h"
#include "kernels/dtype.h"
#include "tools/compiler/gptq.h"
#include "tools/util/tool_util.h"

int vq_gptq_rows(const float *w, uint32_t rows, uint32_t k, double *h, uint32_t threads, int8_t *q,
                 float *scale, char *err, size_t errlen)
{
    struct nib_qlayout l;
    if (nib_qlayout_get(&l, NIB_DT_Q4C, 0, rows, k) || l.code_bits != 4 || l.scale_bytes != 4)
        return nib_fail(err, errlen, "gptq: no q4c layout for %ux%u weights", rows, k);
    float *wc = malloc((size_t)rows * k * sizeof *wc);
    uint8_t *out = malloc(l.size);
    if (!wc || !out) {
        free(wc), free(out);
        return nib_fail(err, errlen, "gptq: out of memory for %ux%u weights", rows, k);
    }
    memcpy(wc, w, (size_t)rows * k * sizeof *wc);
    const struct nib_gptq_opts o = {NIB_GPTQ_DAMP, threads ? threads : 1};
    char why[256];
    int rc = nib_gptq_quantize(&l, wc, h, &o, out, why, sizeof why);
    if (rc)
        nib_fail(err, errlen, "gptq: %s", why);
    for (uint32_t r = 0; rc == 0 && r < rows; r++) { /* back from the packed layout */
        memcpy(&scale[r], out + nib_ql_scale_off(&l, r, 0), sizeof scale[r]);
        for (uint32_t c = 0; c < k; c++) {
            unsigned sh;
            const uint8_t b = out[nib_ql_code_off(&l, r, c, &sh)];
            q[(size_t)r * k + c] = (int8_t)((int)((b >> sh) & 15u) - 8);
        }
    }
    free(wc), free(out);
    return rc;
}
