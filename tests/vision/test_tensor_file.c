/* tools/util/tensor_file: input files into io-record bytes and outputs into
 * .npy. Valid .npy (f32, u8), raw, P6/P5 and PNG (gray, RGB, RGBA, palette)
 * against pixels the test itself chose, planar order, BGR, /255 scaling;
 * every malformed or mismatched file refused with a message naming the
 * problem; random mutations of valid files never crash (run under ASan). */
#include <check.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common/test_util.h"
#include "tools/util/tensor_file.h"

static char err[512];

static struct nib_io_rec rec_of(uint32_t dtype, uint32_t rank, const uint32_t *dims)
{
    struct nib_io_rec r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "x");
    r.dtype = dtype;
    r.rank = rank;
    uint64_t n = dtype == NIB_IO_F32 ? 4 : 1;
    for (uint32_t d = 0; d < rank; d++)
        n *= (r.dims[d] = dims[d]);
    r.bytes = n;
    return r;
}

static struct nib_io_rec image_rec(uint32_t dtype, uint32_t c, uint32_t h, uint32_t w)
{
    return rec_of(dtype, 4, (const uint32_t[]){1, c, h, w});
}

/* Decode from an exact-size heap copy (so ASan sees any over-read) into an
 * output of exactly rec->bytes. Returns the output (free it) or NULL. */
static uint8_t *decode(const void *file, size_t size, enum nib_tensor_fmt fmt, unsigned flags,
                       const struct nib_io_rec *rec)
{
    uint8_t *in = malloc(size ? size : 1), *out = malloc(rec->bytes);
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    memcpy(in, file, size);
    err[0] = 0;
    int rc = nib_tensor_decode(in, size, fmt, flags, rec, out, err, sizeof err);
    free(in);
    if (rc) {
        ck_assert_msg(err[0], "a failure without a message");
        free(out);
        return NULL;
    }
    return out;
}

#define EXPECT_BAD(file, size, rec, phrase)                                                        \
    do {                                                                                           \
        uint8_t *o_ = decode(file, size, NIB_TF_AUTO, 0, rec);                                     \
        ck_assert_msg(o_ == NULL, "accepted; wanted an error with '%s'", phrase);                  \
        ck_assert_msg(strstr(err, phrase), "error '%s' lacks '%s'", err, phrase);                  \
    } while (0)

/* A .npy file: header dict as given, padded as numpy pads it, then data. */
static size_t npy_make(uint8_t *buf, int version, const char *dict, const void *data, size_t n)
{
    size_t pre = version == 1 ? 10 : 12, hl = strlen(dict);
    size_t total = (pre + hl + 1 + 63) / 64 * 64 - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)version;
    buf[7] = 0;
    buf[8] = (uint8_t)total;
    buf[9] = (uint8_t)(total >> 8);
    if (version != 1)
        buf[10] = buf[11] = 0;
    memcpy(buf + pre, dict, hl);
    memset(buf + pre + hl, ' ', total - hl - 1);
    buf[pre + total - 1] = '\n';
    memcpy(buf + pre + total, data, n);
    return pre + total + n;
}

START_TEST(test_npy_f32_and_u8)
{
    float v[24];
    for (int i = 0; i < 24; i++)
        v[i] = (float)i * 0.5f - 3.0f;
    uint8_t buf[512];
    struct nib_io_rec r = rec_of(NIB_IO_F32, 3, (const uint32_t[]){2, 3, 4});
    size_t n = npy_make(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", v,
                        sizeof v);
    uint8_t *o = decode(buf, n, NIB_TF_AUTO, 0, &r);
    ck_assert_msg(o, "%s", err);
    ck_assert_mem_eq(o, v, sizeof v);
    free(o);
    /* version 2 header, keys in another order, double quotes, no trailing comma */
    n = npy_make(buf, 2, "{\"shape\": (2,3,4), \"fortran_order\": False, \"descr\": \"<f4\"}", v,
                 sizeof v);
    o = decode(buf, n, NIB_TF_NPY, 0, &r);
    ck_assert_msg(o, "%s", err);
    ck_assert_mem_eq(o, v, sizeof v);
    free(o);
    uint8_t px[6] = {0, 1, 2, 253, 254, 255};
    struct nib_io_rec r8 = rec_of(NIB_IO_U8, 1, (const uint32_t[]){6});
    n = npy_make(buf, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (6,), }", px, 6);
    o = decode(buf, n, NIB_TF_AUTO, 0, &r8);
    ck_assert_msg(o, "%s", err);
    ck_assert_mem_eq(o, px, 6);
    free(o);
}
END_TEST

