/* The kernel table of each ISA this build has. */
#include "kernels/qkernels.h"

static const struct nib_qkernels k_scalar = {
    "scalar", NIB_ISA_SCALAR, nib_qact_f32s8_scalar,
    {NULL, nib_gemm_q4s8_n8_scalar, nib_gemm_q4as8_n8_scalar, nib_gemm_q4cs8_n8_scalar,
     nib_gemm_q8cs8_n8_scalar},
    nib_attention_f32_scalar,
    nib_rmsnorm_f32_scalar,
    nib_rope_rows_f32_scalar,
    nib_silu_mul_f32_scalar,
    nib_gemv_f32_scalar,
};

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
static const struct nib_qkernels k_avx2 = {
    "avx2", NIB_ISA_AVX2, nib_qact_f32s8_avx2,
    {NULL, nib_gemm_q4s8_n8_avx2, nib_gemm_q4as8_n8_avx2, nib_gemm_q4cs8_n8_avx2,
     nib_gemm_q8cs8_n8_avx2},
    nib_attention_f32_avx2,
    nib_rmsnorm_f32_avx2,
    nib_rope_rows_f32_avx2,
    nib_silu_mul_f32_avx2,
    nib_gemv_f32_avx2,
};
#endif

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
static const struct nib_qkernels k_neon = {
    "neon-dot", NIB_ISA_NEON_DOT, nib_qact_f32s8_neon,
    {NULL, nib_gemm_q4s8_n8_neon, nib_gemm_q4as8_n8_neon, nib_gemm_q4cs8_n8_neon,
     nib_gemm_q8cs8_n8_neon},
    nib_attention_f32_neon,
    nib_rmsnorm_f32_neon,
    nib_rope_rows_f32_neon,
    nib_silu_mul_f32_neon,
    nib_gemv_f32_neon,
};
#endif

const struct nib_qkernels *nib_qkernels_get(uint32_t isa)
{
    switch (isa) {
    case NIB_ISA_SCALAR: return &k_scalar;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    case NIB_ISA_AVX2: return &k_avx2;
#endif
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
    case NIB_ISA_NEON_DOT: return &k_neon;
#endif
    default: return NULL; /* AVX-512 VNNI: no variant is written */
    }
}
