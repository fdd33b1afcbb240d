/* A strict RFC 8259 JSON parser into a compact read-only tree held in one
 * arena (tokenizer.json, tokenizer_config.json, chat messages).
 *
 * Strict means: one value with optional whitespace around it; no comments,
 * trailing commas, NaN, leading '+' or zeros, single quotes or control
 * characters in strings; strings must be well-formed UTF-8 (no overlong
 * forms, no surrogates, nothing above U+10FFFF); \u escapes are decoded to
 * UTF-8, surrogate pairs joined, a lone surrogate refused. \u0000 is kept:
 * a string has a length and may hold NUL bytes (it is also NUL-terminated).
 * Duplicate keys in one object are refused (RFC 8259 leaves them
 * undefined; refusing means no reader can see a different value than
 * another). Nesting is limited (json_limits.max_depth), and so is the input
 * size; every error names the line, column and byte offset and the
 * problem. Hostile input is never trusted: the parser is fuzzed
 * (tests/fuzz/fuzz_json.c). */
#ifndef NIB_JSON_H
#define NIB_JSON_H

#include <stddef.h>
#include <stdint.h>

enum json_type {
    JSON_NULL = 1,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
};

struct json_member;

struct json_value {
    uint8_t type;   /* enum json_type */
    uint8_t is_int; /* NUMBER: the value is an integer held exactly in i */
    uint32_t n;     /* STRING: bytes; ARRAY: elements; OBJECT: members */
    union {
        const char *str;                   /* STRING: n bytes, then a NUL */
        const struct json_value *items;    /* ARRAY */
        const struct json_member *members; /* OBJECT, in document order */
        double num;                        /* NUMBER */
    };
    int64_t i; /* NUMBER with is_int */
};

struct json_member {
    const char *key; /* key_len bytes, then a NUL */
    uint32_t key_len;
    struct json_value value;
};

struct json_limits {
    size_t max_bytes;   /* input size; 0: JSON_DEFAULT_MAX_BYTES */
    uint32_t max_depth; /* nesting of arrays and objects; 0: JSON_DEFAULT_MAX_DEPTH;
                         * at most JSON_MAX_DEPTH (the parser recurses) */
};

#define JSON_DEFAULT_MAX_BYTES (512u << 20)
#define JSON_DEFAULT_MAX_DEPTH 128u
#define JSON_MAX_DEPTH 4096u

struct json_doc;

/* Parse buf[0..len) (need not be NUL-terminated). 0 with *out set (free
 * with json_free), or -1 with "line L, column C (byte O): problem" in err.
 * lim may be NULL for the defaults. */
int json_parse(const char *buf, size_t len, const struct json_limits *lim, struct json_doc **out,
               char *err, size_t errlen);
const struct json_value *json_root(const struct json_doc *d);
void json_free(struct json_doc *d);

/* Lookups: NULL when v is NULL, of another type, or has no such member /
 * element. */
const struct json_value *json_get(const struct json_value *obj, const char *key);
const struct json_value *json_at(const struct json_value *arr, size_t i);

/* Type checks that accept NULL (and answer 0). */
int json_is(const struct json_value *v, enum json_type t);
int json_is_bool(const struct json_value *v);
/* "null", "false", ..., "object"; "missing" for NULL. */
const char *json_type_name(const struct json_value *v);
/* 1 when v is a string equal to s (NUL-terminated). */
int json_str_eq(const struct json_value *v, const char *s);

#endif
