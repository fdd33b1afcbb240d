#!/usr/bin/env python3
"""Protocol scenarios against a real static appliance (docs/ring.md, version 4).

  test_protocol.py --nib NIB --appliance APP --host PROTO_HOST --nibhost PY SCENARIO

Each scenario boots its own appliance in its own runtime directory
($NIB_RUNTIME_DIR, a fresh temporary directory), talks to it only through
its socket and the memory it hands out (nib ask, proto_host,
tools/host/nibhost.py, and a raw host written here from docs/ring.md alone),
and stops it at the end, checking that it exits 0 and removes its socket.
Many scenarios play a hostile or buggy host: each attack here hurt the
appliance or another host with protocol version 2 (one shared segment).
Prints one line per check; exits non-zero on the first failure.

Scenarios (docs/ring.md §18): python-host, many-hosts, busy-cancel,
host-killed, appliance-killed, stale-boot, scribble, stress, install, seals,
punch-hole, forged-name, second-appliance, pid-fork, state-flip,
stopped-host, utf8, stop-bounded.
"""
import argparse
import ctypes
import errno
import fcntl
import importlib.util
import json
import mmap
import os
import random
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

PROMPTS = ["Once upon a time", "The little dog", "Lily and Ben", "hello", "A",
           "One day, a girl", "The sun was hot", "Tom had a red ball"]

# ---- the protocol, from docs/ring.md (independent of nibhost.py and libnibhost) ----
SHM_MAGIC = 0x334D48534C42494E
RING_MAGIC = 0x33474E524C42494E
VERSION = 4      # the shared memory's (header.version)
CTL_VERSION = 3  # the control messages' (unchanged in protocol 4: docs/ring.md §15)
CTL_MAGIC = 0x4342494E
CTL = struct.Struct("<IHHIIQQQ24s")
ATTACH, DETACH, STOP, KICK = 1, 2, 3, 4
ATTACHED, REFUSED, STOPPING = 0x81, 0x82, 0x83
NO_RING, DENIED, MALFORMED, NOT_READY = 1, 2, 3, 4
FREE, CLAIMED, SUBMITTED, RUNNING, DONE = range(5)
ST_NAMES = ["pending", "ok", "eos", "cancelled", "ctx_full", "text_full", "bad_request",
            "shutdown", "owner_gone", "host_changed"]
ST_OK, ST_EOS, ST_CANCELLED, ST_BAD, ST_SHUTDOWN, ST_OWNER_GONE, ST_HOST_CHANGED = \
    1, 2, 3, 6, 7, 8, 9
REQ_NO_BOS, REQ_PROMPT_IDS = 1, 2
STATS_OFFSET = 256
STATS_LINE0 = ["requests_accepted", "requests_done", "requests_rejected", "requests_cancelled",
               "slots_reclaimed", "tokens_prompt", "tokens_generated", "tokens_run"]
STATS_LINE3 = ["attaches", "attach_refused", "host_hangups", "requests_host_changed",
               "ctl_malformed"]
HEARTBEAT_STALE_S = 3.0
F_ADD_SEALS, F_GET_SEALS = 1033, 1034
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE, F_SEAL_FUTURE_WRITE = 1, 2, 4, 8, 16
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2
MADV_REMOVE = 9

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
MAP_FAILED = ctypes.c_void_p(-1).value


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg, flush=True)


def sigstop(proc):
    """SIGSTOP the appliance and wait until every one of its threads is
    stopped: the signal lands asynchronously, and a test that reads counts
    right after kill() would race the threads still running."""
    proc.send_signal(signal.SIGSTOP)
    task = "/proc/%d/task" % proc.pid
    end = time.monotonic() + 5
    while time.monotonic() < end:
        states = []
        for tid in os.listdir(task):
            try:
                with open("%s/%s/stat" % (task, tid)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                pass
        if states and all(st in ("T", "t") for st in states):
            return
        time.sleep(0.0002)
    fail("the appliance did not stop within 5 s of SIGSTOP")


def deadline_loop(seconds, what):
    """Yield until the body breaks; fail after `seconds` (a hang guard, not a speed check)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        yield
        time.sleep(0.002)
    fail("%s: still not after %.0f s" % (what, seconds))


def ctl_msg(typ, status=0, host_index=0, epoch=0, hsize=0, rsize=0, reserved=b"", magic=CTL_MAGIC,
            version=CTL_VERSION):
    return CTL.pack(magic, version, typ, status, host_index, epoch, hsize, rsize,
                    reserved.ljust(24, b"\0"))


def ring_addr(m):
    """The address of a writable mmap object (for madvise)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(m))


class Refused(Exception):
    def __init__(self, status):
        Exception.__init__(self, "REFUSED %d" % status)
        self.status = status


