#!/usr/bin/env bash
# Build a static musl appliance around one blob.
#
#   link-appliance.sh [OPTIONS] OUTPUT BLOB SRC...
#   link-appliance.sh [OPTIONS] --archive OUTPUT.a SRC...
#
# OUTPUT  the executable to write (written to OUTPUT.tmp first, renamed only
#         once it has passed the layout check)
# BLOB    the blob made by `nib compile`; a relative path is taken relative to
#         the current directory (meson passes the path it resolved itself)
# SRC...  .c (or .S) files: the appliance's runtime, kernels and boot code;
#         and .a archives made by --archive, linked whole
#
# --archive compiles SRC... once into OUTPUT.a (and OUTPUT.a.d, its depfile)
# and links nothing: a build folder compiles the runtime once and every
# appliance it links then compiles only what differs (its topology table,
# the allocation counter), instead of the ~100 runtime sources each time.
# An archive carries the flags it was compiled with (the same flags as
# below, --numa-dir and NIB_APPLIANCE_CFLAGS included): link it with the
# same --numa-dir.
#
# Options (before OUTPUT):
#   --cc CC          C compiler driver for musl (default: musl-gcc)
#   --numa-dir DIR   a musl libnuma (DIR/lib/libnuma.a, DIR/include/numa.h, as
#                    linker/build-libnuma-musl.sh lays it out): link it and
#                    compile with -DNIB_HAVE_NUMA=1. Empty or absent:
#                    -DNIB_HAVE_NUMA=0 and no libnuma.
#   --check PROG     layout checker (linker/nib_elf_check.c, built); when
#                    absent it is compiled here with CC
#   --srcroot DIR    source root for -I and for the files below (default: the
#                    folder above this script)
#   --version V      the nibble version the appliance reports (-DNIB_VERSION="V";
#                    meson passes its project version)
#
# Environment: NIB_APPLIANCE_CFLAGS, extra compiler flags appended last.
#
# What it does:
#   1. compiles every SRC with
#        CC -static -O2 -g -std=gnu11 -D_GNU_SOURCE -fno-strict-aliasing
#           -Wall -Wextra -Werror -I<srcroot> [-mavx2 -mfma -mf16c on x86_64]
#           -DNIB_APPLIANCE=1 -DNIB_HAVE_NUMA=0|1
#           -idirafter <links to the system's linux/, asm/, asm-generic/>
#      (in parallel, one job per CPU);
#   2. links BLOB as OUTPUT.work/nib.blob and assembles
#      model_blob/blob_incbin.S from that folder with -Wa,-I<that folder>: the
#      blob path never passes through the C preprocessor;
#   3. links: CC -static -no-pie -Wl,-T,linker/nib_blob.ld -Wl,-z,noexecstack
#      (why each: see the top of linker/nib_blob.ld);
#   4. runs the layout checker on the result with BLOB: static, .nib_blob
#      alone in a read-only PT_LOAD whose p_vaddr and p_offset are multiples
#      of 2 MiB, last in the image (code and data end below it, so a blob of
#      any size links: see linker/nib_blob.ld), nib_blob_size equal to its
#      size, bytes equal to BLOB. On a violation it relinks once with
#      -z max-page-size=0x200000 (for a linker that does not raise p_align to
#      the section's alignment); a violation after that fails the build and
#      OUTPUT is not written;
#      The assembled blob object (as large as the blob) is deleted once
#      linked; OUTPUT.work keeps the small objects and the check's log.
#   5. writes OUTPUT.d, a Make-style depfile (sources, headers, linker script,
#      .incbin stub, libnuma) for meson's custom_target(depfile: ...).
set -euo pipefail

me=link-appliance
die() { printf '%s: error: %s\n' "$me" "$*" >&2; exit 1; }

cc=musl-gcc
numa_dir=
check=
srcroot=$(cd "$(dirname "$(realpath "${BASH_SOURCE[0]}")")/.." && pwd)
version=unknown
archive=0
while [ $# -gt 0 ]; do
    case $1 in
        --cc=*) cc=${1#*=} ;;
        --numa-dir=*) numa_dir=${1#*=} ;;
        --check=*) check=${1#*=} ;;
        --srcroot=*) srcroot=${1#*=} ;;
        --version=*) version=${1#*=} ;;
        --archive) archive=1 ;;
        --cc|--numa-dir|--check|--srcroot|--version)
            [ $# -ge 2 ] || die "$1 needs a value"
            case $1 in
                --cc) cc=$2 ;; --numa-dir) numa_dir=$2 ;;
                --check) check=$2 ;; --srcroot) srcroot=$2 ;; --version) version=$2 ;;
            esac
            shift ;;
        --) shift; break ;;
        -*) die "unknown option $1" ;;
        *) break ;;
    esac
    shift
