/* GGUF v2/v3 reader. The whole file is in memory; we walk it once with a
 * bounds-checked cursor, record where each key, value and tensor lives, and
 * validate everything a later stage could trip over (counts, lengths, types,
 * shapes, offsets) before gguf_open returns. Little-endian files only. */
#include "tools/compiler/gguf.h"

#include "kernels/f16.h"
#include "tools/compiler/ggml_dequant.h"
#include "tools/util/tool_util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAX_KEY 65535u       /* longest key / tensor name we accept */
#define GGUF_MAX_COUNT (1u << 20) /* sanity cap on n_kv and n_tensors */
#define GGUF_MAX_ALIGN (1u << 20)
#define GGUF_MAX_NE (1ull << 40)    /* each dimension is below this */
#define GGUF_MAX_ELEMS (1ull << 53) /* element count fits a double exactly */
#define GGUF_HEADER_SIZE 24u        /* magic, version, n_tensors, n_kv */
#define GGUF_MIN_KV 13u             /* key length + 1-byte key + type + 1-byte value */
#define GGUF_MIN_TENSOR_INFO 33u    /* name length + 1-byte name + n_dims + ne[0] + type + offset */

/* ---- little-endian loads (the buffer has no alignment guarantee) ---- */

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double bits_to_f64(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

float gguf_f16_to_f32(uint16_t h)
{
    return nib_f16_to_f32(h);
}

float gguf_bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

/* ---- names ---- */

/* Names of the ggml types nibble does not read, so a refusal can name them. */
static const char *const other_types[] = {
    [9] = "q8_1",        [15] = "q8_K",       [16] = "iq2_xxs",  [17] = "iq2_xs",
    [18] = "iq3_xxs",    [19] = "iq1_s",      [21] = "iq3_s",    [22] = "iq2_s",
    [24] = "i8",         [25] = "i16",        [26] = "i32",      [27] = "i64",
    [28] = "f64",        [29] = "iq1_m",      [31] = "q4_0_4_4", [32] = "q4_0_4_8",
    [33] = "q4_0_8_8",   [34] = "tq1_0",      [35] = "tq2_0",    [36] = "iq4_nl_4_4",
    [37] = "iq4_nl_4_8", [38] = "iq4_nl_8_8", [39] = "mxfp4",    [40] = "nvfp4",
    [41] = "q1_0",       [42] = "q2_0",
};

const char *ggml_type_name(uint32_t type)
{
    const struct ggml_type_info *ti = ggml_type_info(type);
    if (ti)
        return ti->name;
    if (type < sizeof other_types / sizeof other_types[0] && other_types[type])
        return other_types[type];
    return "unknown";
}

const char *gguf_type_name(uint32_t type)
{
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
        "bool",  "string", "array",  "uint64", "int64",  "float64",
    };
    return type < GGUF_TYPE_COUNT ? names[type] : "unknown";
}

/* Elements per block and bytes per block (tools/compiler/ggml_dequant.c's
 * table); 0 for types nibble does not read. */
static int ggml_block(uint32_t type, uint64_t *elems, uint64_t *bytes)
{
    const struct ggml_type_info *ti = ggml_type_info(type);
    if (!ti)
        return 0;
    *elems = ti->blck;
    *bytes = ti->bytes;
    return 1;
}

uint64_t ggml_type_nbytes(uint32_t type, uint64_t n_elems)
{
    uint64_t be, bb;
    if (!ggml_block(type, &be, &bb) || n_elems % be)
        return 0;
    if (n_elems / be > UINT64_MAX / bb)
        return 0;
    return n_elems / be * bb;
}

