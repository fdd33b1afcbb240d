/* GGUF v3 writer.
 *
 * Metadata values are encoded (little-endian, exactly as they go on disk)
 * the moment they are added, so the caller's strings and arrays can be freed
 * right away and writing the header is one pass of copies. Tensor payloads
 * are not held: each tensor has a fill callback (or a borrowed pointer), and
 * gguf_writer_write streams it out in bounded chunks.
 *
 * The add functions return nothing; the first problem (bad argument, out of
 * memory) is remembered and reported by gguf_writer_write, so call sites stay
 * short and no error can be silently lost. */
#include "tools/compiler/gguf_write.h"
#include "tools/compiler/gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Tensor payloads and numeric arrays are copied as they are in memory. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF writer assumes a little-endian host"
#endif

#define CHUNK_BYTES (8u << 20) /* upper bound on one fill call */
#define MAX_NAME 64            /* ggml rejects tensor names this long or longer */

struct buf {
    uint8_t *p;
    size_t len, cap;
};

struct wkv {
    char *key;
    uint32_t type;  /* enum gguf_type of the value */
    struct buf val; /* encoded value, for arrays including elem type and count */
};

struct wtensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset;   /* relative to the data section, aligned */
    gguf_fill_fn fill; /* NULL when data is set */
    void *ctx;
    const void *data;
};

struct gguf_writer {
    uint32_t version;
    uint32_t alignment;
    struct wkv *kv;
    size_t n_kv, cap_kv;
    struct wtensor *t;
    size_t n_t, cap_t;
    char err[256]; /* first error; empty while all is well */
};

/* ---- small helpers ---- */

static void fail(struct gguf_writer *w, const char *fmt, ...)
{
    if (w->err[0])
        return; /* keep the first: later ones are usually consequences */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
}

