#include "rt/cpu_isa.h"

#include <stdio.h>
#include <string.h>

#include "model_blob/blob_format.h"

#if defined(__x86_64__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

uint32_t nib_cpu_isa(void)
{
    uint32_t a, b, c, d, isa = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave)
        return 0;
    uint64_t xcr0 = xgetbv0();
    int ymm_ok = (xcr0 & 6) == 6, zmm_ok = (xcr0 & 0xE6) == 0xE6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1,
        vnni = (c >> 11) & 1;
    if (ymm_ok && avx2 && fma && f16c)
        isa |= NIB_ISA_AVX2;
    if (zmm_ok && avx512f && avx512bw && vnni)
        isa |= NIB_ISA_AVX512VNNI;
    return isa;
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
uint32_t nib_cpu_isa(void)
{
    /* HWCAP_ASIMDDP is bit 20 on Linux/arm64. */
    return (getauxval(AT_HWCAP) & (1ul << 20)) ? NIB_ISA_NEON_DOT : 0;
}
#else
uint32_t nib_cpu_isa(void)
{
    return 0;
}
#endif

int nib_cpu_check(uint32_t required, char *err, size_t errlen)
{
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {NIB_ISA_AVX2, "avx2+fma+f16c"},
        {NIB_ISA_AVX512VNNI, "avx512-vnni"},
        {NIB_ISA_NEON_DOT, "neon-dotprod"},
    };
    uint32_t missing = required & ~nib_cpu_isa();
    if (!missing)
        return 0;
    size_t n = (size_t)snprintf(err, errlen, "the blob needs CPU features this machine lacks:");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((missing & names[i].bit) && n < errlen)
            n += (size_t)snprintf(err + n, errlen - n, " %s", names[i].name);
    if (missing & ~(uint32_t)(NIB_ISA_AVX2 | NIB_ISA_AVX512VNNI | NIB_ISA_NEON_DOT) && n < errlen)
        snprintf(err + n, errlen - n, " unknown(0x%x)", missing);
    return -1;
}
