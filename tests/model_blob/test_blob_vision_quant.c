/* Quantized vision ops (blob_format.h NIB_VOP_QUANT, NIB_VOP_QCONV, a
 * NIB_VOP_MATMUL by q4c/q8c weights) in a blob built here:
 *   x (f32 NHWC) -QUANT-> xq -QCONV 3x3, bias, relu, int8 out-> yq
 *   -QCONV 3x3 stride 2, bias, hard-swish, f32 out-> y -MATMUL-> z
 * with the weight formats both ways round. Each result is checked against
 * a direct computation written here (the int8 codes exactly, as the
 * contract defines them; floats within rounding), the same bits for 1, 2
 * and 3 workers and for every ISA this CPU runs, no allocation while it
 * runs, and one lie per validator rule refused with its message. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "model_blob/blob_view.h"
#include "rt/cpu_isa.h"
#include "rt/exec.h"
#include "tests/common/blob_lie.h"
#include "tests/common/vision_blob.h"
#include "rt/team.h"

enum { H = 5, W = 5, C1 = 3, C2 = 10, C3 = 12, OH = 3, OW = 3, NM = 20 };
enum { IN = 0, XQ = 320, YQ = 448, OUT = 704, Z = 1152, SCR = 1920, SCR_SIZE = 4096 };
enum { ACT = 8192, NT = 6, NOPS = 4, NIO = 2 };
#define X_SCALE (1.0f / 64)
#define Y_SCALE (1.0f / 128)

/* Allocation calls while counting is on (-Wl,--wrap: tests/model_blob/meson.build). */
static volatile int counting, allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n)
{
    allocs += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t s)
{
    allocs += counting;
    return __real_calloc(n, s);
}
void *__wrap_realloc(void *p, size_t n)
{
    allocs += counting;
    return __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n)
{
    allocs += counting;
    return __real_aligned_alloc(a, n);
}

static uint8_t *blob, *work;
static uint64_t size;
static char err[512];
static uint32_t dt1, dt2; /* weight formats of the first conv (and matmul), the second conv */
static int8_t w1[C2][C1][3][3], w2[C3][C2][3][3], wm[NM][C3];
static float s1[C2], s2[C3], sm[NM], b1[C2], b2[C3], bm[NM], x[H][W][C1];

static struct nib_blob_header *HDR(void)
{
    return (struct nib_blob_header *)(void *)work;
}

static struct nib_op *OP(uint32_t i)
{
    return (struct nib_op *)(void *)(work + HDR()->plan.offset) + i;
}

static struct nib_tensor_rec *TENSOR(uint32_t i)
{
    return (struct nib_tensor_rec *)(void *)(work + HDR()->tensors.offset) + i;
}

/* Make tensor i a valid q8c tensor with groups of 32 (f16 scales, smaller
 * than per channel: it fits where the per-channel one was). */
static void q8c_grouped(uint32_t i)
{
    struct nib_tensor_rec *t = TENSOR(i);
    ck_assert_uint_eq(t->dtype, NIB_DT_Q8C);
    t->group = 32;
    t->tile_k = nib_qformat_tile_k(NIB_DT_Q8C, 32);
    t->size = nib_qformat_size(NIB_DT_Q8C, 32, t->rows, t->cols);
}

static const struct nib_conv_shape shape1 = {H, W, C1, H, W, C2, 1, 3, 3, 1, 1, 1, 1, 1, 1};
static const struct nib_conv_shape shape2 = {H, W, C2, OH, OW, C3, 1, 3, 3, 2, 2, 1, 1, 1, 1};

static int8_t code(uint32_t dt)
{
    return (int8_t)(dt == NIB_DT_Q4C ? rand() % 16 - 8 : rand() % 255 - 127);
}

/* Scales that are exact in f16 and f32: products with X_SCALE are exact. */
static float scale_for(uint32_t dt)
{
    return (float)(1 + rand() % 8) / (dt == NIB_DT_Q4C ? 256.0f : 2048.0f);
}

