/* nibble's own graph of an imported ONNX model: tensors with static
 * shapes, nodes with their attributes resolved into one struct, and a
 * topological order. Built by onnx_load (protobuf -> IR, every size
 * checked), completed by onnx_shape (static shapes, constant folding) and
 * onnx_fuse (BatchNormalization folding, activation and pattern fusion);
 * run by onnx_exec, the float64-accumulating reference. */
#ifndef NIB_ONNX_IR_H
#define NIB_ONNX_IR_H

#include <stddef.h>
#include <stdint.h>

#define NX_MAX_RANK 8
#define NX_MAX_FILE (1ull << 30)  /* bytes of a .onnx file */
#define NX_MAX_NODES 100000u      /* nodes of the graph */
#define NX_MAX_TENSORS 400000u    /* values: inputs, initializers, node outputs */
#define NX_MAX_NODE_IO 4096u      /* inputs or outputs of one node */
#define NX_MAX_ELEMS (1ull << 28) /* elements of one tensor (1 GiB of f32) */
#define NX_MAX_DIM (1ll << 28)    /* one dimension */
#define NX_MAX_INPUT_FIXES 16     /* --input NAME=DIMS options */
#define NX_MAX_FOLD_WORK 1e8      /* multiply-adds of one node folded at import */

/* ONNX element types nibble reads; int32 and bool are kept as int64. */
enum nx_dtype { NX_F32 = 1, NX_I32 = 6, NX_I64 = 7, NX_BOOL = 9 };

struct nx_tensor {
    char *name;
    int32_t dtype;
    uint32_t rank;
    int64_t dims[NX_MAX_RANK];
    int shape_known;
    int is_const;     /* data fixed at compile time (initializer, Constant, folded) */
    int is_input;     /* a graph input without an initializer */
    int is_output;    /* a graph output */
    int32_t producer; /* node index, or -1 */
    uint32_t n_uses;  /* consumers among live nodes (outputs count once more) */
    float *f;         /* data when dtype is NX_F32 */
    int64_t *i;       /* data otherwise */
};

enum nx_op {
    NX_OP_CONV,
    NX_OP_CONV_T,
    NX_OP_BN,
    NX_OP_RELU,
    NX_OP_CLIP,
    NX_OP_HSIGMOID,
    NX_OP_HSWISH,
    NX_OP_SIGMOID,
    NX_OP_ADD,
    NX_OP_SUB,
    NX_OP_MUL,
    NX_OP_DIV,
    NX_OP_POW,
    NX_OP_SQRT,
    NX_OP_REDUCEMEAN,
    NX_OP_MAXPOOL,
    NX_OP_AVGPOOL,
    NX_OP_GAP,
    NX_OP_RESIZE,
    NX_OP_CONCAT,
    NX_OP_FLATTEN,
    NX_OP_RESHAPE,
    NX_OP_SQUEEZE,
    NX_OP_UNSQUEEZE,
    NX_OP_TRANSPOSE,
    NX_OP_SLICE,
    NX_OP_SHAPE,
    NX_OP_CAST,
    NX_OP_GATHER,
    NX_OP_GEMM,
    NX_OP_MATMUL,
    NX_OP_SOFTMAX,
    NX_OP_CONSTANT,
    NX_OP_IDENTITY,
    NX_OP_SE,        /* fused squeeze-excite: x * act2(conv2(act1(conv1(mean(x))))) */
    NX_OP_LAYERNORM, /* fused: (x - mean) / sqrt(var + eps) * gamma + beta, last axis */
    NX_OP_DEAD,      /* folded or fused away */
};

/* An activation fused into the epilogue of a Conv (or SE stage). */
enum nx_act {
    NX_ACT_NONE,
    NX_ACT_RELU,
    NX_ACT_CLIP,
    NX_ACT_HSIGMOID,
    NX_ACT_HSWISH,
    NX_ACT_SIGMOID
};

