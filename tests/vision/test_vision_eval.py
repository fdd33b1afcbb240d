#!/usr/bin/python3
"""nib eval MODEL.onnx (docs/vision.md, "Eval") on a small classifier built
here with Debian's python3-onnx (three Conv, a Gemm, Softmax-free logits):

- its figures recomputed independently: the same model compiled by nib
  compile with the same options, each input of --data run by nib onnx-run
  --blob, and max / mean |quantised - f32| and top-1 agreement computed in
  numpy (and the rms) must equal what nib eval --json reports (f32 against f32 is exactly
  0; each quantised format that nib compile builds, too);
- the built-in synthetic set is named as such, --count limits it, and the
  same command gives the same JSON twice;
- a model whose output is a sequence of score rows (1 x 12 x 6): nib
  eval reports how many steps' argmax agrees with f32's (all 72 for f32,
  and for q4 the count recomputed in numpy from the two blobs' outputs),
  and a classifier's output has no steps;
- --auto-precision prints one row per weighted node but the first and
  the last (conv1 and fc, which the 4-bit default keeps at 8 bits and it
  does not measure; with --precision conv1=q4 conv1 is not measured
  either, and fc is); --auto-budget 0 leaves no other node at 8 bits,
  --auto-budget 1 keeps exactly the nodes of positive sensitivity at 8,
  and nib compile --auto-precision writes the blob that --precision with
  the table's choices writes;
- refusals: bad options exit 2; a missing folder, a file of the wrong
  shape (named) and a --precision naming no weighted node exit 1.

usage: test_vision_eval.py NIB
"""
import json
import os
import shutil
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
work = tempfile.mkdtemp(prefix="nib-vision-eval-")
rng = np.random.default_rng(5)
check = Checks()


def run(*args, timeout=300):
    return subprocess.run([NIB, *args], capture_output=True, text=True, timeout=timeout)


