/* What the vision kernels share whatever the ISA (kernels/conv.h): shape
 * checks, weight packing, scratch sizes, the resize coordinate tables and
 * the table of variants (the quantized implicit GEMM: kernels/qconv.c). */
#include "kernels/conv.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "kernels/common/isa.h"

uint32_t nib_conv_out_dim(uint32_t in, uint32_t k, uint32_t stride, uint32_t pad0, uint32_t pad1,
                          uint32_t dil)
{
    if (k == 0 || stride == 0 || dil == 0)
        return 0;
    uint64_t span = (uint64_t)dil * (k - 1) + 1, total = (uint64_t)in + pad0 + pad1;
    if (total < span)
        return 0;
    return (uint32_t)((total - span) / stride + 1);
}

int nib_conv_shape_ok(const struct nib_conv_shape *s)
{
    const uint32_t dim_max = 1u << 16, ch_max = 1u << 20;
    if (!s || !s->h || !s->w || !s->oh || !s->ow || !s->kh || !s->kw)
        return 0;
    if (s->h > dim_max || s->w > dim_max || s->oh > dim_max || s->ow > dim_max || s->kh > dim_max ||
        s->kw > dim_max)
        return 0;
    if (!s->c_in || !s->c_out || s->c_in > ch_max || s->c_out > ch_max || !s->groups)
        return 0;
    if (s->c_in % s->groups || s->c_out % s->groups)
        return 0;
    if (!s->stride_h || !s->stride_w || !s->dil_h || !s->dil_w || s->stride_h > dim_max ||
        s->stride_w > dim_max || s->dil_h > dim_max || s->dil_w > dim_max)
        return 0;
    /* the pads are smaller than the dilated window: no output reads
     * padding only on the top/left */
    uint64_t span_h = (uint64_t)s->dil_h * (s->kh - 1) + 1,
             span_w = (uint64_t)s->dil_w * (s->kw - 1) + 1;
    if (s->pad_top >= span_h || s->pad_left >= span_w)
        return 0;
    /* the last output's window starts inside the input */
    if ((uint64_t)(s->oh - 1) * s->stride_h >= (uint64_t)s->h + s->pad_top ||
        (uint64_t)(s->ow - 1) * s->stride_w >= (uint64_t)s->w + s->pad_left)
        return 0;
    return 1;
}

/* ---- f32 packing ---- */

static uint32_t round8(uint32_t n)
{
    return (n + 7u) & ~7u;
}

size_t nib_conv_packed_f32_size(const struct nib_conv_shape *s)
{
    uint32_t icg = s->c_in / s->groups, ocg = s->c_out / s->groups;
    return (size_t)s->groups * round8(ocg) * s->kh * s->kw * icg;
}

void nib_conv_pack_f32(const struct nib_conv_shape *s, const float *w, float *wp)
{
    uint32_t icg = s->c_in / s->groups, ocg = s->c_out / s->groups, nb = round8(ocg) / 8;
    size_t taps = (size_t)s->kh * s->kw * icg;
    for (uint32_t g = 0; g < s->groups; g++)
        for (uint32_t b = 0; b < nb; b++) {
            float *blk = wp + ((size_t)g * nb + b) * taps * 8;
            for (uint32_t ky = 0; ky < s->kh; ky++)
                for (uint32_t kx = 0; kx < s->kw; kx++)
                    for (uint32_t ic = 0; ic < icg; ic++)
                        for (uint32_t j = 0; j < 8; j++) {
                            uint32_t o = b * 8 + j;
                            size_t t = ((size_t)ky * s->kw + kx) * icg + ic;
                            blk[t * 8 + j] =
                                o < ocg
                                    ? w[((((size_t)g * ocg + o) * icg + ic) * s->kh + ky) * s->kw +
                                        kx]
                                    : 0.0f;
                        }
        }
}

size_t nib_dwconv_packed_f32_size(const struct nib_conv_shape *s)
{
    return (size_t)s->kh * s->kw * round8(s->c_out);
}