START_TEST(test_npy_malformed)
{
    float v[64] = {0};
    uint8_t buf[512];
    struct nib_io_rec r = rec_of(NIB_IO_F32, 3, (const uint32_t[]){2, 3, 4});
    size_t n;
#define NPY_BAD(dict, bytes, phrase)                                                               \
    do {                                                                                           \
        n = npy_make(buf, 1, dict, v, bytes);                                                      \
        EXPECT_BAD(buf, n, &r, phrase);                                                            \
    } while (0)
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 4), }", 96,
            "wants exactly 2x3x4");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4, 1), }", 96,
            "wants exactly 2x3x4");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, "shape ()");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", 92, "92 data bytes");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", 100,
            "100 data bytes");
    NPY_BAD("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3, 4), }", 192, "not float32");
    NPY_BAD("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3, 4), }", 96, "not float32");
    NPY_BAD("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 4), }", 24,
            "holds uint8; the model's input is float32");
    NPY_BAD("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 4), }", 96, "Fortran");
    NPY_BAD("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3, 4), }", 96, "fortran_order");
    NPY_BAD("{'descr': '<f4', 'shape': (2, 3, 4), }", 96, "lacks fortran_order");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, }", 96, "lacks shape");
    NPY_BAD("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", 96,
            "repeated key");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), 'x': 1}", 96, "unknown");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4) 'x'}", 96, "expected");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), } junk", 96,
            "after the dict");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3, 4), }", 96, "not a number");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 96,
            "too large");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
            "more than 8 dims");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3, 4], }", 96, "not a tuple");
    NPY_BAD("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4}", 96, "bad shape");
    NPY_BAD("{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", 96, "expected");
    NPY_BAD("['descr']", 96, "not a dict");
#undef NPY_BAD
    /* the fixed part */
    n = npy_make(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", v, 96);
    EXPECT_BAD(buf, 7, &r, "not a .npy file");
    ck_assert_ptr_null(decode(buf, 7, NIB_TF_NPY, 0, &r));
    ck_assert_ptr_nonnull(strstr(err, "not a .npy"));
    EXPECT_BAD(buf, 60, &r, "header runs past");
    buf[6] = 4;
    EXPECT_BAD(buf, n, &r, "version 4");
    buf[6] = 1;
    buf[8] = 0xff, buf[9] = 0xff;
    EXPECT_BAD(buf, n, &r, "header runs past");
}
END_TEST

