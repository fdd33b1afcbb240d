#!/usr/bin/python3
"""Resident memory of a vision appliance once serving (report only): boots
APPLIANCE, sends one run of zero inputs through nibhost.py, then sums Rss
and Private_Hugetlb / Shared_Hugetlb over /proc/PID/smaps.

usage: vision-rss.py APPLIANCE [--workers N]
(build APPLIANCE with `meson setup B -Dblob=MODEL.blob && ninja -C B appliance`,
or linker/link-appliance.sh)
"""
import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def resident_kb(pid):
    """What process PID holds in memory, in KiB: Rss, Private_Hugetlb and Shared_Hugetlb
    summed over /proc/PID/smaps (hugetlbfs pages are not counted in Rss)."""
    kb = {"Rss": 0, "Private_Hugetlb": 0, "Shared_Hugetlb": 0}
    with open("/proc/%d/smaps" % pid) as f:
        for ln in f:
            k = ln.split(":")[0]
            if k in kb:
                kb[k] += int(ln.split()[1])
    return kb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("appliance")
    ap.add_argument("--workers", type=int, default=0)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location(
        "nibhost", os.path.join(HERE, "..", "host", "nibhost.py"))
    nh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nh)
    tmp = tempfile.mkdtemp(prefix="nib-rss-")
    os.environ["NIB_RUNTIME_DIR"] = tmp
    argv = [a.appliance, "--name", "rss"] + (["--workers", str(a.workers)] if a.workers else [])
    app = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        h = nh.attach("rss", app, timeout=60)
        h.run([bytes(t["bytes"]) for t in h.inputs], timeout=600)
        kb = resident_kb(app.pid)
        h.close()
        total = sum(kb.values())
        print("%s: resident once serving %.1f MB (Rss %.1f MB, Private_Hugetlb %.1f MB, "
              "Shared_Hugetlb %.1f MB)" % (os.path.basename(a.appliance), total / 1024,
                                           kb["Rss"] / 1024, kb["Private_Hugetlb"] / 1024,
                                           kb["Shared_Hugetlb"] / 1024))
    finally:
        app.terminate()
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            app.kill()
            app.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
