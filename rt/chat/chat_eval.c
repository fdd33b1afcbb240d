/* The chat template evaluator: statements, expressions, scopes and calls,
 * each as @huggingface/jinja's Interpreter does it (runtime.ts), over a
 * program nib_chat_check accepted. Output goes straight to the caller's
 * buffer; text a construct must capture (a block set, a macro's result, a
 * string being built) is written above the output and taken back. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rt/chat/chat_internal.h"

enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE };

static struct val pool_str(const struct ctx *c, struct nib_chat_node n)
{
    return v_strn(c->pool + n.a, NULL, 0, n.b);
}

/* ---- scopes ---- */

static struct scope *new_scope(struct ctx *c, struct scope *parent)
{
    struct scope *s = chat_alloc(c, sizeof *s);
    s->parent = parent;
    return s;
}

static const struct val *lookup(struct scope *sc, const uint8_t *name, uint32_t len)
{
    for (; sc; sc = sc->parent)
        for (struct sent *e = sc->head; e; e = e->next)
            if (e->len == len && !memcmp(e->name, name, len))
                return &e->v;
    return NULL;
}

static void scope_set(struct ctx *c, struct scope *sc, const uint8_t *name, uint32_t len,
                      struct val v)
{
    for (struct sent *e = sc->head; e; e = e->next)
        if (e->len == len && !memcmp(e->name, name, len)) {
            e->v = v;
            return;
        }
    struct sent *e = chat_alloc(c, sizeof *e);
    e->name = name;
    e->len = len;
    e->v = v;
    e->next = sc->head;
    sc->head = e;
}

static void scope_set_lit(struct ctx *c, struct scope *sc, const char *name, struct val v)
{
    scope_set(c, sc, (const uint8_t *)name, (uint32_t)strlen(name), v);
}

/* ---- assignment ---- */

static void bind(struct ctx *c, struct scope *sc, uint32_t target, struct val v, int in_set)
{
    struct nib_chat_node t = chat_node(c, target);
    if (t.op == CO_NAME) {
        scope_set(c, sc, c->pool + t.a, t.b, v);
        return;
    }
    if (t.op == CO_ATTR) {
        struct val ns = chat_eval(c, t.k0, sc);
        if (ns.k != V_NS)
            chat_fail(c, "cannot assign attribute on non-namespace object");
        map_set(c, ns.u.m, pool_str(c, t), v);
        return;
    }
    /* a tuple of names */
    if (in_set ? !(v.k == V_ARRAY || v.k == V_TUPLE) : v.k != V_ARRAY)
        chat_fail(c,
                  in_set ? "Cannot unpack non-iterable type in set: %s"
                         : "Cannot unpack non-iterable type: %s",
                  chat_type_name(&v));
    if (v.n != t.nk)
        chat_fail(c, "Too %s items to unpack%s", t.nk > v.n ? "few" : "many",
                  in_set ? " in set" : "");
    for (uint32_t i = 0; i < t.nk; i++) {
        struct nib_chat_node k = chat_node(c, t.k0 + i);
        scope_set(c, sc, c->pool + k.a, k.b, v.u.a[i]);
    }
}

/* ---- statements ---- */

static int exec(struct ctx *c, uint32_t idx, struct scope *sc);

static void print(struct ctx *c, const struct val *v)
{
    if (v->k == V_NULL || v->k == V_UNDEF)
        return;
    if (v->k == V_FUNC)
        chat_fail(c, "cannot print a function");
    put_value(c, v, SM_PRINT);
}

static const char *const loop_keys[] = {"index", "index0", "revindex", "revindex0", "first",
                                        "last",  "length", "previtem", "nextitem"};

