#!/bin/sh
# build-fuzzers.sh CLANG SRCROOT OUTDIR DEPFILE N CFLAGS LIBS TARGET1.c .. TARGETN.c COMMON...
# Compiles the common sources once with libFuzzer, ASan and UBSan
# instrumentation (nproc at a time), links one fuzzer per target file into
# OUTDIR, and writes DEPFILE so that header changes rebuild them. CFLAGS
# and LIBS (one word each, space-separated inside) are added to the
# compile and the link.
set -eu
clang=$1 root=$2 out=$3 depfile=$4 n=$5 xflags=$6 xlibs=$7
shift 7
targets=""
while [ "$n" -gt 0 ]; do
  targets="$targets $1"
  shift
  n=$((n - 1))
done
first_target=$(echo $targets | cut -d' ' -f1)
obj="$out/fuzz-objs-$(basename "$first_target" .c)" # one folder per invocation
mkdir -p "$obj"
flags="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
       -D_GNU_SOURCE -fno-strict-aliasing -ffp-contract=off -std=gnu11 -I$root -w $xflags"
case "$(uname -m)" in x86_64) flags="$flags -mavx2 -mfma -mf16c" ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
objs="" pids="" i=0
for src in "$@"; do
  i=$((i + 1))
  o="$obj/$i-$(basename "$src" .c).o"
  "$clang" $flags -MD -MF "$o.d" -c "$src" -o "$o" &
  pids="$pids $!"
  objs="$objs $o"
  if [ $((i % jobs)) -eq 0 ]; then
    for p in $pids; do wait "$p"; done
    pids=""
  fi
done
for p in $pids; do wait "$p"; done
first=""
for t in $targets; do
  name=$(basename "$t" .c)
  [ -n "$first" ] || first="$out/$name"
  "$clang" $flags -MD -MF "$obj/$name.d" -fsanitize=fuzzer "$t" $objs $xlibs -lm -lpthread -o "$out/$name"
done
# One rule for the whole edge: every header any object read.
{
  printf '%s:' "$first"
  cat "$obj"/*.d | sed -e 's/^[^:]*://' -e 's/\\$//' | tr ' ' '\n' | grep -v '^$' | sort -u |
    sed 's/^/ /' | tr -d '\n'
  printf '\n'
} > "$depfile"