static int buf_put(struct gguf_writer *w, struct buf *b, const void *p, size_t n)
{
    if (n == 0)
        return 0; /* p may be NULL for an empty array */
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            fail(w, "out of memory encoding GGUF metadata");
            return -1;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

/* Encode little-endian whatever the host order is. */
static void put_le(struct gguf_writer *w, struct buf *b, uint64_t v, int nbytes)
{
    uint8_t tmp[8];
    for (int i = 0; i < nbytes; i++)
        tmp[i] = (uint8_t)(v >> (8 * i));
    buf_put(w, b, tmp, (size_t)nbytes);
}

static void put_str(struct gguf_writer *w, struct buf *b, const char *s, uint64_t len)
{
    put_le(w, b, len, 8);
    buf_put(w, b, s, (size_t)len);
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Block geometry of the tensor types we can write. */
static int type_block(uint32_t type, uint32_t *blk_elems, uint32_t *blk_bytes)
{
    switch (type) {
    case GGML_TYPE_F32:
        *blk_elems = 1;
        *blk_bytes = 4;
        return 0;
    case GGML_TYPE_F16:
        *blk_elems = 1;
        *blk_bytes = 2;
        return 0;
    case GGML_TYPE_BF16:
        *blk_elems = 1;
        *blk_bytes = 2;
        return 0;
    case GGML_TYPE_Q8_0:
        *blk_elems = 32;
        *blk_bytes = 34;
        return 0;
    case GGML_TYPE_Q4_0:
        *blk_elems = 32;
        *blk_bytes = 18;
        return 0;
    case GGML_TYPE_Q4_1:
        *blk_elems = 32;
        *blk_bytes = 20;
        return 0;
    default: return -1;
    }
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

/* ---- construction ---- */

struct gguf_writer *gguf_writer_new(uint32_t version, uint32_t alignment)
{
    struct gguf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->version = version;
    w->alignment = alignment;
    /* v1 used 32-bit counts and lengths; we only produce the v2/v3 layout. */
    if (version != 2 && version != 3)
        fail(w, "GGUF version %u not supported by the writer (2 or 3)", version);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        fail(w, "GGUF alignment %u is not a power of two", alignment);
    return w;
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

/* Room for element n of an array that doubles: the array (moved or not),
 * or NULL when out of memory. */
static void *grow(void *a, size_t n, size_t *cap, size_t elem, size_t first)
{
    if (n < *cap)
        return a;
    size_t c = *cap ? 2 * *cap : first;
    void *p = realloc(a, c * elem);
    if (p)
        *cap = c;
    return p;
}

/* A copy of the name of a new key or tensor, once grow gave room (array
 * non-NULL); NULL when out of memory (error recorded). */
static char *own_name(struct gguf_writer *w, const void *array, const char *what, const char *name)
{
    char *s = array ? strdup(name) : NULL;
    if (!s)
        fail(w, "out of memory adding %s '%s'", what, name);
    return s;
}

/* Append a new KV with an empty value, or NULL (error recorded). */
static struct wkv *new_kv(struct gguf_writer *w, const char *key, uint32_t type)
{
    if (w->err[0])
        return NULL;
    if (!key || !key[0]) {
        fail(w, "GGUF key is empty");
        return NULL;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            fail(w, "GGUF key '%s' added twice", key);
            return NULL;
        }
    struct wkv *kvs = grow(w->kv, w->n_kv, &w->cap_kv, sizeof *kvs, 32);
    w->kv = kvs ? kvs : w->kv; /* a failed realloc keeps the old array */
    char *copy = own_name(w, kvs, "GGUF key", key);
    if (!copy)
        return NULL;
    struct wkv *kv = memset(&w->kv[w->n_kv++], 0, sizeof *kv);
    kv->key = copy;
    kv->type = type;
    return kv;
}

static void add_scalar(struct gguf_writer *w, const char *key, uint32_t type, uint64_t bits)
{
    struct wkv *kv = new_kv(w, key, type);
    if (kv)
        put_le(w, &kv->val, bits, (int)gguf_scalar_size(type));
}

/* The typed setters of gguf_write.h: each stores its value's bits as a
 * scalar of its GGUF type. */
#define GGUF_W_SCALAR(name, ctype, gtype, bits)                                                    \
    void gguf_w_##name(struct gguf_writer *w, const char *key, ctype v)                            \
    {                                                                                              \
        add_scalar(w, key, gtype, bits);                                                           \
    }
GGUF_W_SCALAR(u8, uint8_t, GGUF_TYPE_UINT8, v)
GGUF_W_SCALAR(i8, int8_t, GGUF_TYPE_INT8, (uint8_t)v)
GGUF_W_SCALAR(u16, uint16_t, GGUF_TYPE_UINT16, v)
GGUF_W_SCALAR(i16, int16_t, GGUF_TYPE_INT16, (uint16_t)v)
GGUF_W_SCALAR(u32, uint32_t, GGUF_TYPE_UINT32, v)
GGUF_W_SCALAR(i32, int32_t, GGUF_TYPE_INT32, (uint32_t)v)
GGUF_W_SCALAR(u64, uint64_t, GGUF_TYPE_UINT64, v)
GGUF_W_SCALAR(i64, int64_t, GGUF_TYPE_INT64, (uint64_t)v)
GGUF_W_SCALAR(f32, float, GGUF_TYPE_FLOAT32, f32_bits(v))
GGUF_W_SCALAR(bool, int, GGUF_TYPE_BOOL, v != 0)
#undef GGUF_W_SCALAR

void gguf_w_f64(struct gguf_writer *w, const char *key, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    add_scalar(w, key, GGUF_TYPE_FLOAT64, u);
}

void gguf_w_str(struct gguf_writer *w, const char *key, const char *v)
{
    struct wkv *kv = new_kv(w, key, GGUF_TYPE_STRING);
    if (kv)
        put_str(w, &kv->val, v, strlen(v));
}

/* Array header: element type then count. */
static struct wkv *new_arr(struct gguf_writer *w, const char *key, uint32_t elem, uint64_t n)
{
    struct wkv *kv = new_kv(w, key, GGUF_TYPE_ARRAY);
    if (kv) {
        put_le(w, &kv->val, elem, 4);
        put_le(w, &kv->val, n, 8);
    }
    return kv;
}

void gguf_w_arr(struct gguf_writer *w, const char *key, uint32_t elem_type, const void *v,
                uint64_t n)
{
    int sz = (int)gguf_scalar_size(elem_type);
    if (sz == 0) {
        fail(w, "GGUF key '%s': gguf_w_arr takes numeric or bool elements, not %u", key, elem_type);
        return;
    }
    if (n > SIZE_MAX / (uint64_t)sz) {
        fail(w, "GGUF key '%s': array of %llu elements is too large", key, (unsigned long long)n);
        return;
    }
    struct wkv *kv = new_arr(w, key, elem_type, n);
    if (!kv)
        return;
    if (elem_type != GGUF_TYPE_BOOL) {
        buf_put(w, &kv->val, v, (size_t)n * (size_t)sz); /* host order is LE */
        return;
    }
    const uint8_t *p = v; /* bools: one byte each, normalised to 0/1 */
    for (uint64_t i = 0; i < n; i++) {
        uint8_t b = p[i] != 0;
        buf_put(w, &kv->val, &b, 1);
    }
}

void gguf_w_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n)
{
    gguf_w_arr(w, key, GGUF_TYPE_FLOAT32, v, n);
}

void gguf_w_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n)
{
    gguf_w_arr(w, key, GGUF_TYPE_INT32, v, n);
}

void gguf_w_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
                    const uint32_t *lens, uint64_t n)
{
    struct wkv *kv = new_arr(w, key, GGUF_TYPE_STRING, n);
    for (uint64_t i = 0; kv && i < n; i++)
        put_str(w, &kv->val, v[i], lens ? lens[i] : strlen(v[i]));
}

/* ---- tensors ---- */

static void add_tensor(struct gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                       const uint64_t *ne, gguf_fill_fn fill, void *ctx, const void *data)
{
    if (w->err[0])
        return;
    size_t nlen = name ? strlen(name) : 0;
    if (nlen == 0 || nlen >= MAX_NAME) {
        fail(w, "tensor name '%s' must be 1..%d bytes", name ? name : "", MAX_NAME - 1);
        return;
    }
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) {
            fail(w, "tensor '%s' added twice", name);
            return;
        }
    uint32_t be, bb;
    if (type_block(type, &be, &bb) != 0) {
        fail(w, "tensor '%s': ggml type %u not supported by the writer", name, type);
        return;
    }
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
        fail(w, "tensor '%s': %u dimensions (1..%d)", name, n_dims, GGUF_MAX_DIMS);
        return;
    }
    if (ne[0] % be != 0) {
        fail(w, "tensor '%s': ne0 %llu is not a multiple of the %u-element block", name,
             (unsigned long long)ne[0], be);
        return;
    }
    /* Element count with overflow checks: a bad shape must not wrap to a
     * small size and produce a file that lies. */
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0 || n > UINT64_MAX / ne[d] / bb) {
            fail(w, "tensor '%s': bad dimension %u (%llu)", name, d, (unsigned long long)ne[d]);
            return;
        }
        n *= ne[d];
    }
    if (!fill && !data) {
        fail(w, "tensor '%s' has neither a fill callback nor data", name);
        return;
    }
    struct wtensor *ts = grow(w->t, w->n_t, &w->cap_t, sizeof *ts, 64);
    w->t = ts ? ts : w->t;
    char *copy = own_name(w, ts, "tensor", name);
    if (!copy)
        return;
    struct wtensor *t = memset(&w->t[w->n_t++], 0, sizeof *t);
    t->name = copy;
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->nbytes = n / be * bb;
    t->fill = fill;
    t->ctx = ctx;
    t->data = data;
}

