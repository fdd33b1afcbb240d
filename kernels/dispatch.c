/* The kernel table of each ISA this build compiles, generated from two
 * lists: the ISAs below (one line each, guarded by kernels/common/isa.h)
 * and the quantized formats (NIB_QGEMM_FORMATS in kernels/qkernels.h).
 * Every table names the same kernels, by the grammar of docs/kernels.md. */
#include "kernels/common/isa.h"
#include "kernels/qkernels.h"

/* X(isa suffix, table name, enum nib_isa bit) for each compiled ISA. */
#define NIB_ISA_SCALAR_ENTRY(X) X(scalar, "scalar", NIB_ISA_SCALAR)
#if NIB_HAVE_AVX2
#define NIB_ISA_AVX2_ENTRY(X) X(avx2, "avx2", NIB_ISA_AVX2)
#else
#define NIB_ISA_AVX2_ENTRY(X)
#endif
#if NIB_HAVE_NEON
#define NIB_ISA_NEON_ENTRY(X) X(neon, "neon-dot", NIB_ISA_NEON_DOT)
#else
#define NIB_ISA_NEON_ENTRY(X)
#endif
#define NIB_COMPILED_ISAS(X) NIB_ISA_SCALAR_ENTRY(X) NIB_ISA_AVX2_ENTRY(X) NIB_ISA_NEON_ENTRY(X)

#define GEMM_ENTRY(dt, types, sfx) [dt] = nib_gemm_f32_##types##_n8_##sfx,
#define TABLE(sfx, label, bit)                                                                     \
    static const struct nib_qkernels k_##sfx = {                                                   \
        .name = label,                                                                             \
        .isa = bit,                                                                                \
        .qact = nib_qact_s8_f32_##sfx,                                                             \
        .gemm = {NIB_QGEMM_FORMATS(GEMM_ENTRY, sfx)},                                              \
        .attention = nib_attention_f32_##sfx,                                                      \
        .rmsnorm = nib_rmsnorm_f32_##sfx,                                                          \
        .rope_rows = nib_rope_f32_##sfx,                                                           \
        .silu_mul = nib_silumul_f32_##sfx,                                                         \
        .gelu_mul = nib_gelumul_f32_##sfx,                                                         \
        .gemv_f32 = nib_gemv_f32_##sfx,                                                            \
    };
NIB_COMPILED_ISAS(TABLE)

const struct nib_qkernels *nib_qkernels_get(uint32_t isa)
{
#define CASE(sfx, label, bit)                                                                      \
    case bit: return &k_##sfx;
    switch (isa) {
        NIB_COMPILED_ISAS(CASE)
    default: return NULL; /* AVX-512 VNNI: no table; the AVX2 one takes its kernels */
    }
#undef CASE
}

const char *nib_qkernels_label(const struct nib_qkernels *k)
{
    if (k->isa == NIB_ISA_AVX2 && nib_avx512vnni_available())
        return "avx2, q4, attention and convolutions on avx512";
    return k->name;
}

uint32_t nib_prefetch_bytes = NIB_PF_DIST;

int nib_prefetch_set(uint32_t bytes)
{
    if (!nib_prefetch_valid(bytes))
        return -1;
    __atomic_store_n(&nib_prefetch_bytes, bytes, __ATOMIC_RELAXED);
    return 0;
}