done
usage="usage: $0 [--cc CC] [--numa-dir DIR] [--check PROG] [--srcroot DIR] [--version V] OUTPUT BLOB SRC... | --archive OUTPUT.a SRC..."
if [ "$archive" = 1 ]; then
    [ $# -ge 2 ] || die "$usage"
    output=$1 blob_arg=
    shift 1
else
    [ $# -ge 3 ] || die "$usage"
    output=$1 blob_arg=$2
    shift 2
fi

command -v "$cc" >/dev/null 2>&1 ||
    die "C compiler '$cc' not found; the appliance needs musl: apt-get install musl-tools (or run .ci/install-deps.sh)"

ld_script=$srcroot/linker/nib_blob.ld
stub=$srcroot/model_blob/blob_incbin.S
[ -f "$ld_script" ] || die "$ld_script missing"
[ -f "$stub" ] || die "$stub missing"

# --- the blob -----------------------------------------------------------------
blob=
if [ "$archive" = 0 ]; then
blob=$(realpath -e -- "$blob_arg" 2>/dev/null) ||
    die "blob '$blob_arg' does not exist (relative to $(pwd)); make one with: nib compile MODEL -o FILE.blob"
[ -f "$blob" ] || die "blob '$blob_arg' is not a regular file"
[ -r "$blob" ] || die "blob '$blob_arg' is not readable"
[ -s "$blob" ] || die "blob '$blob_arg' is empty"
fi

# --- work folder ----------------------------------------------------------------
work=$output.work
rm -rf -- "$work" "$output.tmp"
mkdir -p -- "$work"
work=$(realpath -e -- "$work")
# The assembled blob is as large as the blob: never left behind, linked or not.
trap 'rm -f -- "$work/nib_blob.o"' EXIT
[ -z "$blob" ] || ln -s -- "$blob" "$work/nib.blob"

# --- kernel headers ------------------------------------------------------------
# musl ships no kernel UAPI headers (<linux/futex.h>, <asm/...>); the system's
# (linux-libc-dev) are made visible after musl's own through a folder of
# links, searched last (-idirafter) so that musl's headers always win.
kinc=$work/kinc
mkdir -p -- "$kinc"
multiarch=$("$cc" -print-multiarch 2>/dev/null || true)
if [ -n "$multiarch" ] && [ -d "/usr/include/$multiarch/asm" ]; then
    ln -s -- "/usr/include/$multiarch/asm" "$kinc/asm"
fi
for d in linux asm-generic; do
    if [ -d "/usr/include/$d" ]; then ln -s -- "/usr/include/$d" "$kinc/$d"; fi
done

# --- flags ----------------------------------------------------------------------------
cflags=(-static -O2 -g -std=gnu11 -D_GNU_SOURCE -fno-strict-aliasing -ffp-contract=off
        -Wall -Wextra -Werror -I"$srcroot" -idirafter "$kinc" -DNIB_APPLIANCE=1
        -DNIB_VERSION="\"$version\"")
case $("$cc" -dumpmachine 2>/dev/null) in
    x86_64*) cflags+=(-mavx2 -mfma -mf16c) ;;
esac
numa_libs=()
numa_note=no
if [ -n "$numa_dir" ]; then
    if [ ! -f "$numa_dir/lib/libnuma.a" ] || [ ! -f "$numa_dir/include/numa.h" ]; then
        die "--numa-dir $numa_dir has no lib/libnuma.a + include/numa.h (build it with linker/build-libnuma-musl.sh)"
    fi
    numa_dir=$(realpath -e -- "$numa_dir")
    cflags+=(-DNIB_HAVE_NUMA=1 -isystem "$numa_dir/include")
    numa_libs=("$numa_dir/lib/libnuma.a")
    numa_note=yes
else
    cflags+=(-DNIB_HAVE_NUMA=0)
fi
# shellcheck disable=SC2206 # word splitting of the extra flags is intended
extra=(${NIB_APPLIANCE_CFLAGS:-})
cflags+=("${extra[@]}")
# shellcheck disable=SC2054 # the commas belong to -Wl, arguments
ldflags=(-static -no-pie -Wl,-T,"$ld_script" -Wl,-z,noexecstack)

# --- compile ------------------------------------------------------------------
jobs=$(nproc 2>/dev/null || echo 2)
objs=() deps=() archives=() srcs_seen=" "
i=0
for src in "$@"; do
    s=$(realpath -e -- "$src" 2>/dev/null) || die "source $src does not exist"
    case $srcs_seen in *" $s "*) continue ;; esac # same file listed twice
    srcs_seen+="$s "
    case $s in
        *.c|*.S) ;;
        *.a) [ "$archive" = 0 ] || die "source $src: an archive does not go into another"
             archives+=("$s"); continue ;;
        *) die "source $src: only .c and .S files are compiled (and .a archives linked)" ;;
    esac
    base=$(basename -- "$s")
    o=$work/$i-${base%.*}.o
    i=$((i + 1))
    ( "$cc" "${cflags[@]}" -MMD -MT dep -MF "$o.d" -c -o "$o" "$s" || : > "$o.failed" ) &
    objs+=("$o")
    deps+=("$o.d")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
