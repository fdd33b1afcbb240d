#!/usr/bin/env python3
"""Runtime promises of the appliance (docs/runtime.md), each checked on a
real static musl appliance talking to its hosts over its socket and the
memory it hands out (docs/ring.md), in a runtime directory of its own
($NIB_RUNTIME_DIR, a fresh temporary directory).

  appliance_runtime.py CASE --nib NIB --appliance APP [options]

Cases:
  boot         default table boots; log reports topology, workers, numa
               (--expect-numa: "numa: N nodes (libnuma)"), mlock; every
               thread of the process runs under seccomp (Seccomp: 2)
  hugepages    >= 90 % of the blob copy is on huge pages (SKIP, exit 77,
               only when transparent huge pages are "never")
  seccomp      a forbidden call after READY kills the process (SIGSYS), on
               the serving thread and on a worker; generation works under it
  reproducible tokens and the logits digest are identical with 1 worker and
               all workers, and across reboots
  topology     APP was built with a table unlike this machine: refuses to
               boot naming the differences; --ignore-topology boots, logged
  no-alloc     APP counts allocation calls (-DNIB_COUNT_ALLOC): none after
               READY while serving 50 requests
  syscalls     under strace -f: after READY the workers make no system call
               at all while 8 requests are served (spin long enough not to
               park), and the serving thread only allow-listed ones (SKIP,
               exit 77, when strace is not installed)
"""
import argparse
import glob
import json
import os
import re
import signal
import subprocess
import shutil
import sys
import tempfile
import time


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg)