static int exec_for(struct ctx *c, struct nib_chat_node n, struct scope *sc)
{
    struct scope *fs = new_scope(c, sc);
    struct val it = chat_eval(c, n.k0 + 1, fs);
    if (it.k == V_OBJECT || it.k == V_KWARGS) {
        struct val keys = v_array(c, it.u.m->n, V_ARRAY);
        uint32_t i = 0;
        for (struct ment *e = it.u.m->head; e; e = e->next)
            keys.u.a[i++] = e->key;
        it = keys;
    }
    if (it.k != V_ARRAY && it.k != V_TUPLE)
        chat_fail(c, "Expected iterable or object type in for loop: got %s", chat_type_name(&it));
    struct val items = it;
    uint32_t target = n.k0, filter = n.k0 + 2;
    if (chat_node(c, filter).op != CO_ABSENT) {
        items = v_array(c, it.n, V_ARRAY);
        items.n = 0;
        for (uint32_t i = 0; i < it.n; i++) {
            struct scope *ls = new_scope(c, fs);
            bind(c, ls, target, it.u.a[i], 0);
            struct val t = chat_eval(c, filter, ls);
            if (truthy(&t))
                items.u.a[items.n++] = it.u.a[i];
        }
    } else if (chat_node(c, target).op == CO_TUPLE) {
        for (uint32_t i = 0; i < it.n; i++)
            if (it.u.a[i].k != V_ARRAY)
                chat_fail(c, "Cannot unpack non-iterable type: %s", chat_type_name(&it.u.a[i]));
    }
    /* one loop object per loop, updated in place each iteration */
    struct val loop = v_map(c, V_OBJECT);
    for (size_t k = 0; k < sizeof loop_keys / sizeof loop_keys[0]; k++)
        map_set(c, loop.u.m, v_lit(loop_keys[k]), v_undef());
    int none = 1;
    for (uint32_t i = 0; i < items.n; i++) {
        struct ment *e = loop.u.m->head;
        uint32_t len = items.n;
        e->v = v_num(V_INT, i + 1), e = e->next;
        e->v = v_num(V_INT, i), e = e->next;
        e->v = v_num(V_INT, len - i), e = e->next;
        e->v = v_num(V_INT, len - i - 1), e = e->next;
        e->v = v_bool(i == 0), e = e->next;
        e->v = v_bool(i == len - 1), e = e->next;
        e->v = v_num(V_INT, len), e = e->next;
        e->v = i > 0 ? items.u.a[i - 1] : v_undef(), e = e->next;
        e->v = i + 1 < len ? items.u.a[i + 1] : v_undef();
        scope_set_lit(c, fs, "loop", loop);
        bind(c, fs, target, items.u.a[i], 0);
        size_t mark = c->olen;
        int r = exec(c, n.k0 + 3, fs);
        if (r != FLOW_NEXT) {
            /* the iteration's text goes with it, as the exception drops it */
            c->olen = mark;
            if (r == FLOW_BREAK)
                break;
            continue;
        }
        none = 0;
    }
    if (none)
        return exec(c, n.k0 + 4, fs);
    return FLOW_NEXT;
}

static int exec(struct ctx *c, uint32_t idx, struct scope *sc)
{
    struct nib_chat_node n = chat_node(c, idx);
    chat_step(c, 1);
    chat_enter(c);
    int r = FLOW_NEXT;
    switch (n.op) {
    case CO_BLOCK:
        for (uint32_t i = 0; i < n.nk && r == FLOW_NEXT; i++)
            r = exec(c, n.k0 + i, sc);
        break;
    case CO_TEXT: sink_put(c, c->pool + n.a, NULL, 0, n.b); break;
    case CO_PRINT: {
        struct val v = chat_eval(c, n.k0, sc);
        print(c, &v);
        break;
    }
    case CO_IF: {
        struct val t = chat_eval(c, n.k0, sc);
        r = exec(c, n.k0 + (truthy(&t) ? 1 : 2), sc);
        break;
    }
    case CO_FOR: r = exec_for(c, n, sc); break;
    case CO_SET: {
        struct val v = chat_eval_hole(c, n.k0 + 1, sc);
        if (v.k == V_HOLE) /* a tuple target fails on it as on any non-list */
            v = chat_node(c, n.k0).op == CO_TUPLE ? v_null() : v_undef();
        bind(c, sc, n.k0, v, 1);
        break;
    }
    case CO_SET_BLOCK: {
        size_t mark = c->olen;
        r = exec(c, n.k0 + 1, sc);
        if (r != FLOW_NEXT) {
            c->olen = mark;
            break;
        }
        bind(c, sc, n.k0, sink_take(c, mark), 1);
        break;
    }
    case CO_MACRO: {
        struct val f = {.k = V_FUNC, .n = FN_MACRO};
        f.u.f.node = idx;
        scope_set(c, sc, c->pool + n.a, n.b, f);
        break;
    }
    case CO_BREAK: r = FLOW_BREAK; break;
    case CO_CONTINUE: r = FLOW_CONTINUE; break;
    case CO_FILTER_BLOCK: {
        size_t mark = c->olen;
        r = exec(c, n.k0, sc);
        if (r != FLOW_NEXT) {
            c->olen = mark;
            break;
        }
        struct val body = sink_take(c, mark);
        struct val v = chat_filter(c, body, n, n.k0 + 1, n.nk - 1u, sc);
        print(c, &v);
        break;
    }
    default: chat_fail(c, "chat program: statement %u is not one", (unsigned)idx);
    }
    chat_leave(c);
    return r;
}

/* ---- member access (evaluateMemberExpression) ---- */

static double to_index(double d)
{
    return isnan(d) ? 0 : trunc(d);
}

