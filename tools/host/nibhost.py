#!/usr/bin/env python3
"""nibhost: a host for the nibble appliance in pure Python (standard library only).

It implements docs/ring.md (protocol version 4) from that document alone:
connect to the appliance's Unix socket <runtime dir>/<name>.sock, send ATTACH,
receive two memory file descriptors (the appliance's header, mapped read-only,
and this host's own ring, mapped read-write), check everything received, write
requests into the ring, read tokens and text as they stream, cancel, release.

    from nibhost import Host
    with Host("nib") as h:
        r = h.ask("Once upon a time", max_tokens=32)
        print(sanitize(r.text).decode(), r.generated_ids, r.status_name)
        r = h.chat([{"role": "user", "content": "Hi"}], max_tokens=32)  # the model's template

As a command (same output as `nib ask --json`, minus the timings):

    nibhost.py ask [--name N] [--max-tokens N] [--temperature T] [--seed S]
                   [--no-bos] [--special] [--ids 1,2,3] [--json] [--timeout S] PROMPT
    nibhost.py ask --chat [--system TEXT] [--now SECONDS] [...] MESSAGE
    nibhost.py ask --messages conversation.json [--now SECONDS] [...]
                                     (OpenAI-style [{"role": .., "content": ..}])
    nibhost.py run [--name N] --input FILE [--input FILE ...] [--bgr] [--json]
                                     (a vision appliance: what `nib run` prints)
    nibhost.py stats [--name N] [--json] [--timeout S]
    nibhost.py stop [--name N] [--timeout S]

Every wait is bounded: timeout arguments default to DEFAULT_TIMEOUT (60 s),
and while waiting the host checks at least every 100 ms that the appliance is
alive (its socket has not hung up, its heartbeat is fresh): Gone otherwise.
A Host belongs to the process that made it: after os.fork() the child's first
call attaches afresh (its own connection and ring).

Text: the model's bytes are not always UTF-8. sanitize() applies the rule of
proto/utf8.h (every invalid subpart becomes U+FFFD, as nib ask does), and
ready() says how much of a stream can be shown without half a character.

Memory ordering: Python has no atomics. Every shared field is read and written
with one aligned struct access (a single 4- or 8-byte copy), and the module
relies on x86-64 (TSO: stores become visible in program order, loads are not
reordered with later loads), where plain stores are release stores and plain
loads are acquire loads. The seq_cst fence between publishing a request and
reading header.sleeping is not available: a KICK may be missed, and the
appliance then finds the request within NIB_IDLE_SLEEP_MS. On other CPUs use
libnibhost.
"""
import argparse
import ast
import fcntl
import json
import math
import mmap
import os
import platform
import select
import socket
import stat
import struct
import sys
import threading
import time
import zlib

# ---- protocol version 4 (proto/shm_layout.h, proto/ctl.h, proto/chat_msg.h; docs/ring.md) ----
MAGIC = 0x334D48534C42494E       # "NIBLSHM3": header memfd (the magics did not change in 4)
RING_MAGIC = 0x33474E524C42494E  # "NIBLRNG3": ring memfd
VERSION = 4
HEADER_SIZE = 256
HEADER_MEMFD_SIZE = 4096
HEADER_MEMFD_SIZE_TENSOR = 8192  # a vision model: the tensor table's page follows
TENSORS_OFFSET = 4096
TENSOR_MAX, TENSOR_MAX_RANK, TENSOR_NAME_MAX, TENSOR_REC = 16, 8, 64, 128
TENSOR_AREA_LIMIT = 256 << 20
TENSOR_DTYPES = {1: ("f32", 4), 2: ("u8", 1)}
STATS_OFFSET = 256
STATS_SIZE = 3584
RING_HEADER_SIZE = 128
SLOT_FIXED = 320
HOSTS_MAX = 64
RING_SLOTS = 4
ERRMSG_MAX = 128
TEMPERATURE_MAX = 100.0
PROMPT_MIN, PROMPT_LIMIT = 65536, 1 << 20
TEXT_MIN, TEXT_LIMIT = 32768, 4 << 20
HEARTBEAT_STALE_NS = 3_000_000_000
CHECK_NS = 100_000_000
DEFAULT_TIMEOUT = 60.0
NAME_MAX = 56

# header fields: offset
H_MAGIC, H_VERSION, H_HEADER_SIZE, H_MEMFD_SIZE, H_EPOCH = 0, 8, 12, 16, 24
H_STATS_OFFSET, H_STATS_SIZE, H_APP_PID, H_MAX_HOSTS, H_VOCAB = 32, 40, 44, 48, 52
H_CTX, H_BOS, H_EOS, H_ADD_BOS, H_ERRMSG_MAX, H_FEATURES = 64, 68, 72, 76, 80, 84
FEAT_CHAT = 1
FEAT_MEASURE = 2
FEAT_TENSOR = 4
H_TENSORS_OFFSET, H_N_INPUTS, H_N_OUTPUTS, H_INPUTS_LEN, H_OUTPUTS_LEN = 88, 92, 96, 100, 104
H_RING_SIZE, H_RING_HEADER_SIZE, H_N_SLOTS, H_SLOTS_OFFSET, H_SLOT_SIZE = 128, 136, 140, 144, 152
H_PROMPT_OFFSET, H_PROMPT_MAX, H_TOKENS_OFFSET, H_SLOT_TOKENS = 160, 164, 168, 172
H_TEXT_OFFSET, H_SLOT_TEXT = 176, 180
H_STATE, H_SLEEPING, H_HEARTBEAT, H_HOSTS_ATTACHED, H_SOCKET_LOST = 192, 196, 200, 208, 212

# ring header fields
R_MAGIC, R_EPOCH, R_INDEX, R_ATTACH_SEQ, R_DONE_SEQ = 0, 8, 16, 20, 24
R_DONE_WAITERS, R_NEXT_TICKET = 64, 72

# slot fields, relative to the slot
S_STATE, S_TICKET, S_CANCEL, S_REQUEST_ID = 0, 8, 16, 24
# the request: prompt_len u32, max_tokens u32, temperature f32, flags u32, seed u64, kind u32,
# 36 zero bytes
S_REQ = 64
S_N_TOKENS, S_N_PROMPT, S_TEXT_LEN, S_STATUS = 128, 132, 136, 140
S_T_START, S_T_FIRST, S_T_DONE, S_SERVED = 144, 152, 160, 168
S_ERROR = 176

APP_BOOTING, APP_READY, APP_STOPPING, APP_STOPPED = 0, 1, 2, 3
SLOT_FREE, SLOT_CLAIMED, SLOT_SUBMITTED, SLOT_RUNNING, SLOT_DONE = 0, 1, 2, 3, 4
STATUS_NAMES = ["pending", "ok", "eos", "cancelled", "ctx_full", "text_full", "bad_request",
                "shutdown", "owner_gone", "host_changed"]
REQ_NO_BOS, REQ_PROMPT_IDS, REQ_SPECIAL = 1, 2, 4
KIND_TEXT, KIND_CHAT, KIND_MEASURE, KIND_TENSOR = 0, 1, 2, 3
# chat messages in the prompt area (proto/chat_msg.h): header, then per message
# role_len u32, content_len u32, role, content
CHAT_MAGIC = 0x4D42494E  # "NIBM"
CHAT_HEADER = "<IIIIq"
CHAT_ADD_GENERATION_PROMPT = 1
CHAT_ROLE_MAX = 64
CHAT_MESSAGES_MAX = 16384
CHAT_NOW_MAX = 253402300799  # 9999-12-31T23:59:59Z
STATS_COUNTERS = ["requests_accepted", "requests_done", "requests_rejected", "requests_cancelled",
                  "slots_reclaimed", "tokens_prompt", "tokens_generated", "tokens_run"]
# stats line 3 (protocol 3): u64 counters, then two u32
STATS_HOSTS = ["attaches", "attach_refused", "host_hangups", "requests_host_changed",
               "ctl_malformed"]
STATS_HOSTS_OFFSET = STATS_OFFSET + 192

# control messages (proto/ctl.h): one 64-byte message each way
CTL_MAGIC, CTL_VERSION = 0x4342494E, 3
CTL_ATTACH, CTL_DETACH, CTL_STOP, CTL_KICK = 1, 2, 3, 4
CTL_ATTACHED, CTL_REFUSED, CTL_STOPPING = 0x81, 0x82, 0x83
CTL_FMT = "<IHHIIQQQ24s"
CTL_SIZE = 64
REFUSALS = {1: "every host ring is attached (the appliance's --max-hosts): try again when a "
               "host detaches",
            2: "this user may not do that (the appliance's uid, root, or with --group-access "
               "its group)",
            3: "the appliance found the message malformed",
            4: "the appliance is stopping"}

F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE, F_SEAL_FUTURE_WRITE = 1, 2, 4, 8, 16
F_GET_SEALS = getattr(fcntl, "F_GET_SEALS", 1034)
HEADER_SEALS = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE
RING_SEALS = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW


class NibError(Exception):
    """Bad use, a refused attach, or a request this host no longer owns."""


class Busy(NibError):
    """Every slot of this host's ring (or every ring) is in use: back-pressure."""


class Gone(NibError):
    """The appliance stopped, exited or stopped answering; attach again."""


class Timeout(NibError):
    """A wait ran out of time; the request goes on."""


def status_name(st):
    return STATUS_NAMES[st] if 0 <= st < len(STATUS_NAMES) else "unknown"


# ---- strict UTF-8 (proto/utf8.h: the same rule, the same vectors) ----

def _lead(c):
    """(length, lowest, highest second byte) for a lead byte, or None (table 3-7)."""
    if 0xC2 <= c <= 0xDF:
        return 2, 0x80, 0xBF
    if 0xE0 <= c <= 0xEF:
        return 3, 0xA0 if c == 0xE0 else 0x80, 0x9F if c == 0xED else 0xBF
    if 0xF0 <= c <= 0xF4:
        return 4, 0x90 if c == 0xF0 else 0x80, 0x8F if c == 0xF4 else 0xBF
    return None


def utf8_step(b, i):
    """One step at b[i]: (bytes consumed, code point or 0xFFFD, cut short by the end)."""
    c = b[i]
    if c < 0x80:
        return 1, c, False
    lead = _lead(c)
    if lead is None:
        return 1, 0xFFFD, False
    n, lo, hi = lead
    v = c & (0x1F if n == 2 else 0x0F if n == 3 else 0x07)
    for k in range(1, n):
        if i + k >= len(b):
            return k, 0xFFFD, True
        x = b[i + k]
        if not ((lo if k == 1 else 0x80) <= x <= (hi if k == 1 else 0xBF)):
            return k, 0xFFFD, False
        v = (v << 6) | (x & 0x3F)
    return n, v, False


def ready(b):
    """Bytes of b that can be shown now when more may follow (a trailing truncated
    sequence is held back)."""
    n = len(b)
    for j in range(1, min(3, n) + 1):
        if 0x80 <= b[n - j] <= 0xBF:
            continue
        return n - j if utf8_step(b[n - j:], 0)[2] else n
    return n


def _codepoints(b):
    i = 0
    while i < len(b):
        k, cp, _ = utf8_step(b, i)
        i += k
        yield cp


def sanitize(b):
    """Well-formed UTF-8 bytes of b: each maximal invalid subpart becomes U+FFFD."""
    return "".join(map(chr, _codepoints(b))).encode("utf-8")


def json_string(b):
    """JSON string of bytes exactly as `nib ask --json` writes it (bytes out)."""
    out = bytearray(b'"')
    for cp in _codepoints(b):
        if cp >= 0x80:
            out += chr(cp).encode("utf-8")
        elif cp in (0x22, 0x5C):
            out += b"\\" + bytes([cp])
        elif cp == 0x0A:
            out += b"\\n"
        elif cp == 0x09:
            out += b"\\t"
        elif cp == 0x0D:
            out += b"\\r"
        elif cp < 0x20:
            out += b"\\u%04x" % cp
        else:
            out.append(cp)
    return bytes(out + b'"')


# ---- chat messages (proto/chat_msg.h) ----

def _message(m, i):
    """(role bytes, content bytes) of a {"role", "content"} dict or a (role, content) pair."""
    role, content = (m.get("role"), m.get("content")) if isinstance(m, dict) else m
    if isinstance(role, str):
        role = role.encode("utf-8", "surrogateescape")
    if not isinstance(role, (bytes, bytearray)) or not 1 <= len(role) <= CHAT_ROLE_MAX or \
            any(not 0x21 <= c <= 0x7E for c in role):
        raise NibError("message %d: role %r must be 1..%d bytes of printable ASCII" %
                       (i, role, CHAT_ROLE_MAX))
    if content is None:
        content = b""
    if isinstance(content, str):
        content = content.encode("utf-8", "surrogateescape")
    if not isinstance(content, (bytes, bytearray)):
        raise NibError("message %d: content must be a string (OpenAI-style parts are not "
                       "supported)" % i)
    return bytes(role), bytes(content)


def encode_chat(messages, add_generation_prompt=True, now=0):
    """The prompt-area bytes of a conversation (kind CHAT): docs/ring.md §6.2."""
    messages = list(messages)
    if len(messages) > CHAT_MESSAGES_MAX:
        raise NibError("%d messages, a conversation holds at most %d" %
                       (len(messages), CHAT_MESSAGES_MAX))
    now = int(now or 0)
    if not 0 <= now <= CHAT_NOW_MAX:
        raise NibError("now %d is outside 0..%d" % (now, CHAT_NOW_MAX))
    out = [struct.pack(CHAT_HEADER, CHAT_MAGIC, len(messages),
                       CHAT_ADD_GENERATION_PROMPT if add_generation_prompt else 0, 0, now)]
    for i, m in enumerate(messages):
        role, content = _message(m, i)
        out += [struct.pack("<II", len(role), len(content)), role, content]
    return b"".join(out)


# ---- names (proto/shm_name.h) ----

def check_name(name):
    if not name or len(name) > NAME_MAX or name[0] == "." or \
            any(not (c.isascii() and (c.isalnum() or c in "_-.")) for c in name):
        raise NibError("name %r must be 1..%d characters of [A-Za-z0-9_.-], not starting "
                       "with '.'" % (name, NAME_MAX))


def runtime_dir():
    d = os.environ.get("NIB_RUNTIME_DIR") or None
    if d is None and os.environ.get("XDG_RUNTIME_DIR"):
        d = os.path.join(os.environ["XDG_RUNTIME_DIR"], "nibble")
    if d is None:
        d = "/tmp/nibble-%d" % os.geteuid()
    if not d.startswith("/"):
        raise NibError("runtime directory %r is not an absolute path" % d)
    return d.rstrip("/") or "/"


def socket_path(name):
    check_name(name)
    p = os.path.join(runtime_dir(), name + ".sock")
    if len(p.encode()) > 107:
        raise NibError("socket path %s is longer than a Unix socket address allows (107 bytes); "
                       "set NIB_RUNTIME_DIR to a shorter directory" % p)
    return p


DENIED = ("permission denied: %s (run as the appliance's user, or in its group when it runs "
          "with --group-access)")


