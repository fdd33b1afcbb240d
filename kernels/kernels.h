/* Compute kernels. One file per kernel, named by the grammar of
 * docs/kernels.md ("op-out-in-tile-isa": kernels/rope/rope-f32-avx2.c
 * defines nib_rope_f32_avx2); each SIMD variant has a scalar reference
 * with the same signature and gives its bits (the variants are reached
 * through the table in kernels/qkernels.h). Kernels never allocate and
 * never call into the system: all memory is passed in. Row ranges
 * [n_begin, n_end) let a thread team split work by output rows with a fixed
 * assignment, so results never depend on thread timing. Preconditions are
 * asserted at entry (kernels/common/pre.h). */
#ifndef NIB_KERNELS_H
#define NIB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Every ISA a kernel variant can be written for: each kernel is declared
 * once per suffix (a variant this build does not compile is declared but
 * never referenced; kernels/dispatch.c lists the compiled ones). */
#define NIB_ISA_SUFFIXES(X) X(scalar) X(avx2) X(neon)

/* y[r] = dot(w[r][0..k), x) (+ add[r] when add != NULL), r in [n_begin, n_end).
 * The dot product is summed in 8 interleaved partial sums combined in a
 * fixed tree, so every build and ISA gives the same bits for the same inputs. */
#define NIB_GEMV_F32_DECL(name)                                                                    \
    void name(const float *w, const float *x, float *y, const float *add, size_t n_begin,          \
              size_t n_end, size_t k)
typedef NIB_GEMV_F32_DECL((*nib_gemv_f32_fn));

/* out[i] = weight[i] * (x[i] / sqrt(mean(x^2) + eps)), the mean summed in
 * a fixed order (kernels/rmsnorm/rmsnorm-f32-scalar.c). */
#define NIB_RMSNORM_DECL(name)                                                                     \
    void name(const float *x, const float *weight, float *out, size_t n, float eps)
typedef NIB_RMSNORM_DECL((*nib_rmsnorm_fn));

/* Rotate adjacent pairs (r, r+1), r even, of the rows [r_begin, r_end) of
 * v, a run of heads of head_dim floats, where the pair lies in the first
 * rope_dim dims of its head; cs holds rope_dim/2 (cos, sin) pairs for this
 * position. r_begin and r_end are even (a matmul row block), so a pair is
 * never split between two calls. */
#define NIB_ROPE_DECL(name)                                                                        \
    void name(float *v, size_t r_begin, size_t r_end, size_t head_dim, size_t rope_dim,            \
              const float *cs)
typedef NIB_ROPE_DECL((*nib_rope_rows_fn));

/* Causal attention for one query position over cache rows t0..pos
 * (t0 > 0: a sliding window). With softcap c > 0 every score s becomes
 * c * nib_tanhf(s / c) before the softmax (kernels/common/f32-math.h).
 * q: n_heads x head_dim; kc/vc: KV head g's row of position t at
 * g x head_stride + t x row_stride floats (heads side by side in a row:
 * head_stride = head_dim; head by head, as blobs lay the cache out:
 * row_stride = head_dim), query head h reading KV head h / group;
 * out: n_heads x head_dim; att: scratch of
 * (pos - t0 + 1) floats per head, n_heads x ctx. Heads [h_begin, h_end).
 * Every variant gives the scalar reference's bits: the order of every
 * operation is fixed in kernels/attention/attention-f32-scalar.c. */
#define NIB_ATTENTION_DECL(name)                                                                   \
    void name(const float *q, const float *kc, const float *vc, float *out, float *att,            \
              size_t h_begin, size_t h_end, size_t head_dim, size_t group, size_t row_stride,      \
              size_t head_stride, size_t t0, size_t pos, size_t ctx, float scale, float softcap)
typedef NIB_ATTENTION_DECL((*nib_attention_fn));

/* out[i] = silu(a[i]) * b[i] = a[i] / (1 + exp(-a[i])) * b[i], with
 * nibble's exp (kernels/common/f32-math.h). */
#define NIB_SILUMUL_DECL(name) void name(const float *a, const float *b, float *out, size_t n)
typedef NIB_SILUMUL_DECL((*nib_silu_mul_fn));

/* out[i] = gelu(a[i]) * b[i], GELU's tanh form
 * 0.5 a (1 + tanh(u)), u = sqrt(2/pi) (a + 0.044715 a^3), computed as the
 * identical a / (1 + exp(-2u)) with nibble's exp (nib_gelu_mul1 in
 * kernels/common/f32-math.h: no cancellation for negative a); same
 * signature as silu-mul. */
#define NIB_GELUMUL_DECL(name) NIB_SILUMUL_DECL(name)

/* nib_gemv_f32_<isa>, nib_rmsnorm_f32_<isa>, nib_rope_f32_<isa>,
 * nib_attention_f32_<isa>, nib_silumul_f32_<isa>. */
#define NIB_F32_KERNELS_DECLARE(isa)                                                               \
    NIB_GEMV_F32_DECL(nib_gemv_f32_##isa);                                                         \
    NIB_RMSNORM_DECL(nib_rmsnorm_f32_##isa);                                                       \
    NIB_ROPE_DECL(nib_rope_f32_##isa);                                                             \
    NIB_ATTENTION_DECL(nib_attention_f32_##isa);                                                   \
    NIB_SILUMUL_DECL(nib_silumul_f32_##isa);                                                       \
    NIB_GELUMUL_DECL(nib_gelumul_f32_##isa);
NIB_ISA_SUFFIXES(NIB_F32_KERNELS_DECLARE)

#endif