static struct val string_at(const struct val *s, double want)
{
    static const uint8_t replacement[] = {0xEF, 0xBF, 0xBD};
    double len = u16_len(s);
    double i = to_index(want);
    if (i < 0)
        i += len;
    if (i < 0 || i >= len)
        return v_undef();
    double u = 0;
    for (uint32_t p = 0; p < s->n;) {
        uint32_t cp, k = u8_next(s->u.s.p, s->n, p, &cp);
        double w = cp >= 0x10000 ? 2 : 1;
        if (i < u + w) {
            if (w == 2) /* half of a surrogate pair: node prints it as U+FFFD */
                return v_strn(replacement, NULL, str_taint(s, p), 3);
            return str_slice(s, p, p + k);
        }
        u += w;
        p += k;
    }
    return v_undef();
}

static struct val member(struct ctx *c, const struct val *obj, const struct val *prop)
{
    switch (obj->k) {
    case V_OBJECT:
    case V_KWARGS:
    case V_NS: {
        if (prop->k != V_STR)
            chat_fail(c, "Cannot access property with non-string: got %s", chat_type_name(prop));
        const struct val *v = map_get(obj->u.m, prop->u.s.p, prop->n);
        if (v)
            return *v;
        return obj->k == V_NS ? v_undef() : chat_builtin_member(c, obj, prop);
    }
    case V_ARRAY:
    case V_TUPLE:
    case V_STR:
        if (prop->k == V_INT) {
            if (obj->k == V_STR)
                return string_at(obj, prop->u.num);
            double i = to_index(prop->u.num);
            if (i < 0)
                i += obj->n;
            return i >= 0 && i < obj->n ? obj->u.a[(uint32_t)i] : v_undef();
        }
        if (prop->k == V_STR)
            return chat_builtin_member(c, obj, prop);
        chat_fail(c, "Cannot access property with non-string/non-number: got %s",
                  chat_type_name(prop));
    default:
        if (prop->k != V_STR)
            chat_fail(c, "Cannot access property with non-string: got %s", chat_type_name(prop));
        return v_undef();
    }
}

/* ---- slices (utils.ts slice()) ---- */

static double js_min(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
}
static double js_max(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
}

static void slice_bounds(double len, const struct val *s0, const struct val *s1, double step,
                         double *start, double *stop)
{
    double a, b;
    if (step >= 0 || isnan(step)) {
        a = s0->k == V_UNDEF ? 0 : s0->u.num;
        b = s1->k == V_UNDEF ? len : s1->u.num;
        a = a < 0 ? js_max(len + a, 0) : js_min(a, len);
        b = b < 0 ? js_max(len + b, 0) : js_min(b, len);
    } else {
        a = s0->k == V_UNDEF ? len - 1 : s0->u.num;
        b = s1->k == V_UNDEF ? -1 : s1->u.num;
        a = a < 0 ? js_max(len + a, -1) : js_min(a, len - 1);
        b = b < -1 ? js_max(len + b, -1) : js_min(b, len - 1);
    }
    *start = a;
    *stop = b;
}

static struct val eval_slice(struct ctx *c, struct nib_chat_node n, struct scope *sc)
{
    struct val obj = chat_eval(c, n.k0, sc);
    if (obj.k != V_ARRAY && obj.k != V_TUPLE && obj.k != V_STR)
        chat_fail(c, "Slice object must be an array or string");
    struct val b[3];
    static const char *const what[] = {"start", "stop", "step"};
    for (int i = 0; i < 3; i++) {
        b[i] = chat_node(c, n.k0 + 1 + (uint32_t)i).op == CO_ABSENT
                   ? v_undef()
                   : chat_eval(c, n.k0 + 1 + (uint32_t)i, sc);
        if (b[i].k != V_INT && b[i].k != V_UNDEF)
            chat_fail(c, "Slice %s must be numeric or undefined", what[i]);
    }
    double step = b[2].k == V_UNDEF ? 1 : b[2].u.num;
    double dir = step > 0 ? 1 : step < 0 ? -1 : isnan(step) ? NAN : 0;
    uint32_t len = obj.n, *offs = NULL;
    if (obj.k == V_STR) {
        /* character offsets: slices count code points (Array.from) */
        uint32_t nch = 0, cp;
        for (uint32_t p = 0; p < obj.n; p += u8_next(obj.u.s.p, obj.n, p, &cp))
            nch++;
        offs = chat_alloc(c, (nch + 1) * sizeof *offs);
        nch = 0;
        for (uint32_t p = 0; p < obj.n; p += u8_next(obj.u.s.p, obj.n, p, &cp))
            offs[nch++] = p;
        offs[nch] = obj.n;
        len = nch;
        chat_step(c, nch >> 4);
    }
    double start, stop;
    slice_bounds(len, &b[0], &b[1], step, &start, &stop);
    uint32_t count = 0;
    if (dir != 0 && !isnan(dir))
        for (double i = start; dir * i < dir * stop; i += step)
            count++;
    chat_step(c, count >> 4);
    if (obj.k != V_STR) {
        struct val r = v_array(c, count, V_ARRAY);
        uint32_t k = 0;
        for (double i = start; k < count; i += step)
            r.u.a[k++] = obj.u.a[(uint32_t)i];
        return r;
    }
    if (count == 0)
        return v_lit("");
    if (step == 1)
        return str_slice(&obj, offs[(uint32_t)start], offs[(uint32_t)start + count]);
    size_t mark = c->olen;
    uint32_t k = 0;
    for (double i = start; k < count; i += step, k++) {
        uint32_t p = offs[(uint32_t)i], q = offs[(uint32_t)i + 1];
        sink_put(c, obj.u.s.p + p, obj.u.s.t ? obj.u.s.t + p : NULL, obj.tu, q - p);
    }
    return sink_take(c, mark);
}

