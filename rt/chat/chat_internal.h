/* The chat template evaluator's values and context, shared by the files of
 * rt/chat. Values follow @huggingface/jinja's runtime: numbers are doubles
 * (JavaScript numbers) tagged integer or float, strings are UTF-8 bytes
 * with one taint byte each, arrays and mappings live in an arena inside
 * the caller's scratch. Errors unwind with longjmp to nib_chat_render. */
#ifndef NIB_CHAT_INTERNAL_H
#define NIB_CHAT_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/chat/chat.h"
#include "rt/chat/chat_prog.h"

enum vkind {
    V_UNDEF,
    V_NULL,
    V_BOOL,
    V_INT,
    V_FLOAT,
    V_STR,
    V_ARRAY,
    V_TUPLE,
    V_OBJECT,
    V_KWARGS,
    V_NS,
    V_FUNC,
    /* JavaScript's own undefined (first/last of an empty list): fatal in
     * every use but an assignment or a macro argument, where it becomes
     * undefined; never stored. */
    V_HOLE,
};

enum fid {
    FN_MACRO,
    FN_RAISE,
    FN_RANGE,
    FN_STRFTIME,
    FN_NAMESPACE,
    FN_S_UPPER,
    FN_S_LOWER,
    FN_S_STRIP,
    FN_S_TITLE,
    FN_S_CAPITALIZE,
    FN_S_RSTRIP,
    FN_S_LSTRIP,
    FN_S_STARTSWITH,
    FN_S_ENDSWITH,
    FN_S_SPLIT,
    FN_S_REPLACE,
    FN_O_GET,
    FN_O_ITEMS,
    FN_O_KEYS,
    FN_O_VALUES,
    FN_O_DICTSORT,
};

struct map;
struct val {
    uint8_t k;
    uint8_t tu; /* string: every byte's taint when s.t is NULL */
    uint32_t n; /* string bytes, array items, function id */
    union {
        double num; /* numbers; booleans as 0 or 1 */
        struct {
            const uint8_t *p, *t;
        } s;
        struct val *a;
        struct map *m;
        struct {
            const struct val *self; /* bound method: its object */
            uint32_t node;          /* macro: its node */
        } f;
    } u;
};

struct ment {
    struct val key, v;
    struct ment *next;
};

/* Insertion-ordered (JavaScript Map). */
struct map {
    struct ment *head, *tail;
    uint32_t n;
};

struct sent {
    const uint8_t *name;
    uint32_t len;
    struct val v;
    struct sent *next;
};

struct scope {
    struct scope *parent;
    struct sent *head;
};

/* Arguments of a call as @huggingface/jinja passes them: the positional
 * values, then the keyword arguments as one mapping when there are any. */
struct args {
    struct val *v;
    uint32_t n;
};

struct ctx {
    const uint8_t *prog, *pool;
    uint32_t n_nodes;
    uint8_t *arena;
    size_t used, cap;
    /* Output, and the stack of strings being built above it. */
    uint8_t *out, *taint;
    size_t olen, ocap;
    uint64_t steps, max_steps;
    uint32_t depth;
    int64_t now_s;
    char *err;
    size_t errlen;
    jmp_buf jb;
};

/* Dynamic nesting allowed (statements, expressions, macro calls, nested
 * values): bounds the evaluator's stack. */
#define CHAT_MAX_RECURSION 600u

/* chat_value.c */
_Noreturn void chat_fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *chat_alloc(struct ctx *c, size_t n);
void chat_step(struct ctx *c, uint64_t n);
void chat_enter(struct ctx *c);
void chat_leave(struct ctx *c);
const char *chat_type_name(const struct val *v);

void sink_put(struct ctx *c, const uint8_t *p, const uint8_t *t, uint8_t tu, size_t n);
void sink_lit(struct ctx *c, const char *s);
void sink_byte(struct ctx *c, uint8_t b, uint8_t taint);
void sink_str(struct ctx *c, const struct val *s);
/* Take the bytes written since mark as a string value (copied into the
 * arena), and rewind. */
