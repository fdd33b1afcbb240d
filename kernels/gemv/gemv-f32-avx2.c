/* AVX2 f32 GEMV: the scalar reference's operations, 8 lanes at a time. */
#include "kernels/common/isa.h"

#if NIB_HAVE_AVX2
#include "kernels/common/f32-avx2.h"
NIB_GEMV_F32_KERNEL(nib_gemv_f32_avx2, nib_dot_avx2)
#else
typedef int nib_gemv_f32_avx2_unused;
#endif
