#!/usr/bin/python3
"""nib synth resnet50: the written ONNX model is checked by Debian's
python3-onnx (onnx.checker with full shape inference), has ResNet-50
v1.5's structure (torchvision's layout and its published parameter count),
is the same bytes for the same seed and different for another, and
nibble's importer loads it with every BatchNormalization folded into its
Conv. The numerical cross-check against onnxruntime is onnx_xcheck.mjs.

usage: test_synth_resnet.py NIB
"""
import collections
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
    from onnx import numpy_helper
except ImportError as e:
    skip(f"{e}: {ONNX_NEEDS}")

NIB = sys.argv[1]
work = tempfile.mkdtemp(prefix="nib-synth-resnet-")
check = Checks()


def synth(name, *args):
    path = os.path.join(work, name)
    r = subprocess.run([NIB, "synth", "resnet50", "-o", path, *args], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"nib synth resnet50 {' '.join(args)} exits 0 ({r.stderr.strip()})")
    return path


def read(path):
    with open(path, "rb") as f:
        return f.read()


try:
    a, b, c = synth("a.onnx"), synth("b.onnx", "--seed", "0"), synth("c.onnx", "--seed", "1")
    check(read(a) == read(b), "the same seed gives the same bytes")
    check(read(a) != read(c), "another seed gives other bytes")

    m = onnx.load(a)
    try:
        onnx.checker.check_model(m, full_check=True)
        check(True, "onnx.checker.check_model (full_check) accepts it")
    except onnx.checker.ValidationError as e:
        check(False, f"onnx.checker.check_model: {e}")
    opsets = {o.domain: o.version for o in m.opset_import}
    check(opsets == {"": 13}, f"opset 13 ({opsets})")
    g = m.graph
    dims = lambda v: [d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    check([(v.name, dims(v)) for v in g.input] == [("input", [1, 3, 224, 224])],
          "one input, input 1x3x224x224")
    check([(v.name, dims(v)) for v in g.output] == [("logits", [1, 1000])],
          "one output, logits 1x1000")
    ops = collections.Counter(n.op_type for n in g.node)
    want = {"Conv": 53, "BatchNormalization": 53, "Relu": 49, "Add": 16, "MaxPool": 1,
            "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    check(ops == want, f"ResNet-50's nodes {dict(ops)}")
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    # torchvision's resnet50 has 25,557,032 parameters; its BatchNorm
    # running means and variances add 2 x 26,560.
    trainable = sum(v.size for k, v in inits.items() if "running_" not in k)
    check(trainable == 25557032, f"25,557,032 parameters ({trainable})")
    strides = {n.name: list(next(a.ints for a in n.attribute if a.name == "strides"))
               for n in g.node if n.op_type == "Conv"}
    check(strides["layer2.0.conv2"] == [2, 2] and strides["layer2.0.conv1"] == [1, 1]
          and strides["layer2.0.downsample.0"] == [2, 2],
          "v1.5: the stride is on the 3x3 conv and the projection")
    check(all(np.isfinite(v).all() for v in inits.values()), "every weight is finite")
    var_min = min(v.min() for k, v in inits.items() if k.endswith("running_var"))
    check(var_min > 0, f"running variances are positive (min {var_min})")
    w = inits["layer4.2.conv2.weight"]
    he = np.sqrt(2.0 / (512 * 9))
    check(abs(w.std() / he - 1) < 0.05, f"He-scaled conv weights (std {w.std():.4g}, {he:.4g})")

    r = subprocess.run([NIB, "onnx-run", a, "--graph"], capture_output=True, text=True)
    check(r.returncode == 0, f"nib onnx-run --graph exits 0 ({r.stderr.strip()})")
    kinds = collections.Counter(line.split(" ")[2] for line in r.stdout.splitlines()
                                if line.startswith("node "))
    # Every BatchNormalization folds into its Conv; the Relu right after
    # the stem and after conv1/conv2 of each of the 16 bottlenecks (33)
    # joins it; each bottleneck's Add, and the Relu after it, joins conv3
    # or (in the 4 blocks with a projection) whichever of the two convs
    # comes later, as its residual (16); the other 4 stay plain.
    check(kinds.get("BatchNormalization", 0) == 0, "no BatchNormalization left after import")
    check(kinds.get("Conv+Relu", 0) == 33 and kinds.get("Conv+Add+Relu", 0) == 16
          and kinds.get("Conv", 0) == 4 and "Add" not in kinds and "Relu" not in kinds,
          f"33 Conv+Relu, 16 Conv+Add+Relu and 4 Conv in the imported graph ({dict(kinds)})")

    r = subprocess.run([NIB, "synth", "resnet50", "-o", os.path.join(work, "d.onnx"),
                        "--layers", "2"], capture_output=True, text=True)
    check(r.returncode == 2 and "only -o and --seed" in r.stderr,
          f"--layers with resnet50 is a usage error ({r.returncode}: {r.stderr.strip()})")
    r = subprocess.run([NIB, "synth", "resnet50", "-o", os.path.join(work, "no", "e.onnx")],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "cannot open" in r.stderr,
          f"an unwritable path fails with exit 1 ({r.returncode}: {r.stderr.strip()})")
finally:
    shutil.rmtree(work, ignore_errors=True)

sys.exit(check.status())
