/* What the CPU can run, checked against what the blob was packed for. */
#ifndef NIB_CPU_ISA_H
#define NIB_CPU_ISA_H

#include <stddef.h>
#include <stdint.h>

/* enum nib_isa bits this CPU supports. */
uint32_t nib_cpu_isa(void);

/* 0 if every bit of required is supported; else -1 with the missing ones named. */
int nib_cpu_check(uint32_t required, char *err, size_t errlen);

static inline void nib_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

#endif
