#!/usr/bin/env python3
"""A vision appliance across the VM region (docs/ring.md section 19), without
a VM: its header is two pages (the tensor table on the second), so the
rings start after both.

  vm_region_vision.py --nib NIB --appliance APP --nibhost nibhost.py --standin vm_standin_guest.py

APP is the appliance of the identity vision blob (tests/common/vision_blob.h:
inputs a f32 1x3x8x8 and b u8 2x5; outputs b_out aliasing b, then a_out
aliasing a), so every answer must equal its request byte for byte.

1. This script plays the multiplexer (tests/common/vm_region_mux.py, an
   implementation apart from proto/vm_region.c): the appliance boots on the
   region, writes app_header_size 8192 and lays its rings out after both
   header pages; the tensor table on the second page names a, b, b_out,
   a_out; STOP ends it with exit 0.
2. `nib vm run --qemu` runs the same appliance on its region through the
   stand-in guest: nib vm run checks the two-page header and the tensor
   table, hands both to local hosts; nibhost.py reads the table and 20 runs
   (NaN, infinity and -0.0 bit patterns included) come back byte-exact
   through the relay; `nib run` (libnibhost) does the same from .npy
   files; `nib stop` stops the guest and nib vm run exits 0.
"""
import importlib.util
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from npy_file import npy, npy_data  # noqa: E402
from vm_region_mux import PAGE, STOP, STOPPED, Region, check_layout, fail, fake_image, ok, \
    standin_args, wait_ready  # noqa: E402

WANT_TABLE = [("a", 0, 768), ("b", 0, 10), ("b_out", 1, 10), ("a_out", 1, 768)]


def tensor_names(m, n):
    """(name, dir, bytes) of the first n records of the table on the second
    header page (docs/ring.md section 3: 128-byte records, the name's 64
    bytes first, dir at 64, bytes at 120)."""
    out = []
    for i in range(n):
        rec = 2 * PAGE + 128 * i
        name = bytes(m[rec:rec + 64]).split(b"\0", 1)[0].decode()
        out.append((name, struct.unpack_from("<I", m, rec + 64)[0],
                    struct.unpack_from("<Q", m, rec + 120)[0]))
    return out


def python_multiplexer(app):
    r = Region(16 << 20, max_rings=2)
    p = subprocess.Popen([app, "--name", "vmr-vision", "--spin-us", "200", "--vm-region",
                          "/proc/self/fd/%d" % r.fd], pass_fds=(r.fd,), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(r, lambda: p.poll() is None, 30, "the vision appliance")
        offs, ring_size = check_layout(r)
        hdr_size = r.u32(156)
        if hdr_size != 2 * PAGE or min(offs) < PAGE + 2 * PAGE:
            fail("a vision layout: app_header_size %d, first ring at %d" % (hdr_size, min(offs)))
        # the appliance header's features (bit 2 TENSOR), n_inputs, n_outputs
        features, n_inputs, n_outputs = r.u32(PAGE + 84), r.u32(PAGE + 92), r.u32(PAGE + 96)
        table = tensor_names(r.m, n_inputs + n_outputs)
        if not features & 4 or table != WANT_TABLE:
            fail("the tensor table on the region's second header page: %r (features 0x%x)" %
                 (table, features))
        ok("the vision appliance on the region: a two-page header, its tensor table %s, "
           "rings from offset %d" % (", ".join(t[0] for t in table), min(offs)))
        st, _, _ = r.command(STOP)
        _, err = p.communicate(timeout=30)
        if st or p.returncode != 0 or r.u32(192) != STOPPED:
            fail("STOP: status %d, exit %s: %s" % (st, p.returncode, err[-400:]))
        if "ready on the VM region: vision model, 2 inputs (778 bytes)" not in err:
            fail("the appliance's ready line: %s" % err[-600:])
        ok("STOP: the vision appliance exits 0, guest_state STOPPED")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        r.close()


def through_nib_vm_run(a, nh, work):
    d = tempfile.mkdtemp(prefix="standin-", dir=work)
    env = dict(os.environ, NIB_STANDIN_APPLIANCE=a.appliance, NIB_STANDIN_DIR=d)
    name = "vm-vision"
    vm = subprocess.Popen([a.nib, "vm", "run", fake_image(work), "--name", name, "--accel", "tcg",
                           "--region-mib", "16", "--timeout", "60", "--qemu", a.standin,
                           "--foreground", "--console", os.path.join(d, "console")],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "nib vm run: ready on" not in line:
            line = vm.stderr.readline()
            if not line and vm.poll() is not None:
                fail("nib vm run exited %s before ready" % vm.returncode)
        h = nh.Host(name, timeout=30)
        got = [(t["name"], t["dtype"], t["dims"]) for t in h.inputs + h.outputs]
        want = [("a", "f32", [1, 3, 8, 8]), ("b", "u8", [2, 5]), ("b_out", "u8", [2, 5]),
                ("a_out", "f32", [1, 3, 8, 8])]
        if not h.is_vision or got != want:
            fail("the tensor table through nib vm run: %r" % got)
        rng = random.Random(19)
        for k in range(20):
            x = bytes(rng.getrandbits(8) for _ in range(768))
            if k == 0:
                x = struct.pack("<4f", math.nan, math.inf, -math.inf, -0.0) + x[16:]
            y = bytes(rng.getrandbits(8) for _ in range(10))
            if h.run([x, y], timeout=30) != [y, x]:
                fail("run %d through the region: outputs differ from the inputs they alias" % k)
        h.close()
        ok("nibhost.py through nib vm run: the tensor table, 20 runs byte-exact "
           "(NaN, inf, -0.0 bits kept)")

        x = struct.pack("<192f", *[(i % 17) * 0.25 - 2.0 for i in range(192)])
        y = bytes(range(40, 50))
        for f, data in (("a.npy", npy("<f4", [1, 3, 8, 8], x)), ("b.npy", npy("|u1", [2, 5], y))):
            with open(os.path.join(work, f), "wb") as fh:
                fh.write(data)
        out = os.path.join(work, "out")
        os.mkdir(out)
        r = subprocess.run([a.nib, "run", "--name", name, "--input", os.path.join(work, "a.npy"),
                            "--input", os.path.join(work, "b.npy"), "-o", out],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail("nib run through nib vm run: %s" % r.stderr)
        for f, data in (("a_out.npy", x), ("b_out.npy", y)):
            with open(os.path.join(out, f), "rb") as fh:
                got = npy_data(fh.read())
            if got is None or got[1] != data:
                fail("nib run -o through the region: %s differs" % f)
        ok("nib run (libnibhost) through nib vm run: .npy in, .npy out, byte-exact")

        r = subprocess.run([a.nib, "stop", "--name", name], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            fail("nib stop: %s" % r.stderr)
        try:
            rc = vm.wait(timeout=60)
        except subprocess.TimeoutExpired:
            fail("nib vm run still runs after nib stop")
        err = vm.stderr.read()
        if rc != 0 or "the guest powered off (QEMU exit 3)" not in err:
            fail("nib vm run after nib stop: exit %d: %s" % (rc, err[-800:]))
        ok("nib stop: the guest's appliance stopped cleanly, nib vm run exited 0")
    finally:
        if vm.poll() is None:
            vm.kill()
            vm.wait()


def main():
    a, work = standin_args("nib-vmvision-")
    spec = importlib.util.spec_from_file_location("nibhost", a.nibhost)
    nh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nh)
    python_multiplexer(a.appliance)
    through_nib_vm_run(a, nh, work)


if __name__ == "__main__":
    main()
