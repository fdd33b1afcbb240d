/* Tests for the vision weights' GPTQ (vq_gptq_rows, vq_hessian): on a
 * small 3x3 convolution over smooth, correlated images, the Hessian
 * reproduces the layer's output error computed directly, the error
 * feedback gives a smaller output error than per-channel rounding
 * (vq_quantize_rows), codes stay in [-8, 7], and the result does not
 * depend on the thread count. */
#include "tests/common/test_util.h"
#include "tools/compiler/vision_gptq.h"
#include "tools/compiler/vision_quant.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double nrand(void)
{
    double u = urand(), v = urand();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

#define NI 3 /* images */
#define HH 10
#define WW 10
#define CI 8
#define CO 24
#define KK (CI * 9)

static const struct nib_conv_shape shape = {HH, WW, CI, HH, WW, CO, 1, 3, 3, 1, 1, 1, 1, 1, 1};

/* NHWC images: a few smooth patterns mixed into every channel, then a
 * ReLU, as a backbone's activations look. */
static float *make_x(void)
{
    float *x = malloc(sizeof(float) * NI * HH * WW * CI);
    ck_assert(x);
    for (int n = 0; n < NI; n++) {
        double mix[3][CI], fy[3], fx[3], ph[3];
        for (int p = 0; p < 3; p++) {
            fy[p] = 0.2 + urand() * 0.6, fx[p] = 0.2 + urand() * 0.6, ph[p] = urand() * 6.28;
            for (int c = 0; c < CI; c++)
                mix[p][c] = nrand();
        }
        for (int y = 0; y < HH; y++)
            for (int xx = 0; xx < WW; xx++)
                for (int c = 0; c < CI; c++) {
                    double v = 0.1 * nrand() + 0.3;
                    for (int p = 0; p < 3; p++)
                        v += mix[p][c] * sin(fy[p] * y + fx[p] * xx + ph[p]);
                    x[(((size_t)n * HH + y) * WW + xx) * CI + c] = (float)(v > 0 ? v : 0);
                }
    }
    return x;
}

/* Sum over every output of (conv with weights a - conv with weights b)^2,
 * computed directly (OIHW weights, zero padding). */
static double out_err(const float *x, const double *d)
{
    double e = 0;
    for (int n = 0; n < NI; n++)
        for (int oy = 0; oy < HH; oy++)
            for (int ox = 0; ox < WW; ox++)
                for (int o = 0; o < CO; o++) {
                    double s = 0;
                    for (int c = 0; c < CI; c++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++) {
                                int iy = oy - 1 + ky, ix = ox - 1 + kx;
                                if (iy < 0 || iy >= HH || ix < 0 || ix >= WW)
                                    continue;
                                s += d[(size_t)o * KK + (c * 3 + ky) * 3 + kx] *
                                     x[(((size_t)n * HH + iy) * WW + ix) * CI + c];
                            }
                    e += s * s;
                }
    return e;
}

/* tr(D H D^T). */
static double h_err(const double *h, const double *d)
{
    double e = 0;
    for (int o = 0; o < CO; o++)
        for (int i = 0; i < KK; i++)
            for (int j = 0; j < KK; j++)
                e += d[(size_t)o * KK + i] * h[(size_t)i * KK + j] * d[(size_t)o * KK + j];
    return e;
}

static void diff(const float *w, const int8_t *q, const float *s, double *d)
{
    for (int o = 0; o < CO; o++)
        for (int k = 0; k < KK; k++)
            d[(size_t)o * KK + k] =
                (double)w[(size_t)o * KK + k] - (double)s[o] * q[(size_t)o * KK + k];
}

START_TEST(test_feedback_lowers_output_error)
{
    float *x = make_x(), *w = malloc(sizeof(float) * CO * KK);
    double *h = malloc(sizeof(double) * KK * KK), *h2 = malloc(sizeof(double) * KK * KK);
    double *d = malloc(sizeof(double) * CO * KK);
    int8_t *qr = malloc(CO * KK), *qg = malloc(CO * KK), *qg3 = malloc(CO * KK);
    float sr[CO], sg[CO], sg3[CO];
    ck_assert(w && h && h2 && d && qr && qg && qg3);
    for (int i = 0; i < CO * KK; i++)
        w[i] = (float)(0.1 * nrand());
    ck_assert(vq_hess_cols(KK) >= (uint64_t)NI * HH * WW); /* every pixel summed */
    vq_hessian(x, NI, &shape, h);

    vq_quantize_rows(w, CO, KK, 4, qr, sr);
    diff(w, qr, sr, d);
    const double e_rtn = out_err(x, d), e_rtn_h = h_err(h, d);
    ck_assert_msg(fabs(e_rtn - e_rtn_h) <= 1e-6 * e_rtn, "Hessian %g, direct %g", e_rtn_h, e_rtn);

    char err[256];
    memcpy(h2, h, sizeof(double) * KK * KK);
    ck_assert_msg(vq_gptq_rows(w, CO, KK, h2, 1, qg, sg, err, sizeof err) == 0, "%s", err);
    memcpy(h2, h, sizeof(double) * KK * KK);
    ck_assert_msg(vq_gptq_rows(w, CO, KK, h2, 3, qg3, sg3, err, sizeof err) == 0, "%s", err);
    ck_assert(memcmp(qg, qg3, CO * KK) == 0 && memcmp(sg, sg3, sizeof sg) == 0);
    for (int i = 0; i < CO * KK; i++)
        ck_assert(qg[i] >= -8 && qg[i] <= 7);
    diff(w, qg, sg, d);
    const double e_gptq = out_err(x, d);
    printf("layer output error: rtn %.6g, gptq %.6g (ratio %.3f)\n", e_rtn, e_gptq, e_gptq / e_rtn);
    ck_assert_msg(e_gptq < 0.9 * e_rtn, "gptq %g against rtn %g", e_gptq, e_rtn);
    free(x), free(w), free(h), free(h2), free(d), free(qr), free(qg), free(qg3);
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("vision_gptq");
    TU_CASE(s, "vision_gptq", NULL, NULL, 120, test_feedback_lowers_output_error);
    return s;
}
