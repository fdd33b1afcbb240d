#!/usr/bin/env python3
"""nibhost: a host for the nibble appliance in pure Python (standard library only).

It implements docs/ring.md from that document alone: mmap the segment
/dev/shm/nibble-NAME, check the header, claim a slot under the claim lock,
write the request, read tokens and text as they stream, cancel, release.

    from nibhost import Host
    with Host("nib") as h:
        r = h.ask("Once upon a time", max_tokens=32)
        print(r.text.decode("utf-8", "replace"), r.generated_ids, r.status_name)

As a command (same output as `nib ask --json`, minus the timings):

    nibhost.py ask [--name N] [--max-tokens N] [--temperature T] [--seed S]
                   [--no-bos] [--ids 1,2,3] [--json] PROMPT
    nibhost.py stats [--name N] [--json]
    nibhost.py stop [--name N]

Memory ordering: Python has no atomics. Every shared field is read and written
with one aligned struct access (a single 4- or 8-byte copy), and the module
relies on x86-64 (TSO: stores become visible in program order, loads are not
reordered with later loads), where plain stores are release stores and plain
loads are acquire loads. On other CPUs use libnibhost.
"""
import argparse
import fcntl
import json
import mmap
import os
import platform
import struct
import sys
import threading
import time

# ---- layout version 2 (proto/shm_layout.h; docs/ring.md "Layout") ----
MAGIC = 0x314D48534C42494E  # "NIBLSHM1"
VERSION = 2
HEADER_SIZE = 256
STATS_OFFSET = 256
SLOTS_OFFSET = 4096
N_SLOTS = 16
PROMPT_MAX = 8192
SLOT_TOKENS = 4096
SLOT_TEXT = 32768
ERRMSG_MAX = 128
TEMPERATURE_MAX = 100.0
SLOT_SIZE = 320 + PROMPT_MAX + 4 * SLOT_TOKENS + SLOT_TEXT
SEGMENT_SIZE = SLOTS_OFFSET + N_SLOTS * SLOT_SIZE
CLAIM_LOCK_OFFSET = 0

# header fields: offset, struct format
H_MAGIC, H_VERSION, H_HEADER_SIZE, H_SEGMENT_SIZE, H_EPOCH = 0, 8, 12, 16, 24
H_N_SLOTS, H_SLOT_SIZE, H_SLOTS_OFFSET, H_STATS_OFFSET = 32, 36, 40, 48
H_APP_PID, H_VOCAB = 56, 60
H_PROMPT_MAX, H_SLOT_TOKENS, H_SLOT_TEXT, H_CTX, H_BOS, H_EOS = 64, 68, 72, 76, 80, 84
H_ADD_BOS, H_ERRMSG_MAX, H_STATS_SIZE = 88, 92, 96
H_STATE, H_DONE_SEQ, H_HEARTBEAT = 128, 132, 136
H_DOORBELL, H_STOP, H_NEXT_TICKET, H_DONE_WAITERS = 192, 196, 200, 208

# slot fields, relative to the slot
S_STATE, S_OWNER, S_TICKET, S_CANCEL, S_REQUEST_ID = 0, 4, 8, 16, 24
S_REQ = 64  # prompt_len u32, max_tokens u32, temperature f32, flags u32, seed u64, 40 zero bytes
S_N_TOKENS, S_N_PROMPT, S_TEXT_LEN, S_STATUS = 128, 132, 136, 140
S_T_START, S_T_FIRST, S_T_DONE = 144, 152, 160
S_ERROR, S_PROMPT = 176, 320
S_TOKENS = S_PROMPT + PROMPT_MAX
S_TEXT = S_TOKENS + 4 * SLOT_TOKENS

APP_BOOTING, APP_READY, APP_STOPPING, APP_STOPPED = 0, 1, 2, 3
SLOT_FREE, SLOT_CLAIMED, SLOT_SUBMITTED, SLOT_RUNNING, SLOT_DONE = 0, 1, 2, 3, 4
STATUS_NAMES = ["pending", "ok", "eos", "cancelled", "ctx_full", "text_full", "bad_request",
                "shutdown", "owner_gone"]
