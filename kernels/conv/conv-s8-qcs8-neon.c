/* Quantized convolution (neon): the implicit GEMM of kernels/qconv.c over
 * the neon q4c / q8c matmul kernels, whose bits every ISA shares. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include <assert.h>

#include "kernels/conv.h"

NIB_QCONV_DECL(nib_conv_s8_qcs8_neon)
{
    assert(nib_conv_shape_ok(s) && wt && (wt->dtype == NIB_DT_Q4C || wt->dtype == NIB_DT_Q8C));
    nib_qconv_run(wt->dtype == NIB_DT_Q4C ? nib_gemm_f32_q4cs8_n8_neon : nib_gemm_f32_q8cs8_n8_neon,
                  s, x, x_scale, wt, e, scratch, oh_begin, oh_end);
}
#else
typedef int nib_conv_s8_qcs8_neon_unused;
#endif
