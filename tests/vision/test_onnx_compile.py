#!/usr/bin/python3
"""nib compile MODEL.onnx on small models built here with Debian's
python3-onnx, the blob run by nib onnx-run --blob (the runtime's plan
executor on a thread team, in process):

- every output within 1e-4 x max|ref| of nib's float64 reference
  executor (nib onnx-run on the .onnx, itself checked against numpy by
  test_onnx_import.py), for a MobileNet-like model (Conv+BN+hard-swish,
  the affine after it, squeeze-excite, depthwise conv, MaxPool, MatMul,
  Softmax) and a model of the other ops (residual Add, Relu, AveragePool,
  Resize nearest and linear, Concat, Sigmoid, a standing
  BatchNormalization, Transpose, Slice, Flatten, Gemm, Clip, HardSigmoid,
  Sub, Div, Pow, Sqrt, ConvTranspose with groups, pads, output padding and
  its fused Relu), and an attention block as the PaddleOCR recogniser
  has it (fused LayerNorm over the last axis, a rank-5 reshape and
  transpose of qkv, Slice and Squeeze, MatMuls of two activations,
  Softmax, Sigmoid.Mul);
- the same bits for 1, 2 and 3 workers, and for the scalar and AVX2
  kernels (when this CPU has AVX2; said when not);
- u8 pixel input with --input-mean/--input-std against the reference fed
  the normalized floats;
- refusals: an op the blob cannot hold yet names the node and exits 1,
  bad options exit 2, a truncated blob exits 1;
- quantised blobs (--quant q8, the default q4, and every node q4) of
  those models and of a small CNN whose middle convolutions get 4 bits,
  calibrated on a --calib directory: within measured tolerances of the
  reference, the same bits for 1/2/3 workers and scalar/AVX2, the same
  bytes from two compiles; the built-in synthetic set on image-like
  input; --precision, --quant, --calib and --calib-count refusals.

usage: test_onnx_compile.py NIB
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Checks, ONNX_NEEDS, skip  # noqa: E402

try:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    skip(f"{e}: {ONNX_NEEDS}")

NIB = sys.argv[1]
work = tempfile.mkdtemp(prefix="nib-onnx-compile-")
rng = np.random.default_rng(11)
check = Checks()


def run(*args):
    return subprocess.run([NIB, *args], capture_output=True, text=True, timeout=120)


def const(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def save(name, nodes, inits, inputs, outputs, opset):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(work, name + ".onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def fvi(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def outputs(d, n):
    return [np.load(os.path.join(d, f"{k}.npy")) for k in range(n)]


# --- a MobileNet-like model (opset 11) ---------------------------------------
C, M, R = 3, 16, 4
mobile_nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["n1"], name="bn1"),
    helper.make_node("Add", ["n1", "three"], ["a1"], name="hs_add"),
    helper.make_node("Clip", ["a1", "zero", "six"], ["k1"], name="hs_clip"),
    helper.make_node("Mul", ["n1", "k1"], ["m1"], name="hs_mul"),
    helper.make_node("Div", ["m1", "six"], ["h0"], name="hs_div"),
    helper.make_node("Mul", ["h0", "k15"], ["hm"], name="post_mul"),
    helper.make_node("Add", ["hm", "kshift"], ["h1"], name="post_add"),
    helper.make_node("GlobalAveragePool", ["h1"], ["p1"], name="se_pool"),
    helper.make_node("Conv", ["p1", "se1", "se1b"], ["s1"], name="se_conv1", kernel_shape=[1, 1]),
    helper.make_node("Relu", ["s1"], ["r1"], name="se_relu"),
    helper.make_node("Conv", ["r1", "se2", "se2b"], ["s2"], name="se_conv2", kernel_shape=[1, 1]),
    helper.make_node("HardSigmoid", ["s2"], ["e1"], name="se_gate", alpha=0.2, beta=0.5),
    helper.make_node("Mul", ["h1", "e1"], ["y1"], name="se_mul"),
    helper.make_node("Conv", ["y1", "dw"], ["d1"], name="dwconv", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], group=M),
    helper.make_node("Mul", ["dscale", "d1"], ["d2"], name="aff_mul"),
    helper.make_node("Add", ["d2", "dshift"], ["d3"], name="aff_add"),
    helper.make_node("MaxPool", ["d3"], ["q1"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                     pads=[1, 1, 1, 1]),
    helper.make_node("GlobalAveragePool", ["q1"], ["g1"], name="gap"),
    helper.make_node("Reshape", ["g1", "shape2"], ["flat"], name="reshape"),
    helper.make_node("MatMul", ["flat", "fc"], ["logits"], name="fc"),
    helper.make_node("Add", ["logits", "fcb"], ["lb"], name="fc_bias"),
    helper.make_node("Softmax", ["lb"], ["prob"], name="softmax", axis=1),
]
mobile_inits = [
    const("w1", f32(M, C, 3, 3, scale=0.4)), const("b1", f32(M, scale=0.1)),
    const("g", rng.uniform(0.5, 1.5, M).astype(np.float32)), const("be", f32(M, scale=0.1)),
    const("mu", f32(M, scale=0.1)), const("var", rng.uniform(0.5, 2, M).astype(np.float32)),
    const("three", np.float32(3)), const("zero", np.float32(0)), const("six", np.float32(6)),
    const("k15", np.float32(1.5)), const("kshift", np.float32(-0.1)),
    const("se1", f32(R, M, 1, 1, scale=0.5)), const("se1b", f32(R, scale=0.1)),
    const("se2", f32(M, R, 1, 1, scale=0.5)), const("se2b", f32(M, scale=0.1)),
    const("dw", f32(M, 1, 3, 3, scale=0.4)),
    const("dscale", rng.uniform(0.5, 1.5, (M, 1, 1)).astype(np.float32)),
    const("dshift", np.float32(0.25)), const("shape2", np.array([1, M], np.int64)),
    const("fc", f32(M, 5)), const("fcb", f32(5, scale=0.1)),
]
mobile = save("mobile", mobile_nodes, mobile_inits, [fvi("x", [1, C, "H", "W"])],
              [fvi("prob", None), fvi("q1", None)], 11)

# --- a model of the other ops (opset 13) ---------------------------------------
K = 8
other_nodes = [
    helper.make_node("Conv", ["x", "wa", "ba"], ["ca"], name="conva", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["ca"], ["ra"], name="relua"),
    helper.make_node("Conv", ["ra", "wb"], ["cb"], name="convb", kernel_shape=[1, 1]),
    helper.make_node("Add", ["cb", "ra"], ["res"], name="residual"),
    helper.make_node("Relu", ["res"], ["rr"], name="relu_res"),
    helper.make_node("AveragePool", ["rr"], ["ap"], name="avgpool", kernel_shape=[2, 2],
                     strides=[2, 2]),
    helper.make_node("Resize", ["ap", "", "sc2"], ["up"], name="up_nearest", mode="nearest"),
    helper.make_node("Resize", ["ap", "", "sc2"], ["upl"], name="up_linear", mode="linear"),
    helper.make_node("Concat", ["up", "rr", "upl"], ["cat"], name="concat", axis=1),
    helper.make_node("Sigmoid", ["cat"], ["sg"], name="sigmoid"),
    helper.make_node("Conv", ["sg", "wd"], ["dd"], name="dw2", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], strides=[2, 2], group=3 * K),
    helper.make_node("Add", ["dd", "dd"], ["d2"], name="double"),
    helper.make_node("BatchNormalization", ["d2", "g2", "be2", "mu2", "var2"], ["bn"],
                     name="bn_standing"),
    helper.make_node("Transpose", ["bn"], ["tr"], name="transpose", perm=[0, 2, 3, 1]),
    helper.make_node("Slice", ["tr", "st", "en", "ax", "stp"], ["sl"], name="slice"),
    helper.make_node("GlobalAveragePool", ["bn"], ["gp"], name="gap2"),
    helper.make_node("Flatten", ["gp"], ["fl"], name="flatten"),
    helper.make_node("Gemm", ["fl", "wg", "bg"], ["lg"], name="gemm", transB=1, alpha=0.5),
    helper.make_node("Clip", ["lg", "lo", "hi"], ["cl"], name="clip"),
    helper.make_node("HardSigmoid", ["cl"], ["hs"], name="hsig", alpha=0.3, beta=0.4),
    helper.make_node("Sub", ["hs", "half"], ["sb"], name="sub"),
    helper.make_node("Div", ["sb", "two"], ["dv"], name="div"),
    helper.make_node("Pow", ["dv", "two"], ["pw"], name="pow"),
    helper.make_node("Add", ["pw", "one"], ["p1"], name="add1"),
    helper.make_node("Sqrt", ["p1"], ["z"], name="sqrt"),
    helper.make_node("Softmax", ["lg"], ["prob"], name="softmax", axis=-1),
    helper.make_node("ConvTranspose", ["rr", "wct", "bct"], ["ct"], name="convt",
                     kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                     output_padding=[1, 1], group=2),
    helper.make_node("Relu", ["ct"], ["ctr"], name="convt_relu"),
]
other_inits = [
    const("wa", f32(K, 3, 3, 3, scale=0.4)), const("ba", f32(K, scale=0.1)),
    const("wb", f32(K, K, 1, 1, scale=0.3)), const("sc2", np.array([1, 1, 2, 2], np.float32)),
    const("wd", f32(3 * K, 1, 3, 3, scale=0.4)),
    const("g2", rng.uniform(0.5, 1.5, 3 * K).astype(np.float32)),
    const("be2", f32(3 * K, scale=0.1)), const("mu2", f32(3 * K, scale=0.1)),
    const("var2", rng.uniform(0.5, 2, 3 * K).astype(np.float32)),
    const("st", np.array([1, 0], np.int64)), const("en", np.array([7, 20], np.int64)),
    const("ax", np.array([1, 3], np.int64)), const("stp", np.array([2, 1], np.int64)),
    const("wg", f32(6, 3 * K, scale=0.5)), const("bg", f32(6, scale=0.1)),
    const("lo", np.float32(-0.5)), const("hi", np.float32(0.5)), const("half", np.float32(0.5)),
    const("two", np.float32(2)), const("one", np.float32(1)),
    const("wct", f32(K, 2, 3, 3, scale=0.4)), const("bct", f32(4, scale=0.1)),
]
other = save("other", other_nodes, other_inits, [fvi("x", [1, 3, 16, 12])],
             [fvi("prob", None), fvi("sl", None), fvi("z", None), fvi("ctr", None)], 13)

# --- an attention block as the PaddleOCR recogniser has it (opset 11) ----------
# LayerNorm over the last axis (fused from ReduceMean/Sub/Pow/Sqrt/Div and
# its affine), qkv reshaped to rank 5 and transposed, Q.K^T and softmax.V
# as MatMuls of two activations, Sigmoid.Mul.
T, E, NH = 24, 8, 2
HD = E // NH
attn_nodes = [
    helper.make_node("Conv", ["x", "wc"], ["cx"], name="stem", kernel_shape=[1, 1]),
    helper.make_node("Reshape", ["cx", "s_tok"], ["tk"], name="to_tokens"),
    helper.make_node("Transpose", ["tk"], ["tt"], name="tokens_t", perm=[0, 2, 1]),
    helper.make_node("ReduceMean", ["tt"], ["mu"], name="ln_mean", axes=[-1]),
    helper.make_node("Sub", ["tt", "mu"], ["dx"], name="ln_sub"),
    helper.make_node("Pow", ["dx", "two"], ["sq"], name="ln_pow"),
    helper.make_node("ReduceMean", ["sq"], ["vr"], name="ln_var", axes=[-1]),
    helper.make_node("Add", ["vr", "eps"], ["ve"], name="ln_eps"),
    helper.make_node("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
    helper.make_node("Div", ["dx", "sd"], ["nz"], name="ln_div"),
    helper.make_node("Mul", ["nz", "gam"], ["ng"], name="ln_gamma"),
    helper.make_node("Add", ["ng", "bet"], ["ln"], name="ln_beta"),
    helper.make_node("MatMul", ["ln", "wqkv"], ["qkv"], name="qkv"),
    helper.make_node("Reshape", ["qkv", "s5"], ["q5"], name="qkv_r5"),
    helper.make_node("Transpose", ["q5"], ["t5"], name="qkv_t5", perm=[2, 0, 3, 1, 4]),
    helper.make_node("Slice", ["t5", "i0", "i1", "a0"], ["sq0"], name="slice_q"),
    helper.make_node("Slice", ["t5", "i1", "i2", "a0"], ["sk0"], name="slice_k"),
    helper.make_node("Slice", ["t5", "i2", "i3", "a0"], ["sv0"], name="slice_v"),
    helper.make_node("Squeeze", ["sq0"], ["q"], name="sq_q", axes=[0]),
    helper.make_node("Squeeze", ["sk0"], ["k"], name="sq_k", axes=[0]),
    helper.make_node("Squeeze", ["sv0"], ["v"], name="sq_v", axes=[0]),
    helper.make_node("Mul", ["q", "qscale"], ["qs"], name="q_scale"),
    helper.make_node("Transpose", ["k"], ["kt"], name="k_t", perm=[0, 1, 3, 2]),
    helper.make_node("MatMul", ["qs", "kt"], ["att"], name="qk"),
    helper.make_node("Softmax", ["att"], ["pr"], name="att_softmax", axis=3),
    helper.make_node("MatMul", ["pr", "v"], ["ctx"], name="pv"),
    helper.make_node("Transpose", ["ctx"], ["ct"], name="ctx_t", perm=[0, 2, 1, 3]),
    helper.make_node("Reshape", ["ct", "s_out"], ["o"], name="ctx_r"),
    helper.make_node("Sigmoid", ["o"], ["og"], name="gate"),
    helper.make_node("Mul", ["o", "og"], ["y"], name="swish"),
]
attn_inits = [
    const("wc", f32(E, 3, 1, 1, scale=0.8)), const("s_tok", np.array([1, E, T], np.int64)),
    const("two", np.float32(2)), const("eps", np.float32(1e-6)),
    const("gam", rng.uniform(0.5, 1.5, E).astype(np.float32)), const("bet", f32(E, scale=0.1)),
    const("wqkv", f32(E, 3 * E, scale=0.6)),
    const("s5", np.array([1, T, 3, NH, HD], np.int64)),
    const("i0", np.array([0], np.int64)), const("i1", np.array([1], np.int64)),
    const("i2", np.array([2], np.int64)), const("i3", np.array([3], np.int64)),
    const("a0", np.array([0], np.int64)), const("qscale", np.float32(HD ** -0.5)),
    const("s_out", np.array([1, T, E], np.int64)),
]
attn = save("attn", attn_nodes, attn_inits, [fvi("x", [1, 3, 4, 6])],
            [fvi("y", None), fvi("pr", None)], 11)

# Transposed convolutions the runtime takes two ways: a 17x17 kernel over
# a 17x17 input, whose middle outputs gather more taps (289) than the
# packed loop holds (256) and go one channel at a time, and a grouped,
# strided, dilated one with 9 output channels per group (a block of 8
# and one padded block); and two with one output channel (a probability
# map's head, where eight pixels stride_w apart share the lanes): 2x2
# stride 2 with a bias as the detector's, and 3x3 stride 2 padded, whose
# edge pixels have fewer taps than the rest of their class.
convt_nodes = [
    helper.make_node("ConvTranspose", ["x", "wt1"], ["y1"], name="convt_wide", kernel_shape=[17, 17]),
    helper.make_node("ConvTranspose", ["x", "wt2", "bt2"], ["y2"], name="convt_groups",
                     kernel_shape=[3, 2], strides=[2, 3], dilations=[2, 1], pads=[1, 0, 2, 1],
                     group=2),
    helper.make_node("ConvTranspose", ["x", "wt3", "bt3"], ["y3"], name="convt_map",
                     kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("ConvTranspose", ["x", "wt4"], ["y4"], name="convt_map_padded",
                     kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
]
convt_inits = [const("wt1", f32(2, 3, 17, 17, scale=0.2)), const("wt2", f32(2, 9, 3, 2, scale=0.5)),
               const("bt2", f32(18, scale=0.1)), const("wt3", f32(2, 1, 2, 2, scale=0.5)),
               const("bt3", f32(1, scale=0.1)), const("wt4", f32(2, 1, 3, 3, scale=0.5))]
convt = save("convt", convt_nodes, convt_inits, [fvi("x", [1, 2, 17, 17])],
             [fvi("y1", None), fvi("y2", None), fvi("y3", None), fvi("y4", None)], 11)

# The same over 12 input channels and 40 columns, where the runtime's
# tiles engage: a block of 8 input channels turned so that 32 (then 8)
# one-channel pixels share the lanes, plus 4 channels read lane by lane
# (2x2 stride 2: both outputs of an input pixel from one turning);
# and pixels stride_w apart beside 24 output channels at once (20: the
# third block partial; 30: three blocks, then one partial), the edges
# one pixel at a time; and a 3x3 stride-1 map, whose nine taps per pixel
# run 8 pixels at a time (32 take at most 4 taps).
convt_tile_nodes = [
    helper.make_node("ConvTranspose", ["x", "wt5", "bt5"], ["y5"], name="convt_map_c12",
                     kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("ConvTranspose", ["x", "wt6"], ["y6"], name="convt_map_c12_padded",
                     kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    helper.make_node("ConvTranspose", ["x", "wt7", "bt7"], ["y7"], name="convt_c20",
                     kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("ConvTranspose", ["x", "wt8"], ["y8"], name="convt_c30_padded",
                     kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    helper.make_node("ConvTranspose", ["x", "wt9"], ["y9"], name="convt_map_c12_s1",
                     kernel_shape=[3, 3]),
]
convt_tile_inits = [const("wt5", f32(12, 1, 2, 2, scale=0.5)), const("bt5", f32(1, scale=0.1)),
                    const("wt6", f32(12, 1, 3, 3, scale=0.5)), const("wt7", f32(12, 20, 2, 2, scale=0.5)),
                    const("bt7", f32(20, scale=0.1)), const("wt8", f32(12, 30, 3, 3, scale=0.5)),
                    const("wt9", f32(12, 1, 3, 3, scale=0.5))]
convt_tile = save("convt_tile", convt_tile_nodes, convt_tile_inits, [fvi("x", [1, 12, 40, 40])],
                  [fvi("y5", None), fvi("y6", None), fvi("y7", None), fvi("y8", None),
                   fvi("y9", None)], 11)

# A detector neck as PaddleOCR's has it: squeeze-excite written x + x * s
# (one fused MULADD op, format 10), an FPN sum of it and an upsampled map
# read by a quantized convolution and a Resize, and a Concat of upsampled
# maps read only by
# the quantized head, whose copies then write int8 codes (qout 1) so that
# no f32 concat and no QUANT of it is left.
neck_nodes = [
    helper.make_node("Conv", ["x", "n1", "n1b"], ["c1"], name="lat", kernel_shape=[1, 1]),
    helper.make_node("GlobalAveragePool", ["c1"], ["g"], name="se_pool"),
    helper.make_node("Conv", ["g", "s1", "s1b"], ["g1"], name="se_down", kernel_shape=[1, 1]),
    helper.make_node("Relu", ["g1"], ["g2"], name="se_relu"),
    helper.make_node("Conv", ["g2", "s2", "s2b"], ["g3"], name="se_up", kernel_shape=[1, 1]),
    helper.make_node("HardSigmoid", ["g3"], ["s"], name="se_gate", alpha=0.2, beta=0.5),
    helper.make_node("Mul", ["c1", "s"], ["m"], name="se_mul"),
    helper.make_node("Add", ["c1", "m"], ["r"], name="se_add"),
    helper.make_node("Conv", ["r", "n2"], ["c2"], name="smooth", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1]),
    helper.make_node("MaxPool", ["c2"], ["p2"], name="down", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Resize", ["p2", "", "sc"], ["u2"], name="up_p", mode="nearest"),
    helper.make_node("Add", ["r", "u2"], ["a"], name="fpn_add"),
    helper.make_node("Conv", ["a", "n3"], ["c3"], name="fpn_out", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1]),
    helper.make_node("Resize", ["a", "", "sc"], ["ua"], name="up_a", mode="nearest"),
    helper.make_node("Resize", ["c3", "", "sc"], ["uc"], name="up_c", mode="nearest"),
    helper.make_node("Concat", ["ua", "uc"], ["cat"], name="cat", axis=1),
    helper.make_node("Conv", ["cat", "n4", "n4b"], ["y"], name="head", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1]),
]
neck_inits = [const("n1", f32(8, 3, 1, 1, scale=0.5)), const("n1b", f32(8, scale=0.1)),
              const("s1", f32(2, 8, 1, 1, scale=0.5)), const("s1b", f32(2, scale=0.1)),
              const("s2", f32(8, 2, 1, 1, scale=0.5)), const("s2b", f32(8, scale=0.1)),
              const("n2", f32(8, 8, 3, 3, scale=0.2)), const("n3", f32(8, 8, 3, 3, scale=0.2)),
              const("n4", f32(4, 16, 3, 3, scale=0.2)), const("n4b", f32(4, scale=0.1)),
              const("sc", np.array([1, 1, 2, 2], np.float32))]
neck = save("neck", neck_nodes, neck_inits, [fvi("x", [1, 3, 10, 8])], [fvi("y", None)], 13)



def compile_model(path, dims, blob, *extra, quant="f32"):
    r = run("compile", path, "--input", "x=" + dims, "-o", blob, "--quant", quant, *extra)
    check(r.returncode == 0, f"compile {os.path.basename(path)} {' '.join(extra)}: {r.stderr.strip()}")
    return r.returncode == 0


def ref_run(path, dims, xfile, outdir):
    r = run("onnx-run", path, "--input", "x=" + dims, "--data", "x=" + xfile, "-o", outdir)
    check(r.returncode == 0, f"reference run of {os.path.basename(path)} {r.stderr.strip()}")


def blob_run(blob, xfile, outdir, *extra):
    r = run("onnx-run", "--blob", blob, "--data", "x=" + xfile, "-o", outdir, *extra)
    check(r.returncode == 0, f"blob run {' '.join(extra)} {r.stderr.strip()}")
    return r.returncode == 0


avx2 = "avx2" in open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else False
for name, path, dims, n_out in (("mobile", mobile, "1x3x20x18", 2), ("other", other, "1x3x16x12", 4),
                                ("attn", attn, "1x3x4x6", 2), ("convt", convt, "1x2x17x17", 4),
                                ("convt_tile", convt_tile, "1x12x40x40", 5),
                                ("neck", neck, "1x3x10x8", 1)):
    shape = tuple(int(d) for d in dims.split("x"))
    xfile = os.path.join(work, name + "-x.npy")
    np.save(xfile, f32(*shape))
    blob = os.path.join(work, name + ".blob")
    if not compile_model(path, dims, blob):
        continue
    ref = os.path.join(work, name + "-ref")
    ref_run(path, dims, xfile, ref)
    runs = {}
    for w in (1, 2, 3):
        d = os.path.join(work, f"{name}-w{w}")
        if blob_run(blob, xfile, d, "--workers", str(w), "--isa", "scalar"):
            runs[f"scalar w{w}"] = outputs(d, n_out)
    if avx2:
        d = os.path.join(work, f"{name}-avx2")
        if blob_run(blob, xfile, d, "--workers", "2", "--isa", "avx2"):
            runs["avx2 w2"] = outputs(d, n_out)
    else:
        print(f"note {name}: this CPU has no AVX2, so scalar vs AVX2 is not compared here")
    if not runs or not os.path.isdir(ref):
        continue
    r_out = outputs(ref, n_out)
    base = runs["scalar w1"]
    for k in range(n_out):
        ref_k = r_out[k]
        err = float(np.max(np.abs(base[k].astype(np.float64) - ref_k)))
        mx = float(np.max(np.abs(ref_k)))
        check(base[k].shape == ref_k.shape and err <= 1e-4 * mx,
              f"{name} output {k} {ref_k.shape}: max|blob - ref| {err:.3g} <= 1e-4 x {mx:.3g}")
    for what, outs in runs.items():
        same = all(o.tobytes() == b.tobytes() for o, b in zip(outs, base))
        check(same, f"{name}: {what} gives the same bits as scalar w1")

# --- u8 pixels with per-channel mean and std -----------------------------------
mean, std = [0.5, 0.4, 0.3], [0.2, 0.25, 0.3]
blob = os.path.join(work, "mobile-u8.blob")
if compile_model(mobile, "1x3x20x18", blob, "--input-type", "u8", "--input-mean",
                 ",".join(map(str, mean)), "--input-std", ",".join(map(str, std))):
    px = rng.integers(0, 256, (1, 3, 20, 18)).astype(np.float32)
    np.save(os.path.join(work, "px.npy"), px)
    norm = ((px / np.float32(255) - np.array(mean, np.float32)[None, :, None, None])
            / np.array(std, np.float32)[None, :, None, None]).astype(np.float32)
    np.save(os.path.join(work, "norm.npy"), norm)
    ref_run(mobile, "1x3x20x18", os.path.join(work, "norm.npy"), os.path.join(work, "u8-ref"))
    if blob_run(blob, os.path.join(work, "px.npy"), os.path.join(work, "u8-out"), "--workers", "2"):
        got, want = outputs(os.path.join(work, "u8-out"), 2), outputs(os.path.join(work, "u8-ref"), 2)
        for k in range(2):
            err = float(np.max(np.abs(got[k].astype(np.float64) - want[k])))
            mx = float(np.max(np.abs(want[k])))
            check(err <= 1e-4 * mx, f"u8 input output {k}: max|blob - ref| {err:.3g} <= 1e-4 x {mx:.3g}")
    r = run("onnx-run", "--blob", blob, "--data", "x=" + os.path.join(work, "norm.npy"))
    check(r.returncode == 1 and "pixel" in r.stderr, f"u8 input refuses non-pixel values: {r.stderr.strip()}")

# --- quantised blobs ----------------------------------------------------------
# A small CNN whose middle convolutions get 4 bits under the default (the
# first and the last weighted node keep 8): 3x3 stride 2, 3x3, 1x1 with a
# residual, 3x3 stride 2 with a fused clip, then Gemm.
qnet_nodes = [
    helper.make_node("Conv", ["x", "q1", "q1b"], ["c1"], name="qconv1", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Relu", ["c1"], ["r1"], name="qrelu1"),
    helper.make_node("Conv", ["r1", "q2", "q2b"], ["c2"], name="qconv2", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c2"], ["r2"], name="qrelu2"),
    helper.make_node("Conv", ["r2", "q3"], ["c3"], name="qconv3", kernel_shape=[1, 1]),
    helper.make_node("Add", ["c3", "r1"], ["a3"], name="qres"),
    helper.make_node("Conv", ["a3", "q4", "q4b"], ["c4"], name="qconv4", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Clip", ["c4", "zero", "six"], ["k4"], name="qclip"),
    helper.make_node("GlobalAveragePool", ["k4"], ["gq"], name="qgap"),
    helper.make_node("Flatten", ["gq"], ["fq"], name="qflat"),
    helper.make_node("Gemm", ["fq", "qg", "qgb"], ["y"], name="qgemm", transB=1),
]
QC = 24
qnet_inits = [
    const("q1", f32(QC, 3, 3, 3, scale=0.3)), const("q1b", f32(QC, scale=0.1)),
    const("q2", f32(QC, QC, 3, 3, scale=0.08)), const("q2b", f32(QC, scale=0.1)),
    const("q3", f32(QC, QC, 1, 1, scale=0.2)),
    const("q4", f32(2 * QC, QC, 3, 3, scale=0.08)), const("q4b", f32(2 * QC, scale=0.1)),
    const("zero", np.float32(0)), const("six", np.float32(6)),
    const("qg", f32(10, 2 * QC, scale=0.3)), const("qgb", f32(10, scale=0.1)),
]
qnet = save("qnet", qnet_nodes, qnet_inits, [fvi("x", [1, 3, 32, 32])], [fvi("y", None)], 13)

# A depthwise convolution (f32) between two quantized 1x1 ones, as the
# PaddleOCR networks have them: the depthwise one writes the int8 input of
# the next itself and, since nothing reads its floats, only that (qout 1,
# format 10), so the only QUANT left is the image's.
dwq_nodes = [
    helper.make_node("Conv", ["x", "p1", "p1b"], ["e1"], name="expand", kernel_shape=[1, 1]),
    helper.make_node("Relu", ["e1"], ["e2"], name="expand_relu"),
    helper.make_node("Conv", ["e2", "dwk", "dwb"], ["d1"], name="dw", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], group=16),
    helper.make_node("HardSwish", ["d1"], ["d2"], name="dw_hswish"),
    helper.make_node("Conv", ["d2", "p2"], ["y"], name="project", kernel_shape=[1, 1]),
]
dwq_inits = [const("p1", f32(16, 3, 1, 1, scale=0.5)), const("p1b", f32(16, scale=0.1)),
             const("dwk", f32(16, 1, 3, 3, scale=0.4)), const("dwb", f32(16, scale=0.1)),
             const("p2", f32(8, 16, 1, 1, scale=0.3))]
dwq = save("dwq", dwq_nodes, dwq_inits, [fvi("x", [1, 3, 12, 10])], [fvi("y", None)], 14)



def rel_err(got, want):
    """max|got - want| / max|want| and mean|got - want| / mean|want|"""
    d = np.abs(got.astype(np.float64) - want)
    return float(d.max() / np.abs(want).max()), float(d.mean() / np.abs(want).mean())


# Calibration sets: 8 normal samples for the models fed normal values, and
# image-like values in [0, 1) for the built-in synthetic set's test.
calib = os.path.join(work, "calib")
os.makedirs(calib)
# Tolerances: max|blob - ref| / max|ref| and mean|blob - ref| / mean|ref|
# over each output, about twice the largest error measured on these models
# with either calibration rule (docs/vision.md, "Quantisation": q8 at most
# 0.029 / 0.032, the 5-way softmax of mobile the worst mean; q4 0.125 /
# 0.08; every node q4 0.138 / 0.112).
TOL = {"q8": (0.06, 0.06), "q4": (0.25, 0.16), "q4-all": (0.3, 0.22)}
for name, path, dims, n_out in (("qnet", qnet, "1x3x32x32", 1), ("mobile", mobile, "1x3x20x18", 2),
                                ("other", other, "1x3x16x12", 4), ("attn", attn, "1x3x4x6", 2),
                                ("dwq", dwq, "1x3x12x10", 1), ("neck", neck, "1x3x10x8", 1)):
    shape = tuple(int(d) for d in dims.split("x"))
    cdir = os.path.join(calib, name)
    os.makedirs(cdir)
    for i in range(8):
        np.save(os.path.join(cdir, "s%02d.npy" % i), f32(*shape))
    xfile = os.path.join(work, name + "-qx.npy")
    np.save(xfile, f32(*shape))
    ref = os.path.join(work, name + "-qref")
    ref_run(path, dims, xfile, ref)
    want = outputs(ref, n_out)
    variants = [("q8", ()), ("q4", ())]
    if name == "qnet":  # every weighted node at 4 bits, the ends too
        variants.append(("q4", ("--precision", "qconv1=q4", "--precision", "qgemm=q4")))
    for quant, extra in variants:
        tag = quant + ("-all" if extra else "")
        blob = os.path.join(work, f"{name}-{tag}.blob")
        if not compile_model(path, dims, blob, "--calib", cdir, *extra, quant=quant):
            continue
        runs = {}
        for w in (1, 2, 3):
            d = os.path.join(work, f"{name}-{tag}-w{w}")
            if blob_run(blob, xfile, d, "--workers", str(w), "--isa", "scalar"):
                runs[f"scalar w{w}"] = outputs(d, n_out)
        if avx2:
            d = os.path.join(work, f"{name}-{tag}-avx2")
            if blob_run(blob, xfile, d, "--workers", "2", "--isa", "avx2"):
                runs["avx2 w2"] = outputs(d, n_out)
        if "scalar w1" not in runs:
            continue
        base = runs["scalar w1"]
        for what, outs in runs.items():
            check(all(o.tobytes() == b.tobytes() for o, b in zip(outs, base)),
                  f"{name} {tag}: {what} gives the same bits as scalar w1")
        for k in range(n_out):
            emax, emean = rel_err(base[k], want[k])
            tmax, tmean = TOL[tag]
            check(base[k].shape == want[k].shape and emax <= tmax and emean <= tmean,
                  f"{name} {tag} output {k}: max err {emax:.3g} <= {tmax} x max|ref|, "
                  f"mean err {emean:.3g} <= {tmean} x mean|ref|")
    # the same options give the same bytes; the calibration set matters
    b1, b2, b3 = (os.path.join(work, f"{name}-det{i}.blob") for i in range(3))
    if (compile_model(path, dims, b1, "--calib", cdir, quant="q4")
            and compile_model(path, dims, b2, "--calib", cdir, quant="q4")
            and compile_model(path, dims, b3, "--calib-count", "3", quant="q4")):
        check(open(b1, "rb").read() == open(b2, "rb").read(), f"{name}: two compiles, the same bytes")
        check(open(b1, "rb").read() != open(b3, "rb").read(),
              f"{name}: another calibration set, other bytes")



def vision_ops(path):
    """(opcode, qout, res) of each op of a vision blob: the header's plan
    section (struct nib_section at byte 120 of struct nib_blob_header), ops
    of 192 bytes, the parameters at byte 72, and of a conv's (33) or
    qconv's (44) parameters qout at byte 100 and res at byte 108; for a
    binary (35), unary (36) or copy (37), (opcode, qout, fn) with fn at
    byte 64 of its parameters and qout at byte 84 (model_blob/blob_format.h)."""
    b = open(path, "rb").read()
    off, size = struct.unpack_from("<QQ", b, 120)
    ops = []
    for i in range(size // 192):
        code = struct.unpack_from("<I", b, off + 192 * i)[0]
        prm = off + 192 * i + 72
        if code in (33, 44):
            qout, res = struct.unpack_from("<III", b, prm + 4 * 25)[0::2]
            ops.append((code, qout, res))
        elif code in (35, 36, 37):
            ops.append((code, struct.unpack_from("<I", b, prm + 84)[0],
                        struct.unpack_from("<I", b, prm + 64)[0]))
        else:
            ops.append((code, 0, 0))
    return ops


# qnet's qconv2 feeds only qconv3: it writes int8 itself (qout), so its
# output needs no QUANT. The residual Add joins qconv3's epilogue (res 1:
# before its activation, which it has none of), and its sum feeds only
# qconv4, so qconv3 writes int8 too; qconv1's output is that residual and
# qconv2's input, so qconv1 writes it in f32 and its int8 copy at once
# (qout 2) in place of a QUANT of it: one QUANT (43, the input's) is left
# for four QCONVs (44). No Add (binary 35) is left.
blob = os.path.join(work, "qnet-q4.blob")
if os.path.exists(blob):
    ops = vision_ops(blob)
    check(ops.count((44, 1, 0)) == 1 and ops.count((44, 1, 1)) == 1
          and ops.count((44, 2, 0)) == 1 and ops.count((44, 0, 0)) == 1
          and ops.count((43, 0, 0)) == 1 and not any(o[0] == 35 for o in ops),
          f"qnet q4: two QCONVs write int8 (qout), one of them adding the residual, one "
          f"writes f32 and int8 (qout 2), one QUANT for four QCONVs, no Add: {ops}")
    # nib inspect reads the same plan: the vision report, and its JSON
    r = subprocess.run([NIB, "inspect", blob], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and "model: vision" in r.stdout and "checksum: ok" in r.stdout
          and sum(" qconv " in ln for ln in lines) == 4
          and sum(" int8-out" in ln for ln in lines) == 2
          and sum(" f32-and-int8-out" in ln for ln in lines) == 1
          and sum("residual=before-act" in ln for ln in lines) == 1
          and sum(" vquant " in ln for ln in lines) == 1,
          f"nib inspect on a quantized vision blob: rc {r.returncode} {r.stderr.strip()}")
    r = subprocess.run([NIB, "inspect", "--json", blob], capture_output=True, text=True)
    try:
        js = json.loads(r.stdout)
    except ValueError:
        js = {}
    check(r.returncode == 0 and js.get("model_kind") == "vision"
          and js.get("n_ops") == len(ops) and js["weights"]["q4c_bytes"] > 0
          and [io["dir"] for io in js["io"]] == ["input", "output"],
          f"nib inspect --json on a vision blob: rc {r.returncode} {r.stdout[:200]}")

for tag in ("q8", "q4"):
    blob = os.path.join(work, f"dwq-{tag}.blob")
    if os.path.exists(blob):
        ops = vision_ops(blob)
        check(ops.count((33, 1, 0)) == 1 and ops.count((43, 0, 0)) == 1
              and ops.count((44, 0, 0)) == 2,
              f"dwq {tag}: the depthwise convolution writes only int8 (qout 1: nothing reads "
              f"its floats), one QUANT (the image's) for two QCONVs: {ops}")

# neck: the Mul and Add of squeeze-excite are one MULADD (binary fn 5),
# whose int8 copy (qout 2) is smooth's input; the FPN sum keeps one for
# fpn_out (an ADD with qout 2); the two copies into the concat write only
# codes (qout 1); the image's is the one QUANT left. In f32 the MULADD
# stands alone and no op has codes.
for tag, want in (("q8", True), ("q4", True), ("f32", False)):
    blob = os.path.join(work, f"neck-{tag}.blob" if want else "neck.blob")
    if os.path.exists(blob):
        ops = vision_ops(blob)
        bins = [o for o in ops if o[0] == 35]
        fused = [(35, 2, 5), (35, 2, 0)] if want else [(35, 0, 5), (35, 0, 0)]
        copies = [o for o in ops if o[0] == 37 and o[1] == 1]
        check(bins == fused and (len(copies) == 2 and ops.count((43, 0, 0)) == 1 if want else
                                 not copies and (43, 0, 0) not in ops),
              f"neck {tag}: x + x * s is one MULADD, the FPN sum keeps int8 codes, the "
              f"concat's copies write only codes: {ops}")

# The built-in synthetic set on image-like input (values in [0, 1), what an
# image file gives), against the reference.
xfile = os.path.join(work, "qnet-img.npy")
np.save(xfile, rng.uniform(0, 1, (1, 3, 32, 32)).astype(np.float32))
ref_run(qnet, "1x3x32x32", xfile, os.path.join(work, "qnet-img-ref"))
for quant in ("q8", "q4"):
    blob = os.path.join(work, f"qnet-synth-{quant}.blob")
    if compile_model(qnet, "1x3x32x32", blob, quant=quant) and \
            blob_run(blob, xfile, os.path.join(work, f"qnet-synth-{quant}"), "--workers", "2"):
        emax, emean = rel_err(outputs(os.path.join(work, f"qnet-synth-{quant}"), 1)[0],
                              outputs(os.path.join(work, "qnet-img-ref"), 1)[0])
        tmax, tmean = TOL[quant]
        check(emax <= tmax and emean <= tmean,
              f"qnet {quant}, synthetic calibration, image-like input: max err {emax:.3g} <= {tmax}, "
              f"mean err {emean:.3g} <= {tmean}")

# --precision, --quant and --calib refusals
qb = os.path.join(work, "qr.blob")
for args, code, words, what in (
        (("--precision", "nosuch=q8"), 1, ("nosuch",), "a --precision name that is no node"),
        (("--precision", "qgap=q8"), 1, ("qgap", "GlobalAveragePool", "no weights"),
         "a --precision node without weights"),
        (("--precision", "qrelu1=q8"), 1, ("qrelu1", "fused"), "a --precision node fused away"),
        (("--precision", "qconv1=q3"), 2, ("qconv1=q3",), "a --precision of no known precision"),
        (("--precision", "=q8"), 2, ("=q8",), "a --precision without a node"),
        (("--quant", "q2"), 2, ("q2",), "--quant q2"),
        (("--calib-count", "0"), 2, ("calib-count",), "--calib-count 0"),
        (("--calib", os.path.join(work, "nodir")), 1, ("nodir",), "a --calib directory that is missing")):
    r = run("compile", qnet, "--input", "x=1x3x32x32", "-o", qb, *args)
    check(r.returncode == code and all(w in r.stderr for w in words) and not os.path.exists(qb),
          f"{what}: exit {code}, named: {r.stderr.strip()}")
bad = os.path.join(calib, "bad")
os.makedirs(bad)
np.save(os.path.join(bad, "a.npy"), f32(1, 3, 32, 32))
np.save(os.path.join(bad, "b.npy"), f32(1, 3, 16, 16))
r = run("compile", qnet, "--input", "x=1x3x32x32", "-o", qb, "--calib", bad)
check(r.returncode == 1 and "b.npy" in r.stderr and not os.path.exists(qb),
      f"a calibration file of the wrong shape is refused naming it: {r.stderr.strip()}")
empty = os.path.join(calib, "empty")
os.makedirs(empty)
r = run("compile", qnet, "--input", "x=1x3x32x32", "-o", qb, "--calib", empty)
check(r.returncode == 1 and "no input files" in r.stderr, f"an empty --calib directory: {r.stderr.strip()}")
r = run("compile", qnet, "--input", "x=1x3x32x32", "-o", qb, "--calib", bad, "--quant", "f32")
check(r.returncode == 0, f"--quant f32 does not calibrate: {r.stderr.strip()}")

# Numbers no quantised weight can hold: a NaN weight is refused naming its
# node (f32 keeps it); activations that overflow make gptq's feedback
# non-finite, refused naming the node and the way round it (--method rtn).
def chain(name, scales):
    nodes, inits, x = [], [], "x"
    for i, (cin, cout, ks, sc) in enumerate(scales):
        w = f32(cout, cin, ks, ks, scale=0.3)
        if isinstance(sc, float) and np.isnan(sc):
            w[0, 0, 0, 0] = np.nan
        else:
            w *= sc
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"{name}{i}",
                                      kernel_shape=[ks, ks], pads=[ks // 2] * 4))
        inits.append(const(f"w{i}", w))
        x = f"c{i}"
    nodes[-1].output[0] = "y"
    return save(name, nodes, inits, [fvi("x", [1, 3, 8, 8])], [fvi("y", None)], 13)


nanw = chain("nanw", [(3, 8, 3, 1.0), (8, 8, 1, float("nan")), (8, 8, 1, 1.0), (8, 4, 1, 1.0)])
if os.path.exists(qb):
    os.remove(qb)
r = run("compile", nanw, "-o", qb)
check(r.returncode == 1 and "nanw1" in r.stderr and "not a finite number" in r.stderr
      and not os.path.exists(qb), f"a NaN weight of a quantised node is refused naming it: {r.stderr.strip()}")
r = run("compile", nanw, "-o", qb, "--quant", "f32")
check(r.returncode == 0, f"... and compiles in f32: {r.stderr.strip()}")
os.remove(qb) if os.path.exists(qb) else None
huge = chain("huge", [(3, 8, 3, 1.0), (8, 8, 1, 1e37), (8, 8, 1, 1e37), (8, 4, 1, 1.0)])
r = run("compile", huge, "-o", qb)
check(r.returncode == 1 and "huge2" in r.stderr and "gptq" in r.stderr and "--method rtn" in r.stderr
      and not os.path.exists(qb), f"gptq on overflowing activations is refused naming the node: {r.stderr.strip()}")
r = run("compile", huge, "-o", qb, "--method", "rtn")
check(r.returncode == 0, f"... and --method rtn compiles it: {r.stderr.strip()}")
if os.path.exists(qb):
    os.remove(qb)

# --- refusals -------------------------------------------------------------------
rmean = save("rmean", [helper.make_node("ReduceMean", ["x"], ["y"], name="mean_c", axes=[1])],
             [], [fvi("x", [1, 3, 4, 4])], [fvi("y", None)], 11)
r = run("compile", rmean, "-o", os.path.join(work, "t.blob"))
check(r.returncode == 1 and "mean_c" in r.stderr and "ReduceMean" in r.stderr
      and not os.path.exists(os.path.join(work, "t.blob")),
      f"an op not compiled yet names the node and exits 1: {r.stderr.strip()}")
r = run("compile", mobile, "--input", "x=1x3x8x8", "--input-type", "f16", "-o", os.path.join(work, "t.blob"))
check(r.returncode == 2, f"--input-type f16 is a usage error: {r.stderr.strip()}")
r = run("compile", mobile, "--input", "x=1x3x8x8", "--input-mean", "0.5,0.5", "-o",
        os.path.join(work, "t.blob"))
check(r.returncode == 1 and "channels" in r.stderr, f"two means for three channels: {r.stderr.strip()}")
r = run("compile", mobile, "--input", "x=1x3x8x8", "--input-std", "1,0,1", "-o",
        os.path.join(work, "t.blob"))
check(r.returncode == 2, f"a zero std is a usage error: {r.stderr.strip()}")
good = os.path.join(work, "mobile.blob")
if os.path.exists(good):
    data = open(good, "rb").read()
    cut = os.path.join(work, "cut.blob")
    with open(cut, "wb") as f:
        f.write(data[:len(data) - 100])
    r = run("onnx-run", "--blob", cut, "--data", "x=" + os.path.join(work, "mobile-x.npy"))
    check(r.returncode == 1 and "truncated" in r.stderr, f"a truncated blob is refused: {r.stderr.strip()}")
    r = run("onnx-run", "--blob", good, "--data", "y=" + os.path.join(work, "mobile-x.npy"))
    check(r.returncode == 1 and "no such input" in r.stderr, f"an unknown input name: {r.stderr.strip()}")

shutil.rmtree(work)
sys.exit(check.status())
