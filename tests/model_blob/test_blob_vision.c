/* The validator on vision plans (blob_format.h NIB_VOP_*): a small blob
 * built here (input conversion, a 3x3 convolution, the copy back to NCHW)
 * opens and runs to the convolution computed directly; every structural
 * lie in its ops, checksum recomputed, is refused with a message naming
 * the problem. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/conv.h"
#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "tests/common/blob_lie.h"
#include "tests/common/vision_blob.h"

enum { C = 2, H = 4, W = 4, M = 4, SCRATCH = 2048, ACT = SCRATCH + 65536 };

static uint8_t *blob, *work;
static uint64_t size;
static char err[512];
static float wts[M][C][3][3], bias[M], x[C][H][W];

static struct nib_blob_header *HDR(void)
{
    return (struct nib_blob_header *)(void *)work;
}

static struct nib_op *OP(uint32_t i)
{
    return (struct nib_op *)(void *)(work + HDR()->plan.offset) + i;
}

static void build(void)
{
    const uint32_t n_t = 3;
    struct nib_blob_header h = nib_test_vision_header(n_t, 3, 2, ACT, 0, 0, n_t * 1024);
    size = h.blob_size;
    blob = aligned_alloc(64, size);
    work = aligned_alloc(64, size);
    memset(blob, 0, size);
    memcpy(blob, &h, sizeof h);
    struct nib_tensor_rec *t = (struct nib_tensor_rec *)(void *)(blob + h.tensors.offset);
    for (uint32_t i = 0; i < n_t; i++)
        t[i] = (struct nib_tensor_rec){.name = "t",
                                       .dtype = NIB_DT_F32,
                                       .rows = 1,
                                       .cols = 256,
                                       .offset = i * 1024ull,
                                       .size = 1024};
    float *wsec = (float *)(void *)(blob + h.weights.offset);
    for (int c = 0; c < C; c++) /* input scales: y = 2x - 1 */
        wsec[c] = 2.0f, wsec[C + c] = -1.0f;
    struct nib_conv_shape s = {H, W, C, H, W, M, 1, 3, 3, 1, 1, 1, 1, 1, 1};
    nib_conv_pack_f32(&s, &wts[0][0][0][0], wsec + 256);
    memcpy(wsec + 512, bias, sizeof bias);
    struct nib_op *op = (struct nib_op *)(void *)(blob + h.plan.offset);
    op[0] = (struct nib_op){.code = NIB_VOP_INPUT, .tensor = 0, .src0 = 0, .dst = 256};
    op[0].vrows = (struct nib_vrows_params){.c = C, .h = H, .w = W};
    op[1] = (struct nib_op){.code = NIB_VOP_CONV, .tensor = 1, .src0 = 256, .dst = 512};
    op[1].vconv = (struct nib_vconv_params){.h = H,
                                            .w = W,
                                            .c_in = C,
                                            .oh = H,
                                            .ow = W,
                                            .c_out = M,
                                            .groups = 1,
                                            .kh = 3,
                                            .kw = 3,
                                            .stride_h = 1,
                                            .stride_w = 1,
                                            .pad_top = 1,
                                            .pad_left = 1,
                                            .dil_h = 1,
                                            .dil_w = 1,
                                            .bias = 2,
                                            .act = NIB_VACT_RELU,
                                            .post_mul = 1.0f};
    /* NHWC -> NCHW: loops n, c, h, w */
    op[2] = (struct nib_op){.code = NIB_VOP_COPY, .tensor = UINT32_MAX, .src0 = 512, .dst = 1024};
    op[2].vew = (struct nib_vew_params){.dims = {1, M, H, W},
                                        .sa = {0, 1, W * M, M},
                                        .sd = {0, H * W, W, 1},
                                        .a_tensor = UINT32_MAX,
                                        .b_tensor = UINT32_MAX};
    struct nib_io_rec *io = (struct nib_io_rec *)(void *)(blob + h.tokenizer.offset);
    io[0] = (struct nib_io_rec){.name = "x",
                                .dir = NIB_IO_INPUT,
                                .dtype = NIB_IO_F32,
                                .rank = 4,
                                .dims = {1, C, H, W},
                                .off = 0,
                                .bytes = C * H * W * 4};
    io[1] = (struct nib_io_rec){.name = "y",
                                .dir = NIB_IO_OUTPUT,
                                .dtype = NIB_IO_F32,
                                .rank = 4,
                                .dims = {1, M, H, W},
                                .off = 1024,
                                .bytes = M * H * W * 4};
    ((struct nib_blob_header *)(void *)blob)->crc32c = nib_blob_crc(blob, size);
}

