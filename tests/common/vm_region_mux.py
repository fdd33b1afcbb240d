"""The multiplexer's side of the VM region (docs/ring.md section 19) in
Python, for tests: line 0 over a sealed memfd, a heartbeat thread, the
mailbox, the layout check and one request through a ring of the region.
Used by tests/boot/vm_region_serve.py and vm_region_vision.py (the
appliance on this machine) and tests/image/image_boot.py (the appliance in
a QEMU guest, the memfd being its ivshmem device's memory); fake_image
is the image directory the stand-in guest of `nib vm run --qemu` needs."""
import argparse
import fcntl
import mmap
import os
import struct
import sys
import tempfile
import threading
import time


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def ok(msg):
    print("ok: " + msg)


PAGE = 4096
MAGIC = 0x31524D564C42494E
VERSION = 2  # NIB_VMR_VERSION
RING_MAGIC = 0x33474E524C42494E
READY, STOPPING, STOPPED = 1, 2, 3
ATTACH, DETACH, STOP = 1, 2, 3
NO_RING, MALFORMED = 1, 3


class Region:
    """The multiplexer's side: line 0, its heartbeat, the mailbox."""

    def __init__(self, size, max_rings=4, magic=MAGIC, region_size=None):
        self.size = size
        self.fd = os.memfd_create("nib-region", os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, size)
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self.m = mmap.mmap(self.fd, size)
        self.epoch = time.time_ns()
        struct.pack_into("<QIIQQI", self.m, 0, magic, VERSION, 1024,
                         size if region_size is None else region_size, self.epoch, max_rings)
        self.seq = 0
        self.beating = True
        self.quit = False
        self.t = threading.Thread(target=self._beat, daemon=True)
        self.t.start()

    def _beat(self):
        n = 0
        while not self.quit:
            if self.beating:
                n += 1
                struct.pack_into("<Q", self.m, 64, n)
            time.sleep(0.05)

    def u32(self, off):
        return struct.unpack_from("<I", self.m, off)[0]

    def u64(self, off):
        return struct.unpack_from("<Q", self.m, off)[0]

    def command(self, ctype, ring=0, uid=0, raw=None, timeout=10.0):
        """Post a command (fields first, seq last: x86 stores stay in order)
        and wait for its answer: (status, ring, attach_seq)."""
        self.seq += 1
        body = raw if raw is not None else struct.pack("<III", ctype, ring, uid) + bytes(48)
        self.m[256 + 4:256 + 64] = body
        struct.pack_into("<I", self.m, 256, self.seq)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.u32(320) == self.seq:
                seq, t, status, r, aseq = struct.unpack_from("<IIIII", self.m, 320)
                if raw is None and (t != ctype or r != ring):
                    fail("answer %r is not to command %d ring %d" % ((t, r), ctype, ring))
                return status, r, aseq
            time.sleep(0.001)
        fail("no answer to command %d within %.0f s" % (ctype, timeout))

    def close(self):
        self.quit = True
        self.t.join()


def standin_args(prefix):
    """The arguments of a test of `nib vm run --qemu STANDIN` (--nib,
    --appliance, --nibhost, --standin) and a work directory; a fresh
    runtime directory in NIB_RUNTIME_DIR."""
    ap = argparse.ArgumentParser()
    for arg in ("--nib", "--appliance", "--nibhost", "--standin"):
        ap.add_argument(arg, required=True)
    a = ap.parse_args()
    a.standin = os.path.abspath(a.standin)
    os.environ["NIB_RUNTIME_DIR"] = tempfile.mkdtemp(prefix=prefix)
    return a, tempfile.mkdtemp(prefix=prefix + "work-")


def fake_image(work):
    """An image directory as `nib image` writes it, for `nib vm run --qemu`
    with tests/boot/vm_standin_guest.py, which ignores the kernel."""
    img = os.path.join(work, "img")
    os.mkdir(img)
    for f in ("vmlinuz", "initramfs.cpio"):
        open(os.path.join(img, f), "w").close()
    with open(os.path.join(img, "manifest"), "w") as f:
        f.write("nibble-image 1\ncpus 2\nnuma 1\nmemory-mib 512\nkernel vmlinuz\n"
                "initramfs initramfs.cpio\ncmdline console=ttyS0\n")
    return img


