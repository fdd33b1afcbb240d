#include "tools/cli/run_npy.h"

#include <stdio.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

/* The value after 'key': in the header dict, or NULL. */
static const char *after_key(const char *h, size_t n, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(h + i, key, k)) {
            i += k;
            while (i < n && (h[i] == ' ' || h[i] == ':'))
                i++;
            return i < n ? h + i : NULL;
        }
    return NULL;
}

int nib_run_npy_parse(const uint8_t *buf, size_t size, struct nib_run_npy *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (size < 10 || memcmp(buf, "\x93NUMPY", 6))
        FAIL("not a .npy file (no \\x93NUMPY magic)");
    size_t hlen, off;
    if (buf[6] == 1) {
        hlen = buf[8] | (size_t)buf[9] << 8;
        off = 10;
    } else if ((buf[6] == 2 || buf[6] == 3) && size >= 12) {
        hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        off = 12;
    } else {
        FAIL(".npy version %u is not supported (1, 2 or 3)", buf[6]);
    }
    if (hlen > size - off)
        FAIL(".npy header of %zu bytes passes the file's end", hlen);
    const char *h = (const char *)buf + off;
    const char *descr = after_key(h, hlen, "'descr'");
    const char *order = after_key(h, hlen, "'fortran_order'");
    const char *shape = after_key(h, hlen, "'shape'");
    if (!descr || !order || !shape)
        FAIL(".npy header lacks descr, fortran_order or shape");
    const char *end = h + hlen;
    if (end - descr >= 6 && !memcmp(descr, "'<f4'", 5))
        out->dtype = 1, out->elem = 4;
    else if (end - descr >= 6 && (!memcmp(descr, "'|u1'", 5) || !memcmp(descr, "'u1'", 4)))
        out->dtype = 2, out->elem = 1;
    else
        FAIL(".npy element type is not '<f4' (float32) or '|u1' (uint8)");
    if (end - order < 5 || memcmp(order, "False", 5))
        FAIL(".npy array is in Fortran order (C order only)");
    if (*shape != '(')
        FAIL(".npy shape is not a tuple");
    const char *p = shape + 1;
    uint64_t count = 1;
    while (p < end && *p != ')') {
        while (p < end && (*p == ' ' || *p == ','))
            p++;
        if (p < end && *p == ')')
            break;
        if (p >= end || *p < '0' || *p > '9')
            FAIL(".npy shape is not a tuple of integers");
        uint64_t d = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            d = d * 10 + (uint64_t)(*p++ - '0');
            if (d > (1u << 30))
                FAIL(".npy dimension larger than 2^30");
        }
        if (out->rank == NIB_RUN_NPY_MAX_RANK)
            FAIL(".npy array has more than %d dims", NIB_RUN_NPY_MAX_RANK);
        out->dims[out->rank++] = (uint32_t)d;
        count *= d;
        if (count > (1ull << 32))
            FAIL(".npy array larger than 2^32 elements");
    }
    if (p >= end)
        FAIL(".npy shape is not closed");
    uint64_t bytes = count * out->elem;
    if (bytes != size - off - hlen)
        FAIL(".npy data is %zu bytes, its shape and type take %llu", size - off - hlen,
             (unsigned long long)bytes);
    out->data = buf + off + hlen;
    out->bytes = (size_t)bytes;
    return 0;
}