static struct nib_vconv_params conv_params(const struct nib_conv_shape *s)
{
    return (struct nib_vconv_params){.h = s->h,
                                     .w = s->w,
                                     .c_in = s->c_in,
                                     .oh = s->oh,
                                     .ow = s->ow,
                                     .c_out = s->c_out,
                                     .groups = 1,
                                     .kh = s->kh,
                                     .kw = s->kw,
                                     .stride_h = s->stride_h,
                                     .stride_w = s->stride_w,
                                     .pad_top = s->pad_top,
                                     .pad_left = s->pad_left,
                                     .dil_h = 1,
                                     .dil_w = 1,
                                     .post_mul = 1.0f};
}

static void build(void)
{
    struct {
        uint32_t dtype, rows, cols;
        uint64_t size;
    } td[NT] = {
        {dt1, C2, 9 * C1, nib_qconv_packed_size(&shape1, dt1)}, {NIB_DT_F32, 1, C2, 4 * C2},
        {dt2, C3, 9 * C2, nib_qconv_packed_size(&shape2, dt2)}, {NIB_DT_F32, 1, C3, 4 * C3},
        {dt1, NM, C3, nib_qformat_size(dt1, 0, NM, C3)},        {NIB_DT_F32, 1, NM, 4 * NM},
    };
    uint64_t off[NT], wsize = 0;
    for (int i = 0; i < NT; i++) {
        off[i] = wsize;
        wsize += (td[i].size + 63) / 64 * 64;
    }
    struct nib_blob_header h = nib_test_vision_header(NT, NOPS, NIO, ACT, SCR, SCR_SIZE, wsize);
    size = h.blob_size;
    blob = aligned_alloc(64, size);
    work = aligned_alloc(64, size);
    memset(blob, 0, size);
    memcpy(blob, &h, sizeof h);
    struct nib_tensor_rec *t = (struct nib_tensor_rec *)(void *)(blob + h.tensors.offset);
    for (int i = 0; i < NT; i++)
        t[i] = (struct nib_tensor_rec){.name = "t",
                                       .dtype = td[i].dtype,
                                       .rows = td[i].rows,
                                       .cols = td[i].cols,
                                       .tile_n = nib_qformat_tile_n(td[i].dtype, 0),
                                       .tile_k = nib_qformat_tile_k(td[i].dtype, 0),
                                       .offset = off[i],
                                       .size = td[i].size};
    uint8_t *ws = blob + h.weights.offset;
    ck_assert_int_eq(nib_qconv_pack(&shape1, dt1, &w1[0][0][0][0], s1, ws + off[0]), 0);
    memcpy(ws + off[1], b1, sizeof b1);
    ck_assert_int_eq(nib_qconv_pack(&shape2, dt2, &w2[0][0][0][0], s2, ws + off[2]), 0);
    memcpy(ws + off[3], b2, sizeof b2);
    /* the matmul's weights: a 1x1 "convolution" of NM channels packs n x k */
    const struct nib_conv_shape sm_shape = {1, 1, C3, 1, 1, NM, 1, 1, 1, 1, 1, 0, 0, 1, 1};
    ck_assert_int_eq(nib_qconv_pack(&sm_shape, dt1, &wm[0][0], sm, ws + off[4]), 0);
    memcpy(ws + off[5], bm, sizeof bm);

    struct nib_op *op = (struct nib_op *)(void *)(blob + h.plan.offset);
    op[0] = (struct nib_op){.code = NIB_VOP_QUANT, .tensor = UINT32_MAX, .src0 = IN, .dst = XQ};
    op[0].vquant = (struct nib_vquant_params){.n = H * W * C1, .scale = X_SCALE};
    op[1] = (struct nib_op){.code = NIB_VOP_QCONV, .tensor = 0, .src0 = XQ, .dst = YQ};
    op[1].vconv = conv_params(&shape1);
    op[1].vconv.bias = 1, op[1].vconv.act = NIB_VACT_RELU;
    op[1].vconv.x_scale = X_SCALE, op[1].vconv.qout = 1, op[1].vconv.y_scale = Y_SCALE;
    op[2] = (struct nib_op){.code = NIB_VOP_QCONV, .tensor = 2, .src0 = YQ, .dst = OUT};
    op[2].vconv = conv_params(&shape2);
    op[2].vconv.bias = 3, op[2].vconv.act = NIB_VACT_HSWISH;
    op[2].vconv.p0 = 1.0f / 6, op[2].vconv.p1 = 0.5f;
    op[2].vconv.x_scale = Y_SCALE;
    op[3] = (struct nib_op){.code = NIB_VOP_MATMUL, .tensor = 4, .src0 = OUT, .dst = Z};
    op[3].vmatmul = (struct nib_vmatmul_params){.m = OH * OW, .n = NM, .k = C3, .bias = 5};
    struct nib_io_rec *io = (struct nib_io_rec *)(void *)(blob + h.tokenizer.offset);
    io[0] = (struct nib_io_rec){.name = "x",
                                .dir = NIB_IO_INPUT,
                                .dtype = NIB_IO_F32,
                                .rank = 4,
                                .dims = {1, H, W, C1},
                                .off = IN,
                                .bytes = H * W * C1 * 4};
    io[1] = (struct nib_io_rec){.name = "z",
                                .dir = NIB_IO_OUTPUT,
                                .dtype = NIB_IO_F32,
                                .rank = 2,
                                .dims = {OH * OW, NM},
                                .off = Z,
                                .bytes = OH * OW * NM * 4};
    ((struct nib_blob_header *)(void *)blob)->crc32c = nib_blob_crc(blob, size);
}

