#!/usr/bin/env bash
# By hand, on any GGUF: llama.cpp's greedy continuation of a text prompt
# (through the npm package node-llama-cpp's prebuilt CPU build) against a
# real appliance built from the same file, tokenizer included. CI runs the
# token-id form of this comparison instead, in process and on every
# architecture (meson tests llamacpp-* in suite crosscheck, and the float64
# reference in suite reference: tests/reference/, docs/accuracy.md).
#
#   bash tests/crosscheck/run.sh MODEL.gguf...      # prints "same" or the first divergence
#
# node-llama-cpp comes from tests/npm (.ci/install-deps.sh runs npm ci there
# without install scripts, so nothing is downloaded outside npm).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -x "$repo/build/tools/nib" ] || { meson setup "$repo/build" "$repo" >/dev/null; }
ninja -C "$repo/build" tools/nib >/dev/null
nib=$repo/build/tools/nib
prompt=${PROMPT:-Once upon a time}

nib_greedy() {
    local m=$1 name=xc$$
    "$nib" compile "$m" -o "$work/m.blob" >&2
    if [ -d "$work/app" ]; then meson configure "$work/app" -Dblob="$work/m.blob" >/dev/null
    else meson setup -Dblob="$work/m.blob" -Dtests=false "$work/app" "$repo" >/dev/null; fi
    ninja -C "$work/app" >/dev/null
    "$work/app/appliance" --name "$name" 2>/dev/null &
    local app=$!
    for _ in $(seq 200); do "$nib" stats --name "$name" >/dev/null 2>&1 && break; sleep 0.1; done
    "$nib" ask --name "$name" --json --max-tokens 32 "$prompt"
    "$nib" stop --name "$name" >/dev/null
    wait $app || true
}

for m in "$@"; do
    l=$(cd "$here" && timeout 300 node llama_greedy.mjs "$m" "$prompt")
    n=$(nib_greedy "$m")
    node -e '
      const [m, l, n] = process.argv.slice(1), L = JSON.parse(l), N = JSON.parse(n);
      if (L.error) { console.log(m, "llama.cpp error:", L.error); process.exit(1); }
      const div = (a, b) => { for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i; return -1; };
      const p = div(L.prompt_token_ids, N.prompt_token_ids), g = div(L.generated_token_ids, N.generated_token_ids);
      console.log(m, "prompt:", p < 0 ? "same" : "diverge@" + p, "| generated:", g < 0 ? "same (" + L.generated_token_ids.length + ")" : "diverge@" + g);
      if (p >= 0 || g >= 0) process.exitCode = 1;
    ' "$m" "$l" "$n"
done
