#!/usr/bin/env bash
# Protocol overhead, side by side: the same model served by an appliance of
# this tree and by one built from a reference revision (by default the last
# commit with the protocol-2 shared segment), each driven by its own `nib
# bench --latency --name` (tokens/s and per-token latency seen by a host
# through the protocol), in interleaved rounds of the same run.
#
#   bash tools/measure/bench-protocol.sh [REF_REV] [SHAPE] [ROUNDS]
#
# Defaults: REF_REV 6661935 (protocol 2, blob format 3), SHAPE stories15m,
# ROUNDS 3. Builds the reference in a temporary git worktree (needs the git
# history, and the musl libnuma that .ci/install-deps.sh makes).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ref=${1:-6661935}
shape=${2:-stories15m}
rounds=${3:-3}
tokens=${BENCH_TOKENS:-2000}
work=$(mktemp -d)
trap 'for n in new ref; do "${nib[$n]:-true}" stop --name bp-$n-$$ >/dev/null 2>&1 || true; done
      git -C "$repo" worktree remove --force "$work/ref-src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

numa=()
[ -f "$repo/.deps/libnuma-musl/lib/libnuma.a" ] && numa=(-Dnuma_musl_dir="$repo/.deps/libnuma-musl")

declare -A nib app
build() { # build NAME SOURCE_TREE
    local name=$1 src=$2 b=$work/build-$1
    meson setup "$b" "$src" -Dtests=false "${numa[@]}" >/dev/null
    ninja -C "$b" tools/nib >/dev/null
    nib[$name]=$b/tools/nib
    "${nib[$name]}" synth "$shape" --seed 1 -o "$work/$name.gguf" >/dev/null
    "${nib[$name]}" compile "$work/$name.gguf" --quant q4 --ctx 256 -o "$work/$name.blob" >/dev/null
    meson configure "$b" -Dblob="$work/$name.blob" >/dev/null
    ninja -C "$b" >/dev/null
    app[$name]=$b/appliance
}
echo "bench-protocol: building this tree and $ref ($shape, q4)" >&2
build new "$repo"
git -C "$repo" worktree add --detach "$work/ref-src" "$ref" >/dev/null 2>&1
build ref "$work/ref-src"

run() { # run NAME: one round, prints "tokens_per_s p50_us p99_us"
    local name=$1 n=bp-$1-$$
    "${app[$name]}" --name "$n" >"$work/$name.log" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do "${nib[$name]}" stats --name "$n" >/dev/null 2>&1 && break; sleep 0.1; done
    "${nib[$name]}" bench --latency --name "$n" --tokens "$tokens" --json >"$work/$name.json"
    "${nib[$name]}" stop --name "$n" >/dev/null
    wait "$pid" || true
    /usr/bin/python3 - "$work/$name.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def find(o, keys):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in keys and isinstance(v, (int, float)):
                return v
            r = find(v, keys)
            if r is not None:
                return r
    return None
tps = find(d, {"tokens_per_s", "decode_tokens_per_s"})
p50 = find(d, {"p50_us", "p50"})
p99 = find(d, {"p99_us", "p99"})
print(tps, p50, p99)
PY
}
printf '%-6s %-5s %12s %10s %10s\n' round build tokens/s p50 p99
declare -A sum
for r in $(seq "$rounds"); do
    for name in ref new; do
        read -r tps p50 p99 < <(run "$name")
        printf '%-6s %-5s %12s %10s %10s\n' "$r" "$name" "$tps" "$p50" "$p99"
        sum[$name]="${sum[$name]:-} $tps"
    done
done
/usr/bin/python3 - "${sum[new]}" "${sum[ref]}" <<'PY'
import statistics, sys
new = [float(x) for x in sys.argv[1].split()]
ref = [float(x) for x in sys.argv[2].split()]
print("median tokens/s: this tree %.1f, reference %.1f, ratio %.3f" %
      (statistics.median(new), statistics.median(ref), statistics.median(new) / statistics.median(ref)))
PY