static void setup(void)
{
    srand(7);
    for (int m = 0; m < M; m++) {
        bias[m] = (float)(rand() % 100) / 200.0f - 0.25f;
        for (int c = 0; c < C; c++)
            for (int k = 0; k < 9; k++)
                wts[m][c][k / 3][k % 3] = (float)(rand() % 200) / 200.0f - 0.5f;
    }
    for (int i = 0; i < C * H * W; i++)
        (&x[0][0][0])[i] = (float)(rand() % 100) / 100.0f;
    build();
    memcpy(work, blob, size);
}

static void teardown(void)
{
    free(blob);
    free(work);
}

static int open_work(void)
{
    return blob_lie_open(blob, work, size, err, sizeof err);
}

#define EXPECT_REFUSED(what) BLOB_LIE_REFUSED(blob, work, size, err, what)

/* The convolution's output m at (oy, ox) before its activation, in
 * float64. */
static double conv_ref(int m, int oy, int ox)
{
    double acc = bias[m];
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
                int iy = oy + ky - 1, ix = ox + kx - 1;
                if (iy >= 0 && iy < H && ix >= 0 && ix < W)
                    acc += wts[m][c][ky][kx] * (2.0 * x[c][iy][ix] - 1.0);
            }
    return acc;
}

/* Open b (resealed) and run it on x, with the NHWC residual r at arena
 * offset 1536 when given: the arena after the run (the caller frees it). */
static uint8_t *run_arena(uint8_t *b, const float *r)
{
    struct nib_blob_view v;
    ((struct nib_blob_header *)(void *)b)->crc32c = nib_blob_crc(b, size);
    ck_assert_msg(nib_blob_open(&v, b, size, 1, err, sizeof err) == 0, "%s", err);
    uint8_t *mem = aligned_alloc(64, ACT);
    memset(mem, 0, ACT);
    memcpy(mem, x, sizeof x);
    if (r)
        memcpy(mem + 1536, r, M * H * W * sizeof *r);
    struct nib_exec e = {.v = &v, .mem = mem};
    ck_assert_int_eq(nib_exec_run(&e), 0);
    return mem;
}

/* The same, y (NCHW, M x H x W) out. */
static void run_blob(uint8_t *b, const float *r, float *y)
{
    uint8_t *mem = run_arena(b, r);
    memcpy(y, mem + 1024, M * H * W * sizeof *y);
    free(mem);
}

START_TEST(valid_blob_runs)
{
    float y[M * H * W];
    run_blob(blob, NULL, y);
    for (int m = 0; m < M; m++)
        for (int oy = 0; oy < H; oy++)
            for (int ox = 0; ox < W; ox++) {
                double acc = conv_ref(m, oy, ox), want = acc > 0 ? acc : 0;
                float got = y[(m * H + oy) * W + ox];
                ck_assert_msg(fabs(got - want) < 1e-5, "y[%d][%d][%d] = %g, want %g", m, oy, ox,
                              (double)got, want);
            }
}
END_TEST

/* The convolution's residual: res and src1 as given. */
static void lie_res(uint32_t res, uint64_t src1)
{
    OP(1)->vconv.res = res;
    OP(1)->src1 = src1;
}

/* A residual at src1 (format 7): added before the ReLU (res 1) or after
 * it (res 2), then every lie about it refused. */
