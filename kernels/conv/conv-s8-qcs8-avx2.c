/* Quantized convolution (avx2): the implicit GEMM of kernels/qconv.c over
 * the avx2 q4c / q8c matmul kernels, whose bits every ISA shares. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include <assert.h>

#include "kernels/conv.h"

NIB_QCONV_DECL(nib_conv_s8_qcs8_avx2)
{
    assert(nib_conv_shape_ok(s) && wt && (wt->dtype == NIB_DT_Q4C || wt->dtype == NIB_DT_Q8C));
    nib_qconv_run(wt->dtype == NIB_DT_Q4C ? nib_gemm_f32_q4cs8_n8_avx2 : nib_gemm_f32_q8cs8_n8_avx2,
                  s, x, x_scale, wt, e, scratch, oh_begin, oh_end);
}
#else
typedef int nib_conv_s8_qcs8_avx2_unused;
#endif