static void make(uint32_t a, uint32_t b)
{
    dt1 = a, dt2 = b;
    srand(11);
    for (int o = 0; o < C2; o++) {
        s1[o] = scale_for(dt1), b1[o] = (float)(rand() % 64 - 16) / 64.0f;
        for (int i = 0; i < C1 * 9; i++)
            (&w1[o][0][0][0])[i] = code(dt1);
    }
    for (int o = 0; o < C3; o++) {
        s2[o] = scale_for(dt2), b2[o] = (float)(rand() % 64 - 32) / 64.0f;
        for (int i = 0; i < C2 * 9; i++)
            (&w2[o][0][0][0])[i] = code(dt2);
    }
    for (int o = 0; o < NM; o++) {
        sm[o] = scale_for(dt1), bm[o] = (float)(rand() % 64 - 32) / 64.0f;
        for (int i = 0; i < C3; i++)
            wm[o][i] = code(dt1);
    }
    for (int i = 0; i < H * W * C1; i++) /* a few past +-127 codes: clamped */
        (&x[0][0][0])[i] = (float)(rand() % 4200 - 2100) / 1000.0f;
    (&x[0][0][0])[7] = 1.5f / 64; /* a tie: rounds to even (2) */
    build();
    memcpy(work, blob, size);
}

static void teardown(void)
{
    free(blob);
    free(work);
}

/* round-half-even(v * inv) clamped to [-127, 127] (|v * inv| < 2^22 or clamped). */
static int8_t requant(float v, float inv)
{
    double r = rint((double)v * (double)inv);
    return (int8_t)(r < -127 ? -127 : r > 127 ? 127 : r);
}

static float hswish(float v)
{
    float t = fmaf(1.0f / 6, v, 0.5f);
    t = t > 0 ? t : 0;
    return v * (t < 1 ? t : 1);
}

/* Integer sum of a 3x3 window of NHWC int8 codes q (h x w x c) times
 * OIHW codes wt of output channel o. */
static int32_t window_sum(const int8_t *q, int h, int w, int c, const int8_t *wt, int oy, int ox,
                          int stride)
{
    int32_t s = 0;
    for (int ky = 0; ky < 3; ky++)
        for (int kx = 0; kx < 3; kx++) {
            int iy = oy * stride - 1 + ky, ix = ox * stride - 1 + kx;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                continue;
            for (int i = 0; i < c; i++)
                s += q[(iy * w + ix) * c + i] * wt[(i * 3 + ky) * 3 + kx];
        }
    return s;
}

