/* Fuzz target: the input-file reader of vision models (tools/util/
 * tensor_file.h) on arbitrary bytes. The first byte picks the io record the
 * file is read for (image or not, f32 or u8, gray or colour) and whether
 * channels are swapped; the rest is the file, its format sniffed.
 *
 *   - a refusal has a message;
 *   - an accepted file fills the record: an f32 image's values lie in
 *     [0, 1] (pixels / 255), and the same bytes decode to the same output
 *     twice (nothing read from uninitialised memory).
 *
 * Any violated invariant aborts. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/util/tensor_file.h"

static const struct {
    uint32_t dtype, rank, dims[4];
} recs[] = {
    {NIB_IO_U8, 4, {1, 3, 4, 5}},  {NIB_IO_F32, 4, {1, 3, 4, 5}},  {NIB_IO_F32, 4, {1, 1, 3, 2}},
    {NIB_IO_U8, 4, {1, 1, 2, 3}},  {NIB_IO_F32, 2, {3, 5}},        {NIB_IO_U8, 1, {7}},
    {NIB_IO_F32, 4, {1, 3, 1, 1}}, {NIB_IO_U8, 4, {1, 3, 48, 64}},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned pick = data[0] % (sizeof recs / sizeof recs[0]), flags = (data[0] >> 4) & 1;
    struct nib_io_rec r;
    memset(&r, 0, sizeof r);
    strcpy(r.name, "x");
    r.dtype = recs[pick].dtype;
    r.rank = recs[pick].rank;
    r.bytes = r.dtype == NIB_IO_F32 ? 4 : 1;
    for (uint32_t d = 0; d < r.rank; d++)
        r.bytes *= (r.dims[d] = recs[pick].dims[d]);
    uint8_t *a = malloc(r.bytes), *b = malloc(r.bytes);
    FUZZ_ASSERT(a && b);
    memset(a, 0xa5, r.bytes);
    memset(b, 0x5a, r.bytes);
    char err[512] = "";
    int rc = nib_tensor_decode(data + 1, size - 1, NIB_TF_AUTO, flags, &r, a, err, sizeof err);
    if (rc) {
        FUZZ_ASSERT(rc == -1 && err[0]);
    } else {
        FUZZ_ASSERT(
            !nib_tensor_decode(data + 1, size - 1, NIB_TF_AUTO, flags, &r, b, err, sizeof err));
        FUZZ_ASSERT(!memcmp(a, b, r.bytes));
        enum nib_tensor_fmt f = nib_tensor_sniff(data + 1, size - 1);
        if (r.dtype == NIB_IO_F32 && (f == NIB_TF_PNM || f == NIB_TF_PNG))
            for (uint64_t i = 0; i < r.bytes / 4; i++) {
                float v;
                memcpy(&v, a + 4 * i, 4);
                FUZZ_ASSERT(v >= 0.0f && v <= 1.0f);
            }
    }
    free(a);
    free(b);
    return 0;
}
