/* The one test of which SIMD variants a translation unit compiles: every
 * AVX2 file is guarded by NIB_HAVE_AVX2, every NEON file by NIB_HAVE_NEON
 * (and compiles to nothing otherwise), and the dispatch table lists
 * exactly the ISAs defined here. F16C is part of the AVX2 set because the
 * per-group formats convert their f16 scales with vcvtph2ps. */
#ifndef NIB_KERNELS_ISA_H
#define NIB_KERNELS_ISA_H

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define NIB_HAVE_AVX2 1
#else
#define NIB_HAVE_AVX2 0
#endif

#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
#define NIB_HAVE_NEON 1
#else
#define NIB_HAVE_NEON 0
#endif

#endif
