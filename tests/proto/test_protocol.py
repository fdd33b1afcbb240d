#!/usr/bin/env python3
"""Protocol scenarios against a real static appliance (docs/ring.md).

  test_protocol.py --nib NIB --appliance APP --host PROTO_HOST --nibhost PY SCENARIO

Each scenario boots its own appliance on its own segment name, talks to it only
through shared memory (nib ask, proto_host, tools/host/nibhost.py), and stops it at
the end, checking that it exits 0 and removes its segment. Prints one line per
check; exits non-zero on the first failure.

Scenarios: python-host, many-hosts, busy-cancel, host-killed, appliance-killed,
stale-boot, scribble, stress, install.
"""
import argparse
import importlib.util
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

SHM = "/dev/shm"
PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben", "hello", "A",
           "One day, a girl", "The sun was hot", "Tom had a red ball"]


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def seg_path(name):
    return os.path.join(SHM, "nibble-" + name)


def deadline_loop(seconds, what):
    """Yield until the body breaks; fail after `seconds` (a hang guard, not a speed check)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield
        time.sleep(0.002)
    fail("%s: still not after %.0f s" % (what, seconds))


class Ctx:
    def __init__(self, args, scenario):
        self.nib = os.path.abspath(args.nib)
        self.app_exe = os.path.abspath(args.appliance)
        self.host = os.path.abspath(args.host)
        self.args = args
        spec = importlib.util.spec_from_file_location("nibhost", args.nibhost)
        self.nh = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.nh)
        self.name = "p%d%s" % (os.getpid(), scenario[:6].replace("-", ""))
        self.tmp = tempfile.mkdtemp(prefix="nibproto")
        self.procs = []

    # ---- the appliance ----
    def boot(self, extra=(), expect_stale=False):
        p = subprocess.Popen([self.app_exe, "--name", self.name, "--spin-us", "200", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in deadline_loop(30, "appliance ready"):
            if p.poll() is not None:
                fail("appliance exited during boot: " + p.stderr.read())
            try:
                h = self.nh.Host(self.name)
                h.close()
                break
            except self.nh.NibError:
                pass
        self.procs.append(p)
        return p

    def stop(self, p):
        r = subprocess.run([self.nib, "stop", "--name", self.name], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            fail("nib stop: " + r.stderr)
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("appliance did not exit after nib stop")
        if p.returncode != 0:
            fail("appliance exit status %d: %s" % (p.returncode, err))
        if os.path.exists(seg_path(self.name)):
            fail("segment still present after stop")
        return err

    def kill(self, p):
        p.kill()
        p.communicate()

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
        if os.path.exists(seg_path(self.name)):
            os.unlink(seg_path(self.name))
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- hosts ----
    def ask(self, prompt, max_tokens, *extra, check=True):
        r = subprocess.run([self.nib, "ask", "--name", self.name, "--max-tokens", str(max_tokens),
                            "--json", *extra, prompt], capture_output=True, timeout=120)
        if check and r.returncode != 0:
            fail("nib ask %r failed (%d): %s" % (prompt, r.returncode, r.stderr))
        return r

    def ask_json(self, prompt, max_tokens, *extra):
        return json.loads(self.ask(prompt, max_tokens, *extra).stdout.decode("utf-8", "replace"))

    def stats(self):
        r = subprocess.run([self.nib, "stats", "--name", self.name, "--json"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail("nib stats: " + r.stderr)
        return json.loads(r.stdout)

    def references(self, max_tokens):
        """EXPECTED file for proto_host: nib ask's greedy answer per prompt."""
        path = os.path.join(self.tmp, "expected-%d.tsv" % max_tokens)
        refs = []
        with open(path, "w") as f:
            for prompt in PROMPTS:
                a = self.ask_json(prompt, max_tokens)
                refs.append(a)
                f.write("%s\t%s\t%s\t%s\n" % (prompt, ",".join(map(str, a["prompt_token_ids"])),
                                              ",".join(map(str, a["generated_token_ids"])),
                                              a["status"]))
        return path, refs

    def start_host(self, *args, stdin=None):
        p = subprocess.Popen([self.host, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=stdin, text=True)
        self.procs.append(p)
        return p

    def run_host(self, *args, timeout=300):
        p = self.start_host(*args)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("proto_host %s hung" % args[0])
        if p.returncode != 0:
            fail("proto_host %s: rc %d\n%s%s" % (args[0], p.returncode, out, err))
        return out

    def slot(self, i):
        """(state, owner, status, n_prompt, n_tokens) of slot i, read raw."""
        nh = self.nh
        with open(seg_path(self.name), "rb") as f:
            f.seek(nh.SLOTS_OFFSET + i * nh.SLOT_SIZE)
            b = f.read(nh.S_T_START)
        state, owner = struct.unpack_from("<II", b, 0)
        n_tokens, n_prompt, _, status = struct.unpack_from("<IIII", b, nh.S_N_TOKENS)
        return state, owner, status, n_prompt, n_tokens


# ---------------------------------------------------------------- scenarios

def sc_python_host(c):
    app = c.boot()
    nh = c.nh
    cases = [(p, 12, ()) for p in PROMPTS[:5]] + [
        ("Once upon a time", 10, ("--temperature", "0.9", "--seed", "5")),
        ("The little dog", 6, ("--no-bos",)),
        ("", 4, ())]
    py = [sys.executable, c.args.nibhost]
    for prompt, n, extra in cases:
        a = c.ask(prompt, n, *extra)
        b = subprocess.run(py + ["ask", "--name", c.name, "--max-tokens", str(n), "--json",
                                 *extra, prompt], capture_output=True, timeout=60)
        if b.returncode != a.returncode:
            fail("%r: nib ask rc %d, nibhost.py rc %d: %s" % (prompt, a.returncode, b.returncode,
                                                              b.stderr))
        head = a.stdout.split(b', "timings"')[0] + b"}\n"
        if head != b.stdout:
            fail("%r %s: nibhost.py --json differs from nib ask --json:\n %r\n %r" %
                 (prompt, extra, head, b.stdout))
        ta = subprocess.run([c.nib, "ask", "--name", c.name, "--max-tokens", str(n), *extra,
                             prompt], capture_output=True, timeout=60)
        tb = subprocess.run(py + ["ask", "--name", c.name, "--max-tokens", str(n), *extra, prompt],
                            capture_output=True, timeout=60)
        if ta.stdout != tb.stdout:
            fail("%r: text mode differs:\n %r\n %r" % (prompt, ta.stdout, tb.stdout))
    ok("%d requests: nibhost.py gives nib ask's token ids, JSON and text byte for byte" % len(cases))

    # The empty prompt with --no-bos is a bad request: both say which field.
    a = c.ask("", 4, "--no-bos", check=False)
    b = subprocess.run(py + ["ask", "--name", c.name, "--json", "--no-bos", ""],
                       capture_output=True, timeout=60)
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    if a.returncode == 0 or b.returncode == 0 or ja["status"] != "bad_request" or \
            not ja["error"].startswith("prompt_len:") or jb["error"] != ja["error"]:
        fail("bad request: %r / %r" % (a.stdout, b.stdout))
    ok("bad request named by both: %s" % ja["error"])

    with nh.Host(c.name) as h:
        # Prompt as token ids gives the text prompt's continuation.
        ref = c.ask_json("Lily and Ben", 8)
        r = h.ask(ref["prompt_token_ids"], max_tokens=8)
        if r.generated_ids != ref["generated_token_ids"]:
            fail("prompt ids: %s vs %s" % (r.generated_ids, ref["generated_token_ids"]))
        ok("prompt given as token ids continues like the text prompt")
        # Streaming: wait(seen) returns before the end with a prefix.
        hd = h.submit("Once upon a time", max_tokens=40)
        p = h.wait(hd, seen_tokens=0, timeout=30)
        while not p.done:
            p = h.wait(hd, seen_tokens=len(p.tokens), timeout=30)
        h.release(hd)
        full = c.ask_json("Once upon a time", 40)
        if p.generated_ids != full["generated_token_ids"]:
            fail("streamed ids differ")
        st = h.stats()
        cs = c.stats()
        for k in nh.STATS_COUNTERS:
            if st[k] != cs[k]:
                fail("stats %s: nibhost.py %d, nib stats %d" % (k, st[k], cs[k]))
        if cs["epoch"] != h.epoch:
            fail("epochs differ")
        ok("streaming wait, stats and epoch agree with nib stats")
    # A host built for another layout version is refused, clearly.
    nh.VERSION = 3
    try:
        nh.Host(c.name)
        fail("a version-3 host attached to a version-2 segment")
    except nh.NibError as e:
        if "layout version 2, this host speaks version 3" not in str(e):
            fail("version refusal: %s" % e)
        ok("a host of another layout version is refused: %s" % e)
    finally:
        nh.VERSION = 2
    c.stop(app)


def sc_many_hosts(c):
    app = c.boot()
    exp, _ = c.references(6)
    hosts = [c.start_host("many", c.name, exp, "40") for _ in range(6)]
    # Two Python hosts at the same time, in threads of this process.
    import threading
    errors = []

    def py_host(k):
        try:
            with c.nh.Host(c.name) as h:
                for i in range(15):
                    prompt = PROMPTS[(i + k) % len(PROMPTS)]
                    hd = h.submit(prompt, max_tokens=6, request_id=1000 * k + i, busy_wait=None)
                    p = h.wait(hd, timeout=60)
                    h.release(hd)
                    if p.request_id != 1000 * k + i:
                        errors.append("request id %d came back as %d" % (1000 * k + i, p.request_id))
                    want = [l for l in open(exp) if l.startswith(prompt + "\t")][0].split("\t")[2]
                    if ",".join(map(str, p.generated_ids)) != want:
                        errors.append("python host %d: %r gave %s, want %s" %
                                      (k, prompt, p.generated_ids, want))
        except Exception as e:  # reported below
            errors.append("python host %d: %r" % (k, e))
    threads = [threading.Thread(target=py_host, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    busy = 0
    for p in hosts:
        out, err = p.communicate(timeout=300)
        if p.returncode != 0:
            fail("host: %s%s" % (out, err))
        busy += json.loads(out.splitlines()[-1])["busy"]
    for t in threads:
        t.join(300)
    if errors:
        fail("; ".join(errors))
    ok("6 C hosts x 40 + 2 Python threads x 15 requests at once: every answer exact and at its "
       "asker (%d busy answers along the way)" % busy)
    c.stop(app)


def sc_busy_cancel(c):
    app = c.boot()
    nh = c.nh
    ref = c.ask_json("The little dog", 5)
    app.send_signal(signal.SIGSTOP)
    with nh.Host(c.name) as h:
        hs = [h.submit("The little dog", max_tokens=5, request_id=i) for i in range(nh.N_SLOTS)]
        try:
            h.submit("x")
            fail("a 17th request was accepted with every slot in use")
        except nh.Busy as e:
            ok("full table: %s" % e)
        t0 = time.monotonic()
        try:
            h.submit("x", busy_wait=0.05)
            fail("busy_wait accepted a request with every slot in use")
        except nh.Busy:
            pass
        # A C host waits for a slot meanwhile, without failing.
        waiting = subprocess.Popen([c.nib, "ask", "--name", c.name, "--max-tokens", "5", "--json",
                                    "The little dog"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        time.sleep(0.2)
        if waiting.poll() is not None:
            fail("nib ask gave up on a full table: %r" % (waiting.communicate(),))
        app.send_signal(signal.SIGCONT)
        for i, hd in enumerate(hs):
            p = h.wait(hd, timeout=60)
            if p.request_id != i or p.generated_ids != ref["generated_token_ids"]:
                fail("queued request %d: %s" % (i, p.generated_ids))
            h.release(hd)
        out, err = waiting.communicate(timeout=60)
        if waiting.returncode != 0 or json.loads(out)["generated_token_ids"] != \
                ref["generated_token_ids"]:
            fail("the waiting nib ask: %r %r" % (out, err))
    ok("busy is back-pressure: the 16 queued requests and the waiting host all got exact answers")
    for attempt in range(10):
        p = c.start_host("cancel-mid", c.name)
        out, err = p.communicate(timeout=120)
        if p.returncode == 2:
            continue
        if p.returncode != 0:
            fail("cancel-mid: %s%s" % (out, err))
        ok(out.strip())
        break
    else:
        fail("never caught a request mid-stream")
    st = c.stats()
    if st["requests_cancelled"] != 1:
        fail("stats count %d cancelled" % st["requests_cancelled"])
    c.stop(app)


def sc_host_killed(c):
    app = c.boot()
    nh = c.nh
    ref = c.ask_json("Lily and Ben", 8)
    ctx = nh.Host(c.name)
    ctx_len = ctx.ctx_len
    ctx.close()
    before = c.stats()
    for attempt in range(10):
        hog = c.start_host("hog", c.name)
        line = hog.stdout.readline().split()
        if line and line[0] == "stopped":
            break
        hog.wait()
    else:
        fail("never caught the hog's request mid-stream")
    slot, at_stop = int(line[1]), int(line[2])
    # Another host queues a request behind the hog's, then the hog dies.
    other = subprocess.Popen([c.nib, "ask", "--name", c.name, "--max-tokens", "8", "--json",
                              "Lily and Ben"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.1)
    hog.kill()
    hog.wait()
    app.send_signal(signal.SIGCONT)
    for _ in deadline_loop(10, "the dead host's slot reclaimed"):
        state, owner, status, n_prompt, n_tokens = c.slot(slot)
        if state == nh.SLOT_FREE:
            break
    if status != 8:
        fail("the dead host's request ended with status %d, not owner_gone" % status)
    gen = n_tokens - n_prompt
    if gen >= ctx_len - n_prompt:
        fail("the dead host's request ran to the end of the context (%d tokens)" % gen)
    out, err = other.communicate(timeout=60)
    if other.returncode != 0 or json.loads(out)["generated_token_ids"] != \
            ref["generated_token_ids"]:
        fail("the other host: %r %r" % (out, err))
    after = c.stats()
    if after["slots_reclaimed"] - before["slots_reclaimed"] != 1:
        fail("slots_reclaimed went %d -> %d" % (before["slots_reclaimed"], after["slots_reclaimed"]))
    ok("host SIGKILLed mid-stream (%d tokens in): its generation stopped after %d tokens "
       "(context allows %d), slot reclaimed, the next host served exactly" %
       (at_stop, gen, ctx_len - n_prompt))

    # Killed holding a CLAIMED slot, and killed holding the claim lock.
    p = c.start_host("claim-die", c.name)
    slot = int(p.stdout.readline().split()[1])
    p.kill()
    p.wait()
    for _ in deadline_loop(10, "a CLAIMED slot of a dead host reclaimed"):
        if c.slot(slot)[0] == nh.SLOT_FREE:
            break
    p = c.start_host("lock-hang", c.name)
    if p.stdout.readline().strip() != "locked":
        fail("lock-hang did not lock")
    p.kill()
    p.wait()
    if c.ask_json("Lily and Ben", 8)["generated_token_ids"] != ref["generated_token_ids"]:
        fail("after a host died holding the claim lock")
    ok("hosts killed holding a claimed slot or the claim lock leave nothing stuck")

    # Killed after its request finished, before releasing it.
    code = ("import sys, os, signal; sys.path.insert(0, %r); import nibhost; "
            "h = nibhost.Host(%r); hd = h.submit('hi', max_tokens=2); p = h.wait(hd); "
            "print(hd.slot, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
            % (os.path.dirname(os.path.abspath(c.args.nibhost)), c.name))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    slot = int(r.stdout.split()[0])
    for _ in deadline_loop(10, "a DONE slot of a dead host reclaimed"):
        if c.slot(slot)[0] == nh.SLOT_FREE:
            break
    ok("a host killed before reading its answer: slot reclaimed")
    c.stop(app)


def sc_appliance_killed(c):
    nh = c.nh
    app = c.boot()
    app.send_signal(signal.SIGSTOP)
    w = c.start_host("wait-gone", c.name)
    if w.stdout.readline().strip() != "submitted":
        fail("wait-gone did not submit: " + w.stderr.read())
    app.kill()
    app.communicate()
    t0 = time.monotonic()
    try:
        out, err = w.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        w.kill()
        fail("a host waiting on a killed appliance hung")
    if w.returncode != 0 or "died" not in out:
        fail("wait-gone: %r %r" % (out, err))
    ok("host waiting on a SIGKILLed appliance: %s (after %.2f s)" %
       (out.strip().split(": ", 1)[1], time.monotonic() - t0))

    # The stale segment is refused by hosts, and replaced by the next boot.
    r = c.ask("hi", 2, check=False)
    if r.returncode == 0 or b"stale segment" not in r.stderr:
        fail("nib ask on a dead appliance's segment: %r" % r.stderr)
    ok("hosts refuse the dead appliance's segment: %s" % r.stderr.decode().strip())
    app = c.boot()
    with nh.Host(c.name) as h1:
        e1 = h1.epoch
    # A host attached to this boot, which is then killed and replaced.
    w = c.start_host("attach-then", c.name, stdin=subprocess.PIPE)
    first = w.stdout.readline().split()
    pyh = nh.Host(c.name)
    hd = pyh.submit("hi", max_tokens=2)
    pyh.wait(hd)
    app.kill()
    app.communicate()
    app = c.boot()
    w.stdin.write("go\n")
    w.stdin.flush()
    out, errs = w.communicate(timeout=60)
    if w.returncode != 0:
        fail("attach-then: %r %r" % (out, errs))
    lines = out.splitlines()
    epoch2 = int(lines[-1].split()[1])
    if epoch2 == int(first[1]) or int(first[1]) != e1 or "new boot" not in lines[0]:
        fail("epochs: first boot %s, host saw %s, then %d" % (e1, first[1], epoch2))
    ok("restart: an attached host gets '%s'; re-attached it sees epoch %d (was %s)" %
       (lines[0].split(": ", 1)[1], epoch2, first[1]))
    if not pyh.poll(hd).done:  # finished before the restart: still readable
        fail("a finished request became unreadable")
    try:
        pyh.submit("hi")
        fail("nibhost.py submitted to a replaced appliance")
    except nh.Gone as e:
        if "new boot" not in str(e):
            fail("nibhost.py after the restart: %s" % e)
        ok("nibhost.py after the restart: %s" % e)
    pyh.close()
    err = c.stop(app)
    if "stale" not in err:
        fail("the second boot did not report the stale segment: %r" % err)


def write_segment(path, version=2, pid=None, state=1, size=None):
    """A hand-made segment header as an appliance of `version` would write it."""
    b = bytearray(size or 4096)
    struct.pack_into("<QIIQQIIQQII", b, 0, 0x314D48534C42494E, version, 256, len(b), 99, 16,
                     1, 4096, 256, pid or os.getpid(), 512)
    struct.pack_into("<9I", b, 64, 8192, 4096, 32768, 256, 1, 2, 1, 128, 1)
    struct.pack_into("<I", b, 128, state)
    with open(path, "wb") as f:
        f.write(b)
    os.chmod(path, 0o600)


def sc_stale_boot(c):
    path = seg_path(c.name)
    # Foreign bytes under our name: replaced, said so, mode 0600.
    with open(path, "wb") as f:
        f.write(os.urandom(100))
    app = c.boot()
    if os.stat(path).st_mode & 0o777 != 0o600:
        fail("segment mode %o" % (os.stat(path).st_mode & 0o777))
    err = c.stop(app)
    if "stale" not in err:
        fail("foreign file not reported: %r" % err)
    ok("a foreign file under the segment name is reported and replaced; new segment mode 0600")
    # A segment whose appliance (a live pid) says READY: boot refused.
    write_segment(path, pid=os.getpid(), state=1)
    r = subprocess.run([c.app_exe, "--name", c.name], capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or "in use" not in r.stderr:
        fail("boot over a live appliance's segment: rc %d %r" % (r.returncode, r.stderr))
    if not os.path.exists(path):
        fail("the live appliance's segment was removed")
    ok("boot refused over a live appliance's segment: " + r.stderr.strip().splitlines()[-1])
    # The same pid but STOPPED: stale, replaced.
    write_segment(path, pid=os.getpid(), state=3)
    app = c.boot()
    err = c.stop(app)
    if "stale" not in err:
        fail("stopped segment not reported as stale: %r" % err)
    ok("a STOPPED segment is replaced at boot")
    # A segment of another layout version: hosts refuse it clearly.
    write_segment(path, version=1, pid=os.getpid(), size=4096)
    r = c.ask("hi", 2, check=False)
    if r.returncode == 0 or b"layout version 1, this host library speaks version 2" not in r.stderr:
        fail("nib ask on a version-1 segment: %r" % r.stderr)
    try:
        c.nh.Host(c.name)
        fail("nibhost.py attached to a version-1 segment")
    except c.nh.NibError as e:
        if "layout version 1" not in str(e):
            fail(str(e))
    ok("version-1 segment refused by nib ask and nibhost.py: " + r.stderr.decode().strip())
    os.unlink(path)
    # Group access is opt-in.
    app = c.boot(extra=("--group-access",))
    mode = os.stat(path).st_mode & 0o777
    c.stop(app)
    if mode != 0o660:
        fail("--group-access gave mode %o" % mode)
    ok("--group-access gives mode 0660")


def sc_scribble(c):
    app = c.boot()
    exp, _ = c.references(2)
    n = c.args.scribble_requests
    out = c.run_host("scribble", c.name, exp, str(n), "7", timeout=600)
    res = json.loads(out.splitlines()[-1])
    if app.poll() is not None:
        fail("the appliance died under garbage: " + app.stderr.read())
    st = c.stats()
    if st["requests_rejected"] < res["rejected"] or res["valid_ok"] < n // 16:
        fail("stats %s vs host %s" % (st, res))
    ref = c.ask_json("Once upon a time", 12)
    if ref["status"] not in ("ok", "eos"):
        fail("after the garbage: %s" % ref)
    ok("%d requests of random bytes (%d rejected naming a field, %d dropped for a dead owner, %d "
       "rewritten while running) interleaved with %d valid ones, each exact" %
       (n, res["rejected"], res["abandoned"], res["scribbled_late"], res["valid_ok"]))
    c.stop(app)


def sc_stress(c):
    fds0 = len(os.listdir("/proc/self/fd"))
    app = c.boot()
    exp, _ = c.references(64)
    before = c.stats()
    hosts = [c.start_host("stress", c.name, exp, "200", str(11 + k)) for k in range(4)]
    tot = {}
    for p in hosts:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            fail("stress host: %s%s" % (out, err))
        for k, v in json.loads(out.splitlines()[-1]).items():
            tot[k] = tot.get(k, 0) + v
    after = c.stats()
    d = {k: after[k] - before[k] for k in c.nh.STATS_COUNTERS}
    if tot["accepted"] != 800 or tot["finals"] != 800:
        fail("hosts: %s" % tot)
    want = {"requests_accepted": 800, "requests_done": 800, "requests_rejected": 0,
            "requests_cancelled": tot["cancelled"], "slots_reclaimed": 0,
            "tokens_generated": tot["tokens_generated"]}
    for k, v in want.items():
        if d[k] != v:
            fail("appliance counter %s moved by %d, the hosts say %d" % (k, d[k], v))
    if tot["cancelled"] == 0 or tot["busy"] == 0:
        fail("the mix did not exercise cancel and back-pressure: %s" % tot)
    c.stop(app)
    for p in c.procs:
        if p.poll() is None:
            fail("process %d left running" % p.pid)
    if os.path.exists(seg_path(c.name)):
        fail("segment left behind")
    fds1 = len(os.listdir("/proc/self/fd"))
    if fds1 != fds0:
        fail("the driver holds %d fds, had %d" % (fds1, fds0))
    ok("4 hosts x 200 requests: 800 final completions, %d cancelled, %d tokens, %d busy answers; "
       "appliance counters agree; no segment, fd or process left" %
       (tot["cancelled"], tot["tokens_generated"], tot["busy"]))


TINY = r"""
#include <stdio.h>
#include <string.h>
#include <nibhost.h>
#include <proto/shm_layout.h>
int main(int argc, char **argv)
{
    struct nib_host *h;
    if (nib_host_attach(&h, argv[1]) != NIB_HOST_OK) {
        printf("error: %s\n", nib_host_error(h));
        nib_host_detach(h);
        return 3;
    }
    struct nib_gen_params p = {.max_tokens = 6};
    struct nib_req_handle r;
    struct nib_progress pr;
    if (nib_host_submit(h, argv[2], strlen(argv[2]), &p, &r) != NIB_HOST_OK ||
        nib_host_wait(h, &r, NIB_HOST_WAIT_DONE, 30000, &pr) != NIB_HOST_OK)
        return 1;
    for (unsigned i = pr.n_prompt; i < pr.n_tokens; i++)
        printf("%s%u", i > pr.n_prompt ? "," : "", pr.tokens[i]);
    printf(" v%u\n", NIB_SHM_VERSION);
    nib_host_release(h, &r);
    nib_host_detach(h);
    return 0;
}
"""


def sc_install(c):
    a = c.args
    if not a.meson or not shutil.which("pkg-config"):
        print("SKIP: meson or pkg-config not found; the install check did not run")
        sys.exit(77)
    dest = os.path.join(c.tmp, "dest")
    r = subprocess.run([a.meson, "install", "-C", a.build_root, "--destdir", dest, "--no-rebuild",
                        "--quiet"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail("meson install: %s%s" % (r.stdout, r.stderr))
    pcs = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if f == "nibhost.pc"]
    if len(pcs) != 1:
        fail("nibhost.pc installed %d times" % len(pcs))
    pcdir = os.path.dirname(pcs[0])
    libdir = os.path.dirname(pcdir)
    prefix = subprocess.run(["pkg-config", "--variable=prefix", pcs[0]], capture_output=True,
                            text=True).stdout.strip()
    env = dict(os.environ, PKG_CONFIG_PATH=pcdir, PKG_CONFIG_SYSROOT_DIR=dest)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "nibhost"], capture_output=True,
                           text=True, env=env)
    if flags.returncode != 0:
        fail("pkg-config: " + flags.stderr)
    for f in ("libnibhost.a", "libnibhost.so"):
        if not os.path.exists(os.path.join(libdir, f)):
            fail("%s not installed in %s" % (f, libdir))
    src = os.path.join(c.tmp, "tiny.c")
    with open(src, "w") as f:
        f.write(TINY)
    exe_dyn, exe_static = os.path.join(c.tmp, "tiny"), os.path.join(c.tmp, "tiny-static")
    for exe, extra in ((exe_dyn, []), (exe_static, ["-Wl,-Bstatic", "-lnibhost", "-Wl,-Bdynamic"])):
        cmd = [a.cc, "-std=c11", "-Wall", "-Werror", src, "-o", exe] + flags.stdout.split() + extra
        if extra:
            cmd = [a.cc, "-std=c11", "-Wall", "-Werror", src, "-o", exe] + \
                  [x for x in flags.stdout.split() if not x.startswith("-l")] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            fail("compiling against the installed nibhost.pc (%s): %s" % (" ".join(cmd), r.stderr))
    ok("installed under %s: libnibhost.a, libnibhost.so, nibhost.pc (prefix %s); a program "
       "compiles against it: %s" % (dest, prefix, flags.stdout.strip()))
    app = c.boot()
    ref = c.ask_json("Once upon a time", 6)
    want = ",".join(map(str, ref["generated_token_ids"])) + " v2"
    env_run = dict(os.environ, LD_LIBRARY_PATH=libdir)
    for exe in (exe_dyn, exe_static):
        r = subprocess.run([exe, c.name, "Once upon a time"], capture_output=True, text=True,
                           env=env_run, timeout=60)
        if r.returncode != 0 or r.stdout.strip() != want:
            fail("%s: rc %d %r, want %r" % (exe, r.returncode, r.stdout, want))
    r = subprocess.run(["ldd", exe_dyn], capture_output=True, text=True, env=env_run)
    if libdir not in r.stdout:
        fail("the dynamic build did not use the installed libnibhost.so: " + r.stdout)
    ok("shared and static builds both answer like nib ask: " + want)
    c.stop(app)


SCENARIOS = {
    "python-host": sc_python_host, "many-hosts": sc_many_hosts, "busy-cancel": sc_busy_cancel,
    "host-killed": sc_host_killed, "appliance-killed": sc_appliance_killed,
    "stale-boot": sc_stale_boot, "scribble": sc_scribble, "stress": sc_stress,
    "install": sc_install,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nib", required=True)
    ap.add_argument("--appliance", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--nibhost", required=True)
    ap.add_argument("--scribble-requests", type=int, default=100000)
    ap.add_argument("--meson", default="")
    ap.add_argument("--build-root", default="")
    ap.add_argument("--cc", default="cc")
    ap.add_argument("scenario", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    # meson ends a test that runs too long with SIGTERM: clean up then too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: terminated (SIGTERM)"))
    c = Ctx(args, args.scenario)
    try:
        SCENARIOS[args.scenario](c)
    finally:
        c.cleanup()
    print("%s: all checks passed" % args.scenario)


if __name__ == "__main__":
    main()
