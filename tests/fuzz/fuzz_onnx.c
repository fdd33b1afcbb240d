/* Fuzz target: the whole ONNX import of tools/compiler/onnx (protobuf-c
 * parse, limits, topological order, static shapes with constant folding,
 * BatchNorm folding and fusion) on any bytes. Dynamic input dims are fixed
 * at 2. A refusal carries a message; an accepted graph has every live
 * node's outputs shaped and its order topological; a small one is run by
 * the reference executor, every output then holding data. */
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_onnx_import.h"
#include "tools/compiler/onnx/onnx_ir.h"

static void check_and_run(struct nx_graph *g)
{
    char *made = calloc(g->n_t + 1, 1);
    FUZZ_ASSERT(made != NULL);
    uint64_t total = 0;
    for (uint32_t t = 0; t < g->n_t; t++)
        made[t] = g->t[t].is_const || g->t[t].is_input;
    for (uint32_t k = 0; k < g->n_order; k++) {
        const struct nx_node *nd = &g->n[g->order[k]];
        FUZZ_ASSERT(nd->op != NX_OP_DEAD && nd->op != NX_OP_CONSTANT);
        for (uint32_t i = 0; i < nd->n_in; i++)
            FUZZ_ASSERT(nd->in[i] < 0 || made[nd->in[i]]);
        for (uint32_t o = 0; o < nd->n_out; o++) {
            if (nd->out[o] < 0)
                continue;
            const struct nx_tensor *t = &g->t[nd->out[o]];
            FUZZ_ASSERT(t->shape_known && t->rank <= NX_MAX_RANK && nx_elems(t) <= NX_MAX_ELEMS);
            made[nd->out[o]] = 1;
            total += nx_elems(t);
        }
    }
    free(made);
    if (total > 4096 || g->n_order > 64)
        return;
    for (uint32_t k = 0; k < g->n_inputs; k++) {
        struct nx_tensor *t = &g->t[g->inputs[k]];
        FUZZ_ASSERT(nx_alloc_data(t) == 0);
        for (uint64_t i = 0; i < nx_elems(t); i++)
            t->f[i] = (float)((int)(i % 7) - 3) * 0.25f;
    }
    char err[512];
    err[0] = 0;
    if (nx_run(g, err, sizeof err)) {
        FUZZ_ASSERT(err[0] != 0);
        return;
    }
    for (uint32_t k = 0; k < g->n_outputs; k++) {
        const struct nx_tensor *t = &g->t[g->outputs[k]];
        FUZZ_ASSERT(t->dtype == NX_F32 ? t->f != NULL : t->i != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf;
    struct nx_graph g;
    char err[512];
    if (fuzz_onnx_import(&g, data, size, &buf, err, sizeof err) == 0)
        check_and_run(&g);
    nx_free(&g);
    free(buf);
    return 0;
}
