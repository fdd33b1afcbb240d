/* PPM/PGM and PNG files into a vision input record: interleaved 8-bit
 * pixels become planar NCHW, u8 as is or f32 as value / 255. */
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "tools/util/tensor_image.h"
#include "tools/util/tool_util.h"

#define PNM_MAX_DIM (1u << 20) /* pixels a side: far above any record, below overflow */

/* The record's image geometry: [1, C, H, W] with C 1 or 3. */
static int image_geometry(const struct nib_io_rec *rec, uint32_t *c, uint32_t *h, uint32_t *w,
                          char *err, size_t errlen)
{
    if (rec->rank != 4 || rec->dims[0] != 1 || (rec->dims[1] != 1 && rec->dims[1] != 3))
        return nib_fail(err, errlen,
                        "the model's input is not an image (it wants 1x3xHxW or 1x1xHxW); "
                        "give a .npy or raw file of its exact dims instead");
    *c = rec->dims[1];
    *h = rec->dims[2];
    *w = rec->dims[3];
    return 0;
}

/* The file's size and channels against the record's. */
static int check_image(uint32_t iw, uint32_t ih, uint32_t ich, uint32_t c, uint32_t h, uint32_t w,
                       char *err, size_t errlen)
{
    if (iw != w || ih != h)
        return nib_fail(err, errlen,
                        "the image is %ux%u pixels; the model wants exactly %ux%u (width x "
                        "height): resize or pad it first",
                        iw, ih, w, h);
    if (ich == 3 && c == 1)
        return nib_fail(err, errlen,
                        "a colour image for a gray (1-channel) input: give a gray image");
    return 0;
}

/* Interleaved pixels of ich channels (1 or 3) -> the record's planes. */
static void to_planar(const uint8_t *px, uint32_t ich, uint32_t c, uint32_t h, uint32_t w,
                      unsigned flags, const struct nib_io_rec *rec, uint8_t *out)
{
    size_t plane = (size_t)h * w;
    for (uint32_t k = 0; k < c; k++) {
        uint32_t src = ich == 1 ? 0 : (flags & NIB_TF_BGR) ? 2 - k : k;
        if (rec->dtype == NIB_IO_U8) {
            uint8_t *o = out + k * plane;
            for (size_t i = 0; i < plane; i++)
                o[i] = px[i * ich + src];
        } else {
            uint8_t *o = out + 4 * k * plane; /* any alignment: a ring slot, a malloc */
            for (size_t i = 0; i < plane; i++) {
                float v = (float)px[i * ich + src] / 255.0f;
                memcpy(o + 4 * i, &v, 4);
            }
        }
    }
}

/* PNM whitespace, and '#' comments up to the end of their line. */
static void pnm_skip(const uint8_t *b, size_t n, size_t *pos)
{
    while (*pos < n) {
        uint8_t ch = b[*pos];
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f') {
            (*pos)++;
        } else if (ch == '#') {
            while (*pos < n && b[*pos] != '\n' && b[*pos] != '\r')
                (*pos)++;
        } else {
            break;
        }
    }
}

static int pnm_uint(const uint8_t *b, size_t n, size_t *pos, const char *what, uint32_t *v,
                    char *err, size_t errlen)
{
    pnm_skip(b, n, pos);
    if (*pos >= n || b[*pos] < '0' || b[*pos] > '9')
        return nib_fail(err, errlen, "PPM/PGM header: %s is missing or not a number", what);
    uint64_t x = 0;
    while (*pos < n && b[*pos] >= '0' && b[*pos] <= '9') {
        x = x * 10 + (uint64_t)(b[(*pos)++] - '0');
        if (x > PNM_MAX_DIM)
            return nib_fail(err, errlen, "PPM/PGM header: %s is too large", what);
    }
    *v = (uint32_t)x;
    return 0;
}

int nib_image_pnm(const uint8_t *buf, size_t size, unsigned flags, const struct nib_io_rec *rec,
                  uint8_t *out, char *err, size_t errlen)
{
    uint32_t c = 0, h = 0, w = 0;
    if (image_geometry(rec, &c, &h, &w, err, errlen))
        return -1;
    if (size < 2 || buf[0] != 'P')
        return nib_fail(err, errlen, "not a PPM/PGM file");
    if (buf[1] != '5' && buf[1] != '6')
        return nib_fail(err, errlen,
                        "PNM type P%c is not supported: only binary P6 (RGB) and P5 (gray)",
                        buf[1] >= 0x20 && buf[1] < 0x7f ? buf[1] : '?');
    uint32_t ich = buf[1] == '6' ? 3 : 1, iw, ih, maxval;
    size_t pos = 2;
    if (pnm_uint(buf, size, &pos, "width", &iw, err, errlen) ||
        pnm_uint(buf, size, &pos, "height", &ih, err, errlen) ||
        pnm_uint(buf, size, &pos, "maxval", &maxval, err, errlen))
        return -1;
    if (iw == 0 || ih == 0)
        return nib_fail(err, errlen, "PPM/PGM: the image is empty (%ux%u)", iw, ih);
    if (maxval != 255)
        return nib_fail(err, errlen, "PPM/PGM: maxval %u; only 8-bit images (maxval 255)", maxval);
    if (pos >= size || !(buf[pos] == ' ' || buf[pos] == '\t' || buf[pos] == '\n' ||
                         buf[pos] == '\r' || buf[pos] == '\v' || buf[pos] == '\f'))
        return nib_fail(err, errlen, "PPM/PGM header: no whitespace after maxval");
    pos++;
    if (check_image(iw, ih, ich, c, h, w, err, errlen))
        return -1;
    size_t need = (size_t)iw * ih * ich, have = size - pos;
    if (have < need)
        return nib_fail(err, errlen, "PPM/PGM truncated: %zu of the %zu pixel bytes", have, need);
    if (have > need)
        return nib_fail(err, errlen, "PPM/PGM: %zu bytes after the image (one image per file)",
                        have - need);
    to_planar(buf + pos, ich, c, h, w, flags, rec, out);
    return 0;
}

int nib_image_png(const uint8_t *buf, size_t size, unsigned flags, const struct nib_io_rec *rec,
                  uint8_t *out, char *err, size_t errlen)
{
    uint32_t c = 0, h = 0, w = 0;
    if (image_geometry(rec, &c, &h, &w, err, errlen))
        return -1;
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, buf, size))
        return nib_fail(err, errlen, "not a readable PNG: %s", img.message);
    if (img.format & PNG_FORMAT_FLAG_LINEAR) {
        png_image_free(&img);
        return nib_fail(err, errlen, "a 16-bit PNG: only 8-bit images are read");
    }
    uint32_t ich = (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
    if (check_image(img.width, img.height, ich, c, h, w, err, errlen)) {
        png_image_free(&img);
        return -1;
    }
    /* Gray stays gray (to_planar fills three planes from it); alpha goes
     * onto white, the background of the text images it is made for. */
    img.format = ich == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    size_t bytes = (size_t)w * h * ich;
    uint8_t *px = malloc(bytes);
    if (!px) {
        png_image_free(&img);
        return nib_fail(err, errlen, "out of memory for a %ux%u image", w, h);
    }
    const png_color white = {255, 255, 255};
    if (!png_image_finish_read(&img, &white, px, 0, NULL)) {
        free(px);
        return nib_fail(err, errlen, "PNG: %s", img.message);
    }
    to_planar(px, ich, c, h, w, flags, rec, out);
    free(px);
    return 0;
}
