#!/usr/bin/env bash
# Build libnuma.a for musl from Debian's numactl source.
#
#   linker/build-libnuma-musl.sh SRC_DIR OUT_DIR
#
# SRC_DIR is an unpacked numactl source (`apt-get source numactl`; the
# .ci/install-deps.sh script does that). OUT_DIR receives
#   lib/libnuma.a  include/numa.h  include/numaif.h
#
# Why not Debian's libnuma.a: it was compiled against glibc's fortified
# headers and references __sprintf_chk and friends, which musl lacks.
#
# numactl's own build is autotools; here only the six library files are
# compiled, with a config.h written below carrying the two facts configure
# would find (TLS storage class, symver attribute). musl ships no kernel
# headers, so a small include folder links linux/, asm/ and asm-generic/ to
# the system's kernel headers (package linux-libc-dev).
#
# Environment: MUSL_CC (default musl-gcc), AR (default ar).
set -euo pipefail

die() { printf 'build-libnuma-musl: error: %s\n' "$*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: $0 SRC_DIR OUT_DIR"
src=$(realpath -e -- "$1") || die "no such folder: $1"
mkdir -p -- "$2"
out=$(realpath -e -- "$2")
cc=${MUSL_CC:-musl-gcc}
ar=${AR:-ar}
command -v "$cc" >/dev/null 2>&1 || die "$cc not found (apt-get install musl-tools)"

files=(libnuma.c syscall.c distance.c affinity.c sysfs.c rtnetlink.c)
for f in "${files[@]}" numa.h numaif.h; do
    [ -f "$src/$f" ] || die "$src/$f missing: is SRC_DIR a numactl source?"
done

build=$out/build
rm -rf -- "$build"
mkdir -p -- "$build/kinc" "$out/lib" "$out/include"

# Kernel headers for musl: linux/, asm/ (arch-specific), asm-generic/.
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
[ -n "$multiarch" ] || multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || true)
asm_dir=/usr/include/$multiarch/asm
[ -d "$asm_dir" ] || asm_dir=/usr/include/asm
for d in /usr/include/linux "$asm_dir" /usr/include/asm-generic; do
    [ -d "$d" ] || die "kernel header folder $d missing (apt-get install linux-libc-dev)"
done
ln -s /usr/include/linux "$build/kinc/linux"
ln -s "$asm_dir" "$build/kinc/asm"
ln -s /usr/include/asm-generic "$build/kinc/asm-generic"

# config.h: what numactl's configure would define.
{
    echo '/* written by linker/build-libnuma-musl.sh */'
    echo '#define TLS __thread'
} > "$build/config.h"
printf 'void f_v1(void) __attribute__((symver("f@v_1")));\nvoid f_v1(void) {}\n' > "$build/symver.c"
if "$cc" -c -Werror -o "$build/symver.o" "$build/symver.c" 2>/dev/null; then
    echo '#define HAVE_ATTRIBUTE_SYMVER 1' >> "$build/config.h"
fi

# -Wno-cpp: sysfs.c includes <sys/fcntl.h>, which musl redirects with a #warning.
cflags=(-O2 -g -std=gnu11 -D_GNU_SOURCE -Wall -Wno-unused-parameter -Wno-cpp
        -I"$build" -I"$src" -idirafter "$build/kinc")
objs=()
for f in "${files[@]}"; do
    o=$build/${f%.c}.o
    "$cc" "${cflags[@]}" -c -o "$o" "$src/$f" || die "compiling $f failed"
    objs+=("$o")
done

rm -f -- "$out/lib/libnuma.a"
"$ar" rcs "$out/lib/libnuma.a" "${objs[@]}"
install -m 0644 "$src/numa.h" "$src/numaif.h" "$out/include/"
version=$(cat "$src/VERSION" 2>/dev/null || basename "$src")
echo "$version" > "$out/VERSION"

# Prove the archive is usable: a static musl program that calls libnuma.
cat > "$build/probe.c" <<'EOF'
#include <numa.h>
#include <stdio.h>
int main(void) {
    int ok = numa_available(), cpus = -1;
    if (ok >= 0) { /* numa_node_to_cpus is a versioned (symver) symbol */
        struct bitmask *m = numa_allocate_cpumask();
        if (m && numa_node_to_cpus(0, m) == 0) cpus = (int)numa_bitmask_weight(m);
        numa_free_cpumask(m);
    }
    printf("numa_available=%d numa_max_node=%d node0_cpus=%d\n", ok,
           ok < 0 ? -1 : numa_max_node(), cpus);
    return 0;
}
EOF
"$cc" -static -O2 -I"$out/include" -o "$build/probe" "$build/probe.c" "$out/lib/libnuma.a" ||
    die "a static musl program does not link against the new libnuma.a"
probe_out=$("$build/probe") || die "static libnuma probe failed to run"
printf 'build-libnuma-musl: %s -> %s/lib/libnuma.a (%s)\n' "$version" "$out" "$probe_out"