/* The whole plan against the direct computation. */
static void check_results(const uint8_t *mem)
{
    const int8_t *xq = (const int8_t *)(mem + XQ), *yq = (const int8_t *)(mem + YQ);
    const float *y = (const float *)(const void *)(mem + OUT);
    const float *z = (const float *)(const void *)(mem + Z);
    for (int i = 0; i < H * W * C1; i++)
        ck_assert_int_eq(xq[i], requant((&x[0][0][0])[i], 64.0f));
    ck_assert_int_eq(xq[7], 2);
    for (int oy = 0; oy < H; oy++)
        for (int ox = 0; ox < W; ox++)
            for (int o = 0; o < C2; o++) { /* the contract's float steps: exact */
                int32_t s = window_sum(xq, H, W, C1, &w1[o][0][0][0], oy, ox, 1);
                float v = fmaf((float)s, s1[o] * X_SCALE, b1[o]);
                v = v > 0 ? v : 0;
                ck_assert_int_eq(yq[(oy * W + ox) * C2 + o], requant(v, 1.0f / Y_SCALE));
            }
    for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++)
            for (int o = 0; o < C3; o++) {
                int32_t s = window_sum(yq, H, W, C2, &w2[o][0][0][0], oy, ox, 2);
                double want = hswish((float)((double)s * s2[o] * Y_SCALE + b2[o]));
                float got = y[(oy * OW + ox) * C3 + o];
                ck_assert_msg(fabs(got - want) <= 1e-6 * (1 + fabs(want)), "y %d %d %d: %g vs %g",
                              oy, ox, o, (double)got, want);
            }
    for (int r = 0; r < OH * OW; r++) {
        const float *xr = y + r * C3;
        double amax = 0;
        for (int k = 0; k < C3; k++)
            amax = fabs(xr[k]) > amax ? fabs(xr[k]) : amax;
        for (int n = 0; n < NM; n++) {
            double want = bm[n], wabs = 0;
            for (int k = 0; k < C3; k++)
                want += (double)wm[n][k] * sm[n] * xr[k], wabs += fabs((double)wm[n][k] * sm[n]);
            /* the activation row quantized with step amax / 127: half a
             * step per input at most */
            double tol = 0.5 * amax / 127 * wabs + 1e-5 * (1 + fabs(want));
            ck_assert_msg(fabs(z[r * NM + n] - want) <= tol, "z %d %d: %g vs %g (tol %g)", r, n,
                          (double)z[r * NM + n], want, tol);
        }
    }
}

/* Run the plan on n workers with kernels qk into a fresh memory. */
static uint8_t *run(const struct nib_blob_view *v, const struct nib_qkernels *qk, uint32_t n)
{
    uint8_t *mem = aligned_alloc(64, ACT);
    memset(mem, 0x5a, ACT);
    memcpy(mem + IN, x, sizeof x);
    struct nib_exec e = {.v = v, .mem = mem, .qk = qk};
    void *tmem = NULL;
    pthread_t tids[4];
    struct nib_team *t = NULL;
    if (n > 1) {
        uint64_t team = (nib_team_footprint(n) + 63) & ~63ull;
        tmem = aligned_alloc(nib_team_align(),
                             (team + nib_exec_team_footprint(n, v) + 4095) & ~4095ull);
        t = nib_team_new(tmem, n, 0, 0);
        ck_assert_ptr_nonnull(t);
        nib_exec_set_team(&e, t, (uint8_t *)tmem + team);
        ck_assert_int_eq(nib_team_spawn(t, NULL, tids), 0);
    }
    allocs = 0, counting = 1;
    int rc = nib_exec_run(&e); /* Check itself allocates: nothing else between */
    counting = 0;
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(allocs, 0);
    if (t) {
        nib_team_join(t, tids);
        free(tmem);
    }
    return mem;
}

/* Every region the plan writes (worker 0's scratch aside). */
static void same_bits(const uint8_t *a, const uint8_t *b, const char *what)
{
    ck_assert_msg(memcmp(a, b, SCR) == 0, "%s: results differ from 1 scalar worker", what);
}

