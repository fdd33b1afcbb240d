#!/usr/bin/env bash
# Whole-model benchmark: synthesize the benchmark shapes, compile them to q4,
# and run `nib bench` on them (stream read, kernels, decode with 1 and all
# workers) in one run. Needs ~12 GB of disk in the work folder for llama-3b.
#
#   bash tools/measure/bench-models.sh [WORKDIR] [SHAPE...]     # default: stories15m tinyllama-1.1b llama-3b
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=${1:-$repo/build-bench}
shift || true
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(stories15m tinyllama-1.1b llama-3b)
[ -d "$repo/build" ] || meson setup "$repo/build" "$repo" >/dev/null
ninja -C "$repo/build" tools/nib >/dev/null
nib=$repo/build/tools/nib
mkdir -p "$work"
args=()
for s in "${shapes[@]}"; do
    if [ ! -f "$work/$s-q4.blob" ]; then
        "$nib" synth "$s" -o "$work/$s.gguf" --seed 1
        "$nib" compile "$work/$s.gguf" --quant q4 --ctx 256 -o "$work/$s-q4.blob"
        rm -f "$work/$s.gguf"
    fi
    args+=(--model "$work/$s-q4.blob")
done
"$nib" bench "${args[@]}" --model-tokens 64 ${BENCH_ARGS:-}
