/* safetensors reader (safetensors.h). The file is untrusted: every length,
 * dtype, shape and offset is checked before a descriptor is filled in. */
#include "tools/compiler/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/util/json.h"
#include "tools/util/tool_util.h"

/* Every dtype the safetensors format defines, with its element size; only
 * the float types nibble reads map to a ggml type. */
static const struct {
    const char *name;
    uint32_t size;
    int ggml; /* enum ggml_type, or -1: refused */
} st_dtypes[] = {
    {"F32", 4, GGML_TYPE_F32},
    {"F16", 2, GGML_TYPE_F16},
    {"BF16", 2, GGML_TYPE_BF16},
    {"F64", 8, -1},
    {"I64", 8, -1},
    {"U64", 8, -1},
    {"I32", 4, -1},
    {"U32", 4, -1},
    {"I16", 2, -1},
    {"U16", 2, -1},
    {"I8", 1, -1},
    {"U8", 1, -1},
    {"BOOL", 1, -1},
    {"F8_E4M3", 1, -1},
    {"F8_E5M2", 1, -1},
    {"F8_E8M0", 1, -1},
    {"F6_E2M3", 1, -1},
    {"F6_E3M2", 1, -1},
    {"F4", 1, -1},
    {"C64", 8, -1},
};

static int parse_dtype(const struct json_value *v, uint32_t *type, const char *name, char *err,
                       size_t errlen)
{
    char nb[72], db[72];
    if (!json_is(v, JSON_STRING))
        return nib_fail(err, errlen, "tensor '%s': dtype is %s, not a string",
                        nib_show(name, strlen(name), nb), json_type_name(v));
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++) {
        if (!json_str_eq(v, st_dtypes[i].name))
            continue;
        if (st_dtypes[i].ggml < 0)
            return nib_fail(
                err, errlen,
                "tensor '%s': dtype %s is not supported (nibble reads F32, F16 and BF16)",
                nib_show(name, strlen(name), nb), st_dtypes[i].name);
        *type = (uint32_t)st_dtypes[i].ggml;
        return 0;
    }
    return nib_fail(err, errlen, "tensor '%s': unknown dtype '%s' (nibble reads F32, F16 and BF16)",
                    nib_show(name, strlen(name), nb), nib_show(v->str, v->n, db));
}

/* A JSON number that is a non-negative integer below limit. */
static int get_uint(const struct json_value *v, uint64_t limit, uint64_t *out)
{
    if (!json_is(v, JSON_NUMBER) || !v->is_int || v->i < 0 || (uint64_t)v->i >= limit)
        return -1;
    *out = (uint64_t)v->i;
    return 0;
}

