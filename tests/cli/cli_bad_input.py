#!/usr/bin/env python3
"""Bad input through the nib CLI: every case must end with a clear message on
stderr and a non-zero exit status, never a signal (a crash) and never a
half-written output file. Run against the ASan build too, where any memory
error or leak turns into a failure.

Also the option conventions every subcommand follows (tools/util/args.h):
'--' ends the options, --help exits 0 with the usage on stdout, --version
prints the version, an unknown option exits 2 naming it.

  cli_bad_input.py NIB GOOD.gguf GOOD.blob VERSION [APPLIANCE]

APPLIANCE, when given, embeds GOOD.blob: its --version must report the same
version and that blob's format.
"""
import os
import random
import struct
import subprocess
import sys
import tempfile

nib, good_gguf, good_blob, version = sys.argv[1:5]
appliance = sys.argv[5] if len(sys.argv) > 5 else None
failures = 0
SUBCOMMANDS = ["synth", "compile", "inspect", "eval", "ask", "stop", "stats", "topo", "bench",
               "version", "tokenize", "image", "onnx-run"]


def expect(args, rc_want, needle, what, stdout_needle=None):
    global failures
    r = subprocess.run([nib, *args], capture_output=True, text=True, errors="replace", timeout=120)
    bad = None
    if r.returncode < 0:
        bad = "killed by signal %d" % -r.returncode
    elif r.returncode != rc_want:
        bad = "exit %d, expected %d" % (r.returncode, rc_want)
    elif needle and needle not in r.stderr:
        bad = "stderr lacks %r" % needle
    elif stdout_needle and stdout_needle not in r.stdout:
        bad = "stdout lacks %r: %r" % (stdout_needle, r.stdout[:300])
    elif "ERROR: AddressSanitizer" in r.stderr or "runtime error:" in r.stderr:
        bad = "sanitizer report"
    if bad:
        failures += 1
        print("FAIL: %s: %s\n  stderr: %s" % (what, bad, r.stderr.strip()[:600]))
    else:
        print("ok: %s -> %s" % (what, (r.stderr.strip().splitlines() or [""])[-1][:150]))


with open(good_gguf, "rb") as f:
    gguf = f.read()
with open(good_blob, "rb") as f:
    blob = f.read()

