/* Static shape inference of one node (tools/compiler/onnx only). */
#ifndef NIB_ONNX_INFER_H
#define NIB_ONNX_INFER_H

#include "tools/compiler/onnx/onnx_ir.h"

/* The outputs' dtype, rank and dims from the inputs' (and from constant
 * inputs' values where the op needs them: Reshape, Slice, Resize, ...).
 * Contradictions (channels that do not match, broadcasting that cannot)
 * are refused with the node's name and op. */
int nx_infer(struct nx_graph *g, struct nx_node *nd, char *err, size_t errlen);
/* Drop dead nodes and nodes whose outputs nobody uses; recount uses. */
void nx_compact(struct nx_graph *g);

#endif
