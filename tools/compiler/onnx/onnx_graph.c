/* The graph passes between loading and running: topological order with
 * cycle detection, --input fixes, static shape resolution with constant
 * folding (every node whose inputs are all constant is run once, here,
 * by the reference executor), and the use counts the later passes need. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/compiler/onnx/onnx_infer.h"
#include "tools/compiler/onnx/onnx_ir.h"

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)

int nx_parse_input_fix(const char *arg, struct nx_input_fix *fix, char *err, size_t errlen)
{
    const char *eq = strrchr(arg, '=');
    if (!eq || eq == arg)
        FAIL("--input '%s': expected NAME=DIMS, e.g. x=1x3x48x192", arg);
    fix->name = arg; /* compared up to '=' by nx_resolve */
    fix->rank = 0;
    const char *p = eq + 1;
    while (*p) {
        if (fix->rank == NX_MAX_RANK)
            FAIL("--input '%s': more than %d dims", arg, NX_MAX_RANK);
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || v > NX_MAX_DIM || (*end && *end != 'x'))
            FAIL("--input '%s': each dim must be a number in 1..%lld, separated by 'x'", arg,
                 (long long)NX_MAX_DIM);
        fix->dims[fix->rank++] = v;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            FAIL("--input '%s': trailing 'x'", arg);
    }
    if (!fix->rank)
        FAIL("--input '%s': no dims", arg);
    return 0;
}

int nx_topo_sort(struct nx_graph *g, char *err, size_t errlen)
{
    uint32_t n = g->n_n;
    uint32_t *pending = calloc(n + 1, sizeof *pending); /* unmet producers per node */
    uint32_t *queue = calloc(n + 1, sizeof *queue);
    free(g->order);
    g->order = calloc(n + 1, sizeof *g->order);
    if (!pending || !queue || !g->order) {
        free(pending);
        free(queue);
        FAIL("out of memory");
    }
    /* consumers of each tensor, as a CSR list */
    uint32_t *start = calloc(g->n_t + 1, sizeof *start);
    uint64_t total = 0;
    for (uint32_t k = 0; k < n; k++)
        total += g->n[k].n_in;
    uint32_t *cons = calloc(total + 1, sizeof *cons), *fill = calloc(g->n_t + 1, sizeof *fill);
    if (!start || !cons || !fill) {
        free(pending), free(queue), free(start), free(cons), free(fill);
        FAIL("out of memory");
    }
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 0; i < g->n[k].n_in; i++)
            if (g->n[k].in[i] >= 0)
                start[g->n[k].in[i] + 1]++;
    for (uint32_t t = 0; t < g->n_t; t++)
        start[t + 1] += start[t];
    for (uint32_t k = 0; k < n; k++)
        for (uint32_t i = 0; i < g->n[k].n_in; i++) {
            int32_t t = g->n[k].in[i];
            if (t < 0)
                continue;
            cons[start[t] + fill[t]++] = k;
            if (g->t[t].producer >= 0)
                pending[k]++;
        }
    uint32_t head = 0, tail = 0;
    for (uint32_t k = 0; k < n; k++)
        if (!pending[k])
            queue[tail++] = k;
    g->n_order = 0;
    while (head < tail) {
        uint32_t k = queue[head++];
        g->order[g->n_order++] = k;
        for (uint32_t o = 0; o < g->n[k].n_out; o++) {
            int32_t t = g->n[k].out[o];
            if (t < 0)
                continue;
            for (uint32_t c = start[t]; c < start[t + 1]; c++)
                if (--pending[cons[c]] == 0)
                    queue[tail++] = cons[c];
        }
    }
    int rc = 0;
    if (g->n_order != n) {
        uint32_t k = 0;
        while (k < n && !pending[k])
            k++;
        snprintf(err, errlen, "graph: a cycle through node '%s' (%s)", g->n[k].name,
                 g->n[k].op_type);
        rc = -1;
    }
    free(pending), free(queue), free(start), free(cons), free(fill);
    return rc;
}

void nx_count_uses(struct nx_graph *g)
{
    for (uint32_t t = 0; t < g->n_t; t++)
        g->t[t].n_uses = g->t[t].is_output ? 1 : 0;
    for (uint32_t k = 0; k < g->n_order; k++) {
        const struct nx_node *nd = &g->n[g->order[k]];
        for (uint32_t i = 0; i < nd->n_in; i++)
            if (nd->in[i] >= 0)
                g->t[nd->in[i]].n_uses++;
    }
}

/* The order without dead nodes, and without nodes none of whose outputs
 * is used (dead code): one pass from the end, since every consumer comes
 * after its producer. */
void nx_compact(struct nx_graph *g)
{
    for (uint32_t t = 0; t < g->n_t; t++) /* graph outputs are always live */
        g->t[t].n_uses = g->t[t].is_output ? 1 : 0;
    for (uint32_t k = g->n_order; k-- > 0;) {
        struct nx_node *nd = &g->n[g->order[k]];
        int used = 0;
        for (uint32_t o = 0; o < nd->n_out; o++)
            used |= nd->out[o] >= 0 && g->t[nd->out[o]].n_uses > 0;
        if (!used)
            nd->op = NX_OP_DEAD;
        if (nd->op == NX_OP_DEAD)
            continue;
        for (uint32_t i = 0; i < nd->n_in; i++)
            if (nd->in[i] >= 0)
                g->t[nd->in[i]].n_uses++;
    }
    uint32_t w = 0;
    for (uint32_t k = 0; k < g->n_order; k++)
        if (g->n[g->order[k]].op != NX_OP_DEAD)
            g->order[w++] = g->order[k];
    g->n_order = w;
    nx_count_uses(g);
}

