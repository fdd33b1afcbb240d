#!/usr/bin/env bash
# The whole product in one go, offline, on a fresh Debian 12 machine:
# install dependencies, build, make a model, compile it into a blob, build the
# static appliance around it, boot it, ask it a prompt and a chat message
# (rendered by the model's chat template: its own, or nibble's llama2 one
# when it has none), show its statistics, and stop it.
#
#   bash tools/demo.sh [SHAPE] [PROMPT]
#
# SHAPE defaults to stories15m (random weights of a real shape: the text is
# noise, the machinery is real). NIB_MODEL=FILE.gguf uses your own
# LLaMA-family GGUF instead, e.g. NIB_MODEL=../shared/models/stories260K.gguf
# for a small trained model that writes real sentences; NIB_QUANT=f32 (or any
# --quant spec) for another weight format (default q4).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
shape=${1:-stories15m}
prompt=${2:-Once upon a time}
work=$repo/build-demo
name=demo$$

[ "${NIB_SKIP_DEPS:-0}" = 1 ] || bash .ci/install-deps.sh

step() { printf '\n== %s\n' "$*"; }

step "build the toolchain"
[ -d build ] || meson setup build >/dev/null
ninja -C build tools/nib >/dev/null
nib=$repo/build/tools/nib
mkdir -p "$work"

model=${NIB_MODEL:-}
if [ -z "$model" ]; then
    step "nib synth $shape (random weights, made offline)"
    model=$work/$shape.gguf
    "$nib" synth "$shape" -o "$model" --seed 1
fi

step "nib compile $(basename "$model") --quant ${NIB_QUANT:-q4}"
"$nib" compile "$model" --quant "${NIB_QUANT:-q4}" -o "$work/model.blob"
"$nib" inspect "$work/model.blob" --no-plan >"$work/inspect.txt"
# A model without a chat template gets nibble's llama2 one; a model with its
# own keeps it.
if grep -q 'chat template no' "$work/inspect.txt"; then
    step "no chat template in the model: nib compile --chat-template llama2"
    "$nib" compile "$model" --quant "${NIB_QUANT:-q4}" -o "$work/model.blob" --chat-template llama2
    "$nib" inspect "$work/model.blob" --no-plan >"$work/inspect.txt"
fi
head -7 "$work/inspect.txt"

step "build the static appliance around the blob"
[ -d "$work/build" ] || meson setup "$work/build" -Dblob="$work/model.blob" -Dtests=false >/dev/null
meson configure "$work/build" -Dblob="$work/model.blob" >/dev/null
ninja -C "$work/build" >/dev/null
file "$work/build/appliance" | sed 's/, BuildID[^,]*//'

step "boot it"
"$work/build/appliance" --name "$name" &
app=$!
trap 'kill $app 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    "$nib" stats --name "$name" >/dev/null 2>&1 && break
    sleep 0.1
done

step "nib ask \"$prompt\""
"$nib" ask --name "$name" --max-tokens 48 "$prompt"

step "nib ask --chat --system \"You tell stories.\" \"Tell me one.\""
"$nib" ask --name "$name" --max-tokens 32 --chat --system "You tell stories." "Tell me one."

step "nib stats"
"$nib" stats --name "$name"

step "nib stop"
"$nib" stop --name "$name"
wait $app
trap - EXIT
echo "demo done."
