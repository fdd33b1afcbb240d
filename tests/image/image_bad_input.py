#!/usr/bin/env python3
"""nib image and nib vm run on bad input, without booting anything: each case
must end with a message naming the problem and a non-zero status, and write
no image.

  image_bad_input.py NIB BLOB APP_1NODE APP_2NODE OTHER_BLOB

APP_1NODE / APP_2NODE embed BLOB with the 1-node / 2-node topology of 2
CPUs; OTHER_BLOB is a different blob."""
import os
import subprocess
import sys
import tempfile

nib, blob, app1, app2, other = sys.argv[1:6]
failures = 0


def expect(args, rc_want, needle, what, cmd=("image",)):
    global failures
    r = subprocess.run([nib, *cmd, *args], capture_output=True, text=True, timeout=120)
    bad = None
    if r.returncode < 0:
        bad = f"killed by signal {-r.returncode}"
    elif r.returncode != rc_want:
        bad = f"exit {r.returncode}, expected {rc_want}"
    elif needle not in r.stderr:
        bad = f"stderr lacks {needle!r}"
    elif "ERROR: AddressSanitizer" in r.stderr or "runtime error:" in r.stderr:
        bad = "sanitizer report"
    if bad:
        failures += 1
        print(f"FAIL: {what}: {bad}\n  stderr: {r.stderr.strip()[:600]}")
    else:
        print(f"ok: {what} -> {r.stderr.strip().splitlines()[-1][:150]}")


with tempfile.TemporaryDirectory() as d:
    out = os.path.join(d, "img")
    notblob = os.path.join(d, "not.blob")
    with open(notblob, "wb") as f:
        f.write(b"GGUF" + bytes(200))
    expect([], 2, "usage", "no operand")
    expect([blob, "--appliance", app1], 2, "-o DIR, --disk FILE", "no destination")
    expect([blob, "-o", out], 2, "--appliance APP is needed", "no appliance")
    expect([blob, "-o", out, "--appliance", app1, "--cpus", "3", "--numa", "2"], 2,
           "does not split evenly", "3 CPUs on 2 nodes")
    expect([blob, "-o", out, "--appliance", app1, "--cpus", "0"], 2, "--cpus", "0 CPUs")
    expect([blob, "-o", out, "--appliance", app1, "--memory", "lots"], 2, "--memory",
           "a memory size that is not one")
    expect([blob, "-o", out, "--appliance", app1, "--memory", "64M"], 2, "128M or more",
           "too little memory")
    expect([notblob, "-o", out, "--appliance", app1], 1, "is not a nibble blob", "not a blob")
    expect([other, "-o", out, "--appliance", app1], 1, "embeds another blob",
           "an appliance around another blob")
    expect([blob, "-o", out, "--appliance", app2, "--cpus", "2", "--numa", "1"], 1,
           "was built for another machine", "a 2-node appliance in a 1-node image")
    expect([blob, "-o", out, "--appliance", app1, "--cpus", "2", "--numa", "2"], 1,
           "was built for another machine", "a 1-node appliance in a 2-node image")
    expect([blob, "-o", out, "--appliance", os.path.join(d, "none")], 1, "--appliance",
           "a missing appliance")
    expect([blob, "-o", out, "--appliance", app1, "--kernel", os.path.join(d, "vmlinuz-x")], 1,
           "vmlinuz-x", "a missing kernel")
    expect([blob, "-o", out, "--appliance", app1, "--init", os.path.join(d, "no-init")], 1,
           "no-init", "a missing init")
    expect(["--topology", os.path.join(d, "t.txt"), blob], 2, "--topology only",
           "--topology with a blob")
    # nib vm run: refused before QEMU starts.
    os.environ["NIB_RUNTIME_DIR"] = os.path.join(d, "rt")
    vm = ("vm", "run")
    expect([], 2, "usage", "vm without run", cmd=("vm",))
    expect([d], 2, "need DIR and --name", "vm run without --name", cmd=vm)
    expect([d, "--name", "x", "--accel", "xen"], 2, "--accel auto|kvm|tcg", "an unknown accel",
           cmd=vm)
    expect([d, "--name", "x", "--region-mib", "48"], 2, "power of two", "a region of 48 MiB",
           cmd=vm)
    expect([d, "--name", "x"], 1, "manifest", "a directory without a manifest", cmd=vm)
    with open(os.path.join(d, "manifest"), "w") as f:
        f.write("nibble-image 1\ncpus 3\nnuma 2\nmemory-mib 1024\n")
    expect([d, "--name", "x"], 1, "not a complete version 1 manifest", "a manifest without a "
           "kernel and with 3 CPUs on 2 nodes", cmd=vm)
    os.unlink(os.path.join(d, "manifest"))
    expect([d, "--name", "../x"], 2, "--name", "a bad name", cmd=vm)
    if any(os.path.exists(os.path.join(out, f)) for f in ("manifest", "vmlinuz", "initramfs.cpio")):
        failures += 1
        print("FAIL: pieces of an image were left although every case failed")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
