#!/usr/bin/env python3
"""tools/host/nibhost.py against a hand-made appliance on a thread of this
process (standard library only: memfds with seals, a SEQPACKET socket,
SCM_RIGHTS), like tests/proto/test_hostlib.c does for libnibhost: everything
handed over is checked (each tampered hand-over refused with a message naming
it), the liveness rules hold (a stale heartbeat, a hung-up socket and a
stopping appliance end waits with Gone, long before their bounds), a forked
child attaches afresh, back-pressure and wait timeouts, stop() over the
socket, attach() to an appliance still booting, and chat requests (the
encoding decoded back field by field, the special flag, conversations
larger than the prompt area refused before they are sent).

    test_nibhost_py.py NIBHOST_PY
"""
import fcntl
import importlib.util
import mmap
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

nh = None
F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
SEAL_ALL_HEADER = 1 | 2 | 4 | 16
SEAL_RING = 1 | 2 | 4
RINGS = 3
NAME = "py"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def geometry(ctx, piece):
    """nib_ring_geometry of proto/shm_layout.h."""
    prompt = min(max(ctx * 16, 65536), 1 << 20)
    text = min(max(ctx * max(piece, 1), 32768), 4 << 20)
    g = {"ring_header_size": 128, "n_slots": 4, "slots_offset": 128, "prompt_offset": 320,
         "prompt_max": (prompt + 63) & ~63, "slot_tokens": ctx}
    g["tokens_offset"] = g["prompt_offset"] + g["prompt_max"]
    g["text_offset"] = (g["tokens_offset"] + 4 * ctx + 63) & ~63
    g["slot_text"] = (text + 63) & ~63
    g["slot_size"] = (g["text_offset"] + g["slot_text"] + 63) & ~63
    g["ring_size"] = (g["slots_offset"] + 4 * g["slot_size"] + 4095) & ~4095
    return g


G = geometry(256, 8)


def memfd(name, size, seals):
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    return fd, m