uint64_t gguf_scalar_size(uint32_t type)
{
    switch (type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---- errors ---- */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    int n = snprintf(err, errlen, "gguf: ");
    if (n < 0 || (size_t)n >= errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

const char *gguf_str_show(struct gguf_str s, char out[72])
{
    /* every length past 64 shows the same: 64 bytes, then "..." */
    return nib_show(s.ptr, s.len > 65 ? 65 : (size_t)s.len, out);
}

/* ---- cursor ---- */

struct rd {
    const uint8_t *buf;
    size_t size, pos;
    char *err;
    size_t errlen;
    char where[128]; /* what is being read, for "truncated in ..." */
};

static void where(struct rd *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->where, sizeof r->where, fmt, ap);
    va_end(ap);
}

static uint64_t left(const struct rd *r)
{
    return r->size - r->pos;
}

/* Make sure n more bytes exist; otherwise report the truncation. */
static int need(struct rd *r, uint64_t n)
{
    if (n <= left(r))
        return 0;
    set_err(r->err, r->errlen, "truncated in %s at byte %zu (file size %zu)", r->where, r->pos,
            r->size);
    return -1;
}

static int rd_u32(struct rd *r, uint32_t *v)
{
    if (need(r, 4))
        return -1;
    *v = le32(r->buf + r->pos);
    r->pos += 4;
    return 0;
}

static int rd_u64(struct rd *r, uint64_t *v)
{
    if (need(r, 8))
        return -1;
    *v = le64(r->buf + r->pos);
    r->pos += 8;
    return 0;
}

/* A length-prefixed string of at most max bytes, lying inside the file. */
static int rd_str(struct rd *r, struct gguf_str *s, uint64_t max)
{
    size_t at = r->pos;
    if (rd_u64(r, &s->len))
        return -1;
    if (s->len > max) {
        set_err(r->err, r->errlen,
                "string of %llu bytes in %s at byte %zu is longer than the limit %llu",
                (unsigned long long)s->len, r->where, at, (unsigned long long)max);
        return -1;
    }
    if (need(r, s->len))
        return -1;
    s->ptr = (const char *)r->buf + r->pos;
    r->pos += s->len;
    return 0;
}

/* ---- key/value section ---- */

static int too_long(struct rd *r, uint64_t n)
{
    set_err(r->err, r->errlen, "%s at byte %zu: %llu values cannot fit in the remaining %llu bytes",
            r->where, r->pos, (unsigned long long)n, (unsigned long long)left(r));
    return -1;
}

/* Skip `n` values of scalar or string type `type`, checking each one. */
static int skip_values(struct rd *r, uint32_t type, uint64_t n)
{
    if (type == GGUF_TYPE_STRING) {
        if (n > left(r) / 8) /* every string needs its 8-byte length */
            return too_long(r, n);
        for (uint64_t i = 0; i < n; i++) {
            struct gguf_str s;
            if (rd_str(r, &s, UINT64_MAX))
                return -1;
        }
        return 0;
    }
    uint64_t sz = gguf_scalar_size(type);
    if (n > left(r) / sz)
        return too_long(r, n);
    if (type == GGUF_TYPE_BOOL) {
        for (uint64_t i = 0; i < n; i++) {
            uint8_t b = r->buf[r->pos + i];
            if (b > 1) {
                set_err(r->err, r->errlen, "bool value %u in %s at byte %zu is not 0 or 1", b,
                        r->where, r->pos + (size_t)i);
                return -1;
            }
        }
    }
    r->pos += (size_t)(n * sz);
    return 0;
}

/* The name of item i (a kv's key, a tensor's name): read, refused when
 * empty, and shown into name for the messages that follow. */
static int rd_name(struct rd *r, const char *item, const char *field, uint64_t i,
                   struct gguf_str *s, char name[72])
{
    where(r, "%s %llu (%s)", item, (unsigned long long)i, field);
    if (rd_str(r, s, GGUF_MAX_KEY))
        return -1;
    if (s->len == 0) {
        set_err(r->err, r->errlen, "%s %llu has an empty %s at byte %zu", item,
                (unsigned long long)i, field, r->pos - 8);
        return -1;
    }
    gguf_str_show(*s, name);
    return 0;
}

static int read_kv(struct rd *r, uint64_t i, struct gguf_kv *kv)
{
    char name[72];
    if (rd_name(r, "kv", "key", i, &kv->key, name))
        return -1;
    where(r, "kv %llu '%s' (type)", (unsigned long long)i, name);
    size_t type_at = r->pos;
    if (rd_u32(r, &kv->type))
        return -1;
    if (kv->type >= GGUF_TYPE_COUNT) {
        set_err(r->err, r->errlen, "kv %llu '%s' has unknown value type %u at byte %zu",
                (unsigned long long)i, name, kv->type, type_at);
        return -1;
    }
    if (kv->type != GGUF_TYPE_ARRAY) {
        where(r, "kv %llu '%s' (value)", (unsigned long long)i, name);
        kv->val = r->buf + r->pos;
        return skip_values(r, kv->type, 1);
    }
    where(r, "kv %llu '%s' (array header)", (unsigned long long)i, name);
    if (rd_u32(r, &kv->arr_type) || rd_u64(r, &kv->arr_n))
        return -1;
    if (kv->arr_type == GGUF_TYPE_ARRAY) {
        set_err(r->err, r->errlen, "kv %llu '%s' is a nested array (not supported) at byte %zu",
                (unsigned long long)i, name, type_at);
        return -1;
    }
    if (kv->arr_type >= GGUF_TYPE_COUNT) {
        set_err(r->err, r->errlen, "kv %llu '%s' has unknown array element type %u at byte %zu",
                (unsigned long long)i, name, kv->arr_type, type_at + 4);
        return -1;
    }
    where(r, "kv %llu '%s' (array of %llu %s)", (unsigned long long)i, name,
          (unsigned long long)kv->arr_n, gguf_type_name(kv->arr_type));
    kv->val = r->buf + r->pos;
    return skip_values(r, kv->arr_type, kv->arr_n);
}

static int cmp_str(struct gguf_str a, struct gguf_str b)
{
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c)
        return c;
    return a.len < b.len ? -1 : a.len > b.len;
}

static int cmp_str_at(const void *a, const void *b)
{
    return cmp_str(*(const struct gguf_str *)a, *(const struct gguf_str *)b);
}

/* Any name twice among n records of size `size` with their name at `name_off`
 * (keys, tensors)? Sort a copy of the names and compare neighbours:
 * O(n log n) even for the largest count the size checks let through. */
static int check_dup_names(const void *recs, uint64_t n, size_t size, size_t name_off,
                           const char *what, char *err, size_t errlen)
{
    if (n < 2)
        return 0;
    struct gguf_str *s = malloc(n * sizeof *s);
    if (!s) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    for (uint64_t i = 0; i < n; i++)
        memcpy(&s[i], (const char *)recs + i * size + name_off, sizeof *s);
    qsort(s, n, sizeof *s, cmp_str_at);
    int rc = 0;
    for (uint64_t i = 1; i < n && !rc; i++) {
        if (!cmp_str(s[i - 1], s[i])) {
            char name[72];
            set_err(err, errlen, "duplicate %s '%s'", what, gguf_str_show(s[i], name));
            rc = -1;
        }
    }
    free(s);
    return rc;
}

/* general.alignment, when present, must be a u32 power of two in [1, 2^20]. */
static int read_alignment(struct gguf_file *f, char *err, size_t errlen)
{
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_kv *kv = gguf_find_kv(f, "general.alignment");
    if (!kv)
        return 0;
    if (kv->type != GGUF_TYPE_UINT32) {
        set_err(err, errlen, "general.alignment has type %s, expected uint32",
                gguf_type_name(kv->type));
        return -1;
    }
    uint32_t a = le32(kv->val);
    if (a == 0 || a > GGUF_MAX_ALIGN || (a & (a - 1))) {
        set_err(err, errlen, "general.alignment %u is not a power of two in [1, %u]", a,
                GGUF_MAX_ALIGN);
        return -1;
    }
    f->alignment = a;
    return 0;
}

/* ---- tensor infos ---- */

static int check_shape(struct rd *r, struct gguf_tensor *t, const char *name)
{
    t->n_elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne = t->ne[d];
        if (ne == 0 || ne >= GGUF_MAX_NE) {
            set_err(r->err, r->errlen, "tensor '%s' ne[%u] = %llu is out of range [1, 2^40)", name,
                    d, (unsigned long long)ne);
            return -1;
        }
        if (t->n_elems > GGUF_MAX_ELEMS / ne) {
            set_err(r->err, r->errlen, "tensor '%s' has more than 2^53 elements", name);
            return -1;
        }
        t->n_elems *= ne;
    }
    uint64_t be, bb;
    if (!ggml_block(t->type, &be, &bb)) {
        set_err(r->err, r->errlen, "tensor '%s' has unsupported type %s (%u); nibble reads %s",
                name, ggml_type_name(t->type), t->type, ggml_supported_types());
        return -1;
    }
    if (t->ne[0] % be) {
        set_err(r->err, r->errlen,
                "tensor '%s' of type %s has ne[0] = %llu, not a multiple of its block size %llu",
                name, ggml_type_name(t->type), (unsigned long long)t->ne[0],
                (unsigned long long)be);
        return -1;
    }
    t->nbytes = ggml_type_nbytes(t->type, t->n_elems); /* < 2^53 * 4: no overflow */
    return 0;
}

