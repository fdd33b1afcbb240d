/* nib_chat_check: a compiled chat template from a blob, checked before it
 * runs: sizes, every node's kind and kids, every string inside the pool,
 * and the breadth-first layout (rt/chat/chat_prog.h) that makes the nodes
 * a tree of bounded depth, so the evaluator's recursion is bounded. One
 * pass, no memory. */
#include <stdio.h>
#include <string.h>

#include "rt/chat/chat.h"
#include "rt/chat/chat_prog.h"

static int is_stmt(int op)
{
    return op == CO_TEXT || op == CO_PRINT || op == CO_IF || op == CO_FOR || op == CO_SET ||
           op == CO_SET_BLOCK || op == CO_MACRO || op == CO_BREAK || op == CO_CONTINUE ||
           op == CO_FILTER_BLOCK;
}

static int is_expr(int op)
{
    return op >= CO_STR && op < CO_OP_END && op != CO_ABSENT && op != CO_KWARG;
}

static int op_of(const uint8_t *prog, uint32_t i)
{
    return nib_chat_node_at(prog, i).op;
}

static int is_target(const uint8_t *prog, uint32_t i, int attr_ok)
{
    struct nib_chat_node t = nib_chat_node_at(prog, i);
    if (t.op == CO_NAME || (attr_ok && t.op == CO_ATTR))
        return 1;
    if (t.op != CO_TUPLE || (uint64_t)t.k0 + t.nk > nib_chat_rd32(prog + 8) || (t.nk && t.k0 <= i))
        return 0;
    for (uint32_t k = 0; k < t.nk; k++)
        if (op_of(prog, t.k0 + k) != CO_NAME)
            return 0;
    return 1;
}

/* Kids k..k+nk-1 after the first are arguments (expressions or KWARGs):
 * "" when they are, else why. */
static const char *check_args(const uint8_t *prog, uint32_t k, uint32_t nk, const char *why)
{
    for (uint32_t j = 1; j < nk; j++)
        if (!is_expr(op_of(prog, k + j)) && op_of(prog, k + j) != CO_KWARG)
            return why;
    return "";
}

/* The kinds of kids op wants: "" when they are right. */
static const char *check_kids(const uint8_t *prog, uint32_t i, struct nib_chat_node n)
{
    uint32_t k = n.k0;
#define KID(j) op_of(prog, k + (j))
    switch (n.op) {
    case CO_BLOCK:
        for (uint32_t j = 0; j < n.nk; j++)
            if (!is_stmt(KID(j)))
                return "a block holds a non-statement";
        return "";
    case CO_TEXT:
    case CO_BREAK:
    case CO_CONTINUE:
    case CO_STR:
    case CO_INT:
    case CO_FLOAT:
    case CO_NAME:
    case CO_ABSENT: return n.nk == 0 ? "" : "a leaf with kids";
    case CO_PRINT: return n.nk == 1 && is_expr(KID(0)) ? "" : "bad print";
    case CO_IF:
        return n.nk == 3 && is_expr(KID(0)) && KID(1) == CO_BLOCK && KID(2) == CO_BLOCK ? ""
                                                                                        : "bad if";
    case CO_FOR:
        return n.nk == 5 && is_target(prog, k, 0) && is_expr(KID(1)) &&
                       (is_expr(KID(2)) || KID(2) == CO_ABSENT) && KID(3) == CO_BLOCK &&
                       KID(4) == CO_BLOCK
                   ? ""
                   : "bad for";
    case CO_SET: return n.nk == 2 && is_target(prog, k, 1) && is_expr(KID(1)) ? "" : "bad set";
    case CO_SET_BLOCK:
        return n.nk == 2 && is_target(prog, k, 1) && KID(1) == CO_BLOCK ? "" : "bad set block";
    case CO_MACRO:
        if (n.nk < 1 || KID(n.nk - 1u) != CO_BLOCK)
            return "bad macro";
        for (uint32_t j = 0; j + 1 < n.nk; j++)
            if (KID(j) != CO_NAME && KID(j) != CO_KWARG)
                return "bad macro parameter";
        return "";
    case CO_FILTER_BLOCK:
    case CO_FILTER:
        if (n.nk < 1 || (n.op == CO_FILTER_BLOCK ? KID(0) != CO_BLOCK : !is_expr(KID(0))))
            return "bad filter";
        if ((n.sub & 0x7F) >= CF_END || (n.nk > 1 && !(n.sub & CF_CALLED)))
            return "bad filter";
        return check_args(prog, k, n.nk, "bad filter argument");
    case CO_LIST:
    case CO_TUPLE:
    case CO_DICT:
        if (n.op == CO_DICT && n.nk % 2)
            return "bad dict";
        for (uint32_t j = 0; j < n.nk; j++)
            if (!is_expr(KID(j)))
                return "bad item";
        return "";
    case CO_ATTR:
    case CO_KWARG: return n.nk == 1 && is_expr(KID(0)) ? "" : "bad attribute";
    case CO_INDEX: return n.nk == 2 && is_expr(KID(0)) && is_expr(KID(1)) ? "" : "bad subscript";
    case CO_SLICE:
        if (n.nk != 4 || !is_expr(KID(0)))
            return "bad slice";
        for (uint32_t j = 1; j < 4; j++)
            if (!is_expr(KID(j)) && KID(j) != CO_ABSENT)
                return "bad slice";
        return "";
    case CO_CALL:
        if (n.nk < 1 || !is_expr(KID(0)))
            return "bad call";
        return check_args(prog, k, n.nk, "bad call argument");
    case CO_BIN:
        return n.nk == 2 && n.sub < CB_END && is_expr(KID(0)) && is_expr(KID(1)) ? ""
                                                                                 : "bad operator";
    case CO_UNARY:
        return n.nk == 1 && n.sub < CU_END && is_expr(KID(0)) ? "" : "bad unary operator";
    case CO_TEST: return n.nk == 1 && (n.sub & 0x7F) < CT_END && is_expr(KID(0)) ? "" : "bad test";
    case CO_TERNARY:
        return n.nk == 3 && is_expr(KID(0)) && is_expr(KID(1)) && is_expr(KID(2)) ? ""
                                                                                  : "bad ternary";
    case CO_SELECT: return n.nk == 2 && is_expr(KID(0)) && is_expr(KID(1)) ? "" : "bad select";
    default: (void)i; return "unknown node kind";
    }
#undef KID
}