void nib_dwconv_pack_f32(const struct nib_conv_shape *s, const float *w, float *wp)
{
    uint32_t cp = round8(s->c_out);
    for (uint32_t t = 0; t < s->kh * s->kw; t++)
        for (uint32_t c = 0; c < cp; c++)
            wp[(size_t)t * cp + c] = c < s->c_out ? w[(size_t)c * s->kh * s->kw + t] : 0.0f;
}

size_t nib_dwconv_packed_s8_size(const struct nib_conv_shape *s)
{
    return nib_dwconv_packed_f32_size(s);
}

void nib_dwconv_pack_s8(const struct nib_conv_shape *s, const int8_t *q, int8_t *wq)
{
    uint32_t cp = round8(s->c_out);
    for (uint32_t t = 0; t < s->kh * s->kw; t++)
        for (uint32_t c = 0; c < cp; c++)
            wq[(size_t)t * cp + c] = c < s->c_out ? q[(size_t)c * s->kh * s->kw + t] : 0;
}

/* ---- quantized convolution ---- */

int nib_qconv_layout(const struct nib_conv_shape *s, uint32_t dtype, struct nib_qlayout *l)
{
    if (dtype != NIB_DT_Q4C && dtype != NIB_DT_Q8C)
        return -1;
    uint64_t k = (uint64_t)s->kh * s->kw * (s->c_in / s->groups);
    if (k > (1u << 20))
        return -1;
    return nib_qlayout_get(l, dtype, 0, s->c_out / s->groups, (uint32_t)k);
}

uint64_t nib_qconv_packed_size(const struct nib_conv_shape *s, uint32_t dtype)
{
    struct nib_qlayout l;
    if (nib_qconv_layout(s, dtype, &l))
        return 0;
    return (uint64_t)s->groups * l.size;
}

int nib_qconv_pack(const struct nib_conv_shape *s, uint32_t dtype, const int8_t *q,
                   const float *scale, uint8_t *dst)
{
    struct nib_qlayout l;
    if (nib_qconv_layout(s, dtype, &l))
        return -1;
    int lo = dtype == NIB_DT_Q4C ? -8 : -127, hi = dtype == NIB_DT_Q4C ? 7 : 127;
    uint32_t icg = s->c_in / s->groups, ocg = s->c_out / s->groups;
    uint64_t nq = (uint64_t)s->c_out * icg * s->kh * s->kw;
    for (uint64_t i = 0; i < nq; i++)
        if (q[i] < lo || q[i] > hi)
            return -1;
    memset(dst, 0, (size_t)s->groups * l.size);
    for (uint32_t g = 0; g < s->groups; g++) {
        uint8_t *m = dst + (size_t)g * l.size;
        for (uint32_t r = 0; r < l.n_pad; r++) {
            float sc = r < ocg ? scale[(size_t)g * ocg + r] : 0.0f;
            memcpy(m + nib_ql_scale_off(&l, r, 0), &sc, 4);
            for (uint32_t k = 0; k < l.k_pad; k++) {
                int v = 0;
                if (r < ocg && k < l.cols) {
                    uint32_t ic = k % icg, t = k / icg, ky = t / s->kw, kx = t % s->kw;
                    v = q[((((size_t)g * ocg + r) * icg + ic) * s->kh + ky) * s->kw + kx];
                }
                unsigned sh;
                uint64_t off = nib_ql_code_off(&l, r, k, &sh);
                if (l.code_bits == 4)
                    m[off] = (uint8_t)(m[off] | ((unsigned)(v + 8) << sh));
                else
                    m[off] = (uint8_t)(int8_t)v;
            }
        }
    }
    return 0;
}

static size_t align64(size_t n)
{
    return (n + 63u) & ~(size_t)63u;
}

size_t nib_qconv_scratch_size(const struct nib_conv_shape *s, uint32_t dtype)
{
    struct nib_qlayout l;
    if (nib_qconv_layout(s, dtype, &l))
        return 0;
    return align64(nib_qact_footprint(NIB_QCONV_TILE, l.cols, 0)) +
           align64((size_t)NIB_QCONV_TILE * s->c_out * sizeof(float));
}

/* ---- pooling and resize ---- */

void nib_pool_global_shape(struct nib_conv_shape *s, uint32_t h, uint32_t w, uint32_t c)
{
    memset(s, 0, sizeof *s);
    s->h = s->kh = h;
    s->w = s->kw = w;
    s->c_in = s->c_out = c;
    s->oh = s->ow = s->groups = 1;
    s->stride_h = s->stride_w = s->dil_h = s->dil_w = 1;
}