static int read_tensor_info(struct rd *r, uint64_t i, uint64_t alignment, struct gguf_tensor *t)
{
    char name[72];
    if (rd_name(r, "tensor info", "name", i, &t->name, name))
        return -1;
    /* Read, then check, as read_kv does for its type: each field has its own
     * bounds and message, which read plainer inline than through a helper. */
    where(r, "tensor info %llu '%s' (n_dims)", (unsigned long long)i, name);
    size_t at = r->pos;
    if (rd_u32(r, &t->n_dims))
        return -1;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS) {
        set_err(r->err, r->errlen, "tensor '%s' has n_dims %u at byte %zu, expected 1..%u", name,
                t->n_dims, at, GGUF_MAX_DIMS);
        return -1;
    }
    where(r, "tensor info %llu '%s' (shape)", (unsigned long long)i, name);
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if (rd_u64(r, &t->ne[d]))
            return -1;
    where(r, "tensor info %llu '%s' (type, offset)", (unsigned long long)i, name);
    if (rd_u32(r, &t->type) || rd_u64(r, &t->offset))
        return -1;
    if (check_shape(r, t, name))
        return -1;
    if (t->offset % alignment) {
        set_err(r->err, r->errlen,
                "tensor '%s' data offset %llu is not a multiple of the alignment %llu", name,
                (unsigned long long)t->offset, (unsigned long long)alignment);
        return -1;
    }
    return 0;
}

