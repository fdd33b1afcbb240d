/* The vision kernels (kernels/conv.h): every variant this build compiles
 * bitwise against the scalar reference, the reference against float64 and
 * exact integer references (tests/kernels/convcheck.c), and refusals. */
#include <check.h>
#include <stdio.h>

#include "kernels/conv.h"
#include "tests/common/test_util.h"
#include "tests/kernels/convcheck.h"

typedef int (*check_fn)(const struct nib_conv_kernels *, const struct nib_conv_kernels *, uint64_t,
                        char *, size_t);

/* ref against itself (its float64 / integer reference), then every SIMD
 * variant of this build against ref. */
static void run_all(check_fn f, uint64_t seed)
{
    const struct nib_conv_kernels *ref = nib_conv_kernels_get(NIB_ISA_SCALAR);
    const uint32_t isas[] = {NIB_ISA_AVX2, NIB_ISA_NEON_DOT};
    char msg[512] = "";
    ck_assert_ptr_nonnull(ref);
    ck_assert_msg(f(ref, ref, seed, msg, sizeof msg) == 0, "scalar: %s", msg);
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const struct nib_conv_kernels *var = nib_conv_kernels_get(isas[i]);
        if (!var)
            continue;
        for (uint64_t s = seed; s < seed + 3; s++)
            ck_assert_msg(f(ref, var, s, msg, sizeof msg) == 0, "%s: %s", var->name, msg);
    }
}

START_TEST(test_conv_f32)
{
    run_all(ccheck_conv_f32, 1);
}
END_TEST

START_TEST(test_dwconv_f32)
{
    run_all(ccheck_dwconv_f32, 11);
}
END_TEST

START_TEST(test_conv_s8)
{
    run_all(ccheck_conv_s8, 21);
}
END_TEST

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* The AVX2 table with conv_s8 replaced by fn, against the scalar one. */
static void check_conv_s8_choice(const char *name, nib_qconv_fn fn)
{
    const struct nib_conv_kernels *ref = nib_conv_kernels_get(NIB_ISA_SCALAR);
    struct nib_conv_kernels var = *nib_conv_kernels_get(NIB_ISA_AVX2);
    char msg[512] = "";
    var.name = name;
    var.conv_s8 = fn;
    for (uint64_t s = 21; s < 24; s++)
        ck_assert_msg(ccheck_conv_s8(ref, &var, s, msg, sizeof msg) == 0, "%s", msg);
}
#endif

/* The AVX2 table's quantized convolution uses the VNNI matmuls where the
 * CPU has them: the plain AVX2 one is checked too, by itself. */
START_TEST(test_conv_s8_plain_avx2)
{
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    check_conv_s8_choice("avx2 without vnni", nib_conv_s8_qcs8_avx2);
    if (!nib_conv_s8_avxvnni_available() && !nib_avx512vnni_available())
        fprintf(stderr, "conv: this CPU has no AVX-VNNI and no AVX-512 VNNI: the avx2 table's "
                        "quantized convolution ran the plain AVX2 matmuls, the VNNI ones were "
                        "not tested\n");
#endif
}
END_TEST

/* Where the CPU has AVX-512 VNNI the table's convolution runs the 512-bit
 * matmuls: the 256-bit AVX-VNNI choice is checked by itself too. */
START_TEST(test_conv_s8_avxvnni_256)
{
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    check_conv_s8_choice("avx2 with 256-bit vnni", nib_conv_s8_qcs8_avxvnni);
    if (!nib_conv_s8_avxvnni_available())
        fprintf(stderr, "conv: this CPU has no AVX-VNNI: the 256-bit VNNI matmuls were not "
                        "tested (the plain AVX2 ones ran in their place)\n");
    if (!nib_avx512vnni_available())
        fprintf(stderr, "conv: this CPU has no AVX-512 VNNI: the 512-bit matmuls were not "
                        "tested\n");
#endif
}
END_TEST

START_TEST(test_dwconv_s8)
{
    run_all(ccheck_dwconv_s8, 31);
}
END_TEST

START_TEST(test_pool)
{
    run_all(ccheck_pool, 41);
}
END_TEST

START_TEST(test_resize)
{
    run_all(ccheck_resize, 51);
}
END_TEST

START_TEST(test_rejects)
{
    char msg[512] = "";
    ck_assert_msg(ccheck_rejects(msg, sizeof msg) == 0, "%s", msg);
}
END_TEST

START_TEST(test_conv_dispatch)
{
    ck_assert_ptr_nonnull(nib_conv_kernels_get(NIB_ISA_SCALAR));
    ck_assert_ptr_null(nib_conv_kernels_get(NIB_ISA_AVX512VNNI));
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    ck_assert_ptr_nonnull(nib_conv_kernels_get(NIB_ISA_AVX2));
#endif
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("conv");
    TU_CASE(s, "conv", NULL, NULL, 120, test_conv_f32, test_dwconv_f32, test_conv_s8,
            test_conv_s8_plain_avx2, test_conv_s8_avxvnni_256, test_dwconv_s8, test_pool,
            test_resize, test_rejects, test_conv_dispatch);
    return s;
}
