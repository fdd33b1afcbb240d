#!/usr/bin/env python3
"""nib_elf_check's layout rules on small static programs around the synth blob
(linked with CC: musl-gcc, as appliances are):
  - linker/nib_blob.ld: passes (blob last, nib_blob_size right);
  - the layout before issue 11 (the blob inserted after .rodata/.eh_frame,
    before .data and .bss): refused, naming the sections that lie above the
    blob;
  - a blob stub without nib_blob_size (older blob_incbin.S): refused, naming
    the missing symbol.

  layout_rules.py CC NIB_ELF_CHECK SRCROOT BLOB WORKDIR
Exit 1 on failure.
"""
import os
import subprocess
import sys

PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
extern const unsigned char nib_blob_start[];
static int counter = 3; /* .data */
static char scratch[4096]; /* .bss */
int main(void)
{
    scratch[0] = (char)counter;
    printf("%02x\n", nib_blob_start[0]);
    return scratch[0] - 3;
}
"""

OLD_LAYOUT = """SECTIONS
{
  . = ALIGN(. + CONSTANT(MAXPAGESIZE), 0x200000);
  .nib_blob : ALIGN(0x200000) { KEEP(*(.nib_blob)) }
  . = ALIGN(. + CONSTANT(MAXPAGESIZE), CONSTANT(MAXPAGESIZE));
}
INSERT AFTER .exception_ranges;
"""


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    cc, check, root, blob, work = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "main.c")
    with open(src, "w") as f:
        f.write(PROGRAM)
    old_ld = os.path.join(work, "old_layout.ld")
    with open(old_ld, "w") as f:
        f.write(OLD_LAYOUT)
    stub = os.path.join(root, "model_blob", "blob_incbin.S")
    with open(stub) as f:
        text = f.read()
    cut = text.index("\t/* The size, as data")
    no_size = os.path.join(work, "blob_incbin_nosize.S")
    with open(no_size, "w") as f:
        f.write(text[:cut] + '\t.section .note.GNU-stack, "", %progbits\n')
    link_blob = os.path.join(work, "nib.blob")
    if os.path.lexists(link_blob):
        os.unlink(link_blob)
    os.symlink(os.path.abspath(blob), link_blob)

    def build(name, script, stub_file):
        exe = os.path.join(work, name)
        r = subprocess.run([cc, "-static", "-no-pie", "-O2", "-Wl,-T," + script,
                            "-Wl,-z,noexecstack", "-Wa,-I" + work, src, stub_file, "-o", exe],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("linking %s failed:\n%s" % (name, r.stderr))
        return subprocess.run([check, exe, blob], capture_output=True, text=True, timeout=300)

    r = build("new-layout", os.path.join(root, "linker", "nib_blob.ld"), stub)
    if r.returncode != 0 or "blob is last" not in r.stdout or "nib_blob_size" not in r.stdout:
        fail("linker/nib_blob.ld's layout refused:\n" + r.stdout)
    print("ok: linker/nib_blob.ld: blob last, nib_blob_size checked")

    r = build("old-layout", old_ld, stub)
    if r.returncode != 1 or "lies above the blob" not in r.stdout or ".bss" not in r.stdout:
        fail("the old layout (blob before .data/.bss) was not refused (exit %d):\n%s" %
             (r.returncode, r.stdout))
    print("ok: the old layout is refused: " +
          [l for l in r.stdout.splitlines() if "FAIL" in l][0].strip())

    r = build("no-size", os.path.join(root, "linker", "nib_blob.ld"), no_size)
    if r.returncode != 1 or "no symbol nib_blob_size" not in r.stdout:
        fail("a stub without nib_blob_size was not refused (exit %d):\n%s" % (r.returncode,
                                                                             r.stdout))
    print("ok: a blob stub without nib_blob_size is refused")


main()