REQ_NO_BOS, REQ_PROMPT_IDS = 1, 2
STATS_COUNTERS = ["requests_accepted", "requests_done", "requests_rejected", "requests_cancelled",
                  "slots_reclaimed", "tokens_prompt", "tokens_generated"]

CHECK_EVERY_NS = 100_000_000
STALE_NS = 1_000_000_000


class NibError(Exception):
    """Bad use, a refused segment, or a request this host no longer owns."""


class Busy(NibError):
    """Every slot is in use: back-pressure. Retry later (or pass busy_wait)."""


class Gone(NibError):
    """The appliance stopped, died or restarted; attach again."""


class Timeout(NibError):
    """wait() ran out of time; the request goes on."""


def status_name(st):
    return STATUS_NAMES[st] if 0 <= st < len(STATUS_NAMES) else "unknown"


# Futex wake of the doorbell through ctypes (standard library) when it is
# there; without it the appliance still looks at the slots every 100 ms.
try:
    import ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    _SYS_FUTEX = {"x86_64": 202}.get(platform.machine())
except Exception:  # pragma: no cover - no ctypes
    ctypes = None
    _SYS_FUTEX = None


class Handle:
    __slots__ = ("slot", "ticket")

    def __init__(self, slot, ticket):
        self.slot, self.ticket = slot, ticket

    def __repr__(self):
        return "Handle(slot=%d, ticket=%d)" % (self.slot, self.ticket)