START_TEST(residual_runs)
{
    float r[M * H * W], y[M * H * W]; /* r NHWC, as the kernels read it */
    for (int i = 0; i < M * H * W; i++)
        r[i] = (float)(i % 7) * 0.25f - 0.75f;
    for (uint32_t res = 1; res <= 2; res++) {
        lie_res(res, 1536);
        run_blob(work, r, y);
        memcpy(work, blob, size);
        for (int m = 0; m < M; m++)
            for (int oy = 0; oy < H; oy++)
                for (int ox = 0; ox < W; ox++) {
                    double acc = conv_ref(m, oy, ox), rv = r[(oy * W + ox) * M + m];
                    double want =
                        res == 1 ? (acc + rv > 0 ? acc + rv : 0) : (acc > 0 ? acc : 0) + rv;
                    float got = y[(m * H + oy) * W + ox];
                    ck_assert_msg(fabs(got - want) < 1e-5, "res %u: y[%d][%d][%d] = %g, want %g",
                                  res, m, oy, ox, (double)got, want);
                }
    }
    lie_res(0, 1536);
    EXPECT_REFUSED("src1 set without a residual");
    lie_res(3, 1536);
    EXPECT_REFUSED("residual 3");
    lie_res(1, 1536);
    OP(1)->vconv.post = 1;
    EXPECT_REFUSED("residual 1 with mode 0, act 1, post 1");
    lie_res(2, 1536);
    OP(1)->vconv.act = NIB_VACT_SIGMOID;
    EXPECT_REFUSED("residual 2 with mode 0, act 5");
    lie_res(1, 1536);
    OP(1)->vconv.mode = 1;
    EXPECT_REFUSED("residual 1 with mode 1");
    lie_res(1, 512 + 64); /* inside dst */
    EXPECT_REFUSED("residual outside runtime memory, overlapping dst");
    lie_res(1, ACT - 128); /* 256 bytes from there: past the arena */
    EXPECT_REFUSED("residual outside runtime memory");
    lie_res(1, 1538); /* not 4-aligned */
    EXPECT_REFUSED("residual outside runtime memory");
}
END_TEST

/* qout 2 (format 9): the convolution also writes the int8 codes of its
 * NHWC output at aux, rounded after its whole epilogue (the ReLU) as a
 * QUANT op rounds, round half to even of y / y_scale clamped to 127
 * (here from float64); its f32 output does not move. qout 1 (format 10)
 * writes the same codes alone at dst. Then every lie about them is
 * refused. */
START_TEST(int8_copy_runs)
{
    enum { AUX = 1900, N = M * H * W };
    const float ys = 0.004f; /* outputs up to about a unit: some codes clamp */
    uint8_t *plain = run_arena(blob, NULL);
    OP(1)->vconv.qout = 2, OP(1)->vconv.y_scale = ys, OP(1)->aux = AUX;
    uint8_t *dual = run_arena(work, NULL);
    ck_assert(memcmp(plain + 512, dual + 512, N * 4) == 0);
    ck_assert(memcmp(plain + 1024, dual + 1024, N * 4) == 0);
    const float *y = (const float *)(const void *)(dual + 512);
    int clamped = 0;
    for (int i = 0; i < N; i++) {
        double want = nearbyint((double)y[i] * (double)(1.0f / ys));
        clamped += want > 127.0;
        want = want > 127.0 ? 127.0 : want < -127.0 ? -127.0 : want;
        ck_assert_msg(((const int8_t *)dual)[AUX + i] == (int8_t)want, "code %d: %d, want %g", i,
                      ((const int8_t *)dual)[AUX + i], want);
    }
    ck_assert_msg(clamped > 0 && clamped < N, "%d of %d codes clamp", clamped, N);
    /* qout 1 (format 10): only the codes, at dst, the f32 rows made in
     * worker 0's scratch (a chunk of NIB_VCONV_CHUNK_FLOATS floats) */
    const struct nib_op two = *OP(1);
    OP(1)->vconv.qout = 1, OP(1)->dst = AUX, OP(1)->aux = 0;
    HDR()->wscratch_off = SCRATCH, HDR()->wscratch_size = 4 * NIB_VCONV_CHUNK_FLOATS;
    uint8_t *codes = run_arena(work, NULL);
    ck_assert(memcmp(codes + AUX, dual + AUX, N) == 0);
    free(codes);
    static const struct {
        uint64_t dst, aux;
        uint32_t scratch;
        const char *what;
    } lies[] = {
        {AUX, 0, 4 * NIB_VCONV_CHUNK_FLOATS - 64,
         "(conv): qout 1 needs 65536 bytes of worker scratch (header has 65472)"},
        {SCRATCH + 64, 0, 4 * NIB_VCONV_CHUNK_FLOATS, "and operands outside it"},
        {AUX, AUX + 128, 4 * NIB_VCONV_CHUNK_FLOATS, "qout 1 with its int8 copy (aux)"},
    };
    for (size_t k = 0; k < sizeof lies / sizeof lies[0]; k++) {
        *OP(1) = two;
        OP(1)->vconv.qout = 1, OP(1)->dst = lies[k].dst, OP(1)->aux = lies[k].aux;
        HDR()->wscratch_off = SCRATCH, HDR()->wscratch_size = lies[k].scratch;
        EXPECT_REFUSED(lies[k].what);
    }
    *OP(1) = two;
    free(plain), free(dual);
    memcpy(blob, work, size); /* the valid blob with the copy is the base of the lies below */
    OP(1)->aux = 512 + 8;     /* over its own output */
    EXPECT_REFUSED("(conv): qout 2 with its int8 copy (aux) outside runtime memory, overlapping");
    OP(1)->aux = 256 + 8; /* over its input */
    EXPECT_REFUSED("overlapping an operand");
    OP(1)->aux = ACT - N + 1;
    EXPECT_REFUSED("outside runtime memory");
    OP(1)->vconv.y_scale = 0.0f;
    EXPECT_REFUSED("qout 2 or y_scale 0");
    OP(1)->vconv.y_scale = INFINITY;
    EXPECT_REFUSED("qout 2 or y_scale inf");
    OP(1)->vconv.qout = 1, OP(1)->aux = 0; /* codes alone at dst: they need the scratch */
    EXPECT_REFUSED("qout 1 needs 65536 bytes of worker scratch (header has 0)");
    OP(1)->vconv.qout = 0, OP(1)->vconv.y_scale = 0.0f;
    EXPECT_REFUSED("qout 0 with its int8 copy (aux)");
}
END_TEST

