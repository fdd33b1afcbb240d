/* The .npy files of the reference run: float32 ('<f4') in C order only,
 * read and written through nib's one .npy header code
 * (tools/util/tensor_file.h), with the importer's own size limits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/onnx/onnx_npy.h"
#include "tools/util/tensor_file.h"
#include "tools/util/tool_util.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

int nx_npy_parse(const uint8_t *buf, size_t size, uint32_t *rank, int64_t *dims, const float **data,
                 char *err, size_t errlen)
{
    uint32_t dtype;
    uint64_t d64[NIB_IO_MAX_RANK];
    size_t off;
    if (nib_npy_header(buf, size, &dtype, rank, d64, &off, err, errlen))
        return -1;
    if (dtype != NIB_IO_F32)
        FAIL(".npy: only little-endian float32 ('<f4') is supported");
    uint64_t n = 1;
    for (uint32_t d = 0; d < *rank; d++) {
        if (d64[d] > (uint64_t)NX_MAX_DIM || (n *= d64[d]) > NX_MAX_ELEMS)
            FAIL(".npy: too many elements");
        dims[d] = (int64_t)d64[d];
    }
    if (size - off != n * 4)
        FAIL(".npy: %zu data bytes, the shape needs %llu", size - off, (unsigned long long)(n * 4));
    *data = (const float *)(buf + off); /* callers memcpy: the offset may be unaligned */
    return 0;
}

int nx_data_open(struct nx_data_arg *a, const char *arg, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        FAIL("--data '%s': expected NAME=FILE.npy", arg);
    a->arg = arg;
    a->name = arg;
    a->name_len = (size_t)(eq - arg);
    a->path = eq + 1;
    return 0;
}

int nx_data_load(struct nx_data_arg *a, uint32_t rank, const int64_t *dims, char *err,
                 size_t errlen)
{
    if (nib_map_file(a->path, &a->buf, &a->size, err, errlen))
        return -1;
    uint32_t r;
    int64_t d[NX_MAX_RANK];
    if (nx_npy_parse(a->buf, a->size, &r, d, &a->data, err, errlen))
        return -1;
    if (r != rank || memcmp(d, dims, rank * sizeof *d))
        FAIL("--data %s: the file's dims differ from the input's", a->arg);
    return 0;
}

void nx_data_close(struct nx_data_arg *a)
{
    if (a->buf)
        nib_unmap_file(a->buf, a->size);
    a->buf = NULL;
}

int nx_npy_write(const char *path, const struct nx_tensor *t, char *err, size_t errlen)
{
    uint64_t dims[NX_MAX_RANK];
    for (uint32_t d = 0; d < t->rank; d++)
        dims[d] = (uint64_t)t->dims[d];
    uint8_t head[NIB_NPY_HEAD_MAX];
    const size_t hn = nib_npy_head(head, NIB_IO_F32, t->rank, dims);
    FILE *f = fopen(path, "wb");
    if (!f)
        FAIL("%s: cannot create", path);
    uint64_t n = nx_elems(t);
    int ok = fwrite(head, 1, hn, f) == hn;
    float buf[1024]; /* one call per chunk, not per value */
    for (uint64_t i = 0; ok && i < n;) {
        size_t m = 0;
        for (; m < sizeof buf / sizeof *buf && i < n; m++, i++)
            buf[m] = t->dtype == NX_F32 ? t->f[i] : (float)t->i[i];
        ok = fwrite(buf, 4, m, f) == m;
    }
    if (fclose(f) || !ok)
        FAIL("%s: write failed", path);
    return 0;
}