class Fake:
    """The appliance's side, by hand."""

    def __init__(self):
        self.hfd, self.h = memfd("nibble-header", 4096, 0)
        self.write_header()
        fcntl.fcntl(self.hfd, F_ADD_SEALS, SEAL_ALL_HEADER)
        self.rings = [memfd("nibble-ring", G["ring_size"], 0) for _ in range(RINGS)]
        for fd, _ in self.rings:
            fcntl.fcntl(fd, F_ADD_SEALS, SEAL_RING)
        self.bad_hfd, bad = memfd("unsealed", 4096, 0)
        bad[:] = self.h[:]
        bad.close()
        self.ring_of = {}          # conn -> ring
        self.conns = []
        self.tamper = None
        self.beat = True
        self.serve = True
        self.hang_up = False
        self.deny_stop = False
        self.attaches = self.kicks = self.stops = self.served = 0
        self.last = None           # (kind, flags, prompt bytes) of the last request served
        self.stop_flag = False
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lsock.bind(os.path.join(os.environ["NIB_RUNTIME_DIR"], NAME + ".sock"))
        self.lsock.listen(16)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def write_header(self):
        h = self.h
        struct.pack_into("<QIIQQQII", h, 0, nh.MAGIC, 4, 256, 4096, 4242, 256, nh.STATS_SIZE,
                         os.getpid())
        struct.pack_into("<II", h, 48, RINGS, 512)
        struct.pack_into("<IIIII", h, 64, 256, 1, 2, 1, 128)
        struct.pack_into("<QIIQQIIIIII", h, 128, G["ring_size"], 128, 4, 128, G["slot_size"],
                         G["prompt_offset"], G["prompt_max"], G["tokens_offset"],
                         G["slot_tokens"], G["text_offset"], G["slot_text"])
        struct.pack_into("<IIQ", h, 192, 1, 0, time.monotonic_ns())

    def close(self):
        self.stop_flag = True
        self.thread.join()
        for c in self.conns:
            c.close()
        self.lsock.close()
        for fd, m in self.rings:
            m.close()
            os.close(fd)
        self.h.close()
        os.close(self.hfd)
        os.close(self.bad_hfd)

    def msg(self, mtype, status=0, index=0, epoch=0, hsize=0, rsize=0):
        return struct.pack(nh.CTL_FMT, nh.CTL_MAGIC, 3, mtype, status, index, epoch, hsize,
                           rsize, bytes(24))

    def drop(self, c):
        self.conns.remove(c)
        self.ring_of.pop(c, None)
        c.close()

    def attach(self, c):
        t = self.tamper
        if t == "no-answer":
            return
        if t == "hang-up":
            return self.drop(c)
        free = [i for i in range(RINGS) if i not in self.ring_of.values()]
        if not free or t in ("no-ring", "not-ready"):
            c.send(self.msg(nh.CTL_REFUSED, 4 if t == "not-ready" else 1))
            return
        i = free[0]
        fd, ring = self.rings[i]
        ring[:] = bytes(len(ring))
        struct.pack_into("<QQII", ring, 0, 0 if t == "ring-magic" else nh.RING_MAGIC,
                         7 if t == "ring-epoch" else 4242, i, self.attaches + 1)
        self.ring_of[c] = i
        hsize, rsize, epoch = 4096, G["ring_size"], 4242
        fds = [self.hfd, fd]
        if t == "header-unsealed":
            fds[0] = self.bad_hfd
        elif t == "ring-size":
            rsize += 4096
        elif t == "one-fd":
            fds = fds[:1]
        elif t == "three-fds":
            fds = fds + [self.hfd]
        elif t == "reply-epoch":
            epoch += 1
        m = self.msg(nh.CTL_ATTACHED, 0, i, epoch, hsize, rsize)
        if t == "reply-magic":
            m = b"\0" + m[1:]
        self.attaches += 1
        socket.send_fds(c, [m], fds)

    def message(self, c):
        try:
            data = c.recv(65)
        except OSError:
            data = b""
        if len(data) != 64:
            return self.drop(c)
        mtype = struct.unpack(nh.CTL_FMT, data)[2]
        if mtype == nh.CTL_ATTACH:
            self.attach(c)
        elif mtype == nh.CTL_KICK:
            self.kicks += 1
        elif mtype == nh.CTL_DETACH:
            pass
        elif mtype == nh.CTL_STOP:
            deny = self.deny_stop
            c.send(self.msg(nh.CTL_REFUSED if deny else nh.CTL_STOPPING, 2 if deny else 0))
            if not deny:
                self.stops += 1
                struct.pack_into("<I", self.h, 192, 2)
                self.hang_up = True

    def serve_ring(self, ring):
        for k in range(4):
            so = G["slots_offset"] + k * G["slot_size"]
            if struct.unpack_from("<I", ring, so)[0] != 2:
                continue
            struct.pack_into("<I", ring, so, 3)
            ticket = struct.unpack_from("<Q", ring, so + 8)[0]
            plen, max_tokens = struct.unpack_from("<II", ring, so + 64)
            flags, kind = struct.unpack_from("<I", ring, so + 76)[0], \
                struct.unpack_from("<I", ring, so + 88)[0]
            po = so + G["prompt_offset"]
            self.last = (kind, flags, bytes(ring[po:po + min(plen, G["prompt_max"])]))
            self.served += 1
            ids = [1] + list(ring[po:po + min(plen, 64)])
            text = b""
            for j in range(max_tokens):
                ids.append(100 + j)
                text += b"t%d " % (100 + j)
            to, xo = so + G["tokens_offset"], so + G["text_offset"]
            struct.pack_into("<%dI" % len(ids), ring, to, *ids)
            ring[xo:xo + len(text)] = text
            struct.pack_into("<IIII", ring, so + 128, len(ids), len(ids) - max_tokens, len(text),
                             1)
            struct.pack_into("<Q", ring, so + 168, ticket)
            struct.pack_into("<I", ring, so, 4)
            seq = struct.unpack_from("<I", ring, 24)[0]
            struct.pack_into("<I", ring, 24, (seq + 1) & 0xFFFFFFFF)

    def loop(self):
        while not self.stop_flag:
            if self.beat:
                struct.pack_into("<Q", self.h, 200, time.monotonic_ns())
            if self.hang_up:
                for c in list(self.conns):
                    self.drop(c)
                self.hang_up = False
            r, _, _ = select.select([self.lsock] + self.conns, [], [], 0.002)
            for s in r:
                if s is self.lsock:
                    c, _ = self.lsock.accept()
                    self.conns.append(c)
                elif s in self.conns:
                    self.message(s)
            if self.serve:
                for c, i in list(self.ring_of.items()):
                    self.serve_ring(self.rings[i][1])


def expect_error(cls, want, fn):
    try:
        fn()
    except cls as e:
        check(want in str(e), "%r should mention %r" % (str(e), want))
        return
    except Exception as e:  # noqa: BLE001 - reported
        check(False, "%s raised %s %r, want %s" % (want, type(e).__name__, e, cls.__name__))
        return
    check(False, "no %s for %r" % (cls.__name__, want))