/* Op 2 as it stands (binary, or the copy), run: each output element in
 * the loop order of its dims against the same float operations here
 * (a + a * b rounded twice for MULADD), and its int8 codes (qout 1 at
 * dst, 2 at aux, at the destination's element offsets) against float64
 * round half to even of y / y_scale, clamped. Returns how many clamp. */
static int ew_check(const char *what)
{
    const struct nib_op op = *OP(2);
    const struct nib_vew_params *p = &op.vew;
    uint8_t *mem = run_arena(work, NULL);
    const float *wsec = (const float *)(const void *)(work + HDR()->weights.offset);
    const float *a = (const float *)(const void *)(mem + op.src0);
    const float *b = p->b_tensor == UINT32_MAX ? NULL : wsec + 256 * p->b_tensor;
    int clamped = 0, i = 0;
    for (uint32_t i0 = 0; i0 < p->dims[0]; i0++)
        for (uint32_t i1 = 0; i1 < p->dims[1]; i1++)
            for (uint32_t i2 = 0; i2 < p->dims[2]; i2++)
                for (uint32_t i3 = 0; i3 < p->dims[3]; i3++, i++) {
                    const uint32_t ix[4] = {i0, i1, i2, i3};
                    uint64_t oa = 0, ob = 0, od = 0;
                    for (int d = 0; d < 4; d++)
                        oa += (uint64_t)ix[d] * p->sa[d], ob += (uint64_t)ix[d] * p->sb[d],
                            od += (uint64_t)ix[d] * p->sd[d];
                    if (op.code == NIB_VOP_BINARY)
                        od = (uint64_t)i;
                    volatile float want = a[oa];
                    if (op.code == NIB_VOP_BINARY) {
                        ck_assert_int_eq(p->fn, NIB_VBIN_MULADD);
                        volatile float t = a[oa] * b[ob];
                        want = a[oa] + t;
                    }
                    if (p->qout != 1) {
                        const float got = ((const float *)(const void *)(mem + op.dst))[od];
                        ck_assert_msg(memcmp(&got, (const float *)&want, 4) == 0,
                                      "%s: element %d = %g, want %g", what, i, (double)got,
                                      (double)want);
                    }
                    if (!p->qout)
                        continue;
                    double q = nearbyint((double)want * (double)(1.0f / p->y_scale));
                    clamped += fabs(q) > 127.0;
                    q = q > 127.0 ? 127.0 : q < -127.0 ? -127.0 : q;
                    const int8_t got = ((const int8_t *)mem)[(p->qout == 1 ? op.dst : op.aux) + od];
                    ck_assert_msg(got == (int8_t)q, "%s: code %d = %d, want %g", what, i, got, q);
                }
    free(mem);
    return clamped;
}

