#!/usr/bin/python3
"""nib onnx-run on small models built here with Debian's python3-onnx:

- a valid model with every rewrite the importer makes (Conv+BatchNorm
  folding, x*Clip(x+3,0,6)/6 as HardSwish fused into the Conv with the
  scalar Mul and Add after it, the
  squeeze-excite chain, a per-channel Mul and Add after a depthwise Conv
  folded into it, dynamic dims fixed by --input, a Shape->Gather->
  Concat->Reshape chain folded away), run by nib and compared with numpy
  in float64 written here from the ONNX operator definitions; and the
  ReduceMean/Sub/Pow/Sqrt/Div layer norm with its Mul and Add; and a
  grouped ConvTranspose whose bias Add and BatchNormalization fold into
  its weights (laid out C x M/group x kh x kw) with its Relu fused;
- malformed models, each of which must be refused with exit status 1 and
  a message naming the problem: truncation, wrong types, shape
  contradictions, a cycle, huge dimensions, an unknown op or attribute,
  external data, a missing value.

usage: test_onnx_import.py NIB
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Checks, ONNX_NEEDS, skip  # noqa: E402

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:
    skip(f"{e}: {ONNX_NEEDS}")

NIB = sys.argv[1]
work = tempfile.mkdtemp(prefix="nib-onnx-test-")
rng = np.random.default_rng(5)
check = Checks()


def save(model, name, check_model=False):
    path = os.path.join(work, name + ".onnx")
    if check_model:
        onnx.checker.check_model(model)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def nib(*args):
    return subprocess.run([NIB, "onnx-run", *args], capture_output=True, text=True, timeout=120)


def write_npy(path, a):
    np.save(path, np.ascontiguousarray(a, dtype="<f4"))


def const(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def model(nodes, inits, inputs, outputs, opset=11):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def fvi(name, dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


# --- the valid model ---------------------------------------------------------
C, M, R = 4, 8, 2
w1 = rng.standard_normal((M, C, 3, 3)).astype(np.float32) * 0.3
b1 = rng.standard_normal(M).astype(np.float32) * 0.1
bn = [rng.uniform(0.5, 1.5, M), rng.standard_normal(M) * 0.1, rng.standard_normal(M) * 0.1,
      rng.uniform(0.5, 2.0, M)]
bn = [a.astype(np.float32) for a in bn]
se1 = rng.standard_normal((R, M, 1, 1)).astype(np.float32) * 0.5
se1b = rng.standard_normal(R).astype(np.float32) * 0.1
se2 = rng.standard_normal((M, R, 1, 1)).astype(np.float32) * 0.5
se2b = rng.standard_normal(M).astype(np.float32) * 0.1
dw = rng.standard_normal((M, 1, 3, 3)).astype(np.float32) * 0.3
fc = rng.standard_normal((M, 3)).astype(np.float32)
dscale = rng.uniform(0.5, 1.5, (M, 1, 1)).astype(np.float32)
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["n1"], name="bn1",
                     epsilon=1e-5),
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
    helper.make_node("MaxPool", ["d3"], ["q1"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Shape", ["q1"], ["shp"], name="shape"),
    helper.make_node("Gather", ["shp", "idx0"], ["n0"], name="gather", axis=0),
    helper.make_node("Unsqueeze", ["n0"], ["n0u"], name="unsq", axes=[0]),
    helper.make_node("Concat", ["n0u", "minus1"], ["newshape"], name="concat", axis=0),
    helper.make_node("GlobalAveragePool", ["q1"], ["g1"], name="gap"),
    helper.make_node("Reshape", ["g1", "newshape"], ["flat"], name="reshape"),
    helper.make_node("MatMul", ["flat", "fc"], ["logits"], name="fc"),
    helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
]
inits = [const("w1", w1), const("b1", b1), const("g", bn[0]), const("be", bn[1]),
         const("mu", bn[2]), const("var", bn[3]), const("three", np.float32(3)),
         const("zero", np.float32(0)), const("six", np.float32(6)), const("se1", se1),
         const("se1b", se1b), const("se2", se2), const("se2b", se2b), const("dw", dw),
         const("idx0", np.int64(0)), const("minus1", np.array([-1], np.int64)),
         const("fc", fc), const("dscale", dscale), const("dshift", np.float32(0.25)),
         const("k15", np.float32(1.5)), const("kshift", np.array([[[[-0.1]]]], np.float32))]
valid = model(nodes, inits, [fvi("x", ["N", C, "H", "W"])], [fvi("prob", None), fvi("q1", None)])
valid_path = save(valid, "valid")


def conv_ref(x, w, b, stride=1, pad=0, group=1):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for o in range(m):
        gi = o // mg
        for ci in range(cg):
            for ky in range(kh):
                for kx in range(kw):
                    y[:, o] += w[o, ci, ky, kx] * xp[:, gi * cg + ci,
                                                     ky:ky + stride * oh:stride,
                                                     kx:kx + stride * ow:stride]
        if b is not None:
            y[:, o] += b[o]
    return y


def reference(x):
    x = x.astype(np.float64)
    c = conv_ref(x, w1, b1, stride=2, pad=1)
    g, be, mu, var = (a.astype(np.float64)[None, :, None, None] for a in bn)
    n = (c - mu) / np.sqrt(var + 1e-5) * g + be
    h = n * np.clip(n + 3, 0, 6) / 6 * np.float64(np.float32(1.5)) + np.float64(np.float32(-0.1))
    p = h.mean(axis=(2, 3), keepdims=True)
    r = np.maximum(conv_ref(p, se1, se1b), 0)
    e = np.clip(0.2 * conv_ref(r, se2, se2b) + 0.5, 0, 1)
    y = h * e
    d = conv_ref(y, dw, None, pad=1, group=M) * dscale.astype(np.float64) + 0.25
    q = d.reshape(d.shape[0], M, d.shape[2] // 2, 2, d.shape[3] // 2, 2).max(axis=(3, 5))
    logits = q.mean(axis=(2, 3)) @ fc
    ex = np.exp(logits - logits.max(axis=1, keepdims=True))
    return ex / ex.sum(axis=1, keepdims=True), q


x = rng.uniform(-1, 1, (2, C, 12, 16)).astype(np.float32)
write_npy(os.path.join(work, "x.npy"), x)
out = os.path.join(work, "out")
r = nib(valid_path, "--input", "x=2x4x12x16", "--data", "x=" + os.path.join(work, "x.npy"),
        "-o", out, "--graph")
check(r.returncode == 0, f"valid model runs (stderr: {r.stderr.strip()})")
if r.returncode == 0:
    graph = [l for l in r.stdout.splitlines() if l.startswith("node ")]
    ops = [l.split()[2] for l in graph]
    check("BatchNormalization" not in ops, "BatchNormalization folded into conv1")
    check("Conv+HardSwish+Affine" in ops,
          "x*Clip(x+3,0,6)/6 after conv1, and the scalar Mul and Add after it, became its epilogue")
    check("SqueezeExcite+Relu+HardSigmoid" in ops, "the squeeze-excite chain is one node")
    check(not any(o in ops for o in ("Mul", "Add")),
          "the per-channel Mul and the Add after the depthwise conv folded into it")
    check(not any(o in ops for o in ("Shape", "Gather", "Unsqueeze", "Concat")),
          "the shape computation folded to a constant")
    want_p, want_q = reference(x)
    for k, want in enumerate((want_p, want_q)):
        got = np.load(os.path.join(out, f"{k}.npy"))
        err = np.abs(got - want).max() if got.shape == want.shape else np.inf
        check(got.shape == want.shape and err <= 1e-5 * np.abs(want).max(),
              f"output {k} {got.shape} matches numpy float64 (max err {err:.3g})")


# --- ConvTranspose -> per-channel Add -> BatchNormalization -> Relu --------
# (the PaddleOCR detector's head, here with groups: a ConvTranspose's
# weights are C x M/group x kh x kw, so the fold scales them along dim 1)
CT, MT, GT = 4, 6, 2
wt = rng.standard_normal((CT, MT // GT, 3, 2)).astype(np.float32) * 0.4
tb = rng.standard_normal((1, MT, 1, 1)).astype(np.float32) * 0.2
tbn = [rng.uniform(0.5, 1.5, MT), rng.standard_normal(MT) * 0.1, rng.standard_normal(MT) * 0.1,
       rng.uniform(0.5, 2, MT)]
tbn = [a.astype(np.float32) for a in tbn]
ct_nodes = [
    helper.make_node("ConvTranspose", ["x", "wt"], ["t1"], name="up", kernel_shape=[3, 2],
                     strides=[2, 2], pads=[1, 0, 1, 0], group=GT),
    helper.make_node("Add", ["t1", "tb"], ["t2"], name="up_bias"),
    helper.make_node("BatchNormalization", ["t2", "tg", "tbe", "tmu", "tvar"], ["t3"],
                     name="up_bn", epsilon=1e-5),
    helper.make_node("Relu", ["t3"], ["y"], name="up_relu"),
]
ct = model(ct_nodes, [const("wt", wt), const("tb", tb), const("tg", tbn[0]), const("tbe", tbn[1]),
                      const("tmu", tbn[2]), const("tvar", tbn[3])],
           [fvi("x", [1, CT, 5, 7])], [fvi("y", None)])


def convt_ref(x, w, stride, pads, group):
    """The scatter form: input pixel (iy, ix) adds x * w[ky, kx] at
    (iy * stride + ky, ix * stride + kx) of the uncropped output."""
    n, c, h, wd = x.shape
    _, mg, kh, kw = w.shape
    full = np.zeros((n, mg * group, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    cg = c // group
    for ic in range(c):
        g = ic // cg
        for j in range(mg):
            for ky in range(kh):
                for kx in range(kw):
                    full[:, g * mg + j, ky:ky + stride * h:stride, kx:kx + stride * wd:stride] += \
                        x[:, ic] * np.float64(w[ic, j, ky, kx])
    return full[:, :, pads[0]:full.shape[2] - pads[2], pads[1]:full.shape[3] - pads[3]]


xt = rng.uniform(-1, 1, (1, CT, 5, 7)).astype(np.float32)
write_npy(os.path.join(work, "xt.npy"), xt)
r = nib(save(ct, "convt_bn"), "--data", "x=" + os.path.join(work, "xt.npy"), "-o", out, "--graph")
check(r.returncode == 0, f"ConvTranspose+Add+BN+Relu model runs (stderr: {r.stderr.strip()})")
if r.returncode == 0:
    ops = [l.split()[2] for l in r.stdout.splitlines() if l.startswith("node ")]
    check(ops == ["ConvTranspose+Relu"],
          f"the bias Add and the BatchNormalization fold into the ConvTranspose, the Relu joins it ({ops})")
    g64, be64, mu64, var64 = (a.astype(np.float64)[None, :, None, None] for a in tbn)
    t = convt_ref(xt.astype(np.float64), wt, 2, (1, 0, 1, 0), GT) + tb.astype(np.float64)
    want = np.maximum((t - mu64) / np.sqrt(var64 + np.float32(1e-5)) * g64 + be64, 0)
    got = np.load(os.path.join(out, "0.npy"))
    err = np.abs(got - want).max() if got.shape == want.shape else np.inf
    check(got.shape == want.shape and err <= 1e-5 * np.abs(want).max(),
          f"ConvTranspose+Add+BN+Relu {got.shape} matches numpy float64 (max err {err:.3g})")


# --- the layer norm pattern (opset 9 attributes, as the recogniser has it) ----
gamma = rng.uniform(0.5, 1.5, 6).astype(np.float32)
beta = rng.standard_normal(6).astype(np.float32)
ln_nodes = [
    helper.make_node("ReduceMean", ["x"], ["mu"], name="ln_mean", axes=[-1]),
    helper.make_node("Sub", ["x", "mu"], ["d"], name="ln_sub"),
    helper.make_node("Pow", ["d", "two"], ["p"], name="ln_pow"),
    helper.make_node("ReduceMean", ["p"], ["var"], name="ln_var", axes=[-1]),
    helper.make_node("Add", ["var", "eps"], ["ve"], name="ln_eps"),
    helper.make_node("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
    helper.make_node("Div", ["d", "sd"], ["n"], name="ln_div"),
    helper.make_node("Mul", ["n", "gamma"], ["ng"], name="ln_gamma"),
    helper.make_node("Add", ["ng", "beta"], ["y"], name="ln_beta"),
]
ln = model(ln_nodes, [const("two", np.float32(2)), const("eps", np.float32(1e-6)),
                      const("gamma", gamma), const("beta", beta)],
           [fvi("x", [2, 3, 6])], [fvi("y", None)], opset=9)
xl = rng.standard_normal((2, 3, 6)).astype(np.float32) * 3
write_npy(os.path.join(work, "xl.npy"), xl)
r = nib(save(ln, "ln"), "--data", "x=" + os.path.join(work, "xl.npy"), "-o", out, "--graph")
check(r.returncode == 0, f"layer norm model runs (stderr: {r.stderr.strip()})")
if r.returncode == 0:
    ops = [l.split()[2] for l in r.stdout.splitlines() if l.startswith("node ")]
    check(ops == ["LayerNorm"], f"the layer norm pattern is one LayerNorm node ({ops})")
    x64 = xl.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    want = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + np.float32(1e-6)) \
        * gamma + beta
    got = np.load(os.path.join(out, "0.npy"))
    err = np.abs(got - want).max()
    check(err <= 1e-5 * np.abs(want).max(), f"LayerNorm matches numpy float64 (max err {err:.3g})")


# --- malformed models --------------------------------------------------------
def refused(path, expect, what, args=("--input", "x=1x4x8x8")):
    r = nib(path, *args, "--graph")
    msg = r.stderr.strip()
    check(r.returncode == 1 and all(e in msg for e in expect),
          f"{what}: exit {r.returncode}, message: {msg[:200]}")


def tiny(nodes_, inits_, opset=11, inputs=None):
    return save(model(nodes_, inits_, inputs or [fvi("x", [1, C, 8, 8])], [fvi("y", None)], opset),
                "m")


relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
blob = valid.SerializeToString()
for cut in (len(blob) // 2, len(blob) - 3, 7):
    p = os.path.join(work, "trunc.onnx")
    open(p, "wb").write(blob[:cut])
    refused(p, ["not a valid ONNX protobuf"], f"truncated at {cut} of {len(blob)} bytes")
p = os.path.join(work, "empty.onnx")
open(p, "wb").write(b"")
refused(p, ["empty"], "empty file")
p = os.path.join(work, "junk.onnx")
open(p, "wb").write(bytes(rng.integers(0, 256, 4096, dtype=np.uint8)))
refused(p, ["model"], "random bytes")

t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2])
t.int64_data.extend([1, 2])
refused(tiny(relu, [t]), ["'w'", "does not match its type"], "float initializer with int64 data")
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], raw_data=b"\0" * 12)
refused(tiny(relu, [t]), ["'w'", "raw_data holds 12 bytes"], "raw_data shorter than its dims")
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], raw_data=b"\0" * 8)
t.float_data.extend([1.0, 2.0])
refused(tiny(relu, [t]), ["both raw_data and typed"], "raw_data and float_data together")
t = TensorProto(name="w", data_type=TensorProto.STRING, dims=[1])
t.string_data.append(b"a")
refused(tiny(relu, [t]), ["element type 8"], "string initializer")
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20], raw_data=b"")
refused(tiny(relu, [t]), ["'w'", "too large"], "initializer dims of 2^40 elements")
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-4])
refused(tiny(relu, [t]), ["'w'", "negative"], "negative initializer dim")
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4],
                data_location=TensorProto.EXTERNAL)
e = t.external_data.add()
e.key, e.value = "location", "weights.bin"
refused(tiny(relu, [t]), ["external data"], "external data")
bad_attr = [helper.make_node("Conv", ["x", "cw"], ["y"], name="c", kernel_shape=[3.0, 3.0])]
refused(tiny(bad_attr, [const("cw", np.zeros((M, C, 3, 3), np.float32))]),
        ["'c'", "Conv", "kernel_shape"], "kernel_shape given as floats")
mism = [helper.make_node("Conv", ["x", "cw"], ["y"], name="cmis", kernel_shape=[3, 3])]
refused(tiny(mism, [const("cw", np.zeros((M, C + 1, 3, 3), np.float32))]),
        ["'cmis'", "channels"], "conv weights for another channel count")
addmis = [helper.make_node("Add", ["x", "v"], ["y"], name="amis")]
refused(tiny(addmis, [const("v", np.zeros((3, 5), np.float32))]), ["'amis'", "broadcast"],
        "shapes that cannot broadcast")
refused(tiny(relu, []), ["dim 1", "fixed at 4"], "--input contradicts a static dim",
        ("--input", "x=1x3x8x8"))
refused(save(model(relu, [], [fvi("x", [1, C, "H", "W"])], [fvi("y", None)]), "dyn"),
        ["dynamic dims", "--input x="], "dynamic dims not fixed", ())
refused(save(model(relu, [], [fvi("x", [1, C, "H", "W"])], [fvi("y", None)]), "dyn"),
        ["more than"], "--input of 2^40 elements", ("--input", "x=1x4x1048576x1048576"))
cyc = [helper.make_node("Relu", ["b"], ["a"], name="first"),
       helper.make_node("Add", ["a", "x"], ["b"], name="second"),
       helper.make_node("Relu", ["a"], ["y"], name="out")]
refused(tiny(cyc, []), ["cycle"], "a cycle")
unk = [helper.make_node("FooBar", ["x"], ["y"], name="mystery")]
refused(tiny(unk, []), ["'mystery'", "FooBar", "not supported"], "an unknown op")
uattr = [helper.make_node("Relu", ["x"], ["y"], name="odd", flavour=3)]
refused(tiny(uattr, []), ["'odd'", "Relu", "flavour"], "an unknown attribute")
undef = [helper.make_node("Add", ["x", "nowhere"], ["y"], name="dangling")]
refused(tiny(undef, []), ["'dangling'", "nowhere"], "an input nobody defines")
noop = [helper.make_node("Mul", ["x", ""], ["y"], name="half")]
refused(tiny(noop, []), ["'half'", "Mul", "input 1 is missing"], "a Mul without its second operand")
resh = [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")]
refused(tiny(resh, [const("s", np.array([7, -1], np.int64))]), ["'rs'", "cannot take"],
        "a reshape to an impossible shape")
refused(tiny(relu, [], opset=3), ["opset 3"], "an opset too old")

# --- bad options and data files ----------------------------------------------
relu_path = tiny(relu, [])
for bad in ("x=1x0x8x8", "x=1xx8", "x=", "=1x4", "x=1x4x8x8x"):
    r = nib(relu_path, "--input", bad)
    check(r.returncode == 2 and "--input" in r.stderr, f"--input {bad}: exit {r.returncode}, "
          f"message: {r.stderr.strip()[:160]}")
p = os.path.join(work, "wrong.npy")
write_npy(p, np.zeros((1, 4, 8, 9), np.float32))
refused(relu_path, ["dims differ"], "--data of other dims",
        ("--input", "x=1x4x8x8", "--data", "x=" + p))
p = os.path.join(work, "f64.npy")
np.save(p, np.zeros((1, 4, 8, 8), np.float64))
refused(relu_path, ["float32"], "--data in float64", ("--data", "x=" + p))
p = os.path.join(work, "short.npy")
write_npy(p, np.zeros((1, 4, 8, 8), np.float32))
open(p, "r+b").truncate(os.path.getsize(p) - 4)
refused(relu_path, ["data bytes"], "--data cut short", ("--data", "x=" + p))
refused(relu_path, ["no such input"], "--data for an input the model lacks",
        ("--data", "z=" + p))
r = nib(relu_path)
check(r.returncode == 1 and "'x' has no --data" in r.stderr,
      f"running without --data for an input: exit {r.returncode}, message: {r.stderr.strip()[:160]}")

shutil.rmtree(work, ignore_errors=True)
sys.exit(check.status())