def settle(fake):
    fake.tamper = None
    fake.hang_up = True
    for _ in range(500):
        if not fake.hang_up:
            return
        time.sleep(0.002)


def case_attach_and_ask(fake):
    with nh.Host(NAME, timeout=10) as h:
        check(h.epoch == 4242 and h.vocab_size == 512 and h.n_slots == 4, "header values")
        r = h.ask("hey", max_tokens=5, request_id=0xABC, timeout=10)
        check(r.status_name == "ok" and r.request_id == 0xABC, "status %s" % r.status_name)
        check(r.prompt_ids == [1, ord("h"), ord("e"), ord("y")], "prompt ids %s" % r.prompt_ids)
        check(r.generated_ids == [100, 101, 102, 103, 104], "ids %s" % r.generated_ids)
        check(r.text == b"t100 t101 t102 t103 t104 ", "text %r" % r.text)
        hd = h.submit("a", max_tokens=1)
        check(hd.ticket == 2, "second ticket %d" % hd.ticket)
        h.wait(hd, timeout=10)
        h.release(hd)
        expect_error(nh.NibError, "no longer holds", lambda: h.release(hd))
        expect_error(nh.NibError, "vocabulary", lambda: h.submit([100000]))
        expect_error(nh.NibError, "temperature", lambda: h.submit("x", temperature=-1))
        expect_error(nh.NibError, "the limit is", lambda: h.submit(b"x" * (h.prompt_max + 1)))
        st = h.stats()
        check(st["epoch"] == 4242 and "attaches" in st, "stats %s" % st)
        fake.h[196:200] = struct.pack("<I", 1)  # sleeping: the next submit kicks
        h.ask("a", max_tokens=1, timeout=10)
        fake.h[196:200] = struct.pack("<I", 0)
    for _ in range(500):
        if fake.kicks:
            break
        time.sleep(0.002)
    check(fake.kicks == 1, "kicks %d" % fake.kicks)


def case_handovers(fake):
    cases = [("header-unsealed", nh.NibError, "header memfd is not sealed"),
             ("ring-size", nh.NibError, "the ring memfd has"),
             ("one-fd", nh.NibError, "1 descriptors"),
             ("three-fds", nh.NibError, "descriptors"),
             ("reply-magic", nh.NibError, "malformed"),
             ("reply-epoch", nh.NibError, "the reply said 4243"),
             ("ring-magic", nh.NibError, "ring that is not nibble's"),
             ("ring-epoch", nh.NibError, "not this boot's"),
             ("no-ring", nh.Busy, "every host ring is attached"),
             ("not-ready", nh.NibError, "stopping"),
             ("no-answer", nh.Timeout, "did not answer ATTACH"),
             ("hang-up", nh.Gone, "closed the connection")]
    fds0 = len(os.listdir("/proc/self/fd"))
    for t, cls, want in cases:
        fake.tamper = t
        expect_error(cls, want, lambda: nh.Host(NAME, timeout=1))
        settle(fake)
    check(len(os.listdir("/proc/self/fd")) == fds0, "descriptors left open")
    # Header fields, one at a time (through the appliance's own mapping).
    good = bytes(fake.h[:256])
    fields = [(0, "<Q", 1, "bad magic"), (8, "<I", 3, "protocol version 3, this host speaks "
                                                   "version 4"),
              (8, "<I", 5, "version 5"), (12, "<I", 128, "header_size"),
              (16, "<Q", 8192, "header_memfd_size"), (40, "<I", 1 << 20, "stats_size"),
              (48, "<I", 0, "max_hosts"), (52, "<I", 0, "vocab_size"), (64, "<I", 0, "ctx_len"),
              (68, "<I", 512, "bos_id"), (76, "<I", 7, "add_bos"), (80, "<I", 4096, "errmsg_max"),
              (128, "<Q", 1 << 40, "ring_size differs"), (136, "<I", 64, "ring_header_size"),
              (140, "<I", 0, "n_slots"), (140, "<I", 5, "n_slots"), (144, "<Q", 8, "slots_offset"),
              (144, "<Q", 1 << 40, "slots beyond"), (152, "<Q", 64, "slot_size"),
              (160, "<I", 0, "prompt area"), (164, "<I", 1 << 30, "prompt area"),
              (168, "<I", 400, "token area"), (172, "<I", 0, "token area"),
              (176, "<I", 0xFFFFFFF0, "text area"), (180, "<I", 0, "text area"),
              (192, "<I", 3, "not ready (it is stopped)")]
    for off, fmt, value, want in fields:
        struct.pack_into(fmt, fake.h, off, value)
        expect_error(nh.NibError, want, lambda: nh.Host(NAME, timeout=2))
        fake.h[:256] = good
        settle(fake)
    with nh.Host(NAME, timeout=5):
        pass


