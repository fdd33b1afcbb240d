#!/usr/bin/env python3
"""Issue 11, point 7: with --quant source, a blob holds a GGUF's matrices in
no more bytes than the GGUF does when the formats are the same (Q4_0 ->
q4/32, Q8_0 -> q8c/32): the token-embedding table is kept in the source's
format (read one row per token), never widened to f32.

  footprint.py NIB QFIXTURE_PY BASE_SYNTH_SHAPE MODELS_DIR

Checks TinyStories-656K-Q8_0.gguf (every matrix Q8_0) and a Q4_0 fixture
(qfixture.py --mix q4_0: Q4_0 matrices, a Q8_0 output matrix): the bytes of
the blob's matrix tensors (`nib inspect --json`: role matmul, and the
embedding table) against the bytes of the GGUF's 2-D tensors (ref64.py's
own GGUF reader).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_python import reexec_with_numpy  # noqa: E402

reexec_with_numpy()
import ref64  # noqa: E402

nib, qfixture, shape, models = sys.argv[1:5]


def gguf_matrix_bytes(path):
    g = ref64.GGUFFile(path)
    kinds = sorted({ref64.GGML[t.kind][0] for t in g.tensors.values() if t.rows > 1})
    return sum(len(t.data) for t in g.tensors.values() if t.rows > 1), kinds


def blob_matrix_bytes(blob):
    j = json.loads(subprocess.run([nib, "inspect", "--json", blob], check=True,
                                  capture_output=True, text=True).stdout)
    names = {t["name"]: t for t in j["tensors"]}
    total = sum(t["bytes"] for t in j["tensors"] if t["role"] == "matmul")
    embd = j["weights"]["embedding_tensor"]
    if names[embd]["role"] != "matmul":  # a table of its own, not also the head
        total += names[embd]["bytes"]
    return total, sorted({t["dtype"] for t in j["tensors"] if t["role"] != "other"})


failed = 0
with tempfile.TemporaryDirectory() as tmp:
    base, fixture = os.path.join(tmp, "base.gguf"), os.path.join(tmp, "q4_0.gguf")
    subprocess.run([nib, "synth", shape, "-o", base], check=True, capture_output=True)
    subprocess.run([sys.executable, qfixture, base, fixture, "--mix", "q4_0"], check=True)
    cases = [fixture]
    real = os.path.join(models, "TinyStories-656K-Q8_0.gguf")
    if os.path.isfile(real):
        cases.append(real)
    else:
        print("note: %s absent: only the Q4_0 fixture is checked" % real)
    for path in cases:
        blob = os.path.join(tmp, "m.blob")
        subprocess.run([nib, "compile", path, "--quant", "source", "-o", blob], check=True,
                       capture_output=True)
        g, gk = gguf_matrix_bytes(path)
        b, bk = blob_matrix_bytes(blob)
        ok = b <= g
        failed += not ok
        print("%s %s: GGUF matrices %d bytes (%s), blob matrices %d bytes (%s)" %
              ("ok" if ok else "FAIL", os.path.basename(path), g, ",".join(gk), b, ",".join(bk)))
print("footprint: %s" % ("FAIL" if failed else "ok"))
sys.exit(1 if failed else 0)