struct nx_attrs {
    /* Conv, ConvTranspose, pooling: two spatial dimensions */
    int64_t kernel[2], strides[2], pads[4], dilations[2], out_pad[2], group;
    int ceil_mode, count_include_pad, has_kernel;
    /* elementwise: HardSigmoid alpha/beta, Clip bounds, BN epsilon, Gemm */
    float alpha, beta, epsilon, lo, hi;
    int trans_a, trans_b;
    /* shape ops */
    int64_t axis;
    uint32_t n_perm, n_axes, n_starts, n_ends, n_shape;
    int64_t perm[NX_MAX_RANK], axes[NX_MAX_RANK], starts[NX_MAX_RANK], ends[NX_MAX_RANK];
    int64_t steps[NX_MAX_RANK]; /* Slice, resolved per dim of the input by nx_infer */
    float scales[NX_MAX_RANK];  /* Resize, resolved by nx_infer */
    int keepdims, has_axes;
    int32_t to; /* Cast */
    /* Resize */
    int resize_linear, coord_mode, nearest_mode;
    /* fused epilogue (Conv, SE stage 1 and 2) */
    enum nx_act act, act2;
    float act_a, act_b, act2_a, act2_b;
    /* Conv and ConvTranspose: y = act(conv) * post_mul + post_add */
    float post_mul, post_add;
    /* Conv: a fused residual Add, input 3 (same shape as the output):
     * 0 none, 1 y = act(conv + r), 2 y = act(conv) + r (post is then 1, 0) */
    int res;
};

enum {
    NX_COORD_HALF_PIXEL,
    NX_COORD_ASYMMETRIC,
    NX_COORD_ALIGN_CORNERS,
    NX_COORD_PYTORCH_HALF_PIXEL
};
enum {
    NX_NEAREST_ROUND_PREFER_FLOOR,
    NX_NEAREST_ROUND_PREFER_CEIL,
    NX_NEAREST_FLOOR,
    NX_NEAREST_CEIL
};

struct nx_node {
    char *name;    /* the model's name, or "#INDEX" when it has none */
    char *op_type; /* as the model spells it */
    enum nx_op op;
    uint32_t n_in, n_out;
    int32_t *in; /* tensor indices; -1: an optional input left out */
    int32_t *out;
    struct nx_attrs a;
};

struct nx_graph {
    struct nx_tensor *t;
    uint32_t n_t, cap_t;
    struct nx_node *n;
    uint32_t n_n;
    uint32_t *order; /* live nodes, topologically sorted */
    uint32_t n_order;
    int32_t *inputs, *outputs;
    uint32_t n_inputs, n_outputs;
    int64_t opset;
};

/* --input NAME=1x3x48x192: the dims an appliance fixes. */
struct nx_input_fix {
    const char *name;
    uint32_t rank;
    int64_t dims[NX_MAX_RANK];
};

/* Each returns 0, or -1 with a message in err. */
int nx_load(struct nx_graph *g, const uint8_t *buf, size_t size, char *err, size_t errlen);
int nx_topo_sort(struct nx_graph *g, char *err, size_t errlen);
int nx_resolve(struct nx_graph *g, const struct nx_input_fix *fix, uint32_t n_fix, char *err,
               size_t errlen);
int nx_fuse(struct nx_graph *g, char *err, size_t errlen);
/* load + topo + resolve + fuse, the whole import. */
int nx_import(struct nx_graph *g, const uint8_t *buf, size_t size, const struct nx_input_fix *fix,
              uint32_t n_fix, char *err, size_t errlen);
void nx_free(struct nx_graph *g);

/* "1x3x48x192" after "NAME=": 0, or -1 with a message. */
int nx_parse_input_fix(const char *arg, struct nx_input_fix *fix, char *err, size_t errlen);

/* Helpers shared by the passes. */
uint64_t nx_elems(const struct nx_tensor *t);
int32_t nx_add_tensor(struct nx_graph *g, const char *name);
int nx_alloc_data(struct nx_tensor *t);
void nx_free_data(struct nx_tensor *t);
void nx_count_uses(struct nx_graph *g);

/* Run one node on data its inputs hold (the executor and constant folding).
 * The outputs' shapes are already resolved; their data is allocated here. */
int nx_exec_node(struct nx_graph *g, const struct nx_node *nd, char *err, size_t errlen);
/* Run the whole graph: graph inputs hold data (set by the caller); on
 * return graph outputs hold theirs. Intermediate data is freed as soon as
 * its last consumer ran. */
int nx_run(struct nx_graph *g, char *err, size_t errlen);

#endif
