#!/usr/bin/env python3
"""A vision appliance through the real protocol (docs/ring.md 6.4), kind TENSOR.

Boots the static appliance built around the identity vision blob
(tests/common/vision_blob.h: inputs a f32 1x3x8x8 and b u8 2x5, outputs b_out
aliasing b then a_out aliasing a, no ops) in a fresh runtime directory, then:

  - nibhost.py reads the tensor table (names, dtypes, dims) and run() gives
    every output back byte-exact, NaNs and infinities included;
  - nib run (libnibhost) does the same from raw and .npy files, printing a
    summary, the whole tensors as JSON, and .npy files with -o;
  - inputs of the wrong size, dims, type or count are refused before sending,
    naming the input; text to a vision appliance is refused by both hosts;
  - a hostile host's raw requests (wrong byte count, kind TEXT/CHAT/MEASURE,
    tokens, flags) are answered bad_request naming the field, and the
    appliance serves the next request exactly;
  - (across the VM region: tests/boot/vm_region_vision.py);
  - nib stop ends it cleanly, and (the appliance counts allocation calls) none
    happened after READY.

usage: test_vision.py --nib NIB --appliance APP --nibhost nibhost.py
"""
import argparse
import importlib.util
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import npy_file  # noqa: E402
from npy_file import npy  # noqa: E402


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def npy_data(raw):
    """The header and data bytes of a .npy file (our writer's: version 1)."""
    got = npy_file.npy_data(raw)
    if got is None:
        fail("not a version 1 .npy file")
    return got