START_TEST(test_npy_write_round_trip)
{
    char path[] = "/tmp/nib-tensor-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    const uint32_t shapes[3][4] = {{7, 0}, {1, 3, 5, 2}, {1, 1000, 0}};
    const uint32_t ranks[3] = {1, 4, 2};
    for (int t = 0; t < 3; t++) {
        for (uint32_t dtype = NIB_IO_F32; dtype <= NIB_IO_U8; dtype++) {
            struct nib_io_rec r = rec_of(dtype, ranks[t], shapes[t]);
            uint8_t *b = malloc(r.bytes), *o = malloc(r.bytes);
            for (uint64_t i = 0; i < r.bytes; i++)
                b[i] = (uint8_t)(i * 37 + 11);
            if (dtype == NIB_IO_F32) /* finite floats, so the bytes are what they say */
                for (uint64_t i = 0; i < r.bytes / 4; i++)
                    ((float *)(void *)b)[i] = (float)i - 2.5f;
            ck_assert_msg(!nib_npy_write(path, &r, b, err, sizeof err), "%s", err);
            size_t size;
            uint8_t *file = tu_read_file(path, &size);
            ck_assert_uint_eq(size % 64, r.bytes % 64); /* data starts 64-aligned */
            ck_assert_msg(!nib_tensor_decode(file, size, NIB_TF_AUTO, 0, &r, o, err, sizeof err),
                          "%s", err);
            ck_assert_mem_eq(o, b, r.bytes);
            ck_assert_msg(!nib_tensor_load(path, 0, &r, o, err, sizeof err), "%s", err);
            ck_assert_mem_eq(o, b, r.bytes);
            free(file);
            free(b);
            free(o);
        }
    }
    unlink(path);
    struct nib_io_rec r = rec_of(NIB_IO_F32, 1, (const uint32_t[]){4});
    float v[4] = {0};
    ck_assert_int_eq(
        nib_npy_write("/nonexistent-dir/x.npy", &r, (const uint8_t *)v, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cannot create"));
    ck_assert_int_eq(
        nib_tensor_load("/nonexistent-dir/x.npy", 0, &r, (uint8_t *)v, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/x.npy"));
}
END_TEST

START_TEST(test_raw)
{
    uint8_t b[64] = {0};
    for (int i = 0; i < 60; i++)
        b[i] = (uint8_t)(i * 7);
    struct nib_io_rec r = image_rec(NIB_IO_F32, 3, 1, 5);
    uint8_t *o = decode(b, 60, NIB_TF_AUTO, 0, &r);
    ck_assert_msg(o, "%s", err);
    ck_assert_mem_eq(o, b, 60);
    free(o);
    EXPECT_BAD(b, 59, &r, "59 bytes");
    EXPECT_BAD(b, 61, &r, "is 60 bytes");
    EXPECT_BAD(b, 0, &r, "0 bytes");
    /* A raw file that happens to start like .npy is read as .npy. */
    memcpy(b, "\x93NUMPY", 6);
    EXPECT_BAD(b, 60, &r, ".npy");
    /* ... unless the caller says raw */
    o = decode(b, 60, NIB_TF_RAW, 0, &r);
    ck_assert_msg(o, "%s", err);
    free(o);
}
END_TEST

/* The test's own image: pixel (y, x) channel k = (y * 31 + x * 7 + k * 85) & 255. */
static uint8_t pix(uint32_t y, uint32_t x, uint32_t k)
{
    return (uint8_t)((y * 31 + x * 7 + k * 85) & 255);
}

static size_t pnm_make(uint8_t *buf, int gray, uint32_t w, uint32_t h, const char *header)
{
    size_t n = header ? (size_t)sprintf((char *)buf, "%s", header)
                      : (size_t)sprintf((char *)buf, "P%c\n# made by the test\n%u %u\n255\n",
                                        gray ? '5' : '6', w, h);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t k = 0; k < (gray ? 1u : 3u); k++)
                buf[n++] = pix(y, x, k);
    return n;
}

/* out holds rec's planes of the test image (channel map: src[k] per plane). */
static void expect_planes(const uint8_t *out, const struct nib_io_rec *r, const uint32_t *src)
{
    uint32_t c = r->dims[1], h = r->dims[2], w = r->dims[3];
    for (uint32_t k = 0; k < c; k++)
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++) {
                size_t i = ((size_t)k * h + y) * w + x;
                uint8_t want = pix(y, x, src[k]);
                if (r->dtype == NIB_IO_U8) {
                    ck_assert_uint_eq(out[i], want);
                } else {
                    float f;
                    memcpy(&f, out + 4 * i, 4);
                    ck_assert_float_eq(f, (float)want / 255.0f);
                }
            }
}

START_TEST(test_pnm)
{
    static uint8_t buf[8192];
    const uint32_t rgb[3] = {0, 1, 2}, bgr[3] = {2, 1, 0}, gray[3] = {0, 0, 0};
    size_t n = pnm_make(buf, 0, 5, 4, NULL);
    for (uint32_t dtype = NIB_IO_F32; dtype <= NIB_IO_U8; dtype++) {
        struct nib_io_rec r = image_rec(dtype, 3, 4, 5);
        uint8_t *o = decode(buf, n, NIB_TF_AUTO, 0, &r);
        ck_assert_msg(o, "%s", err);
        expect_planes(o, &r, rgb);
        free(o);
        o = decode(buf, n, NIB_TF_PNM, NIB_TF_BGR, &r);
        ck_assert_msg(o, "%s", err);
        expect_planes(o, &r, bgr);
        free(o);
    }
    /* P5 into a 3-channel input fills all three planes; into 1 channel, one. */
    n = pnm_make(buf, 1, 5, 4, NULL);
    struct nib_io_rec r3 = image_rec(NIB_IO_U8, 3, 4, 5), r1 = image_rec(NIB_IO_F32, 1, 4, 5);
    uint8_t *o = decode(buf, n, NIB_TF_AUTO, 0, &r3);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r3, gray);
    free(o);
    o = decode(buf, n, NIB_TF_AUTO, 0, &r1);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r1, gray);
    free(o);
    /* Header whitespace and comments as netpbm allows. */
    n = pnm_make(buf, 0, 5, 4, "P6#c\n5\t#c\r\n 4 255 ");
    o = decode(buf, n, NIB_TF_AUTO, 0, &r3);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r3, rgb);
    free(o);

    /* Refusals. */
    n = pnm_make(buf, 0, 6, 4, NULL);
    EXPECT_BAD(buf, n, &r3, "the image is 6x4 pixels; the model wants exactly 5x4");
    n = pnm_make(buf, 0, 5, 4, NULL);
    EXPECT_BAD(buf, n, &r1, "colour image for a gray");
    EXPECT_BAD(buf, n - 1, &r3, "truncated");
    EXPECT_BAD("P6\n5 4\n255\n\1\2", 13, &r3, "truncated: 2 of the 60 pixel bytes");
    buf[n] = 0;
    EXPECT_BAD(buf, n + 1, &r3, "1 bytes after the image");
    struct nib_io_rec flat = rec_of(NIB_IO_U8, 2, (const uint32_t[]){4, 15});
    EXPECT_BAD(buf, n, &flat, "not an image");
    struct nib_io_rec four = image_rec(NIB_IO_U8, 4, 4, 5);
    EXPECT_BAD(buf, n, &four, "not an image");
    n = pnm_make(buf, 0, 5, 4, "P6\n5 4\n65535\n");
    EXPECT_BAD(buf, n, &r3, "maxval 65535");
    n = pnm_make(buf, 0, 5, 4, "P6\n5 4\n255");
    EXPECT_BAD(buf, n, &r3, "no whitespace after maxval");
    EXPECT_BAD("P6\n5 4\n255", 10, &r3, "no whitespace after maxval");
    EXPECT_BAD("P3\n5 4\n255\n", 11, &r3, "P3 is not supported");
    EXPECT_BAD("P7\nWIDTH 5\n", 10, &r3, "P7 is not supported");
    EXPECT_BAD("P6\n5 x\n255\n", 11, &r3, "height is missing");
    EXPECT_BAD("P6\n5", 4, &r3, "height is missing");
    EXPECT_BAD("P6\n# only a comment", 19, &r3, "width is missing");
    EXPECT_BAD("P6\n99999999999 4\n255\n", 21, &r3, "width is too large");
    EXPECT_BAD("P6\n0 4\n255\n", 11, &r3, "empty");
    EXPECT_BAD("P", 1, &r3, "");
    ck_assert_ptr_null(decode("Q6", 2, NIB_TF_PNM, 0, &r3));
    ck_assert_ptr_nonnull(strstr(err, "not a PPM/PGM"));
}
END_TEST

