#!/usr/bin/env python3
"""Quantized GGUF fixtures for the reference tests: a small llama model
(dim 256, 4 heads of 64, 2 KV heads, FFN 512, 2 layers: every row a whole
number of 256-element K-quant blocks) whose matrices are stored in GGUF
quantized types, with the tokenizer and remaining metadata of a base GGUF
(nib synth test-llama3).

The blocks are random bytes (every code, sub-scale and high-bit field takes
values across its whole range) with the f16 scale fields set so that
weights come out around 1/sqrt(inputs): the tests compare implementations
on the same file, so the weights need not approximate anything.

  qfixture.py BASE.gguf OUT.gguf --mix q4_k_m|q4_0|all [--seed N]

mixes:
  q4_k_m  what llama.cpp's Q4_K_M writes: Q4_K, with Q6_K for attn_v,
          ffn_down and the output matrix (token_embd Q4_K);
  q4_0    every matrix Q4_0, the output matrix Q8_0 (footprint.py);
  all     every type nibble reads, one per matrix: Q2_K Q3_K Q4_K Q5_K Q6_K
          IQ4_XS Q4_1 (layer 0), Q5_0 Q5_1 IQ4_NL Q8_0 Q4_0 Q4_K Q6_K
          (layer 1), token_embd Q6_K, output Q2_K.
"""
import argparse
import struct
import sys

import numpy as np

import ref64

DIM, HEADS, KV, HEAD, FFN, LAYERS = 256, 4, 2, 64, 512, 2
TYPE = {v[0]: k for k, v in ref64.GGML.items()}

# type -> [(byte offset of an f16 scale field, value as a multiple of s)]
# where s is the target weight size 1/sqrt(inputs); see the module doc.
SCALES = {
    "Q4_0": [(0, 1 / 4)], "Q4_1": [(0, 1 / 4), (2, -2.0)], "Q5_0": [(0, 1 / 8)],
    "Q5_1": [(0, 1 / 8), (2, -2.0)], "Q8_0": [(0, 1 / 64)], "IQ4_NL": [(0, 1 / 64)],
    "Q2_K": [(80, 1 / 20), (82, 1 / 20)], "Q3_K": [(108, 1 / 64)],
    "Q4_K": [(0, 1 / 252), (2, 1 / 32)], "Q5_K": [(0, 1 / 504), (2, 1 / 32)],
    "Q6_K": [(208, 1 / 2048)], "IQ4_XS": [(0, 1 / 2048)],
}

MIXES = {
    "q4_k_m": {"token_embd": "Q4_K", "output": "Q6_K",
               0: dict(attn_q="Q4_K", attn_k="Q4_K", attn_v="Q6_K", attn_output="Q4_K",
                       ffn_gate="Q4_K", ffn_up="Q4_K", ffn_down="Q6_K"),
               1: dict(attn_q="Q4_K", attn_k="Q4_K", attn_v="Q6_K", attn_output="Q4_K",
                       ffn_gate="Q4_K", ffn_up="Q4_K", ffn_down="Q6_K")},
    "q4_0": {"token_embd": "Q4_0", "output": "Q8_0",
             0: dict(attn_q="Q4_0", attn_k="Q4_0", attn_v="Q4_0", attn_output="Q4_0",
                     ffn_gate="Q4_0", ffn_up="Q4_0", ffn_down="Q4_0"),
             1: dict(attn_q="Q4_0", attn_k="Q4_0", attn_v="Q4_0", attn_output="Q4_0",
                     ffn_gate="Q4_0", ffn_up="Q4_0", ffn_down="Q4_0")},
    "all": {"token_embd": "Q6_K", "output": "Q2_K",
            0: dict(attn_q="Q2_K", attn_k="Q3_K", attn_v="Q4_K", attn_output="Q5_K",
                    ffn_gate="Q6_K", ffn_up="IQ4_XS", ffn_down="Q4_1"),
            1: dict(attn_q="Q5_0", attn_k="Q5_1", attn_v="IQ4_NL", attn_output="Q8_0",
                    ffn_gate="Q4_0", ffn_up="Q4_K", ffn_down="Q6_K")},
}


