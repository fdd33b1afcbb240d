/* Input files into an io record's bytes (.npy, raw; images through
 * tensor_image.c) and outputs into .npy files. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tools/util/tensor_file.h"
#include "tools/util/tensor_image.h"
#include "tools/util/tool_util.h"

#define NPY_MAX_HEADER 65536u

static const char *dtype_name(uint32_t dtype)
{
    return dtype == NIB_IO_F32 ? "float32" : "uint8";
}

/* The record itself, in case it did not come from a validated blob. */
static int check_rec(const struct nib_io_rec *rec, char *err, size_t errlen)
{
    if (rec->dtype != NIB_IO_F32 && rec->dtype != NIB_IO_U8)
        return nib_fail(err, errlen, "io record: dtype %u is neither f32 nor u8", rec->dtype);
    if (rec->rank < 1 || rec->rank > NIB_IO_MAX_RANK)
        return nib_fail(err, errlen, "io record: rank %u", rec->rank);
    uint64_t n = nib_io_elem_size(rec->dtype);
    for (uint32_t d = 0; d < rec->rank; d++) {
        if (rec->dims[d] == 0 || n * rec->dims[d] > NIB_IO_MAX_BYTES)
            return nib_fail(err, errlen, "io record: dims out of range");
        n *= rec->dims[d];
    }
    if (n != rec->bytes)
        return nib_fail(err, errlen, "io record: %llu bytes, its dims make %llu",
                        (unsigned long long)rec->bytes, (unsigned long long)n);
    return 0;
}

/* "1x3x48x192" for messages. */
static const char *dims_str(const uint32_t *dims, uint32_t rank, char out[128])
{
    size_t k = 0;
    out[0] = 0;
    for (uint32_t d = 0; d < rank && k < 100; d++)
        k += (size_t)snprintf(out + k, 128 - k, "%s%u", d ? "x" : "", dims[d]);
    return out;
}

enum nib_tensor_fmt nib_tensor_sniff(const uint8_t *buf, size_t size)
{
    if (size >= 6 && !memcmp(buf, "\x93NUMPY", 6))
        return NIB_TF_NPY;
    if (size >= 8 && !memcmp(buf, "\x89PNG\r\n\x1a\n", 8))
        return NIB_TF_PNG;
    if (size >= 2 && buf[0] == 'P' && buf[1] >= '1' && buf[1] <= '7')
        return NIB_TF_PNM;
    return NIB_TF_RAW;
}

/* --- .npy header: a Python dict literal of three keys ----------------------- */

struct npy_cursor {
    const char *p, *end;
};

static void npy_space(struct npy_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n'))
        c->p++;
}

static int npy_char(struct npy_cursor *c, char ch)
{
    npy_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 0;
    }
    return -1;
}

/* A quoted string (' or "), without escapes: *s and *n point into the header. */
static int npy_string(struct npy_cursor *c, const char **s, size_t *n)
{
    npy_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return -1;
    char q = *c->p++;
    *s = c->p;
    while (c->p < c->end && *c->p != q && *c->p != '\\')
        c->p++;
    if (c->p >= c->end || *c->p != q)
        return -1;
    *n = (size_t)(c->p - *s);
    c->p++;
    return 0;
}

static int npy_word(struct npy_cursor *c, const char *w)
{
    npy_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, w, n)) {
        c->p += n;
        return 0;
    }
    return -1;
}

/* The shape tuple: "()" "(5,)" "(1, 3, 48, 192)". */
static int npy_shape(struct npy_cursor *c, uint32_t *rank, uint64_t *dims, char *err, size_t errlen)
{
    if (npy_char(c, '('))
        return nib_fail(err, errlen, ".npy header: shape is not a tuple");
    *rank = 0;
    for (;;) {
        npy_space(c);
        if (!npy_char(c, ')'))
            return 0;
        if (*rank == NIB_IO_MAX_RANK)
            return nib_fail(err, errlen, ".npy: more than %u dims", NIB_IO_MAX_RANK);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return nib_fail(err, errlen, ".npy header: a dim of the shape is not a number");
        uint64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            v = v * 10 + (uint64_t)(*c->p++ - '0');
            if (v > NIB_IO_MAX_BYTES)
                return nib_fail(err, errlen, ".npy: a dim of the shape is too large");
        }
        dims[(*rank)++] = v;
        npy_space(c);
        if (c->p < c->end && *c->p == ',')
            c->p++;
        else if (c->p >= c->end || *c->p != ')')
            return nib_fail(err, errlen, ".npy header: bad shape tuple");
    }
}

