/* Between the loader and the attribute parser (tools/compiler/onnx only). */
#ifndef NIB_ONNX_OPS_H
#define NIB_ONNX_OPS_H

#include "tools/compiler/onnx/onnx_ir.h"

/* nd->op from nd->op_type and nd->a from the node's AttributeProtos;
 * a Constant node's value becomes its output's data. An unknown op or
 * attribute is refused naming the node and op. */
int nx_parse_attrs(struct nx_graph *g, struct nx_node *nd, size_t n_attr, const void *const *attr,
                   char *err, size_t errlen);
/* A TensorProto (as const void *: the generated header stays inside the
 * loader files) into t, whose name is set. */
int nx_tensor_proto(struct nx_tensor *t, const void *proto, const char *what, char *err,
                    size_t errlen);

#endif