void gguf_w_tensor(struct gguf_writer *w, const char *name, uint32_t ggml_type, uint32_t n_dims,
                   const uint64_t *ne, gguf_fill_fn fill, void *ctx)
{
    add_tensor(w, name, ggml_type, n_dims, ne, fill, ctx, NULL);
}

void gguf_w_tensor_data(struct gguf_writer *w, const char *name, uint32_t ggml_type,
                        uint32_t n_dims, const uint64_t *ne, const void *data)
{
    add_tensor(w, name, ggml_type, n_dims, ne, NULL, NULL, data);
}

/* ---- output ---- */

struct out {
    FILE *f;
    uint64_t pos; /* bytes written so far, for padding and messages */
    char *err;
    size_t errlen;
};

static int out_write(struct out *o, const void *p, size_t n, const char *what)
{
    errno = 0;
    if (n && fwrite(p, 1, n, o->f) != n) {
        int e = errno ? errno : EIO;
        snprintf(o->err, o->errlen, "write failed at byte %llu (%s): %s",
                 (unsigned long long)o->pos, what, strerror(e));
        return -1;
    }
    o->pos += n;
    return 0;
}

static int out_pad(struct out *o, uint64_t align, const char *what)
{
    static const uint8_t zeros[256];
    uint64_t n = align_up(o->pos, align) - o->pos;
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        if (out_write(o, zeros, k, what))
            return -1;
        n -= k;
    }
    return 0;
}

