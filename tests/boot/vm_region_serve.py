#!/usr/bin/env python3
"""The appliance's side of the VM region (docs/ring.md section 19), without a
VM: this script plays the multiplexer over a sealed memfd that the real
static appliance maps with --vm-region /proc/self/fd/N, as it maps the
ivshmem device's BAR2 inside a guest.

  vm_region_serve.py --appliance APP --nibhost tools/host/nibhost.py

Checks: a bad multiplexer line refuses boot by name; the layout the
appliance writes passes the same checks as proto/vm_region.c makes (offsets
page-aligned, inside, disjoint; epoch and geometry equal to the appliance
header's); ATTACH resets the ring and answers its attach_seq; a request
written into the region's ring is answered with exactly the ids the same
appliance gives a local host over its socket (nibhost.py); malformed and
out-of-range commands are answered MALFORMED or NO_RING and change nothing;
DETACH frees the ring; a multiplexer whose heartbeat stops has its rings
dropped, and attaches again once it beats; STOP ends the appliance with
exit 0 and guest_state STOPPED.
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from vm_region_mux import (ATTACH, DETACH, MALFORMED, NO_RING, PAGE, READY, RING_MAGIC, STOP,  # noqa: E402
                           STOPPED, MAGIC, Region, ask_region, check_layout, fail, ok, wait_ready)

PROMPT = b"Once upon a time"
MAX_TOKENS = 12


def start(app, region, name, extra=()):
    return subprocess.Popen([app, "--name", name, "--spin-us", "200", "--vm-region",
                             "/proc/self/fd/%d" % region.fd, *extra],
                            pass_fds=(region.fd,), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def refused(app, region, name, want):
    p = start(app, region, name)
    out, err = p.communicate(timeout=30)
    if p.returncode != 2 or "refusing to boot: vm-region" not in err or want not in err:
        fail("bad region (%s): exit %s, stderr %r" % (want, p.returncode, err[-400:]))
    ok("boot refused: " + err.strip().splitlines()[-1])


def ask_local(app, nibhost, name):
    p = subprocess.Popen([app, "--name", name, "--spin-us", "200"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    sys.path.insert(0, os.path.dirname(nibhost))
    import nibhost as nh
    deadline = time.time() + 30
    while True:
        try:
            with nh.Host(name, timeout=5) as h:
                res = h.ask(PROMPT, max_tokens=MAX_TOKENS)
                ids, text = list(res.generated_ids), bytes(res.text)
                h.stop()
            break
        except Exception as e:  # not up yet
            if time.time() > deadline or p.poll() is not None:
                fail("local appliance: %s" % e)
            time.sleep(0.05)
    p.communicate(timeout=30)
    return ids, text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--appliance", required=True)
    ap.add_argument("--nibhost", required=True)
    a = ap.parse_args()
    os.environ["NIB_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="nib-vmr-")
    size = 8 << 20

    bad = Region(size, magic=MAGIC ^ 1)
    refused(a.appliance, bad, "bad1", "magic")
    bad.close()
    bad = Region(size, region_size=size // 2)
    refused(a.appliance, bad, "bad2", "differs from the device")
    bad.close()
    bad = Region(size, max_rings=0)
    refused(a.appliance, bad, "bad3", "max_rings")
    bad.close()

    want_ids, want_text = ask_local(a.appliance, a.nibhost, "local")
    ok("local host over the socket: %d ids" % len(want_ids))

    r = Region(size, max_rings=4)
    p = start(a.appliance, r, "vm", ["--max-hosts", "2"])
    wait_ready(r, lambda: p.poll() is None, 30, "the appliance")
    offs, ring_size = check_layout(r)
    if len(offs) != 2:
        fail("--max-hosts 2 laid out %d rings" % len(offs))

    status, ring, aseq = r.command(ATTACH, 0, os.getuid())
    rh_magic, rh_epoch, rh_index, rh_aseq = struct.unpack_from("<QQII", r.m, offs[0])
    if status or aseq != 1 or rh_magic != RING_MAGIC or rh_index != 0 or rh_aseq != 1 or \
            rh_epoch != r.u64(128):
        fail("ATTACH: status %d attach_seq %d, ring header %x/%d/%d" % (status, aseq, rh_magic,
                                                                       rh_index, rh_aseq))
    if r.u32(PAGE + 208) != 1:
        fail("hosts_attached is not 1 after ATTACH")
    ok("ATTACH ring 0: ring header written, attach_seq 1, hosts_attached 1")

    status, _, ids, text = ask_region(r, offs[0], PROMPT, MAX_TOKENS)
    if status != 1 or ids != want_ids or text != want_text:
        fail("region answer %d %r %r, local %r %r" % (status, ids, text, want_ids, want_text))
    ok("request through the region: the same %d ids and text as the local host" % len(ids))

    st, _, _ = r.command(0, raw=struct.pack("<III", 9, 0, 0) + bytes(48))
    if st != MALFORMED:
        fail("unknown command type answered %d" % st)
    st, _, _ = r.command(0, raw=struct.pack("<III", ATTACH, 7, 0) + bytes(48))
    if st != MALFORMED:
        fail("ATTACH of ring 7 of 2 answered %d" % st)
    st, _, _ = r.command(0, raw=struct.pack("<III", DETACH, 0, 0) + bytes(47) + b"\1")
    if st != MALFORMED or r.u32(PAGE + 208) != 1:
        fail("DETACH with a reserved byte answered %d" % st)
    st, _, _ = r.command(ATTACH, 0)
    if st != NO_RING:
        fail("a second ATTACH of ring 0 answered %d" % st)
    ok("malformed commands answered MALFORMED, an attached ring NO_RING; nothing changed")

    st, _, _ = r.command(DETACH, 0)
    if st or r.u32(PAGE + 208) != 0:
        fail("DETACH: status %d, hosts_attached %d" % (st, r.u32(PAGE + 208)))
    st, _, _ = r.command(DETACH, 0)
    if st != NO_RING:
        fail("DETACH of a free ring answered %d" % st)
    st, _, aseq = r.command(ATTACH, 0)
    if st or aseq != 2:
        fail("re-ATTACH: status %d attach_seq %d" % (st, aseq))
    ok("DETACH frees the ring; re-ATTACH resets it (attach_seq 2)")

    r.beating = False
    deadline = time.time() + 15
    while r.u32(PAGE + 208) != 0:
        if time.time() > deadline:
            fail("rings not dropped while the multiplexer's heartbeat stood still")
        time.sleep(0.1)
    beat = r.u64(200)
    time.sleep(0.3)
    if r.u64(200) == beat:
        fail("the appliance's heartbeat does not move")
    r.beating = True
    time.sleep(0.3)
    st, _, aseq = r.command(ATTACH, 1)
    if st or aseq != 1:
        fail("ATTACH after the multiplexer came back: %d" % st)
    ok("a multiplexer that stops beating loses its rings; beating again, it attaches")

    st, _, _ = r.command(STOP)
    out, err = p.communicate(timeout=30)
    if st or p.returncode != 0 or r.u32(192) != STOPPED or r.u32(PAGE + 192) != 3:
        fail("STOP: status %d, exit %s, guest_state %d: %s" % (st, p.returncode, r.u32(192),
                                                              err[-400:]))
    ok("STOP: the appliance exits 0, guest_state STOPPED")
    r.close()


if __name__ == "__main__":
    main()