static void runs(uint32_t a, uint32_t b)
{
    make(a, b);
    struct nib_blob_view v;
    ck_assert_msg(nib_blob_open(&v, blob, size, 1, err, sizeof err) == 0, "%s", err);
    uint8_t *ref = run(&v, nib_qkernels_get(NIB_ISA_SCALAR), 1);
    check_results(ref);
    const uint32_t isas[] = {NIB_ISA_SCALAR, NIB_ISA_AVX2, NIB_ISA_NEON_DOT};
    for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
        const struct nib_qkernels *qk = nib_qkernels_get(isas[i]);
        if (!qk || (nib_cpu_isa() & isas[i]) != isas[i]) {
            printf("blob-vision-quant: this CPU or build has no %s kernels: not compared\n",
                   isas[i] == NIB_ISA_AVX2 ? "AVX2" : "NEON-dotprod");
            continue;
        }
        for (uint32_t n = 1; n <= 3; n++) {
            uint8_t *got = run(&v, qk, n);
            char what[64];
            snprintf(what, sizeof what, "%s, %u workers", qk->name, n);
            same_bits(ref, got, what);
            free(got);
        }
    }
    free(ref);
}

START_TEST(q4c_then_q8c_runs)
{
    runs(NIB_DT_Q4C, NIB_DT_Q8C);
    teardown();
}
END_TEST

START_TEST(q8c_then_q4c_runs)
{
    runs(NIB_DT_Q8C, NIB_DT_Q4C);
    teardown();
}
END_TEST

static int open_work(void)
{
    return blob_lie_open(blob, work, size, err, sizeof err);
}

#define EXPECT_REFUSED(what) BLOB_LIE_REFUSED(blob, work, size, err, what)

START_TEST(quant_lies_refused)
{
    make(NIB_DT_Q4C, NIB_DT_Q8C);
    ck_assert_int_eq(open_work(), 0);
    OP(0)->vquant.scale = 0.0f;
    EXPECT_REFUSED("(vquant)");
    OP(0)->vquant.scale = INFINITY;
    EXPECT_REFUSED("scale inf");
    OP(0)->vquant.n = (1u << 30) + 1ull;
    EXPECT_REFUSED("elements");
    OP(0)->tensor = 1;
    EXPECT_REFUSED("a tensor");
    OP(0)->vquant.n = ACT / 4 + 1;
    EXPECT_REFUSED("outside runtime memory");
    OP(0)->dst = IN + 64;
    EXPECT_REFUSED("overlapping");
    /* a plain convolution carries no quantization fields */
    OP(2)->code = NIB_VOP_CONV;
    OP(2)->tensor = 3;
    OP(2)->vconv.x_scale = 0.0f;
    OP(2)->vconv.act = NIB_VACT_NONE; /* weights of 12 floats: refused for that... */
    EXPECT_REFUSED("weights are not");
    OP(2)->code = NIB_VOP_CONV; /* ...but x_scale first */
    EXPECT_REFUSED("(conv): x_scale 0.0078125, qout 0 or y_scale 0");
    OP(2)->code = NIB_VOP_POOL; /* no int8 copy of a pooling */
    OP(2)->vconv.qout = 2, OP(2)->vconv.y_scale = 1.0f, OP(2)->vconv.x_scale = 0.0f;
    EXPECT_REFUSED("(pool): x_scale 0, qout 2 or y_scale 1");
    teardown();
}
END_TEST

