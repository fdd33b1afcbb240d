#!/usr/bin/env python3
"""The accuracy table of docs/accuracy.md ("Rounding methods"): every format
and method on the two real models against f32, beside their Q4_0 baselines,
with bits per matrix weight. A benchmark (it reports, it never fails on a
number); tests/measure/accuracy.py holds the same figures under thresholds.

  accuracy_table.py NIB MODELS_DIR        (prints a markdown table)

Baselines: stories260K against ../shared/models/stories260K-q4_0.gguf (as
llama.cpp wrote it, kept exactly); TinyStories-656K against nibble's exact
Q4_0 rounding of every matrix (--quant q4/32 --method rtn), which
quant_methods_real shows equals llama.cpp's bits on stories260K.
"""
import json
import os
import subprocess
import sys

nib, models = sys.argv[1], sys.argv[2]
MODELS = ["stories260K.gguf", "TinyStories-656K"]
ROWS = [("q4", m) for m in ("rtn", "search", "gptq")] + \
       [("q4/32", m) for m in ("rtn", "search", "gptq")] + \
       [(f, "gptq") for f in ("q4/64", "q4/128", "q4a", "q4c", "q8c", "q8c/32")] + \
       [("q4h", m) for m in ("rtn", "search", "gptq")]


def run(model, *args):
    r = subprocess.run([nib, "eval", os.path.join(models, model), "--json", *args],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("nib eval %s %s: %s" % (model, args, r.stderr.strip()))
    return json.loads(r.stdout)


print("| model | format | method | mean KL | × baseline | top-1 | perplexity (f32) | bits/weight |")
print("|---|---|---|---|---|---|---|---|")
for model in MODELS:
    if model.startswith("stories"):
        base = run(model, "--baseline", os.path.join(models, "stories260K-q4_0.gguf"))
        label = ("Q4_0 file", "as stored")
    else:
        base = run(model, "--quant", "q4/32", "--method", "rtn")
        label = ("q4/32 (Q4_0)", "rtn")
    rows = [(label, base)] + [((f, m), run(model, "--quant", f, "--method", m)) for f, m in ROWS]
    for (fmt, method), d in rows:
        print("| %s | %s | %s | %.4f | %.2f | %.1f %% | %.3f (%.3f) | %.2f |" % (
            model.replace(".gguf", ""), fmt, method, d["kl_mean"], d["kl_mean"] / base["kl_mean"],
            100 * d["top1_agreement"], d["ppl_quant"], d["ppl_f32"], d["bits_per_weight"]))