done
wait
for o in "${objs[@]}"; do
    if [ -e "$o.failed" ] || [ ! -f "$o" ]; then die "compilation failed (see above)"; fi
done

# Make-style depfile: TARGET, the fixed inputs given, then every header the
# compiler saw (meson's custom_target(depfile: ...)).
esc() { local s=${1//\\/\\\\}; s=${s// /\\ }; s=${s//#/\\#}; printf '%s' "${s//\$/\$\$}"; }
write_depfile() {
    local target=$1 f d line
    shift
    {
        printf '%s:' "$(esc "$target")"
        for f in "$@"; do
            printf ' \\\n %s' "$(esc "$f")"
        done
        for d in "${deps[@]}"; do
            # gcc wrote "dep: a.c b.h \<newline> c.h ..."; keep what follows "dep:".
            sed -e '1s/^dep:[[:space:]]*//' -e 's/[[:space:]]*\\$//' "$d" |
                while IFS= read -r line; do
                    [ -n "$line" ] && printf ' \\\n %s' "$line"
                done
        done
        printf '\n'
    } > "$target.d"
}

if [ "$archive" = 1 ]; then
    rm -f -- "$output.tmp"
    ar rcs "$output.tmp" "${objs[@]}" || die "ar failed"
    mv -f -- "$output.tmp" "$output"
    write_depfile "$output" "$srcroot/linker/link-appliance.sh" "${numa_libs[@]}"
    printf '%s: %s: %d sources archived, libnuma: %s\n' "$me" "$output" "${#objs[@]}" "$numa_note"
    exit 0
fi

# The blob: assembled from the work folder so that "nib.blob" resolves there.
(cd "$work" && "$cc" -c -Wa,-I"$work" -o "$work/nib_blob.o" "$stub") ||
    die "assembling $stub against $blob failed"

# --- layout checker -----------------------------------------------------------------
if [ -z "$check" ]; then
    check=$work/nib_elf_check
    "$cc" -O2 -std=gnu11 -D_GNU_SOURCE -o "$check" "$srcroot/linker/nib_elf_check.c" ||
        die "building the layout checker failed"
fi

# --- link + verify ------------------------------------------------------------------------
whole=()
# shellcheck disable=SC2054 # the commas belong to -Wl, arguments
[ ${#archives[@]} -eq 0 ] || whole=(-Wl,--whole-archive "${archives[@]}" -Wl,--no-whole-archive)
link() {
    "$cc" "${cflags[@]}" "${ldflags[@]}" "$@" -o "$output.tmp" \
        "${objs[@]}" "${whole[@]}" "$work/nib_blob.o" "${numa_libs[@]}" || die "link failed"
}
link
if ! "$check" "$output.tmp" "$blob" > "$work/check.log" 2>&1; then
    # A linker that keeps p_align at the page size leaves p_offset only
    # page-aligned; -z max-page-size=2M makes p_offset == p_vaddr mod 2 MiB.
    printf '%s: layout check failed; relinking with -z max-page-size=0x200000\n' "$me" >&2
    link -Wl,-z,max-page-size=0x200000
    if ! "$check" "$output.tmp" "$blob" > "$work/check.log" 2>&1; then
        cat "$work/check.log" >&2
        rm -f -- "$output.tmp"
        die "$output violates the blob layout (2 MiB-aligned, read-only PT_LOAD holding only .nib_blob, last in the image)"
    fi
fi
mv -f -- "$output.tmp" "$output"

# --- depfile ----------------------------------------------------------------------------------
write_depfile "$output" "$ld_script" "$stub" "$blob" "$srcroot/linker/link-appliance.sh" \
    "$srcroot/linker/nib_elf_check.c" "${numa_libs[@]}" "${archives[@]}"

addr=$(sed -n 's/^  section .nib_blob: addr \(0x[0-9a-f]*\) offset \(0x[0-9a-f]*\) .*/\1 (file offset \2)/p' "$work/check.log")
printf '%s: %s: %d sources + %d archives, blob %s bytes at %s, libnuma: %s\n' "$me" "$output" "${#objs[@]}" "${#archives[@]}" \
    "$(stat -c %s "$blob")" "$addr" "$numa_note"
