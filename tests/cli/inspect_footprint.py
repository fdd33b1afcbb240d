#!/usr/bin/env python3
"""nib inspect's weight footprint: resident bytes (the whole weights section)
against bytes read per token (every matmul weight once, plus one embedding
row), in the text and in the --json output.

  inspect_footprint.py NIB BLOB [BLOB...]

For each blob (the f32 and the q4 synth blobs of the build):
  - the JSON parses, and its footprint is consistent with its own tensor
    table: matmul bytes = the sum of the tensors whose role is "matmul";
    per token = matmul + one embedding row; the row is the table's bytes /
    rows (rounded up); resident = the weights section = matmul + embedding
    table + other; the embedding table is not counted whole unless it is
    also a matmul weight (tied LM head);
  - an independent figure from the model's shape: the matmul weights are
    what the shape's parameter count gives at the blob's bytes per weight,
    within the planner's row padding (2%);
  - the text output prints the same numbers;
  - per token < resident (the embedding table is not streamed);
  - a blob that is not a blob is refused, non-zero, naming the problem.
Exits 1 on the first failure.
"""
import json
import re
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("%s exited %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def check(nib, blob):
    d = json.loads(run([nib, "inspect", "--json", blob]))
    w, m, t = d["weights"], d["model"], d["tensors"]
    name = blob.rsplit("/", 1)[-1]
    if w["resident_bytes"] != d["sections"]["weights"]:
        fail("%s: resident %d != weights section %d" % (name, w["resident_bytes"],
                                                        d["sections"]["weights"]))
    mm = [x for x in t if x["role"] == "matmul"]
    emb = [x for x in t if x["role"] == "embedding"]
    if sum(x["bytes"] for x in mm) != w["matmul_bytes"]:
        fail("%s: matmul_bytes %d != sum of matmul tensors %d" %
             (name, w["matmul_bytes"], sum(x["bytes"] for x in mm)))
    if not mm:
        fail("%s: no matmul tensor" % name)
    if emb:
        e = emb[0]
        if len(emb) != 1 or e["name"] != w["embedding_tensor"]:
            fail("%s: embedding tensors %r vs %r" % (name, emb, w["embedding_tensor"]))
        if e["rows"] != m["vocab"]:
            fail("%s: embedding rows %d != vocab %d" % (name, e["rows"], m["vocab"]))
        row = -(-e["bytes"] // e["rows"])
        if w["embedding_row_bytes"] != row or w["embedding_bytes"] != e["bytes"]:
            fail("%s: embedding row %d (table %d), expected %d (%d)" %
                 (name, w["embedding_row_bytes"], w["embedding_bytes"], row, e["bytes"]))
        table = e["bytes"]
    else:
        # tied: the table is a matmul weight, counted whole there
        if w["embedding_row_bytes"] != 0:
            fail("%s: tied embedding but a row of %d bytes" % (name, w["embedding_row_bytes"]))
        table = 0
    if w["per_token_bytes"] != w["matmul_bytes"] + w["embedding_row_bytes"]:
        fail("%s: per token %d != matmul %d + row %d" % (name, w["per_token_bytes"],
                                                          w["matmul_bytes"],
                                                          w["embedding_row_bytes"]))
    if w["resident_bytes"] != w["matmul_bytes"] + table + w["other_bytes"]:
        fail("%s: resident %d != matmul + embedding table + other" % (name, w["resident_bytes"]))
    if not w["per_token_bytes"] < w["resident_bytes"]:
        fail("%s: per token %d not below resident %d" % (name, w["per_token_bytes"],
                                                         w["resident_bytes"]))
    # From the shape alone: q, k, v, o, gate, up, down per layer and the LM head.
    dim, hd = m["dim"], m["head_dim"]
    qkv = dim * hd * (m["heads"] + 2 * m["kv_heads"])
    params = m["layers"] * (qkv + hd * m["heads"] * dim + 3 * dim * m["ffn"]) + m["vocab"] * dim
    bpw = w["matmul_bytes"] / params
    print("%s: %d matmul parameters from the shape, %.4f bytes each as stored" % (name, params, bpw))
    dtypes = {x["dtype"] for x in mm}
    if dtypes == {"f32"}:
        if not params * 4 <= w["matmul_bytes"] <= params * 4 * 1.02:
            fail("%s: f32 matmul bytes %d, shape gives %d" % (name, w["matmul_bytes"], params * 4))
    elif not 0.5 <= bpw <= 1.2:  # 4-bit codes + scales, an 8-bit LM head
        fail("%s: %.3f bytes per matmul weight is not a 4/8-bit blob's" % (name, bpw))
    # The text output says the same.
    txt = run([nib, "inspect", "--no-plan", blob])
    m1 = re.search(r"^weights: resident (\d+) bytes", txt, re.M)
    m2 = re.search(r"read per token (\d+) bytes \([0-9.]+ MiB\): matmul weights (\d+)", txt)
    if not m1 or not m2:
        fail("%s: text output lacks the weights lines:\n%s" % (name, txt[-600:]))
    got = (int(m1.group(1)), int(m2.group(1)), int(m2.group(2)))
    want = (w["resident_bytes"], w["per_token_bytes"], w["matmul_bytes"])
    if got != want:
        fail("%s: text says %r, JSON %r" % (name, got, want))
    if emb and ("one embedding row %d " % w["embedding_row_bytes"]) not in txt:
        fail("%s: text lacks the embedding row" % name)
    print("ok: %s: resident %d, per token %d (matmul %d + embedding row %d), other %d" %
          (name, w["resident_bytes"], w["per_token_bytes"], w["matmul_bytes"],
           w["embedding_row_bytes"], w["other_bytes"]))


def main():
    nib, blobs = sys.argv[1], sys.argv[2:]
    if not blobs:
        print("usage: inspect_footprint.py NIB BLOB...")
        sys.exit(2)
    for b in blobs:
        check(nib, b)
    with tempfile.NamedTemporaryFile(suffix=".blob") as f:
        f.write(b"not a blob" * 100)
        f.flush()
        r = subprocess.run([nib, "inspect", "--json", f.name], capture_output=True, text=True)
        if r.returncode == 0 or r.returncode < 0 or "invalid blob" not in r.stderr or r.stdout:
            fail("a file that is not a blob: exit %d, stderr %r, stdout %r" %
                 (r.returncode, r.stderr, r.stdout[:80]))
    print("ok: a file that is not a blob is refused: " + r.stderr.strip())


main()