def wait_ready(r, alive, timeout, what):
    """Until guest_state is READY; alive() False means the other side ended."""
    deadline = time.time() + timeout
    while r.u32(192) != READY:
        if not alive():
            fail(what + " ended before READY")
        if time.time() > deadline:
            fail("guest_state never READY within %.0f s" % timeout)
        time.sleep(0.01)


def check_layout(r):
    g_epoch, hdr_off, ring_size, n_rings, hdr_size = struct.unpack_from("<QQQII", r.m, 128)
    app = PAGE
    a_magic, a_version = struct.unpack_from("<QI", r.m, app)
    a_epoch = r.u64(app + 24)
    a_max_hosts = r.u32(app + 48)
    a_hdr_size = r.u64(app + 16)
    a_ring_size = r.u64(app + 128)
    if (a_magic, a_version) != (0x334D48534C42494E, 4):
        fail("the appliance header page is not a version 4 header")
    if hdr_off != PAGE or not g_epoch or g_epoch != a_epoch:
        fail("layout identity: offset %d, epochs %d / %d" % (hdr_off, g_epoch, a_epoch))
    if hdr_size not in (PAGE, 2 * PAGE) or hdr_size != a_hdr_size:
        fail("app_header_size %d, the appliance header's memfd size %d" % (hdr_size, a_hdr_size))
    if ring_size != a_ring_size or ring_size % PAGE or n_rings != a_max_hosts:
        fail("layout geometry: ring %d / %d, rings %d / %d" % (ring_size, a_ring_size, n_rings,
                                                              a_max_hosts))
    offs = [r.u64(512 + 8 * i) for i in range(64)]
    spans = []
    for i in range(n_rings):
        o = offs[i]
        if o % PAGE or o < PAGE + hdr_size or o + ring_size > r.size:
            fail("ring %d at %d is not inside the region" % (i, o))
        for a, b in spans:
            if o < b and a < o + ring_size:
                fail("ring %d overlaps another" % i)
        spans.append((o, o + ring_size))
    if any(offs[n_rings:]):
        fail("ring table entries past n_rings are not 0")
    ok("layout: %d rings of %d bytes after a %d-byte appliance header, disjoint, inside %d "
       "bytes; epoch %d" % (n_rings, ring_size, hdr_size, r.size, g_epoch))
    return offs[:n_rings], ring_size


def geometry(r):
    app = PAGE
    slots_offset, slot_size = struct.unpack_from("<QQ", r.m, app + 144)
    prompt_offset, prompt_max, tokens_offset, slot_tokens, text_offset, slot_text = \
        struct.unpack_from("<IIIIII", r.m, app + 160)
    return slots_offset, slot_size, prompt_offset, tokens_offset, text_offset


def ask_region(r, ring_off, prompt, max_tokens, timeout=60.0):
    slots_offset, slot_size, p_off, t_off, x_off = geometry(r)
    s = ring_off + slots_offset
    r.m[s + 64:s + 128] = struct.pack("<IIfIQI", len(prompt), max_tokens, 0.0, 0, 0, 0) + bytes(36)
    r.m[s + p_off:s + p_off + len(prompt)] = prompt
    struct.pack_into("<Q", r.m, s + 8, 0)
    struct.pack_into("<I", r.m, s, 2)  # SUBMITTED
    deadline = time.time() + timeout
    while time.time() < deadline:
        if r.u32(s) == 4:
            n_tokens, n_prompt, text_len, status = struct.unpack_from("<IIII", r.m, s + 128)
            ids = list(struct.unpack_from("<%dI" % n_tokens, r.m, s + t_off))
            text = bytes(r.m[s + x_off:s + x_off + text_len])
            struct.pack_into("<I", r.m, s, 0)  # FREE
            return status, ids[:n_prompt], ids[n_prompt:], text
        time.sleep(0.002)
    fail("no answer in the region's ring within %.0f s" % timeout)
