/* Fuzz target: GGUF tensor types (tools/compiler/ggml_dequant.c) and exact
 * repacks (tools/compiler/repack.c) on arbitrary block bytes. A row of any
 * type dequantizes without a fault; a repack into any format either
 * refuses with a message or succeeds, and then every packed weight
 * (nib_qrow_f32) equals ggml's weight bit for bit (a zero's sign aside).
 *
 * Input: [type][format][rows][blocks per row], then block bytes (cut to
 * whole rows). */
#include <string.h>

#include "kernels/qformat.h"
#include "tests/fuzz/fuzz.h"
#include "tools/compiler/ggml_dequant.h"
#include "tools/compiler/gguf.h"
#include "tools/compiler/repack.h"

static const uint32_t types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,    GGML_TYPE_BF16,   GGML_TYPE_Q4_0,
                                 GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,   GGML_TYPE_Q5_1,   GGML_TYPE_Q8_0,
                                 GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,   GGML_TYPE_Q4_K,   GGML_TYPE_Q5_K,
                                 GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, 16};

static const struct nib_qspec formats[] = {
    {NIB_DT_Q4, 32},  {NIB_DT_Q8C, 32}, {NIB_DT_Q4F, 16}, {NIB_DT_Q4F, 32},
    {NIB_DT_Q8F, 16}, {NIB_DT_Q8F, 32}, {NIB_DT_Q4A, 32}, {NIB_DT_Q4, 64},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint32_t type = types[data[0] % (sizeof types / sizeof types[0])];
    struct nib_qspec spec = formats[data[1] % (sizeof formats / sizeof formats[0])];
    uint32_t rows = 1 + data[2] % 12, nblk = 1 + data[3] % 4;
    data += 4, size -= 4;
    const struct ggml_type_info *ti = ggml_type_info(type);
    float *ref = malloc(nblk * 256 * sizeof *ref), *got = malloc(nblk * 256 * sizeof *got);
    FUZZ_ASSERT(ref && got);
    if (!ti) { /* an unknown type is refused */
        FUZZ_ASSERT(ggml_dequant_row(type, data, 256, ref) == -1);
        free(ref), free(got);
        return 0;
    }
    uint32_t cols = nblk * ti->blck;
    uint64_t rb = (uint64_t)nblk * ti->bytes;
    if (size < rb) { /* too short for a row: partial blocks are refused */
        FUZZ_ASSERT(ti->blck == 1 || ggml_dequant_row(type, data, ti->blck + 1, ref) == -1);
        free(ref), free(got);
        return 0;
    }
    if (rows > size / rb)
        rows = (uint32_t)(size / rb);
    /* an exact-size copy of the rows, so reads past them are caught */
    uint8_t *buf = malloc(rows * rb);
    FUZZ_ASSERT(buf);
    memcpy(buf, data, rows * rb);
    struct gguf_tensor t = {.name = {4, "fuzz"},
                            .n_dims = 2,
                            .ne = {cols, rows, 1, 1},
                            .type = type,
                            .n_elems = (uint64_t)rows * cols,
                            .nbytes = rows * rb,
                            .data = buf};
    struct llama_weight w = {.t = &t, .rows = rows, .cols = cols};
    for (uint32_t r = 0; r < rows; r++)
        FUZZ_ASSERT(ggml_dequant_row(type, buf + r * rb, cols, ref) == 0);
    struct nib_qlayout l;
    char err[512];
    err[0] = 0;
    if (nib_qlayout_get(&l, spec.dtype, spec.group, rows, cols) == 0) {
        uint8_t *out = malloc(l.size);
        FUZZ_ASSERT(out);
        if (nib_repack_into(&w, spec, out, err, sizeof err) == 0) {
            for (uint32_t r = 0; r < rows; r++) {
                ggml_dequant_row(type, buf + r * rb, cols, ref);
                nib_qrow_f32(&l, out, r, 0, cols, got);
                for (uint32_t c = 0; c < cols; c++)
                    FUZZ_ASSERT(!memcmp(&ref[c], &got[c], 4) || (ref[c] == 0.0f && got[c] == 0.0f));
            }
        } else {
            /* a format that holds the type refuses only a broken scale */
            FUZZ_ASSERT(err[0] != 0);
            FUZZ_ASSERT(!nib_repack_holds(type, spec) || strstr(err, "non-finite"));
        }
        free(out);
    }
    free(buf), free(ref), free(got);
    return 0;
}