/* The data section starts at the first aligned byte after the tensor infos;
 * every tensor's [offset, offset + nbytes) must lie inside the file. */
static int place_tensors(struct gguf_file *f, size_t data_off, char *err, size_t errlen)
{
    uint64_t room = data_off <= f->size ? f->size - data_off : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct gguf_tensor *t = &f->tensors[i];
        char name[72];
        if (data_off > f->size || t->offset > room || t->nbytes > room - t->offset) {
            gguf_str_show(t->name, name);
            if (t->offset > f->size)
                set_err(err, errlen,
                        "tensor '%s' data offset %llu lies outside the file (size %zu)", name,
                        (unsigned long long)t->offset, f->size);
            else
                set_err(err, errlen,
                        "tensor '%s' data [%llu, %llu) lies outside the file (size %zu)", name,
                        (unsigned long long)(data_off + t->offset),
                        (unsigned long long)(data_off + t->offset + t->nbytes), f->size);
            return -1;
        }
        t->data = f->buf + data_off + t->offset;
    }
    f->data = f->buf + (data_off <= f->size ? data_off : f->size);
    return 0;
}

/* ---- header ---- */

static int read_header(struct rd *r, struct gguf_file *f)
{
    uint32_t magic;
    where(r, "header");
    if (rd_u32(r, &magic))
        return -1;
    if (magic != GGUF_MAGIC) {
        set_err(r->err, r->errlen, "bad magic 0x%08x (not a GGUF file)", magic);
        return -1;
    }
    if (rd_u32(r, &f->version))
        return -1;
    if (f->version != 2 && f->version != 3) {
        /* a byte-swapped 2 or 3 means a big-endian file */
        int be = f->version == 0x02000000u || f->version == 0x03000000u;
        set_err(r->err, r->errlen, "unsupported GGUF version %u%s", f->version,
                be ? " (big-endian file?)" : " (only 2 and 3 are read)");
        return -1;
    }
    if (rd_u64(r, &f->n_tensors) || rd_u64(r, &f->n_kv))
        return -1;
    /* Refuse counts the rest of the file cannot hold before allocating. */
    uint64_t rem = left(r);
    if (f->n_kv > GGUF_MAX_COUNT || f->n_kv > rem / GGUF_MIN_KV) {
        set_err(r->err, r->errlen, "n_kv %llu cannot fit in the %llu bytes after the header",
                (unsigned long long)f->n_kv, (unsigned long long)rem);
        return -1;
    }
    if (f->n_tensors > GGUF_MAX_COUNT ||
        f->n_tensors > (rem - f->n_kv * GGUF_MIN_KV) / GGUF_MIN_TENSOR_INFO) {
        set_err(r->err, r->errlen, "n_tensors %llu cannot fit in the %llu bytes after the header",
                (unsigned long long)f->n_tensors, (unsigned long long)rem);
        return -1;
    }
    return 0;
}