/* ---- binary operators (evaluateBinaryExpression, in its order) ---- */

static int is_num(const struct val *v)
{
    return v->k == V_INT || v->k == V_FLOAT;
}
static int is_numlike(const struct val *v)
{
    return is_num(v) || v->k == V_BOOL;
}
static int is_arr(const struct val *v)
{
    return v->k == V_ARRAY || v->k == V_TUPLE;
}

static const char *const bin_names[CB_END] = {"+",  "-",  "*",  "/",      "//",  "%",
                                              "**", "~",  "==", "!=",     "<",   ">",
                                              "<=", ">=", "in", "not in", "and", "or"};

static struct val concat(struct ctx *c, const struct val *l, const struct val *r)
{
    size_t mark = c->olen;
    put_value(c, l, SM_JS);
    put_value(c, r, SM_JS);
    return sink_take(c, mark);
}

static int str_contains(const struct val *hay, const struct val *needle)
{
    if (needle->n == 0)
        return 1;
    for (uint32_t i = 0; i + needle->n <= hay->n; i++)
        if (!memcmp(hay->u.s.p + i, needle->u.s.p, needle->n))
            return 1;
    return 0;
}

static struct val binop(struct ctx *c, int op, uint32_t right, struct val l, struct scope *sc)
{
    if (op == CB_AND)
        return truthy(&l) ? chat_eval(c, right, sc) : l;
    if (op == CB_OR)
        return truthy(&l) ? l : chat_eval(c, right, sc);
    struct val r = chat_eval(c, right, sc);
    if (op == CB_EQ || op == CB_NE)
        return v_bool(loose_eq(c, &l, &r) == (op == CB_EQ));
    if (l.k == V_UNDEF || r.k == V_UNDEF) {
        if (r.k == V_UNDEF && (op == CB_IN || op == CB_NOTIN))
            return v_bool(op == CB_NOTIN);
        chat_fail(c, "Cannot perform operation %s on undefined values", bin_names[op]);
    }
    if (l.k == V_NULL || r.k == V_NULL)
        chat_fail(c, "Cannot perform operation on null values");
    if (op == CB_CONCAT)
        return concat(c, &l, &r);
    if (op == CB_POW && is_numlike(&l) && is_numlike(&r)) {
        double a = l.u.num, b = r.u.num;
        if (a == 0 && b < 0)
            chat_fail(c, "0.0 cannot be raised to a negative power");
        /* Only exact powers: JavaScript's ** rounds inexact ones its own way
         * (V8's fdlibm pow), which libm need not match to the last bit. */
        double res = 1;
        if (b != floor(b) || b < 0 || b > 1024)
            chat_fail(c, "x ** y with a negative or fractional y is not supported by nibble");
        for (double k = 0; k < b && isfinite(res); k++)
            res *= a;
        if (!isfinite(res))
            chat_fail(c, "Exponentiation result is not a finite real number");
        if (fabs(res) > 9007199254740992.0 || res != floor(res))
            chat_fail(c, "x ** y beyond exact doubles is not supported by nibble");
        return v_num(l.k == V_FLOAT || r.k == V_FLOAT || b < 0 ? V_FLOAT : V_INT, res);
    }
    if (is_num(&l) && is_num(&r)) {
        double a = l.u.num, b = r.u.num;
        int kind = l.k == V_FLOAT || r.k == V_FLOAT ? V_FLOAT : V_INT;
        switch (op) {
        case CB_ADD: return v_num(kind, a + b);
        case CB_SUB: return v_num(kind, a - b);
        case CB_MUL: return v_num(kind, a * b);
        case CB_DIV: return v_num(V_FLOAT, a / b);
        case CB_FLOORDIV: return v_num(kind, floor(a / b));
        case CB_MOD: return v_num(kind, fmod(a, b));
        case CB_LT: return v_bool(a < b);
        case CB_GT: return v_bool(a > b);
        case CB_LE: return v_bool(a <= b);
        case CB_GE: return v_bool(a >= b);
        }
    } else if (is_arr(&l) && is_arr(&r)) {
        if (op == CB_ADD) {
            struct val a = v_array(c, l.n + r.n, V_ARRAY);
            if (l.n)
                memcpy(a.u.a, l.u.a, l.n * sizeof *a.u.a);
            if (r.n)
                memcpy(a.u.a + l.n, r.u.a, r.n * sizeof *a.u.a);
            return a;
        }
    } else if (is_arr(&r)) {
        if (op == CB_IN || op == CB_NOTIN) {
            int found = 0;
            for (uint32_t i = 0; i < r.n && !found; i++)
                found = strict_eq(&r.u.a[i], &l);
            chat_step(c, r.n >> 4);
            return v_bool(found == (op == CB_IN));
        }
    }
    if ((l.k == V_STR || r.k == V_STR) && op == CB_ADD)
        return concat(c, &l, &r);
    if (l.k == V_STR && r.k == V_STR && (op == CB_IN || op == CB_NOTIN)) {
        chat_step(c, r.n >> 6);
        return v_bool(str_contains(&r, &l) == (op == CB_IN));
    }
    if (l.k == V_STR && (r.k == V_OBJECT || r.k == V_KWARGS) && (op == CB_IN || op == CB_NOTIN))
        return v_bool((map_get(r.u.m, l.u.s.p, l.n) != NULL) == (op == CB_IN));
    chat_fail(c, "Unknown operator \"%s\" between %s and %s", bin_names[op], chat_type_name(&l),
              chat_type_name(&r));
}

