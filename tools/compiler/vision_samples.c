/* vision_samples.h: eval and tuning inputs of a vision blob. */
#include "tools/compiler/vision_samples.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/util/tensor_file.h"
#include "tools/util/tool_util.h"

static int alloc_set(struct vision_samples *s, const struct nib_blob_view *v, uint32_t n, char *err,
                     size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->n_in = v->n_inputs;
    s->data = calloc((size_t)n * v->n_inputs + 1, sizeof *s->data);
    if (!s->data)
        return nib_fail(err, errlen, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < v->n_inputs; k++)
            if (!(s->data[(size_t)i * s->n_in + k] = malloc(v->io[k].bytes)))
                return nib_fail(err, errlen, "out of memory");
        s->n = i + 1;
    }
    return 0;
}

void vision_samples_free(struct vision_samples *s)
{
    for (size_t i = 0; s->data && i < (size_t)s->n * s->n_in; i++)
        free(s->data[i]);
    free(s->data);
    memset(s, 0, sizeof *s);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int vision_dir_files(const char *dir, char ***out, uint32_t *n, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d)
        return nib_fail(err, errlen, "%s: cannot open the folder", dir);
    char **names = NULL;
    uint32_t cnt = 0, cap = 0;
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) || !S_ISREG(st.st_mode))
            continue;
        if (cnt == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = nib_fail(err, errlen, "out of memory");
                break;
            }
            names = nn;
        }
        if (!(names[cnt] = strdup(e->d_name)))
            rc = nib_fail(err, errlen, "out of memory");
        else
            cnt++;
    }
    closedir(d);
    if (!rc && cnt)
        qsort(names, cnt, sizeof *names, by_name);
    *out = names, *n = cnt;
    return rc;
}

void vision_dir_files_free(char **names, uint32_t n)
{
    for (uint32_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

int vision_samples_dir(struct vision_samples *s, const struct nib_blob_view *v, const char *dir,
                       uint32_t max, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (v->n_inputs != 1)
        return nib_fail(err, errlen,
                        "%s: a folder of input files needs a model of one input (this one has %u)",
                        dir, v->n_inputs);
    char **names = NULL;
    uint32_t n_names = 0;
    int rc = vision_dir_files(dir, &names, &n_names, err, errlen);
    if (!rc && n_names == 0)
        rc = nib_fail(err, errlen, "%s: no input files in the folder", dir);
    const uint32_t n = max && n_names > max ? max : n_names;
    if (!rc)
        rc = alloc_set(s, v, n, err, errlen);
    for (uint32_t i = 0; !rc && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = nib_tensor_load(path, 0, &v->io[0], s->data[i], err, errlen);
    }
    vision_dir_files_free(names, n_names);
    if (rc)
        vision_samples_free(s);
    return rc;
}

/* splitmix64: one stream per (set, sample, input). */
static uint64_t next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float unit(uint64_t *x)
{
    return (float)(next(x) >> 40) / (float)(1u << 24);
}

/* One C x H x W picture in pixels 0..255 (floats): a tinted gradient, a
 * few flat boxes (edges), dark strokes like text, and a little noise. */
static void picture(float *px, uint32_t C, uint32_t H, uint32_t W, uint64_t seed)
{
    uint64_t r = seed;
    float base[3], gx = 160 * (unit(&r) - 0.5f), gy = 160 * (unit(&r) - 0.5f);
    for (uint32_t c = 0; c < 3; c++)
        base[c] = 80 + 100 * unit(&r);
    for (uint32_t c = 0; c < C; c++)
        for (uint32_t y = 0; y < H; y++)
            for (uint32_t x = 0; x < W; x++)
                px[((size_t)c * H + y) * W + x] = base[c % 3] + gx * ((float)x / (float)W - 0.5f) +
                                                  gy * ((float)y / (float)H - 0.5f);
    uint32_t boxes = 2 + (uint32_t)(next(&r) % 4);
    for (uint32_t b = 0; b < boxes; b++) {
        uint32_t x0 = (uint32_t)(next(&r) % W), y0 = (uint32_t)(next(&r) % H);
        uint32_t x1 = x0 + 1 + (uint32_t)(next(&r) % (W / 2 + 1)),
                 y1 = y0 + 1 + (uint32_t)(next(&r) % (H / 2 + 1));
        float v[3] = {255 * unit(&r), 255 * unit(&r), 255 * unit(&r)};
        for (uint32_t c = 0; c < C; c++)
            for (uint32_t y = y0; y < y1 && y < H; y++)
                for (uint32_t x = x0; x < x1 && x < W; x++)
                    px[((size_t)c * H + y) * W + x] = v[c % 3];
    }
    /* strokes: short dark bars, 1 to 3 pixels thick, in a row like a line of text */
    uint32_t strokes = 8 + (uint32_t)(next(&r) % 24), row = (uint32_t)(next(&r) % H);
    float ink = 20 * unit(&r);
    for (uint32_t k = 0; k < strokes; k++) {
        uint32_t x0 = (uint32_t)(next(&r) % W), th = 1 + (uint32_t)(next(&r) % 3);
        uint32_t len = 2 + (uint32_t)(next(&r) % (H / 3 + 2));
        int vertical = (int)(next(&r) & 1);
        for (uint32_t i = 0; i < len; i++)
            for (uint32_t t = 0; t < th; t++) {
                uint32_t x = vertical ? x0 + t : x0 + i, y = vertical ? row + i : row + t;
                if (x < W && y < H)
                    for (uint32_t c = 0; c < C; c++)
                        px[((size_t)c * H + y) * W + x] = ink;
            }
    }
    for (size_t i = 0; i < (size_t)C * H * W; i++) {
        float v = px[i] + 16 * (unit(&r) - 0.5f);
        px[i] = v < 0 ? 0 : v > 255 ? 255 : floorf(v + 0.5f);
    }
}

int vision_samples_synth(struct vision_samples *s, const struct nib_blob_view *v, int normalized,
                         enum vision_synth_set set, uint32_t n, char *err, size_t errlen)
{
    if (alloc_set(s, v, n, err, errlen)) {
        vision_samples_free(s);
        return -1;
    }
    s->synthetic = 1;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t k = 0; k < v->n_inputs; k++) {
            const struct nib_io_rec *rec = &v->io[k];
            uint8_t *out = s->data[(size_t)i * s->n_in + k];
            uint64_t seed = ((uint64_t)set << 48) ^ ((uint64_t)i << 16) ^ k, cnt = rec->bytes;
            cnt /= nib_io_elem_size(rec->dtype);
            int image = rec->rank == 4 && rec->dims[0] == 1;
            float *px = malloc(cnt * sizeof *px);
            if (!px) {
                vision_samples_free(s);
                return nib_fail(err, errlen, "out of memory");
            }
            if (image) {
                picture(px, rec->dims[1], rec->dims[2], rec->dims[3], seed);
            } else {
                uint64_t r = seed;
                float f = 0.01f + 0.2f * unit(&r), ph = 6.283f * unit(&r);
                for (uint64_t j = 0; j < cnt; j++)
                    px[j] = 255 * (0.5f + 0.45f * sinf(f * (float)j + ph));
            }
            for (uint64_t j = 0; j < cnt; j++) {
                if (rec->dtype == NIB_IO_U8) {
                    out[j] = (uint8_t)px[j];
                } else {
                    float x = normalized ? px[j] / 255.0f : (px[j] / 255.0f - 0.5f) / 0.5f;
                    memcpy(out + 4 * j, &x, 4);
                }
            }
            free(px);
        }
    }
    return 0;
}
