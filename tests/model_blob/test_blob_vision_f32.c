/* Two f32 ops of vision plans in a blob built here, against their
 * contracts written out directly:
 *   x -MATMUL by f32 weights (+ bias)-> z -SOFTMAX over each row-> p
 * z (r, c) is one fmaf chain over k in order from +0, plus the bias once
 * at the end; p's row is exp(z - the row's max) with nibble's exp, one sum
 * of the row in order, each value divided by it. The executor runs whole
 * blocks of 8 columns with the columns in vector lanes, 8 rows at a time
 * and K in chunks, and sums 8 softmax rows at once, one in each lane
 * (rt/vision_exec.c); the shapes here take every one of those paths and
 * their remainders (a partial column block, a row tail, a last K chunk,
 * a row length not a multiple of 8), and every result must be the
 * contract's bits exactly, on 1, 2 and 3 workers. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/f32-math.h"
#include "model_blob/blob_view.h"
#include "rt/exec.h"
#include "tests/common/test_util.h"
#include "tests/common/vision_blob.h"
#include "tests/rt/rt_fixture.h"

enum { NT = 2, NOPS = 2, NIO = 3, SCR_SIZE = 4096 };

struct shape {
    uint32_t m, n, k;
    int bias;
};

static uint8_t *blob;
static uint64_t size, act, z_off, p_off;
static float *x, *w, *bias;
static char err[512];

static uint64_t up64(uint64_t v)
{
    return (v + 63) & ~63ull;
}

/* Values with a full mantissa, of mixed sign and size: products and sums
 * round, so any other order of the same operations shows in the bits. */
static float value(void)
{
    return ((float)rand() / (float)RAND_MAX - 0.5f) * (float)(1 + rand() % 4);
}

static void build(const struct shape *s)
{
    const uint64_t xb = (uint64_t)s->m * s->k * 4, zb = (uint64_t)s->m * s->n * 4;
    const uint64_t wb = (uint64_t)s->n * s->k * 4, bb = (uint64_t)s->n * 4;
    z_off = up64(xb);
    p_off = z_off + up64(zb);
    act = p_off + up64(zb) + SCR_SIZE;
    struct nib_blob_header h = nib_test_vision_header(
        NT, NOPS, NIO, act, (uint32_t)(act - SCR_SIZE), SCR_SIZE, up64(wb) + up64(bb));
    size = h.blob_size;
    blob = aligned_alloc(64, size);
    ck_assert_ptr_nonnull(blob);
    memset(blob, 0, size);
    memcpy(blob, &h, sizeof h);
    struct nib_tensor_rec *t = (struct nib_tensor_rec *)(void *)(blob + h.tensors.offset);
    t[0] = (struct nib_tensor_rec){
        .name = "w", .dtype = NIB_DT_F32, .rows = s->n, .cols = s->k, .offset = 0, .size = wb};
    t[1] = (struct nib_tensor_rec){
        .name = "b", .dtype = NIB_DT_F32, .rows = 1, .cols = s->n, .offset = up64(wb), .size = bb};
    for (int i = 0; i < NT; i++)
        t[i].tile_n = t[i].tile_k = 1;
    memcpy(blob + h.weights.offset, w, wb);
    memcpy(blob + h.weights.offset + up64(wb), bias, bb);
    struct nib_op *op = (struct nib_op *)(void *)(blob + h.plan.offset);
    op[0] = (struct nib_op){.code = NIB_VOP_MATMUL, .tensor = 0, .src0 = 0, .dst = z_off};
    op[0].vmatmul = (struct nib_vmatmul_params){
        .m = s->m, .n = s->n, .k = s->k, .bias = s->bias ? 1 : UINT32_MAX};
    op[1] =
        (struct nib_op){.code = NIB_VOP_SOFTMAX, .tensor = UINT32_MAX, .src0 = z_off, .dst = p_off};
    op[1].vrows = (struct nib_vrows_params){.rows = s->m, .n = s->n};
    struct nib_io_rec *io = (struct nib_io_rec *)(void *)(blob + h.tokenizer.offset);
    io[0] = (struct nib_io_rec){.name = "x",
                                .dir = NIB_IO_INPUT,
                                .dtype = NIB_IO_F32,
                                .rank = 2,
                                .dims = {s->m, s->k},
                                .off = 0,
                                .bytes = xb};
    io[1] = (struct nib_io_rec){.name = "z",
                                .dir = NIB_IO_OUTPUT,
                                .dtype = NIB_IO_F32,
                                .rank = 2,
                                .dims = {s->m, s->n},
                                .off = z_off,
                                .bytes = zb};
    io[2] = io[1];
    strcpy(io[2].name, "p");
    io[2].off = p_off;
    ((struct nib_blob_header *)(void *)blob)->crc32c = nib_blob_crc(blob, size);
}

