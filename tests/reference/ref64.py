#!/usr/bin/env python3
"""ref64: a float64 forward pass of small decoder models, written for the tests
independently of nibble (numpy only; no code shared with nibble's C).

Reads a GGUF file (its own reader: metadata, tensors F32/F16/BF16 and the
quantized types Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS,
dequantized exactly in float64) or a Hugging Face directory (config.json +
model.safetensors or sharded model-*.safetensors with their index; F32/F16/BF16).
Architectures: llama (Llama 1-3.x, Mistral, SmolLM2), qwen2, qwen3, phi3, gemma2,
implemented from the papers / Hugging Face semantics:
  - RMSNorm x / sqrt(mean(x^2) + eps) * w (Hugging Face Gemma: * (1 + w));
  - RoPE: GGUF llama rotates adjacent pairs (2i, 2i+1) (its converter permuted
    Q/K rows); GGUF qwen2/qwen3/phi3/gemma2 and every Hugging Face checkpoint
    rotate half (i, i + rope_dim/2); theta_i = pos * base^(-2i/rope_dim) /
    factor_i (Llama 3 rope_freqs.weight, or rope_scaling llama3 from config.json);
  - qwen2 Q/K/V biases; qwen3 per-head RMSNorm of Q and K before RoPE; phi3
    fused attn_qkv (Q|K|V rows) and ffn_up (gate|up rows);
  - gemma2: embeddings * sqrt(dim), GELU(tanh)-gated FFN, post-attention and
    post-FFN norms, attention-score soft-capping c*tanh(s/c) before the
    softmax, final-logit soft-capping, sliding-window attention on even layers
    (a query at pos sees keys pos-window+1..pos), attention scale
    1/sqrt(query_pre_attn_scalar) when given, else as llama.cpp derives it.
Everything is computed in float64; weights are converted from their stored
type chunk by chunk (large tables stay memory-mapped; the LM head runs in
row chunks), so a multi-GB model needs little more memory than its largest
layer matrix in float64.

--qact NAME=B,...  (or --qact-json FILE from the test driver) emulates nibble's
int8 activation quantization before the matmul whose blob tensor is NAME
(blk.N.attn_qkv, blk.N.attn_output, blk.N.ffn_gate_up, blk.N.ffn_down,
output): per block of B inputs, s = amax/127, q = round-half-even(x*127/amax)
clamped to +-127, the matmul then sees q*s.

usage:
  ref64.py MODEL --ids 1,2,3 [--gen N] [--logits-out FILE.npy] [--qact ...]
prints one JSON line: arch, vocab, positions, top1 per position, generated ids
(greedy continuation of --ids, --gen N), and where the logits were written
(float64 array [positions, vocab]).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------
# GGUF
# ---------------------------------------------------------------------------

GGUF_VT = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4",
           7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}

# ggml type -> (name, elements per block, bytes per block)
GGML = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2),
    2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34), 10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210),
    20: ("IQ4_NL", 32, 18), 23: ("IQ4_XS", 256, 136),
}

IQ4NL_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                        dtype=np.float64)


class ModelError(Exception):
    pass


class Reader:
    def __init__(self, buf, off=0):
        self.b, self.o = buf, off

    def take(self, n):
        if self.o + n > len(self.b):
            raise ModelError("GGUF: truncated header")
        v = self.b[self.o:self.o + n]
        self.o += n
        return bytes(v)

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def string(self):
        n = self.u64()
        if n > 1 << 24:
            raise ModelError("GGUF: string length %d" % n)
        return self.take(n).decode("utf-8", "replace")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.u32(), self.u64()
            if et == 8:
                return [self.string() for _ in range(n)]
            if et not in GGUF_VT:
                raise ModelError("GGUF: array of type %d" % et)
            dt = np.dtype(GGUF_VT[et])
            return np.frombuffer(self.take(n * dt.itemsize), dtype=dt)
        if t not in GGUF_VT:
            raise ModelError("GGUF: metadata type %d" % t)
        dt = np.dtype(GGUF_VT[t])
        return np.frombuffer(self.take(dt.itemsize), dtype=dt)[0].item()


class Tensor:
    """A stored tensor: rows x cols (cols = the contiguous first dimension)."""

    def __init__(self, name, kind, shape, data):
        self.name, self.kind, self.data = name, kind, data
        self.cols = int(shape[0])
        self.rows = int(np.prod(shape[1:])) if len(shape) > 1 else 1

    def rows_f64(self, r0, r1):
        """Rows r0..r1 converted to float64, shape (r1 - r0, cols)."""
        name, blk, bb = GGML[self.kind]
        rb = self.cols // blk * bb
        raw = self.data[r0 * rb:r1 * rb]
        n = r1 - r0
        if name == "F32":
            return raw.view("<f4").astype(np.float64).reshape(n, self.cols)
        if name == "F16":
            return raw.view("<f2").astype(np.float64).reshape(n, self.cols)
        if name == "BF16":
            u = raw.view("<u2").astype(np.uint32) << 16
            return u.view(np.float32).astype(np.float64).reshape(n, self.cols)
        b = np.asarray(raw).reshape(-1, bb)
        return DEQUANT[name](b).reshape(n, self.cols)


def f16(b, off):
    return b[:, off:off + 2].copy().view("<f2").astype(np.float64)  # (nb, 1)


def lo_hi(qs):
    """Bytes (nb, 16) -> 32 nibbles: low nibbles are elements 0..15, high 16..31."""
    return np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.float64)


def dq_q4_0(b):
    return f16(b, 0) * (lo_hi(b[:, 2:18]) - 8)


def dq_q4_1(b):
    return f16(b, 0) * lo_hi(b[:, 4:20]) + f16(b, 2)


def q5_high(b, off):
    qh = b[:, off:off + 4].copy().view("<u4").astype(np.uint64)  # (nb, 1)
    bits = (qh >> np.arange(32, dtype=np.uint64)) & 1
    return (bits * 16).astype(np.float64)


def dq_q5_0(b):
    return f16(b, 0) * (lo_hi(b[:, 6:22]) + q5_high(b, 2) - 16)


def dq_q5_1(b):
    return f16(b, 0) * (lo_hi(b[:, 8:24]) + q5_high(b, 4)) + f16(b, 2)


def dq_q8_0(b):
    return f16(b, 0) * b[:, 2:34].view(np.int8).astype(np.float64)


def dq_iq4_nl(b):
    q = np.concatenate([b[:, 2:18] & 15, b[:, 2:18] >> 4], axis=1)
    return f16(b, 0) * IQ4NL_VALUES[q]


def dq_q2_k(b):
    scales, qs = b[:, 0:16], b[:, 16:80]
    d, dmin = f16(b, 80), f16(b, 82)
    out = np.empty((b.shape[0], 256))
    for half in range(2):
        q = qs[:, 32 * half:32 * half + 32]
        for j in range(4):
            v = ((q >> (2 * j)) & 3).astype(np.float64)
            for s in range(2):
                sc = scales[:, 8 * half + 2 * j + s][:, None]
                o = 128 * half + 32 * j + 16 * s
                out[:, o:o + 16] = d * (sc & 15) * v[:, 16 * s:16 * s + 16] - dmin * (sc >> 4)
    return out


def k_scales12(sc):
    """The 8 six-bit scales and mins of Q4_K/Q5_K from 12 bytes."""
    s = np.empty((sc.shape[0], 8), dtype=np.float64)
    m = np.empty_like(s)
    for j in range(8):
        if j < 4:
            s[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            s[:, j] = (sc[:, j + 4] & 15) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return s, m


def dq_q3_k(b):
    hm, qs, sc12, d = b[:, 0:32], b[:, 32:96], b[:, 96:108], f16(b, 108)
    # 16 six-bit scales: low 4 bits from bytes 0..7, high 2 bits from bytes 8..11
    sc = np.empty((b.shape[0], 16), dtype=np.int64)
    for i in range(16):
        low = (sc12[:, i] & 15) if i < 8 else (sc12[:, i - 8] >> 4)
        high = (sc12[:, 8 + (i % 4)] >> (2 * (i // 4))) & 3
        sc[:, i] = (low | (high << 4)).astype(np.int64) - 32
    out = np.empty((b.shape[0], 256))
    for half in range(2):
        q = qs[:, 32 * half:32 * half + 32]
        for j in range(4):
            bit = 4 * half + j
            v = ((q >> (2 * j)) & 3).astype(np.int64) - np.where((hm >> bit) & 1, 0, 4)
            for s in range(2):
                o = 128 * half + 32 * j + 16 * s
                out[:, o:o + 16] = d * sc[:, 8 * half + 2 * j + s][:, None] * v[:, 16 * s:16 * s + 16]
    return out


def dq_q4_k(b):
    d, dmin = f16(b, 0), f16(b, 2)
    s, m = k_scales12(b[:, 4:16])
    qs = b[:, 16:144]
    out = np.empty((b.shape[0], 256))
    for c in range(4):
        q = qs[:, 32 * c:32 * c + 32]
        for h in range(2):
            j = 2 * c + h
            v = (q >> (4 * h)) & 15
            out[:, 64 * c + 32 * h:64 * c + 32 * h + 32] = \
                d * s[:, j:j + 1] * v - dmin * m[:, j:j + 1]
    return out


def dq_q5_k(b):
    d, dmin = f16(b, 0), f16(b, 2)
    s, m = k_scales12(b[:, 4:16])
    qh, qs = b[:, 16:48], b[:, 48:176]
    out = np.empty((b.shape[0], 256))
    for c in range(4):
        q = qs[:, 32 * c:32 * c + 32]
        for h in range(2):
            j = 2 * c + h
            v = ((q >> (4 * h)) & 15) + ((qh >> j) & 1) * 16
            out[:, 64 * c + 32 * h:64 * c + 32 * h + 32] = \
                d * s[:, j:j + 1] * v - dmin * m[:, j:j + 1]
    return out


def dq_q6_k(b):
    ql, qh, sc, d = b[:, 0:128], b[:, 128:192], b[:, 192:208].view(np.int8), f16(b, 208)
    out = np.empty((b.shape[0], 256))
    for half in range(2):
        l_ = ql[:, 64 * half:64 * half + 64].astype(np.int64)
        h_ = qh[:, 32 * half:32 * half + 32].astype(np.int64)
        q = [(l_[:, 0:32] & 15) | (((h_ >> 0) & 3) << 4),
             (l_[:, 32:64] & 15) | (((h_ >> 2) & 3) << 4),
             (l_[:, 0:32] >> 4) | (((h_ >> 4) & 3) << 4),
             (l_[:, 32:64] >> 4) | (((h_ >> 6) & 3) << 4)]
        for k in range(4):
            for s in range(2):
                o = 128 * half + 32 * k + 16 * s
                scale = sc[:, 8 * half + 2 * k + s][:, None].astype(np.float64)
                out[:, o:o + 16] = d * scale * (q[k][:, 16 * s:16 * s + 16] - 32)
    return out


def dq_iq4_xs(b):
    d = f16(b, 0)
    sh = b[:, 2:4].copy().view("<u2").astype(np.int64)
    sl = b[:, 4:8].astype(np.int64)
    qs = b[:, 8:136]
    out = np.empty((b.shape[0], 256))
    for ib in range(8):
        ls = ((sl[:, ib // 2] >> (4 * (ib % 2))) & 15) | (((sh[:, 0] >> (2 * ib)) & 3) << 4)
        q = qs[:, 16 * ib:16 * ib + 16]
        codes = np.concatenate([q & 15, q >> 4], axis=1)
        out[:, 32 * ib:32 * ib + 32] = d * (ls - 32)[:, None] * IQ4NL_VALUES[codes]
    return out


DEQUANT = {"Q4_0": dq_q4_0, "Q4_1": dq_q4_1, "Q5_0": dq_q5_0, "Q5_1": dq_q5_1, "Q8_0": dq_q8_0,
           "Q2_K": dq_q2_k, "Q3_K": dq_q3_k, "Q4_K": dq_q4_k, "Q5_K": dq_q5_k, "Q6_K": dq_q6_k,
           "IQ4_NL": dq_iq4_nl, "IQ4_XS": dq_iq4_xs}


class GGUFFile:
    def __init__(self, path):
        mm = np.memmap(path, dtype=np.uint8, mode="r")
        if len(mm) < 24 or bytes(mm[:4]) != b"GGUF":
            raise ModelError("%s: not a GGUF file" % path)
        r = Reader(mm, 4)
        self.version = r.u32()
        n_t, n_kv = r.u64(), r.u64()
        if self.version < 2 or n_t > 1 << 20 or n_kv > 1 << 20:
            raise ModelError("%s: unsupported GGUF header" % path)
        self.meta, self.meta_types = {}, {}
        for _ in range(n_kv):
            k = r.string()
            t = r.u32()
            if t == 9:  # remember the element type: tests/reference/qfixture.py rewrites files
                et = struct.unpack("<I", bytes(mm[r.o:r.o + 4]))[0]
                self.meta_types[k] = (9, et)
            else:
                self.meta_types[k] = (t, None)
            self.meta[k] = r.value(t)
        infos = []
        for _ in range(n_t):
            name = r.string()
            nd = r.u32()
            shape = [r.u64() for _ in range(nd)]
            kind, off = r.u32(), r.u64()
            infos.append((name, shape, kind, off))
        align = int(self.meta.get("general.alignment", 32))
        base = (r.o + align - 1) // align * align
        self.tensors = {}
        for name, shape, kind, off in infos:
            if kind not in GGML:
                raise ModelError("%s: tensor %s has ggml type %d, which ref64 does not read"
                                 % (path, name, kind))
            _, blk, bb = GGML[kind]
            n = int(np.prod(shape))
            size = n // blk * bb
            if base + off + size > len(mm):
                raise ModelError("%s: tensor %s runs past the end of the file" % (path, name))
            self.tensors[name] = Tensor(name, kind, shape, mm[base + off:base + off + size])


# ---------------------------------------------------------------------------
# safetensors (Hugging Face directory)
# ---------------------------------------------------------------------------

ST_DTYPES = {"F32": 0, "F16": 1, "BF16": 30}


def read_safetensors(path, out):
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    (hl,) = struct.unpack("<Q", bytes(mm[:8]))
    hdr = json.loads(bytes(mm[8:8 + hl]))
    base = 8 + hl
    for name, d in hdr.items():
        if name == "__metadata__":
            continue
        if d["dtype"] not in ST_DTYPES:
            raise ModelError("%s: tensor %s is %s (ref64 reads F32, F16, BF16)"
                             % (path, name, d["dtype"]))
        a, b = d["data_offsets"]
        shape = list(reversed(d["shape"])) or [1]  # innermost first, as GGUF
        out[name] = Tensor(name, ST_DTYPES[d["dtype"]], shape, mm[base + a:base + b])


def load_hf_dir(path):
    cfg = json.load(open(os.path.join(path, "config.json")))
    tensors = {}
    single = os.path.join(path, "model.safetensors")
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(single):
        read_safetensors(single, tensors)
    elif os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
        for f in files:
            read_safetensors(os.path.join(path, f), tensors)
    else:
        raise ModelError("%s: no model.safetensors or model.safetensors.index.json" % path)
    return cfg, tensors


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------

class W:
    """A matrix view: rows r0..r0+rows of a stored tensor (fused sources)."""

    def __init__(self, t, r0=0, rows=None):
        self.t, self.r0 = t, r0
        self.rows = t.rows - r0 if rows is None else rows
        self.cols = t.cols

    def matmul(self, x, chunk_elems=1 << 22):
        """x (n, cols) -> (n, rows), converting the weight chunk by chunk."""
        step = max(1, chunk_elems // max(1, self.cols))
        out = np.empty((x.shape[0], self.rows))
        for a in range(0, self.rows, step):
            b = min(self.rows, a + step)
            out[:, a:b] = x @ self.t.rows_f64(self.r0 + a, self.r0 + b).T
        return out

    def vector(self):
        return self.t.rows_f64(0, self.t.rows).reshape(-1)

    def row(self, r):
        return self.t.rows_f64(self.r0 + r, self.r0 + r + 1)[0]


class Layer:
    pass


class Model:
    pass


def need(tensors, name, what):
    if name not in tensors:
        raise ModelError("missing tensor %s (%s)" % (name, what))
    return tensors[name]


def gguf_model(g):
    md, T = g.meta, g.tensors
    arch = md.get("general.architecture")
    if arch not in ("llama", "qwen2", "qwen3", "phi3", "gemma2"):
        raise ModelError("architecture %r: ref64 implements llama, qwen2, qwen3, phi3, gemma2"
                         % arch)

    def k(key, default=None):
        v = md.get(arch + "." + key, default)
        if v is None:
            raise ModelError("missing metadata %s.%s" % (arch, key))
        return v

    m = Model()
    m.arch = arch
    m.dim = int(k("embedding_length"))
    m.n_layers = int(k("block_count"))
    m.ffn = int(k("feed_forward_length"))
    m.n_heads = int(k("attention.head_count"))
    m.n_kv = int(k("attention.head_count_kv", m.n_heads))
    m.head_dim = int(k("attention.key_length", m.dim // m.n_heads))
    m.eps = float(k("attention.layer_norm_rms_epsilon", 1e-5))
    m.rope_base = float(k("rope.freq_base", 10000.0))
    m.rope_dim = int(k("rope.dimension_count", m.head_dim))
    m.rope_neox = arch != "llama"
    m.freq_scale = 1.0
    if md.get(arch + ".rope.scaling.type") == "linear":
        m.freq_scale = 1.0 / float(k("rope.scaling.factor"))
    m.rope_factors = T["rope_freqs.weight"].rows_f64(0, 1)[0] if "rope_freqs.weight" in T else None
    m.act = "gelu_tanh" if arch == "gemma2" else "silu"
    m.embed_scale = math.sqrt(m.dim) if arch == "gemma2" else 1.0
    m.norm_add = 0.0
    m.attn_softcap = m.final_softcap = 0.0
    m.windows = [0] * m.n_layers
    m.attn_scale = 1.0 / math.sqrt(m.head_dim)
    if arch == "gemma2":
        m.attn_softcap = float(k("attn_logit_softcapping", 50.0))
        m.final_softcap = float(k("final_logit_softcapping", 30.0))
        win = int(k("attention.sliding_window", 4096))
        # llama.cpp: a per-layer bool array, or every n-th layer global (default 2)
        pat = md.get(arch + ".attention.sliding_window_pattern", 2)
        if isinstance(pat, np.ndarray):
            m.windows = [win if pat[i] else 0 for i in range(m.n_layers)]
        else:
            m.windows = [win if i % int(pat) < int(pat) - 1 else 0 for i in range(m.n_layers)]
        qpas = md.get(arch + ".attention.query_pre_attn_scalar")
        if qpas is not None:
            m.attn_scale = 1.0 / math.sqrt(float(qpas))
        elif m.n_layers == 46:  # llama.cpp: Gemma 2 27B scales by dim / heads
            m.attn_scale = 1.0 / math.sqrt(m.dim / m.n_heads)
    m.tok_embd = W(need(T, "token_embd.weight", "embeddings"))
    m.output_norm = W(need(T, "output_norm.weight", "final norm"))
    # gemma2: llama.cpp always reuses token_embd as the LM head
    m.output = W(T["output.weight"]) if "output.weight" in T and arch != "gemma2" else m.tok_embd
    m.vocab = m.tok_embd.rows
    qd, kd = m.n_heads * m.head_dim, m.n_kv * m.head_dim
    m.layers = []
    for i in range(m.n_layers):
        p = "blk.%d." % i
        L = Layer()
        L.attn_norm = W(need(T, p + "attn_norm.weight", "attention norm"))
        if p + "attn_qkv.weight" in T:
            t = T[p + "attn_qkv.weight"]
            L.wq, L.wk, L.wv = W(t, 0, qd), W(t, qd, kd), W(t, qd + kd, kd)
        else:
            L.wq = W(need(T, p + "attn_q.weight", "Q"))
            L.wk = W(need(T, p + "attn_k.weight", "K"))
            L.wv = W(need(T, p + "attn_v.weight", "V"))
        L.wo = W(need(T, p + "attn_output.weight", "attention output"))
        L.bq = W(T[p + "attn_q.bias"]) if p + "attn_q.bias" in T else None
        L.bk = W(T[p + "attn_k.bias"]) if p + "attn_k.bias" in T else None
        L.bv = W(T[p + "attn_v.bias"]) if p + "attn_v.bias" in T else None
        if p + "attn_qkv.bias" in T:
            L.bq = L.bk = L.bv = None
            L.bqkv = (T[p + "attn_qkv.bias"], qd, kd)
        L.q_norm = W(T[p + "attn_q_norm.weight"]) if p + "attn_q_norm.weight" in T else None
        L.k_norm = W(T[p + "attn_k_norm.weight"]) if p + "attn_k_norm.weight" in T else None
        L.post_attn_norm = W(T[p + "post_attention_norm.weight"]) \
            if p + "post_attention_norm.weight" in T else None
        L.post_ffn_norm = W(T[p + "post_ffw_norm.weight"]) if p + "post_ffw_norm.weight" in T else None
        L.ffn_norm = W(need(T, p + "ffn_norm.weight", "FFN norm"))
        if p + "ffn_gate.weight" in T:
            L.w_gate = W(T[p + "ffn_gate.weight"])
            L.w_up = W(need(T, p + "ffn_up.weight", "FFN up"))
        else:  # phi3: ffn_up holds gate rows then up rows
            t = need(T, p + "ffn_up.weight", "FFN gate|up")
            L.w_gate, L.w_up = W(t, 0, m.ffn), W(t, m.ffn, m.ffn)
        L.w_down = W(need(T, p + "ffn_down.weight", "FFN down"))
        m.layers.append(L)
    return m


def llama3_factors(cfg, head_dim, base):
    """Divisors of the RoPE frequencies for rope_scaling.rope_type llama3."""
    rs = cfg["rope_scaling"]
    factor, lo, hi = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
    old = rs.get("original_max_position_embeddings", 8192)
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    wavelen = 2 * math.pi / inv
    smooth = (old / wavelen - lo) / (hi - lo)
    new = np.where(wavelen > old / lo, inv / factor, inv)
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    new = np.where(medium, (1 - smooth) * inv / factor + smooth * inv, new)
    return inv / new


def hf_model(path):
    cfg, T = load_hf_dir(path)
    mt = cfg.get("model_type")
    if mt == "mistral":
        mt = "llama"
    if mt not in ("llama", "qwen2", "qwen3", "phi3", "gemma2"):
        raise ModelError("model_type %r: ref64 implements llama, mistral, qwen2, qwen3, phi3, "
                         "gemma2" % mt)
    m = Model()
    m.arch = mt
    m.dim = cfg["hidden_size"]
    m.n_layers = cfg["num_hidden_layers"]
    m.ffn = cfg["intermediate_size"]
    m.n_heads = cfg["num_attention_heads"]
    m.n_kv = cfg.get("num_key_value_heads") or m.n_heads
    m.head_dim = cfg.get("head_dim") or m.dim // m.n_heads
    m.eps = float(cfg.get("rms_norm_eps", 1e-6))
    m.rope_base = float(cfg.get("rope_theta", 10000.0))
    m.rope_dim = int(m.head_dim * cfg.get("partial_rotary_factor", 1.0))
    m.rope_neox = True  # Hugging Face rotate_half
    m.freq_scale = 1.0
    m.rope_factors = None
    rs = cfg.get("rope_scaling") or {}
    rtype = rs.get("rope_type", rs.get("type"))
    if rtype == "llama3":
        m.rope_factors = llama3_factors(cfg, m.rope_dim, m.rope_base)
    elif rtype == "linear":
        m.freq_scale = 1.0 / rs["factor"]
    elif rtype not in (None, "default"):
        raise ModelError("rope_scaling %r: ref64 implements llama3 and linear" % rtype)
    m.act = "gelu_tanh" if mt == "gemma2" else "silu"
    m.embed_scale = math.sqrt(m.dim) if mt == "gemma2" else 1.0
    m.norm_add = 1.0 if mt == "gemma2" else 0.0
    m.attn_scale = 1.0 / math.sqrt(m.head_dim)
    m.attn_softcap = m.final_softcap = 0.0
    m.windows = [0] * m.n_layers
    if mt == "gemma2":
        m.attn_scale = float(cfg.get("query_pre_attn_scalar", m.head_dim)) ** -0.5
        m.attn_softcap = float(cfg.get("attn_logit_softcapping") or 0.0)
        m.final_softcap = float(cfg.get("final_logit_softcapping") or 0.0)
        win = int(cfg.get("sliding_window") or 0)
        m.windows = [win if i % 2 == 0 else 0 for i in range(m.n_layers)]
    if "model.embed_tokens.weight" not in T and "lm_head.weight" in T \
            and cfg.get("tie_word_embeddings", True):
        T["model.embed_tokens.weight"] = T["lm_head.weight"]  # tied, stored once
    m.tok_embd = W(need(T, "model.embed_tokens.weight", "embeddings"))
    m.output_norm = W(need(T, "model.norm.weight", "final norm"))
    m.output = W(T["lm_head.weight"]) if "lm_head.weight" in T else m.tok_embd
    m.vocab = m.tok_embd.rows
    qd, kd = m.n_heads * m.head_dim, m.n_kv * m.head_dim
    m.layers = []
    for i in range(m.n_layers):
        p = "model.layers.%d." % i
        L = Layer()
        L.attn_norm = W(need(T, p + "input_layernorm.weight", "input norm"))
        a = p + "self_attn."
        if a + "qkv_proj.weight" in T:
            t = T[a + "qkv_proj.weight"]
            L.wq, L.wk, L.wv = W(t, 0, qd), W(t, qd, kd), W(t, qd + kd, kd)
        else:
            L.wq = W(need(T, a + "q_proj.weight", "Q"))
            L.wk = W(need(T, a + "k_proj.weight", "K"))
            L.wv = W(need(T, a + "v_proj.weight", "V"))
        L.wo = W(need(T, a + "o_proj.weight", "attention output"))
        L.bq = W(T[a + "q_proj.bias"]) if a + "q_proj.bias" in T else None
        L.bk = W(T[a + "k_proj.bias"]) if a + "k_proj.bias" in T else None
        L.bv = W(T[a + "v_proj.bias"]) if a + "v_proj.bias" in T else None
        L.q_norm = W(T[a + "q_norm.weight"]) if a + "q_norm.weight" in T else None
        L.k_norm = W(T[a + "k_norm.weight"]) if a + "k_norm.weight" in T else None
        if mt == "gemma2":
            L.post_attn_norm = W(need(T, p + "post_attention_layernorm.weight", "post-attn norm"))
            L.ffn_norm = W(need(T, p + "pre_feedforward_layernorm.weight", "FFN norm"))
            L.post_ffn_norm = W(need(T, p + "post_feedforward_layernorm.weight", "post-FFN norm"))
        else:
            L.post_attn_norm = L.post_ffn_norm = None
            L.ffn_norm = W(need(T, p + "post_attention_layernorm.weight", "FFN norm"))
        f = p + "mlp."
        if f + "gate_up_proj.weight" in T:
            t = T[f + "gate_up_proj.weight"]
            L.w_gate, L.w_up = W(t, 0, m.ffn), W(t, m.ffn, m.ffn)
        else:
            L.w_gate = W(need(T, f + "gate_proj.weight", "FFN gate"))
            L.w_up = W(need(T, f + "up_proj.weight", "FFN up"))
        L.w_down = W(need(T, f + "down_proj.weight", "FFN down"))
        m.layers.append(L)
    return m


def load_model(path):
    if os.path.isdir(path):
        return hf_model(path)
    return gguf_model(GGUFFile(path))


# ---------------------------------------------------------------------------
# forward pass
# ---------------------------------------------------------------------------

TIE_EPS = 1e-4  # |x*127/amax - (k + 1/2)| below this: a rounding tie (see qact)


def qact(x, block, ties=None, flips=(), name="", pos0=0):
    """nibble's int8 activation quantization of each row, per block of inputs.

    Where x*127/amax lies within TIE_EPS of a half-integer, float64 and
    nibble's f32 arithmetic may round to different codes (a value that is an
    exact tie in real arithmetic, as rows of d * integer weights make, is a
    few f32 ulps to either side in nibble); such elements are recorded in
    ties as (name, position, index), and the ones in flips are rounded to
    the other neighbour, so that a caller can find the rounding nibble took."""
    if not block:
        return x
    n, k = x.shape
    pad = (-k) % block
    xp = np.pad(x, ((0, 0), (0, pad))).reshape(n, -1, block)
    amax = np.abs(xp).max(axis=2, keepdims=True)
    inv = np.where(amax > 0, 127.0 / np.where(amax > 0, amax, 1), 0.0)
    v = (xp * inv).reshape(n, -1)
    q = np.round(v)  # numpy rounds half to even
    near = np.abs(np.abs(v - np.floor(v)) - 0.5) < TIE_EPS
    if near.any() and ties is not None:
        for r, i in zip(*np.nonzero(near)):
            if i >= k:
                continue
            key = (name, pos0 + int(r), int(i))
            ties.append(key)
            if key in flips:
                q[r, i] = q[r, i] - 1 if q[r, i] >= v[r, i] else q[r, i] + 1
    q = np.clip(q, -127, 127).reshape(n, -1, block)
    return (q * (amax / 127.0)).reshape(n, -1)[:, :k]


def rmsnorm(x, w, eps, add):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (w + add)


def rope(x, pos, m):
    """x (n, heads, head_dim) at positions pos (n,), rotated in place of a copy."""
    half = m.rope_dim // 2
    inv = m.rope_base ** (-2.0 * np.arange(half) / m.rope_dim)
    if m.rope_factors is not None:
        inv = inv / m.rope_factors[:half]
    th = (pos[:, None] * m.freq_scale) * inv[None, :]
    c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
    y = x.copy()
    if m.rope_neox:
        a, b = x[..., :half], x[..., half:2 * half]
        y[..., :half], y[..., half:2 * half] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        y[..., 0:2 * half:2], y[..., 1:2 * half:2] = a * c - b * s, a * s + b * c
    return y


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class Runner:
    """Keeps the KV cache: forward(ids) appends tokens, returns their logits."""

    def __init__(self, m, qblocks=None, flips=()):
        self.m, self.qb = m, qblocks or {}
        self.ties, self.flips = [], set(flips)  # see qact
        self.k = [np.zeros((0, m.n_kv, m.head_dim)) for _ in m.layers]
        self.v = [np.zeros((0, m.n_kv, m.head_dim)) for _ in m.layers]
        self.pos = 0
        self.vectors = {}

    def vec(self, w):
        key = id(w)
        if key not in self.vectors:
            self.vectors[key] = w.vector()
        return self.vectors[key]

    def qa(self, name, x):
        return qact(x, self.qb.get(name, 0), self.ties, self.flips, name, self.pos)

    def mm(self, name, w, x):
        return w.matmul(self.qa(name, x))

    def forward(self, ids):
        m = self.m
        n = len(ids)
        pos = np.arange(self.pos, self.pos + n, dtype=np.float64)
        x = np.stack([m.tok_embd.row(int(t)) for t in ids]) * m.embed_scale
        for i, L in enumerate(m.layers):
            p = "blk.%d." % i
            h = rmsnorm(x, self.vec(L.attn_norm), m.eps, m.norm_add)
            hq = self.qa(p + "attn_qkv", h)
            q, k, v = L.wq.matmul(hq), L.wk.matmul(hq), L.wv.matmul(hq)
            if L.bq is not None:
                q, k, v = q + self.vec(L.bq), k + self.vec(L.bk), v + self.vec(L.bv)
            elif getattr(L, "bqkv", None) is not None:
                t, qd, kd = L.bqkv
                b = t.rows_f64(0, t.rows).reshape(-1)
                q, k, v = q + b[:qd], k + b[qd:qd + kd], v + b[qd + kd:qd + 2 * kd]
            q = q.reshape(n, m.n_heads, m.head_dim)
            k = k.reshape(n, m.n_kv, m.head_dim)
            v = v.reshape(n, m.n_kv, m.head_dim)
            if L.q_norm is not None:
                q = rmsnorm(q, self.vec(L.q_norm), m.eps, m.norm_add)
                k = rmsnorm(k, self.vec(L.k_norm), m.eps, m.norm_add)
            q, k = rope(q, pos, m), rope(k, pos, m)
            self.k[i] = np.concatenate([self.k[i], k])
            self.v[i] = np.concatenate([self.v[i], v])
            K, V = self.k[i], self.v[i]
            T = K.shape[0]
            kpos = np.arange(T)
            qpos = np.arange(self.pos, self.pos + n)
            mask = kpos[None, :] <= qpos[:, None]
            if m.windows[i]:
                mask &= kpos[None, :] > qpos[:, None] - m.windows[i]
            grp = m.n_heads // m.n_kv
            att = np.empty((n, m.n_heads, m.head_dim))
            for hh in range(m.n_heads):
                kv = hh // grp
                s = (q[:, hh, :] @ K[:, kv, :].T) * m.attn_scale
                if m.attn_softcap:
                    s = m.attn_softcap * np.tanh(s / m.attn_softcap)
                s = np.where(mask, s, -np.inf)
                s = np.exp(s - s.max(axis=1, keepdims=True))
                s /= s.sum(axis=1, keepdims=True)
                att[:, hh, :] = s @ V[:, kv, :]
            o = self.mm(p + "attn_output", L.wo, att.reshape(n, -1))
            if L.post_attn_norm is not None:
                o = rmsnorm(o, self.vec(L.post_attn_norm), m.eps, m.norm_add)
            x = x + o
            h = rmsnorm(x, self.vec(L.ffn_norm), m.eps, m.norm_add)
            hq = self.qa(p + "ffn_gate_up", h)
            g, u = L.w_gate.matmul(hq), L.w_up.matmul(hq)
            a = gelu_tanh(g) if m.act == "gelu_tanh" else g / (1.0 + np.exp(-g))
            d = self.mm(p + "ffn_down", L.w_down, a * u)
            if L.post_ffn_norm is not None:
                d = rmsnorm(d, self.vec(L.post_ffn_norm), m.eps, m.norm_add)
            x = x + d
        self.pos += n
        h = rmsnorm(x, self.vec(m.output_norm), m.eps, m.norm_add)
        logits = self.mm("output", m.output, h)
        if m.final_softcap:
            logits = m.final_softcap * np.tanh(logits / m.final_softcap)
        return logits


def parse_ids(s):
    return [int(t) for t in s.replace(",", " ").split()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="a .gguf file or a Hugging Face directory")
    ap.add_argument("--ids", required=True, help="token ids, comma-separated")
    ap.add_argument("--gen", type=int, default=0, help="greedy tokens to generate after --ids")
    ap.add_argument("--logits-out", help="write the logits of every --ids position (.npy, f64)")
    ap.add_argument("--qact", default="", help="NAME=BLOCK,... activation quantization")
    ap.add_argument("--qact-json", help="a JSON object {NAME: BLOCK} (the test driver's)")
    a = ap.parse_args(argv)
    try:
        m = load_model(a.model)
        ids = parse_ids(a.ids)
        if not ids or min(ids) < 0 or max(ids) >= m.vocab:
            raise ModelError("--ids: every id must be in 0..%d" % (m.vocab - 1))
        qb = {}
        if a.qact_json:
            qb.update({k: int(v) for k, v in json.load(open(a.qact_json)).items()})
        for item in filter(None, a.qact.split(",")):
            k, _, v = item.partition("=")
            qb[k] = int(v)
        r = Runner(m, qb)
        logits = r.forward(ids)
        if a.logits_out:
            np.save(a.logits_out, logits)
        gen = []
        last = logits[-1]
        for _ in range(a.gen):
            t = int(np.argmax(last))
            gen.append(t)
            last = r.forward([t])[-1]
    except (ModelError, OSError, KeyError, ValueError) as e:
        print("ref64: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps({"model": a.model, "arch": m.arch, "vocab": m.vocab, "positions": len(ids),
                      "top1": [int(i) for i in np.argmax(logits, axis=1)],
                      "generated": gen, "logits": a.logits_out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