static int fix_inputs(struct nx_graph *g, const struct nx_input_fix *fix, uint32_t n_fix, char *err,
                      size_t errlen)
{
    for (uint32_t f = 0; f < n_fix; f++) {
        size_t len = (size_t)(strrchr(fix[f].name, '=') - fix[f].name);
        uint32_t k;
        for (k = 0; k < g->n_inputs; k++) {
            const char *nm = g->t[g->inputs[k]].name;
            if (strlen(nm) == len && !strncmp(nm, fix[f].name, len))
                break;
        }
        if (k == g->n_inputs)
            FAIL("--input %.*s: the model has no input of that name", (int)len, fix[f].name);
        struct nx_tensor *t = &g->t[g->inputs[k]];
        if (t->rank && t->rank != fix[f].rank)
            FAIL("--input %s: the model declares rank %u for '%s'", fix[f].name, t->rank, t->name);
        for (uint32_t d = 0; d < t->rank; d++)
            if (t->dims[d] && t->dims[d] != fix[f].dims[d])
                FAIL("--input %s: dim %u of '%s' is fixed at %lld by the model", fix[f].name, d,
                     t->name, (long long)t->dims[d]);
        t->rank = fix[f].rank;
        memcpy(t->dims, fix[f].dims, sizeof t->dims);
        t->shape_known = 1;
    }
    for (uint32_t k = 0; k < g->n_inputs; k++) {
        const struct nx_tensor *t = &g->t[g->inputs[k]];
        if (!t->shape_known)
            FAIL("input '%s' has dynamic dims: give them with --input %s=DIMS (e.g. 1x3x224x224)",
                 t->name, t->name);
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->rank; d++) {
            n *= (uint64_t)t->dims[d];
            if (n > NX_MAX_ELEMS)
                FAIL("input '%s': more than %llu elements", t->name,
                     (unsigned long long)NX_MAX_ELEMS);
        }
    }
    return 0;
}

/* About how many multiply-adds running nd takes: a bound on the work
 * constant folding may do for a hostile model (a node over it stays in
 * the graph and runs with the rest). */
static double fold_cost(const struct nx_graph *g, const struct nx_node *nd)
{
    const struct nx_tensor *y = &g->t[nd->out[0]];
    double n = (double)nx_elems(y);
    if (nd->op == NX_OP_CONV || nd->op == NX_OP_CONV_T) {
        const struct nx_tensor *w = &g->t[nd->in[1]];
        return n * (double)nx_elems(w) / (double)(w->dims[0] ? w->dims[0] : 1) + n;
    }
    if (nd->op == NX_OP_MATMUL || nd->op == NX_OP_GEMM) {
        const struct nx_tensor *a = &g->t[nd->in[0]];
        return n * (double)a->dims[a->rank - 1] + n;
    }
    if (nd->op == NX_OP_MAXPOOL || nd->op == NX_OP_AVGPOOL)
        return n * (double)(nd->a.kernel[0] * nd->a.kernel[1]);
    double in = 0; /* reductions read all of their input */
    for (uint32_t i = 0; i < nd->n_in; i++)
        if (nd->in[i] >= 0)
            in += (double)nx_elems(&g->t[nd->in[i]]);
    return n + in;
}

int nx_resolve(struct nx_graph *g, const struct nx_input_fix *fix, uint32_t n_fix, char *err,
               size_t errlen)
{
    if (fix_inputs(g, fix, n_fix, err, errlen))
        return -1;
    for (uint32_t k = 0; k < g->n_order; k++) {
        struct nx_node *nd = &g->n[g->order[k]];
        if (nd->op == NX_OP_CONSTANT) {
            nd->op = NX_OP_DEAD;
            continue;
        }
        if (nx_infer(g, nd, err, errlen))
            return -1;
        int all_const = 1;
        for (uint32_t i = 0; i < nd->n_in; i++)
            if (nd->in[i] >= 0 && !g->t[nd->in[i]].is_const)
                all_const = 0;
        if (nd->op == NX_OP_SHAPE || (all_const && fold_cost(g, nd) <= NX_MAX_FOLD_WORK)) {
            if (nx_exec_node(g, nd, err, errlen))
                return -1;
            for (uint32_t o = 0; o < nd->n_out; o++)
                if (nd->out[o] >= 0)
                    g->t[nd->out[o]].is_const = 1;
            nd->op = NX_OP_DEAD;
        }
    }
    nx_compact(g);
    return 0;
}

int nx_import(struct nx_graph *g, const uint8_t *buf, size_t size, const struct nx_input_fix *fix,
              uint32_t n_fix, char *err, size_t errlen)
{
    if (nx_load(g, buf, size, err, errlen) || nx_topo_sort(g, err, errlen) ||
        nx_resolve(g, fix, n_fix, err, errlen) || nx_fuse(g, err, errlen)) {
        /* names come from the file: no control bytes reach a terminal */
        for (char *p = err; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
        return -1;
    }
    return 0;
}
