/* Fuzz target: the .npy files `nib run` reads (tools/cli/run_npy.c).
 * Invariants: a refusal says why; an accepted file's data lies inside the
 * input and is exactly what its shape and element type take. */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/cli/run_npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nib_run_npy a;
    char err[160];
    err[0] = 0;
    if (nib_run_npy_parse(data, size, &a, err, sizeof err)) {
        FUZZ_ASSERT(err[0] != 0);
        return 0;
    }
    FUZZ_ASSERT(a.dtype == 1 || a.dtype == 2);
    FUZZ_ASSERT(a.elem == (a.dtype == 1 ? 4u : 1u));
    FUZZ_ASSERT(a.rank <= NIB_RUN_NPY_MAX_RANK);
    size_t count = 1;
    for (uint32_t d = 0; d < a.rank; d++)
        count *= a.dims[d];
    FUZZ_ASSERT(a.bytes == count * a.elem);
    FUZZ_ASSERT(a.data >= data && a.data + a.bytes == data + size);
    return 0;
}