class Progress:
    """A snapshot of one request (copied out of shared memory)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    @property
    def status_name(self):
        return status_name(self.status)

    @property
    def generated_ids(self):
        return self.tokens[self.n_prompt:]

    @property
    def prompt_ids(self):
        return self.tokens[:self.n_prompt]


class Host:
    def __init__(self, name="nib"):
        if not name or len(name) > 56 or name[0] == "." or \
                any(not (c.isascii() and (c.isalnum() or c in "_-.")) for c in name):
            raise NibError("segment name %r must be 1..56 of [A-Za-z0-9_.-]" % name)
        self.name = name
        self.path = "/dev/shm/nibble-" + name
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._next_check = 0
        self._bell = None
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NibError("no appliance is serving %s" % self.path) from None
        try:
            size = os.fstat(self.fd).st_size
            if size < HEADER_SIZE:
                raise NibError("%s is too small to be a nibble segment" % self.path)
            with mmap.mmap(self.fd, HEADER_SIZE, mmap.MAP_SHARED, mmap.PROT_READ) as hm:
                self._check_header(hm, size)
            self.mm = mmap.mmap(self.fd, SEGMENT_SIZE, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self.fd)
            raise
        self._check_header(self.mm, size)
        for _ in range(200):
            if self._u32(H_STATE) != APP_BOOTING:
                break
            time.sleep(0.01)
        st = self._u32(H_STATE)
        if st != APP_READY:
            self.close()
            raise NibError("the appliance on %s is not ready (state %d)" % (self.path, st))
        self.epoch = self._u64(H_EPOCH)
        self.app_pid = self._u32(H_APP_PID)
        self.vocab_size = self._u32(H_VOCAB)
        self.ctx_len = self._u32(H_CTX)
        self.bos_id, self.eos_id = self._u32(H_BOS), self._u32(H_EOS)
        self.add_bos = self._u32(H_ADD_BOS)
        if not _pid_exists(self.app_pid):
            self.close()
            raise NibError("%s is a stale segment: its appliance (pid %d) is not running" %
                           (self.path, self.app_pid))
        if ctypes is not None and _SYS_FUTEX is not None:
            self._bell = ctypes.c_uint32.from_buffer(self.mm, H_DOORBELL)

    # ---- plumbing ----
    def _u32(self, off):
        return struct.unpack_from("<I", self.mm, off)[0]

    def _u64(self, off):
        return struct.unpack_from("<Q", self.mm, off)[0]

    def _put32(self, off, v):
        struct.pack_into("<I", self.mm, off, v)

    def _put64(self, off, v):
        struct.pack_into("<Q", self.mm, off, v)

    def _check_header(self, m, file_size):
        magic, version = struct.unpack_from("<QI", m, 0)
        if magic != MAGIC:
            raise NibError("%s is not a nibble segment (bad magic)" % self.path)
        if version != VERSION:
            raise NibError("%s has segment layout version %d, this host speaks version %d: "
                           "use a host built for the appliance's version" %
                           (self.path, version, VERSION))
        want = [(H_HEADER_SIZE, "<I", HEADER_SIZE, "header_size"),
                (H_SEGMENT_SIZE, "<Q", SEGMENT_SIZE, "segment_size"),
                (H_N_SLOTS, "<I", N_SLOTS, "n_slots"), (H_SLOT_SIZE, "<I", SLOT_SIZE, "slot_size"),
                (H_SLOTS_OFFSET, "<Q", SLOTS_OFFSET, "slots_offset"),
                (H_STATS_OFFSET, "<Q", STATS_OFFSET, "stats_offset"),
                (H_PROMPT_MAX, "<I", PROMPT_MAX, "prompt_max"),
                (H_SLOT_TOKENS, "<I", SLOT_TOKENS, "slot_tokens"),
                (H_SLOT_TEXT, "<I", SLOT_TEXT, "slot_text"),
                (H_ERRMSG_MAX, "<I", ERRMSG_MAX, "errmsg_max")]
        for off, fmt, value, name in want:
            got = struct.unpack_from(fmt, m, off)[0]
            if got != value:
                raise NibError("%s: inconsistent header: %s is %d, layout version %d has %d" %
                               (self.path, name, got, VERSION, value))
        if file_size < SEGMENT_SIZE:
            raise NibError("%s: inconsistent header: the file is %d bytes, segment_size says %d" %
                           (self.path, file_size, SEGMENT_SIZE))
        vocab, ctx, bos, eos, add_bos = (struct.unpack_from("<I", m, o)[0]
                                         for o in (H_VOCAB, H_CTX, H_BOS, H_EOS, H_ADD_BOS))
        if vocab == 0 or ctx == 0 or bos >= vocab or eos >= vocab or add_bos > 1:
            raise NibError("%s: inconsistent header: model limits vocab_size %d, ctx_len %d, "
                           "bos_id %d, eos_id %d, add_bos %d" % (self.path, vocab, ctx, bos, eos,
                                                                  add_bos))
        pid, epoch = struct.unpack_from("<I", m, H_APP_PID)[0], struct.unpack_from("<Q", m, H_EPOCH)[0]
        if pid == 0 or epoch == 0:
            raise NibError("%s: inconsistent header: appliance_pid %d, epoch %d" %
                           (self.path, pid, epoch))
        if struct.unpack_from("<I", m, H_STATE)[0] > APP_STOPPED:
            raise NibError("%s: inconsistent header: appliance state %d" %
                           (self.path, struct.unpack_from("<I", m, H_STATE)[0]))

    def close(self):
        if getattr(self, "mm", None) is not None:
            self._bell = None
            self.mm.close()
            self.mm = None
        if getattr(self, "fd", -1) >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check(self, force=True):
        """Raise Gone when the appliance attached to has stopped, died or restarted.
        The pid and name checks run every time when forced, else every 100 ms."""
        if self._u64(H_EPOCH) != self.epoch:
            raise Gone("the appliance restarted (epoch changed)")
        st = self._u32(H_STATE)
        if st != APP_READY:
            raise Gone("the appliance is %s" % ("stopping" if st == APP_STOPPING else "stopped"))
        now = time.monotonic_ns()
        if not force and now < self._next_check:
            return
        self._next_check = now + CHECK_EVERY_NS
        if not _pid_exists(self.app_pid):
            self._gone("the appliance (pid %d) died" % self.app_pid)
        beat = self._u64(H_HEARTBEAT)
        if now > beat and now - beat > STALE_NS and self._name_epoch() != self.epoch:
            self._gone("the appliance stopped answering (no heartbeat for %d ms)" %
                       ((now - beat) // 1000000))

    def _name_epoch(self):
        """Epoch of the segment now under our name; 0 when there is none."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0
        try:
            if os.fstat(fd).st_size < HEADER_SIZE:
                return 0
            with mmap.mmap(fd, HEADER_SIZE, mmap.MAP_SHARED, mmap.PROT_READ) as hm:
                return struct.unpack_from("<Q", hm, H_EPOCH)[0]
        finally:
            os.close(fd)

    def _gone(self, what):
        e = self._name_epoch()
        if e and e != self.epoch:
            raise Gone("%s; %s now belongs to a new boot (epoch %d, this handle has epoch %d): "
                       "attach again" % (what, self.path, e, self.epoch))
        if not e:
            raise Gone("%s; %s was removed" % (what, self.path))
        raise Gone(what)

    def _claim_lock(self, lock):
        # An open-file-description lock when Python has it (never lost when
        # this process opens and closes the file elsewhere), else a POSIX one.
        if hasattr(fcntl, "F_OFD_SETLKW"):
            ltype = fcntl.F_WRLCK if lock else fcntl.F_UNLCK
            fl = struct.pack("hhxxxxqqixxxx", ltype, os.SEEK_SET, CLAIM_LOCK_OFFSET, 1, 0)
            fcntl.fcntl(self.fd, fcntl.F_OFD_SETLKW if lock else fcntl.F_OFD_SETLK, fl)
        else:
            fcntl.lockf(self.fd, fcntl.LOCK_EX if lock else fcntl.LOCK_UN, 1, CLAIM_LOCK_OFFSET)

    def _claim(self):
        with self._lock:
            self._claim_lock(True)
            try:
                for i in range(N_SLOTS):
                    base = SLOTS_OFFSET + i * SLOT_SIZE
                    if self._u32(base + S_STATE) != SLOT_FREE:
                        continue
                    self._put32(base + S_OWNER, self.pid)
                    ticket = self._u64(H_NEXT_TICKET)
                    self._put64(H_NEXT_TICKET, ticket + 1)
                    self._put64(base + S_TICKET, ticket)
                    self._put32(base + S_STATE, SLOT_CLAIMED)
                    return Handle(i, ticket)
            finally:
                self._claim_lock(False)
        return None

    def _ring(self):
        self._put32(H_DOORBELL, (self._u32(H_DOORBELL) + 1) & 0xFFFFFFFF)
        if self._bell is not None:
            _libc.syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(ctypes.addressof(self._bell)),
                          ctypes.c_int(1), ctypes.c_int(1), None, None, ctypes.c_int(0))

    def _slot(self, h):
        if not isinstance(h, Handle) or not 0 <= h.slot < N_SLOTS:
            raise NibError("not a request handle of this host: %r" % (h,))
        base = SLOTS_OFFSET + h.slot * SLOT_SIZE
        if self._u64(base + S_TICKET) != h.ticket or self._u32(base + S_OWNER) != self.pid or \
                self._u32(base + S_STATE) == SLOT_FREE:
            raise NibError("slot %d no longer holds request %d of this host (released, or "
                           "reclaimed by the appliance)" % (h.slot, h.ticket))
        return base

    # ---- the API ----
    def submit(self, prompt, max_tokens=64, temperature=0.0, seed=0, no_bos=False, request_id=0,
               busy_wait=0.0):
        """Submit a prompt (str, bytes, or a list of token ids). busy_wait: seconds to wait
        for a free slot (None: forever) before raising Busy."""
        flags = REQ_NO_BOS if no_bos else 0
        if isinstance(prompt, str):
            prompt = prompt.encode("utf-8")
        if isinstance(prompt, (bytes, bytearray)):
            data = bytes(prompt)
            if len(data) > PROMPT_MAX:
                raise NibError("prompt is %d bytes, the limit is %d" % (len(data), PROMPT_MAX))
        else:
            ids = list(prompt)
            if not ids or len(ids) > PROMPT_MAX // 4:
                raise NibError("prompt must hold 1..%d token ids" % (PROMPT_MAX // 4))
            for k, t in enumerate(ids):
                if not 0 <= t < self.vocab_size:
                    raise NibError("prompt token id %d at %d is not below the vocabulary size %d"
                                   % (t, k, self.vocab_size))
            data = struct.pack("<%dI" % len(ids), *ids)
            flags |= REQ_PROMPT_IDS
        if not 1 <= max_tokens <= SLOT_TOKENS:
            raise NibError("max_tokens must be 1..%d" % SLOT_TOKENS)
        if not 0.0 <= temperature <= TEMPERATURE_MAX:
            raise NibError("temperature must be a number in 0..%g" % TEMPERATURE_MAX)
        deadline = None if busy_wait is None else time.monotonic() + busy_wait
        nap = 0.00002
        while True:
            self.check()
            h = self._claim()
            if h is not None:
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise Busy("all %d slots are busy" % N_SLOTS)
            time.sleep(nap)
            nap = min(nap * 2, 0.001)
        base = SLOTS_OFFSET + h.slot * SLOT_SIZE
        self._put32(base + S_CANCEL, 0)
        self._put64(base + S_REQUEST_ID, request_id)
        self.mm[base + S_REQ:base + S_REQ + 64] = struct.pack(
            "<IIfIQ40x", len(data), max_tokens, temperature, flags, seed)
        self.mm[base + S_PROMPT:base + S_PROMPT + len(data)] = data
        for off in (S_N_TOKENS, S_N_PROMPT, S_TEXT_LEN, S_STATUS):
            self._put32(base + off, 0)
        self._put32(base + S_STATE, SLOT_SUBMITTED)  # the release store
        self._ring()
        return h

    def poll(self, h):
        """Snapshot of a request; raises Gone while it is unfinished and the appliance is gone."""
        base = self._slot(h)
        done = self._u32(base + S_STATE) == SLOT_DONE
        n = min(self._u32(base + S_N_TOKENS), SLOT_TOKENS)
        tl = min(self._u32(base + S_TEXT_LEN), SLOT_TEXT)
        np_ = min(self._u32(base + S_N_PROMPT), n)
        tokens = list(struct.unpack_from("<%dI" % n, self.mm, base + S_TOKENS))
        err = bytes(self.mm[base + S_ERROR:base + S_ERROR + ERRMSG_MAX]).split(b"\0", 1)[0]
        p = Progress(done=done, status=self._u32(base + S_STATUS) if done else 0, n_prompt=np_,
                     tokens=tokens, text=bytes(self.mm[base + S_TEXT:base + S_TEXT + tl]),
                     error=err.decode("utf-8", "replace"),
                     request_id=self._u64(base + S_REQUEST_ID),
                     t_start_ns=self._u64(base + S_T_START), t_first_ns=self._u64(base + S_T_FIRST),
                     t_done_ns=self._u64(base + S_T_DONE))
        if not done:
            self.check(force=False)
        return p

    def wait(self, h, seen_tokens=None, timeout=None):
        """Until more than seen_tokens ids are out (None: until done) or timeout seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        nap = 0.00002
        while True:
            p = self.poll(h)
            if p.done or (seen_tokens is not None and len(p.tokens) > seen_tokens):
                return p
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout("request %d not finished after %.3f s" % (h.ticket, timeout))
            time.sleep(nap)
            nap = min(nap * 2, 0.002)

    def cancel(self, h):
        self._put32(self._slot(h) + S_CANCEL, 1)

    def release(self, h):
        base = self._slot(h)
        if self._u32(base + S_STATE) != SLOT_DONE:
            raise NibError("request is not finished (cancel it and wait first)")
        self._put32(base + S_STATE, SLOT_FREE)

    def ask(self, prompt, timeout=None, **kw):
        """submit, wait until done, release: the final Progress."""
        kw.setdefault("busy_wait", None)
        h = self.submit(prompt, **kw)
        p = self.wait(h, timeout=timeout)
        self.release(h)
        return p

    def stats(self):
        vals = struct.unpack_from("<7Q", self.mm, STATS_OFFSET)
        return dict(zip(STATS_COUNTERS, vals))

    def stop(self, timeout=30.0):
        self._put32(H_STOP, 1)
        self._ring()
        deadline = time.monotonic() + timeout
        while self._u32(H_STATE) != APP_STOPPED and _pid_exists(self.app_pid):
            if time.monotonic() >= deadline:
                raise Timeout("the appliance did not stop in %.0f s" % timeout)
            time.sleep(0.001)


def _pid_exists(pid):
    if pid <= 0 or pid >= 1 << 22:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _utf8_seq(b, i):
    """Length of the well-formed UTF-8 sequence at b[i] (the rule nib ask uses), or 0."""
    c = b[i]
    n = 1 if c < 0x80 else 2 if c & 0xE0 == 0xC0 else 3 if c & 0xF0 == 0xE0 else \
        4 if c & 0xF8 == 0xF0 else 0
    if n == 0 or n > len(b) - i or (n == 2 and c < 0xC2):
        return 0
    if any(b[i + k] & 0xC0 != 0x80 for k in range(1, n)):
        return 0
    return n


def json_string(b):
    """JSON string of bytes exactly as `nib ask --json` writes it (bytes out)."""
    out = bytearray(b'"')
    i = 0
    while i < len(b):
        n = _utf8_seq(b, i)
        c = b[i]
        if n == 0:
            out += b"\\ufffd"
        elif n > 1:
            out += b[i:i + n]
            i += n - 1
        elif c in (0x22, 0x5C):
            out += b"\\" + bytes([c])
        elif c == 0x0A:
            out += b"\\n"
        elif c == 0x09:
            out += b"\\t"
        elif c == 0x0D:
            out += b"\\r"
        elif c < 0x20:
            out += b"\\u%04x" % c
        else:
            out.append(c)
        i += 1
    return bytes(out + b'"')


def ask_json(prompt_bytes, p):
    ids = lambda v: ("[" + ", ".join(str(t) for t in v) + "]").encode()
    s = b'{"prompt": ' + json_string(prompt_bytes) + b', "prompt_token_ids": ' + ids(p.prompt_ids)
    s += b', "generated_token_ids": ' + ids(p.generated_ids) + b', "text": ' + json_string(p.text)
    s += b', "status": "' + p.status_name.encode() + b'"'
    if p.status_name == "bad_request":
        s += b', "error": ' + json_string(p.error.encode())
    return s + b"}\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="nibhost.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("ask", help="submit a prompt and print the answer")
    a.add_argument("--name", default="nib")
    a.add_argument("--max-tokens", type=int, default=64)
    a.add_argument("--temperature", type=float, default=0.0)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--no-bos", action="store_true")
    a.add_argument("--ids", help="comma-separated prompt token ids instead of text")
    a.add_argument("--json", action="store_true")
    a.add_argument("prompt", nargs="?", default="")
    s = sub.add_parser("stats", help="print the appliance's counters")
    s.add_argument("--name", default="nib")
    s.add_argument("--json", action="store_true")
    t = sub.add_parser("stop", help="stop the appliance")
    t.add_argument("--name", default="nib")
    args = ap.parse_args(argv)
    out = sys.stdout.buffer
    try:
        with Host(args.name) as h:
            if args.cmd == "stats":
                st = h.stats()
                if args.json:
                    out.write((json.dumps(st) + "\n").encode())
                else:
                    for k, v in st.items():
                        out.write(("%s: %d\n" % (k, v)).encode())
                return 0
            if args.cmd == "stop":
                h.stop()
                return 0
            prompt = args.prompt.encode("utf-8", "surrogateescape")
            if args.ids is not None:
                prompt_arg = [int(x) for x in args.ids.split(",") if x.strip()]
            else:
                prompt_arg = prompt
            p = h.ask(prompt_arg, max_tokens=args.max_tokens, temperature=args.temperature,
                      seed=args.seed, no_bos=args.no_bos)
            if args.json:
                out.write(ask_json(prompt, p))
            else:
                out.write(prompt + p.text + b"\n")
                if p.status_name == "bad_request":
                    sys.stderr.write("nibhost.py ask: request rejected: %s\n" % p.error)
            return 1 if p.status_name in ("bad_request", "shutdown") else 0
    except (NibError, ValueError) as e:
        sys.stderr.write("nibhost.py %s: %s\n" % (args.cmd, e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