/* Element-wise ops' int8 outputs (format 10): the copy back to NCHW keeps
 * the codes beside its floats (qout 2) or writes them instead (qout 1, a
 * concat read only by a quantized convolution); the fused scale-and-add
 * (MULADD, squeeze-excite's x + x * s) with b per channel, b dense and a
 * strided (each a loop of its own in the runtime), with its codes. Then
 * every lie about them is refused. */
START_TEST(ew_int8_runs)
{
    enum { AUX = 1900 };
    const float ys = 0.004f;
    ew_check("copy");
    OP(2)->vew.qout = 2, OP(2)->vew.y_scale = ys, OP(2)->aux = AUX;
    int clamped = ew_check("copy qout 2");
    ck_assert_msg(clamped > 0 && clamped < M * H * W, "%d codes clamp", clamped);
    memcpy(work, blob, size);
    OP(2)->vew.qout = 1, OP(2)->vew.y_scale = ys, OP(2)->dst = AUX;
    ew_check("copy qout 1");
    /* y = a + a * b over the convolution's NHWC output, b from tensor 0
     * (the input scales: 2, 2, -1, -1 by channel, then zeros) */
    const struct nib_vew_params madd = {.dims = {1, H, W, M},
                                        .sa = {0, W * M, M, 1},
                                        .sb = {0, 0, 0, 1},
                                        .fn = NIB_VBIN_MULADD,
                                        .a_tensor = UINT32_MAX,
                                        .b_tensor = 0};
    const struct nib_op bin = {
        .code = NIB_VOP_BINARY, .tensor = UINT32_MAX, .src0 = 512, .dst = 1024, .vew = madd};
    const uint32_t dense_b[4] = {0, W * M, M, 1}, nchw_a[4] = {0, 1, W * M, M};
    for (int form = 0; form < 3; form++) {
        memcpy(work, blob, size);
        *OP(2) = bin;
        if (form == 1) /* b dense: the first H * W * M of tensor 0's floats */
            memcpy(OP(2)->vew.sb, dense_b, sizeof dense_b);
        if (form == 2) { /* a read NCHW: the strided loops; b by channel (dim 1) */
            OP(2)->vew.dims[1] = M, OP(2)->vew.dims[2] = H, OP(2)->vew.dims[3] = W;
            memcpy(OP(2)->vew.sa, nchw_a, sizeof nchw_a);
            const uint32_t sb[4] = {0, 1, 0, 0};
            memcpy(OP(2)->vew.sb, sb, sizeof sb);
        }
        ew_check(form == 0   ? "muladd, b per channel"
                 : form == 1 ? "muladd, b dense"
                             : "muladd, a strided");
        OP(2)->vew.qout = 2, OP(2)->vew.y_scale = ys, OP(2)->aux = AUX;
        ew_check(form == 0   ? "muladd qout 2, b per channel"
                 : form == 1 ? "muladd qout 2, b dense"
                             : "muladd qout 2, a strided");
    }
    memcpy(blob, work, size); /* the binary with its copy: the base of the lies */
    OP(2)->aux = 1024 + 8;
    EXPECT_REFUSED("(binary): qout 2 with its int8 copy (aux) outside runtime memory, overlapping");
    OP(2)->aux = 512 + 8;
    EXPECT_REFUSED("overlapping an operand");
    OP(2)->aux = ACT - M * H * W + 1;
    EXPECT_REFUSED("outside runtime memory");
    OP(2)->vew.qout = 1;
    EXPECT_REFUSED("(binary): qout 1 or y_scale");
    OP(2)->vew.qout = 3;
    EXPECT_REFUSED("qout 3");
    OP(2)->vew.y_scale = NAN;
    EXPECT_REFUSED("qout 2 or y_scale nan");
    OP(2)->vew.qout = 0, OP(2)->vew.y_scale = 0.0f;
    EXPECT_REFUSED("qout 0 with its int8 copy (aux)");
    OP(2)->vew.qout = 0, OP(2)->aux = 0;
    EXPECT_REFUSED("qout 0 or y_scale 0.004");
    *OP(2) = bin;
    OP(2)->vew.fn = NIB_VBIN_MULADD + 1;
    EXPECT_REFUSED("function 6 is unknown");
    const struct nib_op codes = {/* the NHWC -> NCHW copy, codes alone: 64 bytes, not 256 */
                                 .code = NIB_VOP_COPY,
                                 .tensor = UINT32_MAX,
                                 .src0 = 512,
                                 .dst = ACT - M * H * W,
                                 .vew = {.dims = {1, M, H, W},
                                         .sa = {0, 1, W * M, M},
                                         .sd = {0, H * W, W, 1},
                                         .a_tensor = UINT32_MAX,
                                         .b_tensor = UINT32_MAX,
                                         .qout = 1,
                                         .y_scale = ys}};
    *OP(2) = codes;
    ck_assert_int_eq(open_work(), 0);
    *OP(2) = codes;
    OP(2)->dst = ACT - M * H * W + 1;
    EXPECT_REFUSED("(copy): destination outside runtime memory");
    *OP(2) = codes;
    OP(2)->dst = 512 + 16;
    EXPECT_REFUSED("(copy): source 0 outside its memory or overlapping");
}
END_TEST

