#!/usr/bin/env python3
"""nibble against independent implementations, on one model.

  xcheck.py ref      (--model PATH | --synth SHAPE) --nib NIB --driver NIB_LOGITS [--quant Q]
  xcheck.py llamacpp (--model PATH | --synth SHAPE) --nib NIB --driver NIB_LOGITS [--quant Q]

ref: nibble's logits (tests/reference/nib_logits, the executor the appliance
runs) on a fixed token sequence against ref64.py's float64 forward pass over
the same weights. --quant f32 (default): max |nibble - ref64| over every
position and vocabulary entry must be <= TOL * max |ref64| (docs/accuracy.md
says why TOL = 1e-4 is f32 rounding with room to spare and what a real error
looks like); the same check against ref64 run with its RoPE pairs swapped
(a deliberately wrong reference) must fail, so the test can fail
(--no-mutant skips this second forward pass on the large shapes).
--quant source (or any nibble format): ref64 applies nibble's own int8
activation quantization before each matmul (blocks read from the plan), and
the same bound applies; ref64 without the emulation is reported beside it.

llamacpp: llama.cpp's greedy continuation (node-llama-cpp, tests/npm) of a
fixed prompt, and its logits on prompt + continuation. For an f32/f16
source at --quant f32, nibble's top-1 token at every position of that
sequence must equal llama.cpp's greedy token (the first divergence is
reported with ref64's margin between the two tokens there). Always
reported: mean KL(llama.cpp || nibble) and top-1 agreement; for a
quantized source those are checked only against gross error (KL < 0.1,
top-1 >= 80 %): llama.cpp rounds activations to 8 bits its own way, so
the two are not expected to agree token for token.

--synth SHAPE writes `nib synth SHAPE --layers N --seed S [--dtype D]`
into a temporary directory first; --fixture MIX writes a quantized model
(qfixture.py: every GGUF quantized type nibble reads, random blocks);
--hf-from SHAPE writes a Hugging Face directory of that shape with a real
tokenizer (hffixture.py; ref64 must read it as the same model as the GGUF it
came from, to 1e-6, which checks the rotate-half / Gemma-norm conversions
from both sides). Exit 0 pass, 1 fail, 77 skip (numpy,
node or node-llama-cpp missing, or the model file absent).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

TOL = 1e-4

from numpy_python import reexec_with_numpy  # noqa: E402

reexec_with_numpy()
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref64  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LLAMA_EVAL = os.path.join(HERE, "..", "crosscheck", "llama_eval.mjs")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.stdout.write(r.stdout)
    return r


def mem_available_gb():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return float("inf")


def token_ids(model, path, n, seed):
    """BOS (when the model has one) then n-1 pseudo-random ids of the vocabulary."""
    rng = np.random.default_rng(seed)
    bos = 1
    if not os.path.isdir(path):
        bos = int(ref64.GGUFFile(path).meta.get("tokenizer.ggml.bos_token_id", 1))
    lo = min(259, model.vocab - 1)  # past the specials and byte tokens of SentencePiece
    return [bos] + [int(x) for x in rng.integers(lo, model.vocab, n - 1)]


def softmax_log(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def nib_logits(a, path, ids, out, quant):
    r = run([a.driver, path, "--quant", quant, "--ids", ",".join(map(str, ids)), "--out", out])
    if r.returncode != 0:
        print("FAIL: nib_logits failed on %s (--quant %s)" % (path, quant))
        sys.exit(1)
    info = json.loads(r.stdout)
    lg = np.fromfile(out, dtype="<f4").reshape(len(ids), info["vocab"]).astype(np.float64)
    return info, lg


def ref_logits(path, ids, qblocks=None, mutant=None, flips=(), ties=None):
    m = ref64.load_model(path)
    if mutant == "rope":
        m.rope_neox = not m.rope_neox
    r = ref64.Runner(m, qblocks, flips)
    out = r.forward(ids)
    if ties is not None:
        ties.extend(r.ties)
    return out


def resolve_ties(path, ids, qb, n, r, ties, bound, max_cand=10):
    """Activations within ref64.TIE_EPS of a rounding tie may be rounded the
    other way by nibble's f32 arithmetic. Position by position, from the
    first one where the reference and nibble disagree (a position depends
    only on itself and earlier ones): try the subsets of that position's
    ties, smallest first, until one brings the reference within the bound
    there. Returns the logits and the flips kept."""
    import itertools
    flips = []
    while True:
        err = np.abs(n - r).max(axis=1)
        bad = np.nonzero(err > bound)[0]
        if not len(bad):
            break
        p = int(bad[0])
        cand = [t for t in dict.fromkeys(ties) if t[1] == p and t not in flips][:max_cand]
        found = None
        for k in range(1, len(cand) + 1):
            for sub in itertools.combinations(cand, k):
                new_ties = []
                r2 = ref_logits(path, ids, qb, flips=flips + list(sub), ties=new_ties)
                if np.abs(n[p] - r2[p]).max() <= bound:
                    found = (list(sub), r2, new_ties)
                    break
            if found:
                break
        if not found:
            break
        flips += found[0]
        r, ties = found[1], found[2]
    return r, flips


def check_ref(a, path, work):
    model = ref64.load_model(path)
    ids = token_ids(model, path, a.positions, a.seed)
    info, n = nib_logits(a, path, ids, os.path.join(work, "nib.f32"), a.quant)
    quantized = any(info["qact"].values())
    qb = info["qact"] if quantized else None
    ties = []
    r = ref_logits(path, ids, qb, ties=ties)
    scale = np.abs(r).max()
    if ties:
        r, flips = resolve_ties(path, ids, qb, n, r, ties, TOL * scale)
        print("  %d activation(s) within %g of an int8 rounding tie; %d rounded the other way, as "
              "nibble's f32 arithmetic did%s" % (len(ties), ref64.TIE_EPS, len(flips), "".join(
                  ": %s position %d input %d" % f for f in flips[:1])))
    err = np.abs(n - r).max()
    where = np.unravel_index(np.argmax(np.abs(n - r)), r.shape)
    top = (np.argmax(n, 1) == np.argmax(r, 1)).mean()
    print("%s (%s, %d layers, vocab %d), --quant %s, %d positions: max|nibble - ref64| = %.3g "
          "= %.3g x max|logit| (%.3g; bound %g) at position %d token %d; top-1 agreement %.0f%%"
          % (path, model.arch, model.n_layers, model.vocab, a.quant, len(ids), err, err / scale,
             scale, TOL, where[0], where[1], 100 * top))
    ok = err <= TOL * scale
    if quantized:
        plain = np.abs(n - ref_logits(path, ids)).max()
        print("  without the activation-quantization emulation: %.3g x max|logit|" % (plain / scale))
    elif a.mutant:
        mut = np.abs(n - ref_logits(path, ids, mutant="rope")).max()
        print("  against a wrong reference (RoPE pairs swapped): %.3g x max|logit| (must exceed "
              "the bound)" % (mut / scale))
        if mut <= TOL * scale:
            print("FAIL: the comparison cannot tell a wrong RoPE from the right one on this model")
            return 1
    if not ok:
        print("FAIL: nibble's logits differ from the float64 reference by more than f32 rounding")
        return 1
    print("PASS")
    return 0


def check_llamacpp(a, path, work):
    node = shutil.which("node")
    if not node:
        print("SKIP: node not found: the llama.cpp cross-check needs node >= 20 and tests/npm")
        return 77
    model = ref64.load_model(path)
    prompt = token_ids(model, path, a.prompt, a.seed)
    lfile = os.path.join(work, "llama.f32")
    env = dict(os.environ, NODE_LLAMA_CPP_SKIP_DOWNLOAD="true")
    r = subprocess.run([node, LLAMA_EVAL, path, "--ids", ",".join(map(str, prompt)),
                        "--gen", str(a.gen), "--logits-out", lfile],
                       capture_output=True, text=True, env=env, timeout=900)
    out = r.stdout.strip().splitlines()
    res = json.loads(out[-1]) if out else {}
    if r.returncode == 77:
        print("SKIP: " + res.get("skip", "node-llama-cpp unavailable"))
        return 77
    if r.returncode != 0 or "error" in res:
        sys.stderr.write(r.stderr)
        print("FAIL: llama.cpp could not run %s: %s" % (path, res.get("error", r.stdout)))
        return 1
    gen = res["generated"]
    seq = prompt + gen[:-1]
    vocab = res["vocab"]
    ll = np.fromfile(lfile, dtype="<f4").reshape(len(seq), vocab).astype(np.float64)
    info, n = nib_logits(a, path, seq, os.path.join(work, "nib.f32"), a.quant)
    if info["vocab"] != vocab:
        print("FAIL: vocabulary %d (nibble) vs %d (llama.cpp)" % (info["vocab"], vocab))
        return 1
    lp, lq = softmax_log(ll), softmax_log(n)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=1)
    t_ll, t_nb = np.argmax(ll, 1), np.argmax(n, 1)
    top = (t_ll == t_nb).mean()
    # llama.cpp's greedy tokens are its top-1 at the last prompt position and after
    want = gen
    got = [int(t) for t in t_nb[len(prompt) - 1:]]
    print("%s (%s, %d layers), --quant %s: llama.cpp greedy %s" % (path, model.arch,
          model.n_layers, a.quant, gen))
    print("  nibble top-1 on that sequence %s" % got)
    print("  %d positions: mean KL(llama.cpp || nibble) %.3g (max %.3g), top-1 agreement %.1f%%"
          % (len(seq), kl.mean(), kl.max(), 100 * top))
    if a.quant == "f32":
        diff = [i for i in range(len(seq)) if t_ll[i] != t_nb[i]]
        if diff:
            i = diff[0]
            rr = ref_logits(path, seq[:i + 1])[-1]
            print("FAIL: first divergence at position %d: llama.cpp %d, nibble %d; ref64 logits "
                  "there %.6g vs %.6g" % (i, t_ll[i], t_nb[i], rr[t_ll[i]], rr[t_nb[i]]))
            return 1
        if got != want:
            print("FAIL: nibble's greedy tokens differ from llama.cpp's")
            return 1
    else:
        if not (kl.mean() < 0.1 and top >= 0.8):
            print("FAIL: nibble --quant %s is grossly far from llama.cpp on the same file" % a.quant)
            return 1
    print("PASS")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["ref", "llamacpp"])
    ap.add_argument("--model", help="a GGUF file or Hugging Face directory")
    ap.add_argument("--synth", help="a nib synth shape, written first")
    ap.add_argument("--layers", type=int, default=2, help="0: every layer of the shape")
    ap.add_argument("--min-mem-gb", type=float, default=0,
                    help="a big model: skip when less memory than this is available, or "
                         "with NIB_SKIP_BIG=1 (as tests/linker's big appliances)")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--synth-arg", action="append", default=[], help="more nib synth arguments")
    ap.add_argument("--fixture", help="a quantized fixture mix (qfixture.py), written first")
    ap.add_argument("--hf-from", metavar="SHAPE",
                    help="ref: a Hugging Face directory made from nib synth SHAPE --vocab "
                         "TOKENIZER_DIR (hffixture.py), written first")
    ap.add_argument("--tokenizer-dir", help="--hf-from: the Hugging Face tokenizer to use")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--nib", required=True)
    ap.add_argument("--driver", required=True)
    ap.add_argument("--quant", default="f32")
    ap.add_argument("--no-mutant", dest="mutant", action="store_false",
                    help="ref: skip the wrong-reference check (the small shapes make it)")
    ap.add_argument("--positions", type=int, default=24, help="ref: sequence length")
    ap.add_argument("--prompt", type=int, default=8, help="llamacpp: prompt length")
    ap.add_argument("--gen", type=int, default=16, help="llamacpp: greedy tokens")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="nib-xcheck-")
    try:
        if a.fixture:
            import qfixture
            base = os.path.join(work, "base.gguf")
            if run([a.nib, "synth", "test-llama3", "--layers", "2", "-o", base]).returncode:
                print("FAIL: nib synth test-llama3")
                return 1
            path = os.path.join(work, "q-%s.gguf" % a.fixture)
            qfixture.build(base, path, a.fixture, a.seed)
        elif a.hf_from:
            import hffixture
            tok = a.tokenizer_dir
            if not tok or not os.path.exists(os.path.join(tok, "tokenizer.json")):
                print("SKIP: %s/tokenizer.json not found (../shared/models)" % tok)
                return 77
            gg = os.path.join(work, a.hf_from + ".gguf")
            cmd = [a.nib, "synth", a.hf_from, "--vocab", tok, "--layers", str(a.layers),
                   "--seed", str(a.seed), "-o", gg]
            if run(cmd).returncode != 0:
                print("FAIL: %s" % " ".join(cmd))
                return 1
            path = os.path.join(work, a.hf_from + "-hf")
            hffixture.build(gg, path, tok)
            # the two forms through ref64's two readers: the same model
            m_g, m_h = ref64.load_model(gg), ref64.load_model(path)
            ids = token_ids(m_h, path, 16, a.seed)
            lg, lh = ref64.Runner(m_g).forward(ids), ref64.Runner(m_h).forward(ids)
            d = np.abs(lg - lh).max() / np.abs(lg).max()
            print("ref64 on the GGUF and on the Hugging Face directory made from it: %.3g x "
                  "max|logit| apart" % d)
            if d > 1e-6:
                print("FAIL: the directory is not the GGUF's model (hffixture.py or ref64)")
                return 1
        elif a.synth:
            path = os.path.join(work, a.synth + ".gguf")
            if a.min_mem_gb and os.environ.get("NIB_SKIP_BIG") == "1":
                print("SKIP: NIB_SKIP_BIG=1: %s at full depth not run (it takes minutes and "
                      "about %g GB of memory)" % (a.synth, a.min_mem_gb))
                return 77
            if a.min_mem_gb and mem_available_gb() < a.min_mem_gb:
                print("SKIP: %s needs about %g GB of available memory (nibble's f32 blob, the "
                      "reference's chunks, the mapped file); %.1f GB available"
                      % (a.synth, a.min_mem_gb, mem_available_gb()))
                return 77
            cmd = [a.nib, "synth", a.synth, "--seed", str(a.seed), "-o", path] + \
                (["--layers", str(a.layers)] if a.layers else []) + \
                (["--dtype", a.dtype] if a.dtype else []) + a.synth_arg
            if run(cmd).returncode != 0:
                print("FAIL: %s" % " ".join(cmd))
                return 1
        else:
            path = a.model
            if not path or not os.path.exists(path):
                print("SKIP: %s not found (../shared/models: reference models)" % path)
                return 77
        if a.mode == "ref":
            return check_ref(a, path, work)
        return check_llamacpp(a, path, work)
    except ref64.ModelError as e:
        print("FAIL: ref64: %s" % e)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
