#!/usr/bin/env python3
"""The blob layout on AArch64: linker/nib_blob.ld and model_blob/blob_incbin.S
with the AArch64 cross toolchain (glibc, static, as the kernels' NEON test
builds), a small program reading the blob through nib_blob_start and
nib_blob_size, with .data and .bss of its own; nib_elf_check must pass (blob
last, 2 MiB-aligned, bytes equal); under qemu-aarch64, when present, the
program prints the blob's size and bytes, which must match the file.

  aarch64_link.py NIB_ELF_CHECK SRCROOT BLOB WORKDIR

Skips (exit 77, saying so) without aarch64-linux-gnu-gcc. Exit 1 on failure.
"""
import os
import shutil
import subprocess
import sys

PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
extern const unsigned char nib_blob_start[];
extern const uint64_t nib_blob_size;
static int counter = 3; /* .data */
static char scratch[4096]; /* .bss */
int main(void)
{
    scratch[0] = (char)counter;
    printf("%llu %02x%02x%02x%02x %02x\n", (unsigned long long)nib_blob_size, nib_blob_start[0],
           nib_blob_start[1], nib_blob_start[2], nib_blob_start[3],
           nib_blob_start[nib_blob_size - 1]);
    return scratch[0] - 3;
}
"""


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    check, root, blob, work = sys.argv[1:5]
    cc = shutil.which("aarch64-linux-gnu-gcc")
    if not cc:
        print("SKIP: aarch64-linux-gnu-gcc not found (apt-get install gcc-aarch64-linux-gnu "
              "libc6-dev-arm64-cross, or .ci/install-deps.sh); the AArch64 blob layout was not "
              "linked")
        sys.exit(77)
    os.makedirs(work, exist_ok=True)
    src, exe = os.path.join(work, "main.c"), os.path.join(work, "blob-a64")
    with open(src, "w") as f:
        f.write(PROGRAM)
    link_blob = os.path.join(work, "nib.blob")
    if os.path.lexists(link_blob):
        os.unlink(link_blob)
    os.symlink(os.path.abspath(blob), link_blob)
    r = subprocess.run([cc, "-static", "-no-pie", "-O2", "-Wl,-T," + os.path.join(root, "linker",
                                                                                   "nib_blob.ld"),
                        "-Wl,-z,noexecstack", "-Wa,-I" + work, src,
                        os.path.join(root, "model_blob", "blob_incbin.S"), "-o", exe],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("AArch64 link failed:\n" + r.stderr)
    r = subprocess.run([check, exe, blob], capture_output=True, text=True, timeout=300)
    print(r.stdout, end="")
    if r.returncode != 0 or "blob is last" not in r.stdout:
        fail("nib_elf_check refuses the AArch64 link")
    if "machine 183" not in r.stdout:
        fail("not an AArch64 executable (EM_AARCH64 = 183)")
    print("ok: AArch64 link passes nib_elf_check")
    qemu = shutil.which("qemu-aarch64")
    if not qemu:
        print("note: qemu-aarch64 not found: the AArch64 program was linked and checked, not run")
        return
    r = subprocess.run([qemu, exe], capture_output=True, text=True, timeout=120)
    with open(blob, "rb") as f:
        data = f.read()
    want = "%d %s %02x" % (len(data), data[:4].hex(), data[-1])
    if r.returncode != 0 or r.stdout.strip() != want:
        fail("under qemu: exit %d, printed %r, want %r" % (r.returncode, r.stdout.strip(), want))
    print("ok: under qemu-aarch64 the program reads the blob: " + want)


main()