def f32_json(text):
    """A --json document with every f32 value as the float32 it prints (nib run writes 9
    digits, Python's json all of a double's)."""
    doc = json.loads(text)
    for o in doc["outputs"]:
        if o["dtype"] == "f32":
            o["data"] = [None if v is None else struct.unpack("<f", struct.pack("<f", v))[0]
                         for v in o["data"]]
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nib", required=True)
    ap.add_argument("--appliance", required=True)
    ap.add_argument("--nibhost", required=True)
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("nibhost", args.nibhost)
    nh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nh)
    tmp = tempfile.mkdtemp(prefix="nibvision")
    os.environ["NIB_RUNTIME_DIR"] = os.path.join(tmp, "run")
    name = "vision"
    app = subprocess.Popen([args.appliance, "--name", name, "--spin-us", "200"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_all(args, nh, tmp, name, app)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def run_all(args, nh, tmp, name, app):
    rng = random.Random(15)
    h = nh.attach(name, app, boot_timeout=60, timeout=10)
    if not h.is_vision:
        fail("the header does not say TENSOR (features 0x%x)" % h.features)
    want_in = [{"name": "a", "dtype": "f32", "dims": [1, 3, 8, 8], "bytes": 768},
               {"name": "b", "dtype": "u8", "dims": [2, 5], "bytes": 10}]
    want_out = [{"name": "b_out", "dtype": "u8", "dims": [2, 5], "bytes": 10},
                {"name": "a_out", "dtype": "f32", "dims": [1, 3, 8, 8], "bytes": 768}]
    got_in = [{k: t[k] for k in ("name", "dtype", "dims", "bytes")} for t in h.inputs]
    got_out = [{k: t[k] for k in ("name", "dtype", "dims", "bytes")} for t in h.outputs]
    if got_in != want_in or got_out != want_out:
        fail("tensor table %r / %r" % (got_in, got_out))
    ok("nibhost.py reads the tensor table: %s -> %s" %
       (", ".join(t["name"] for t in got_in), ", ".join(t["name"] for t in got_out)))

    # byte-exact, NaN and infinity bit patterns included
    for k in range(20):
        a = bytes(rng.getrandbits(8) for _ in range(768))
        if k == 0:
            a = struct.pack("<4f", math.nan, math.inf, -math.inf, -0.0) + a[16:]
        b = bytes(rng.getrandbits(8) for _ in range(10))
        outs = h.run([a, b], timeout=30)
        if outs != [b, a]:
            fail("run %d: outputs differ from the inputs they alias" % k)
    ok("nibhost.py: 20 runs byte-exact (NaN, inf, -0.0 bits kept)")

    for bad_inputs, what in (([b"\0" * 767, b"\0" * 10], "input 0 (a): 767 bytes"),
                             ([b"\0" * 768], "1 input tensors given, the model takes 2"),
                             ([b"\0" * 768, b"\0" * 11], "input 1 (b): 11 bytes")):
        try:
            h.run(bad_inputs)
            fail("nibhost.py sent %s" % what)
        except nh.NibError as e:
            if what not in str(e):
                fail("nibhost.py refusal %r does not say %r" % (str(e), what))
    try:
        h.ask("hello", max_tokens=4)
        fail("nibhost.py sent text to a vision appliance")
    except nh.NibError as e:
        if "vision model" not in str(e):
            fail("text refusal: %s" % e)
    ok("nibhost.py refuses wrong sizes and counts, and text, before sending")

    # A hostile (or older) host writes requests itself.
    def raw_request(kind, prompt_len, max_tokens=0, flags=0, temperature=0.0):
        i = h._claim()
        base = h._so(i)
        h.mm[base + nh.S_REQ:base + nh.S_REQ + 64] = struct.pack(
            "<IIfIQI36x", prompt_len, max_tokens, temperature, flags, 0, kind)
        for off in (nh.S_N_TOKENS, nh.S_N_PROMPT, nh.S_TEXT_LEN, nh.S_STATUS):
            h._put32(base + off, 0)
        ticket = h._r64(nh.R_NEXT_TICKET) + 1
        h._put64(nh.R_NEXT_TICKET, ticket)
        h._put64(base + nh.S_TICKET, ticket)
        h._put32(base + nh.S_STATE, nh.SLOT_SUBMITTED)
        h.sock.send(nh._msg(nh.CTL_KICK))
        hd = nh.Handle(i, ticket)
        p = h.wait(hd, timeout=30)
        h.release(hd)
        return p

    for kind, plen, mt, flags, field in (
            (nh.KIND_TENSOR, h.inputs_len - 1, 0, 0, "prompt_len"),
            (nh.KIND_TENSOR, h.inputs_len + 64, 0, 0, "prompt_len"),
            (nh.KIND_TENSOR, h.inputs_len, 5, 0, "max_tokens"),
            (nh.KIND_TENSOR, h.inputs_len, 0, 1, "flags"),
            (nh.KIND_TEXT, 5, 8, 0, "kind"), (nh.KIND_CHAT, 24, 8, 0, "kind"),
            (nh.KIND_MEASURE, 4, 1, 0, "kind"), (7, 0, 0, 0, "kind")):
        p = raw_request(kind, plen, mt, flags)
        if p.status_name != "bad_request" or not p.error.startswith(field + ":"):
            fail("kind %d, prompt_len %d: %s %r (want bad_request naming %s)" %
                 (kind, plen, p.status_name, p.error, field))
        a = bytes(rng.getrandbits(8) for _ in range(768))
        b = bytes(rng.getrandbits(8) for _ in range(10))
        if h.run([a, b], timeout=30) != [b, a]:
            fail("the run after a refused request differs")
    ok("hostile requests refused naming the field (prompt_len, max_tokens, flags, kind); "
       "the next run exact")
    h.close()

    # nib run (libnibhost): raw and .npy in, summary, JSON and .npy out
    vals = [rng.uniform(-3, 3) for _ in range(192)]
    a = struct.pack("<192f", *vals)
    vals = list(struct.unpack("<192f", a))  # as float32
    b = bytes(range(10, 20))
    files = {"a.npy": npy("<f4", [1, 3, 8, 8], a), "a.raw": a, "b.raw": b,
             "b.npy": npy("|u1", [2, 5], b), "a_bad.npy": npy("<f4", [1, 3, 8, 7], a[:672]),
             "a_u8.npy": npy("|u1", [1, 3, 8, 8], a[:192]), "short.raw": a[:700],
             "junk.npy": b"\x93NUMPY\x01\x00\xff\xff{"}
    for f, data in files.items():
        with open(os.path.join(tmp, f), "wb") as fh:
            fh.write(data)

    def nib(*argv, want=0):
        r = subprocess.run([args.nib, *argv], capture_output=True, text=True, timeout=60)
        if r.returncode != want:
            fail("nib %s: exit %d (want %d): %s%s" % (" ".join(argv), r.returncode, want,
                                                      r.stdout, r.stderr))
        return r

    def inp(*names):
        out = []
        for n in names:
            out += ["--input", os.path.join(tmp, n)]
        return out

    r = nib("run", "--name", name, *inp("a.npy", "b.raw"))
    lines = r.stdout.splitlines()
    if len(lines) != 2 or not lines[0].startswith("b_out u8 2x5: min 10 max 19") or \
            not lines[1].startswith("a_out f32 1x3x8x8: min "):
        fail("nib run summary: %r" % r.stdout)
    r = nib("run", "--name", name, "--json", *inp("a.raw", "b.npy"))
    j = json.loads(r.stdout)
    outs = {o["name"]: o for o in j["outputs"]}
    if j["status"] != "ok" or outs["b_out"]["data"] != list(range(10, 20)) or \
            outs["a_out"]["dims"] != [1, 3, 8, 8] or outs["a_out"]["dtype"] != "f32" or \
            [struct.unpack("<f", struct.pack("<f", v))[0] for v in outs["a_out"]["data"]] != vals:
        fail("nib run --json: %s" % r.stdout[:300])
    odir = os.path.join(tmp, "out")
    os.mkdir(odir)
    nib("run", "--name", name, "-o", odir, *inp("a.npy", "b.npy"))
    for fname, want_head, data in (("a_out.npy", "'<f4'", a), ("b_out.npy", "'|u1'", b)):
        with open(os.path.join(odir, fname), "rb") as fh:
            head, got = npy_data(fh.read())
        if want_head not in head or got != data:
            fail("nib run -o: %s is %r, %d bytes" % (fname, head, len(got)))
    ok("nib run: raw and .npy in; summary, --json and -o .npy out, byte-exact")

    # nibhost.py run prints what nib run prints (summary and JSON)
    for extra in ((), ("--json",)):
        ours = nib("run", "--name", name, *extra, *inp("a.npy", "b.raw")).stdout
        r = subprocess.run([sys.executable, args.nibhost, "run", "--name", name, *extra,
                            *inp("a.npy", "b.raw")], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail("nibhost.py run %s: %s" % (" ".join(extra), r.stderr))
        same = f32_json(ours) == f32_json(r.stdout) if extra else ours == r.stdout
        if not same:
            fail("nibhost.py run %s differs from nib run:\n%s\n%s" % (" ".join(extra), ours,
                                                                     r.stdout))
    r = subprocess.run([sys.executable, args.nibhost, "run", "--name", name,
                        *inp("a_bad.npy", "b.raw")], capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or "input 0 (a) takes f32 1x3x8x8" not in r.stderr:
        fail("nibhost.py run with wrong dims: %d %s" % (r.returncode, r.stderr))
    ok("nibhost.py run: the same summary and JSON as nib run; wrong dims refused")

    for argv, say in ((inp("a_bad.npy", "b.raw"), "input 0 (a) takes f32 1x3x8x8"),
                      (inp("a_u8.npy", "b.raw"), ".npy holds uint8"),
                      (inp("short.raw", "b.raw"), "is 768 bytes"),
                      (inp("junk.npy", "b.raw"), ".npy"),
                      (inp("a.raw"), "the model takes 2 inputs"),
                      (inp("a.raw", "b.raw", "b.raw"), "the model takes 2 inputs")):
        r = nib("run", "--name", name, *argv, want=1)
        if say not in r.stderr:
            fail("nib run refusal %r does not say %r" % (r.stderr, say))
    r = nib("ask", "--name", name, "hello", want=1)
    if "vision model" not in r.stderr:
        fail("nib ask to a vision appliance: %r" % r.stderr)
    ok("nib run refuses wrong dims, types, sizes, counts and malformed .npy; nib ask refused")

    st = json.loads(nib("stats", "--name", name, "--json").stdout)
    if st["requests_rejected"] != 8 or st["tokens_run"] < 30 or \
            st["requests_done"] != st["tokens_run"] + st["requests_rejected"]:
        fail("nib stats on a vision appliance: %s" % st)
    ok("nib stats: %d runs, %d refused" % (st["tokens_run"], st["requests_rejected"]))

    nib("stop", "--name", name)
    try:
        rc = app.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("the appliance did not exit after nib stop")
    err = app.stderr.read()
    if rc != 0 or "vision model, 2 inputs (778 bytes), 2 outputs (832 bytes)" not in err:
        fail("appliance exit %d: %s" % (rc, err))
    if "seccomp: serving thread allows" not in err:
        fail("the appliance did not install its seccomp filters: %s" % err)
    ok("the appliance booted the vision blob (seccomp on) and stopped cleanly")
    # built with -DNIB_COUNT_ALLOC (tests/meson.build): every counter 0 after READY
    line = [x for x in err.splitlines() if x.startswith("nibble: allocation calls after READY: ")]
    if not line:
        fail("no allocation count in the appliance's log: %s" % err)
    counts = dict((k.strip(), int(v)) for k, v in
                  (p.rsplit(" ", 1) for p in line[0].split(": ", 1)[1].split(", ")))
    if len(counts) < 8 or any(counts.values()):
        fail("allocation after READY while serving tensors: %s" % counts)
    ok("no malloc/calloc/realloc/free/aligned_alloc/mmap/munmap/brk after READY")


if __name__ == "__main__":
    main()