static int parse_tensor(const struct json_member *mem, struct gguf_tensor *t, uint64_t data_size,
                        char *err, size_t errlen)
{
    const char *name = mem->key;
    char nb[72];
    const char *sn = nib_show(name, mem->key_len, nb);
    if (mem->key_len == 0)
        return nib_fail(err, errlen, "a tensor has an empty name");
    if (mem->key_len > ST_MAX_NAME)
        return nib_fail(err, errlen, "tensor '%s': name of %u bytes is longer than %u", sn,
                        mem->key_len, ST_MAX_NAME);
    if (memchr(name, 0, mem->key_len))
        return nib_fail(err, errlen, "tensor '%s': name holds a NUL byte", sn);
    const struct json_value *o = &mem->value;
    if (!json_is(o, JSON_OBJECT))
        return nib_fail(err, errlen, "tensor '%s': is %s, not an object", sn, json_type_name(o));
    for (uint32_t i = 0; i < o->n; i++) {
        const char *k = o->members[i].key;
        if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets")) {
            char kb[72];
            return nib_fail(
                err, errlen,
                "tensor '%s': unknown field '%s' (a tensor has dtype, shape, data_offsets)", sn,
                nib_show(k, o->members[i].key_len, kb));
        }
    }
    const struct json_value *dt = json_get(o, "dtype"), *shape = json_get(o, "shape"),
                            *offs = json_get(o, "data_offsets");
    if (!dt || !shape || !offs)
        return nib_fail(err, errlen, "tensor '%s': missing %s", sn,
                        !dt      ? "dtype"
                        : !shape ? "shape"
                                 : "data_offsets");
    memset(t, 0, sizeof *t);
    t->name.ptr = name;
    t->name.len = mem->key_len;
    if (parse_dtype(dt, &t->type, name, err, errlen))
        return -1;
    if (!json_is(shape, JSON_ARRAY))
        return nib_fail(err, errlen, "tensor '%s': shape is %s, not an array", sn,
                        json_type_name(shape));
    if (shape->n < 1 || shape->n > GGUF_MAX_DIMS)
        return nib_fail(err, errlen, "tensor '%s': shape has rank %u; nibble reads ranks 1 to %u",
                        sn, shape->n, GGUF_MAX_DIMS);
    t->n_dims = shape->n;
    uint64_t n = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < shape->n; d++) {
        uint64_t v;
        if (get_uint(&shape->items[d], (uint64_t)1 << 32, &v) || v == 0)
            return nib_fail(err, errlen,
                            "tensor '%s': shape[%u] must be an integer in [1, 2^32 - 1]", sn, d);
        t->ne[shape->n - 1 - d] = v; /* row-major: the last dimension varies fastest */
        if (__builtin_mul_overflow(n, v, &n))
            return nib_fail(err, errlen, "tensor '%s': shape overflows", sn);
    }
    t->n_elems = n;
    uint64_t esize = t->type == GGML_TYPE_F32 ? 4 : 2;
    if (__builtin_mul_overflow(n, esize, &t->nbytes))
        return nib_fail(err, errlen, "tensor '%s': shape overflows", sn);
    uint64_t begin, end;
    if (!json_is(offs, JSON_ARRAY) || offs->n != 2)
        return nib_fail(err, errlen, "tensor '%s': data_offsets must be an array [begin, end]", sn);
    if (get_uint(&offs->items[0], UINT64_MAX, &begin) ||
        get_uint(&offs->items[1], UINT64_MAX, &end))
        return nib_fail(err, errlen, "tensor '%s': data_offsets must be non-negative integers", sn);
    if (end < begin)
        return nib_fail(err, errlen, "tensor '%s': data_offsets [%llu, %llu] end before they begin",
                        sn, (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return nib_fail(err, errlen,
                        "tensor '%s': data_offsets [%llu, %llu] reach past the data section "
                        "(%llu bytes)",
                        sn, (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)data_size);
    if (end - begin != t->nbytes)
        return nib_fail(err, errlen,
                        "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, but the shape and "
                        "dtype need %llu",
                        sn, (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)(end - begin), (unsigned long long)t->nbytes);
    t->offset = begin;
    return 0;
}

static int metadata_ok(const struct json_value *v, char *err, size_t errlen)
{
    if (!json_is(v, JSON_OBJECT))
        return nib_fail(err, errlen, "__metadata__ is %s, not an object", json_type_name(v));
    for (uint32_t i = 0; i < v->n; i++)
        if (!json_is(&v->members[i].value, JSON_STRING)) {
            char kb[72];
            return nib_fail(err, errlen, "__metadata__.%s is %s, not a string",
                            nib_show(v->members[i].key, v->members[i].key_len, kb),
                            json_type_name(&v->members[i].value));
        }
    return 0;
}

struct span {
    uint64_t begin, end;
    uint32_t i;
};

static int by_begin(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* No two tensors share a byte: sorted by offset, each ends before the next
 * begins. */
static int check_overlaps(const struct st_file *f, char *err, size_t errlen)
{
    if (f->n_tensors < 2)
        return 0;
    struct span *s = malloc((size_t)f->n_tensors * sizeof *s);
    if (!s)
        return nib_fail(err, errlen, "out of memory");
    for (uint32_t i = 0; i < f->n_tensors; i++)
        s[i] = (struct span){f->tensors[i].offset, f->tensors[i].offset + f->tensors[i].nbytes, i};
    qsort(s, f->n_tensors, sizeof *s, by_begin);
    int rc = 0;
    for (uint32_t i = 1; i < f->n_tensors && !rc; i++)
        if (s[i - 1].end > s[i].begin) {
            char ab[72], bb[72];
            const struct gguf_str *x = &f->tensors[s[i - 1].i].name, *y = &f->tensors[s[i].i].name;
            rc = nib_fail(err, errlen, "tensors '%s' and '%s' overlap in the data section",
                          nib_show(x->ptr, x->len, ab), nib_show(y->ptr, y->len, bb));
        }
    free(s);
    return rc;
}

int st_open(struct st_file *f, const uint8_t *buf, size_t size, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    if (size < 8)
        return nib_fail(err, errlen,
                        "file of %zu bytes is too short for a safetensors header length", size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | buf[i];
    if (n < 2 || n > ST_MAX_HEADER)
        return nib_fail(err, errlen, "header length %llu is out of range [2, %u]",
                        (unsigned long long)n, ST_MAX_HEADER);
    if (n > size - 8)
        return nib_fail(err, errlen, "header length %llu reaches past the end of the %zu-byte file",
                        (unsigned long long)n, size);
    if (buf[8] != '{')
        return nib_fail(err, errlen, "header does not start with '{'");
    char jerr[256];
    struct json_limits lim = {.max_bytes = (size_t)n, .max_depth = 4};
    if (json_parse((const char *)buf + 8, (size_t)n, &lim, &f->doc, jerr, sizeof jerr))
        return nib_fail(err, errlen, "header: %s", jerr);
    const struct json_value *root = json_root(f->doc);
    f->buf = buf;
    f->size = size;
    f->header_len = n;
    f->data = buf + 8 + n;
    f->data_size = size - 8 - n;
    if (!json_is(root, JSON_OBJECT)) {
        nib_fail(err, errlen, "header is %s, not an object", json_type_name(root));
        goto bad;
    }
    f->tensors = calloc(root->n ? root->n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        nib_fail(err, errlen, "out of memory");
        goto bad;
    }
    for (uint32_t i = 0; i < root->n; i++) {
        const struct json_member *mem = &root->members[i];
        if (!strcmp(mem->key, "__metadata__") && mem->key_len == 12) {
            if (metadata_ok(&mem->value, err, errlen))
                goto bad;
            continue;
        }
        struct gguf_tensor *t = &f->tensors[f->n_tensors];
        if (parse_tensor(mem, t, f->data_size, err, errlen))
            goto bad;
        t->data = f->data + t->offset;
        f->n_tensors++;
    }
    if (check_overlaps(f, err, errlen))
        goto bad;
    return 0;
bad:
    st_close(f);
    return -1;
}

void st_close(struct st_file *f)
{
    free(f->tensors);
    json_free(f->doc);
    memset(f, 0, sizeof *f);
}

const struct gguf_tensor *st_find(const struct st_file *f, const char *name)
{
    size_t n = strlen(name);
    for (uint32_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].name.len == n && !memcmp(f->tensors[i].name.ptr, name, n))
            return &f->tensors[i];
    return NULL;
}

const char *st_metadata(const struct st_file *f, const char *key)
{
    const struct json_value *md = json_get(json_root(f->doc), "__metadata__");
    const struct json_value *v = json_get(md, key);
    return json_is(v, JSON_STRING) ? v->str : NULL;
}