def _connect(name, deadline):
    """Connect to NAME's socket (the host's rule for the directory, then SO_PEERCRED)."""
    path = socket_path(name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise NibError("no appliance named %s is running (no socket at %s)" % (name, path)) \
            from None
    except PermissionError:
        raise NibError(DENIED % path) from None
    if not stat.S_ISSOCK(st.st_mode):
        raise NibError("no appliance named %s is running (%s is not a socket)" % (name, path))
    d = os.path.dirname(path)
    dst = os.lstat(d)
    if stat.S_ISLNK(dst.st_mode) or not stat.S_ISDIR(dst.st_mode):
        raise NibError("runtime directory %s is not a directory" % d)
    mode = stat.S_IMODE(dst.st_mode)
    if mode & 0o022:
        raise NibError("runtime directory %s has mode %04o: others can write it" % (d, mode))
    if dst.st_uid not in (os.geteuid(), 0) and mode != 0o750:
        raise NibError("runtime directory %s is owned by uid %d, not by this uid %d" %
                       (d, dst.st_uid, os.geteuid()))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        while True:
            s.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                s.connect(path)
                break
            except (BlockingIOError, InterruptedError):
                if time.monotonic() >= deadline:
                    raise Timeout("appliance %s did not accept a connection in time" % name) \
                        from None
                time.sleep(0.001)
            except PermissionError:
                raise NibError(DENIED % path) from None
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise NibError("no appliance named %s is running (%s at %s)" %
                               (name, "no socket" if isinstance(e, FileNotFoundError)
                                else "nothing listens on the socket", path)) from None
            except socket.timeout:
                raise Timeout("appliance %s did not accept a connection in time" % name) \
                    from None
        cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", cred)
        if uid not in (os.geteuid(), 0, dst.st_uid):
            raise NibError("%s is served by uid %d, which owns neither it nor this process" %
                           (path, uid))
        s.setblocking(False)
        return s, path
    except BaseException:
        s.close()
        raise


def _msg(mtype):
    return struct.pack(CTL_FMT, CTL_MAGIC, CTL_VERSION, mtype, 0, 0, 0, 0, 0, bytes(24))


def _send(s, mtype, deadline):
    m = _msg(mtype)
    while True:
        try:
            s.send(m, socket.MSG_NOSIGNAL)
            return
        except (BlockingIOError, InterruptedError):
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("the appliance's socket is full") from None
            select.select([], [s], [], left)


def _recv(s, deadline, want_fds=0):
    """One message: (fields or None for the end, fds). Raises Timeout at the deadline."""
    while True:
        try:
            data, fds, flags, _ = socket.recv_fds(s, CTL_SIZE + 1, max(want_fds, 1) + 4,
                                                  getattr(socket, "MSG_CMSG_CLOEXEC", 0))
        except (BlockingIOError, InterruptedError):
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("no answer in time") from None
            select.select([s], [], [], left)
            continue
        except ConnectionResetError:
            return None, []
        if len(fds) > want_fds or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            for fd in fds:
                os.close(fd)
            raise NibError("malformed message from the appliance (%d descriptors)" % len(fds))
        if not data:
            for fd in fds:
                os.close(fd)
            return None, []
        f = struct.unpack(CTL_FMT, data) if len(data) == CTL_SIZE else None
        if f is None or f[0] != CTL_MAGIC or f[1] != CTL_VERSION or any(f[8]) or \
                f[2] not in (CTL_ATTACHED, CTL_REFUSED, CTL_STOPPING):
            for fd in fds:
                os.close(fd)
            raise NibError("malformed message from the appliance")
        return f, fds


def _stop_on(s, name, deadline):
    try:
        _send(s, CTL_STOP, deadline)
    except (BrokenPipeError, ConnectionResetError):
        return  # it is gone already
    stopping = False
    while True:
        try:
            f, _ = _recv(s, deadline)
        except Timeout:
            raise Timeout("appliance %s %s" % (name, "is stopping but did not exit in time"
                                               if stopping else "did not answer STOP in time"))
        if f is None:
            return  # it exited
        if f[2] == CTL_REFUSED:
            raise NibError("appliance %s refused to stop: %s" %
                           (name, REFUSALS.get(f[3], "unknown reason")))
        if f[2] == CTL_STOPPING:
            stopping = True


def stop(name="nib", timeout=None):
    """Stop the appliance NAME over its socket, without attaching (works whatever the shared
    memory holds, and when every ring is taken). Waits for STOPPING, then for it to exit."""
    deadline = time.monotonic() + (timeout or DEFAULT_TIMEOUT)
    s, _ = _connect(name, deadline)
    try:
        _stop_on(s, name, deadline)
    finally:
        s.close()


def attach(name="nib", proc=None, boot_timeout=120, timeout=None):
    """A Host on an appliance that may still be booting (a script that has just started it):
    tries to attach every 50 ms until it answers, for at most boot_timeout seconds (then the
    last error is raised). With proc, its subprocess.Popen, a process that exits first raises
    NibError with its status and its stderr (when piped). timeout is the Host's own."""
    deadline = time.monotonic() + boot_timeout
    while True:
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            if isinstance(err, bytes):
                err = err.decode(errors="replace")
            raise NibError("appliance %s exited during boot (status %d)%s" %
                           (name, proc.returncode, ": " + err.strip() if err else ""))
        try:
            return Host(name, timeout=timeout)
        except (NibError, OSError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


# ---- futex (through ctypes, standard library) when it is there ----
try:
    import ctypes
    _libc = ctypes.CDLL(None, use_errno=True)
    _SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
except Exception:  # pragma: no cover - no ctypes
    ctypes = None
    _SYS_FUTEX = None


# Forks counted in the child (os.register_at_fork): a Host compares this with its own copy on
# every call, which costs no system call (os.getpid() does).
_fork_gen = 0


def _in_child():
    global _fork_gen
    _fork_gen += 1


os.register_at_fork(after_in_child=_in_child)


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
    def __init__(self, name="nib", timeout=None):
        check_name(name)
        self.name = name
        self.timeout = timeout
        self._lock = threading.Lock()
        self.sock = self.hm = self.mm = None
        self._attach()

    # ---- attach ----
    def _attach(self):
        deadline = time.monotonic() + (self.timeout or DEFAULT_TIMEOUT)
        self.gone = None
        self._next_check = 0
        self.sock, self.path = _connect(self.name, deadline)
        try:
            self._attach_on(deadline)
        except BaseException:
            self._drop(False)
            raise
        self.pid = os.getpid()
        self.fork_gen = _fork_gen

    def _attach_on(self, deadline):
        _send(self.sock, CTL_ATTACH, deadline)
        try:
            f, fds = _recv(self.sock, deadline, want_fds=2)
        except Timeout:
            raise Timeout("appliance %s did not answer ATTACH in time" % self.name) from None
        if f is None:
            raise Gone("appliance %s closed the connection instead of answering ATTACH" %
                       self.name)
        try:
            _, _, mtype, status, index, epoch, hsize, rsize, _ = f
            if mtype == CTL_REFUSED:
                cls = Busy if status == 1 else NibError
                raise cls("appliance %s refused to attach: %s" %
                          (self.name, REFUSALS.get(status, "unknown reason")))
            if mtype != CTL_ATTACHED:
                raise NibError("%s: malformed reply to ATTACH" % self.path)
            if len(fds) != 2 or status != 0 or epoch == 0 or \
                    hsize not in (HEADER_MEMFD_SIZE, HEADER_MEMFD_SIZE_TENSOR) or \
                    rsize == 0 or rsize > RING_SLOTS * (2 * TENSOR_AREA_LIMIT + 4096) + 4096:
                raise NibError("%s: malformed ATTACHED reply (%d descriptors, status %d, header "
                               "%d bytes, ring %d bytes)" % (self.path, len(fds), status, hsize,
                                                             rsize))
            for fd, size, seals, what in ((fds[0], hsize, HEADER_SEALS, "header"),
                                          (fds[1], rsize, RING_SEALS, "ring")):
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise NibError("%s: the %s descriptor is not a memory file" %
                                   (self.path, what))
                if st.st_size != size:
                    raise NibError("%s: the %s memfd has %d bytes, the reply said %d" %
                                   (self.path, what, st.st_size, size))
                try:
                    got = fcntl.fcntl(fd, F_GET_SEALS)
                except OSError:
                    got = 0
                if got & seals != seals:
                    raise NibError("%s: the %s memfd is not sealed against resizing (seals 0x%x, "
                                   "want 0x%x)" % (self.path, what, got, seals))
            self.hm = mmap.mmap(fds[0], hsize, mmap.MAP_SHARED, mmap.PROT_READ)
            self.mm = mmap.mmap(fds[1], rsize, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            for fd in fds:
                os.close(fd)
        while self._h32(H_STATE) == APP_BOOTING and time.monotonic() < deadline:
            time.sleep(0.005)
        self._check_header(index, epoch, hsize, rsize)
        st = self._h32(H_STATE)
        if st != APP_READY:
            raise NibError("appliance %s is not ready (it is %s)" %
                           (self.name, {APP_BOOTING: "still booting", APP_STOPPING: "stopping",
                                        APP_STOPPED: "stopped"}.get(st, "in an unknown state")))
        if self._r64(R_MAGIC) != RING_MAGIC or self._r64(R_EPOCH) != self.epoch or \
                self._r32(R_INDEX) != index or self._r32(R_ATTACH_SEQ) == 0:
            raise NibError("%s handed over a ring that is not nibble's or not this boot's "
                           "(magic 0x%x, epoch %d, index %d of %d)" %
                           (self.path, self._r64(R_MAGIC), self._r64(R_EPOCH),
                            self._r32(R_INDEX), index))
        age = time.monotonic_ns() - self._h64(H_HEARTBEAT)
        if age > HEARTBEAT_STALE_NS:
            raise Gone("appliance %s is not responding (no heartbeat for %d ms)" %
                       (self.name, age // 1000000))
        self.host_index = index

    def _check_header(self, index, epoch, hsize, rsize):
        """The header must describe exactly the layout this host was written for."""
        h32, h64 = self._h32, self._h64
        if h64(H_MAGIC) != MAGIC:
            raise NibError("%s handed over a header that is not nibble's (bad magic)" % self.path)
        if h32(H_VERSION) != VERSION:
            raise NibError("%s speaks protocol version %d, this host speaks version %d: use a "
                           "host written for the appliance's version" %
                           (self.path, h32(H_VERSION), VERSION))

        def bad(what):
            raise NibError("inconsistent header from %s: %s" % (self.path, what))
        if h32(H_HEADER_SIZE) != HEADER_SIZE:
            bad("header_size is %d, version %d has %d" % (h32(H_HEADER_SIZE), VERSION, HEADER_SIZE))
        if h64(H_MEMFD_SIZE) != hsize:
            bad("header_memfd_size is %d, the memfd has %d bytes" % (h64(H_MEMFD_SIZE), hsize))
        if h64(H_EPOCH) == 0 or h64(H_EPOCH) != epoch:
            bad("epoch %d, the reply said %d" % (h64(H_EPOCH), epoch))
        if h64(H_STATS_OFFSET) != STATS_OFFSET or h32(H_STATS_SIZE) != STATS_SIZE:
            bad("stats_offset %d, stats_size %d (version %d has %d, %d)" %
                (h64(H_STATS_OFFSET), h32(H_STATS_SIZE), VERSION, STATS_OFFSET, STATS_SIZE))
        if not 0 < h32(H_MAX_HOSTS) <= HOSTS_MAX or index >= h32(H_MAX_HOSTS):
            bad("max_hosts %d, this ring's index %d" % (h32(H_MAX_HOSTS), index))
        vocab, ctx, bos, eos, add_bos, errmax = (h32(o) for o in (H_VOCAB, H_CTX, H_BOS, H_EOS,
                                                                  H_ADD_BOS, H_ERRMSG_MAX))
        # A vision model (tensors in, tensors out): no vocabulary or context, the tensor
        # table on a second header page, larger slots, no token area.
        features = h32(H_FEATURES)
        tensor = bool(features & FEAT_TENSOR)
        t = {k: h32(o) for k, o in (("tensors_offset", H_TENSORS_OFFSET), ("n_inputs", H_N_INPUTS),
                                     ("n_outputs", H_N_OUTPUTS), ("inputs_len", H_INPUTS_LEN),
                                     ("outputs_len", H_OUTPUTS_LEN))}
        if tensor and (features != FEAT_TENSOR or hsize != HEADER_MEMFD_SIZE_TENSOR or
                       t["tensors_offset"] != TENSORS_OFFSET or t["n_inputs"] == 0 or
                       t["n_outputs"] == 0 or t["n_inputs"] + t["n_outputs"] > TENSOR_MAX or
                       errmax != ERRMSG_MAX or t["inputs_len"] > h32(H_PROMPT_MAX) or
                       t["outputs_len"] > h32(H_SLOT_TEXT)):
            bad("a vision model's features 0x%x, tensor fields %s" % (features, t))
        if not tensor and (vocab == 0 or ctx == 0 or bos >= vocab or eos >= vocab or
                           add_bos > 1 or errmax != ERRMSG_MAX):
            bad("model limits vocab_size %d, ctx_len %d, bos_id %d, eos_id %d, add_bos %d, "
                "errmsg_max %d" % (vocab, ctx, bos, eos, add_bos, errmax))
        g = {k: f(o) for k, f, o in (
            ("ring_size", h64, H_RING_SIZE), ("ring_header_size", h32, H_RING_HEADER_SIZE),
            ("n_slots", h32, H_N_SLOTS), ("slots_offset", h64, H_SLOTS_OFFSET),
            ("slot_size", h64, H_SLOT_SIZE), ("prompt_offset", h32, H_PROMPT_OFFSET),
            ("prompt_max", h32, H_PROMPT_MAX), ("tokens_offset", h32, H_TOKENS_OFFSET),
            ("slot_tokens", h32, H_SLOT_TOKENS), ("text_offset", h32, H_TEXT_OFFSET),
            ("slot_text", h32, H_SLOT_TEXT))}
        why = None
        if g["ring_size"] != rsize:
            why = "ring_size differs from the ring received"
        elif g["ring_header_size"] != RING_HEADER_SIZE:
            why = "ring_header_size"
        elif not 0 < g["n_slots"] <= RING_SLOTS:
            why = "n_slots"
        elif g["slots_offset"] < g["ring_header_size"] or g["slots_offset"] % 64:
            why = "slots_offset"
        elif g["slot_size"] < SLOT_FIXED or g["slot_size"] % 64 or \
                g["slot_size"] > (2 * TENSOR_AREA_LIMIT + 4096 if tensor else 64 << 20):
            why = "slot_size"
        elif g["prompt_offset"] < SLOT_FIXED or not (
                g["prompt_max"] <= TENSOR_AREA_LIMIT if tensor
                else PROMPT_MIN <= g["prompt_max"] <= PROMPT_LIMIT):
            why = "prompt area"
        elif g["tokens_offset"] % 4 or g["tokens_offset"] < g["prompt_offset"] + g["prompt_max"] \
                or not (g["slot_tokens"] == 0 if tensor else 0 < g["slot_tokens"] <= PROMPT_LIMIT):
            why = "token area"
        elif g["text_offset"] < g["tokens_offset"] + 4 * g["slot_tokens"] or not (
                g["slot_text"] <= TENSOR_AREA_LIMIT if tensor
                else TEXT_MIN <= g["slot_text"] <= TEXT_LIMIT) or \
                g["text_offset"] + g["slot_text"] > g["slot_size"]:
            why = "text area"
        elif g["slots_offset"] + g["n_slots"] * g["slot_size"] > g["ring_size"]:
            why = "slots beyond the ring's end"
        if why:
            bad("ring geometry (%s): %s" % (why, g))
        self.__dict__.update(g)
        self.epoch = h64(H_EPOCH)
        self.app_pid = h32(H_APP_PID)
        self.vocab_size, self.ctx_len, self.bos_id, self.eos_id = vocab, ctx, bos, eos
        self.add_bos = add_bos
        self.features = features
        self.inputs, self.outputs = [], []
        if tensor:
            self.__dict__.update(t)
            self._read_tensors()

    def _read_tensors(self):
        """The tensor table (docs/ring.md 3), checked as libnibhost checks it."""
        end = [0, 0]
        n = self.n_inputs + self.n_outputs
        for i in range(n):
            o = TENSORS_OFFSET + i * TENSOR_REC
            raw = bytes(self.hm[o:o + TENSOR_NAME_MAX])
            d, dtype, rank, reserved = struct.unpack_from("<4I", self.hm, o + 64)
            dims = struct.unpack_from("<8I", self.hm, o + 80)
            area_off, nbytes = struct.unpack_from("<QQ", self.hm, o + 112)
            out = int(i >= self.n_inputs)
            limit = self.outputs_len if out else self.inputs_len
            ok = b"\0" in raw and raw[0] != 0 and d == out and dtype in TENSOR_DTYPES and \
                1 <= rank <= TENSOR_MAX_RANK and reserved == 0 and \
                all(x > 0 for x in dims[:rank]) and all(x == 0 for x in dims[rank:])
            size = TENSOR_DTYPES.get(dtype, ("?", 1))[1]
            for x in dims[:rank]:
                size *= x
            last = i + 1 in (self.n_inputs, n)
            if not ok or size != nbytes or area_off % 64 or area_off < end[out] or \
                    area_off + nbytes > limit or (last and area_off + nbytes != limit):
                raise NibError("inconsistent header from %s: tensor %d (%s, dtype %d, rank %d, "
                               "%d bytes at %d of %d)" % (self.path, i, "output" if out else
                                                          "input", dtype, rank, nbytes,
                                                          area_off, limit))
            end[out] = area_off + nbytes
            (self.outputs if out else self.inputs).append({
                "name": raw.split(b"\0", 1)[0].decode("utf-8", "replace"),
                "dtype": TENSOR_DTYPES[dtype][0], "dims": list(dims[:rank]),
                "offset": area_off, "bytes": nbytes})

    @property
    def is_vision(self):
        """The appliance serves a vision model: submit_tensors()/run() only."""
        return bool(self.features & FEAT_TENSOR)

    def submit_tensors(self, inputs, request_id=0, busy_wait=0.0):
        """One run of a vision model (kind TENSOR, docs/ring.md 6.4): inputs is one bytes-like
        per model input, in order, each exactly that input's bytes (self.inputs[i]["bytes"]:
        dense, row-major, little-endian). Refused here, naming the input, before anything
        is written."""
        self._own()
        self._alive(True)
        if not self.is_vision:
            raise NibError("appliance %s serves a decoder (tokens), not a vision model" %
                           self.name)
        inputs = [memoryview(x).cast("B") for x in inputs]
        if len(inputs) != len(self.inputs):
            raise NibError("%d input tensors given, the model takes %d" %
                           (len(inputs), len(self.inputs)))
        for i, (x, t) in enumerate(zip(inputs, self.inputs)):
            if len(x) != t["bytes"]:
                raise NibError("input %d (%s): %d bytes given, the model takes %d" %
                               (i, t["name"], len(x), t["bytes"]))
        area = bytearray(self.inputs_len)
        for x, t in zip(inputs, self.inputs):
            area[t["offset"]:t["offset"] + t["bytes"]] = x
        return self._submit(bytes(area), KIND_TENSOR, 0, 0, 0.0, 0, request_id, busy_wait)

    def outputs_of(self, p):
        """The output tensors' bytes of a finished TENSOR request's Progress (status ok)."""
        if not p.done or p.status != 1 or len(p.text) != self.outputs_len:
            raise NibError("request ended %s%s" % (p.status_name,
                                                   ": " + p.error if p.error else ""))
        return [p.text[t["offset"]:t["offset"] + t["bytes"]] for t in self.outputs]

    def run(self, inputs, timeout=None, request_id=0):
        """submit_tensors, wait until done, release: the outputs' bytes, in the model's
        order (NibError naming the field when the appliance refused the request)."""
        h = self.submit_tensors(inputs, request_id=request_id, busy_wait=timeout)
        p = self.wait(h, timeout=timeout)
        self.release(h)
        return self.outputs_of(p)

    @property
    def has_chat(self):
        """The served model has a chat template (chat() and submit_chat() work)."""
        return bool(self.features & FEAT_CHAT)

    def _drop(self, say_detach):
        if self.sock is not None:
            if say_detach:
                try:
                    self.sock.send(_msg(CTL_DETACH), socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT)
                except OSError:
                    pass
            self.sock.close()
            self.sock = None
        for m in ("hm", "mm"):
            if getattr(self, m, None) is not None:
                getattr(self, m).close()
                setattr(self, m, None)

    def close(self):
        self._drop(getattr(self, "pid", None) == os.getpid())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- plumbing ----
    def _h32(self, off):
        return struct.unpack_from("<I", self.hm, off)[0]

    def _h64(self, off):
        return struct.unpack_from("<Q", self.hm, off)[0]

    def _r32(self, off):
        return struct.unpack_from("<I", self.mm, off)[0]

    def _r64(self, off):
        return struct.unpack_from("<Q", self.mm, off)[0]

    def _put32(self, off, v):
        struct.pack_into("<I", self.mm, off, v)

    def _put64(self, off, v):
        struct.pack_into("<Q", self.mm, off, v)

    def _own(self):
        """Every call starts here: a forked child attaches afresh (closing its copies of the
        parent's connection and mappings, without DETACH: they are the parent's)."""
        if self.fork_gen == _fork_gen or self.pid == os.getpid():
            self.fork_gen = _fork_gen
            if self.mm is None:
                raise NibError("this host is closed")
            return
        self._drop(False)
        self._attach()

    def _gone(self, what):
        self.gone = what
        raise Gone(what)

    def check(self, force=True):
        """Raise Gone when the appliance has stopped, exited or stopped answering. The socket
        is looked at every time when forced, else every 100 ms."""
        self._own()
        self._alive(force)

    def _alive(self, force):
        if self.gone:
            raise Gone(self.gone)
        st = self._h32(H_STATE)
        if st in (APP_STOPPING, APP_STOPPED):
            self._gone("appliance %s is %s" % (self.name, "stopping" if st == APP_STOPPING
                                               else "stopped"))
        now = time.monotonic_ns()
        if not force and now < self._next_check:
            return
        self._next_check = now + CHECK_NS
        for _ in range(8):
            r, _, x = select.select([self.sock], [], [self.sock], 0)
            if not r and not x:
                break
            try:
                data = self.sock.recv(CTL_SIZE + 1, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                data = b""
            if not data:
                self._gone("appliance %s exited (its connection hung up)" % self.name)
            if len(data) == CTL_SIZE and struct.unpack(CTL_FMT, data)[2] == CTL_STOPPING:
                self._gone("appliance %s is stopping" % self.name)
        age = now - self._h64(H_HEARTBEAT)
        if age > HEARTBEAT_STALE_NS:
            self._gone("appliance %s is not responding (no heartbeat for %d ms)" %
                       (self.name, age // 1000000))

    def _so(self, i):
        return self.slots_offset + i * self.slot_size

    def _claim(self):
        with self._lock:
            for i in range(self.n_slots):
                if self._r32(self._so(i) + S_STATE) == SLOT_FREE:
                    self._put32(self._so(i) + S_STATE, SLOT_CLAIMED)
                    return i
        return None

    def _slot(self, h):
        if not isinstance(h, Handle) or not 0 <= h.slot < self.n_slots:
            raise NibError("not a request handle of this host: %r" % (h,))
        base = self._so(h.slot)
        if self._r64(base + S_TICKET) != h.ticket or \
                self._r32(base + S_STATE) in (SLOT_FREE, SLOT_CLAIMED):
            raise NibError("slot %d no longer holds request %d of this host (released, or this "
                           "is a forked child)" % (h.slot, h.ticket))
        return base

    # ---- the API ----
    def submit(self, prompt, max_tokens=64, temperature=0.0, seed=0, no_bos=False, request_id=0,
               busy_wait=0.0, special=False):
        """Submit a prompt (str, bytes, or a list of token ids). busy_wait: seconds to wait
        for a free slot (None: up to DEFAULT_TIMEOUT) before raising Busy. special: control
        tokens written as text (<|im_end|>) map to their ids."""
        self._own()
        self._alive(True)
        flags = (REQ_NO_BOS if no_bos else 0) | (REQ_SPECIAL if special else 0)
        if isinstance(prompt, str):
            prompt = prompt.encode("utf-8")
        if isinstance(prompt, (bytes, bytearray)):
            data = bytes(prompt)
            if len(data) > self.prompt_max:
                raise NibError("prompt is %d bytes, the limit is %d bytes (the appliance's "
                               "prompt area, prompt_max): not sent" % (len(data), self.prompt_max))
        else:
            ids = list(prompt)
            if not ids or len(ids) > self.prompt_max // 4:
                raise NibError("prompt must hold 1..%d token ids" % (self.prompt_max // 4))
            for k, t in enumerate(ids):
                if not 0 <= t < self.vocab_size:
                    raise NibError("prompt token id %d at %d is not below the vocabulary size %d"
                                   % (t, k, self.vocab_size))
            data = struct.pack("<%dI" % len(ids), *ids)
            flags |= REQ_PROMPT_IDS
        return self._submit(data, KIND_TEXT, flags, max_tokens, temperature, seed, request_id,
                            busy_wait)

    def submit_chat(self, messages, max_tokens=64, temperature=0.0, seed=0, no_bos=False,
                    request_id=0, busy_wait=0.0, special=False, add_generation_prompt=True,
                    now=None):
        """Submit a conversation ([{"role": .., "content": ..}, ...]) that the appliance renders
        with the model's chat template. now: what strftime_now() formats (UTC seconds; None:
        the appliance's clock). A conversation larger than the prompt area is refused here."""
        self._own()
        self._alive(True)
        if not self.has_chat:
            raise NibError("appliance %s serves a model without a chat template: send text" %
                           self.name)
        data = encode_chat(messages, add_generation_prompt, now or 0)
        if len(data) > self.prompt_max:
            raise NibError("the conversation is %d bytes encoded (%d messages), the limit is %d "
                           "bytes (the appliance's prompt area, prompt_max): not sent" %
                           (len(data), len(messages), self.prompt_max))
        flags = (REQ_NO_BOS if no_bos else 0) | (REQ_SPECIAL if special else 0)
        return self._submit(data, KIND_CHAT, flags, max_tokens, temperature, seed, request_id,
                            busy_wait)

    @property
    def measures(self):
        """True when the appliance serves measurements (submit_measure)."""
        return bool(self.features & FEAT_MEASURE)

    def submit_measure(self, first_pos, passes, request_id=0, busy_wait=0.0):
        """Ask for `passes` reference-loop passes at positions first_pos.. (kind MEASURE,
        docs/ring.md 6.3), run between requests. Once done, Progress.tokens holds each
        pass's nanoseconds (n_prompt 0). Refused here when the appliance does not offer
        it or the positions pass the context."""
        self._own()
        self._alive(True)
        if not self.measures:
            raise NibError("appliance %s does not serve measurements (features 0x%x)" %
                           (self.name, self.features))
        if not 0 <= first_pos < self.ctx_len or passes < 1 or first_pos + passes > self.ctx_len:
            raise NibError("positions %d..%d pass the context (%d positions)" %
                           (first_pos, first_pos + passes - 1, self.ctx_len))
        return self._submit(struct.pack("<I", first_pos), KIND_MEASURE, 0, passes, 0.0, 0,
                            request_id, busy_wait)

    def _submit(self, data, kind, flags, max_tokens, temperature, seed, request_id, busy_wait):
        if self.is_vision and kind != KIND_TENSOR:
            raise NibError("appliance %s serves a vision model (tensors in, tensors out): "
                           "send tensors (run, submit_tensors)" % self.name)
        if kind != KIND_TENSOR and not 1 <= max_tokens <= self.slot_tokens:
            raise NibError("max_tokens must be 1..%d" % self.slot_tokens)
        if not 0.0 <= temperature <= TEMPERATURE_MAX:
            raise NibError("temperature must be a number in 0..%g" % TEMPERATURE_MAX)
        deadline = time.monotonic() + (DEFAULT_TIMEOUT if busy_wait is None else busy_wait)
        nap = 0.00005
        while True:
            i = self._claim()
            if i is not None:
                break
            if time.monotonic() >= deadline:
                raise Busy("all %d slots of this host's ring are busy" % self.n_slots)
            self._alive(False)
            time.sleep(nap)
            nap = min(nap * 2, 0.002)
        base = self._so(i)
        self._put32(base + S_CANCEL, 0)
        self._put64(base + S_REQUEST_ID, request_id)
        self.mm[base + S_REQ:base + S_REQ + 64] = struct.pack(
            "<IIfIQI36x", len(data), max_tokens, temperature, flags, seed, kind)
        p = base + self.prompt_offset
        self.mm[p:p + len(data)] = data
        for off in (S_N_TOKENS, S_N_PROMPT, S_TEXT_LEN, S_STATUS):
            self._put32(base + off, 0)
        for off in (S_T_START, S_T_FIRST, S_T_DONE, S_SERVED):
            self._put64(base + off, 0)
        self.mm[base + S_ERROR] = 0
        with self._lock:
            ticket = self._r64(R_NEXT_TICKET) + 1
            self._put64(R_NEXT_TICKET, ticket)
        self._put64(base + S_TICKET, ticket)
        self._put32(base + S_STATE, SLOT_SUBMITTED)  # the release store
        if self._h32(H_SLEEPING):
            try:
                self.sock.send(_msg(CTL_KICK), socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT)
            except OSError:
                pass  # a full buffer already holds kicks; a hang-up shows at the next check
        return Handle(i, ticket)

    def poll(self, h):
        """Snapshot of a request; raises Gone while it is unfinished and the appliance is gone."""
        self._own()
        base = self._slot(h)
        done = self._r32(base + S_STATE) == SLOT_DONE
        n = min(self._r32(base + S_N_TOKENS), self.slot_tokens)
        tl = min(self._r32(base + S_TEXT_LEN), self.slot_text)
        np_ = min(self._r32(base + S_N_PROMPT), n)
        tok = base + self.tokens_offset
        txt = base + self.text_offset
        tokens = list(struct.unpack_from("<%dI" % n, self.mm, tok))
        err = bytes(self.mm[base + S_ERROR:base + S_ERROR + ERRMSG_MAX]).split(b"\0", 1)[0]
        p = Progress(done=done, status=self._r32(base + S_STATUS) if done else 0, n_prompt=np_,
                     tokens=tokens, text=bytes(self.mm[txt:txt + tl]),
                     error=err.decode("utf-8", "replace"),
                     request_id=self._r64(base + S_REQUEST_ID),
                     t_start_ns=self._r64(base + S_T_START), t_first_ns=self._r64(base + S_T_FIRST),
                     t_done_ns=self._r64(base + S_T_DONE))
        if not done:
            self._alive(False)
        return p

    def _sleep_on_done(self, base, seconds):
        """FUTEX_WAIT on the ring's done_seq (shared, not private) for at most seconds."""
        if ctypes is None or _SYS_FUTEX is None:
            time.sleep(min(seconds, 0.002))
            return
        with self._lock:
            self._put32(R_DONE_WAITERS, self._r32(R_DONE_WAITERS) + 1)
        try:
            seq = self._r32(R_DONE_SEQ)
            if self._r32(base + S_STATE) != SLOT_DONE:
                word = ctypes.c_uint32.from_buffer(self.mm, R_DONE_SEQ)
                ts = (ctypes.c_long * 2)(int(seconds), int((seconds % 1) * 1e9))
                _libc.syscall(ctypes.c_long(_SYS_FUTEX), ctypes.c_void_p(ctypes.addressof(word)),
                              ctypes.c_int(0), ctypes.c_uint32(seq), ts, None, ctypes.c_int(0))
                del word
        finally:
            with self._lock:
                self._put32(R_DONE_WAITERS, max(self._r32(R_DONE_WAITERS) - 1, 0))

    def wait(self, h, seen_tokens=None, timeout=None):
        """Until more than seen_tokens ids are out (None: until done), at most timeout seconds
        (None: DEFAULT_TIMEOUT). Raises Timeout (the request goes on) or Gone."""
        limit = DEFAULT_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + limit
        nap = 0.00005
        spins = 0
        while True:
            p = self.poll(h)
            if p.done or (seen_tokens is not None and len(p.tokens) > seen_tokens):
                return p
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("request %d not %s after %.3f s" %
                              (h.ticket, "finished" if seen_tokens is None else "further", limit))
            spins += 1
            if spins < 20:
                continue
            slice_ = min(left, CHECK_NS / 1e9)
            if seen_tokens is None:
                self._sleep_on_done(self._so(h.slot), slice_)
            else:
                time.sleep(min(nap, slice_))
                nap = min(nap * 2, 0.002)

    def cancel(self, h):
        self._own()
        self._put32(self._slot(h) + S_CANCEL, 1)

    def release(self, h):
        self._own()
        base = self._slot(h)
        if self._r32(base + S_STATE) != SLOT_DONE and not self.gone:
            raise NibError("request is not finished (cancel it and wait first)")
        self._put32(base + S_STATE, SLOT_FREE)

    def ask(self, prompt, timeout=None, **kw):
        """submit, wait until done, release: the final Progress."""
        kw.setdefault("busy_wait", timeout)
        h = self.submit(prompt, **kw)
        p = self.wait(h, timeout=timeout)
        self.release(h)
        return p

    def chat(self, messages, timeout=None, **kw):
        """submit_chat, wait until done, release: the final Progress."""
        kw.setdefault("busy_wait", timeout)
        h = self.submit_chat(messages, **kw)
        p = self.wait(h, timeout=timeout)
        self.release(h)
        return p

    def stats(self):
        self._own()
        vals = struct.unpack_from("<8Q", self.hm, STATS_OFFSET)
        st = dict(zip(STATS_COUNTERS, vals))
        st.update(zip(STATS_HOSTS, struct.unpack_from("<5Q", self.hm, STATS_HOSTS_OFFSET)))
        st["hosts_attached"], st["socket_lost"] = struct.unpack_from("<II", self.hm,
                                                                     STATS_HOSTS_OFFSET + 40)
        st["epoch"] = self.epoch
        return st

    def stop(self, timeout=None):
        """Ask the appliance to shut down over this host's connection; waits for it to exit."""
        self._own()
        deadline = time.monotonic() + (timeout or DEFAULT_TIMEOUT)
        _stop_on(self.sock, self.name, deadline)
        self.gone = "appliance %s was stopped" % self.name


def ask_json(prompt_bytes, p, messages=None):
    """`nib ask --json` byte for byte (minus the timings); a conversation is written as
    "messages" in place of "prompt"."""
    ids = lambda v: ("[" + ", ".join(str(t) for t in v) + "]").encode()
    if messages is None:
        s = b'{"prompt": ' + json_string(prompt_bytes)
    else:
        s = b'{"messages": [' + b", ".join(
            b'{"role": ' + json_string(r) + b', "content": ' + json_string(c) + b"}"
            for r, c in (_message(m, i) for i, m in enumerate(messages))) + b"]"
    s += b', "prompt_token_ids": ' + ids(p.prompt_ids)
    s += b', "generated_token_ids": ' + ids(p.generated_ids) + b', "text": ' + json_string(p.text)
    s += b', "status": "' + p.status_name.encode() + b'"'
    if p.status_name == "bad_request":
        s += b', "error": ' + json_string(p.error.encode())
    return s + b"}\n"


def _positive(v):
    x = float(v)
    if not 0 < x <= 86400:
        raise argparse.ArgumentTypeError("--timeout wants seconds in (0, 86400]")
    return x


def read_npy(raw):
    """(dtype name, dims, data bytes) of a .npy file (float32 or uint8, C order)."""
    if raw[:6] != b"\x93NUMPY" or len(raw) < 10 or raw[6] not in (1, 2, 3):
        raise NibError("not a .npy file (version 1, 2 or 3)")
    n, off = (struct.unpack_from("<H", raw, 8)[0], 10) if raw[6] == 1 else \
        (struct.unpack_from("<I", raw, 8)[0] if len(raw) >= 12 else 1 << 62, 12)
    head = raw[off:off + n].decode("latin-1")
    if off + n > len(raw):
        raise NibError(".npy header passes the file's end")
    try:
        d = ast.literal_eval(head.strip())
        descr, order, dims = d["descr"], d["fortran_order"], tuple(int(x) for x in d["shape"])
    except (ValueError, SyntaxError, KeyError, TypeError):
        raise NibError(".npy header is not a dict of descr, fortran_order and shape") from None
    kind = {"<f4": ("f32", 4), "|u1": ("u8", 1), "u1": ("u8", 1)}.get(descr)
    if kind is None or order is not False:
        raise NibError(".npy array is not float32 or uint8 in C order")
    count = 1
    for x in dims:
        count *= x
    data = raw[off + n:]
    if len(data) != count * kind[1]:
        raise NibError(".npy data is %d bytes, its shape and type take %d" %
                       (len(data), count * kind[1]))
    return kind[0], list(dims), data


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
IMAGE_MAX_SIDE = 1 << 20  # pixels a side, as nib run's reader bounds PPM/PGM
PNG_GAMMA_SRGB = 45455     # gAMA of an sRGB file: libpng converts any other


def _pnm_header(raw):
    """(channels, width, height, offset of the pixels) of a binary P5/P6 file."""
    if raw[1:2] not in (b"5", b"6"):
        raise NibError("PNM type P%s is not supported: only binary P6 (RGB) and P5 (gray)" %
                       (chr(raw[1]) if len(raw) > 1 and 0x20 <= raw[1] < 0x7f else "?"))
    pos, vals = 2, []
    for what in ("width", "height", "maxval"):
        while pos < len(raw) and (raw[pos] in b" \t\n\r\v\f" or raw[pos] == 0x23):
            if raw[pos] == 0x23:  # '#' comment to the end of its line
                while pos < len(raw) and raw[pos] not in b"\n\r":
                    pos += 1
            else:
                pos += 1
        start = pos
        while pos < len(raw) and 0x30 <= raw[pos] <= 0x39 and pos - start < 8:
            pos += 1
        if pos == start:
            raise NibError("PPM/PGM header: %s is missing or not a number" % what)
        if pos < len(raw) and 0x30 <= raw[pos] <= 0x39 or int(raw[start:pos]) > IMAGE_MAX_SIDE:
            raise NibError("PPM/PGM header: %s is too large" % what)
        vals.append(int(raw[start:pos]))
    w, h, maxval = vals
    if w == 0 or h == 0:
        raise NibError("PPM/PGM: the image is empty (%dx%d)" % (w, h))
    if maxval != 255:
        raise NibError("PPM/PGM: maxval %d; only 8-bit images (maxval 255)" % maxval)
    if pos >= len(raw) or raw[pos] not in b" \t\n\r\v\f":
        raise NibError("PPM/PGM header: no whitespace after maxval")
    return (3 if raw[1:2] == b"6" else 1), w, h, pos + 1


def read_pnm(raw):
    """(channels, width, height, interleaved 8-bit pixels) of a P5/P6 file."""
    ch, w, h, pos = _pnm_header(raw)
    need, have = w * h * ch, len(raw) - pos
    if have < need:
        raise NibError("PPM/PGM truncated: %d of the %d pixel bytes" % (have, need))
    if have > need:
        raise NibError("PPM/PGM: %d bytes after the image (one image per file)" % (have - need))
    return ch, w, h, raw[pos:]


def _png_chunks(raw):
    """(type, data) of every chunk, CRCs checked, up to IEND."""
    pos = len(PNG_SIGNATURE)
    while True:
        if pos + 12 > len(raw):
            raise NibError("PNG truncated: a chunk passes the file's end")
        n, = struct.unpack_from(">I", raw, pos)
        typ = raw[pos + 4:pos + 8]
        if n > 0x7fffffff or pos + 12 + n > len(raw):
            raise NibError("PNG truncated: a chunk passes the file's end")
        data = raw[pos + 8:pos + 8 + n]
        if zlib.crc32(typ + data) != struct.unpack_from(">I", raw, pos + 8 + n)[0]:
            raise NibError("PNG chunk %r: CRC mismatch (a corrupted file)" % typ)
        pos += 12 + n
        yield typ, data
        if typ == b"IEND":
            return


def _png_unfilter(data, h, stride, bpp):
    """Rows without their filter bytes (PNG filter types 0 to 4)."""
    out, prev = bytearray(h * stride), bytearray(stride)
    for y in range(h):
        ft, row = data[y * (stride + 1)], bytearray(data[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if ft == 1:
            for i in range(bpp, stride):
                row[i] = (row[i] + row[i - bpp]) & 255
        elif ft == 2:
            for i in range(stride):
                row[i] = (row[i] + prev[i]) & 255
        elif ft == 3:
            for i in range(stride):
                row[i] = (row[i] + ((row[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif ft == 4:
            for i in range(stride):
                a = row[i - bpp] if i >= bpp else 0
                c = prev[i - bpp] if i >= bpp else 0
                b = prev[i]
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif ft != 0:
            raise NibError("PNG row %d: filter type %d (0 to 4)" % (y, ft))
        out[y * stride:(y + 1) * stride] = row
        prev = row
    return out


def read_png(raw, want_w=None, want_h=None):
    """(channels 1 or 3, width, height, interleaved 8-bit pixels) of a PNG.

    What nib run reads through libpng, for the files this reader takes:
    8-bit (and 1/2/4-bit gray or palette) non-interlaced images that are
    opaque and sRGB. Transparency, other gammas, 16 bits and interlacing
    are refused, saying so (nib run reads those). The size is checked
    against want_w x want_h before any pixel is inflated."""
    if raw[:8] != PNG_SIGNATURE:
        raise NibError("not a PNG file")
    chunks = _png_chunks(raw)
    typ, ihdr = next(chunks)
    if typ != b"IHDR" or len(ihdr) != 13:
        raise NibError("PNG: the first chunk is not a 13-byte IHDR")
    w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", ihdr)
    ok_depths = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
    if ctype not in ok_depths or depth not in ok_depths[ctype] or comp or filt or inter > 1:
        raise NibError("PNG: IHDR is invalid (colour type %d, bit depth %d)" % (ctype, depth))
    if not 0 < w <= IMAGE_MAX_SIDE or not 0 < h <= IMAGE_MAX_SIDE:
        raise NibError("PNG: the image is %dx%d pixels" % (w, h))
    if depth == 16:
        raise NibError("a 16-bit PNG: only 8-bit images are read")
    if inter:
        raise NibError("an interlaced PNG: nibhost.py reads non-interlaced files (nib run "
                       "reads both)")
    ch = 1 if ctype in (0, 4) else 3
    if want_w is not None and (w != want_w or h != want_h):
        raise NibError("the image is %dx%d pixels; the model wants exactly %dx%d (width x "
                       "height): resize or pad it first" % (w, h, want_w, want_h))
    samples = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[ctype]
    stride = (w * samples * depth + 7) // 8
    bpp = max(1, samples * depth // 8)
    palette, idat = None, []
    for typ, data in chunks:
        if typ == b"PLTE":
            if len(data) % 3 or not data:
                raise NibError("PNG: a PLTE of %d bytes" % len(data))
            palette = data
        elif typ == b"IDAT":
            idat.append(data)
        elif typ == b"tRNS":
            raise NibError("a PNG with transparency (tRNS): nibhost.py reads opaque files (nib "
                           "run composites onto white)")
        elif typ == b"gAMA" and (len(data) != 4 or struct.unpack(">I", data)[0] != PNG_GAMMA_SRGB):
            raise NibError("a PNG whose gamma is not sRGB's: nibhost.py does not convert it "
                           "(nib run does)")
        elif typ == b"iCCP":
            raise NibError("a PNG with an ICC profile: nibhost.py does not convert it (nib run "
                           "does)")
    if ctype == 3 and palette is None:
        raise NibError("PNG: a palette image without PLTE")
    need = h * (stride + 1)
    d = zlib.decompressobj()
    try:
        data = d.decompress(b"".join(idat), need + 1)
    except zlib.error as e:
        raise NibError("PNG: the image data does not inflate (%s)" % e) from None
    if len(data) != need or not d.eof:
        raise NibError("PNG: the image data inflates to %s bytes, %dx%d takes %d" %
                       ("more" if len(data) > need else "too few", w, h, need))
    px = _png_unfilter(data, h, stride, bpp)
    if depth < 8:  # unpack 1/2/4-bit samples, most significant first
        per, mask = 8 // depth, (1 << depth) - 1
        vals = bytearray(w * h)
        for y in range(h):
            row = px[y * stride:(y + 1) * stride]
            for x in range(w):
                v = (row[x // per] >> (8 - depth * (x % per + 1))) & mask
                vals[y * w + x] = v if ctype == 3 else v * 255 // mask
        px = vals
    if ctype == 3:
        n = len(palette) // 3
        out = bytearray(w * h * 3)
        for i, v in enumerate(px[:w * h]):
            if v >= n:
                raise NibError("PNG: palette index %d of a %d-entry palette" % (v, n))
            out[3 * i:3 * i + 3] = palette[3 * v:3 * v + 3]
        return 3, w, h, bytes(out)
    if ctype in (4, 6):
        if any(a != 255 for a in px[samples - 1::samples]):
            raise NibError("a PNG with transparent pixels: nibhost.py reads opaque files (nib "
                           "run composites onto white)")
        keep = bytearray()
        for i in range(0, len(px), samples):
            keep += px[i:i + samples - 1]
        px = keep
    return ch, w, h, bytes(px)


def image_input(raw, t, bgr=False):
    """A PPM/PGM or PNG file as the bytes of image input t ([1, C, H, W], C 1 or 3): planar,
    u8 as is or f32 value / 255 (the blob's normalisation does the rest), a gray picture in
    every plane, the planes in B, G, R order with bgr. What nib run --input [--bgr] sends."""
    dims = t["dims"]
    if len(dims) != 4 or dims[0] != 1 or dims[1] not in (1, 3):
        raise NibError("the model's input is not an image (it wants 1x3xHxW or 1x1xHxW); give "
                       "a .npy or raw file of its exact dims instead")
    c, h, w = dims[1], dims[2], dims[3]
    if raw[:8] == PNG_SIGNATURE:
        ich, iw, ih, px = read_png(raw, w, h)
    else:
        ich, iw, ih, px = read_pnm(raw)
        if (iw, ih) != (w, h):
            raise NibError("the image is %dx%d pixels; the model wants exactly %dx%d (width x "
                           "height): resize or pad it first" % (iw, ih, w, h))
    if ich == 3 and c == 1:
        raise NibError("a colour image for a gray (1-channel) input: give a gray image")
    planes = []
    for k in range(c):
        src = 0 if ich == 1 else (2 - k if bgr else k)
        plane = px[src::ich]
        if t["dtype"] == "u8":
            planes.append(bytes(plane))
        else:  # the float nearest v / 255, as nib run's single-precision division gives
            planes.append(struct.pack("<%df" % len(plane), *[_F32_BY_BYTE[v] for v in plane]))
    return b"".join(planes)


_F32_BY_BYTE = [struct.unpack("<f", struct.pack("<f", v / 255.0))[0] for v in range(256)]


def _run_cli(h, args, out):
    """nibhost.py run: what nib run prints (a summary per output, or --json)."""
    if not h.is_vision:
        raise NibError("appliance %s serves a decoder (tokens in, tokens out): use ask" %
                       args.name)
    if len(args.input) != len(h.inputs):
        raise NibError("%d --input files, the model takes %d inputs" %
                       (len(args.input), len(h.inputs)))
    data = []
    for i, (path, t) in enumerate(zip(args.input, h.inputs)):
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:8] == PNG_SIGNATURE or (len(raw) >= 2 and raw[0] == 0x50 and 0x31 <= raw[1] <= 0x37):
            try:
                raw = image_input(raw, t, args.bgr)
            except NibError as e:
                raise NibError("--input %s: %s" % (path, e)) from None
        elif raw[:6] == b"\x93NUMPY":
            dt, dims, raw = read_npy(raw)
            if dt != t["dtype"] or dims != t["dims"]:
                raise NibError("--input %s: a %s array of dims %s, input %d (%s) takes %s %s" %
                               (path, dt, "x".join(map(str, dims)), i, t["name"], t["dtype"],
                                "x".join(map(str, t["dims"]))))
        elif len(raw) != t["bytes"]:
            raise NibError("--input %s: %d raw bytes, input %d (%s) takes exactly %d" %
                           (path, len(raw), i, t["name"], t["bytes"]))
        data.append(raw)
    outs = h.run(data, timeout=args.timeout)
    res = []
    for t, b in zip(h.outputs, outs):
        vals = list(struct.unpack("<%df" % (len(b) // 4), b)) if t["dtype"] == "f32" else list(b)
        res.append((t, vals))
    if args.json:
        doc = {"status": "ok", "outputs": [
            {"name": t["name"], "dtype": t["dtype"], "dims": t["dims"],
             "data": [v if t["dtype"] == "u8" or math.isfinite(v) else None for v in vals]}
            for t, vals in res]}
        out.write((json.dumps(doc) + "\n").encode())
        return 0
    for t, vals in res:
        ok = [v for v in vals if v == v]
        line = "%s %s %s" % (t["name"], t["dtype"], "x".join(map(str, t["dims"])))
        if ok:
            line += ": min %.6g max %.6g mean %.6g" % (min(ok), max(ok), sum(ok) / len(ok))
        if len(ok) < len(vals):
            line += " (%d NaN)" % (len(vals) - len(ok))
        out.write((line + "\n").encode())
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="nibhost.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    tmo = "give up after this many seconds (default %d); every wait is bounded by it" % \
        DEFAULT_TIMEOUT
    a = sub.add_parser("ask", help="submit a prompt and print the answer")
    a.add_argument("--name", default="nib")
    a.add_argument("--max-tokens", type=int, default=64)
    a.add_argument("--temperature", type=float, default=0.0)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--no-bos", action="store_true")
    a.add_argument("--ids", help="comma-separated prompt token ids instead of text")
    a.add_argument("--special", action="store_true",
                   help="control tokens written as text (<|im_end|>) map to their ids")
    a.add_argument("--chat", action="store_true",
                   help="PROMPT is a user message, rendered by the model's chat template")
    a.add_argument("--system", help="with --chat: a system message first")
    a.add_argument("--messages", metavar="FILE",
                   help="a conversation, OpenAI-style JSON [{\"role\": .., \"content\": ..}]; "
                        "a PROMPT after it is one more user message")
    a.add_argument("--now", type=int, default=0,
                   help="chat: the time strftime_now() shows (UTC seconds; default: the "
                        "appliance's clock)")
    a.add_argument("--json", action="store_true")
    a.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT, help=tmo)
    a.add_argument("prompt", nargs="?", default=None)
    r = sub.add_parser("run", help="a vision appliance: run its model on input tensors")
    r.add_argument("--name", default="nib")
    r.add_argument("--input", action="append", default=[], metavar="FILE",
                   help="one per model input, in order: a PNG or PPM/PGM picture of the "
                        "input's exact size (an image input), .npy (float32 or uint8, C order, "
                        "the input's dims) or raw bytes (exactly the input's bytes)")
    r.add_argument("--bgr", action="store_true",
                   help="pictures' planes in B, G, R order (PaddleOCR's models)")
    r.add_argument("--json", action="store_true", help="every output value, as nib run --json")
    r.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT, help=tmo)
    s = sub.add_parser("stats", help="print the appliance's counters")
    s.add_argument("--name", default="nib")
    s.add_argument("--json", action="store_true")
    s.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT, help=tmo)
    t = sub.add_parser("stop", help="stop the appliance (over its socket)")
    t.add_argument("--name", default="nib")
    t.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT, help=tmo)
    args = ap.parse_args(argv)
    out = sys.stdout.buffer
    try:
        if args.cmd == "stop":
            stop(args.name, args.timeout)
            return 0
        with Host(args.name, timeout=args.timeout) as h:
            if args.cmd == "stats":
                st = h.stats()
                if args.json:
                    out.write((json.dumps(st) + "\n").encode())
                else:
                    for k, v in st.items():
                        out.write(("%s: %d\n" % (k, v)).encode())
                return 0
            if args.cmd == "run":
                return _run_cli(h, args, out)
            prompt = (args.prompt or "").encode("utf-8", "surrogateescape")
            messages = None
            if args.messages is not None:
                with open(args.messages, "rb") as f:
                    messages = json.loads(f.read().decode("utf-8"))
                if not isinstance(messages, list) or \
                        any(not isinstance(m, dict) for m in messages):
                    raise NibError("%s: want a JSON array of {\"role\", \"content\"} objects" %
                                   args.messages)
            elif args.chat:
                messages = []
            elif args.system:
                raise NibError("--system goes with --chat or --messages")
            if messages is not None:  # as nib ask: --system first, PROMPT last
                if args.system:
                    messages.insert(0, {"role": "system", "content": args.system})
                if args.prompt is not None:
                    messages.append({"role": "user", "content": args.prompt})
            if args.ids is not None:
                prompt_arg = [int(x) for x in args.ids.split(",") if x.strip()]
            else:
                prompt_arg = prompt
            deadline = time.monotonic() + args.timeout
            common = dict(max_tokens=args.max_tokens, temperature=args.temperature,
                          seed=args.seed, no_bos=args.no_bos, busy_wait=args.timeout,
                          special=args.special)
            if messages is not None:
                hd = h.submit_chat(messages, now=args.now, **common)
            else:
                hd = h.submit(prompt_arg, **common)
            shown = seen = 0
            while True:
                try:
                    p = h.wait(hd, seen_tokens=None if args.json else seen,
                               timeout=max(min(deadline - time.monotonic(), 0.1), 0.001))
                except Timeout:
                    p = h.poll(hd)
                if not args.json and len(p.text) > shown:
                    # Never half a character: hold back an incomplete tail.
                    k = len(p.text) - shown if p.done else ready(p.text[shown:])
                    if shown == 0 and k and messages is None:
                        out.write(sanitize(prompt))
                    out.write(sanitize(p.text[shown:shown + k]))
                    out.flush()
                    shown += k
                seen = len(p.tokens)
                if p.done:
                    break
                if time.monotonic() >= deadline:
                    # Closing the connection ends the request too; cancel says it first.
                    h.cancel(hd)
                    raise Timeout("no answer within %.1f s (--timeout): the request was "
                                  "cancelled" % args.timeout)
            h.release(hd)
            if args.json:
                out.write(ask_json(prompt, p, messages))
            else:
                if shown == 0 and messages is None:
                    out.write(sanitize(prompt))
                out.write(b"\n")
                if p.status_name == "bad_request":
                    sys.stderr.write("nibhost.py ask: request rejected: %s\n" % p.error)
            return 1 if p.status_name in ("bad_request", "shutdown", "host_changed") else 0
    except (NibError, ValueError, OSError) as e:
        sys.stderr.write("nibhost.py %s: %s\n" % (args.cmd, e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