START_TEST(qconv_lies_refused)
{
    make(NIB_DT_Q4C, NIB_DT_Q8C);
    OP(1)->vconv.groups = C1;
    EXPECT_REFUSED("(qconv): shape");
    OP(1)->vconv.depthwise = 1;
    EXPECT_REFUSED("depthwise");
    OP(1)->vconv.mode = 1;
    EXPECT_REFUSED("mode 1");
    OP(1)->vconv.pad_top = 3;
    EXPECT_REFUSED("limits");
    OP(1)->tensor = 1; /* f32 */
    EXPECT_REFUSED("weights are not q4c|q8c 10 x 27");
    OP(1)->tensor = 2; /* 12 x 90 */
    EXPECT_REFUSED("weights are not q4c|q8c");
    OP(1)->tensor = 99;
    EXPECT_REFUSED("weights are not q4c|q8c");
    OP(1)->vconv.bias = 0; /* a q4c tensor */
    EXPECT_REFUSED("bias is not 10 f32");
    OP(1)->vconv.act = NIB_VACT_SQRT;
    EXPECT_REFUSED("epilogue");
    OP(1)->vconv.p1 = NAN;
    EXPECT_REFUSED("epilogue");
    OP(1)->vconv.x_scale = 0.0f;
    EXPECT_REFUSED("x_scale 0");
    OP(1)->vconv.x_scale = -1.0f;
    EXPECT_REFUSED("x_scale -1");
    OP(1)->vconv.x_scale = NAN;
    EXPECT_REFUSED("x_scale nan");
    OP(1)->vconv.qout = 3;
    EXPECT_REFUSED("qout 3");
    OP(1)->vconv.y_scale = 0.0f;
    EXPECT_REFUSED("qout 1 with y_scale 0");
    OP(1)->vconv.y_scale = INFINITY;
    EXPECT_REFUSED("qout 1 with y_scale inf");
    OP(1)->vconv.post = 1;
    EXPECT_REFUSED("post 1");
    OP(1)->vconv.act = NIB_VACT_SIGMOID; /* only the kernel's activations with int8 out */
    EXPECT_REFUSED("act 5");
    OP(2)->vconv.y_scale = 1.0f; /* f32 out: y_scale 0 */
    EXPECT_REFUSED("qout 0 with y_scale 1");
    OP(2)->vconv.act = NIB_VACT_SIGMOID, OP(2)->vconv.post = 1, OP(2)->vconv.post_mul = 2.0f;
    ck_assert_int_eq(open_work(), 0); /* f32 out: any activation and a post */
    OP(1)->src0 = ACT - 64;
    EXPECT_REFUSED("outside runtime memory");
    OP(1)->dst = XQ + 32;
    EXPECT_REFUSED("overlapping");
    OP(2)->dst = ACT - 400; /* f32 out of 432 bytes */
    EXPECT_REFUSED("outside runtime memory");
    OP(2)->dst = OUT + 2; /* f32 out: aligned */
    EXPECT_REFUSED("outside runtime memory");
    OP(1)->dst = XQ + 75; /* int8: any alignment... */
    ck_assert_int_eq(open_work(), 0);
    OP(1)->dst = SCR + 1024; /* ...but not in worker 0's scratch */
    EXPECT_REFUSED("worker scratch");
    HDR()->wscratch_size = 2048; /* the second conv needs 2432 */
    EXPECT_REFUSED("op 2 (qconv): needs 2432 bytes of worker scratch");
    teardown();
}
END_TEST

/* qout 2: the second convolution writes its f32 output at dst and the
 * int8 codes of those same values at aux (what a QUANT of dst would give,
 * which the compiler folds this way). The plan's other bytes do not move;
 * the codes are requant(y) exactly, on every ISA and worker count; and
 * the refusals of a wrong aux or qout. */
