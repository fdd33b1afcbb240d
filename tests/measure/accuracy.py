#!/usr/bin/env python3
"""Accuracy of every weight format on the real models, held under thresholds
set from the measurements in docs/accuracy.md (mean KL at most ~1.3x the
measured value, top-1 agreement at most 3 points below it), plus the
auto-precision contract: the chosen mix fits the byte budget and lowers KL.

  accuracy.py NIB MODELS_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

nib, models = sys.argv[1], sys.argv[2]
if not os.path.isfile(os.path.join(models, "stories260K.gguf")):
    print("SKIP: %s not found; accuracy checks did not run" % models)
    sys.exit(77)

# (model, format): (max mean KL, min top-1 agreement). Measured values are in
# docs/accuracy.md.
LIMITS = {
    "stories260K.gguf": {
        "q4": (0.115, 0.83), "q4/64": (0.19, 0.78), "q4/128": (0.20, 0.76), "q4a": (0.12, 0.83),
        "q4c": (0.195, 0.77), "q8c": (0.0025, 0.95), "q8c/32": (0.0015, 0.95),
    },
    "TinyStories-656K-Q8_0.gguf": {
        "q4": (0.075, 0.78), "q4a": (0.10, 0.74), "q4c": (0.175, 0.64), "q8c": (0.0025, 0.94),
        "q8c/32": (0.001, 0.95),
    },
}
failures = 0


def check(ok, msg):
    global failures
    print(("ok: " if ok else "FAIL: ") + msg)
    failures += 0 if ok else 1


def run_eval(model, *args):
    r = subprocess.run([nib, "eval", os.path.join(models, model), "--json", *args],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        check(False, "nib eval %s %s: %s" % (model, args, r.stderr.strip()))
        return None
    return json.loads(r.stdout)


for model, fmt, (max_kl, min_top1) in [(m, f, lim) for m, fl in LIMITS.items()
                                       for f, lim in fl.items()]:
    d = run_eval(model, "--quant", fmt)
    if d:
        check(d["kl_mean"] <= max_kl and d["top1_agreement"] >= min_top1,
              "%s %s: KL %.5f (<= %g), top-1 %.3f (>= %g)" % (model, fmt, d["kl_mean"], max_kl,
                                                             d["top1_agreement"], min_top1))

d = run_eval("stories260K.gguf", "--quant", "f32")
if d:
    check(d["kl_mean"] == 0 and d["top1_agreement"] == 1, "f32 against itself is exact")
# The GGUF Q4_0 file repacked as it is: the baseline nibble's q4 is compared with.
base = run_eval("stories260K.gguf", "--baseline", os.path.join(models, "stories260K-q4_0.gguf"))
ours = run_eval("stories260K.gguf", "--quant", "q4")
if base and ours:
    check(base["kl_mean"] <= 0.125, "GGUF Q4_0 baseline: KL %.5f" % base["kl_mean"])
    check(ours["kl_mean"] < base["kl_mean"],
          "nibble q4 (KL %.5f) beats the GGUF Q4_0 file (KL %.5f)" % (ours["kl_mean"], base["kl_mean"]))

with tempfile.TemporaryDirectory() as tmp:
    budget = 420000
    r = subprocess.run([nib, "compile", os.path.join(models, "stories260K.gguf"), "--quant", "q4",
                        "--auto-precision", "--max-bytes", str(budget), "-o",
                        os.path.join(tmp, "ap.blob")], capture_output=True, text=True, timeout=300)
    m = re.search(r"result: mean KL ([0-9.e-]+) \(base ([0-9.e-]+)\), ([0-9.]+) MB", r.stdout)
    if r.returncode != 0 or not m:
        check(False, "auto-precision run: %s %s" % (r.stdout[-500:], r.stderr[-500:]))
    else:
        kl, base_kl, mb = float(m.group(1)), float(m.group(2)), float(m.group(3))
        kept = r.stdout.count(" yes")
        check(kl < base_kl / 2 and mb * 1e6 <= budget + 5000 and kept > 0,
              "auto-precision: KL %.5f from %.5f with %d matrices in q8c, %.2f MB (budget %d bytes)"
              % (kl, base_kl, kept, mb, budget))

print("%d failures" % failures)
sys.exit(1 if failures else 0)
