/* NEON kernel tests: the NEON-dotprod variants against the scalar
 * references (tests/kernels/qcheck.c), built statically with the aarch64
 * cross compiler and run under qemu-aarch64 by meson. A plain program:
 * Check is not built for aarch64 here. Exit 0 all passed, 1 a failure,
 * 77 skipped (this build has no NEON-dotprod variant). */
#include <stdio.h>

#include "tests/kernels/convcheck.h"
#include "tests/kernels/qcheck.h"

static int failures;

static void report(const char *what, int nfail, const char *msg)
{
    if (nfail) {
        printf("FAIL: %s: %d failure(s); first: %s\n", what, nfail, msg);
        failures++;
    } else {
        printf("ok: %s\n", what);
    }
}

int main(void)
{
    const struct nib_qkernels *ref = nib_qkernels_get(NIB_ISA_SCALAR);
    const struct nib_qkernels *neon = nib_qkernels_get(NIB_ISA_NEON_DOT);
    if (!neon) {
        printf("SKIP: this build has no NEON-dotprod kernels (compile with "
               "-march=armv8.2-a+dotprod)\n");
        return 77;
    }
    char msg[512] = "";
    for (uint64_t seed = 1; seed <= 3; seed++) {
        char what[64];
        snprintf(what, sizeof what, "qact neon == scalar (seed %llu)", (unsigned long long)seed);
        report(what, qcheck_qact(ref, neon, seed, msg, sizeof msg), msg);
        snprintf(what, sizeof what, "gemm neon == scalar (seed %llu)", (unsigned long long)seed);
        report(what, qcheck_gemm(ref, neon, seed, msg, sizeof msg), msg);
    }
    report("qact by blocks == whole rows (neon)", qcheck_qact_blocks(neon, 23, msg, sizeof msg),
           msg);
    report("rmsnorm, silu-mul, rope neon == scalar", qcheck_f32_ops(ref, neon, 24, msg, sizeof msg),
           msg);
    report("attention neon == scalar", qcheck_attention(ref, neon, 21, msg, sizeof msg), msg);
    report("attention scalar vs double (aarch64)", qcheck_attention(ref, ref, 22, msg, sizeof msg),
           msg);
    report("tanh vs double, NEON form == scalar (aarch64)", qcheck_tanh(msg, sizeof msg), msg);
    report("gelu-mul neon == scalar", qcheck_gelu_mul(ref, neon, 25, msg, sizeof msg), msg);
    report("attention window/softcap neon == scalar",
           qcheck_attention_window(ref, neon, 26, msg, sizeof msg), msg);
    report("attention window/softcap scalar vs double (aarch64)",
           qcheck_attention_window(ref, ref, 27, msg, sizeof msg), msg);
    report("gemm of m tokens == m gemvs (neon)", qcheck_gemm_vs_gemv(neon, 11, msg, sizeof msg),
           msg);
    report("gemm of m tokens == m gemvs (scalar, aarch64)",
           qcheck_gemm_vs_gemv(ref, 12, msg, sizeof msg), msg);
    report("neon gemv vs double precision", qcheck_vs_double(neon, 13, msg, sizeof msg), msg);
    report("scalar gemv vs double precision (aarch64)", qcheck_vs_double(ref, 14, msg, sizeof msg),
           msg);
    report("worst-case magnitudes (neon)", qcheck_worst_case(neon, msg, sizeof msg), msg);
    report("worst-case magnitudes (scalar, aarch64)", qcheck_worst_case(ref, msg, sizeof msg), msg);
    const struct nib_conv_kernels *cref = nib_conv_kernels_get(NIB_ISA_SCALAR);
    const struct nib_conv_kernels *cneon = nib_conv_kernels_get(NIB_ISA_NEON_DOT);
    if (!cneon) {
        report("vision kernels: a NEON table", 1, "nib_conv_kernels_get(NEON_DOT) is NULL");
    } else {
        static const struct {
            const char *what;
            int (*f)(const struct nib_conv_kernels *, const struct nib_conv_kernels *, uint64_t,
                     char *, size_t);
        } vk[] = {
            {"conv f32", ccheck_conv_f32},
            {"dwconv f32", ccheck_dwconv_f32},
            {"conv s8 (q4c, q8c)", ccheck_conv_s8},
            {"dwconv s8", ccheck_dwconv_s8},
            {"pool f32", ccheck_pool},
            {"resize f32", ccheck_resize},
        };
        for (size_t i = 0; i < sizeof vk / sizeof vk[0]; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s neon == scalar", vk[i].what);
            report(what, vk[i].f(cref, cneon, 61 + i, msg, sizeof msg), msg);
            snprintf(what, sizeof what, "%s scalar vs reference (aarch64)", vk[i].what);
            report(what, vk[i].f(cref, cref, 71 + i, msg, sizeof msg), msg);
        }
        report("vision kernels refuse bad shapes (aarch64)", ccheck_rejects(msg, sizeof msg), msg);
    }
    printf("%s\n", failures ? "NEON kernel tests FAILED" : "NEON kernel tests passed");
    return failures ? 1 : 0;
}