def case_liveness(fake):
    fake.serve = False
    h = nh.Host(NAME, timeout=5)
    hd = h.submit("a", max_tokens=2)
    expect_error(nh.Timeout, "not finished", lambda: h.wait(hd, timeout=0.05))
    hs = [h.submit("a", max_tokens=2) for _ in range(3)]
    expect_error(nh.Busy, "busy", lambda: h.submit("x"))
    expect_error(nh.Busy, "busy", lambda: h.submit("x", busy_wait=0.03))
    fake.beat = False
    t0 = time.monotonic()
    expect_error(nh.Gone, "not responding", lambda: h.wait(hd, timeout=60))
    check(time.monotonic() - t0 < 30, "stale heartbeat took %.1f s" % (time.monotonic() - t0))
    expect_error(nh.Gone, "not responding", lambda: h.submit("x"))
    h.release(hs[0])  # a gone host may release what nobody serves
    h.close()
    fake.beat = True
    time.sleep(0.01)
    settle(fake)
    h = nh.Host(NAME, timeout=5)
    hd = h.submit("a", max_tokens=2)
    fake.hang_up = True
    expect_error(nh.Gone, "exited", lambda: h.wait(hd, timeout=60))
    h.close()
    settle(fake)
    h = nh.Host(NAME, timeout=5)
    hd = h.submit("a", max_tokens=2)
    struct.pack_into("<I", fake.h, 192, 2)
    expect_error(nh.Gone, "stopping", lambda: h.wait(hd, seen_tokens=0, timeout=60))
    struct.pack_into("<I", fake.h, 192, 1)
    h.close()
    settle(fake)
    fake.serve = True


def case_fork(fake):
    h = nh.Host(NAME, timeout=5)
    a0 = fake.attaches
    hd = h.submit("parent", max_tokens=3)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            try:
                h.poll(hd)
                code |= 1
            except nh.NibError:
                pass
            p = h.ask("kid", max_tokens=2, timeout=10)
            if p.prompt_ids != [1, ord("k"), ord("i"), ord("d")]:
                code |= 2
            os.write(w, b"%d\n" % h.host_index)
            h.close()
        except BaseException as e:  # say what, or a failure here is a bare status
            sys.stderr.write("forked child: %r\n" % (e,))
            sys.stderr.flush()
            code |= 4
        os._exit(code)
    os.close(w)
    child_ring = os.read(r, 64)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    check(status == 0, "forked child status %#x" % status)
    check(child_ring.strip() and int(child_ring) != h.host_index, "child ring %r" % child_ring)
    p = h.wait(hd, timeout=10)
    check(p.prompt_ids[1] == ord("p") and p.generated_ids == [100, 101, 102], "parent answer")
    check(fake.attaches - a0 == 1, "attaches %d" % (fake.attaches - a0))
    h.release(hd)
    h.close()


def case_stop(fake):
    hs = [nh.Host(NAME, timeout=5) for _ in range(RINGS)]
    expect_error(nh.Busy, "every host ring", lambda: nh.Host(NAME, timeout=1))
    fake.deny_stop = True
    expect_error(nh.NibError, "refused to stop", lambda: nh.stop(NAME, timeout=5))
    fake.deny_stop = False
    fake.h[0:8] = bytes(8)  # whatever the header holds
    nh.stop(NAME, timeout=5)
    check(fake.stops == 1, "stops %d" % fake.stops)
    expect_error(nh.Gone, "", lambda: hs[0].submit("x"))
    for h in hs:
        h.close()


def decode_chat(b):
    """proto/chat_msg.h, read independently of nibhost.encode_chat."""
    magic, n, flags, reserved, now = struct.unpack_from("<IIIIq", b, 0)
    at, msgs = 24, []
    for _ in range(n):
        rl, cl = struct.unpack_from("<II", b, at)
        at += 8
        msgs.append((b[at:at + rl], b[at + rl:at + rl + cl]))
        at += rl + cl
    return magic, flags, reserved, now, msgs, at == len(b)