def quant_blocks(rng, kind, rows, cols):
    name, blk, bb = ref64.GGML[TYPE[kind]]
    nb = rows * cols // blk
    b = rng.integers(0, 256, (nb, bb), dtype=np.uint8)
    s = 1.0 / np.sqrt(cols)
    for off, mult in SCALES[kind]:
        v = (s * mult * rng.uniform(0.5, 1.5, nb)).astype(np.float16)
        b[:, off:off + 2] = v.view(np.uint8).reshape(nb, 2)
    return b.tobytes()


def f32_tensor(rng, n, lo=0.8, hi=1.2):
    return rng.uniform(lo, hi, n).astype("<f4").tobytes()


def build(base_path, out_path, mix, seed):
    base = ref64.GGUFFile(base_path)
    if base.meta.get("general.architecture") != "llama":
        raise ref64.ModelError("%s: the base must be a llama GGUF" % base_path)
    vocab = base.tensors["token_embd.weight"].rows
    rng = np.random.default_rng(seed)
    m = MIXES[mix]
    tensors = []  # (name, dims (innermost first), type, bytes)

    def mat(name, kind, rows, cols):
        tensors.append((name, [cols, rows], TYPE[kind], quant_blocks(rng, kind, rows, cols)))

    mat("token_embd.weight", m["token_embd"], vocab, DIM)
    tensors.append(("output_norm.weight", [DIM], 0, f32_tensor(rng, DIM)))
    mat("output.weight", m["output"], vocab, DIM)
    if "rope_freqs.weight" in base.tensors:
        tensors.append(("rope_freqs.weight", [HEAD // 2], 0,
                        bytes(base.tensors["rope_freqs.weight"].data)))
    for i in range(LAYERS):
        p, t = "blk.%d." % i, m[i]
        tensors.append((p + "attn_norm.weight", [DIM], 0, f32_tensor(rng, DIM)))
        mat(p + "attn_q.weight", t["attn_q"], HEADS * HEAD, DIM)
        mat(p + "attn_k.weight", t["attn_k"], KV * HEAD, DIM)
        mat(p + "attn_v.weight", t["attn_v"], KV * HEAD, DIM)
        mat(p + "attn_output.weight", t["attn_output"], DIM, HEADS * HEAD)
        tensors.append((p + "ffn_norm.weight", [DIM], 0, f32_tensor(rng, DIM)))
        mat(p + "ffn_gate.weight", t["ffn_gate"], FFN, DIM)
        mat(p + "ffn_up.weight", t["ffn_up"], FFN, DIM)
        mat(p + "ffn_down.weight", t["ffn_down"], DIM, FFN)

    meta = dict(base.meta)
    types = dict(base.meta_types)
    over = {"llama.embedding_length": DIM, "llama.feed_forward_length": FFN,
            "llama.block_count": LAYERS, "llama.attention.head_count": HEADS,
            "llama.attention.head_count_kv": KV, "llama.rope.dimension_count": HEAD,
            "general.name": "nibble qfixture " + mix}
    for k, v in over.items():
        meta[k] = v
        if k not in types:
            types[k] = (8, None) if isinstance(v, str) else (4, None)
    for k in ("llama.attention.key_length", "llama.attention.value_length"):
        if k in meta:
            meta[k] = HEAD
    write(out_path, meta, types, tensors)


def w_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def w_value(t, et, v):
    if t == 8:
        return w_str(v)
    if t == 9:
        head = struct.pack("<IQ", et, len(v))
        if et == 8:
            return head + b"".join(w_str(x) for x in v)
        return head + np.asarray(v, dtype=ref64.GGUF_VT[et]).tobytes()
    return np.asarray(v, dtype=ref64.GGUF_VT[t]).tobytes()


def write(path, meta, types, tensors, align=32):
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(meta))]
    for k, v in meta.items():
        t, et = types[k]
        out.append(w_str(k) + struct.pack("<I", t) + w_value(t, et, v))
    off = 0
    offs = []
    for name, dims, kind, data in tensors:
        offs.append(off)
        out.append(w_str(name) + struct.pack("<I", len(dims)) +
                   b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", kind, off))
        off += (len(data) + align - 1) // align * align
    head = b"".join(out)
    head += b"\0" * ((-len(head)) % align)
    with open(path, "wb") as f:
        f.write(head)
        for (_, _, _, data), o in zip(tensors, offs):
            f.write(data)
            f.write(b"\0" * ((-len(data)) % align))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--mix", choices=sorted(MIXES), required=True)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    build(a.base, a.out, a.mix, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