int nib_chat_check(const uint8_t *prog, size_t len, char *err, size_t errlen)
{
    if (!prog || len < NIB_CHAT_HEADER || memcmp(prog, NIB_CHAT_MAGIC, 4)) {
        snprintf(err, errlen, "chat program: bad header");
        return -1;
    }
    uint32_t version = nib_chat_rd32(prog + 4), n = nib_chat_rd32(prog + 8),
             pool = nib_chat_rd32(prog + 12);
    if (version != NIB_CHAT_VERSION) {
        snprintf(err, errlen, "chat program: version %u, this runtime reads %u", (unsigned)version,
                 NIB_CHAT_VERSION);
        return -1;
    }
    if (n == 0 || n > NIB_CHAT_MAX_NODES || pool > NIB_CHAT_MAX_POOL ||
        len != NIB_CHAT_HEADER + (size_t)n * NIB_CHAT_NODE + pool) {
        snprintf(err, errlen, "chat program: %u nodes and %u string bytes do not fill %zu bytes",
                 (unsigned)n, (unsigned)pool, len);
        return -1;
    }
    if (op_of(prog, 0) != CO_BLOCK) {
        snprintf(err, errlen, "chat program: the root is not a block");
        return -1;
    }
    uint64_t next = 1, layer_end = 1;
    uint32_t depth = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (i == layer_end) {
            layer_end = next;
            if (++depth > NIB_CHAT_MAX_DEPTH) {
                snprintf(err, errlen, "chat program: deeper than %u", NIB_CHAT_MAX_DEPTH);
                return -1;
            }
        }
        struct nib_chat_node d = nib_chat_node_at(prog, i);
        if (d.nk && (d.k0 != next || next + d.nk > n)) {
            snprintf(err, errlen, "chat program: node %u: kids out of order or range", (unsigned)i);
            return -1;
        }
        next += d.nk;
        if (d.op != CO_INT && d.op != CO_FLOAT && (d.a > pool || d.b > pool - d.a)) {
            snprintf(err, errlen, "chat program: node %u: string outside the pool", (unsigned)i);
            return -1;
        }
        const char *bad = check_kids(prog, i, d);
        if (*bad) {
            snprintf(err, errlen, "chat program: node %u: %s", (unsigned)i, bad);
            return -1;
        }
    }
    if (next != n) {
        snprintf(err, errlen, "chat program: %u nodes are no one's kids", (unsigned)(n - next));
        return -1;
    }
    return 0;
}
