/* GPTQ (tools/compiler/gptq.h). */
#include "tools/compiler/gptq.h"

#include <stdio.h>

int nib_gptq_quantize(const struct nib_qlayout *l, float *w, double *h,
                      const struct nib_gptq_opts *o, uint8_t *out, char *err, size_t errlen)
{
    (void)l, (void)w, (void)h, (void)o, (void)out;
    snprintf(err, errlen, "gptq: not built yet");
    return -1;
}