/* ---- calls ---- */

static struct val eval_call(struct ctx *c, struct nib_chat_node n, struct scope *sc)
{
    uint32_t npos = 0, nkw = 0;
    for (uint32_t i = 1; i < n.nk; i++) {
        if (chat_node(c, n.k0 + i).op == CO_KWARG)
            nkw++;
        else
            npos++;
    }
    struct args a = {chat_alloc(c, (npos + 1) * sizeof(struct val)), 0};
    for (uint32_t i = 1; i < n.nk; i++)
        if (chat_node(c, n.k0 + i).op != CO_KWARG)
            a.v[a.n++] = chat_eval_hole(c, n.k0 + i, sc);
    if (nkw) {
        struct val kw = v_map(c, V_KWARGS);
        for (uint32_t i = 1; i < n.nk; i++) {
            struct nib_chat_node k = chat_node(c, n.k0 + i);
            if (k.op != CO_KWARG)
                continue;
            struct val key = pool_str(c, k);
            if (map_get(kw.u.m, key.u.s.p, key.n))
                chat_fail(c, "Got multiple values for keyword argument '%.*s'", (int)key.n,
                          (const char *)key.u.s.p);
            map_set(c, kw.u.m, key, chat_eval_hole(c, k.k0, sc));
        }
        a.v[a.n++] = kw;
    }
    struct val fn = chat_eval(c, n.k0, sc);
    if (fn.k != V_FUNC)
        chat_fail(c, "Cannot call something that is not a function: got %s", chat_type_name(&fn));
    /* JavaScript's undefined as an argument: a macro or namespace() takes
     * it as undefined; any other function fails on it */
    for (uint32_t i = 0; i < a.n; i++) {
        struct val *v = &a.v[i];
        int holes_ok = fn.n == FN_MACRO || (fn.n == FN_NAMESPACE && v->k == V_KWARGS);
        if (v->k == V_KWARGS)
            for (struct ment *e = v->u.m->head; e; e = e->next)
                if (e->v.k == V_HOLE) {
                    if (!holes_ok)
                        chat_fail(c, "Cannot read properties of undefined");
                    e->v = v_undef();
                }
        if (v->k == V_HOLE) {
            if (!holes_ok)
                chat_fail(c, "Cannot read properties of undefined");
            *v = v_undef();
        }
    }
    return chat_call(c, &fn, &a, sc);
}

/* bindMacroArguments, then the body's text. Macros see the caller's
 * variables (the scope they are called from), as in runtime.ts. */