with tempfile.TemporaryDirectory() as d:
    def put(name, data):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    out = os.path.join(d, "out.blob")
    expect(["compile", os.path.join(d, "missing.gguf"), "-o", out], 1, "cannot open", "missing model file")
    expect(["compile", put("empty.gguf", b""), "-o", out], 1, "gguf", "empty model file")
    expect(["compile", put("magic.gguf", b"GGML" + gguf[4:]), "-o", out], 1, "magic", "wrong magic")
    expect(["compile", put("v9.gguf", gguf[:4] + b"\x09\0\0\0" + gguf[8:]), "-o", out], 1, "version",
           "unknown GGUF version")
    rng = random.Random(5)
    cuts = sorted({8, 16, 24, 25, 40, 100, 1000, 5000} | {rng.randrange(len(gguf)) for _ in range(12)})
    for cut in cuts:
        expect(["compile", put("cut.gguf", gguf[:cut]), "-o", out], 1, "nib compile", "GGUF truncated at %d" % cut)
    for i in range(8):
        expect(["compile", put("junk.gguf", bytes(rng.randrange(256) for _ in range(4096))), "-o", out], 1,
               "nib compile", "random bytes #%d" % i)
    # A Hugging Face directory: the missing file is named, an unsupported
    # model_type lists the supported ones, a damaged safetensors names itself.
    hf = os.path.join(d, "hf")
    os.mkdir(hf)
    expect(["compile", hf, "-o", out], 1, "config.json", "HF directory without config.json")
    put("hf/config.json", b'{"model_type": "gpt2"}')
    expect(["compile", hf, "-o", out], 1, "nibble reads llama, mistral, qwen2, qwen3, phi3, gemma2",
           "HF directory of an unsupported model_type")
    put("hf/config.json", b'{"model_type": "llama", "hidden_size": 8, "num_hidden_layers": 1, '
        b'"num_attention_heads": 2, "intermediate_size": 8, "vocab_size": 8, '
        b'"max_position_embeddings": 8}')
    expect(["compile", hf, "-o", out], 1, "missing model.safetensors", "HF directory without weights")
    put("hf/model.safetensors", b"\xff" * 8 + b"{}")
    expect(["compile", hf, "-o", out], 1, "model.safetensors: header length", "damaged safetensors")
    if os.path.exists(out) or os.path.exists(out + ".tmp"):
        failures += 1
        print("FAIL: a failed compile left %s behind" % out)
    expect(["compile", good_gguf, "-o", out, "--quant", "q3"], 2, "--quant", "unknown --quant")
    expect(["compile", good_gguf, "-o", out, "--ctx", "0"], 2, "--ctx", "bad --ctx")
    expect(["compile", good_gguf, "-o", out, "--batch", "0"], 2, "--batch", "bad --batch")
    expect(["compile", good_gguf, "-o", out, "--batch", "65"], 2, "--batch", "--batch above the limit")
    expect(["compile", good_gguf], 2, "usage", "missing -o")
    expect(["compile", good_gguf, "-o", os.path.join(d, "no", "such", "dir.blob")], 1, "", "unwritable output")

    flipped = bytearray(blob)
    flipped[len(blob) // 2] ^= 1
    expect(["inspect", put("flip.blob", bytes(flipped))], 1, "checksum mismatch", "blob with a flipped byte")
    expect(["inspect", put("short.blob", blob[:len(blob) // 3])], 1, "truncated", "truncated blob")
    expect(["inspect", put("tiny.blob", blob[:100])], 1, "smaller than its header", "blob shorter than a header")
    expect(["inspect", good_gguf], 1, "magic", "a GGUF given to inspect")
    expect(["tokenize", os.path.join(d, "missing.blob")], 1, "cannot open", "tokenize: missing file")
    expect(["tokenize", put("flip2.blob", bytes(flipped))], 1, "checksum mismatch",
           "tokenize: blob with a flipped byte")
    expect(["tokenize", put("bad.json", b'{"model": {"type": "WordPiece"}}')], 1, "model",
           "tokenize: unsupported tokenizer.json")
    expect(["tokenize", put("magic2.gguf", b"GGML" + gguf[4:])], 1, "not a nibble blob, a GGUF",
           "tokenize: not a GGUF")
    expect(["tokenize"], 2, "usage", "tokenize without a source")
    expect(["compile", good_gguf, "-o", out, "--chat-template", "nosuch"], 2, "unknown family",
           "compile: unknown --chat-template family")
    expect(["compile", good_gguf, "-o", out, "--chat-template", "chatml", "--no-chat-template"], 2,
           "exclude", "compile: both chat template options")
    expect(["synth", "gpt-5", "-o", os.path.join(d, "x.gguf")], 2, "unknown shape", "unknown synth shape")
    expect(["nonsense"], 2, "unknown command", "unknown command")
    expect(["ask", "--name", "bad/name", "hi"], 1, "may only hold", "bad appliance name")
    expect(["ask", "--max-tokens", "-3", "hi"], 2, "--max-tokens", "negative --max-tokens")
    expect(["ask", "--temperature", "nan", "hi"], 2, "--temperature", "NaN temperature")

    # Option conventions. A prompt that starts with '-' passes after '--' and
    # reaches the attach step (no appliance runs under this name).
    expect(["ask", "--name", "cli-test-none", "--", "-x"], 1, "no appliance",
           "ask -- '-x' reaches the appliance-free error")
    expect(["ask", "--name", "cli-test-none", "-x"], 2, "unknown option '-x'", "ask -x without --")
    expect(["ask", "--name", "cli-test-none", "--", "a", "b"], 2, "unexpected argument 'b'",
           "ask with two prompts")
    expect(["ask", "--name", "cli-test-none", "--seed", "3", "hi"], 1,
           "--seed is ignored", "ask reports an ignored --seed")
    expect(["ask", "--name"], 2, "--name needs a value", "option without its value")
    expect(["ask", "--json=yes", "hi"], 2, "--json takes no value", "flag given a value")
    expect(["ask", "--name=cli-test-none", "--", "--help"], 1, "no appliance", "--help after --")
    expect(["inspect", "--", good_blob], 0, "", "inspect -- BLOB", "checksum: ok")
    expect(["topo", "--check", os.path.join(d, "none.txt"), "-o", out], 1, "-o is ignored",
           "topo reports an ignored -o")
    # A topology file that goes wrong after its cpu lines: one message
    # naming the line, nothing else (it once printed an unset buffer too).
    bad_topo = os.path.join(d, "bad-topo.txt")
    with open(bad_topo, "w") as f:
        f.write("nibble-topology 1\ncpu 0 node 0 package 0 core 0 smt 0\nprefetch 100\n")
    r = subprocess.run([nib, "topo", "--check", bad_topo], capture_output=True, text=True,
                       errors="replace", timeout=60)
    if r.returncode != 1 or r.stderr.strip().splitlines() != [
            "nib topo: %s: line 3: expected \"prefetch BYTES\", a multiple of 64 up to 65536"
            % bad_topo]:
        failures += 1
        print("FAIL: topo --check of a bad prefetch line: exit %d, %r" % (r.returncode, r.stderr))
    else:
        print("ok: topo --check names the bad prefetch line, once")
    blob_format = struct.unpack_from("<I", blob, 12)[0]
    version_line = "nib %s (blob format %u)" % (version, blob_format)
    expect(["--version"], 0, "", "nib --version", version_line)
    expect(["version"], 0, "", "nib version", version_line)
    expect(["--help"], 0, "", "nib --help", "usage: nib")
    for c in SUBCOMMANDS:
        expect([c, "--help"], 0, "", "nib %s --help" % c, "usage: nib " + c)
        expect([c, "-h"], 0, "", "nib %s -h" % c, "usage: nib " + c)
        expect([c, "--version"], 0, "", "nib %s --version" % c, version_line)
        expect([c, "--no-such-option"], 2, "unknown option '--no-such-option'",
               "nib %s with an unknown option" % c)
    expect(["bench", "--latency", "--help"], 0, "", "nib bench --latency --help", "usage")
    expect(["bench", "--latency", "--no-such-option"], 2, "unknown option", "bench --latency unknown")
    # NIB_PREFETCH (the kernels' prefetch distance) is checked before any command runs.
    for v in ["100", "65600", "-64", "4k", ""]:
        r = subprocess.run([nib, "version"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, NIB_PREFETCH=v))
        if r.returncode != 2 or "NIB_PREFETCH wants a multiple of 64" not in r.stderr:
            failures += 1
            print("FAIL: NIB_PREFETCH=%r: exit %d, %r" % (v, r.returncode, r.stderr[:200]))
        else:
            print("ok: NIB_PREFETCH=%r refused" % v)
    r = subprocess.run([nib, "version"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, NIB_PREFETCH="8192"))
    if r.returncode != 0:
        failures += 1
        print("FAIL: NIB_PREFETCH=8192: exit %d, %r" % (r.returncode, r.stderr[:200]))
    if appliance:
        r = subprocess.run([appliance, "--version"], capture_output=True, text=True, timeout=60)
        want = "appliance %s (blob format %u)" % (version, blob_format)
        if r.returncode != 0 or r.stdout.strip() != want:
            failures += 1
            print("FAIL: appliance --version: exit %d, %r, expected %r"
                  % (r.returncode, r.stdout.strip(), want))
        else:
            print("ok: appliance --version -> %s" % want)


def ctx_clamp_is_reported():
    """--ctx above the model's context builds the model's context, and says so."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "big-ctx.blob")
        expect(["compile", good_gguf, "-o", out, "--ctx", "65536"], 0, "--ctx 65536 clamped to ",
               "compile reports a clamped --ctx")
        if os.path.exists(out):
            with open(out, "rb") as f:
                ctx = struct.unpack_from("<I", f.read(256), 68)[0]  # header hp.ctx_len
            expect(["compile", good_gguf, "-o", out, "--ctx", "65536"], 0,
                   "--ctx 65536 clamped to %u, the model's context length" % ctx,
                   "the clamp message names the context the blob holds")


ctx_clamp_is_reported()
print("%d failures" % failures)
sys.exit(1 if failures else 0)