class Raw:
    """A host written from docs/ring.md alone, able to misbehave: it owns its
    socket, its two descriptors and its mappings, and the tests poke at them."""

    def __init__(self, path, attach=True, timeout=30):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.hdr = self.ring = None
        self.fds = []
        if attach:
            self.attach()

    def send(self, typ, **kw):
        self.s.send(ctl_msg(typ, **kw))

    def recv(self, timeout=30):
        """(fields tuple or None at EOF, fds)."""
        self.s.settimeout(timeout)
        data, fds, _, _ = socket.recv_fds(self.s, 256, 4)
        if not data:
            return None, fds
        if len(data) != 64:
            fail("a control message of %d bytes" % len(data))
        return CTL.unpack(data), fds

    def attach(self):
        self.send(ATTACH)
        m, fds = self.recv()
        if m is None:
            fail("the appliance closed the connection instead of answering ATTACH")
        magic, version, typ, status, index, epoch, hsize, rsize, _ = m
        if magic != CTL_MAGIC or version != CTL_VERSION:
            fail("reply magic %x version %d" % (magic, version))
        if typ == REFUSED:
            for fd in fds:
                os.close(fd)
            raise Refused(status)
        if typ != ATTACHED or len(fds) != 2:
            fail("ATTACH answered with type %x and %d fds" % (typ, len(fds)))
        self.fds = fds
        self.hfd, self.rfd = fds
        self.index, self.epoch, self.hsize, self.rsize = index, epoch, hsize, rsize
        if os.fstat(self.hfd).st_size != hsize or os.fstat(self.rfd).st_size != rsize:
            fail("fd sizes differ from the ATTACHED message")
        self.hdr = mmap.mmap(self.hfd, hsize, mmap.MAP_SHARED, mmap.PROT_READ)
        self.ring = mmap.mmap(self.rfd, rsize, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        h = self.hdr
        if struct.unpack_from("<QI", h, 0) != (SHM_MAGIC, VERSION):
            fail("header magic/version %s" % (struct.unpack_from("<QI", h, 0),))
        (self.vocab,) = struct.unpack_from("<I", h, 52)
        self.ctx_len, self.bos, self.eos, self.add_bos = struct.unpack_from("<4I", h, 64)
        (self.ring_size, self.ring_header_size, self.n_slots, self.slots_offset,
         self.slot_size) = struct.unpack_from("<QIIQQ", h, 128)
        (self.prompt_offset, self.prompt_max, self.tokens_offset, self.slot_tokens,
         self.text_offset, self.slot_text) = struct.unpack_from("<6I", h, 160)
        if self.ring_size != rsize or struct.unpack_from("<Q", h, 24)[0] != epoch:
            fail("header geometry or epoch differs from the ATTACHED message")
        if self.slots_offset + self.n_slots * self.slot_size > rsize or \
                self.text_offset + self.slot_text > self.slot_size:
            fail("header geometry does not fit in the ring")
        rm, re_, ri = struct.unpack_from("<QQI", self.ring, 0)
        if rm != RING_MAGIC or re_ != epoch or ri != index:
            fail("ring header: magic %x epoch %d index %d" % (rm, re_, ri))
        return self

    # header
    def hu32(self, off):
        return struct.unpack_from("I", self.hdr, off)[0]

    def sleeping(self):
        return self.hu32(196)

    def heartbeat(self):
        return struct.unpack_from("Q", self.hdr, 200)[0]

    def stats(self):
        d = dict(zip(STATS_LINE0, struct.unpack_from("<8Q", self.hdr, STATS_OFFSET)))
        d.update(zip(STATS_LINE3, struct.unpack_from("<5Q", self.hdr, STATS_OFFSET + 192)))
        d["hosts_attached"], d["socket_lost"] = struct.unpack_from("<II", self.hdr,
                                                                   STATS_OFFSET + 232)
        return d

    # ring
    def so(self, i):
        return self.slots_offset + i * self.slot_size

    def state(self, i):
        return struct.unpack_from("I", self.ring, self.so(i))[0]

    def set_state(self, i, v):
        struct.pack_into("I", self.ring, self.so(i), v)

    def write_request(self, i, prompt, max_tokens, flags=0, temperature=0.0, seed=0, kind=0,
                      request_id=0):
        b = self.so(i)
        if isinstance(prompt, str):
            prompt = prompt.encode()
        elif isinstance(prompt, list):
            prompt = struct.pack("<%dI" % len(prompt), *prompt)
            flags |= REQ_PROMPT_IDS
        self.set_state(i, CLAIMED)
        struct.pack_into("<IIQ", self.ring, b + 16, 0, 0, request_id)
        struct.pack_into("<IIfIQI36s", self.ring, b + 64, len(prompt), max_tokens, temperature,
                         flags, seed, kind, b"")
        self.ring[b + 128:b + 176] = bytes(48)
        self.ring[b + self.prompt_offset:b + self.prompt_offset + len(prompt)] = prompt

    def submit(self, i, prompt, max_tokens, kick=True, **kw):
        self.write_request(i, prompt, max_tokens, **kw)
        (ticket,) = struct.unpack_from("Q", self.ring, 72)
        struct.pack_into("Q", self.ring, 72, ticket + 1)
        struct.pack_into("Q", self.ring, self.so(i) + 8, ticket)
        self.set_state(i, SUBMITTED)
        if kick and self.sleeping():
            try:
                self.s.send(ctl_msg(KICK), socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
        return ticket

    def read(self, i):
        b = self.so(i)
        st = self.state(i)
        n_tokens, n_prompt, text_len, status = struct.unpack_from("<4I", self.ring, b + 128)
        t_start, t_first, t_done, served = struct.unpack_from("<4Q", self.ring, b + 144)
        n_tokens = min(n_tokens, self.slot_tokens)
        n_prompt = min(n_prompt, n_tokens)
        text_len = min(text_len, self.slot_text)
        toks = list(struct.unpack_from("<%dI" % n_tokens, self.ring, b + self.tokens_offset))
        err = bytes(self.ring[b + 176:b + 304]).split(b"\0")[0].decode("utf-8", "replace")
        return {"state": st, "status": status, "n_tokens": n_tokens, "n_prompt": n_prompt,
                "prompt_ids": toks[:n_prompt], "generated": toks[n_prompt:],
                "text": bytes(self.ring[b + self.text_offset:b + self.text_offset + text_len]),
                "t_start": t_start, "t_done": t_done, "served_ticket": served, "error": err,
                "ticket": struct.unpack_from("Q", self.ring, b + 8)[0]}

    def wait(self, i, seconds=60, what="request"):
        for _ in deadline_loop(seconds, "raw host: %s done" % what):
            if self.state(i) == DONE:
                return self.read(i)

    def ask(self, i, prompt, max_tokens, **kw):
        self.submit(i, prompt, max_tokens, **kw)
        r = self.wait(i, what=repr(prompt))
        self.set_state(i, FREE)
        return r

    def close(self, detach=False):
        if detach:
            try:
                self.send(DETACH)
            except OSError:
                pass
        self.s.close()
        for m in (self.hdr, self.ring):
            if m is not None:
                try:
                    m.close()
                except BufferError:  # a ctypes view is alive; the process exits soon
                    pass
        for fd in self.fds:
            os.close(fd)
        self.fds = []


class Ctx:
    def __init__(self, args, scenario):
        self.nib = os.path.abspath(args.nib)
        self.app_exe = os.path.abspath(args.appliance)
        self.host = os.path.abspath(args.host)
        self.nibhost_py = os.path.abspath(args.nibhost)
        self.args = args
        spec = importlib.util.spec_from_file_location("nibhost", args.nibhost)
        self.nh = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.nh)
        self.name = "p" + scenario.replace("-", "")[:12]
        self.tmp = tempfile.mkdtemp(prefix="nibproto")
        # Every process of the scenario (appliance, nib, proto_host, nibhost.py)
        # finds the appliance in this directory (docs/ring.md §1).
        self.rundir = os.path.join(self.tmp, "run")
        os.environ["NIB_RUNTIME_DIR"] = self.rundir
        self.procs = []
        self.pids = []

    def sock_path(self, name=None):
        return os.path.join(self.rundir, (name or self.name) + ".sock")

    def lock_path(self, name=None):
        return os.path.join(self.rundir, (name or self.name) + ".lock")

    # ---- the appliance ----
    def boot(self, extra=(), name=None, env=None):
        name = name or self.name
        p = subprocess.Popen([self.app_exe, "--name", name, "--spin-us", "200", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        path = os.path.join((env or os.environ)["NIB_RUNTIME_DIR"], name + ".sock")
        for _ in deadline_loop(30, "appliance ready"):
            if p.poll() is not None:
                fail("appliance exited during boot: " + p.stderr.read())
            try:
                Raw(path, timeout=10).close()
                break
            except (OSError, Refused):
                pass
        self.procs.append(p)
        return p

    def refused_boot(self, extra=(), name=None, env=None):
        """Boot that must be refused: (rc, stderr)."""
        r = subprocess.run([self.app_exe, "--name", name or self.name, *extra], capture_output=True,
                           text=True, timeout=60, env=env)
        if r.returncode == 0:
            fail("boot should have been refused: %r" % r.stderr)
        return r.returncode, r.stderr

    def stop(self, p, name=None):
        name = name or self.name
        r = subprocess.run([self.nib, "stop", "--name", name], capture_output=True, text=True,
                           timeout=90)
        if r.returncode != 0:
            fail("nib stop: " + r.stderr)
        return self.finish(p, name)

    def finish(self, p, name=None, want_rc=0):
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            fail("appliance did not exit after stop")
        if p.returncode != want_rc:
            fail("appliance exit status %d: %s" % (p.returncode, err))
        if os.path.lexists(self.sock_path(name)):
            fail("socket still present after stop")
        return err

    def cleanup(self):
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.kill()
                p.communicate()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- hosts ----
    def raw(self, **kw):
        return Raw(self.sock_path(), **kw)

    def raw_retry(self, seconds=30):
        """Attach, retrying while every ring is taken: a host that just died
        frees its ring only once its running request has ended (at the next
        control checkpoint), as a real host would retry."""
        for _ in deadline_loop(seconds, "a free ring"):
            try:
                return self.raw()
            except Refused as e:
                if e.status != NO_RING:
                    raise

    def ask(self, prompt, max_tokens, *extra, check=True, timeout=120):
        r = subprocess.run([self.nib, "ask", "--name", self.name, "--max-tokens", str(max_tokens),
                            "--json", *extra, prompt], capture_output=True, timeout=timeout)
        if check and r.returncode != 0:
            fail("nib ask %r failed (%d): %s" % (prompt, r.returncode, r.stderr))
        return r

    def ask_json(self, prompt, max_tokens, *extra):
        return json.loads(self.ask(prompt, max_tokens, *extra).stdout.decode("utf-8"))

    def py(self, *args, timeout=120):
        return subprocess.run([sys.executable, self.nibhost_py, *args], capture_output=True,
                              timeout=timeout)

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
        return path, {p: a for p, a in zip(PROMPTS, refs)}

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

    def fork(self, body):
        """Run body() in a child process; returns (pid, read end of a pipe the
        child's body may write lines to through the file it is given)."""
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                with os.fdopen(w, "w", buffering=1) as out:
                    body(out)
            except BaseException as e:  # the parent reads this line
                try:
                    os.write(w, ("error %r\n" % (e,)).encode())
                except OSError:
                    pass
                os._exit(1)
            os._exit(0)
        os.close(w)
        self.pids.append(pid)
        return pid, os.fdopen(r, "r")

    def reap(self, pid, sig=None):
        if sig is not None:
            os.kill(pid, sig)
        _, st = os.waitpid(pid, 0)
        self.pids.remove(pid)
        return st


def expect_line(f, prefix, what):
    line = f.readline()
    if not line.startswith(prefix):
        fail("%s: expected %r, got %r" % (what, prefix, line))
    return line.split()


def same_answer(got_ids, ref, what):
    if got_ids != ref["generated_token_ids"]:
        fail("%s: generated %s, nib ask gave %s" % (what, got_ids, ref["generated_token_ids"]))


# ---------------------------------------------------------------- ported scenarios

def sc_python_host(c):
    app = c.boot()
    nh = c.nh
    cases = [(p, 12, ()) for p in PROMPTS[:5]] + [
        ("Once upon a time", 10, ("--temperature", "0.9", "--seed", "5")),
        ("The little dog", 6, ("--no-bos",)),
        ("", 4, ())]
    for prompt, n, extra in cases:
        a = c.ask(prompt, n, *extra)
        b = c.py("ask", "--name", c.name, "--max-tokens", str(n), "--json", *extra, prompt)
        if b.returncode != a.returncode:
            fail("%r: nib ask rc %d, nibhost.py rc %d: %s" % (prompt, a.returncode, b.returncode,
                                                              b.stderr))
        head = a.stdout.split(b', "timings"')[0] + b"}\n"
        if head != b.stdout:
            fail("%r %s: nibhost.py --json differs from nib ask --json:\n %r\n %r" %
                 (prompt, extra, head, b.stdout))
        ta = subprocess.run([c.nib, "ask", "--name", c.name, "--max-tokens", str(n), *extra,
                             prompt], capture_output=True, timeout=60)
        tb = c.py("ask", "--name", c.name, "--max-tokens", str(n), *extra, prompt)
        if ta.stdout != tb.stdout:
            fail("%r: text mode differs:\n %r\n %r" % (prompt, ta.stdout, tb.stdout))
    ok("%d requests: nibhost.py gives nib ask's token ids, JSON and text byte for byte" % len(cases))

    # The empty prompt with --no-bos is a bad request: both say which field.
    a = c.ask("", 4, "--no-bos", check=False)
    b = c.py("ask", "--name", c.name, "--json", "--no-bos", "")
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    if a.returncode == 0 or b.returncode == 0 or ja["status"] != "bad_request" or \
            not ja["error"].startswith("prompt_len:") or jb["error"] != ja["error"]:
        fail("bad request: %r / %r" % (a.stdout, b.stdout))
    ok("bad request named by both: %s" % ja["error"])

    # Reserved kinds and flags are refused naming the field (docs/ring.md §15); chat on a
    # model without a template says so.
    raw = c.raw()
    for kw, field in (({"kind": 1}, "kind: this model has no chat template"),
                      ({"kind": 3}, "kind:"), ({"flags": 8}, "flags:")):
        r = raw.ask(0, "hello", 2, **kw)
        if r["status"] != ST_BAD or not r["error"].startswith(field):
            fail("reserved %s: status %s, error %r" % (kw, ST_NAMES[r["status"]], r["error"]))
    r = raw.ask(0, "hello", 2, flags=4)  # SPECIAL: known since version 4
    if r["status"] not in (ST_OK, ST_EOS):
        fail("special flag: status %s, error %r" % (ST_NAMES[r["status"]], r["error"]))
    ok("reserved request kinds (tensor) and flags are refused naming the field; chat on a model "
       "without a template is refused saying so; the special-tokens flag is served")
    raw.close()

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
    # A host built for another protocol version is refused, clearly.
    saved = nh.VERSION
    nh.VERSION = VERSION + 1
    try:
        nh.Host(c.name)
        fail("a version-%d host attached to a version-%d appliance" % (VERSION + 1, VERSION))
    except nh.NibError as e:
        if str(VERSION) not in str(e) or str(VERSION + 1) not in str(e):
            fail("version refusal does not give both versions: %s" % e)
        ok("a host of another protocol version is refused: %s" % e)
    finally:
        nh.VERSION = saved
    c.stop(app)


def sc_many_hosts(c):
    app = c.boot(extra=("--max-hosts", "12"))
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
    ok("6 C hosts x 40 + 2 Python threads x 15 requests at once, each on its own ring: every "
       "answer exact and at its asker (%d busy answers along the way)" % busy)
    # All rings taken: the next ATTACH is refused, not queued, and counted.
    hold = [c.raw_retry() for _ in range(12)]
    try:
        c.raw()
        fail("a 13th host attached to --max-hosts 12")
    except Refused as e:
        if e.status != NO_RING:
            fail("13th host refused with status %d, not NO_RING" % e.status)
    st = hold[0].stats()
    if st["hosts_attached"] != 12 or st["attach_refused"] < 1:
        fail("stats with every ring taken: %s" % st)
    for h in hold:
        h.close()
    ok("--max-hosts 12: 12 hosts attached at once, the 13th refused NO_RING")
    c.stop(app)


def sc_busy_cancel(c):
    app = c.boot()
    nh = c.nh
    ref = c.ask_json("The little dog", 5)
    probe = c.raw()
    n_slots = probe.n_slots
    probe.close()
    with nh.Host(c.name) as h:  # attached while the appliance runs
        sigstop(app)
        hs = [h.submit("The little dog", max_tokens=5, request_id=i) for i in range(n_slots)]
        try:
            h.submit("x")
            fail("request %d was accepted with every slot of the ring in use" % (n_slots + 1))
        except nh.Busy as e:
            ok("full ring: %s" % e)
        try:
            h.submit("x", busy_wait=0.05)
            fail("busy_wait accepted a request with every slot in use")
        except nh.Busy:
            pass
        # Another host has a ring of its own: it waits for the appliance only.
        waiting = subprocess.Popen([c.nib, "ask", "--name", c.name, "--max-tokens", "5", "--json",
                                    "The little dog"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        time.sleep(0.2)
        if waiting.poll() is not None:
            fail("nib ask gave up while another host's ring was full: %r" %
                 (waiting.communicate(),))
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
    ok("busy is per-host back-pressure: the %d queued requests and the other host all got exact "
       "answers" % n_slots)

    # Fair service: a host with every slot queued (and small tickets) against
    # one with a single request and an enormous ticket: round-robin serves the
    # lone request second at the latest.
    a, b = c.raw(), c.raw()
    struct.pack_into("Q", b.ring, 72, 1 << 62)
    sigstop(app)
    for i in range(a.n_slots):
        a.submit(i, "The little dog", 5)
    b.submit(0, "The little dog", 5)
    app.send_signal(signal.SIGCONT)
    ra = sorted(a.wait(i)["t_start"] for i in range(a.n_slots))
    rb = b.wait(0)
    if rb["t_start"] > ra[1]:
        fail("the lone request started after %d of the other host's" %
             sum(t < rb["t_start"] for t in ra))
    if rb["served_ticket"] != 1 << 62 or rb["generated"] != ref["generated_token_ids"]:
        fail("the lone request: %s" % rb)
    ok("round-robin between hosts: the lone request (ticket 2^62) ran before all but at most one "
       "of the other host's %d (tickets 0..%d)" % (a.n_slots, a.n_slots - 1))
    a.close()
    b.close()

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


def wait_stat(raw, key, want, what, seconds=10):
    for _ in deadline_loop(seconds, what):
        if raw.stats()[key] >= want:
            return raw.stats()


def sc_host_killed(c):
    app = c.boot(extra=("--max-hosts", "3"))
    ref = c.ask_json("Lily and Ben", 8)
    obs = c.raw()  # an observer: reads the statistics page
    ctx_len = obs.ctx_len
    for attempt in range(10):
        # Counted from each attempt: a hog that missed (its request finished
        # before it saw a token, or before its stop could hold it mid-stream)
        # added a whole request and a hang-up, which must be settled before
        # the next attempt's baseline.
        before = obs.stats()
        hog = c.start_host("hog", c.name)
        line = hog.stdout.readline().split()
        if line and line[0] == "stopped":
            break
        hog.wait()
        wait_stat(obs, "host_hangups", before["host_hangups"] + 1, "a missed hog's hang-up")
    else:
        fail("never caught the hog's request mid-stream")
    at_stop = int(line[2])
    # Another host queues a request behind the hog's, then the hog dies.
    other = subprocess.Popen([c.nib, "ask", "--name", c.name, "--max-tokens", "8", "--json",
                              "Lily and Ben"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.1)
    hog.kill()
    hog.wait()
    app.send_signal(signal.SIGCONT)
    after = wait_stat(obs, "slots_reclaimed", before["slots_reclaimed"] + 1,
                      "the dead host's request dropped")
    out, err = other.communicate(timeout=60)
    if other.returncode != 0 or json.loads(out)["generated_token_ids"] != \
            ref["generated_token_ids"]:
        fail("the other host: %r %r" % (out, err))
    after = wait_stat(obs, "host_hangups", before["host_hangups"] + 2, "both hosts' hang-ups")
    gen = after["tokens_generated"] - before["tokens_generated"] - 8
    # It stops at the next control checkpoint: within NIB_CONTROL_CHECK_TOKENS (64).
    if gen > at_stop + 64 + 1:
        fail("the dead host's request ran on: %d tokens, %d when it died" % (gen, at_stop))
    if after["host_hangups"] - before["host_hangups"] < 2 or \
            after["slots_reclaimed"] - before["slots_reclaimed"] != 1:
        fail("stats after the kill: %s -> %s" % (before, after))
    ok("host SIGKILLed mid-stream (%d tokens in): its generation stopped after %d tokens "
       "(at the next checkpoint; the context allows %d), counted as a hang-up, the next host "
       "served exactly" %
       (at_stop, gen, ctx_len))

    # Killed holding a CLAIMED slot, and killed before reading its answer.
    p = c.start_host("claim-die", c.name)
    expect_line(p.stdout, "claimed", "claim-die")
    h0 = obs.stats()["host_hangups"]
    p.kill()
    p.wait()
    wait_stat(obs, "host_hangups", h0 + 1, "claim-die's hang-up seen")
    code = ("import sys, os, signal; sys.path.insert(0, %r); import nibhost; "
            "h = nibhost.Host(%r); hd = h.submit('hi', max_tokens=2); p = h.wait(hd); "
            "print('done', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
            % (os.path.dirname(c.nibhost_py), c.name))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    if not r.stdout.startswith("done"):
        fail("python host: %r" % r.stderr)
    wait_stat(obs, "host_hangups", h0 + 2, "the python host's hang-up seen")
    # Every ring comes back, clean, to the next hosts.
    obs.close()
    hosts = [c.raw_retry() for _ in range(3)]
    for h in hosts:
        if any(h.state(i) != FREE for i in range(h.n_slots)):
            fail("ring %d handed out with slots %s" % (h.index, [h.state(i)
                                                                for i in range(h.n_slots)]))
        for i in range(h.n_slots):
            same_answer(h.ask(i, "Lily and Ben", 8)["generated"], ref, "reused ring")
        h.close()
    ok("hosts killed holding a claimed slot or an unread answer leave nothing stuck: all 3 rings "
       "come back with every slot free and serve exactly")
    c.stop(app)


def wait_gone_on_stopped(c, app):
    """proto_host wait-gone, attached, then app SIGSTOPped, then its request
    submitted: the host is left waiting on an appliance that does not move."""
    w = c.start_host("wait-gone", c.name, stdin=subprocess.PIPE)
    expect_line(w.stdout, "attached", "wait-gone")
    sigstop(app)
    w.stdin.write("go\n")
    w.stdin.flush()
    expect_line(w.stdout, "submitted", "wait-gone")
    return w


def sc_appliance_killed(c):
    nh = c.nh
    app = c.boot()
    w = wait_gone_on_stopped(c, app)
    app.kill()
    app.communicate()
    t0 = time.monotonic()
    try:
        out, err = w.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        w.kill()
        fail("a host waiting on a killed appliance hung")
    if w.returncode != 0 or "exited" not in out:
        fail("wait-gone: %r %r" % (out, err))
    ok("host waiting on a SIGKILLed appliance: %s (after %.2f s)" %
       (out.strip().splitlines()[-1].split(": ", 1)[-1], time.monotonic() - t0))

    # Its socket is left behind: hosts say nobody is there; the next boot replaces it.
    if not os.path.lexists(c.sock_path()):
        fail("the killed appliance's socket disappeared")
    r = c.ask("hi", 2, check=False)
    if r.returncode == 0 or b"no appliance" not in r.stderr:
        fail("nib ask on a dead appliance's socket: %r" % r.stderr)
    try:
        nh.Host(c.name)
        fail("nibhost.py attached to a dead appliance")
    except nh.NibError as e:
        ok("hosts report the dead appliance: %s / %s" % (r.stderr.decode().strip(), e))
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
    if epoch2 == int(first[1]) or int(first[1]) != e1:
        fail("epochs: first boot %s, host saw %s, then %d" % (e1, first[1], epoch2))
    ok("restart: an attached host gets '%s'; re-attached it sees epoch %d (was %s)" %
       (lines[0].split(": ", 1)[-1], epoch2, first[1]))
    try:
        pyh.submit("hi")
        fail("nibhost.py submitted to a replaced appliance")
    except nh.Gone as e:
        ok("nibhost.py after the restart: %s" % e)
    pyh.close()
    with nh.Host(c.name) as h2:
        if h2.epoch == e1:
            fail("the new boot has the old epoch")
    c.stop(app)


def sc_stale_boot(c):
    # A killed appliance leaves its socket and lock file: the next boot takes the
    # lock (the kernel dropped it) and replaces the socket.
    app = c.boot()
    app.kill()
    app.communicate()
    if not os.path.lexists(c.sock_path()) or not os.path.exists(c.lock_path()):
        fail("a killed appliance should leave its socket and lock file")
    app = c.boot()
    err = c.stop(app)
    ok("a killed appliance's socket is replaced at the next boot")
    if not os.path.exists(c.lock_path()):
        fail("the lock file was removed (it never is)")
    # A stopped appliance's name boots again.
    app = c.boot()
    c.stop(app)
    # Foreign bytes at the socket path and in the lock file: neither is trusted.
    with open(c.sock_path(), "wb") as f:
        f.write(os.urandom(100))
    with open(c.lock_path(), "wb") as f:
        f.write(os.urandom(100))
    app = c.boot()
    modes = {p: stat.S_IMODE(os.lstat(p).st_mode) for p in (c.rundir, c.sock_path(), c.lock_path())}
    if not stat.S_ISSOCK(os.lstat(c.sock_path()).st_mode):
        fail("the socket path does not hold a socket")
    err = c.stop(app)
    if modes != {c.rundir: 0o700, c.sock_path(): 0o600, c.lock_path(): 0o600}:
        fail("modes: %s" % {p: oct(m) for p, m in modes.items()})
    ok("foreign bytes at the socket path and in the lock file: replaced / ignored; runtime dir "
       "0700, socket 0600, lock 0600")
    # Group access is opt-in: a fresh directory 0750, socket 0660.
    gdir = os.path.join(c.tmp, "grp")
    env = dict(os.environ, NIB_RUNTIME_DIR=gdir)
    app = c.boot(extra=("--group-access",), env=env)
    st_dir = os.lstat(gdir)
    sock = os.lstat(os.path.join(gdir, c.name + ".sock"))
    if stat.S_IMODE(st_dir.st_mode) != 0o750 or stat.S_IMODE(sock.st_mode) != 0o660 or \
            st_dir.st_gid != os.getegid():
        fail("--group-access: dir %o gid %d, socket %o" % (stat.S_IMODE(st_dir.st_mode),
                                                          st_dir.st_gid,
                                                          stat.S_IMODE(sock.st_mode)))
    ok("--group-access: runtime dir 0750 with the appliance's group, socket 0660")
    # Hosts of another uid (docs/ring.md §16): in the appliance's group they
    # may attach but not stop it; outside it they cannot reach the socket;
    # without --group-access nobody else can.
    if os.geteuid() != 0:
        print("note: not root, so hosts of another uid were not tried (that needs setuid)")
    else:
        os.chmod(c.tmp, 0o711)  # others may pass through to the runtime dirs, no more
        gid = os.getegid()

        def as_user(uid, g, *cmd, e=env):
            def drop():
                os.setgroups([])
                os.setgid(g)
                os.setuid(uid)
            return subprocess.run([c.nib, *cmd, "--name", c.name], capture_output=True,
                                  text=True, timeout=120, env=e, preexec_fn=drop)
        ref = subprocess.run([c.nib, "ask", "--json", "--max-tokens", "8", "--name", c.name,
                              "Lily and Ben"], capture_output=True, text=True, timeout=60,
                             env=env)
        r = as_user(65534, gid, "ask", "--json", "--max-tokens", "8", "Lily and Ben")
        if r.returncode != 0 or json.loads(r.stdout)["generated_token_ids"] != \
                json.loads(ref.stdout)["generated_token_ids"]:
            fail("a host of another uid in the group: %r %r" % (r.stdout, r.stderr))
        r = as_user(65534, gid, "stop", "--timeout", "10")
        if r.returncode == 0 or app.poll() is not None:
            fail("a host of another uid stopped the appliance: %r" % r.stderr)
        ok("uid 65534 in the appliance's group: attaches and gets the exact answer; its STOP is "
           "refused: %s" % r.stderr.strip().splitlines()[-1])
        r = as_user(65534, 65534, "ask", "--max-tokens", "2", "hi")
        if r.returncode == 0:
            fail("a host outside the group reached the appliance")
        ok("uid 65534 outside the group cannot reach it: %s" % r.stderr.strip().splitlines()[-1])
    r = subprocess.run([c.nib, "stop", "--name", c.name], capture_output=True, text=True,
                       timeout=90, env=env)
    app.communicate(timeout=60)
    if r.returncode != 0 or app.returncode != 0:
        fail("stopping the group-access appliance: %s" % r.stderr)
    if os.geteuid() == 0:
        app = c.boot()
        r = as_user(65534, os.getegid(), "ask", "--max-tokens", "2", "hi", e=os.environ)
        if r.returncode == 0:
            fail("without --group-access a host of another uid reached the appliance")
        c.stop(app)
        ok("without --group-access another uid, even of the appliance's group, cannot reach it: "
           "%s" % r.stderr.strip().splitlines()[-1])


def sc_scribble(c):
    app = c.boot()
    exp, _ = c.references(2)
    n = c.args.scribble_requests
    out = c.run_host("scribble", c.name, exp, str(n), "7", timeout=900)
    res = json.loads(out.splitlines()[-1])
    if app.poll() is not None:
        fail("the appliance died under garbage: " + app.stderr.read())
    st = c.stats()
    if st["requests_rejected"] < res["rejected"] or res["valid_ok"] < n // 16:
        fail("stats %s vs host %s" % (st, res))
    ref = c.ask_json("Once upon a time", 12)
    if ref["status"] not in ("ok", "eos"):
        fail("after the garbage: %s" % ref)
    ok("%d requests of random bytes in the host's own ring interleaved with %d valid ones, each "
       "exact: %s" % (n, res["valid_ok"], out.splitlines()[-1]))
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
    d = {k: after[k] - before[k] for k in STATS_LINE0}
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
    fds1 = len(os.listdir("/proc/self/fd"))
    if fds1 != fds0:
        fail("the driver holds %d fds, had %d" % (fds1, fds0))
    ok("4 hosts x 200 requests: 800 final completions, %d cancelled, %d tokens, %d busy answers; "
       "appliance counters agree; no socket, fd or process left" %
       (tot["cancelled"], tot["tokens_generated"], tot["busy"]))


TINY = r"""
#include <stdio.h>
#include <string.h>
#include <nibhost.h>
#include <proto/shm_layout.h>
int main(int argc, char **argv)
{
    struct nib_host *h;
    if (nib_host_attach(&h, argv[1], 0) != NIB_HOST_OK) {
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
    want = ",".join(map(str, ref["generated_token_ids"])) + " v%d" % VERSION
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




# ---------------------------------------------------------------- one per failure class (issue 9)

def attempt(results, what, fn):
    """Run fn, which must be refused by the kernel; record what happened."""
    try:
        fn()
    except OSError as e:
        results.append((what, errno.errorcode.get(e.errno, str(e.errno))))
        return
    results.append((what, "ALLOWED"))


def c_call(fn, *a):
    r = fn(*a)
    if r == -1 or (fn is libc.mmap and r == MAP_FAILED):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def mprotect_write(fd, size):
    addr = c_call(libc.mmap, None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    try:
        c_call(libc.mprotect, addr, size, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        libc.munmap(addr, size)


def madvise_remove(fd, size):
    addr = c_call(libc.mmap, None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    try:
        c_call(libc.madvise, addr, size, MADV_REMOVE)
    finally:
        libc.munmap(addr, size)


def punch(fd, off, length):
    c_call(libc.fallocate, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, length)


def catch_running(r, i, app, prompt="Once upon a time"):
    """Submit a long request in slot i of raw host r and return with it
    RUNNING, a token or two out, and the appliance SIGSTOPped (the caller
    continues it). A short model's generation can end between two looks:
    then it is tried again."""
    b = r.so(i)
    for attempt in range(50):
        r.submit(i, prompt, r.slot_tokens)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            st = r.state(i)
            n_tokens, n_prompt = struct.unpack_from("<II", r.ring, b + 128)
            if st == DONE or (st == RUNNING and n_tokens > n_prompt + 1):
                break
        if r.state(i) == RUNNING:
            sigstop(app)
            if r.state(i) == RUNNING:
                return
            app.send_signal(signal.SIGCONT)
        r.wait(i)
        r.set_state(i, FREE)
    fail("never caught the long request running")


def sc_seals(c):
    app = c.boot()
    ref = c.ask_json("Lily and Ben", 8)
    r, other = c.raw(), c.raw()
    seals = {"header": fcntl.fcntl(r.hfd, F_GET_SEALS), "ring": fcntl.fcntl(r.rfd, F_GET_SEALS)}
    want = {"header": F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE,
            "ring": F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW}
    if seals != want:
        fail("seals %s, want %s" % (seals, want))
    ok("seals: header memfd SEAL|SHRINK|GROW|FUTURE_WRITE, ring memfd SEAL|SHRINK|GROW")
    targets = [("header fd", r.hfd, r.hsize, True), ("ring fd", r.rfd, r.rsize, False)]
    for what, fd, size, ro in list(targets):
        try:
            targets.append((what + " reopened O_RDWR via /proc/self/fd",
                            os.open("/proc/self/fd/%d" % fd, os.O_RDWR), size, ro))
        except OSError as e:
            ok("%s: reopening /proc/self/fd read-write refused (%s)" % (what, e))
    res = []
    for what, fd, size, ro in targets:
        attempt(res, what + ": ftruncate(0)", lambda: os.ftruncate(fd, 0))
        attempt(res, what + ": ftruncate(4096)", lambda: os.ftruncate(fd, 4096)) \
            if size > 4096 else None
        attempt(res, what + ": ftruncate(size - 64)", lambda: os.ftruncate(fd, size - 64))
        attempt(res, what + ": ftruncate(size + 4096)", lambda: os.ftruncate(fd, size + 4096))
        attempt(res, what + ": fallocate past the end",
                lambda: c_call(libc.fallocate, fd, 0, size, 4096))
        for s in (F_SEAL_WRITE, F_SEAL_FUTURE_WRITE, 0):
            attempt(res, what + ": F_ADD_SEALS %d" % s, lambda: fcntl.fcntl(fd, F_ADD_SEALS, s))
        if ro:
            attempt(res, what + ": mmap shared writable",
                    lambda: mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
            attempt(res, what + ": mprotect a read-only mapping writable",
                    lambda: mprotect_write(fd, size))
            attempt(res, what + ": pwrite", lambda: os.pwrite(fd, b"\xff" * 8, 192))
            attempt(res, what + ": fallocate punch hole", lambda: punch(fd, 0, size))
            attempt(res, what + ": madvise MADV_REMOVE", lambda: madvise_remove(fd, size))
    allowed = [w for w, e in res if e == "ALLOWED"]
    if allowed:
        fail("allowed: %s" % "; ".join(allowed))
    for what, fd, size, ro in targets[2:]:
        os.close(fd)
    if os.fstat(r.hfd).st_size != r.hsize or os.fstat(r.rfd).st_size != r.rsize:
        fail("a memfd changed size")
    ok("%d attempts on the %d descriptors a host gets (and their /proc/self/fd reopenings) "
       "refused: %s" % (len(res), len(targets),
                        ", ".join(sorted({e for _, e in res}))))
    out = c.run_host("seal-attack", c.name)
    if "allowed" in out.split():
        fail("proto_host seal-attack: %s" % out)
    ok("proto_host seal-attack (C): %d attempts refused" % len(out.splitlines()))
    if app.poll() is not None:
        fail("the appliance died: " + app.stderr.read())
    same_answer(r.ask(0, "Lily and Ben", 8)["generated"], ref, "the attacker's own ring")
    same_answer(other.ask(0, "Lily and Ben", 8)["generated"], ref, "another host")
    same_answer(c.ask_json("Lily and Ben", 8)["generated_token_ids"], ref, "a new host")
    ok("after the attempts the appliance serves the attacker, an attached host and a new one "
       "exactly")
    named = [f for f in (os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else [])
             if f == "nibble-" + c.name]
    if named:
        fail("named shared memory for %s: %s" % (c.name, named))
    r.close()
    other.close()
    c.stop(app)


def sc_punch_hole(c):
    app = c.boot()
    ref = c.ask_json("Lily and Ben", 8)
    a, b = c.raw(), c.raw()
    before = a.stats()
    n = 0
    for how in ("fallocate", "madvise"):
        catch_running(a, 0, app)
        bg = subprocess.Popen([c.nib, "ask", "--name", c.name, "--max-tokens", "8", "--json",
                               "Lily and Ben"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if how == "fallocate":
            punch(a.rfd, 0, a.rsize)  # the whole ring, mid-request
        else:
            addr = ring_addr(a.ring)
            c_call(libc.madvise, addr, a.rsize, MADV_REMOVE)
        app.send_signal(signal.SIGCONT)
        n += 1
        if a.state(0) != FREE:
            fail("%s: the punched slot reads state %d" % (how, a.state(0)))
        wait_stat(a, "requests_host_changed", before["requests_host_changed"] + n,
                  "the punched request ended")
        out, err = bg.communicate(timeout=60)
        if bg.returncode != 0:
            fail("another host during the punch: %r" % err)
        same_answer(json.loads(out)["generated_token_ids"], ref, "another host during the punch")
        same_answer(b.ask(1, "Lily and Ben", 8)["generated"], ref, "an attached host")
        r = a.ask(0, "Lily and Ben", 8)
        same_answer(r["generated"], ref, "the punched slot reused")
        ok("%s hole over the whole ring mid-request: that request ended host_changed, the other "
           "hosts and the punched slot itself then served exactly" % how)
    # Punched while queued: the request is simply gone; the slot works after.
    sigstop(app)
    a.submit(2, "The little dog", 5)
    punch(a.rfd, 0, a.rsize)
    app.send_signal(signal.SIGCONT)
    same_answer(a.ask(2, "Lily and Ben", 8)["generated"], ref, "a slot punched while queued")
    if app.poll() is not None:
        fail("the appliance died")
    after = a.stats()
    ok("a hole punched under a queued request: nothing served from it, the appliance keeps "
       "serving (%d host_changed in all)" % (after["requests_host_changed"] -
                                             before["requests_host_changed"]))
    a.close()
    b.close()
    c.stop(app)


def sc_forged_name(c):
    os.makedirs(c.rundir, 0o700)
    os.chmod(c.rundir, 0o700)
    precious = os.path.join(c.tmp, "precious")
    with open(precious, "wb") as f:
        f.write(b"keep me")

    def untouched(what):
        st = os.lstat(precious)
        if not stat.S_ISREG(st.st_mode) or open(precious, "rb").read() != b"keep me":
            fail("%s: the link's target was changed" % what)

    # A symbolic link at the socket path: removed (not followed), target kept.
    os.symlink(precious, c.sock_path())
    app = c.boot()
    ref = c.ask_json("Lily and Ben", 8)
    c.stop(app)
    untouched("symlink at the socket path")
    ok("a symbolic link at the socket path is replaced, its target untouched")
    # A dead socket (bound, never listening): hosts say nobody runs; boot replaces it.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(c.sock_path())
    s.close()
    r = c.ask("hi", 2, check=False)
    if r.returncode == 0 or b"no appliance" not in r.stderr:
        fail("nib ask on a dead socket: %r" % r.stderr)
    app = c.boot()
    same_answer(c.ask_json("Lily and Ben", 8)["generated_token_ids"], ref, "after a dead socket")
    c.stop(app)
    ok("a dead socket at the name: hosts say '%s'; boot replaces it" %
       r.stderr.decode().strip().splitlines()[-1])
    # A regular file claiming to be a live appliance.
    with open(c.sock_path(), "wb") as f:
        f.write(struct.pack("<QI", SHM_MAGIC, VERSION) + bytes(4000))
    app = c.boot()
    c.stop(app)
    ok("a regular file at the socket path is replaced")
    # A symbolic link as the lock file: boot refused, target untouched.
    os.unlink(c.lock_path())
    os.symlink(precious, c.lock_path())
    rc, err = c.refused_boot()
    untouched("symlink as the lock file")
    os.unlink(c.lock_path())
    ok("a symbolic link as the lock file: boot refused (%s), its target untouched" %
       err.strip().splitlines()[-1])
    # Runtime directories the appliance must not use.
    for mode in (0o755, 0o777, 0o770, 0o701):
        os.chmod(c.rundir, mode)
        rc, err = c.refused_boot()
        if c.rundir not in err:
            fail("refusal for a runtime dir of mode %o does not name it: %r" % (mode, err))
    os.chmod(c.rundir, 0o700)
    ok("runtime dir of mode 0755, 0777, 0770, 0701: boot refused, naming it")
    real = os.path.join(c.tmp, "real")
    os.mkdir(real, 0o700)
    link = os.path.join(c.tmp, "link")
    os.symlink(real, link)
    rc, err = c.refused_boot(env=dict(os.environ, NIB_RUNTIME_DIR=link))
    ok("runtime dir that is a symbolic link: boot refused: " + err.strip().splitlines()[-1])
    if os.geteuid() == 0:
        os.chown(c.rundir, 12345, 12345)
        rc, err = c.refused_boot()
        os.chown(c.rundir, 0, 0)
        ok("runtime dir owned by another uid: boot refused: " + err.strip().splitlines()[-1])
    else:
        print("note: not root, so the other-owner directory case was not run (it needs chown)")
    # A host does not talk to a socket in a directory others can write: an
    # impostor there gets no connection.
    evil = os.path.join(c.tmp, "evil")
    os.mkdir(evil)
    os.chmod(evil, 0o777)
    imp = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    imp.bind(os.path.join(evil, c.name + ".sock"))
    imp.listen(8)
    imp.setblocking(False)
    env = dict(os.environ, NIB_RUNTIME_DIR=evil)
    r1 = subprocess.run([c.nib, "ask", "--name", c.name, "hi"], capture_output=True, text=True,
                        timeout=60, env=env)
    r2 = subprocess.run([sys.executable, c.nibhost_py, "ask", "--name", c.name, "hi"],
                        capture_output=True, text=True, timeout=60, env=env)
    try:
        imp.accept()
        fail("a host connected to an impostor in a world-writable directory")
    except BlockingIOError:
        pass
    imp.close()
    if r1.returncode == 0 or r2.returncode == 0:
        fail("hosts used a world-writable runtime dir: %r %r" % (r1.stderr, r2.stderr))
    ok("hosts refuse a world-writable runtime dir: %s / %s" %
       (r1.stderr.strip().splitlines()[-1], r2.stderr.strip().splitlines()[-1]))
    app = c.boot()
    same_answer(c.ask_json("Lily and Ben", 8)["generated_token_ids"], ref, "after everything")
    c.stop(app)


def sc_second_appliance(c):
    app = c.boot()
    ref = c.ask_json("Lily and Ben", 8)
    r = c.raw()
    ino = os.lstat(c.sock_path()).st_ino
    rc, err = c.refused_boot()
    if "in use" not in err:
        fail("second appliance: %r" % err)
    if os.lstat(c.sock_path()).st_ino != ino:
        fail("the second appliance replaced the first one's socket")
    same_answer(c.ask_json("Lily and Ben", 8)["generated_token_ids"], ref, "a new host after it")
    same_answer(r.ask(0, "Lily and Ben", 8)["generated"], ref, "an attached host after it")
    ok("a second appliance on a live name is refused (%s); the first one's socket and hosts are "
       "untouched" % err.strip().splitlines()[-1])
    # The socket path removed under the first: still refused (the lock decides),
    # and the first one notices and says so.
    os.unlink(c.sock_path())
    rc, err = c.refused_boot()
    if "in use" not in err:
        fail("second appliance with the socket removed: %r" % err)
    for _ in deadline_loop(10, "socket_lost in the header"):
        if r.hu32(212) == 1 and r.stats()["socket_lost"] == 1:
            break
    same_answer(r.ask(1, "Lily and Ben", 8)["generated"], ref, "an attached host, socket lost")
    ok("socket path removed: a second appliance still refused; the first sets socket_lost and "
       "keeps serving its hosts")
    # Someone else's file at the path: the first appliance leaves it at exit.
    with open(c.sock_path(), "w") as f:
        f.write("not yours")
    r.close()
    app.send_signal(signal.SIGTERM)
    _, err = app.communicate(timeout=60)
    if app.returncode != 0:
        fail("SIGTERM: exit %d %s" % (app.returncode, err))
    if "removed or replaced" not in err:
        fail("the appliance did not report its lost socket: %r" % err)
    if open(c.sock_path()).read() != "not yours":
        fail("the appliance removed a file it does not own")
    ok("at exit it leaves the file now at its old path alone; stderr said: %s" %
       [l for l in err.splitlines() if "removed or replaced" in l][0])


NS_HOST = r'''
import json, os, sys
sys.path.insert(0, %r)
import nibhost
h = nibhost.Host(%r)
print("pid", os.getpid(), flush=True)
for line in sys.stdin:
    cmd, n, prompt = line.rstrip("\n").split(" ", 2)
    if cmd == "ask":
        print("ids", json.dumps(h.ask(prompt, max_tokens=int(n)).generated_ids), flush=True)
    else:
        hd = h.submit(prompt, max_tokens=int(n))
        while not h.poll(hd).generated_ids:
            pass
        print("running", flush=True)
'''


def sc_pid_fork(c):
    nh = c.nh
    app = c.boot(extra=("--max-hosts", "3"))
    ref5, ref8 = c.ask_json("The little dog", 5), c.ask_json("Lily and Ben", 8)
    obs = c.raw()
    a0 = obs.stats()["attaches"]
    # A forked child of an attached host attaches afresh; the parent's request
    # (queued before the fork) and the parent itself are unaffected.
    h = nh.Host(c.name)
    sigstop(app)
    hd = h.submit("Lily and Ben", max_tokens=8)

    def child(out):
        out.write("ids %s\n" % json.dumps(h.ask("The little dog", max_tokens=5).generated_ids))
        h.close()
    pid, f = c.fork(child)
    app.send_signal(signal.SIGCONT)
    line = f.readline()
    if not line.startswith("ids "):
        fail("forked child: %r" % line)
    same_answer(json.loads(line[4:]), ref5, "the forked child")
    if c.reap(pid) != 0:
        fail("the forked child failed")
    same_answer(h.wait(hd, timeout=60).generated_ids, ref8, "the parent's request across the fork")
    h.release(hd)
    same_answer(h.ask("The little dog", max_tokens=5).generated_ids, ref5, "the parent after")
    if obs.stats()["attaches"] - a0 != 2:
        fail("attaches went %d -> %d (parent and child: 2)" % (a0, obs.stats()["attaches"]))
    h.close()
    ok("forked Python host: the child attached afresh and got its own answer; the parent's "
       "queued request and later ones exact")
    c.run_host("fork", c.name)
    ok("forked C host (proto_host fork) likewise")

    # Hosts dying with slots in every state, three times as many as there are
    # rings: nothing leaks.
    obs.close()
    cycles = 9

    def dying(out):
        r = c.raw_retry()
        r.submit(1, "hi", 2)
        r.wait(1)  # DONE, never released
        r.set_state(2, CLAIMED)  # CLAIMED forever
        for attempt in range(50):  # a short generation can end between two looks: again
            r.submit(3, "Once upon a time", 200)
            r.submit(0, "Lily and Ben", 8)  # queued behind it
            end = time.monotonic() + 30
            while r.state(3) not in (RUNNING, DONE) and time.monotonic() < end:
                pass
            if r.state(3) == RUNNING:
                break
            r.wait(0)
            r.set_state(0, FREE)
            r.set_state(3, FREE)
        else:
            fail("never saw the dying host's request running")
        out.write("ready\n")
        os.kill(os.getpid(), signal.SIGKILL)
    for k in range(cycles):
        pid, f = c.fork(dying)
        expect_line(f, "ready", "dying host %d" % k)
        c.reap(pid)
    hosts = [c.raw_retry() for _ in range(3)]
    st = hosts[0].stats()
    if st["host_hangups"] < cycles + 1:
        fail("host_hangups %d after %d deaths" % (st["host_hangups"], cycles))
    for h in hosts:
        if any(h.state(i) != FREE for i in range(h.n_slots)):
            fail("ring %d handed out again with slots %s" % (h.index,
                                                            [h.state(i) for i in range(h.n_slots)]))
        same_answer(h.ask(3, "Lily and Ben", 8)["generated"], ref8, "a reused ring")
    for h in hosts:
        h.close()
    ok("%d hosts SIGKILLed holding RUNNING, DONE, CLAIMED and queued slots on 3 rings: every "
       "ring handed out again reset, serving exactly" % cycles)

    # The same pid in two live hosts (each pid 1 of its own pid namespace).
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork",
                            "--kill-child", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("note: unshare --user --pid is not available here (%s): the same-pid case did "
              "not run" % probe.stderr.strip())
        c.stop(app)
        return
    code = NS_HOST % (os.path.dirname(c.nibhost_py), c.name)
    ns = [subprocess.Popen(["unshare", "--user", "--map-root-user", "--pid", "--fork",
                            "--kill-child", sys.executable, "-c", code], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for _ in range(2)]
    c.procs.extend(ns)
    for p in ns:
        line = p.stdout.readline().split()
        if line != ["pid", "1"]:
            fail("namespaced host: %r %r" % (line, p.stderr.read() if p.poll() is not None else ""))

    def nask(p, n, prompt, ref):
        p.stdin.write("ask %d %s\n" % (n, prompt))
        p.stdin.flush()
        line = p.stdout.readline()
        if not line.startswith("ids "):
            fail("namespaced host: %r" % line)
        same_answer(json.loads(line[4:]), ref, "a host with pid 1")
    for k in range(3):
        nask(ns[k % 2], 8, "Lily and Ben", ref8)
    h0 = c.raw()
    hang0 = h0.stats()["host_hangups"]
    ns[1].stdin.write("long 200 Once upon a time\n")
    ns[1].stdin.flush()
    expect_line(ns[1].stdout, "running", "the second pid-1 host's long request")
    ns[1].kill()
    ns[1].wait()
    wait_stat(h0, "host_hangups", hang0 + 1, "the killed pid-1 host's hang-up")
    for k in range(3):
        nask(ns[0], 5, "The little dog", ref5)
    ns[0].stdin.close()
    ns[0].wait(timeout=60)
    h0.close()
    ok("two live hosts with the same pid (1, in their own pid namespaces): both served exactly; "
       "one killed mid-request, the other unaffected")
    c.stop(app)


def sc_state_flip(c):
    app = c.boot()
    ref5, ref8 = c.ask_json("The little dog", 5), c.ask_json("Lily and Ben", 8)
    a = c.raw()
    import threading
    errors, stop = [], threading.Event()
    served = [0]

    def bystander():
        try:
            with c.nh.Host(c.name) as h:
                while not stop.is_set():
                    if h.ask("The little dog", max_tokens=5).generated_ids != \
                            ref5["generated_token_ids"]:
                        errors.append("the bystander got a wrong answer")
                    served[0] += 1
        except Exception as e:
            errors.append(repr(e))
    t = threading.Thread(target=bystander)
    t.start()
    before = a.stats()
    flips = [(FREE, False), (DONE, False), (SUBMITTED, False), (FREE, True), (DONE, True)]
    for k, (flip, at_once) in enumerate(flips):
        i = k % a.n_slots
        catch_running(a, i, app)  # the appliance is stopped: the request certainly runs
        a.set_state(i, flip)
        if at_once:  # the slot is reused before the appliance looks again
            if flip == DONE:
                a.set_state(i, FREE)
            ticket = a.submit(i, "Lily and Ben", 8)
        app.send_signal(signal.SIGCONT)
        if not at_once:
            wait_stat(a, "requests_host_changed", before["requests_host_changed"] + k + 1,
                      "the flipped request dropped")
            if flip == SUBMITTED:
                # Published again: to the appliance a new request (same ticket),
                # served from the start.
                x = a.wait(i, what="the request published again")
                if x["status"] not in (ST_OK, ST_EOS, 4) or x["n_prompt"] == 0 or \
                        x["served_ticket"] != x["ticket"]:
                    fail("RUNNING -> SUBMITTED, served again: %s" % x)
            snap = bytes(a.ring[a.so(i):a.so(i) + a.slot_size])
            same_answer(c.ask_json("The little dog", 5)["generated_token_ids"], ref5,
                        "a new host after the flip")
            if bytes(a.ring[a.so(i):a.so(i) + a.slot_size]) != snap:
                fail("the appliance wrote into the slot after its state flipped to %d" % flip)
            if a.state(i) != FREE:
                a.set_state(i, FREE)
            ticket = a.submit(i, "Lily and Ben", 8)
        r = a.wait(i)
        a.set_state(i, FREE)
        same_answer(r["generated"], ref8, "the request after the flip")
        if r["served_ticket"] != ticket or r["status"] != ST_OK:
            fail("after the flip: %s" % r)
    wait_stat(a, "requests_host_changed", before["requests_host_changed"] + len(flips),
              "every flip counted")
    stop.set()
    t.join(120)
    if errors:
        fail("; ".join(errors))
    ok("RUNNING -> FREE / DONE / SUBMITTED on one's own ring, with and without reusing the slot "
       "at once: the appliance stopped writing there, the next request in that slot got exactly "
       "its own answer, and a bystander host got %d exact answers meanwhile" % served[0])
    a.close()
    c.stop(app)


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def sc_stopped_host(c):
    app = c.boot()
    ref5, ref8 = c.ask_json("The little dog", 5), c.ask_json("Lily and Ben", 8)
    long_ref = c.ask_json("Once upon a time", 64)

    def stopped(out):
        r = c.raw()
        r.submit(0, "hi", 2)
        r.wait(0)  # DONE, not read
        r.set_state(1, CLAIMED)
        r.submit(2, "Once upon a time", 64)
        r.submit(3, "Lily and Ben", 8)
        out.write("ready\n")
        os.kill(os.getpid(), signal.SIGSTOP)
        for i in (2, 3):
            out.write("served %s\n" % json.dumps(r.wait(i)["generated"]))
    pid, f = c.fork(stopped)
    expect_line(f, "ready", "the host that stops itself")
    for _ in deadline_loop(10, "the host stopped"):
        if proc_state(pid) == "T":
            break
    for k in range(4):
        same_answer(c.ask_json("Lily and Ben", 8)["generated_token_ids"], ref8, "nib ask")
        with c.nh.Host(c.name) as h:
            same_answer(h.ask("The little dog", max_tokens=5).generated_ids, ref5, "nibhost.py")
    c.stats()
    os.kill(pid, signal.SIGCONT)
    got = [json.loads(" ".join(expect_line(f, "served", "the continued host")[1:]))
           for _ in range(2)]
    if got[0] != long_ref["generated_token_ids"] or got[1] != ref8["generated_token_ids"]:
        fail("the stopped host's own requests: %s" % got)
    if c.reap(pid) != 0:
        fail("the continued host failed")
    ok("a SIGSTOPped host holding DONE, CLAIMED, RUNNING and queued slots blocks nobody: 8 "
       "requests of other hosts served meanwhile; its own were served while it slept")
    # Stopped while attached, then killed while stopped.
    pid, f = c.fork(stopped)
    expect_line(f, "ready", "the second stopped host")
    obs = c.raw()
    h0 = obs.stats()["host_hangups"]
    c.reap(pid, signal.SIGKILL)
    wait_stat(obs, "host_hangups", h0 + 1, "the stopped host's death noticed")
    obs.close()
    same_answer(c.ask_json("Lily and Ben", 8)["generated_token_ids"], ref8, "after the kill")
    ok("a stopped host killed: its hang-up noticed, service unaffected")
    c.stop(app)


def utf8_valid(b):
    try:
        b.decode("utf-8", "strict")
        return True
    except UnicodeDecodeError:
        return False


def sc_utf8(c):
    app = c.boot()
    r = c.raw()
    prompt = "Once upon a time"
    found = None
    for seed in range(400):
        x = r.ask(0, prompt, 24, temperature=1.0, seed=seed)
        if not utf8_valid(x["text"]):
            found = (seed, x)
            break
    if not found:
        fail("400 sampled answers were all valid UTF-8: the model never produced invalid bytes")
    seed, x = found
    want = x["text"].decode("utf-8", "replace")  # one U+FFFD per maximal invalid subpart
    extra = ("--temperature", "1", "--seed", str(seed))
    a = c.ask(prompt, 24, *extra)
    b = c.py("ask", "--name", c.name, "--max-tokens", "24", "--json", *extra, prompt)
    for who, out in (("nib ask --json", a.stdout), ("nibhost.py --json", b.stdout)):
        if not utf8_valid(out):
            fail("%s printed invalid UTF-8: %r" % (who, out))
        j = json.loads(out)
        if j["text"] != want or j["generated_token_ids"] != x["generated"]:
            fail("%s: text %r, want %r" % (who, j["text"], want))
    head = a.stdout.split(b', "timings"')[0] + b"}\n"
    if head != b.stdout:
        fail("nib ask and nibhost.py JSON differ:\n %r\n %r" % (head, b.stdout))
    ok("model bytes %r (seed %d): nib ask --json and nibhost.py print the same valid JSON, "
       "invalid sequences as U+FFFD" % (x["text"], seed))
    ta = subprocess.run([c.nib, "ask", "--name", c.name, "--max-tokens", "24", *extra, prompt],
                        capture_output=True, timeout=60)
    tb = c.py("ask", "--name", c.name, "--max-tokens", "24", *extra, prompt)
    if not utf8_valid(ta.stdout) or ta.stdout != tb.stdout:
        fail("text mode: %r / %r" % (ta.stdout, tb.stdout))
    if ta.stdout.decode() != prompt + want + "\n":
        fail("text mode printed %r, want %r" % (ta.stdout, prompt + want + "\n"))
    ok("streamed text mode: valid UTF-8, the same from both hosts")
    r.close()
    c.stop(app)


def sc_stop_bounded(c):
    nh = c.nh
    # nib stop works whatever the shared memory holds.
    app = c.boot()
    a, b = c.raw(), c.raw()
    rnd = random.Random(5)
    a.ring[:] = rnd.randbytes(a.rsize)
    for i in range(b.n_slots):  # every state word set to something, with random requests
        b.ring[b.so(i):b.so(i) + 320] = rnd.randbytes(320)
        b.set_state(i, [CLAIMED, SUBMITTED, RUNNING, DONE][i % 4])
    punch(a.rfd, 0, a.rsize // 2)
    c.stop(app)
    a.close()
    b.close()
    ok("nib stop with random bytes, holes and every state in the rings: the appliance exits 0")

    # Waits are bounded when the appliance is stopped.
    app = c.boot()
    h = nh.Host(c.name)
    sigstop(app)
    hd = h.submit("Once upon a time", max_tokens=8)
    t0 = time.monotonic()
    try:
        h.wait(hd, timeout=120)
        fail("nibhost.py wait returned an answer from a stopped appliance")
    except nh.Gone as e:
        ok("nibhost.py waiting on a SIGSTOPped appliance: Gone after %.1f s (heartbeat stale "
           "after %.0f s): %s" % (time.monotonic() - t0, HEARTBEAT_STALE_S, e))
    h.close()
    app.send_signal(signal.SIGCONT)
    w = wait_gone_on_stopped(c, app)
    out, err = w.communicate(timeout=120)
    if w.returncode != 0 or "not responding" not in out:
        fail("wait-gone on a stopped appliance: %r %r" % (out, err))
    ok("libnibhost waiting on a SIGSTOPped appliance: %s" % out.strip().splitlines()[-1])
    for cmd in (["ask", "--timeout", "4", "--max-tokens", "4", "hi"], ["stop", "--timeout", "4"]):
        r = subprocess.run([c.nib, cmd[0], "--name", c.name, *cmd[1:]], capture_output=True,
                           text=True, timeout=120)
        if r.returncode == 0:
            fail("nib %s succeeded against a stopped appliance" % cmd[0])
        ok("nib %s against a SIGSTOPped appliance ends: %s" %
           (" ".join(cmd), r.stderr.strip().splitlines()[-1]))
    # The STOP that nib stop gave up waiting for is still in the socket: the
    # appliance reads it once it runs again, and stops.
    app.send_signal(signal.SIGCONT)
    c.finish(app)
    ok("once continued, the appliance read the STOP sent while it was stopped and exited 0")


def sc_measure(c):
    """kind MEASURE (docs/ring.md 6.3): offered in the header, served as a
    request of its own with one time per pass, every bad field named, and
    nib bench --latency --name reporting both sides from it."""
    app = c.boot()
    r = c.raw()
    if not r.hu32(84) & 2:
        fail("header features 0x%x lack MEASURE (2)" % r.hu32(84))
    ctx = r.ctx_len
    x = r.ask(0, struct.pack("<I", 7), 12, kind=2)
    times = x["generated"]
    if x["status"] != ST_OK or x["n_prompt"] != 0 or len(times) != 12 or min(times) == 0:
        fail("MEASURE of 12 passes at 7: %r" % x)
    ok("a measurement of 12 passes from position 7: status ok, 12 times (%d..%d ns)" %
       (min(times), max(times)))
    bad = [(dict(prompt=struct.pack("<I", 7), max_tokens=4, flags=1), "flags"),
           (dict(prompt=struct.pack("<I", 7), max_tokens=4, temperature=0.5), "temperature"),
           (dict(prompt=struct.pack("<Q", 7), max_tokens=4), "prompt_len"),
           (dict(prompt=b"", max_tokens=4), "prompt_len"),
           (dict(prompt=struct.pack("<I", 0xFFFFFFFF), max_tokens=1), "prompt"),
           (dict(prompt=struct.pack("<I", ctx - 2), max_tokens=3), "prompt"),
           (dict(prompt=struct.pack("<I", 0), max_tokens=0), "max_tokens")]
    for kw, field in bad:
        y = r.ask(0, kw.pop("prompt"), kw.pop("max_tokens"), kind=2, **kw)
        if y["status"] != ST_BAD or not y["error"].startswith(field + ":"):
            fail("MEASURE %r: %r, want bad_request naming %s" % (kw, y, field))
    ok("%d hostile measurements refused, each naming its field" % len(bad))
    y = r.ask(0, struct.pack("<I", ctx - 3), 3, kind=2)
    if y["status"] != ST_OK or len(y["generated"]) != 3:
        fail("MEASURE of the last 3 positions: %r" % y)
    r.close()
    with c.nh.Host(c.name) as h:  # the Python host's call (tools/host/nibhost.py)
        if not h.measures:
            fail("nibhost.py: measures is false against an appliance offering MEASURE")
        p = h.wait(h.submit_measure(5, 6))
        if p.status != ST_OK or p.n_prompt != 0 or len(p.tokens) != 6 or min(p.tokens) == 0:
            fail("nibhost.py submit_measure(5, 6): %r" % (p,))
        try:
            h.submit_measure(h.ctx_len - 2, 3)
            fail("nibhost.py submit_measure past the context was sent")
        except c.nh.NibError as e:
            if "context" not in str(e):
                fail("nibhost.py submit_measure past the context: %s" % e)
    ok("nibhost.py: submit_measure gives 6 pass times; past the context refused before sending")
    b = subprocess.run([c.nib, "bench", "--latency", "--name", c.name, "--tokens", "48",
                        "--block", "16", "--json"], capture_output=True, text=True, timeout=300)
    if b.returncode != 0:
        fail("nib bench --latency --name: %s" % b.stderr)
    objs = [json.loads(line) for line in b.stdout.splitlines()]
    vs = [o for o in objs if o.get("source") == "vs-reference"]
    if len(vs) != 1 or vs[0].get("mode") != "appliance":
        fail("nib bench --latency --name: no appliance comparison in %r" % b.stdout)
    v = vs[0]
    # the measured positions are the generated tokens' own: after the prompt
    if not 1 <= v["pos_first"] <= v["pos_last"] < r.ctx_len:
        fail("appliance comparison: positions %r..%r" % (v["pos_first"], v["pos_last"]))
    for side in ("nibble", "reference"):
        q = [v[side][k] for k in ("p50_us", "p90_us", "p99_us", "p99.9_us", "max_us")]
        if v[side]["count"] <= 0 or not 0 < q[0] <= q[1] <= q[2] <= q[3] <= q[4]:
            fail("appliance comparison, %s: %r" % (side, v[side]))
    ratio = v["nibble"]["p50_us"] / v["reference"]["p50_us"]
    if abs(v["p50_ratio"] - ratio) > 2e-3 * ratio:
        fail("p50_ratio %r is not nibble p50 / reference p50 (%r)" % (v["p50_ratio"], ratio))
    ok("nib bench --latency --name: %d tokens and %d reference passes from the appliance, "
       "ratios from the fields" % (v["nibble"]["count"], v["reference"]["count"]))
    c.stop(app)


SCENARIOS = {
    "python-host": sc_python_host, "many-hosts": sc_many_hosts, "busy-cancel": sc_busy_cancel,
    "host-killed": sc_host_killed, "appliance-killed": sc_appliance_killed,
    "stale-boot": sc_stale_boot, "scribble": sc_scribble, "stress": sc_stress,
    "install": sc_install, "seals": sc_seals, "punch-hole": sc_punch_hole,
    "forged-name": sc_forged_name, "second-appliance": sc_second_appliance,
    "pid-fork": sc_pid_fork, "state-flip": sc_state_flip, "stopped-host": sc_stopped_host,
    "utf8": sc_utf8, "stop-bounded": sc_stop_bounded, "measure": sc_measure,
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
