#!/usr/bin/python3
"""ResNet-50's appliance in the quantised default under 50 MB resident
(issue 15 point 6; docs/vision.md, "ResNet-50"): `nib synth resnet50`,
`nib compile` with no precision option (4-bit weights, the first and last
weighted node at 8, int8 activations from the built-in calibration set),
link-appliance.sh at test time, boot on 2 workers, one request of an
image-like input through nibhost.py, and then the resident memory summed
over /proc/PID/smaps (Rss + Private_Hugetlb + Shared_Hugetlb) must be
< 50 MB; the answer's 1000 logits must be finite and not all equal.
Reported, never asserted: `nib eval` of the same compile against f32 on
its synthetic set (top-1 agreement, max and mean |error| of the logits).

usage: test_resnet_rss.py --nib NIB --nibhost nibhost.py -- LINK_PREFIX... @@ APPLIANCE_SOURCES...
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from checks import Checks, sh  # noqa: E402

LIMIT_MB = 50.0
check = Checks()


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    argv = sys.argv[1:]
    if "--" not in argv or "@@" not in argv:
        print(__doc__)
        return 2
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--nib", required=True)
    ap.add_argument("--nibhost", required=True)
    args = ap.parse_args(argv[:cut])
    rest = argv[cut + 1:]
    link, sources = rest[:rest.index("@@")], rest[rest.index("@@") + 1:]
    nh = load("nibhost", args.nibhost)
    rss = load("vision_rss", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                          "tools", "measure", "vision-rss.py"))
    tmp = tempfile.mkdtemp(prefix="nib-resnet-rss-")
    os.environ["NIB_RUNTIME_DIR"] = os.path.join(tmp, "run")
    try:
        onnx, blob, app_path = (os.path.join(tmp, n) for n in ("r50.onnx", "r50.blob", "r50-app"))
        t0 = time.monotonic()
        sh([args.nib, "synth", "resnet50", "-o", onnx, "--seed", "4"])
        r = sh([args.nib, "compile", onnx, "-o", blob])
        print("     " + r.stderr.strip().splitlines()[-1])
        sh(link + [app_path, blob] + sources)
        print("     synthesized, compiled and linked in %.1f s" % (time.monotonic() - t0), flush=True)

        app = subprocess.Popen([app_path, "--name", "r50", "--workers", "2"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            h = nh.attach("r50", app, timeout=60)
            # an image-like input: a gradient in each plane, in ImageNet's normalised range
            inp = h.inputs[0]
            n = inp["bytes"] // 4
            import array
            import math
            x = array.array("f", (math.sin(i * 0.001) * 1.5 for i in range(n)))
            outs = h.run([x.tobytes()], timeout=600)
            logits = array.array("f")
            logits.frombytes(bytes(outs[0]))
            check(len(logits) == 1000 and all(math.isfinite(v) for v in logits)
                  and max(logits) > min(logits),
                  "one request served: 1000 finite logits, not all equal")
            kb = rss.resident_kb(app.pid)
            h.close()
            total = sum(kb.values()) / 1024
            check(total < LIMIT_MB,
                  "resident once serving %.1f MB < %.0f MB (Rss %.1f, Private_Hugetlb %.1f, "
                  "Shared_Hugetlb %.1f MB)" % (total, LIMIT_MB, kb["Rss"] / 1024,
                                               kb["Private_Hugetlb"] / 1024,
                                               kb["Shared_Hugetlb"] / 1024))
        finally:
            app.terminate()
            try:
                app.wait(timeout=30)
            except subprocess.TimeoutExpired:
                app.kill()
                app.wait()

        r = sh([args.nib, "eval", onnx, "--count", "8", "--json"])
        o = json.loads(r.stdout)["outputs"][0]
        print("     report: nib eval (quantised default vs f32, 8 synthetic images): top-1 agrees "
              "on %.0f %%, logits max|err| %.3g, mean|err| %.3g, max|f32| %.3g" %
              (100 * o["top1"], o["max_abs"], o["mean_abs"], o["max_ref"]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return check.status()


if __name__ == "__main__":
    sys.exit(main())
