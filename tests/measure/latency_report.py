#!/usr/bin/env python3
"""nib bench --latency's report beside the reference loop: every JSON line
parses; both comparisons (across positions, at the fixed position) carry
every field; per side p50 <= p90 <= p99 <= p99.9 <= max; each ratio is the
quotient of the fields it is made of; the text form names the same parts;
bad values are refused with a message. --ops: one row per op kind and a
"pass" row, whose op count and bytes are the rows' sums, the bytes equal
to the fixed comparison's bytes per iteration at the same position, each
row's ratio its times' quotient, each row's time run again from the
caches present, and the op-by-op pass's logits equal to
the executor's; with two workers the same rows, each with its barrier
waits (none with one worker). With two workers the fixed comparison also times the
reference without its per-op barriers (barrier_ratio its quotient). The
prefetch distance is measured as the appliance measures it (one of its
candidates kept), or NIB_PREFETCH's when set. A
vision blob is refused as one. Times are never compared with anything: this checks the
report, not the machine.

  latency_report.py NIB BLOB
"""
import json
import os
import subprocess
import sys
import tempfile

nib, blob = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, msg):
    global failures
    print(("ok: " if ok else "FAIL: ") + msg)
    failures += 0 if ok else 1


def close(a, b, rel=2e-3):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-9)


def run(args, env=None):
    return subprocess.run([nib, "bench", "--latency", blob] + args, capture_output=True,
                          text=True, timeout=300, env=env)


TOKENS, POS = 40, 20
r = run(["--tokens", str(TOKENS), "--block", "8", "--pos", str(POS), "--workers", "1", "--json"])
check(r.returncode == 0, "--json run exits 0 (%d: %s)" % (r.returncode, r.stderr.strip()))
objs = []
for line in r.stdout.splitlines():
    try:
        objs.append(json.loads(line))
    except ValueError as e:
        check(False, "line parses as JSON: %r (%s)" % (line, e))
pf = [o for o in objs if o.get("source") == "prefetch"]
check(len(pf) == 1, "one prefetch line")
if pf:
    cands = [c["bytes"] for c in pf[0].get("candidates", [])]
    check(pf[0].get("from") == "measured" and len(cands) == 4 and pf[0]["bytes"] in cands and
          all(c["median_us"] > 0 and c["ratio"] > 0 for c in pf[0]["candidates"]) and
          pf[0]["candidates"][0]["ratio"] == 1.0,
          "prefetch measured as the appliance does, one of its candidates kept: %s" % pf[0])
vs = {o.get("mode"): o for o in objs if o.get("source") == "vs-reference"}
check(set(vs) == {"positions", "fixed"}, "both comparisons reported: %s" % sorted(vs))
for mode, o in vs.items():
    for key in ("pos_first", "pos_last", "block", "workers", "nibble", "reference", "tail_ratio",
                "p50_ratio"):
        check(key in o, "%s: field %s present" % (mode, key))
    if not all(k in o for k in ("nibble", "reference", "tail_ratio", "p50_ratio")):
        continue
    check(o["block"] == 8 and o["workers"] == 1, "%s: block 8, 1 worker" % mode)
    check(o["pos_first"] <= o["pos_last"], "%s: positions in order" % mode)
    for side in ("nibble", "reference"):
        s = o[side]
        keys = ("p50_us", "p90_us", "p99_us", "p99.9_us", "max_us")
        if not all(k in s for k in keys + ("count", "p99_over_p50", "mean_us")):
            check(False, "%s %s: every field present: %s" % (mode, side, sorted(s)))
            continue
        v = [s[k] for k in keys]
        check(s["count"] == TOKENS, "%s %s: %d samples timed" % (mode, side, TOKENS))
        check(0 < v[0] and all(a <= b for a, b in zip(v, v[1:])),
              "%s %s: 0 < p50 <= p90 <= p99 <= p99.9 <= max: %s" % (mode, side, v))
        check(0 < s["mean_us"] <= v[4] + 1e-3, "%s %s: 0 < mean <= max" % (mode, side))
        check(close(s["p99_over_p50"], s["p99_us"] / s["p50_us"]),
              "%s %s: p99_over_p50 = p99 / p50" % (mode, side))
    n, ref = o["nibble"], o["reference"]
    check(close(o["tail_ratio"], n["p99_over_p50"] / ref["p99_over_p50"]),
          "%s: tail_ratio = nibble p99/p50 / reference p99/p50" % mode)
    check(close(o["p50_ratio"], n["p50_us"] / ref["p50_us"]),
          "%s: p50_ratio = nibble p50 / reference p50" % mode)
