#!/usr/bin/env python3
"""nib bench's GEMV report (--quick, one format): the stream-read lines
for 1 and 2 threads; the read-order line (docs/benchmarks.md, "The read
order, found") with its three figures positive and each ratio the
quotient of the figures it is made of; one GEMV row per LLaMA shape, each
memory ratio its GB/s over the read of the same threads. Times are never
compared with anything: this checks the report, not the machine.

  bench_report.py NIB
"""
import re
import subprocess
import sys

nib = sys.argv[1]
failures = 0


def check(ok, msg):
    global failures
    print(("ok: " if ok else "FAIL: ") + msg)
    failures += 0 if ok else 1


def near(ratio, a, b):
    """a printed 2-decimal ratio against the quotient of printed 1-decimal
    figures: each figure off by up to 0.05, the ratio by up to 0.005"""
    return b > 0 and abs(ratio - a / b) <= 0.005 + 0.05 / b + 0.05 * a / b ** 2 + 1e-9


r = subprocess.run([nib, "bench", "--quick", "--format", "q4/32"], capture_output=True,
                   text=True, timeout=300)
check(r.returncode == 0, f"nib bench --quick exits 0 ({r.returncode}: {r.stderr.strip()[:200]})")
out = r.stdout

reads = {}
for m in re.finditer(r"^\s+(\d) thread\(s\): ([0-9.]+) GB/s \(", out, re.M):
    reads[int(m.group(1))] = float(m.group(2))
check(sorted(reads) == [1, 2] and all(v > 0 for v in reads.values()),
      f"stream read for 1 and 2 threads ({reads})")

m = re.search(r"in stream order ([0-9.]+) GB/s; halves in turn ([0-9.]+) \(([0-9.]+)\); in turn, "
              r"prefetched in stream order (\d+) B ahead ([0-9.]+) \(([0-9.]+)\)", out)
check(m is not None, "read-order line present")
if m:
    seq, turns, rt, dist, pf, rp = (float(m.group(i)) for i in range(1, 7))
    check(seq > 0 and turns > 0 and pf > 0, f"read-order figures positive ({seq}, {turns}, {pf})")
    check(near(rt, turns, seq), f"halves-in-turn ratio {rt} = {turns} / {seq}")
    check(near(rp, pf, seq), f"prefetched ratio {rp} = {pf} / {seq}")
    check(dist > 0 and int(dist) % 64 == 0, f"prefetch distance {int(dist)} B, whole lines")

rows = re.findall(r"^(\d+x\d+) \(([^)]*)\)\s+q4/32\s+([0-9.]+)\s+(\d+)\s+([0-9.]+) \(([0-9.]+)\)\s+"
                  r"([0-9.]+) \(([0-9.]+)\)", out, re.M)
check(len(rows) == 4, f"one q4/32 row per shape ({len(rows)})")
for shape, what, mib, copies, g1, x1, g2, x2 in rows:
    check(int(copies) >= 2 and float(mib) > 0, f"{shape}: {mib} MiB x {copies} copies")
    if 1 in reads and 2 in reads:
        check(near(float(x1), float(g1), reads[1]) and near(float(x2), float(g2), reads[2]),
              f"{shape}: ratios {x1}, {x2} = GB/s over the read of the same threads")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