int nib_npy_header(const uint8_t *buf, size_t size, uint32_t *dtype_out, uint32_t *rank_out,
                   uint64_t *dims, size_t *data_off, char *err, size_t errlen)
{
    if (size < 10 || memcmp(buf, "\x93NUMPY", 6))
        return nib_fail(err, errlen, "not a .npy file");
    size_t hlen, off;
    if (buf[6] == 1) {
        hlen = buf[8] | (size_t)buf[9] << 8;
        off = 10;
    } else if ((buf[6] == 2 || buf[6] == 3) && size >= 12) {
        hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        off = 12;
    } else {
        return nib_fail(err, errlen, ".npy version %u is not supported (1 to 3 are)", buf[6]);
    }
    if (hlen > NPY_MAX_HEADER || hlen > size - off)
        return nib_fail(err, errlen, ".npy header runs past the end of the file");
    struct npy_cursor c = {(const char *)buf + off, (const char *)buf + off + hlen};
    int have_descr = 0, have_order = 0, have_shape = 0;
    uint32_t dtype = 0, rank = 0;
    if (npy_char(&c, '{'))
        return nib_fail(err, errlen, ".npy header is not a dict");
    for (;;) {
        if (!npy_char(&c, '}'))
            break;
        const char *k, *v;
        size_t kn, vn;
        if (npy_string(&c, &k, &kn) || npy_char(&c, ':'))
            return nib_fail(err, errlen, ".npy header: expected 'key':");
        if (kn == 5 && !memcmp(k, "descr", 5) && !have_descr) {
            if (npy_string(&c, &v, &vn))
                return nib_fail(err, errlen, ".npy header: descr is not a string");
            if (vn == 3 && !memcmp(v, "<f4", 3))
                dtype = NIB_IO_F32;
            else if (vn == 3 && (!memcmp(v, "|u1", 3) || !memcmp(v, "<u1", 3)))
                dtype = NIB_IO_U8;
            else
                return nib_fail(err, errlen,
                                ".npy: element type is not float32 ('<f4') or uint8 ('|u1')");
            have_descr = 1;
        } else if (kn == 13 && !memcmp(k, "fortran_order", 13) && !have_order) {
            if (!npy_word(&c, "True"))
                return nib_fail(err, errlen, ".npy: Fortran order; only C order is read");
            if (npy_word(&c, "False"))
                return nib_fail(err, errlen, ".npy header: fortran_order is not True or False");
            have_order = 1;
        } else if (kn == 5 && !memcmp(k, "shape", 5) && !have_shape) {
            if (npy_shape(&c, &rank, dims, err, errlen))
                return -1;
            have_shape = 1;
        } else {
            return nib_fail(err, errlen, ".npy header: unknown or repeated key");
        }
        if (npy_char(&c, ',')) {
            if (npy_char(&c, '}'))
                return nib_fail(err, errlen, ".npy header: expected ',' or '}'");
            break;
        }
    }
    npy_space(&c);
    if (c.p != c.end)
        return nib_fail(err, errlen, ".npy header: bytes after the dict");
    if (!have_descr || !have_order || !have_shape)
        return nib_fail(err, errlen, ".npy header lacks %s",
                        !have_descr   ? "descr"
                        : !have_order ? "fortran_order"
                                      : "shape");
    *dtype_out = dtype;
    *rank_out = rank;
    *data_off = off + hlen;
    return 0;
}

static int npy_parse(const uint8_t *buf, size_t size, const struct nib_io_rec *rec, uint8_t *out,
                     char *err, size_t errlen)
{
    uint32_t dtype, rank;
    uint64_t dims[NIB_IO_MAX_RANK];
    size_t off;
    if (nib_npy_header(buf, size, &dtype, &rank, dims, &off, err, errlen))
        return -1;
    char want[128], got[128];
    if (dtype != rec->dtype)
        return nib_fail(err, errlen, ".npy holds %s; the model's input is %s", dtype_name(dtype),
                        dtype_name(rec->dtype));
    int same = rank == rec->rank;
    for (uint32_t d = 0; same && d < rank; d++)
        same = dims[d] == rec->dims[d];
    if (!same) {
        uint32_t d32[NIB_IO_MAX_RANK];
        for (uint32_t d = 0; d < rank; d++)
            d32[d] = (uint32_t)dims[d]; /* each <= NIB_IO_MAX_BYTES */
        return nib_fail(err, errlen, ".npy shape %s; the model's input wants exactly %s",
                        rank ? dims_str(d32, rank, got) : "()",
                        dims_str(rec->dims, rec->rank, want));
    }
    if (size - off != rec->bytes)
        return nib_fail(err, errlen, ".npy: %zu data bytes, its shape needs %llu", size - off,
                        (unsigned long long)rec->bytes);
    memcpy(out, buf + off, rec->bytes);
    return 0;
}

