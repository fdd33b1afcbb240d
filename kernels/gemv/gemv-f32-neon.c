/* NEON f32 GEMV: the scalar reference's operations, 2 x 4 lanes. */
#include "kernels/common/isa.h"

#if NIB_HAVE_NEON
#include "kernels/common/f32-neon.h"
NIB_GEMV_F32_KERNEL(nib_gemv_f32_neon, nib_dot_neon)
#else
typedef int nib_gemv_f32_neon_unused;
#endif