def const(name, a):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def save(name, nodes, inits, in_dims, out, out_dims):
    """An opset-13 model of input x (in_dims) and one output, written as NAME.onnx."""
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_dims)],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_dims)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(work, name + ".onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def model():
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3", kernel_shape=[1, 1]),
        helper.make_node("GlobalAveragePool", ["c3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], name="fc", transB=1),
    ]
    inits = [const("w1", rng.standard_normal((16, 3, 3, 3)) * 0.4),
             const("b1", rng.standard_normal(16) * 0.1),
             const("w2", rng.standard_normal((32, 16, 3, 3)) * 0.15),
             const("b2", rng.standard_normal(32) * 0.1),
             const("w3", rng.standard_normal((32, 32, 1, 1)) * 0.25),
             const("fc", rng.standard_normal((10, 32)) * 0.5),
             const("fcb", rng.standard_normal(10) * 0.1)]
    return save("cls", nodes, inits, [1, 3, 24, 24], "logits", [1, 10])


def seq_model():
    """A sequence output, 1 x 12 steps x 6 scores (a CTC recogniser's shape)."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="sconv1", kernel_shape=[1, 3],
                         pads=[0, 1, 0, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="srelu"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="sconv2", kernel_shape=[1, 1]),
        helper.make_node("Reshape", ["c2", "shape"], ["s"], name="sreshape"),
        helper.make_node("Transpose", ["s"], ["steps"], name="strans", perm=[0, 2, 1]),
    ]
    inits = [const("w1", rng.standard_normal((16, 3, 1, 3)) * 0.5),
             const("b1", rng.standard_normal(16) * 0.1),
             const("w2", rng.standard_normal((6, 16, 1, 1)) * 0.4),
             numpy_helper.from_array(np.array([1, 6, 12], dtype=np.int64), "shape")]
    return save("seq", nodes, inits, [1, 3, 1, 12], "steps", [1, 12, 6])


def eval_json(*args):
    r = run("eval", *args, "--json")
    if r.returncode != 0:
        return None, r
    return json.loads(r.stdout), r


def blob_outputs(blob, files):
    outs = []
    for k, f in enumerate(files):
        d = os.path.join(work, f"out-{os.path.basename(blob)}-{k}")
        r = run("onnx-run", "--blob", blob, "--data", "x=" + f, "-o", d)
        if r.returncode != 0:
            raise SystemExit("onnx-run --blob failed: " + r.stderr)
        outs.append(np.load(os.path.join(d, "0.npy")).astype(np.float64))
    return outs


def recompute(m, data, files, quant):
    """max/mean |q - f32| and top-1 from blobs nib compile writes."""
    ref = os.path.join(work, "f32.blob")
    r = run("compile", m, "--quant", "f32", "-o", ref)
    if r.returncode != 0:
        r = run("compile", m, "-o", ref)  # a nib compile without --quant builds f32
    cand = os.path.join(work, quant + ".blob")
    r2 = run("compile", m, "--quant", quant, "-o", cand)
    if r.returncode != 0 or r2.returncode != 0:
        return None
    a, b = blob_outputs(ref, files), blob_outputs(cand, files)
    diff = np.concatenate([np.abs(x - y).ravel() for x, y in zip(a, b)])
    top1 = np.mean([np.argmax(x) == np.argmax(y) for x, y in zip(a, b)])
    return diff.max(), diff.mean(), max(np.abs(x).max() for x in a), top1, np.sqrt((diff ** 2).mean())


def inputs(name, n, shape):
    """A folder of n random .npy inputs of shape; (folder, files)."""
    folder = os.path.join(work, name)
    os.makedirs(folder)
    files = []
    for k in range(n):
        files.append(os.path.join(folder, f"{k:02d}.npy"))
        np.save(files[-1], rng.uniform(-1, 1, shape).astype(np.float32))
    return folder, files


try:
    m = model()
    data, files = inputs("data", 5, (1, 3, 24, 24))

    # f32 against f32: nothing differs, every top-1 agrees
    j, r = eval_json(m, "--quant", "f32", "--data", data)
    check(j is not None, "nib eval --quant f32 --data DIR runs" + ("" if j else ": " + r.stderr))
    if j:
        o = j["outputs"][0]
        check(j["inputs"] == data and j["samples"] == 5, f"it names the folder and its 5 inputs ({j['inputs']}, {j['samples']})")
        check(o["name"] == "logits" and o["dims"] == [1, 10], "the output's name and dims")
        check(o["max_abs"] == 0 and o["mean_abs"] == 0 and o["top1"] == 1,
              f"f32 against f32: max {o['max_abs']}, mean {o['mean_abs']}, top-1 {o['top1']}")
        check(j["nodes"] == {"q4": 0, "q8": 0, "f32": 4}, f"4 weighted nodes, all f32 ({j['nodes']})")

    j, r = eval_json(m, "--quant", "f32", "--data", data, "--count", "2")
    check(j is not None and j["samples"] == 2, "--data DIR --count 2: the first 2 files" +
          ("" if j else ": " + r.stderr))

    # the synthetic set: named, counted, deterministic
    j1, r = eval_json(m, "--quant", "f32", "--count", "3")
    j2, _ = eval_json(m, "--quant", "f32", "--count", "3")
    check(j1 is not None and j1["inputs"] == "synthetic" and j1["samples"] == 3,
          "without --data: the built-in synthetic set, --count 3" + ("" if j1 else ": " + r.stderr))
    check(j1 == j2, "the same command, the same JSON")
    r = run("eval", m, "--quant", "f32")
    check(r.returncode == 0 and "built-in synthetic inputs" in r.stdout and "top-1 agrees" in r.stdout,
          "the text report says the inputs are synthetic and gives top-1: " + r.stdout.strip())

    # quantised formats, where nib compile builds them: eval's figures
    # against blobs compiled and run separately
    for quant in ("q8", "q4"):
        j, r = eval_json(m, "--quant", quant, "--data", data)
        want = recompute(m, data, files, quant)
        check(j is not None and want is not None, f"--quant {quant}: nib eval and nib compile run" +
              ("" if j else ": " + r.stderr))
        if j and want:
            o = j["outputs"][0]
            mx, mean, mref, top1, rms = want
            close = lambda a, b: abs(a - b) <= 1e-6 * max(1.0, abs(b))
            check(close(o["max_abs"], mx) and close(o["mean_abs"], mean) and close(o["max_ref"], mref)
                  and close(o["top1"], top1) and close(o["rms"], rms),
                  f"--quant {quant}: nib eval max {o['max_abs']:.6g} mean {o['mean_abs']:.6g} "
                  f"rms {o['rms']:.6g} top-1 {o['top1']}; recomputed {mx:.6g} {mean:.6g} {rms:.6g} {top1}")
            check(0 < o["max_abs"] < mref, f"--quant {quant}: an error, smaller than max|f32| ({o['max_abs']:.4g} < {mref:.4g})")
        check(j is None or "steps" not in j["outputs"][0], f"--quant {quant}: a classifier has no steps")

    # a sequence output: per step, whether the argmax agrees with f32's
    sm = seq_model()
    sdata, sfiles = inputs("sdata", 6, (1, 3, 1, 12))
    j, r = eval_json(sm, "--quant", "f32", "--data", sdata)
    check(j is not None and j["outputs"][0].get("steps") == 72 and
          j["outputs"][0].get("steps_same") == 72,
          "f32 against f32: every one of 6 x 12 steps agrees: " + (str(j["outputs"]) if j else r.stderr))
    j, r = eval_json(sm, "--quant", "q4", "--data", sdata)
    ref_blob, q4_blob = os.path.join(work, "s-f32.blob"), os.path.join(work, "s-q4.blob")
    ok = (run("compile", sm, "--quant", "f32", "-o", ref_blob).returncode == 0 and
          run("compile", sm, "--quant", "q4", "-o", q4_blob).returncode == 0)
    if j and ok:
        a, b = blob_outputs(ref_blob, sfiles), blob_outputs(q4_blob, sfiles)
        same = int(sum((np.argmax(x.reshape(12, 6), axis=1) == np.argmax(y.reshape(12, 6), axis=1)).sum()
                       for x, y in zip(a, b)))
        o = j["outputs"][0]
        check(o.get("steps") == 72 and o.get("steps_same") == same,
              f"--quant q4: steps {o.get('steps')}, agreeing {o.get('steps_same')}; recomputed 72, {same}")
    else:
        check(False, "--quant q4 on the sequence model runs: " + r.stderr[-300:])
    r = run("eval", sm, "--quant", "q4", "--data", sdata)
    check(r.returncode == 0 and "steps (" in r.stdout and "argmax agrees on" in r.stdout,
          "the text report gives the steps' agreement: " + r.stdout.strip()[-200:])

    if True:
        r = run("eval", m, "--auto-precision", "--auto-budget", "0", "--json")
        check(r.returncode == 0, "--auto-precision --auto-budget 0 runs: " + r.stderr[-300:])
        if r.returncode == 0:
            rows = [ln.split()[0] for ln in r.stderr.splitlines()
                    if ln.split() and ln.split()[0] in ("conv1", "conv2", "conv3", "fc")]
            check(sorted(rows) == ["conv2", "conv3"],
                  f"the table has one row per weighted node but the two ends: {rows}")
            check("(conv1, fc) stay at 8 bits" in r.stderr, "the ends are named as kept at 8 bits")
            check(json.loads(r.stdout)["nodes"]["q8"] == 2, "budget 0: no node at 8 bits but the ends")
        r = run("eval", m, "--auto-precision", "--auto-budget", "0", "--precision", "conv1=q4", "--json")
        rows = [ln.split()[0] for ln in r.stderr.splitlines()
                if ln.split() and ln.split()[0] in ("conv1", "conv2", "conv3", "fc")]
        check(r.returncode == 0 and sorted(rows) == ["conv2", "conv3"] and
              json.loads(r.stdout)["nodes"]["q8"] == 1,
              f"--precision conv1=q4: conv1 at 4 bits and not measured, fc at 8: {rows} {r.stderr[-300:]}")
        # nib compile --auto-precision: the blob its table describes
        auto_blob, by_hand = os.path.join(work, "auto.blob"), os.path.join(work, "hand.blob")
        r = run("compile", m, "--auto-precision", "--auto-budget", "1", "-o", auto_blob)
        rows = [ln.split() for ln in r.stderr.splitlines()
                if ln.split() and ln.split()[0] in ("conv1", "conv2", "conv3", "fc")]
        check(r.returncode == 0 and len(rows) == 2, "nib compile --auto-precision --auto-budget 1 "
              f"prints 2 rows: {r.stderr[-400:]}")
        check(all((float(x[3]) > 0) == (x[4] == "q8") for x in rows),
              "budget 1: exactly the nodes of positive sensitivity at q8: " + str(rows))
        prec = [a for x in rows for a in ("--precision", f"{x[0]}={x[4]}")]
        r2 = run("compile", m, *prec, "-o", by_hand)
        same = r2.returncode == 0 and open(auto_blob, "rb").read() == open(by_hand, "rb").read()
        check(same, "the blob equals nib compile with the table's precisions as --precision")
        r = run("eval", m, "--precision", "nosuch=q8")
        check(r.returncode == 1 and "nosuch" in r.stderr, "--precision naming no weighted node: " + r.stderr.strip())

    # refusals
    for args, what in ((["--quant", "q5"], "--quant q5"), (["--count", "0"], "--count 0"),
                       (["--auto-budget", "2"], "--auto-budget 2"),
                       (["--precision", "conv1"], "--precision without =")):
        r = run("eval", m, *args)
        check(r.returncode == 2, f"{what} is a usage error (exit {r.returncode}): {r.stderr.strip()[:100]}")
    r = run("eval", m, "--quant", "f32", "--data", os.path.join(work, "nosuch"))
    check(r.returncode == 1 and "nosuch" in r.stderr, "a missing folder: " + r.stderr.strip())
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    np.save(os.path.join(bad, "wrong.npy"), np.zeros((1, 3, 8, 8), np.float32))
    r = run("eval", m, "--quant", "f32", "--data", bad)
    check(r.returncode == 1 and "wrong.npy" in r.stderr, "a file of the wrong shape is named: " + r.stderr.strip())
finally:
    shutil.rmtree(work, ignore_errors=True)

sys.exit(check.status())