/* The header from the magic through the padding before the data section.
 * Built in memory: it is small next to the data (a 32000-token vocab is
 * well under a megabyte). */
static int build_header(struct gguf_writer *w, struct buf *h)
{
    put_le(w, h, GGUF_MAGIC, 4);
    put_le(w, h, w->version, 4);
    put_le(w, h, w->n_t, 8);
    put_le(w, h, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(w, h, w->kv[i].key, strlen(w->kv[i].key));
        put_le(w, h, w->kv[i].type, 4);
        buf_put(w, h, w->kv[i].val.p, w->kv[i].val.len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        off = align_up(off, w->alignment);
        t->offset = off;
        off += t->nbytes;
        put_str(w, h, t->name, strlen(t->name));
        put_le(w, h, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_le(w, h, t->ne[d], 8);
        put_le(w, h, t->type, 4);
        put_le(w, h, t->offset, 8);
    }
    return w->err[0] ? -1 : 0;
}

/* Stream one tensor: whole blocks per fill call, at most CHUNK_BYTES. */
static int write_tensor(struct out *o, const struct wtensor *t, uint8_t *chunk, uint64_t chunk_cap)
{
    uint32_t be = 1, bb = 1; /* set by type_block; -O3 cannot prove it */
    type_block(t->type, &be, &bb);
    uint64_t step = chunk_cap / bb * bb;
    for (uint64_t at = 0; at < t->nbytes; at += step) {
        uint64_t n = t->nbytes - at < step ? t->nbytes - at : step;
        const void *src;
        if (t->data) {
            src = (const uint8_t *)t->data + at;
        } else {
            if (t->fill(t->ctx, at, chunk, n) != 0) {
                snprintf(o->err, o->errlen, "producing data for tensor '%s' failed", t->name);
                return -1;
            }
            src = chunk;
        }
        if (out_write(o, src, (size_t)n, t->name))
            return -1;
    }
    return 0;
}

int gguf_writer_write(struct gguf_writer *w, FILE *f, char *err, size_t errlen)
{
    /* general.alignment only when it differs from the default, as the spec
     * allows and llama.cpp's own writer does. */
    if (w->alignment != GGUF_DEFAULT_ALIGNMENT) {
        int have = 0;
        for (size_t i = 0; i < w->n_kv; i++)
            have |= strcmp(w->kv[i].key, "general.alignment") == 0;
        if (!have)
            gguf_w_u32(w, "general.alignment", w->alignment);
    }

    struct buf h = {0};
    if (w->err[0] || build_header(w, &h) != 0) {
        snprintf(err, errlen, "%s", w->err);
        free(h.p);
        return -1;
    }

    struct out o = {f, 0, err, errlen};
    uint8_t *chunk = NULL;
    int rc = -1;
    if (out_write(&o, h.p, h.len, "header") || out_pad(&o, w->alignment, "header padding"))
        goto done;

    uint64_t biggest = 0;
    for (size_t i = 0; i < w->n_t; i++)
        if (w->t[i].fill && w->t[i].nbytes > biggest)
            biggest = w->t[i].nbytes;
    uint64_t cap = biggest < CHUNK_BYTES ? biggest : CHUNK_BYTES;
    if (cap < 64)
        cap = 64; /* at least one whole block of every type */
    chunk = malloc((size_t)cap);
    if (!chunk) {
        snprintf(err, errlen, "out of memory for a %llu-byte write buffer",
                 (unsigned long long)cap);
        goto done;
    }

    uint64_t data_start = o.pos;
    for (size_t i = 0; i < w->n_t; i++) {
        /* Pad relative to the data section, which is itself aligned. */
        if (out_pad(&o, w->alignment, "tensor padding"))
            goto done;
        if (o.pos - data_start != w->t[i].offset) {
            snprintf(err, errlen, "internal: tensor '%s' landed at %llu, header says %llu",
                     w->t[i].name, (unsigned long long)(o.pos - data_start),
                     (unsigned long long)w->t[i].offset);
            goto done;
        }
        if (write_tensor(&o, &w->t[i], chunk, cap))
            goto done;
    }
    if (out_pad(&o, w->alignment, "final padding"))
        goto done;
    errno = 0;
    if (fflush(f) != 0) {
        snprintf(err, errlen, "write failed flushing output: %s", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    free(chunk);
    free(h.p);
    return rc;
}