START_TEST(lies_refused)
{
    OP(1)->dst = ACT - 64;
    EXPECT_REFUSED("outside runtime memory");
    OP(1)->dst = 256 + 64;
    EXPECT_REFUSED("overlapping");
    OP(1)->vconv.kh = OP(1)->vconv.kw = 5;
    EXPECT_REFUSED("weights are not");
    OP(1)->vconv.groups = 3;
    EXPECT_REFUSED("limits");
    OP(1)->vconv.pad_top = 3;
    EXPECT_REFUSED("limits");
    OP(1)->vconv.oh = 9;
    EXPECT_REFUSED("limits");
    OP(1)->vconv.bias = 7;
    EXPECT_REFUSED("bias");
    OP(1)->vconv.act = NIB_VACT_SQRT;
    EXPECT_REFUSED("epilogue");
    OP(1)->vconv.post_mul = NAN;
    EXPECT_REFUSED("epilogue");
    OP(1)->vconv.depthwise = 1;
    EXPECT_REFUSED("depthwise");
    OP(1)->code = NIB_VOP_POOL;
    EXPECT_REFUSED("pool");
    OP(1)->vconv.mode = 2;
    EXPECT_REFUSED("mode 2");
    OP(1)->vconv.mode = 1; /* transposed: ONNX's 2 x 4 x 3 x 3 weights fit the 256 floats */
    ck_assert_int_eq(open_work(), 0);
    OP(1)->vconv.mode = 1;
    OP(1)->vconv.kh = OP(1)->vconv.kw = 9;
    EXPECT_REFUSED("weights are not");
    OP(1)->vconv.mode = 1;
    OP(1)->vconv.pad_top = 70000;
    EXPECT_REFUSED("limits");
    OP(1)->code = 45;
    EXPECT_REFUSED("opcode 45");
    OP(1)->code = NIB_OP_MATMUL;
    EXPECT_REFUSED("does not belong to a vision plan");
    OP(1)->flags = 1;
    EXPECT_REFUSED("flags");
    OP(0)->tensor = 99;
    EXPECT_REFUSED("scales");
    OP(0)->vrows.u8 = 2;
    EXPECT_REFUSED("input");
    OP(0)->dst = 64;
    EXPECT_REFUSED("overlapping");
    OP(2)->vew.sd[0] = 1u << 29;
    EXPECT_REFUSED("stride");
    OP(2)->vew.sd[1] = 1u << 20;
    EXPECT_REFUSED("destination outside");
    OP(2)->vew.sa[1] = 100000;
    EXPECT_REFUSED("source 0");
    OP(2)->vew.dims[2] = 0;
    EXPECT_REFUSED("dimension 2");
    OP(2)->vew.fn = 1;
    EXPECT_REFUSED("function");
    OP(2)->vew.a_tensor = 1; /* a tensor of 256 floats read up to index 63: fine... */
    OP(2)->vew.sa[1] = 100;  /* ...but not up to 3 x 100 + 3 x 16 + 3 x 4 */
    EXPECT_REFUSED("source 0");
    OP(2)->code = NIB_VOP_BINARY;
    OP(2)->vew.fn = NIB_VBIN_COUNT;
    EXPECT_REFUSED("function");
}
END_TEST