def case_chat(fake):
    conv = [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi \u00e9\U0001F600 <|im_end|>"},
            {"role": "assistant", "content": ""},
            ("user", b"raw \xff bytes")]
    with nh.Host(NAME, timeout=5) as h:
        check(not h.has_chat, "features: no chat template")
        expect_error(nh.NibError, "chat template", lambda: h.chat(conv))
    struct.pack_into("<I", fake.h, 84, 1)  # features: CHAT
    settle(fake)
    with nh.Host(NAME, timeout=5) as h:
        check(h.has_chat, "features: chat")
        r = h.chat(conv, max_tokens=2, special=True, now=1234567, timeout=10)
        check(r.status_name == "ok", "chat status %s" % r.status_name)
        kind, flags, data = fake.last
        check(kind == 1 and flags == 4, "chat kind %d flags %d" % (kind, flags))
        magic, cflags, reserved, now, msgs, exact = decode_chat(data)
        check(magic == 0x4D42494E and cflags == 1 and reserved == 0 and now == 1234567 and exact,
              "chat header %x %d %d %d %s" % (magic, cflags, reserved, now, exact))
        want = [(b"system", b"Be brief."),
                (b"user", "Hi \u00e9\U0001F600 <|im_end|>".encode()),
                (b"assistant", b""), (b"user", b"raw \xff bytes")]
        check(msgs == want, "messages %r" % msgs)
        check(data == nh.encode_chat(conv, True, 1234567), "encode_chat")
        h.chat(conv[:1], max_tokens=1, add_generation_prompt=False, timeout=10)
        _, cflags, _, now, msgs, _ = decode_chat(fake.last[2])
        check(cflags == 0 and now == 0 and len(msgs) == 1, "no generation prompt, no time")
        h.ask("<|eot_id|>", max_tokens=1, special=True, no_bos=True, timeout=10)
        check(fake.last[:2] == (0, 5), "text special flags %r" % (fake.last[:2],))
        served = fake.served
        room = h.prompt_max - 24 - 12
        h.chat([{"role": "user", "content": "x" * room}], max_tokens=1, timeout=10)  # fits
        expect_error(nh.NibError, "not sent",
                     lambda: h.chat([{"role": "user", "content": "x" * (room + 1)}]))
        expect_error(nh.NibError, "the limit is",
                     lambda: h.chat([{"role": "u", "content": ""}] * (h.prompt_max // 9)))
        for bad in ("", "us er", "r\u00f4le", "a" * 65, None):
            expect_error(nh.NibError, "role", lambda: h.chat([{"role": bad, "content": "x"}]))
        expect_error(nh.NibError, "content", lambda: h.chat([{"role": "user", "content": [1]}]))
        expect_error(nh.NibError, "now", lambda: h.chat(conv, now=-1))
        time.sleep(0.02)
        check(fake.served == served + 1, "refused requests reached the ring")
    struct.pack_into("<I", fake.h, 84, 0)


def case_attach_while_booting():
    """nh.attach(): waits for an appliance that comes up later, names one that exits first,
    and gives up after its bound with the connection's own error."""
    expect_error(nh.NibError, "no appliance named py is running",
                 lambda: nh.attach(NAME, boot_timeout=0.2, timeout=1))
    died = subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.write('no blob'); "
                             "sys.exit(3)"], stderr=subprocess.PIPE, text=True)
    died.wait()
    expect_error(nh.NibError, "appliance py exited during boot (status 3): no blob",
                 lambda: nh.attach(NAME, died, boot_timeout=10))
    later = []
    t = threading.Timer(0.3, lambda: later.append(Fake()))
    t0 = time.monotonic()
    t.start()
    try:
        with nh.attach(NAME, boot_timeout=20, timeout=10) as h:
            check(h.epoch == 4242 and time.monotonic() - t0 >= 0.3,
                  "attached to the appliance that came up 0.3 s later (epoch %d)" % h.epoch)
    finally:
        t.join()
        for fake in later:
            fake.close()
        os.unlink(os.path.join(os.environ["NIB_RUNTIME_DIR"], NAME + ".sock"))


def main():
    global nh
    spec = importlib.util.spec_from_file_location("nibhost", sys.argv[1])
    nh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nh)
    d = tempfile.mkdtemp(prefix="nibpy-")
    os.chmod(d, 0o700)
    os.environ["NIB_RUNTIME_DIR"] = d
    try:
        expect_error(nh.NibError, "no appliance named py is running (no socket at",
                     lambda: nh.Host(NAME, timeout=1))
        case_attach_while_booting()
        print("ok: case_attach_while_booting", flush=True)
        for case in (case_attach_and_ask, case_handovers, case_liveness, case_fork, case_stop,
                     case_chat):
            fake = Fake()
            try:
                case(fake)
                print("ok:", case.__name__, flush=True)
            finally:
                fake.close()
                os.unlink(os.path.join(d, NAME + ".sock"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