/* A PNG of the test image in libpng's format fmt (written by libpng). */
static void *png_make(uint32_t fmt, uint32_t w, uint32_t h, uint8_t alpha, size_t *size)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = w;
    img.height = h;
    img.format = fmt;
    uint32_t ch = PNG_IMAGE_SAMPLE_CHANNELS(fmt), comp = PNG_IMAGE_SAMPLE_COMPONENT_SIZE(fmt);
    uint8_t *px = malloc((size_t)w * h * ch * comp);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (uint32_t k = 0; k < ch; k++) {
                uint8_t v = (fmt & PNG_FORMAT_FLAG_ALPHA) && k == ch - 1 ? alpha : pix(y, x, k);
                size_t i = ((size_t)y * w + x) * ch + k;
                if (comp == 2)
                    ((uint16_t *)(void *)px)[i] = (uint16_t)(v * 257);
                else
                    px[i] = v;
            }
    png_alloc_size_t n = 0;
    ck_assert(png_image_write_get_memory_size(img, n, 0, px, 0, NULL));
    void *out = malloc(n);
    ck_assert(png_image_write_to_memory(&img, out, &n, 0, px, 0, NULL));
    free(px);
    *size = n;
    return out;
}

START_TEST(test_png)
{
    const uint32_t rgb[3] = {0, 1, 2}, bgr[3] = {2, 1, 0}, gray[3] = {0, 0, 0};
    size_t n;
    struct nib_io_rec r3 = image_rec(NIB_IO_F32, 3, 4, 5), r3u = image_rec(NIB_IO_U8, 3, 4, 5),
                      r1 = image_rec(NIB_IO_U8, 1, 4, 5);
    void *p = png_make(PNG_FORMAT_RGB, 5, 4, 0, &n);
    uint8_t *o = decode(p, n, NIB_TF_AUTO, 0, &r3);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r3, rgb);
    free(o);
    o = decode(p, n, NIB_TF_PNG, NIB_TF_BGR, &r3u);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r3u, bgr);
    free(o);
    EXPECT_BAD(p, n, &r1, "colour image for a gray");
    struct nib_io_rec wide = image_rec(NIB_IO_U8, 3, 4, 6);
    EXPECT_BAD(p, n, &wide, "the image is 5x4 pixels; the model wants exactly 6x4");
    EXPECT_BAD(p, n - 16, &r3, "PNG"); /* into the image data */
    EXPECT_BAD(p, 20, &r3, "not a readable PNG");
    uint8_t *idat = memmem(p, n, "IDAT", 4);
    ck_assert_ptr_nonnull(idat);
    idat[6] ^= 0x55; /* the image data's bytes: its CRC no longer holds */
    EXPECT_BAD(p, n, &r3, "PNG");
    free(p);

    /* Opaque RGBA reads as RGB; fully transparent pixels become white. */
    p = png_make(PNG_FORMAT_RGBA, 5, 4, 255, &n);
    o = decode(p, n, NIB_TF_AUTO, 0, &r3u);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r3u, rgb);
    free(o);
    free(p);
    p = png_make(PNG_FORMAT_RGBA, 5, 4, 0, &n);
    o = decode(p, n, NIB_TF_AUTO, 0, &r3u);
    ck_assert_msg(o, "%s", err);
    for (uint32_t i = 0; i < r3u.bytes; i++)
        ck_assert_uint_eq(o[i], 255);
    free(o);
    free(p);

    /* Gray: one plane, or three equal ones. */
    p = png_make(PNG_FORMAT_GRAY, 5, 4, 0, &n);
    o = decode(p, n, NIB_TF_AUTO, 0, &r1);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r1, gray);
    free(o);
    o = decode(p, n, NIB_TF_AUTO, 0, &r3);
    ck_assert_msg(o, "%s", err);
    expect_planes(o, &r3, gray);
    free(o);
    free(p);

    /* 16-bit files are refused. */
    p = png_make(PNG_FORMAT_LINEAR_RGB, 5, 4, 0, &n);
    EXPECT_BAD(p, n, &r3, "16-bit");
    free(p);
}
END_TEST