/* Run the plan on n workers into a fresh memory (the caller frees it). */
static uint8_t *run(const struct nib_blob_view *v, uint32_t n)
{
    uint8_t *mem = aligned_alloc(64, act);
    ck_assert_ptr_nonnull(mem);
    memset(mem, 0x5a, act);
    memcpy(mem, x, (uint64_t)v->ops[0].vmatmul.m * v->ops[0].vmatmul.k * 4);
    struct nib_exec e = {.v = v, .mem = mem};
    struct rtf_team team;
    if (n > 1)
        rtf_team_start(&team, &e, n, 0, 0);
    ck_assert_int_eq(nib_exec_run(&e), 0);
    if (n > 1)
        rtf_team_stop(&team);
    return mem;
}

static void check_shape(const struct shape *s)
{
    srand(s->m * 131 + s->n * 7 + s->k);
    x = malloc((uint64_t)s->m * s->k * 4);
    w = malloc((uint64_t)s->n * s->k * 4);
    bias = malloc((uint64_t)s->n * 4);
    ck_assert(x && w && bias);
    for (uint64_t i = 0; i < (uint64_t)s->m * s->k; i++)
        x[i] = value();
    for (uint64_t i = 0; i < (uint64_t)s->n * s->k; i++)
        w[i] = value();
    for (uint32_t i = 0; i < s->n; i++)
        bias[i] = value();
    build(s);
    struct nib_blob_view v;
    ck_assert_msg(nib_blob_open(&v, blob, size, 1, err, sizeof err) == 0, "%s", err);
    float *row = malloc((uint64_t)s->n * 4);
    ck_assert_ptr_nonnull(row);
    for (uint32_t n = 1; n <= 3; n++) {
        uint8_t *mem = run(&v, n);
        const float *z = (const float *)(const void *)(mem + z_off);
        const float *p = (const float *)(const void *)(mem + p_off);
        for (uint32_t r = 0; r < s->m; r++) {
            for (uint32_t c = 0; c < s->n; c++) {
                float acc = 0.0f;
                for (uint32_t k = 0; k < s->k; k++)
                    acc = fmaf(x[(uint64_t)r * s->k + k], w[(uint64_t)c * s->k + k], acc);
                if (s->bias)
                    acc = acc + bias[c];
                const float got = z[(uint64_t)r * s->n + c];
                ck_assert_msg(memcmp(&got, &acc, 4) == 0,
                              "%ux%ux%u%s, %u workers: z[%u][%u] = %a, the chain gives %a", s->m,
                              s->n, s->k, s->bias ? " + bias" : "", n, r, c, (double)got,
                              (double)acc);
            }
            const float *zr = z + (uint64_t)r * s->n; /* checked above */
            float mx = -INFINITY, sum = 0.0f;
            for (uint32_t c = 0; c < s->n; c++)
                mx = zr[c] > mx ? zr[c] : mx;
            for (uint32_t c = 0; c < s->n; c++)
                sum += row[c] = nib_expf(zr[c] - mx);
            for (uint32_t c = 0; c < s->n; c++) {
                const float want = row[c] / sum, got = p[(uint64_t)r * s->n + c];
                ck_assert_msg(memcmp(&got, &want, 4) == 0,
                              "softmax of %u rows of %u, %u workers: p[%u][%u] = %a, the "
                              "contract gives %a",
                              s->m, s->n, n, r, c, (double)got, (double)want);
            }
        }
        free(mem);
    }
    free(row);
    free(blob);
    free(x);
    free(w);
    free(bias);
}

/* Two whole column blocks and a partial one, 8 rows and a tail of 3, K
 * in a whole chunk and a part of one. */
START_TEST(every_remainder)
{
    check_shape(&(struct shape){11, 21, 300, 1});
    check_shape(&(struct shape){11, 21, 300, 0});
}
END_TEST

/* Rows only in the tail; K shorter than a vector; K exactly a chunk. */
START_TEST(small_and_exact)
{
    check_shape(&(struct shape){3, 16, 5, 1});
    check_shape(&(struct shape){16, 8, 256, 1});
    check_shape(&(struct shape){1, 40, 513, 1});
}
END_TEST

/* The recogniser's widest: 40 rows by 120 inputs into 6625 columns, then
 * the 6625-way softmax of each row, so every worker has many blocks. */
START_TEST(recogniser_head)
{
    check_shape(&(struct shape){40, 6625, 120, 1});
}
END_TEST

TU_SUITE("blob-vision-f32", "core", NULL, NULL, 60, every_remainder, small_and_exact,
         recogniser_head)
