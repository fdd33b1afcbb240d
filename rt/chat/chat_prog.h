/* The compiled chat template: the format nib compile writes
 * (tools/compiler/chat_compile.c) and rt/chat reads. Little-endian, no
 * pointers, no alignment assumed:
 *
 *   header  32 bytes: "NCHT", u32 version, u32 n_nodes, u32 pool_len,
 *           u32 max_depth, 3 x u32 zero
 *   nodes   n_nodes x 16 bytes: u8 op, u8 sub, u16 nk, u32 k0, u32 a, u32 b
 *   pool    pool_len bytes (strings)
 *
 * Node 0 is the root block. Nodes are numbered breadth first, so the kids
 * of node i are the nk nodes from k0 on, and k0 of each node with kids is
 * one past the last kid of the node before: the check reads the tree in one
 * pass without memory, and every kid comes after its parent (no cycles).
 * A string is a = pool offset, b = length; a number is a = low, b = high
 * 32 bits of its IEEE double. */
#ifndef NIB_CHAT_PROG_H
#define NIB_CHAT_PROG_H

#include <stdint.h>
#include <string.h>

#define NIB_CHAT_MAGIC "NCHT"
#define NIB_CHAT_VERSION 1u
#define NIB_CHAT_HEADER 32u
#define NIB_CHAT_NODE 16u
#define NIB_CHAT_MAX_NODES (1u << 18)
#define NIB_CHAT_MAX_POOL (1u << 22)
/* Tree depth the compiler accepts and the check enforces: the evaluator
 * recurses at most this deep per macro call level. */
#define NIB_CHAT_MAX_DEPTH 192u

enum nib_chat_op {
    /* statements */
    CO_BLOCK = 1,    /* kids: statements */
    CO_TEXT,         /* a,b: the text */
    CO_PRINT,        /* kid: expression */
    CO_IF,           /* kids: test, then block, else block */
    CO_FOR,          /* kids: target, iterable, filter or ABSENT, body, else block */
    CO_SET,          /* kids: target, value */
    CO_SET_BLOCK,    /* kids: target, block */
    CO_MACRO,        /* a,b: name; kids: parameters (NAME or KWARG), body block */
    CO_BREAK,        /* no kids */
    CO_CONTINUE,     /* no kids */
    CO_FILTER_BLOCK, /* sub, a,b: filter as in FILTER; kids: block, arguments */
    /* expressions */
    CO_STR,     /* a,b: the string */
    CO_INT,     /* a,b: the value (a double, as JavaScript holds it) */
    CO_FLOAT,   /* a,b: the value */
    CO_NAME,    /* a,b: the variable */
    CO_LIST,    /* kids: items */
    CO_TUPLE,   /* kids: items */
    CO_DICT,    /* kids: key, value, key, value... */
    CO_ATTR,    /* a,b: name; kid: object */
    CO_INDEX,   /* kids: object, key */
    CO_SLICE,   /* kids: object, start, stop, step (each may be ABSENT) */
    CO_ABSENT,  /* an omitted slice bound or loop filter */
    CO_CALL,    /* kids: callee, arguments (expressions, then KWARGs) */
    CO_KWARG,   /* a,b: keyword; kid: value */
    CO_BIN,     /* sub: enum nib_chat_bin; kids: left, right */
    CO_UNARY,   /* sub: enum nib_chat_un; kid */
    CO_FILTER,  /* sub: enum nib_chat_filter | CF_CALLED; a,b: name; kids: operand, args */
    CO_TEST,    /* sub: enum nib_chat_test | CT_NEGATED; a,b: name; kid: operand */
    CO_TERNARY, /* kids: test, then, else */
    CO_SELECT,  /* kids: value, test (`a if c` without else: undefined when not c) */
    CO_OP_END
};

enum nib_chat_bin {
    CB_ADD,
    CB_SUB,
    CB_MUL,
    CB_DIV,
    CB_FLOORDIV,
    CB_MOD,
    CB_POW,
    CB_CONCAT,
    CB_EQ,
    CB_NE,
    CB_LT,
    CB_GT,
    CB_LE,
    CB_GE,
    CB_IN,
    CB_NOTIN,
    CB_AND,
    CB_OR,
    CB_END
};

enum nib_chat_un { CU_NOT, CU_NEG, CU_POS, CU_END };

/* Filters by name; CF_OTHER keeps its name for the error it raises (or
 * for a mapping's method of that name). CF_CALLED: written with (...). */
enum nib_chat_filter {
    CF_OTHER,
    CF_SAFE,
    CF_TOJSON,
    CF_LIST,
    CF_FIRST,
    CF_LAST,
    CF_LENGTH,
    CF_REVERSE,
    CF_SORT,
    CF_JOIN,
    CF_STRING,
    CF_UNIQUE,
    CF_UPPER,
    CF_LOWER,
    CF_TITLE,
    CF_CAPITALIZE,
    CF_TRIM,
    CF_INDENT,
    CF_INT,
    CF_FLOAT,
    CF_ABS,
    CF_ITEMS,
    CF_BOOL,
    CF_DEFAULT,
    CF_SELECTATTR,
    CF_REJECTATTR,
    CF_MAP,
    CF_REPLACE,
    CF_END
};
#define CF_CALLED 0x80u

enum nib_chat_test {
    CT_OTHER,
    CT_BOOLEAN,
    CT_CALLABLE,
    CT_ODD,
    CT_EVEN,
    CT_FALSE,
    CT_TRUE,
    CT_NONE,
    CT_STRING,
    CT_NUMBER,
    CT_INTEGER,
    CT_ITERABLE,
    CT_MAPPING,
    CT_SEQUENCE,
    CT_LOWER,
    CT_UPPER,
    CT_DEFINED,
    CT_UNDEFINED,
    CT_EQUALTO,
    CT_EQ,
    CT_END
};
#define CT_NEGATED 0x80u

/* Each filter's and test's name, by number (rt/chat/chat_filter.c); NULL
 * at CF_OTHER and CT_OTHER. */
extern const char *const nib_chat_filter_names[CF_END];
extern const char *const nib_chat_test_names[CT_END];

struct nib_chat_node {
    uint8_t op, sub;
    uint16_t nk;
    uint32_t k0, a, b;
};

static inline uint32_t nib_chat_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void nib_chat_wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline struct nib_chat_node nib_chat_node_at(const uint8_t *prog, uint32_t i)
{
    const uint8_t *p = prog + NIB_CHAT_HEADER + (size_t)i * NIB_CHAT_NODE;
    struct nib_chat_node n;
    n.op = p[0];
    n.sub = p[1];
    n.nk = (uint16_t)(p[2] | p[3] << 8);
    n.k0 = nib_chat_rd32(p + 4);
    n.a = nib_chat_rd32(p + 8);
    n.b = nib_chat_rd32(p + 12);
    return n;
}

static inline double nib_chat_num(struct nib_chat_node n)
{
    uint64_t bits = (uint64_t)n.b << 32 | n.a;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

#endif
