/* Typed reads of GGUF metadata with the importers' messages: the GGUF
 * tokenizer importer (tools/compiler/gguf_tok.c) and the LLaMA importer
 * (tools/compiler/llama_import.c) explain a missing or mistyped key in the
 * same words. Header only: the fuzzers (tests/fuzz/meson.build) build
 * those two files from their sources, with nothing else of tools/. */
#ifndef NIB_GGUF_META_H
#define NIB_GGUF_META_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tools/compiler/gguf.h"

/* The file being read and where its first error goes (err may be NULL). */
struct gguf_meta {
    const struct gguf_file *g;
    char *err;
    size_t errlen;
};

/* Fill m and empty err. */
static inline void gguf_meta_init(struct gguf_meta *m, const struct gguf_file *g, char *err,
                                  size_t errlen)
{
    m->g = g;
    m->err = err;
    m->errlen = errlen;
    if (err && errlen)
        err[0] = 0;
}

/* Write the message into err; returns -1. */
static inline int gguf_meta_fail(struct gguf_meta *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int gguf_meta_fail(struct gguf_meta *m, const char *fmt, ...)
{
    if (m->err && m->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->err, m->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* "metadata 'key' has type <kv's type>, expected <expected>" ("uint32",
 * "array of string", ...; "?" without kv); returns -1. */
static inline int gguf_meta_wrong_type(struct gguf_meta *m, const char *key,
                                       const struct gguf_kv *kv, const char *expected)
{
    char d[40] = "?";
    if (kv && kv->type == GGUF_TYPE_ARRAY)
        snprintf(d, sizeof d, "array of %s", gguf_type_name(kv->arr_type));
    else if (kv)
        snprintf(d, sizeof d, "%s", gguf_type_name(kv->type));
    return gguf_meta_fail(m, "metadata '%s' has type %s, expected %s", key, d, expected);
}

/* Why a typed getter (gguf_get_u32, ...) returned rc (-1 absent, -2 other
 * type or out of range) for key; returns -1. */
static inline int gguf_meta_bad(struct gguf_meta *m, const char *key, int rc, const char *expected)
{
    if (rc == -1)
        return gguf_meta_fail(m, "missing required metadata '%s'", key);
    const struct gguf_kv *kv = gguf_find_kv(m->g, key);
    int is_int = kv && (kv->type <= GGUF_TYPE_INT32 || kv->type == GGUF_TYPE_UINT64 ||
                        kv->type == GGUF_TYPE_INT64);
    if (is_int && !strcmp(expected, "integer"))
        return gguf_meta_fail(m, "metadata '%s' is out of range for a 32-bit unsigned integer",
                              key);
    return gguf_meta_wrong_type(m, key, kv, expected);
}

/* Required values: 0, or -1 with the message. */
static inline int gguf_meta_need_u32(struct gguf_meta *m, const char *key, uint32_t *out)
{
    int rc = gguf_get_u32(m->g, key, out);
    return rc ? gguf_meta_bad(m, key, rc, "integer") : 0;
}

static inline int gguf_meta_need_str(struct gguf_meta *m, const char *key, struct gguf_str *out)
{
    int rc = gguf_get_str(m->g, key, out);
    return rc ? gguf_meta_bad(m, key, rc, "string") : 0;
}

/* Optional values: absent leaves dflt (opt_bool: leaves *out as it is); a
 * present value of another type is an error. */
static inline int gguf_meta_opt_u32(struct gguf_meta *m, const char *key, uint32_t *out,
                                    uint32_t dflt)
{
    int rc = gguf_get_u32(m->g, key, out);
    if (rc == -1)
        *out = dflt;
    return rc == -2 ? gguf_meta_bad(m, key, rc, "integer") : 0;
}

static inline int gguf_meta_opt_bool(struct gguf_meta *m, const char *key, int *out)
{
    int rc = gguf_get_bool(m->g, key, out);
    return rc == -2 ? gguf_meta_bad(m, key, rc, "bool") : 0;
}

#endif