START_TEST(other_ops_refused)
{
    struct nib_op *op = OP(1);
    op->code = NIB_VOP_MATMUL;
    op->vmatmul = (struct nib_vmatmul_params){.m = 16, .n = 4, .k = 2, .bias = 2};
    ck_assert_int_eq(open_work(), 0); /* 16 x 2 in, 16 x 4 out: fits */
    op->code = NIB_VOP_MATMUL;
    op->vmatmul = (struct nib_vmatmul_params){.m = 16, .n = 4, .k = 100, .bias = 2};
    EXPECT_REFUSED("vmatmul");
    op->code = NIB_VOP_SOFTMAX;
    op->vrows = (struct nib_vrows_params){.rows = 1000, .n = 1000};
    EXPECT_REFUSED("softmax");
    op->code = NIB_VOP_RESIZE;
    op->vresize = (struct nib_vresize_params){4, 4, 2, 8, 8, 2.0f, 2.0f, 0, 9, 0};
    EXPECT_REFUSED("resize");
    op->code = NIB_VOP_RESIZE;
    op->vresize = (struct nib_vresize_params){4, 4, 2, 8, 8, 2.0f, 2.0f, 0, 0, 0};
    ck_assert_int_eq(open_work(), 0);
}
END_TEST

/* Layer norm and batched matmul: in place in op 1, shapes that fit, then
 * one lie at a time. */
START_TEST(norm_and_bmatmul_refused)
{
    struct nib_op *op = OP(1);
    const struct nib_op ln = {.code = NIB_VOP_LAYERNORM,
                              .tensor = UINT32_MAX,
                              .src0 = 256,
                              .dst = 512,
                              .vnorm = {.rows = 4, .n = 16, .gamma = 1, .beta = 2, .eps = 1e-5f}};
    *op = ln;
    ck_assert_int_eq(open_work(), 0);
    *op = ln;
    op->vnorm.n = 1000;
    EXPECT_REFUSED("layernorm");
    *op = ln;
    op->vnorm.eps = NAN;
    EXPECT_REFUSED("layernorm");
    *op = ln;
    op->vnorm.gamma = 7;
    EXPECT_REFUSED("gamma or beta");
    *op = ln;
    op->dst = 300;
    EXPECT_REFUSED("overlapping");
    const struct nib_op bm = {
        .code = NIB_VOP_BMATMUL,
        .tensor = UINT32_MAX,
        .src0 = 256,
        .src1 = 384,
        .dst = 512,
        .vbmm = {
            .nb0 = 1, .nb1 = 2, .m = 4, .n = 4, .k = 4, .sa = {0, 16, 4, 1}, .sb = {0, 16, 1, 4}}};
    *op = bm;
    ck_assert_int_eq(open_work(), 0);
    *op = bm;
    op->vbmm.k = 0;
    EXPECT_REFUSED("dimension 4");
    *op = bm;
    op->vbmm.sb[1] = 1u << 29;
    EXPECT_REFUSED("stride");
    *op = bm;
    op->vbmm.sa[0] = 1u << 20, op->vbmm.nb0 = 2;
    EXPECT_REFUSED("outside memory");
    *op = bm;
    op->src1 = 520;
    EXPECT_REFUSED("overlapping");
    *op = bm;
    op->tensor = 1;
    EXPECT_REFUSED("tensor");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("blob-vision");
    TCase *tc = tcase_create("vision");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, valid_blob_runs);
    tcase_add_test(tc, residual_runs);
    tcase_add_test(tc, int8_copy_runs);
    tcase_add_test(tc, ew_int8_runs);
    tcase_add_test(tc, lies_refused);
    tcase_add_test(tc, other_ops_refused);
    tcase_add_test(tc, norm_and_bmatmul_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
