/* What the CPU can run, checked against what the blob was packed for. */
#ifndef NIB_CPU_ISA_H
#define NIB_CPU_ISA_H

#include <stddef.h>
#include <stdint.h>

/* enum nib_isa bits this CPU supports. */
uint32_t nib_cpu_isa(void);

/* 0 if every bit of required is supported; else -1 with the missing ones named. */
int nib_cpu_check(uint32_t required, char *err, size_t errlen);

#endif
