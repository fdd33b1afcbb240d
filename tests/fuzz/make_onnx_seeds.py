#!/usr/bin/python3
"""Seeds of the ONNX fuzz target (tests/fuzz/corpus/onnx): small models
built with Debian's python3-onnx, one per group of ops the importer knows.

usage: /usr/bin/python3 make_onnx_seeds.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(11)


def c(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def save(name, nodes, inits, in_dims, opset):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


f32 = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)
H = helper.make_node
save("conv-bn-hswish-se", [
    H("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
    H("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"]),
    H("Add", ["n", "three"], ["a"]), H("Clip", ["a", "zero", "six"], ["k"]),
    H("Mul", ["n", "k"], ["h"]), H("Div", ["h", "six"], ["hs"]),
    H("GlobalAveragePool", ["hs"], ["p"]), H("Conv", ["p", "w1", "b1"], ["q"], kernel_shape=[1, 1]),
    H("Relu", ["q"], ["r"]), H("Conv", ["r", "w2", "b2"], ["e"], kernel_shape=[1, 1]),
    H("HardSigmoid", ["e"], ["g"], alpha=0.2, beta=0.5), H("Mul", ["hs", "g"], ["y"])],
    [c("w", f32(4, 2, 3, 3)), c("b", f32(4)), c("s", np.ones(4, np.float32)), c("o", f32(4)),
     c("m", f32(4)), c("v", np.ones(4, np.float32)), c("three", np.float32(3)),
     c("zero", np.float32(0)), c("six", np.float32(6)), c("w1", f32(2, 4, 1, 1)), c("b1", f32(2)),
     c("w2", f32(4, 2, 1, 1)), c("b2", f32(4))], [1, 2, "H", "W"], 11)
save("resize-convt-concat", [
    H("Resize", ["x", "roi", "sc"], ["u"], mode="nearest", coordinate_transformation_mode="asymmetric",
      nearest_mode="floor"),
    H("ConvTranspose", ["u", "tw"], ["t"], kernel_shape=[2, 2], strides=[2, 2]),
    H("Concat", ["t", "t"], ["cc"], axis=1), H("Sigmoid", ["cc"], ["y"])],
    [c("roi", np.zeros(0, np.float32)), c("sc", np.array([1, 1, 2, 2], np.float32)),
     c("tw", f32(2, 1, 2, 2))], [1, 2, 3, 3], 11)
save("attention-bits", [
    H("Shape", ["x"], ["sh"]), H("Slice", ["sh"], ["s1"], starts=[2], ends=[3], axes=[0]),
    H("Cast", ["s1"], ["s2"], to=7), H("Concat", ["zero", "s2", "minus1"], ["ns"], axis=0),
    H("Reshape", ["x", "ns"], ["r"]), H("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
    H("ReduceMean", ["t"], ["mu"], axes=[-1]), H("Sub", ["t", "mu"], ["d"]),
    H("Pow", ["d", "two"], ["p"]), H("ReduceMean", ["p"], ["var"], axes=[-1]),
    H("Sqrt", ["var"], ["sd"]), H("Div", ["d", "sd"], ["ln"]),
    H("MatMul", ["ln", "wq"], ["q"]), H("Softmax", ["q"], ["y"], axis=2)],
    [c("zero", np.array([0], np.int64)), c("minus1", np.array([-1], np.int64)),
     c("two", np.float32(2)), c("wq", f32(2, 5))], [1, 3, 2, 4], 9)
save("pool-gemm", [
    H("MaxPool", ["x"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
    H("AveragePool", ["m"], ["a"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0),
    H("Flatten", ["a"], ["f"], axis=1), H("Gemm", ["f", "gw", "gb"], ["y"], transB=1)],
    [c("gw", f32(3, 50)), c("gb", f32(3))], [1, 2, 8, 8], 11)
# Enough weighted nodes that the quantised compile (fuzz_onnx_lower) keeps
# the ends at 8 bits and gives the middle ones 4-bit weights and int8 inputs.
save("conv-chain", [
    H("Conv", ["x", "k0", "c0"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), H("Relu", ["a"], ["ar"]),
    H("Conv", ["ar", "k1", "c1"], ["b"], kernel_shape=[1, 1]), H("Relu", ["b"], ["br"]),
    H("Conv", ["br", "k2", "c2"], ["d"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    H("Add", ["d", "d"], ["e"]), H("Conv", ["e", "k3", "c3"], ["y"], kernel_shape=[1, 1])],
    [c("k0", f32(8, 3, 3, 3)), c("c0", f32(8)), c("k1", f32(32, 8, 1, 1)), c("c1", f32(32)),
     c("k2", f32(32, 32, 3, 3)), c("c2", f32(32)), c("k3", f32(4, 32, 1, 1)), c("c3", f32(4))],
    [1, 3, 6, 6], 11)
# Residual Adds the import fuses into a Conv's epilogue: ResNet's (Add, then
# Relu), MobileNet's (the activation, then Add), and one from a row-major
# value (a MatMul of two images), which the lowering copies to NHWC first.
save("conv-residual", [
    H("Conv", ["x", "k0", "c0"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]), H("Relu", ["a"], ["ar"]),
    H("Conv", ["ar", "k1", "c1"], ["b"], kernel_shape=[1, 1]),
    H("Add", ["b", "ar"], ["s"]), H("Relu", ["s"], ["sr"]),
    H("Conv", ["sr", "k2", "c2"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    H("HardSwish", ["d"], ["dh"]), H("Add", ["sr", "dh"], ["e"]),
    H("MatMul", ["e", "e"], ["er"]),
    H("Conv", ["e", "k3", "c3"], ["f"], kernel_shape=[1, 1]), H("Add", ["f", "er"], ["g"]),
    H("Conv", ["g", "k4", "c4"], ["y"], kernel_shape=[1, 1])],
    [c("k0", f32(16, 3, 3, 3)), c("c0", f32(16)), c("k1", f32(16, 16, 1, 1)), c("c1", f32(16)),
     c("k2", f32(16, 16, 3, 3)), c("c2", f32(16)), c("k3", f32(16, 16, 1, 1)), c("c3", f32(16)),
     c("k4", f32(4, 16, 1, 1)), c("c4", f32(4))],
    [1, 3, 6, 6], 14)
