/* The .npy format, version 1 to 3: magic, version, header length, a
 * Python dict literal with descr, fortran_order and shape, then the
 * data. Only '<f4' in C order is accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/onnx/onnx_npy.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

int nx_npy_parse(const uint8_t *buf, size_t size, uint32_t *rank, int64_t *dims, const float **data,
                 char *err, size_t errlen)
{
    if (size < 10 || memcmp(buf, "\x93NUMPY", 6))
        FAIL("not a .npy file");
    size_t hlen, off;
    if (buf[6] == 1) {
        hlen = buf[8] | (size_t)buf[9] << 8;
        off = 10;
    } else if ((buf[6] == 2 || buf[6] == 3) && size >= 12) {
        hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        off = 12;
    } else {
        FAIL(".npy version %u is not supported", buf[6]);
    }
    if (hlen > 65536 || hlen > size - off)
        FAIL(".npy header runs past the file");
    char h[65537];
    memcpy(h, buf + off, hlen);
    h[hlen] = 0;
    if (!strstr(h, "'descr': '<f4'"))
        FAIL(".npy: only little-endian float32 ('<f4') is supported");
    if (!strstr(h, "'fortran_order': False"))
        FAIL(".npy: only C order is supported");
    const char *p = strstr(h, "'shape': (");
    if (!p)
        FAIL(".npy: no shape");
    p += 10;
    uint64_t n = 1;
    *rank = 0;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > NX_MAX_DIM || *rank == NX_MAX_RANK)
            FAIL(".npy: bad shape");
        dims[(*rank)++] = v;
        n *= (uint64_t)v;
        if (n > NX_MAX_ELEMS)
            FAIL(".npy: too many elements");
        p = end;
    }
    off += hlen;
    if (size - off != n * 4)
        FAIL(".npy: %zu data bytes, the shape needs %llu", size - off, (unsigned long long)(n * 4));
    *data = (const float *)(buf + off); /* callers memcpy: the offset may be unaligned */
    return 0;
}

int nx_npy_write(const char *path, const struct nx_tensor *t, char *err, size_t errlen)
{
    char h[256];
    int k = snprintf(h, sizeof h, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (uint32_t d = 0; d < t->rank; d++)
        k += snprintf(h + k, sizeof h - (size_t)k, "%lld%s", (long long)t->dims[d],
                      t->rank == 1      ? ","
                      : d + 1 < t->rank ? ", "
                                        : "");
    k += snprintf(h + k, sizeof h - (size_t)k, "), }");
    /* pad with spaces so the data starts at a multiple of 64, newline last */
    size_t total = ((size_t)k + 10 + 1 + 63) / 64 * 64;
    while ((size_t)k + 10 + 1 < total)
        h[k++] = ' ';
    h[k++] = '\n';
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)k, (uint8_t)(k >> 8)};
    FILE *f = fopen(path, "wb");
    if (!f)
        FAIL("%s: cannot create", path);
    uint64_t n = nx_elems(t);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)k, f) == (size_t)k;
    for (uint64_t i = 0; ok && i < n; i++) {
        float v = t->dtype == NX_F32 ? t->f[i] : (float)t->i[i];
        ok = fwrite(&v, 4, 1, f) == 1;
    }
    if (fclose(f) || !ok)
        FAIL("%s: write failed", path);
    return 0;
}