fx = vs.get("fixed", {})
check(fx.get("pos_first") == POS and fx.get("pos_last") == POS, "fixed: at --pos %d" % POS)
check(fx.get("bytes_per_iteration", 0) > 0, "fixed: bytes per iteration reported")
check("bytes_per_iteration" not in vs.get("positions", {}),
      "positions: no single byte count (it grows with the position)")
check(all("reference_free" not in o for o in vs.values()),
      "one worker: no free-running reference (there are no barriers to leave out)")

# Two workers: at the fixed position the reference also runs without its
# per-op barriers, and barrier_ratio is reference p50 / that p50.
r = run(["--tokens", "16", "--block", "8", "--pos", str(POS), "--workers", "2", "--json"])
check(r.returncode == 0, "two workers: --json run exits 0 (%d: %s)" % (r.returncode,
                                                                       r.stderr.strip()))
vs2 = {}
for line in r.stdout.splitlines():
    o = json.loads(line)
    if o.get("source") == "vs-reference":
        vs2[o.get("mode")] = o
fx2 = vs2.get("fixed", {})
free = fx2.get("reference_free", {})
check(fx2.get("workers") == 2 and free.get("count") == 16 and
      0 < free.get("p50_us", 0) <= free.get("p99_us", 0) <= free.get("max_us", 0),
      "two workers, fixed: the free-running reference timed 16 times: %s" % free)
check(free.get("p50_us", 0) > 0 and
      close(fx2.get("barrier_ratio", 0), fx2["reference"]["p50_us"] / free["p50_us"]),
      "two workers, fixed: barrier_ratio = reference p50 / free-running p50")
check("reference_free" not in vs2.get("positions", {"reference_free": 1}),
      "two workers, positions: no free-running reference (fixed position only)")
t = run(["--tokens", "16", "--block", "8", "--workers", "2"])
check(t.returncode == 0 and "ref free" in t.stdout and "what the barriers cost" in t.stdout,
      "two workers, text: the free-running reference and its ratio named")

o = run(["--ops", "--tokens", "8", "--block", "4", "--pos", str(POS), "--workers", "1", "--json"])
check(o.returncode == 0, "--ops run exits 0 (%d: %s)" % (o.returncode, o.stderr.strip()))
rows = [json.loads(line) for line in o.stdout.splitlines() if line.startswith("{")]
per = [x for x in rows if x.get("source") == "per-op" and x.get("row") != "pass"]
total = [x for x in rows if x.get("source") == "per-op" and x.get("row") == "pass"]
check(len(total) == 1 and len(per) >= 3, "--ops: op rows (%d) and one pass row" % len(per))
if total and per:
    p = total[0]
    check(sum(x["ops"] for x in per) == p["ops"], "--ops: the rows' ops sum to the pass's")
    check(sum(x["bytes"] for x in per) == p["bytes"], "--ops: the rows' bytes sum to the pass's")
    check(p["bytes"] == fx.get("bytes_per_iteration"),
          "--ops: the pass reads the fixed comparison's bytes per iteration (%d, %s)"
          % (p["bytes"], fx.get("bytes_per_iteration")))
    check(p.get("same_logits") is True, "--ops: the op-by-op pass gives the executor's logits")
    check(any(x["row"] == "attention" and x["bytes"] > 0 for x in per),
          "--ops: attention has a row, reading the KV cache")
    for x in per + [p]:
        check(x["pos"] == POS and x["passes"] == 8, "--ops %s: at --pos, 8 passes" % x["row"])
        check(x["reference_us"] <= 0 or close(x["ratio"], x["nibble_us"] / x["reference_us"]),
              "--ops %s: ratio = nibble / reference" % x["row"])
        check(isinstance(x.get("again_us"), (int, float)) and x["again_us"] >= 0,
              "--ops %s: the op run again from the caches has a time" % x["row"])
    check(p.get("again_us", 0) > 0, "--ops: the pass run again op by op takes time")

# --ops with two workers: the team op by op, each row with the time its
# workers waited at the barrier after it, nibble's and the reference's.
o2 = run(["--ops", "--tokens", "8", "--block", "4", "--pos", str(POS), "--workers", "2", "--json"])
check(o2.returncode == 0, "--ops, two workers: exits 0 (%d: %s)" % (o2.returncode,
                                                                    o2.stderr.strip()))