START_TEST(qconv_f32_and_int8_out)
{
    enum { AUX = 6144, NOUT = OH * OW * C3 }; /* clear of every operand and the scratch */
    make(NIB_DT_Q4C, NIB_DT_Q8C);
    struct nib_blob_view v;
    ck_assert_msg(nib_blob_open(&v, blob, size, 1, err, sizeof err) == 0, "%s", err);
    uint8_t *plain = run(&v, nib_qkernels_get(NIB_ISA_SCALAR), 1);
    OP(2)->vconv.qout = 2, OP(2)->vconv.y_scale = Y_SCALE, OP(2)->aux = AUX;
    HDR()->crc32c = nib_blob_crc(work, size);
    ck_assert_msg(nib_blob_open(&v, work, size, 1, err, sizeof err) == 0, "%s", err);
    uint8_t *dual = run(&v, nib_qkernels_get(NIB_ISA_SCALAR), 1);
    same_bits(plain, dual, "qout 2 (f32 and int8 out)");
    check_results(dual);
    const float *y = (const float *)(const void *)(dual + OUT);
    for (int i = 0; i < NOUT; i++)
        ck_assert_int_eq(((const int8_t *)(dual + AUX))[i], requant(y[i], 1.0f / Y_SCALE));
    const uint32_t isas[] = {NIB_ISA_AVX2, NIB_ISA_NEON_DOT};
    for (size_t i = 0; i < sizeof isas / sizeof *isas; i++) {
        const struct nib_qkernels *qk = nib_qkernels_get(isas[i]);
        if (!qk || (nib_cpu_isa() & isas[i]) != isas[i])
            continue; /* runs() says so */
        for (uint32_t n = 1; n <= 3; n++) {
            uint8_t *got = run(&v, qk, n);
            ck_assert_msg(memcmp(got, dual, ACT) == 0 || (memcmp(got, dual, SCR) == 0 &&
                                                          memcmp(got + AUX, dual + AUX, NOUT) == 0),
                          "qout 2: %s, %u workers differ from 1 scalar worker", qk->name, n);
            free(got);
        }
    }
    free(plain), free(dual);
    memcpy(blob, work, size); /* the valid qout 2 blob is the base of the lies below */
    OP(2)->aux = OUT + 100;   /* over its own f32 output */
    EXPECT_REFUSED("overlapping an operand");
    OP(2)->aux = YQ + 10; /* over its input */
    EXPECT_REFUSED("overlapping an operand");
    OP(2)->aux = SCR + 64;
    EXPECT_REFUSED("in the worker scratch");
    OP(2)->aux = ACT - NOUT + 1;
    EXPECT_REFUSED("outside runtime memory");
    OP(2)->vconv.act = NIB_VACT_SIGMOID; /* the activation must run in the kernel */
    EXPECT_REFUSED("qout 2 with y_scale");
    OP(2)->vconv.post = 1;
    EXPECT_REFUSED("post 1");
    OP(2)->vconv.y_scale = 0.0f;
    EXPECT_REFUSED("qout 2 with y_scale 0");
    OP(2)->vconv.qout = 3;
    EXPECT_REFUSED("qout 3");
    OP(2)->vconv.qout = 0, OP(2)->vconv.y_scale = 0.0f; /* f32 only: aux must be 0 */
    EXPECT_REFUSED("qout 0 with its int8 copy (aux)");
    teardown();
}
END_TEST

START_TEST(qmatmul_lies_refused)
{
    make(NIB_DT_Q8C, NIB_DT_Q4C);
    q8c_grouped(4);
    EXPECT_REFUSED("vmatmul"); /* per channel only */
    q8c_grouped(0);
    EXPECT_REFUSED("op 1 (qconv): weights are not q4c|q8c");
    OP(3)->vmatmul.k = C3 + 1;
    EXPECT_REFUSED("vmatmul");
    OP(3)->vmatmul.n = NM - 1;
    EXPECT_REFUSED("vmatmul");
    OP(3)->tensor = 2; /* q4c, 12 x 90 */
    EXPECT_REFUSED("vmatmul");
    OP(3)->vmatmul.bias = 3;
    EXPECT_REFUSED("vmatmul");
    OP(3)->dst = OUT + 64;
    EXPECT_REFUSED("overlapping");
    OP(3)->dst = SCR;
    EXPECT_REFUSED("worker scratch");
    OP(3)->vmatmul.m = 2000; /* 2000 rows of 12 inside memory, apart from the scratch... */
    OP(3)->src0 = 0, OP(3)->dst = 2000 * C3 * 4 + 64;
    HDR()->act_size = 1u << 20, HDR()->wscratch_off = 1u << 19;
    EXPECT_REFUSED("needs 80000 bytes of worker scratch (2000 rows)"); /* ...but not in it */
    HDR()->wscratch_size = 256; /* the convolutions' need is refused first */
    EXPECT_REFUSED("needs");
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blob-vision-quant");
    TCase *tc = tcase_create("quant");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, q4c_then_q8c_runs);
    tcase_add_test(tc, q8c_then_q4c_runs);
    tcase_add_test(tc, quant_lies_refused);
    tcase_add_test(tc, qconv_lies_refused);
    tcase_add_test(tc, qconv_f32_and_int8_out);
    tcase_add_test(tc, qmatmul_lies_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