static int parse(struct rd *r, struct gguf_file *f)
{
    if (read_header(r, f))
        return -1;
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof *f->kv);
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors) {
        set_err(r->err, r->errlen, "out of memory");
        return -1;
    }
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (read_kv(r, i, &f->kv[i]))
            return -1;
    if (check_dup_names(f->kv, f->n_kv, sizeof *f->kv, offsetof(struct gguf_kv, key), "key", r->err,
                        r->errlen) ||
        read_alignment(f, r->err, r->errlen))
        return -1;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (read_tensor_info(r, i, f->alignment, &f->tensors[i]))
            return -1;
    if (check_dup_names(f->tensors, f->n_tensors, sizeof *f->tensors,
                        offsetof(struct gguf_tensor, name), "tensor", r->err, r->errlen))
        return -1;
    size_t pad = (size_t)((f->alignment - r->pos % f->alignment) % f->alignment);
    return place_tensors(f, r->pos + pad, r->err, r->errlen);
}

int gguf_open(struct gguf_file *f, const uint8_t *buf, size_t size, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    if (err && errlen)
        err[0] = 0;
    f->buf = buf;
    f->size = size;
    struct rd r = {.buf = buf, .size = size, .err = err, .errlen = errlen};
    if (!buf && size) {
        set_err(err, errlen, "no buffer");
        return -1;
    }
    if (parse(&r, f)) {
        gguf_close(f);
        return -1;
    }
    return 0;
}

void gguf_close(struct gguf_file *f)
{
    free(f->kv);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

/* ---- lookups ---- */

int gguf_str_eq(struct gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || !memcmp(s.ptr, c, n));
}

const struct gguf_kv *gguf_find_kv(const struct gguf_file *f, const char *key)
{
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key))
            return &f->kv[i];
    return NULL;
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *f, const char *name)
{
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

int gguf_get_u32(const struct gguf_file *f, const char *key, uint32_t *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return -1;
    const uint8_t *p = kv->val;
    int64_t s = 0; /* negative values never convert */
    uint64_t u;
    switch (kv->type) {
    case GGUF_TYPE_UINT8: u = p[0]; break;
    case GGUF_TYPE_UINT16: u = le16(p); break;
    case GGUF_TYPE_UINT32: u = le32(p); break;
    case GGUF_TYPE_UINT64: u = le64(p); break;
    case GGUF_TYPE_INT8: s = (int8_t)p[0], u = (uint64_t)s; break;
    case GGUF_TYPE_INT16: s = (int16_t)le16(p), u = (uint64_t)s; break;
    case GGUF_TYPE_INT32: s = (int32_t)le32(p), u = (uint64_t)s; break;
    case GGUF_TYPE_INT64: s = (int64_t)le64(p), u = (uint64_t)s; break;
    default: return -2;
    }
    if (s < 0 || u > UINT32_MAX)
        return -2;
    *out = (uint32_t)u;
    return 0;
}

int gguf_get_f32(const struct gguf_file *f, const char *key, float *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return -1;
    if (kv->type == GGUF_TYPE_FLOAT32)
        *out = bits_to_f32(le32(kv->val));
    else if (kv->type == GGUF_TYPE_FLOAT64)
        *out = (float)bits_to_f64(le64(kv->val));
    else
        return -2;
    return 0;
}

int gguf_get_str(const struct gguf_file *f, const char *key, struct gguf_str *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return -1;
    if (kv->type != GGUF_TYPE_STRING)
        return -2;
    const uint8_t *p = kv->val;
    *out = gguf_next_str(&p);
    return 0;
}

int gguf_get_bool(const struct gguf_file *f, const char *key, int *out)
{
    const struct gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv)
        return -1;
    if (kv->type != GGUF_TYPE_BOOL)
        return -2;
    *out = kv->val[0] != 0;
    return 0;
}

struct gguf_str gguf_next_str(const uint8_t **p)
{
    struct gguf_str s = {.len = le64(*p), .ptr = (const char *)*p + 8};
    *p += 8 + s.len;
    return s;
}

float gguf_arr_f32(const struct gguf_kv *kv, uint64_t i)
{
    return bits_to_f32(le32(kv->val + 4 * i));
}

int32_t gguf_arr_i32(const struct gguf_kv *kv, uint64_t i)
{
    return (int32_t)le32(kv->val + 4 * i);
}