static struct val call_macro(struct ctx *c, uint32_t node, struct args *a, struct scope *sc)
{
    struct nib_chat_node m = chat_node(c, node);
    uint32_t nparams = m.nk - 1u;
    struct scope *ms = new_scope(c, sc);
    uint32_t npos = a->n;
    const struct map *kw = NULL;
    if (npos && a->v[npos - 1].k == V_KWARGS)
        kw = a->v[--npos].u.m;
    if (kw)
        for (const struct ment *e = kw->head; e; e = e->next) {
            int taken = 0;
            for (uint32_t i = npos; i < nparams && !taken; i++) {
                struct nib_chat_node p = chat_node(c, m.k0 + i);
                taken = p.b == e->key.n && !memcmp(c->pool + p.a, e->key.u.s.p, p.b);
            }
            if (!taken)
                chat_fail(c, "macro '%.*s' takes no keyword argument '%.*s'", (int)m.b,
                          (const char *)c->pool + m.a, (int)e->key.n, (const char *)e->key.u.s.p);
        }
    if (npos > nparams)
        chat_fail(c, "macro '%.*s' takes not more than %u argument(s)", (int)m.b,
                  (const char *)c->pool + m.a, (unsigned)nparams);
    for (uint32_t i = 0; i < nparams; i++) {
        struct nib_chat_node p = chat_node(c, m.k0 + i);
        const struct val *v = i < npos ? &a->v[i] : kw ? map_get(kw, c->pool + p.a, p.b) : NULL;
        scope_set(c, ms, c->pool + p.a, p.b, v ? *v : v_undef());
    }
    for (uint32_t i = npos; i < nparams; i++) {
        struct nib_chat_node p = chat_node(c, m.k0 + i);
        if (p.op == CO_KWARG && !(kw && map_get(kw, c->pool + p.a, p.b)))
            scope_set(c, ms, c->pool + p.a, p.b, chat_eval(c, p.k0, ms));
    }
    size_t mark = c->olen;
    if (exec(c, m.k0 + nparams, ms) != FLOW_NEXT)
        chat_fail(c, "break or continue outside a loop");
    return sink_take(c, mark);
}

static struct val fn_range(struct ctx *c, struct args *a)
{
    double v[3] = {0, 0, 1};
    if (a->n < 1 || a->n > 3)
        chat_fail(c, "range() takes 1 to 3 arguments");
    for (uint32_t i = 0; i < a->n; i++) {
        if (!is_numlike(&a->v[i]))
            chat_fail(c, "range() arguments must be numbers");
        v[i] = a->v[i].u.num;
    }
    double start = a->n == 1 ? 0 : v[0], stop = a->n == 1 ? v[0] : v[1], step = v[2];
    if (step == 0)
        chat_fail(c, "range() step must not be zero");
    uint32_t n = 0;
    for (double i = start; step > 0 ? i < stop : i > stop; i += step)
        if (++n > 100000)
            chat_fail(c, "range() of more than 100000 numbers");
    chat_step(c, n >> 4);
    struct val r = v_array(c, n, V_ARRAY);
    double x = start;
    for (uint32_t k = 0; k < n; k++, x += step)
        r.u.a[k] = v_num(x == floor(x) ? V_INT : V_FLOAT, x);
    return r;
}

static struct val fn_namespace(struct ctx *c, struct args *a)
{
    uint32_t npos = a->n;
    const struct map *kw = NULL;
    if (npos && a->v[npos - 1].k == V_KWARGS)
        kw = a->v[--npos].u.m;
    if (npos > 1)
        chat_fail(c, "namespace expected at most 1 argument, got %u", (unsigned)npos);
    struct val ns = v_map(c, V_NS);
    if (npos == 1) {
        const struct val *src = &a->v[0];
        if (src->k == V_OBJECT || src->k == V_KWARGS) {
            for (const struct ment *e = src->u.m->head; e; e = e->next)
                map_set(c, ns.u.m, e->key, e->v);
        } else if (is_arr(src)) {
            for (uint32_t i = 0; i < src->n; i++) {
                const struct val *p = &src->u.a[i];
                if (!is_arr(p) || p->n != 2)
                    chat_fail(c,
                              "namespace expected an object or an iterable of [key, value] pairs");
                if (p->u.a[0].k != V_STR)
                    chat_fail(c, "namespace keys must be strings");
                map_set(c, ns.u.m, p->u.a[0], p->u.a[1]);
            }
        } else {
            chat_fail(c, "'%s' object is not iterable", chat_type_name(src));
        }
    }
    if (kw)
        for (const struct ment *e = kw->head; e; e = e->next)
            map_set(c, ns.u.m, e->key, e->v);
    return ns;
}

