/* f32 GEMV reference: each row's dot product in 8 lanes combined by
 * nib_tree8 (kernels/common/f32-math.h), so the order is fixed by this code,
 * not by the compiler, the thread count or the ISA; then + add[r]. */
#include "kernels/common/f32-math.h"

NIB_GEMV_F32_KERNEL(nib_gemv_f32_scalar, nib_dot_scalar)
