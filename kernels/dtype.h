/* The weight formats and instruction sets the kernels know. They live here,
 * with the kernels that consume them, and the blob format
 * (model_blob/blob_format.h) records them in its tensor table and header:
 * the numbering is part of the blob format and never changes. */
#ifndef NIB_KERNELS_DTYPE_H
#define NIB_KERNELS_DTYPE_H

/* ISA bits a kernel variant (and so a blob) may require; the CPU must have
 * every bit set. */
enum nib_isa {
    NIB_ISA_SCALAR = 0,
    NIB_ISA_AVX2 = 1u << 0, /* AVX2 + FMA + F16C */
    NIB_ISA_AVX512VNNI = 1u << 1,
    NIB_ISA_NEON_DOT = 1u << 2,
};

/* Weight formats. The packed layout of each is described by the tensor's
 * tile_n / tile_k / group fields (kernels/qformat.h, docs/blob-format.md). */
enum nib_dtype {
    NIB_DT_F32 = 0, /* row-major [rows][cols] floats, tile 1x1 */
    NIB_DT_Q4 = 1,  /* symmetric int4 per group */
    NIB_DT_Q4A = 2, /* asymmetric int4 per group */
    NIB_DT_Q4C = 3, /* int4 per output channel */
    NIB_DT_Q8C = 4, /* int8 per output channel, or per group */
    NIB_DT_Q4F = 5, /* 4-bit codes 0..15, f32 scale and f32 minimum per group of
                     * 16 or 32: holds GGUF Q4_1, Q4_K, Q2_K, Q3_K exactly */
    NIB_DT_Q8F = 6, /* int8 codes, f32 scale and f32 minimum per group of 16 or
                     * 32: holds GGUF Q5_1, Q5_K, Q6_K, IQ4_XS exactly */
    NIB_DT_Q4H = 7, /* symmetric int4 in sub-blocks of 16, each with a 6-bit
                     * signed multiple of an f16 scale per super-block of 32,
                     * 64 or 128 (two-level scales): 4.5 bits at 128 */
    NIB_DT_COUNT
};

#endif