int nib_resize_ok(const struct nib_resize *r)
{
    const uint32_t dim_max = 1u << 16;
    if (!r || !r->h || !r->w || !r->c || !r->oh || !r->ow || r->h > dim_max || r->w > dim_max ||
        r->oh > dim_max || r->ow > dim_max || r->c > (1u << 20))
        return 0;
    if (!(r->scale_h > 0.0f) || !(r->scale_w > 0.0f) || r->scale_h > 1e6f || r->scale_w > 1e6f)
        return 0;
    return r->coord <= NIB_RESIZE_ALIGN_CORNERS && r->nearest_mode <= NIB_NEAREST_CEIL;
}

void nib_resize_axis(const struct nib_resize *r, int vertical, uint32_t o, struct nib_resize_tap *t)
{
    uint32_t in = vertical ? r->h : r->w, out = vertical ? r->oh : r->ow;
    float scale = vertical ? r->scale_h : r->scale_w, c;
    switch (r->coord) {
    case NIB_RESIZE_PYTORCH_HALF_PIXEL:
        c = out > 1 ? ((float)o + 0.5f) / scale - 0.5f : 0.0f;
        break;
    case NIB_RESIZE_ASYMMETRIC: c = (float)o / scale; break;
    case NIB_RESIZE_ALIGN_CORNERS:
        c = out > 1 ? (float)o * (float)(in - 1) / (float)(out - 1) : 0.0f;
        break;
    default: c = ((float)o + 0.5f) / scale - 0.5f; break;
    }
    float last = (float)(in - 1);
    if (!r->linear) {
        float f;
        switch (r->nearest_mode) {
        case NIB_NEAREST_FLOOR: f = floorf(c); break;
        case NIB_NEAREST_CEIL: f = ceilf(c); break;
        case NIB_NEAREST_ROUND_PREFER_CEIL: f = floorf(c + 0.5f); break;
        default: f = c == floorf(c) + 0.5f ? floorf(c) : floorf(c + 0.5f); break;
        }
        f = f < 0.0f ? 0.0f : f > last ? last : f;
        t->i0 = t->i1 = (uint32_t)f;
        t->f = 0.0f;
        return;
    }
    c = c < 0.0f ? 0.0f : c > last ? last : c;
    float f0 = floorf(c);
    t->i0 = (uint32_t)f0;
    t->i1 = t->i0 + 1 < in ? t->i0 + 1 : in - 1;
    t->f = c - f0;
}

/* ---- the table ---- */

#define CONV_TABLE(sfx, label, conv_s8_fn)                                                         \
    static const struct nib_conv_kernels k_##sfx = {                                               \
        .name = label,                                                                             \
        .conv_f32 = nib_conv_f32_##sfx,                                                            \
        .dwconv_f32 = nib_dwconv_f32_##sfx,                                                        \
        .conv_s8 = conv_s8_fn,                                                                     \
        .dwconv_s8 = nib_dwconv_s8_q8cs8_##sfx,                                                    \
        .pool_f32 = nib_pool_f32_##sfx,                                                            \
        .resize_f32 = nib_resize_f32_##sfx,                                                        \
    };
CONV_TABLE(scalar, "scalar", nib_conv_s8_qcs8_scalar)
#if NIB_HAVE_AVX2
/* the VNNI matmuls where the CPU has them (the same bits) */
CONV_TABLE(avx2, "avx2", nib_conv_s8_qcs8_avx2vnni)
#endif
#if NIB_HAVE_NEON
CONV_TABLE(neon, "neon-dot", nib_conv_s8_qcs8_neon)
#endif

const struct nib_conv_kernels *nib_conv_kernels_get(uint32_t isa)
{
    switch (isa) {
    case NIB_ISA_SCALAR: return &k_scalar;
#if NIB_HAVE_AVX2
    case NIB_ISA_AVX2: return &k_avx2;
#endif
#if NIB_HAVE_NEON
    case NIB_ISA_NEON_DOT: return &k_neon;
#endif
    default: return NULL;
    }
}