struct val chat_call(struct ctx *c, const struct val *fn, struct args *a, struct scope *sc)
{
    chat_step(c, 1);
    switch (fn->n) {
    case FN_MACRO: return call_macro(c, fn->u.f.node, a, sc);
    case FN_RAISE: {
        /* new Error(value): the template's own message, verbatim */
        struct val m = a->n ? a->v[0] : v_undef();
        if (m.k == V_UNDEF)
            m = v_lit("");
        m = value_string(c, &m, SM_JS);
        if (c->errlen) {
            size_t n = m.n < c->errlen - 1 ? m.n : c->errlen - 1;
            memcpy(c->err, m.u.s.p, n);
            c->err[n] = 0;
        }
        longjmp(c->jb, 1);
    }
    case FN_RANGE: return fn_range(c, a);
    case FN_STRFTIME: return chat_strftime(c, a->n ? &a->v[0] : NULL);
    case FN_NAMESPACE: return fn_namespace(c, a);
    default: return chat_method(c, fn, a);
    }
}

/* ---- expressions ---- */

static struct val eval_expr(struct ctx *c, uint32_t idx, struct nib_chat_node n, struct scope *sc)
{
    switch (n.op) {
    case CO_STR: return pool_str(c, n);
    case CO_INT: return v_num(V_INT, nib_chat_num(n));
    case CO_FLOAT: return v_num(V_FLOAT, nib_chat_num(n));
    case CO_NAME: {
        const struct val *v = lookup(sc, c->pool + n.a, n.b);
        return v ? *v : v_undef();
    }
    case CO_LIST:
    case CO_TUPLE: {
        struct val a = v_array(c, n.nk, n.op == CO_LIST ? V_ARRAY : V_TUPLE);
        for (uint32_t i = 0; i < n.nk; i++)
            a.u.a[i] = chat_eval(c, n.k0 + i, sc);
        return a;
    }
    case CO_DICT: {
        struct val d = v_map(c, V_OBJECT);
        for (uint32_t i = 0; i + 1 < n.nk; i += 2) {
            struct val k = chat_eval(c, n.k0 + i, sc);
            if (k.k != V_STR)
                chat_fail(c, "Object keys must be strings: got %s", chat_type_name(&k));
            map_set(c, d.u.m, k, chat_eval(c, n.k0 + i + 1, sc));
        }
        return d;
    }
    case CO_ATTR: {
        struct val o = chat_eval(c, n.k0, sc), p = pool_str(c, n);
        return member(c, &o, &p);
    }
    case CO_INDEX: {
        struct val o = chat_eval(c, n.k0, sc), p = chat_eval(c, n.k0 + 1, sc);
        return member(c, &o, &p);
    }
    case CO_SLICE: return eval_slice(c, n, sc);
    case CO_CALL: return eval_call(c, n, sc);
    case CO_BIN: return binop(c, n.sub, n.k0 + 1, chat_eval(c, n.k0, sc), sc);
    case CO_UNARY: {
        struct val v = chat_eval(c, n.k0, sc);
        if (n.sub == CU_NOT)
            return v_bool(!truthy(&v));
        if (!is_numlike(&v))
            chat_fail(c, "Unknown operator \"%s\" for %s", n.sub == CU_NEG ? "-" : "+",
                      chat_type_name(&v));
        double x = n.sub == CU_NEG ? -1 * v.u.num : v.u.num;
        return v_num(v.k == V_FLOAT ? V_FLOAT : V_INT, x);
    }
    case CO_FILTER: return chat_filter(c, chat_eval(c, n.k0, sc), n, n.k0 + 1, n.nk - 1u, sc);
    case CO_TEST: {
        struct val v = chat_eval(c, n.k0, sc);
        int r = chat_test(c, n.sub & 0x7F, &n, &v, NULL);
        return v_bool((n.sub & CT_NEGATED) ? !r : r);
    }
    case CO_TERNARY: {
        struct val t = chat_eval(c, n.k0, sc);
        return chat_eval(c, n.k0 + (truthy(&t) ? 1 : 2), sc);
    }
    case CO_SELECT: {
        struct val t = chat_eval(c, n.k0 + 1, sc);
        return truthy(&t) ? chat_eval(c, n.k0, sc) : v_undef();
    }
    case CO_ABSENT: return v_undef();
    default: chat_fail(c, "chat program: node %u is not an expression", (unsigned)idx);
    }
}

struct val chat_eval_hole(struct ctx *c, uint32_t idx, struct scope *sc)
{
    struct nib_chat_node n = chat_node(c, idx);
    chat_step(c, 1);
    chat_enter(c);
    struct val v;
    if (n.op == CO_TERNARY) {
        struct val t = chat_eval(c, n.k0, sc);
        v = chat_eval_hole(c, n.k0 + (truthy(&t) ? 1 : 2), sc);
    } else if (n.op == CO_SELECT) {
        struct val t = chat_eval(c, n.k0 + 1, sc);
        v = truthy(&t) ? chat_eval_hole(c, n.k0, sc) : v_undef();
    } else if (n.op == CO_BIN && (n.sub == CB_AND || n.sub == CB_OR)) {
        struct val l = chat_eval(c, n.k0, sc);
        v = truthy(&l) == (n.sub == CB_AND) ? chat_eval_hole(c, n.k0 + 1, sc) : l;
    } else {
        v = eval_expr(c, idx, n, sc);
    }
    chat_leave(c);
    return v;
}

