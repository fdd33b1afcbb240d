#!/usr/bin/env bash
# Run every test suite nibble has, the way CI does:
#   1. install what is missing (.ci/install-deps.sh, idempotent);
#   2. a normal build: all suites, including `crosscheck` (the npm peers:
#      @huggingface/tokenizers and /jinja against nibble, once), but not
#      `perf` (benchmarks) nor `soak` (whole-model checks too long for CI's
#      90 minutes on 2 cores; NIB_SOAK=1 adds them);
#   3. an ASan+UBSan build: the native suites again under the sanitizers
#      (not `long` and `huge`: the big-appliance tests of tests/linker, which
#      run once, in step 2, and skip there saying why without the disk and
#      memory they need, or with NIB_SKIP_BIG=1);
#      (not `image` either: the boot image tests of tests/image boot QEMU
#      guests running the static appliance, once, in step 2);
#      (nor `lint`: the tree's own rules, which no build type changes);
#   (the appliance without the musl libnuma is linked and booted in step 2:
#   tests/boot's *-nonuma tests, so no third build folder is needed);
# then print the totals as one line: "N passed, N failed, N skipped".
#
#   bash tests/run-all.sh            # from anywhere inside the repository
#
# Environment: NIB_SKIP_DEPS=1 skips step 1 (when you know it is done);
# NIB_SOAK=1 adds suite soak to step 2.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1

if [ "${NIB_SKIP_DEPS:-0}" != 1 ]; then
    bash .ci/install-deps.sh || { echo "run-all: installing dependencies failed"; exit 1; }
fi

passed=0 failed=0 skipped=0
failures=$(mktemp)  # every failing test's line, repeated before the totals

# Add one meson test run's summary (Ok/Expected Fail/Fail/...) to the totals.
count() {
    local log=$1 n
    n=$(awk '/^Ok:/ {print $2}' "$log");               passed=$((passed + ${n:-0}))
    n=$(awk '/^Expected Fail:/ {print $3}' "$log");    passed=$((passed + ${n:-0}))
    n=$(awk '/^Fail:/ {print $2}' "$log");             failed=$((failed + ${n:-0}))
    n=$(awk '/^Unexpected Pass:/ {print $3}' "$log");  failed=$((failed + ${n:-0}))
    n=$(awk '/^Timeout:/ {print $2}' "$log");          failed=$((failed + ${n:-0}))
    n=$(awk '/^Skipped:/ {print $2}' "$log");          skipped=$((skipped + ${n:-0}))
}

# build_and_test DIR SETUP_ARGS... -- TEST_ARGS...
build_and_test() {
    local dir=$1; shift
    local setup=() testargs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do setup+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    testargs=("$@")
    local log
    log=$(mktemp)
    if [ -d "$dir" ]; then
        meson setup --reconfigure "$dir" "${setup[@]}" >"$log" 2>&1
    else
        meson setup "$dir" "${setup[@]}" >"$log" 2>&1
    fi || { cat "$log"; echo "run-all: meson setup $dir failed"; failed=$((failed + 1)); return; }
    if ! ninja -C "$dir" >"$log" 2>&1; then
        tail -50 "$log"
        echo "run-all: build in $dir failed"
        failed=$((failed + 1))
        return
    fi
    meson test -C "$dir" --print-errorlogs "${testargs[@]}" 2>&1 | tee "$log"
    count "$log"
    grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT|UNEXPECTEDPASS) ' "$log" | sed "s|^|$dir: |" >>"$failures"
    rm -f "$log"
}

soak=(--no-suite soak)
[ "${NIB_SOAK:-0}" = 1 ] && soak=()
build_and_test build-test -- --no-suite perf "${soak[@]}"
build_and_test build-test-asan -Db_sanitize=address,undefined -Db_lundef=false -- \
    --no-suite perf --no-suite fuzz --no-suite neon --no-suite crosscheck --no-suite long --no-suite huge \
    --no-suite image --no-suite lint --no-suite soak

echo
if [ -s "$failures" ]; then
    echo "failed tests (their logs are above):"
    awk '!seen[$0]++' "$failures"  # a test shows in its line and in the summary
fi
rm -f "$failures"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
