/* The .npy files `nib run` reads (a minimal reader: float32 or uint8, C
 * order, versions 1 to 3). A parser of untrusted input: fuzzed
 * (tests/fuzz/fuzz_run_npy.c). */
#ifndef NIB_RUN_NPY_H
#define NIB_RUN_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NIB_RUN_NPY_MAX_RANK 8

struct nib_run_npy {
    uint32_t dtype; /* 1 float32 ('<f4'), 2 uint8 ('|u1'): the tensor table's numbers */
    uint32_t elem;  /* bytes per element */
    uint32_t rank;  /* 0 (a scalar) .. NIB_RUN_NPY_MAX_RANK */
    uint32_t dims[NIB_RUN_NPY_MAX_RANK];
    const uint8_t *data; /* inside buf */
    size_t bytes;        /* exactly what the shape and type take */
};

/* Parse buf (size bytes). 0, or -1 with the reason in err. Pure. */
int nib_run_npy_parse(const uint8_t *buf, size_t size, struct nib_run_npy *out, char *err,
                      size_t errlen);

#endif