rows2 = [json.loads(line) for line in o2.stdout.splitlines() if line.startswith("{")]
per2 = [x for x in rows2 if x.get("source") == "per-op" and x.get("row") != "pass"]
total2 = [x for x in rows2 if x.get("source") == "per-op" and x.get("row") == "pass"]
check(len(total2) == 1 and [x["row"] for x in per2] == [x["row"] for x in per] and
      [x["bytes"] for x in per2] == [x["bytes"] for x in per],
      "--ops, two workers: the one-worker rows, the same bytes each")
if total2 and per2:
    p2 = total2[0]
    check(p2.get("same_logits") is True, "--ops, two workers: the team's op-by-op pass gives the "
          "executor's logits")
    for x in per2 + [p2]:
        check(x.get("workers") == 2 and "again_us" not in x,
              "--ops %s, two workers: says so, and has no again time (one worker's)" % x["row"])
        for k in ("nibble_wait_us", "reference_wait_us"):
            # medians of different quantities, and a worker leaves the
            # barrier a little after another: a margin, not equality
            check(isinstance(x.get(k), (int, float)) and
                  0 <= x[k] <= x[k.replace("_wait", "")] * 1.1 + 10,
                  "--ops %s, two workers: %s within the row's time" % (x["row"], k))
    for k in ("nibble_wait_us", "reference_wait_us"):
        check(0 < p2[k] < p2[k.replace("_wait", "")],
              "--ops, two workers: the pass waits at its barriers, for less than the pass (%s)" % k)
for x in per + total:
    check(x.get("workers") == 1 and x.get("nibble_wait_us") == 0 and
          x.get("reference_wait_us") == 0, "--ops %s, one worker: no barrier, no wait" % x["row"])

t = run(["--tokens", "16", "--block", "4", "--workers", "1"])
check(t.returncode == 0, "text run exits 0")
for part in ("across positions", "at position", "reference", "nibble p99/p50 / reference p99/p50"):
    check(part in t.stdout, "text names %r" % part)
t = run(["--ops", "--tokens", "4", "--workers", "1"])
check(t.returncode == 0 and "per op at position" in t.stdout and "logits equal" in t.stdout
      and "again us" in t.stdout,
      "--ops text names its table and the logits' check")
check("measured as the appliance does" in t.stdout, "text names the measured prefetch distance")
t = run(["--tokens", "4", "--workers", "1", "--json"], env=dict(os.environ, NIB_PREFETCH="4096"))
given = [json.loads(x) for x in t.stdout.splitlines() if '"prefetch"' in x]
check(t.returncode == 0 and len(given) == 1 and given[0]["bytes"] == 4096 and
      given[0]["from"] == "NIB_PREFETCH" and "candidates" not in given[0],
      "NIB_PREFETCH=4096 is taken as given, nothing measured: %s" % given)

for args, what in ((["--pos", "100000"], "position 100000"), (["--block", "0"], "--block")):
    b = run(args + ["--tokens", "4"])
    check(b.returncode == 2 and what.split()[0] in b.stderr,
          "%s refused with a message (%d: %s)" % (" ".join(args), b.returncode, b.stderr.strip()))
b = subprocess.run([nib, "bench", "--latency", "--name", "nosuch", "--ops"], capture_output=True,
                   text=True, timeout=60)
check(b.returncode == 2 and "--ops" in b.stderr,
      "--ops with --name refused, not ignored (%d: %s)" % (b.returncode, b.stderr.strip()))

# a vision blob (a small model of the ONNX fuzz corpus): refused by name
with tempfile.TemporaryDirectory() as tmp:
    onnx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus", "onnx",
                        "pool-gemm.onnx")
    vblob = os.path.join(tmp, "vision.blob")
    c = subprocess.run([nib, "compile", onnx, "--quant", "f32", "-o", vblob], capture_output=True,
                       text=True, timeout=120)
    check(c.returncode == 0, "the vision blob compiles (%s)" % c.stderr.strip()[-200:])
    b = subprocess.run([nib, "bench", "--latency", vblob, "--tokens", "4"], capture_output=True,
                       text=True, timeout=120)
    check(b.returncode == 2 and "is a vision model" in b.stderr,
          "a vision blob is refused as one (%d: %s)" % (b.returncode, b.stderr.strip()))
sys.exit(1 if failures else 0)