struct val chat_eval(struct ctx *c, uint32_t idx, struct scope *sc)
{
    struct val v = chat_eval_hole(c, idx, sc);
    if (v.k == V_HOLE)
        chat_fail(c, "Cannot read properties of undefined (first or last of an empty list)");
    return v;
}

/* ---- entry ---- */

size_t nib_chat_scratch_footprint(size_t in_bytes, size_t out_cap)
{
    return ((size_t)1 << 20) + 32 * in_bytes + 2 * out_cap;
}

int nib_chat_render(const uint8_t *prog, size_t len, const struct nib_chat_args *a, void *scratch,
                    size_t scratch_size, uint8_t *out, uint8_t *taint, size_t cap, size_t *out_len,
                    char *err, size_t errlen)
{
    *out_len = 0;
    if (nib_chat_check(prog, len, err, errlen) != 0)
        return -1;
    struct ctx ctx, *c = &ctx;
    memset(c, 0, sizeof *c);
    c->prog = prog;
    c->n_nodes = nib_chat_rd32(prog + 8);
    c->pool = prog + NIB_CHAT_HEADER + (size_t)c->n_nodes * NIB_CHAT_NODE;
    uintptr_t base = ((uintptr_t)scratch + 7) & ~(uintptr_t)7;
    size_t skip = base - (uintptr_t)scratch;
    c->arena = (uint8_t *)base;
    c->cap = scratch_size > skip ? scratch_size - skip : 0;
    c->out = out;
    c->ocap = cap;
    c->err = err;
    c->errlen = errlen;
    c->now_s = a->now_s;
    if (errlen)
        err[0] = 0;
    uint64_t in_bytes = 0;
    for (uint32_t i = 0; i < a->n_messages; i++)
        in_bytes += (uint64_t)a->messages[i].role_len + a->messages[i].content_len;
    /* work bound: the template's size times the conversation's */
    c->max_steps = ((uint64_t)1 << 20) + (uint64_t)c->n_nodes * 64 * ((uint64_t)a->n_messages + 2) +
                   in_bytes + cap;
    if (setjmp(c->jb)) {
        if (errlen && !err[0])
            snprintf(err, errlen, "chat template failed");
        return -1;
    }
    c->taint = taint ? taint : chat_alloc(c, cap);

    struct scope *g = new_scope(c, NULL);
    static const struct {
        const char *name;
        int fn;
    } fns[] = {{"raise_exception", FN_RAISE},
               {"range", FN_RANGE},
               {"strftime_now", FN_STRFTIME},
               {"namespace", FN_NAMESPACE}};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        scope_set_lit(c, g, fns[i].name, (struct val){.k = V_FUNC, .n = (uint32_t)fns[i].fn});
    scope_set_lit(c, g, "false", v_bool(0));
    scope_set_lit(c, g, "true", v_bool(1));
    scope_set_lit(c, g, "none", v_null());
    scope_set_lit(c, g, "False", v_bool(0));
    scope_set_lit(c, g, "True", v_bool(1));
    scope_set_lit(c, g, "None", v_null());
    struct val msgs = v_array(c, a->n_messages, V_ARRAY);
    for (uint32_t i = 0; i < a->n_messages; i++) {
        const struct nib_chat_message *m = &a->messages[i];
        struct val o = v_map(c, V_OBJECT);
        map_set(c, o.u.m, v_lit("role"), v_strn(m->role, NULL, 1, m->role_len));
        map_set(c, o.u.m, v_lit("content"), v_strn(m->content, NULL, 1, m->content_len));
        msgs.u.a[i] = o;
    }
    scope_set_lit(c, g, "messages", msgs);
    scope_set_lit(c, g, "add_generation_prompt", v_bool(a->add_generation_prompt));
    if (a->bos_token)
        scope_set_lit(c, g, "bos_token", v_strn(a->bos_token, NULL, 0, a->bos_len));
    if (a->eos_token)
        scope_set_lit(c, g, "eos_token", v_strn(a->eos_token, NULL, 0, a->eos_len));

    if (exec(c, 0, g) != FLOW_NEXT)
        chat_fail(c, "break or continue outside a loop");
    *out_len = c->olen;
    return 0;
}