struct val sink_take(struct ctx *c, size_t mark);

struct val v_undef(void);
struct val v_null(void);
struct val v_bool(int b);
struct val v_num(int kind, double d);
struct val v_lit(const char *s); /* untainted static text */
struct val v_strn(const uint8_t *p, const uint8_t *t, uint8_t tu, uint32_t n);
struct val v_array(struct ctx *c, uint32_t n, int kind); /* items zeroed (undefined) */
struct val v_map(struct ctx *c, int kind);
void map_set(struct ctx *c, struct map *m, struct val key, struct val v);
const struct val *map_get(const struct map *m, const uint8_t *key, uint32_t len);
/* Taint of byte i of a string. */
static inline uint8_t str_taint(const struct val *s, uint32_t i)
{
    return s->u.s.t ? s->u.s.t[i] : s->tu;
}
struct val str_slice(const struct val *s, uint32_t from, uint32_t to);
int str_eq(const struct val *a, const struct val *b);
struct val str_trim(const struct val *s, int left, int right); /* JavaScript whitespace */
int str_eq_lit(const struct val *a, const char *lit);

/* UTF-8 as JavaScript sees it: one character per code point, an
 * ill-formed byte one character by itself. */
uint32_t u8_next(const uint8_t *p, uint32_t n, uint32_t i, uint32_t *cp);
uint32_t u16_len(const struct val *s);
int js_space(uint32_t cp);
int u16_cmp(const struct val *a, const struct val *b);

int truthy(const struct val *v);
int loose_eq(struct ctx *c, const struct val *a, const struct val *b);
int strict_eq(const struct val *a, const struct val *b);
int same_value_zero(const struct val *a, const struct val *b);

size_t js_num_str(double d, char *buf);   /* Number.prototype.toString */
size_t js_float_str(double d, char *buf); /* FloatValue.toString */
double js_to_number(const struct val *s); /* Number(string) */
double js_parse_int(const struct val *s);
double js_parse_float(const struct val *s);

/* The ways @huggingface/jinja turns values into text. */
enum strmode {
    SM_PRINT, /* RuntimeValue.toString(): what {{ }} prints */
    SM_JS,    /* String(value.value): what ~ and + concatenate */
    SM_JOIN,  /* Array.prototype.join's view of value.value */
};
void put_value(struct ctx *c, const struct val *v, int mode);
struct val value_string(struct ctx *c, const struct val *v, int mode);

struct json_opts {
    int indent; /* 0: none */
    int ensure_ascii;
    const struct val *item_sep, *key_sep; /* NULL: the defaults */
};
void put_json(struct ctx *c, const struct val *v, const struct json_opts *o, int depth,
              int undef_null);

/* chat_eval.c */
struct val chat_eval(struct ctx *c, uint32_t node, struct scope *sc);
/* The same, but a V_HOLE result (also through if-else, `if` and `or`) is
 * returned instead of failing. */
struct val chat_eval_hole(struct ctx *c, uint32_t node, struct scope *sc);
struct val chat_call(struct ctx *c, const struct val *fn, struct args *a, struct scope *sc);

/* chat_filter.c */
struct val chat_filter(struct ctx *c, struct val operand, struct nib_chat_node f,
                       uint32_t first_arg, uint32_t n_args, struct scope *sc);
int chat_test(struct ctx *c, int test, const struct nib_chat_node *n, const struct val *v,
              const struct val *arg);
struct val chat_method(struct ctx *c, const struct val *fn, struct args *a);
/* A string's or mapping's builtin member of that name, or undefined. */
struct val chat_builtin_member(struct ctx *c, const struct val *obj, const struct val *name);
struct val chat_strftime(struct ctx *c, const struct val *fmt);

static inline struct nib_chat_node chat_node(const struct ctx *c, uint32_t i)
{
    return nib_chat_node_at(c->prog, i);
}

#endif
