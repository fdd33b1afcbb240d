#!/usr/bin/env python3
"""The Python host's UTF-8 rule (tools/host/nibhost.py) on the vectors the C
sanitizer is tested on (utf8_vectors.tsv, tests/proto/test_utf8.c): the same
output, the same held-back tail while streaming, every split streamed the same,
and JSON strings that are always valid UTF-8 and parse back to the sanitized
text.

    test_utf8.py NIBHOST_PY VECTORS
"""
import importlib.util
import json
import random
import sys


def main():
    spec = importlib.util.spec_from_file_location("nibhost", sys.argv[1])
    nh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nh)
    vecs = []
    for line in open(sys.argv[2], encoding="utf-8"):
        if line.startswith("#"):
            continue
        i, o, r, what = line.rstrip("\n").split("\t")
        vecs.append((bytes.fromhex(i), bytes.fromhex(o), int(r), what))
    assert len(vecs) >= 40, "only %d vectors" % len(vecs)
    bad = 0

    def check(cond, msg):
        nonlocal bad
        if not cond:
            bad += 1
            print("FAIL:", msg)

    def stream(b, cuts):
        done, out = 0, b""
        for c in cuts:
            k = nh.ready(b[done:c])
            out += nh.sanitize(b[done:done + k])
            done += k
        return out + nh.sanitize(b[done:])

    for b, want, rdy, what in vecs:
        check(nh.sanitize(b) == want, "%s: sanitize gives %s" % (what, nh.sanitize(b).hex(" ")))
        check(nh.ready(b) == rdy, "%s: ready %d, want %d" % (what, nh.ready(b), rdy))
        for a in range(len(b) + 1):
            for c in range(a, len(b) + 1):
                check(stream(b, [a, c]) == want, "%s: streamed at %d, %d differs" % (what, a, c))
        s = nh.json_string(b)
        check(json.loads(s.decode("utf-8")) == want.decode("utf-8"),
              "%s: JSON %r does not parse back to the sanitized text" % (what, s))
    rnd = random.Random(7)
    for n in range(20000):
        b = bytes(rnd.choice((rnd.randrange(256), 0x80 | rnd.randrange(64),
                              0xC0 | rnd.randrange(64))) for _ in range(1 + n % 24))
        out = nh.sanitize(b)
        check(out.decode("utf-8") == b.decode("utf-8", "replace"), "random %s" % b.hex(" "))
        check(nh.sanitize(out) == out and nh.ready(out) == len(out), "idempotent %s" % b.hex())
        cut = rnd.randrange(len(b) + 1)
        check(stream(b, [cut]) == out, "random %s streamed at %d" % (b.hex(" "), cut))
        json.loads(nh.json_string(b).decode("utf-8"))
        if bad > 20:
            break
    print("%d vectors and 20000 random strings: %s" % (len(vecs), "ok" if not bad else
                                                        "%d failures" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
