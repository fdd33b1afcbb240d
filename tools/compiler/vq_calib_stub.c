/* Until calibration lands (vision_quant.h vq_calibrate): refused. */
#include "tools/compiler/vision_quant.h"
#include "tools/util/tool_util.h"

int vq_calibrate(const struct nx_graph *g, const struct vision_opts *o, const struct vq_opts *q,
                 float **scale, char *err, size_t errlen)
{
    (void)g, (void)o, (void)q;
    *scale = NULL;
    return nib_fail(err, errlen, "calibration is not built yet");
}