/* Random byte flips, truncations and header edits of valid files of each
 * kind: decoding returns 0 or -1 with a message, never a crash. */
START_TEST(test_mutations)
{
    static uint8_t base[4][8192], buf[8192];
    size_t sizes[4];
    float v[60];
    for (int i = 0; i < 60; i++)
        v[i] = (float)i;
    sizes[0] =
        npy_make(base[0], 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 4, 5), }", v,
                 sizeof v);
    sizes[1] = pnm_make(base[1], 0, 5, 4, NULL);
    sizes[2] = pnm_make(base[2], 1, 5, 4, NULL);
    void *p = png_make(PNG_FORMAT_RGB, 5, 4, 0, &sizes[3]);
    ck_assert_uint_le(sizes[3], sizeof base[3]);
    memcpy(base[3], p, sizes[3]);
    free(p);
    struct nib_io_rec recs[3] = {image_rec(NIB_IO_F32, 3, 4, 5), image_rec(NIB_IO_U8, 3, 4, 5),
                                 image_rec(NIB_IO_U8, 1, 4, 5)};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int it = 0; it < 6000; it++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)(s >> 60) & 3;
        size_t n = sizes[k];
        memcpy(buf, base[k], n);
        int flips = 1 + (int)((s >> 40) & 3);
        for (int f = 0; f < flips; f++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(s >> 33) % (k == 3 ? n : n < 140 ? n : 140); /* headers mostly */
            buf[at] = (uint8_t)(s >> 20);
        }
        if ((s >> 10) & 1)
            n = (size_t)(s >> 13) % (n + 1);
        for (int r = 0; r < 3; r++) {
            uint8_t *o = decode(buf, n, NIB_TF_AUTO, (unsigned)(s & 1), &recs[r]);
            free(o);
        }
    }
}
END_TEST

Suite *nib_test_suite(void)
{
    Suite *s = suite_create("tensor_file");
    TU_CASE(s, "npy", NULL, NULL, 0, test_npy_f32_and_u8, test_npy_malformed,
            test_npy_write_round_trip);
    TU_CASE(s, "raw", NULL, NULL, 0, test_raw);
    TU_CASE(s, "images", NULL, NULL, 0, test_pnm, test_png);
    TU_CASE(s, "hostile", NULL, NULL, 60, test_mutations);
    return s;
}
