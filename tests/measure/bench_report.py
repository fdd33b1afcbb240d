#!/usr/bin/env python3
"""nib bench's GEMV report (--quick, one format): the stream-read lines
for 1 and 2 threads; the read-order line (docs/benchmarks.md, "The read
order, found") with its three figures positive and each ratio the
quotient of the figures it is made of; one GEMV row per LLaMA shape, each
memory ratio its GB/s over the read of the same threads; the attention
table's two rows, each GB/s its KV bytes over its time, each G MAC/s the
shape's multiply-adds over its time and each ratio that rate over the
peak line's, each read ratio the read's time over the attention's (one
round: the medians are that round's figures). Times are
never compared with anything: this checks the report, not the machine.

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

m = re.search(r"(\d+) chains of\s+(\d+)-lane multiply-adds, median ([0-9.]+) G MAC/s", out)
check(m is not None, "attention peak line present")
peak = float(m.group(3)) if m else 0
check(peak > 0, f"attention peak {peak} G MAC/s")
m = re.search(r"attention from the caches, position (\d+),", out)
pos = int(m.group(1)) if m else 0
check(pos > 0, f"attention position {pos}")
att = re.findall(r"^(\S+)\s+(\d+)x(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+"
                 r"([0-9.]+) \(([0-9.]+)\)\s+([0-9.]+) \(([0-9.]+)\)$", out, re.M)
check([a[0] for a in att] == ["tinyllama-1.1b", "llama-3b"], f"two attention rows ({len(att)})")
for what, heads, hd, kvh, kv_mb, us, gbs, gmac, x, read, xr in att:
    heads, hd, kvh = int(heads), int(hd), int(kvh)
    kv_mb, us, gbs, gmac, x, read, xr = (float(v) for v in (kv_mb, us, gbs, gmac, x, read, xr))
    keys = pos + 1
    check(abs(kv_mb - 2 * kvh * keys * hd * 4 / 1e6) <= 0.005,
          f"{what}: KV MB {kv_mb} = 2 x {kvh} x {keys} x {hd} floats")
    check(us > 0 and abs(gbs - kv_mb * 1e3 / us) <= 0.05 + 0.05 * gbs / us + gbs * 0.002,
          f"{what}: {gbs} GB/s = {kv_mb} MB / {us} us")
    macs = 2 * heads * keys * hd
    check(abs(gmac - macs / us / 1e3) <= 0.05 + 0.05 * gmac / us + gmac * 0.002,
          f"{what}: {gmac} G MAC/s = {macs} multiply-adds / {us} us")
    check(near(x, gmac, peak), f"{what}: ratio {x} = {gmac} / {peak}")
    check(read > 0 and near(xr, read, us), f"{what}: read ratio {xr} = {read} us / {us} us")

print(f"{failures} failure(s)")
sys.exit(1 if failures else 0)
