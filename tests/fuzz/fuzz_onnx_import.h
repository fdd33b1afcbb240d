/* The import both ONNX fuzz targets start from: parse, dynamic input dims
 * fixed at 2, topological order, static shapes, folding and fusion. */
#ifndef NIB_FUZZ_ONNX_IMPORT_H
#define NIB_FUZZ_ONNX_IMPORT_H

#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/compiler/onnx/onnx_ir.h"

/* Import a copy of data[0..size) into *g: 0, or -1 with a message. Either
 * way nx_free(g) and free(*buf) after (the copy is exactly size bytes, so
 * ASan catches an over-read). */
static inline int fuzz_onnx_import(struct nx_graph *g, const uint8_t *data, size_t size,
                                   uint8_t **buf, char *err, size_t errlen)
{
    *buf = malloc(size ? size : 1);
    FUZZ_ASSERT(*buf != NULL);
    if (size)
        memcpy(*buf, data, size);
    err[0] = 0;
    int rc = nx_load(g, *buf, size, err, errlen);
    if (!rc) {
        for (uint32_t k = 0; k < g->n_inputs; k++) {
            struct nx_tensor *t = &g->t[g->inputs[k]];
            for (uint32_t d = 0; d < t->rank; d++)
                if (!t->dims[d])
                    t->dims[d] = 2;
            if (t->rank) /* a declared rank: its dynamic dims are now fixed */
                t->shape_known = 1;
        }
        rc = nx_topo_sort(g, err, errlen) || nx_resolve(g, NULL, 0, err, errlen) ||
             nx_fuse(g, err, errlen);
    }
    if (rc)
        FUZZ_ASSERT(err[0] != 0);
    return rc ? -1 : 0;
}

#endif