/* --- dispatch ---------------------------------------------------------------- */

int nib_tensor_decode(const uint8_t *buf, size_t size, enum nib_tensor_fmt fmt, unsigned flags,
                      const struct nib_io_rec *rec, uint8_t *out, char *err, size_t errlen)
{
    if (check_rec(rec, err, errlen))
        return -1;
    if (fmt == NIB_TF_AUTO)
        fmt = nib_tensor_sniff(buf, size);
    switch (fmt) {
    case NIB_TF_NPY: return npy_parse(buf, size, rec, out, err, errlen);
    case NIB_TF_PNM: return nib_image_pnm(buf, size, flags, rec, out, err, errlen);
    case NIB_TF_PNG: return nib_image_png(buf, size, flags, rec, out, err, errlen);
    case NIB_TF_RAW:
        if (size != rec->bytes) {
            char d[128];
            return nib_fail(err, errlen,
                            "a raw file of %zu bytes; the model's input (%s %s) is %llu bytes "
                            "(or give .npy, PNG or PPM/PGM)",
                            size, dtype_name(rec->dtype), dims_str(rec->dims, rec->rank, d),
                            (unsigned long long)rec->bytes);
        }
        memcpy(out, buf, size);
        return 0;
    default: return nib_fail(err, errlen, "unknown tensor file format %d", (int)fmt);
    }
}

int nib_tensor_load(const char *path, unsigned flags, const struct nib_io_rec *rec, uint8_t *out,
                    char *err, size_t errlen)
{
    const uint8_t *buf;
    size_t size;
    char e[400];
    if (nib_map_file(path, &buf, &size, err, errlen))
        return -1;
    int rc = nib_tensor_decode(buf, size, NIB_TF_AUTO, flags, rec, out, e, sizeof e);
    nib_unmap_file(buf, size);
    if (rc) {
        char name[72];
        nib_fail(err, errlen, "%s (input '%s'): %s", path,
                 nib_show(rec->name, strnlen(rec->name, sizeof rec->name), name), e);
    }
    return rc;
}

size_t nib_npy_head(uint8_t out[NIB_NPY_HEAD_MAX], uint32_t dtype, uint32_t rank,
                    const uint64_t *dims)
{
    char *h = (char *)out + 10;
    const size_t cap = NIB_NPY_HEAD_MAX - 10;
    int k = snprintf(h, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     dtype == NIB_IO_F32 ? "<f4" : "|u1");
    for (uint32_t d = 0; d < rank; d++)
        k += snprintf(h + k, cap - (size_t)k, "%llu%s", (unsigned long long)dims[d],
                      rank == 1      ? ","
                      : d + 1 < rank ? ", "
                                     : "");
    k += snprintf(h + k, cap - (size_t)k, "), }");
    /* spaces until the data starts at a multiple of 64, a newline last */
    while ((10 + (size_t)k + 1) % 64)
        h[k++] = ' ';
    h[k++] = '\n';
    const uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)k, (uint8_t)(k >> 8)};
    memcpy(out, pre, 10);
    return 10 + (size_t)k;
}

int nib_npy_write(const char *path, const struct nib_io_rec *rec, const uint8_t *bytes, char *err,
                  size_t errlen)
{
    if (check_rec(rec, err, errlen))
        return -1;
    uint64_t dims[NIB_IO_MAX_RANK];
    for (uint32_t d = 0; d < rec->rank; d++)
        dims[d] = rec->dims[d];
    uint8_t head[NIB_NPY_HEAD_MAX];
    const size_t hn = nib_npy_head(head, rec->dtype, rec->rank, dims);
    FILE *f = fopen(path, "wb");
    if (!f)
        return nib_fail(err, errlen, "cannot create '%s': %s", path, strerror(errno));
    int ok = fwrite(head, 1, hn, f) == hn && fwrite(bytes, 1, rec->bytes, f) == rec->bytes;
    if (fclose(f) || !ok)
        return nib_fail(err, errlen, "writing '%s' failed", path);
    return 0;
}
