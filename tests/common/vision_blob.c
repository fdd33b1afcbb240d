#include "tests/common/vision_blob.h"

#include <string.h>

#include "model_blob/blob_view.h"

static struct nib_io_rec rec(const char *name, uint32_t dir, uint32_t dtype, uint32_t rank,
                             const uint32_t *dims, uint64_t off)
{
    struct nib_io_rec r;
    memset(&r, 0, sizeof r);
    strncpy(r.name, name, sizeof r.name - 1);
    r.dir = dir;
    r.dtype = dtype;
    r.rank = rank;
    uint64_t bytes = nib_io_elem_size(dtype);
    for (uint32_t d = 0; d < rank; d++) {
        r.dims[d] = dims[d];
        bytes *= dims[d];
    }
    r.off = off;
    r.bytes = bytes;
    return r;
}

uint32_t nib_test_vision_io(int which, struct nib_io_rec *io, uint64_t *act_size)
{
    static const uint32_t img[4] = {1, 3, 8, 8}, small[2] = {2, 5};
    if (which == NIB_TEST_VISION_ONE) {
        io[0] = rec("image", NIB_IO_INPUT, NIB_IO_F32, 4, img, 0);
        io[1] = rec("same", NIB_IO_OUTPUT, NIB_IO_F32, 4, img, 0);
        *act_size = 768;
        return 2;
    }
    io[0] = rec("a", NIB_IO_INPUT, NIB_IO_F32, 4, img, 0);
    io[1] = rec("b", NIB_IO_INPUT, NIB_IO_U8, 2, small, 768);
    io[2] = rec("b_out", NIB_IO_OUTPUT, NIB_IO_U8, 2, small, 768);
    io[3] = rec("a_out", NIB_IO_OUTPUT, NIB_IO_F32, 4, img, 0);
    *act_size = 832;
    return 4;
}

struct nib_blob_header nib_test_vision_header(uint32_t n_tensors, uint32_t n_ops, uint32_t n_io,
                                              uint64_t act_size, uint32_t wscratch_off,
                                              uint32_t wscratch_size, uint64_t weights_size)
{
    struct nib_blob_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, NIB_BLOB_MAGIC, 8);
    h.version = NIB_BLOB_VERSION;
    h.header_size = sizeof h;
    h.model_kind = NIB_MODEL_VISION;
    h.n_io = n_io, h.n_tensors = n_tensors, h.n_ops = n_ops, h.max_batch = 1;
    h.act_size = act_size, h.wscratch_off = wscratch_off, h.wscratch_size = wscratch_size;
    h.tensors = (struct nib_section){256, n_tensors * sizeof(struct nib_tensor_rec)};
    h.plan =
        (struct nib_section){(256 + h.tensors.size + 63) / 64 * 64, n_ops * sizeof(struct nib_op)};
    h.tokenizer =
        (struct nib_section){h.plan.offset + h.plan.size, n_io * sizeof(struct nib_io_rec)};
    h.weights = (struct nib_section){NIB_WEIGHT_ALIGN, weights_size};
    h.blob_size = h.weights.offset + h.weights.size;
    return h;
}

size_t nib_test_vision_blob_io(uint8_t *buf, const struct nib_io_rec *io, uint32_t n_io,
                               uint64_t act_size)
{
    memset(buf, 0, NIB_TEST_VISION_BLOB_SIZE);
    const struct nib_blob_header h = nib_test_vision_header(0, 0, n_io, act_size, 0, 0, 0);
    memcpy(buf, &h, sizeof h);
    memcpy(buf + h.tokenizer.offset, io, (size_t)n_io * sizeof *io);
    uint32_t crc = nib_blob_crc(buf, NIB_TEST_VISION_BLOB_SIZE);
    memcpy(buf + offsetof(struct nib_blob_header, crc32c), &crc, 4);
    return NIB_TEST_VISION_BLOB_SIZE;
}

size_t nib_test_vision_blob(uint8_t *buf, int which)
{
    struct nib_io_rec io[NIB_IO_MAX];
    uint64_t act;
    uint32_t n = nib_test_vision_io(which, io, &act);
    return nib_test_vision_blob_io(buf, io, n, act);
}