class Appliance:
    def __init__(self, exe, name, *extra, prefix=(), spin_us=200):
        self.name = name
        self.proc = subprocess.Popen([*prefix, exe, "--name", name, "--spin-us", str(spin_us),
                                      *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = ""

    def wait_ready(self, nib, timeout=30.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log = self.proc.stderr.read()
                fail("appliance exited during boot (rc %d): %s" % (self.proc.returncode, self.log))
            r = subprocess.run([nib, "stats", "--name", self.name, "--json"], capture_output=True,
                               text=True)
            if r.returncode == 0:
                return json.loads(r.stdout)
            time.sleep(0.05)
        self.kill()
        fail("appliance did not become ready in %.0f s" % timeout)

    def stop(self, nib):
        subprocess.run([nib, "stop", "--name", self.name], capture_output=True, timeout=60)
        try:
            _, self.log = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("appliance did not exit after nib stop")
        if self.proc.returncode != 0:
            fail("appliance exited %d after stop: %s" % (self.proc.returncode, self.log))
        return self.log

    def wait_exit(self, timeout=30):
        try:
            _, self.log = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            fail("appliance still running after %d s" % timeout)
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def ask(nib, name, prompt, n, *extra):
    r = subprocess.run([nib, "ask", "--name", name, "--max-tokens", str(n), "--json", *extra,
                        prompt], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("nib ask %r failed (%d): %s" % (prompt, r.returncode, r.stderr))
    return json.loads(r.stdout)


def name_for(case):
    return "rt-%s-%d" % (case, os.getpid())


def log_line(log, pattern):
    m = re.search(pattern, log, re.M)
    if not m:
        fail("no log line matching %r in:\n%s" % (pattern, log))
    return m


PROMPTS = ["Once upon a time", "The little dog", "She said", "Tom and Sue went to the park"]


def check_placement(st, expect_numa):
    """The statistics page's shard placement (docs/ring.md): every shard
    byte is on its worker's node, and the per-node sums add up."""
    if not expect_numa:
        if st["placement_verified"]:
            fail("placement reported without libnuma: %s" % st)
        ok("no libnuma: the stats page reports no placement")
        return
    if not st["placement_verified"]:
        fail("libnuma linked, but the stats page reports no verified placement: %s" % st)
    nodes, workers = st["numa_nodes"], st["worker_nodes"]
    if len(workers) != min(st["n_workers"], 32) or any(n >= nodes for n in workers):
        fail("worker nodes %s for %d workers on %d node(s)" % (workers, st["n_workers"], nodes))
    per = st["node_shard_bytes"]
    if st["placement_kib"] not in (4, 2048) or st["shard_bytes"] <= 0:
        fail("placement %s KiB, %d shard bytes" % (st["placement_kib"], st["shard_bytes"]))
    if st["shard_misplaced_bytes"] != 0 or sum(per) != st["shard_bytes"]:
        fail("shard bytes per node %s + %d elsewhere != %d placed" %
             (per, st["shard_misplaced_bytes"], st["shard_bytes"]))
    for n in set(workers):
        if n < len(per) and per[n] == 0:
            fail("workers on node %d, none of their shard bytes there: %s" % (n, per))
    ok("%d shard bytes placed per %s KiB page, all on their worker's node: %s" %
       (st["shard_bytes"], st["placement_kib"], per))


def case_boot(a):
    app = Appliance(a.appliance, name_for("boot"))
    app.wait_ready(a.nib)
    pid = app.proc.pid
    states = {}
    for st in glob.glob("/proc/%d/task/*/status" % pid):
        with open(st) as f:
            text = f.read()
        seccomp = re.search(r"^Seccomp:\s+(\d+)", text, re.M).group(1)
        cpus = re.search(r"^Cpus_allowed_list:\s+(\S+)", text, re.M).group(1)
        states[st.split("/")[4]] = (seccomp, cpus)
    res = ask(a.nib, app.name, "Once upon a time", 8)
    stats = json.loads(subprocess.run([a.nib, "stats", "--name", app.name, "--json"],
                                      capture_output=True, text=True, check=True).stdout)
    log = app.stop(a.nib)
    print(log, end="")
    log_line(log, r"^nibble: topology: this machine matches the table built in")
    check_placement(stats, a.expect_numa)
    m = log_line(log, r"^nibble: workers: (\d+) on cpus ([\d,]+)")
    n_workers = int(m.group(1))
    cpus = m.group(2).split(",")
    if n_workers < 1 or len(cpus) != n_workers:
        fail("worker line does not add up: %s" % m.group(0))
    ok("%d workers pinned to cpus %s (one per physical core)" % (n_workers, m.group(2)))
    log_line(log, r"^nibble: mlockall: ")
    if a.expect_numa:
        m = log_line(log, r"^nibble: numa: (\d+) nodes? \(libnuma\)")
        ok("appliance linked with the musl libnuma: %s" % m.group(0))
    else:
        log_line(log, r"^nibble: numa: built without libnuma")
        ok("no musl libnuma in this build, and the appliance says so")
    if len(states) < n_workers:
        fail("%d threads for %d workers" % (len(states), n_workers))
    not_filtered = [t for t, (s, _) in states.items() if s != "2"]
    if not_filtered:
        fail("threads %s run without a seccomp filter: %s" % (not_filtered, states))
    pinned = sorted(c for _, (_, c) in states.items())
    if sorted(cpus) != pinned:
        fail("threads are pinned to %s, the log says cpus %s" % (pinned, cpus))
    ok("all %d threads under seccomp (mode 2), each pinned to one cpu: %s" % (len(states), pinned))
    if len(res["generated_token_ids"]) < 1:
        fail("no tokens generated under the filter")
    ok("generation works under the filter")
    # No prefetch distance in this table: measured at boot, one of its candidates kept.
    m = log_line(log, r"^nibble: kernels: weights prefetched (\d+) bytes ahead \(measured at boot, "
                      r"median pass at each distance \(ratio to the default's, paired by round\): "
                      r"(.*); (\d+) rounds of (\d+) passes\)")
    tried = [int(c.split(" B ")[0]) for c in m.group(2).split(", ")]
    ratios = [float(c.split("(")[1].rstrip(")")) for c in m.group(2).split(", ")]
    if len(tried) != 4 or int(m.group(1)) not in tried or int(m.group(3)) < 1 or \
            ratios[0] != 1.0 or min(ratios) <= 0:
        fail("the measured prefetch line does not add up: %s" % m.group(0))
    ok("prefetch distance measured at boot: %s" % m.group(0).split("nibble: ")[1])
    app = Appliance(a.appliance, name_for("pf"), "--prefetch", "4096")
    app.wait_ready(a.nib)
    ask(a.nib, app.name, "Once upon a time", 2)
    log = app.stop(a.nib)
    log_line(log, r"^nibble: kernels: weights prefetched 4096 bytes ahead \(--prefetch\)")
    if "measured at boot" in log:
        fail("--prefetch 4096 still measured the distance at boot")
    r = subprocess.run([a.appliance, "--name", name_for("pfbad"), "--prefetch", "100"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or "--prefetch wants auto or a multiple of 64" not in r.stderr:
        fail("--prefetch 100 not refused (rc %d): %s" % (r.returncode, r.stderr))
    ok("--prefetch 4096 is taken as given, --prefetch 100 refused")


def case_hugepages(a):
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        mode = re.search(r"\[(\w+)\]", f.read()).group(1)
    if mode == "never":
        print("SKIP: transparent huge pages are 'never' on this machine")
        sys.exit(77)
    app = Appliance(a.appliance, name_for("huge"))
    app.wait_ready(a.nib)
    log = app.stop(a.nib)
    m = log_line(log, r"huge pages: blob ([\d.]+)% \(([\d.]+) of ([\d.]+) MiB\), arena ([\d.]+)%")
    blob_pct = float(m.group(1))
    print(m.group(0))
    if blob_pct < 90.0:
        fail("only %.1f%% of the blob copy is on huge pages (THP mode %s)" % (blob_pct, mode))
    ok("THP %s: %.1f%% of the blob range is AnonHugePages, arena %s%%" % (mode, blob_pct,
                                                                           m.group(4)))
    log_line(log, r"file-backed copy released")


def expect_sigsys(a, where, extra=()):
    app = Appliance(a.appliance, name_for("sys-" + where), "--debug-forbidden-syscall", where,
                    *extra)
    if where == "worker":
        # The hook runs right after READY; the process dies before or
        # while anyone attaches.
        pass
    rc = app.wait_exit(30)
    app.kill()
    if rc != -signal.SIGSYS:
        fail("a forbidden call on the %s thread: exit %s, not killed by SIGSYS:\n%s" %
             (where, rc, app.log))
    if "the filter is NOT active" in app.log:
        fail("forbidden call returned on the %s thread" % where)
    ok("forbidden system call on the %s thread: killed by SIGSYS" % where)


def case_seccomp(a):
    expect_sigsys(a, "serve")
    # Workers: only when this machine gives the appliance two or more.
    app = Appliance(a.appliance, name_for("seccomp"))
    app.wait_ready(a.nib)
    for p in PROMPTS:
        if not ask(a.nib, app.name, p, 16)["generated_token_ids"]:
            fail("no tokens for %r under the filter" % p)
    log = app.stop(a.nib)
    n_workers = int(log_line(log, r"^nibble: workers: (\d+)").group(1))
    ok("%d requests generated under the filter with %d workers" % (len(PROMPTS), n_workers))
    if n_workers >= 2:
        expect_sigsys(a, "worker")
    else:
        print("note: one worker on this machine: the worker-thread hook needs two")


def run_digest(a, tag, *extra):
    app = Appliance(a.appliance, name_for("repro-" + tag), "--digest", *extra)
    app.wait_ready(a.nib)
    out = [ask(a.nib, app.name, p, 24)["generated_token_ids"] for p in PROMPTS]
    out.append(ask(a.nib, app.name, PROMPTS[0], 16, "--temperature", "0.8", "--seed", "11")
               ["generated_token_ids"])
    log = app.stop(a.nib)
    m = log_line(log, r"^nibble: digest: logits crc32c ([0-9a-f]{8}) over (\d+) forward passes")
    workers = int(log_line(log, r"^nibble: workers: (\d+)").group(1))
    return out, m.group(1), int(m.group(2)), workers


def case_reproducible(a):
    ref_tokens, ref_digest, passes, w1 = run_digest(a, "one", "--workers", "1")
    if w1 != 1:
        fail("--workers 1 ran %d workers" % w1)
    ok("1 worker: digest %s over %d forward passes" % (ref_digest, passes))
    for run in ("all", "again"):
        tokens, digest, n, w = run_digest(a, run)
        if tokens != ref_tokens:
            fail("%d workers (%s): tokens differ from 1 worker's" % (w, run))
        if digest != ref_digest or n != passes:
            fail("%d workers (%s): logits digest %s over %d passes, 1 worker gave %s over %d" %
                 (w, run, digest, n, ref_digest, passes))
        ok("%d workers (%s boot): same tokens, same logits digest %s" % (w, run, digest))


def case_topology(a):
    name = name_for("topo")
    r = subprocess.run([a.appliance, "--name", name], capture_output=True, text=True, timeout=60)
    if r.returncode == 0 or "refusing to boot: topology: this machine does not match" not in r.stderr:
        fail("a machine unlike the table booted (rc %d): %s" % (r.returncode, r.stderr))
    if "cpu 511 is in the table but missing or offline here" not in r.stderr:
        fail("the refusal does not name the missing cpu: %s" % r.stderr)
    if os.path.lexists(os.path.join(os.environ["NIB_RUNTIME_DIR"], name + ".sock")):
        fail("a refused boot left its socket behind")
    ok("refused: " + r.stderr.strip().splitlines()[-1][:200] + "...")
    app = Appliance(a.appliance, name, "--ignore-topology")
    app.wait_ready(a.nib)
    ask(a.nib, name, "Once upon a time", 4)
    log = app.stop(a.nib)
    log_line(log, r"^nibble: topology: WARNING: this machine differs from the table.*"
                  r"booting anyway because of --ignore-topology")
    ok("--ignore-topology boots and logs the override")
    log_line(log, r"^nibble: kernels: weights prefetched 8192 bytes ahead \(the topology table's\)")
    ok("the table's prefetch distance is applied")


def case_no_alloc(a):
    app = Appliance(a.appliance, name_for("alloc"))
    app.wait_ready(a.nib)
    for i in range(50):
        extra = ("--temperature", "0.7", "--seed", str(i)) if i % 2 else ()
        ask(a.nib, app.name, PROMPTS[i % len(PROMPTS)], 8, *extra)
    stats = json.loads(subprocess.run([a.nib, "stats", "--name", app.name, "--json"],
                                      capture_output=True, text=True).stdout)
    log = app.stop(a.nib)
    if stats["requests_done"] < 50:
        fail("only %d requests done" % stats["requests_done"])
    m = log_line(log, r"^nibble: allocation calls after READY: (.*)$")
    counts = dict((k.strip(), int(v)) for k, v in
                  (p.rsplit(" ", 1) for p in m.group(1).split(", ")))
    if set(counts) != {"malloc", "calloc", "realloc", "free", "aligned_alloc", "mmap", "munmap",
                       "brk/sbrk"}:
        fail("unexpected counters: %s" % counts)
    busy = {k: v for k, v in counts.items() if v}
    if busy:
        fail("allocation after READY while serving 50 requests: %s" % busy)
    ok("50 requests served, no malloc/calloc/realloc/free/aligned_alloc/mmap/munmap/brk after "
       "READY")


# The serving thread's filter (docs/runtime.md, docs/ring.md): the control
# channel adds poll, accept4, getsockopt (SO_PEERCRED), recvmsg, sendmsg and
# close, and the heartbeat's check of the socket path an lstat.
ALLOWED_SERVE = {"futex", "clock_gettime", "restart_syscall", "rt_sigreturn", "exit",
                 "exit_group", "unlink", "unlinkat", "write", "writev", "poll", "ppoll",
                 "accept4", "getsockopt", "recvmsg", "sendmsg", "close", "newfstatat",
                 "fstatat64", "lstat", "statx"}


def case_syscalls(a):
    strace = shutil.which("strace")
    if not strace:
        print("SKIP: strace is not installed (apt-get install strace; .ci/install-deps.sh does)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace")
        name = name_for("strace")
        # Spin 10 s: the workers must not park between these requests.
        app = Appliance(a.appliance, name, "--barrier-spin-us", "10000000",
                        prefix=(strace, "-f", "-qq", "-o", trace), spin_us=10000000)
        app.wait_ready(a.nib, 60)
        for p in PROMPTS * 2:
            ask(a.nib, name, p, 12)
        app.stop(a.nib)
        with open(trace) as f:
            lines = f.read().splitlines()
    main_tid = None
    ready_at = None
    workers = set()
    for i, line in enumerate(lines):
        m = re.match(r"(\d+)\s+(\w+)\((.*)", line)
        if not m:
            continue
        tid, call, rest = m.group(1), m.group(2), m.group(3)
        if main_tid is None:
            main_tid = tid  # the first line is the appliance's execve
        elif tid != main_tid:
            workers.add(tid)  # (a clone line may be split by strace: go by tid)
        if ready_at is None and call in ("writev", "write") and "nibble: ready on" in rest:
            ready_at = i
    if ready_at is None or not workers:
        fail("could not find READY (%s) or the worker threads (%s) in the trace" %
             (ready_at, workers))
    after = [re.match(r"(\d+)\s+(\w+)", l) for l in lines[ready_at + 1:]]
    after = [(m.group(1), m.group(2)) for m in after if m and not l_is_exit(m.group(2))]
    by_workers = [(t, c) for t, c in after if t in workers]
    if by_workers:
        fail("worker threads made system calls after READY: %s" % by_workers[:10])
    ok("%d worker thread(s): no system call after READY while serving %d requests" %
       (len(workers), len(PROMPTS) * 2))
    serve_calls = sorted({c for t, c in after if t == main_tid})
    bad = [c for c in serve_calls if c not in ALLOWED_SERVE]
    if bad:
        fail("the serving thread made calls outside its allow-list: %s" % bad)
    ok("serving thread after READY: only %s" % ", ".join(serve_calls))


def l_is_exit(call):
    return call in ("exited", "killed")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["boot", "hugepages", "seccomp", "reproducible", "topology",
                                    "no-alloc", "syscalls"])
    p.add_argument("--nib", required=True)
    p.add_argument("--appliance", required=True)
    p.add_argument("--expect-numa", action="store_true")
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="nibrt")
    os.environ["NIB_RUNTIME_DIR"] = os.path.join(tmp, "run")
    try:
        globals()["case_" + a.case.replace("-", "_")](a)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
