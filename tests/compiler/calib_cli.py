#!/usr/bin/env python3
"""nib compile --method / --calib / --calib-tokens from the command line.

  calib_cli.py NIB MODEL.gguf
  calib_cli.py NIB SHAPE --bounded-memory LAYERS   (suite long)

- gptq and search give the same blob bytes with 1, 2 or 3 calibration
  threads and on the scalar kernels (NIB_CALIB_THREADS, NIB_CALIB_SCALAR):
  the f32 calibration run (a team splitting every op as the runtime does),
  the Hessians, gptq and the packer's rounding (rows split among threads)
  all give the same bits for any count, so the same inputs give the same
  blob on every machine;
- rtn, search and gptq give different weights but the same layout (the
  same size and tensor table);
- --calib FILE and --calib-tokens change the calibration (and say so in
  the progress line); bad values are refused with a message naming them.
With --bounded-memory: nib synth SHAPE --layers LAYERS, a real-width model
of a few layers (f16); its peak memory under gptq stays below the f32 model, the source
file and ONE layer's Hessians (with their working copy) and the packed result, with
less slack than every layer's Hessians at once would take.
"""
import os
import re
import resource
import subprocess
import sys
import tempfile

nib, model = sys.argv[1], sys.argv[2]
bounded = "--bounded-memory" in sys.argv[3:]
if not bounded and not os.path.isfile(model):
    print("SKIP: %s not found; the calibration checks did not run" % model)
    sys.exit(77)
failures = 0


def check(ok, msg):
    global failures
    print(("ok: " if ok else "FAIL: ") + msg)
    failures += 0 if ok else 1


def compile_(out, *args, env=None, expect=0):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([nib, "compile", model, "-o", out, *args], capture_output=True, text=True,
                       env=e, timeout=3000)
    if r.returncode != expect:
        check(False, "nib compile %s: exit %d, wanted %d: %s" % (args, r.returncode, expect,
                                                                  r.stderr[-800:]))
    return r


def read(p):
    with open(p, "rb") as f:
        return f.read()


with tempfile.TemporaryDirectory() as tmp:
    P = lambda n: os.path.join(tmp, n)
    if bounded:
        shape, model = model, P("model.gguf")
        subprocess.run([nib, "synth", shape, "--layers", sys.argv[4], "-o", model], check=True,
                       timeout=600)
        r = compile_(P("b.blob"), "--quant", "q4", "--method", "gptq", "--calib-tokens", "256")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        m = re.search(r"(\d+) layers, dim (\d+).*?([0-9.]+) MB of weights", r.stdout + r.stderr)
        if not m:
            check(False, "no summary line from nib compile: %s" % (r.stdout + r.stderr)[-500:])
            sys.exit(1)
        src = os.path.getsize(model)
        # the f32 model in memory: 4 bytes per weight of the source (f16: 2)
        f32 = 2 * src
        layers, dim = int(m.group(1)), int(m.group(2))
        ffn = {2048: 5632}.get(dim, 4 * dim)
        one_layer_h = 2 * 8 * (ffn * ffn)  # the largest Hessian and its copy
        all_h = layers * 8 * (3 * dim * dim + ffn * ffn)
        packed = float(m.group(3)) * 1e6  # gptq's results, held until the packer writes them
        bound = f32 + src + packed + one_layer_h + 512 * 2**20
        check(r.returncode == 0 and peak <= bound,
              "gptq on %d layers: peak %.0f MB <= %.0f MB (f32 model %.0f, source %.0f, packed "
              "%.0f, one layer's Hessians %.0f, 512 of slack; every layer's at once would add "
              "%.0f)" % (layers, peak / 2**20, bound / 2**20, f32 / 2**20, src / 2**20,
                         packed / 2**20, one_layer_h / 2**20, all_h / 2**20))
        check("calibrating on 256 tokens" in r.stderr and "%d/%d" % (layers + 2, layers + 2) in
              r.stderr, "progress bar: one step per layer, the embedding and the head")
        print("%d failures" % failures)
        sys.exit(1 if failures else 0)

    blobs = {}
    for method in ("rtn", "search", "gptq"):
        compile_(P(method + ".blob"), "--quant", "q4", "--method", method)
        blobs[method] = read(P(method + ".blob"))
    check(len({len(b) for b in blobs.values()}) == 1 and
          len(set(blobs.values())) == 3, "rtn, search and gptq: same size, different weights")
    for method in ("search", "gptq"):
        compile_(P("x.blob"), "--quant", "q4", "--method", method,
                 env={"NIB_CALIB_THREADS": "1", "NIB_CALIB_SCALAR": "1"})
        compile_(P("y.blob"), "--quant", "q4", "--method", method,
                 env={"NIB_CALIB_THREADS": "3"})
        compile_(P("z.blob"), "--quant", "q4", "--method", method,
                 env={"NIB_CALIB_THREADS": "2"})
        check(read(P("x.blob")) == blobs[method] and read(P("y.blob")) == blobs[method] and
              read(P("z.blob")) == blobs[method],
              "%s: the same bytes with 1 thread on the scalar kernels and with 2 and 3 threads" %
              method)
    # the default method is gptq
    compile_(P("d.blob"), "--quant", "q4")
    check(read(P("d.blob")) == blobs["gptq"], "the default method is gptq")
    # the user's calibration text, and the token cap
    with open(P("calib.txt"), "w") as f:
        f.write("The cat sat on the mat. The dog ran to the park and played with a ball. " * 20)
    r = compile_(P("c.blob"), "--quant", "q4", "--calib", P("calib.txt"), "--calib-tokens", "100")
    check("calibrating on 100 tokens" in r.stderr and read(P("c.blob")) != blobs["gptq"],
          "--calib FILE --calib-tokens 100: 100 tokens of the user's text, other weights")
    # f32 needs no calibration
    r = compile_(P("f.blob"), "--quant", "f32")
    check("calibrating" not in r.stderr, "--quant f32: no calibration")
    # refusals
    open(P("empty.txt"), "w").close()
    for args, code, want in [
        (("--method", "best"), 2, "unknown method 'best'"),
        (("--calib", P("missing.txt")), 1, "missing.txt"),
        (("--calib", P("empty.txt")), 1, "calib"),
        (("--calib-tokens", "1"), 2, "--calib-tokens"),
        (("--calib-tokens", "x"), 2, "--calib-tokens"),
    ]:
        r = compile_(P("e.blob"), "--quant", "q4", *args, expect=code)
        check(r.returncode == code and want in r.stderr and not os.path.exists(P("e.blob")),
              "%s refused (exit %d): %s" % (" ".join(args), code, r.stderr.strip()[:150]))

print("%d failures" % failures)
sys.exit(1 if failures else 0)
