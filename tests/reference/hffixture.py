#!/usr/bin/env python3
"""A Hugging Face directory from a GGUF of the same model, for the reference
tests: config.json, model.safetensors (F32, Hugging Face tensor names) and
the tokenizer files of a Hugging Face directory the GGUF's vocabulary came
from (nib synth SHAPE --vocab DIR).

What differs between the two forms is undone here, as llama.cpp's converter
does it in the other direction: a GGUF llama's Q and K rows are in adjacent-
pair RoPE order and go back to Hugging Face's rotate-half order (per head,
row 2i -> i, 2i+1 -> i + head_dim/2); a Gemma norm weight in GGUF holds
1 + w and goes back to w; Llama 3 frequency factors become the rope_scaling
(llama3) that gives them, to f32 rounding (found among factors 8, 16, 32,
low 1, high 4, original contexts 2^4..2^17; otherwise refused). ref64 then reads the directory
and the GGUF through separate code paths, and nibble imports each.

  hffixture.py MODEL.gguf OUT_DIR --tokenizer-from HF_DIR
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

import ref64

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "generation_config.json")


def unpermute(w, n_head):
    """GGUF llama Q/K rows (adjacent pairs) -> Hugging Face rows (halves)."""
    rows, cols = w.shape
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def llama3_params(m):
    """The rope_scaling (llama3) whose frequency divisors rope_freqs.weight holds."""
    for factor in (8.0, 16.0, 32.0):
        for k in range(4, 18):
            rs = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 1 << k}
            want = ref64.llama3_factors({"rope_scaling": rs}, m.rope_dim, m.rope_base)
            if np.allclose(want, m.rope_factors[:len(want)], rtol=1e-5):
                return rs
    return None


def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def build(gguf_path, out_dir, tok_dir):
    g = ref64.GGUFFile(gguf_path)
    md, T = g.meta, g.tensors
    arch = md["general.architecture"]
    m = ref64.gguf_model(g)

    def full(name):
        t = T[name]
        a = t.rows_f64(0, t.rows)
        return a.reshape(-1) if t.rows == 1 else a

    gem = arch == "gemma2"
    norm = (lambda a: a - 1.0) if gem else (lambda a: a)
    out = {"model.embed_tokens.weight": full("token_embd.weight"),
           "model.norm.weight": norm(full("output_norm.weight"))}
    tied = "output.weight" not in T or gem
    if not tied:
        out["lm_head.weight"] = full("output.weight")
    for i in range(m.n_layers):
        b, h = "blk.%d." % i, "model.layers.%d." % i
        out[h + "input_layernorm.weight"] = norm(full(b + "attn_norm.weight"))
        if b + "attn_qkv.weight" in T:
            out[h + "self_attn.qkv_proj.weight"] = full(b + "attn_qkv.weight")
        else:
            q, k = full(b + "attn_q.weight"), full(b + "attn_k.weight")
            if arch == "llama":
                q, k = unpermute(q, m.n_heads), unpermute(k, m.n_kv)
            out[h + "self_attn.q_proj.weight"] = q
            out[h + "self_attn.k_proj.weight"] = k
            out[h + "self_attn.v_proj.weight"] = full(b + "attn_v.weight")
        for x in "qkv":
            if b + "attn_%s.bias" % x in T:
                out[h + "self_attn.%s_proj.bias" % x] = full(b + "attn_%s.bias" % x)
        for x in "qk":
            if b + "attn_%s_norm.weight" % x in T:
                out[h + "self_attn.%s_norm.weight" % x] = full(b + "attn_%s_norm.weight" % x)
        out[h + "self_attn.o_proj.weight"] = full(b + "attn_output.weight")
        if gem:
            out[h + "post_attention_layernorm.weight"] = norm(full(b + "post_attention_norm.weight"))
            out[h + "pre_feedforward_layernorm.weight"] = norm(full(b + "ffn_norm.weight"))
            out[h + "post_feedforward_layernorm.weight"] = norm(full(b + "post_ffw_norm.weight"))
        else:
            out[h + "post_attention_layernorm.weight"] = full(b + "ffn_norm.weight")
        if b + "ffn_gate.weight" in T:
            out[h + "mlp.gate_proj.weight"] = full(b + "ffn_gate.weight")
            out[h + "mlp.up_proj.weight"] = full(b + "ffn_up.weight")
        else:
            out[h + "mlp.gate_up_proj.weight"] = full(b + "ffn_up.weight")
        out[h + "mlp.down_proj.weight"] = full(b + "ffn_down.weight")

    cfg = {"architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                              "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM",
                              "gemma2": "Gemma2ForCausalLM"}[arch]],
           "model_type": arch, "hidden_size": m.dim, "intermediate_size": m.ffn,
           "num_hidden_layers": m.n_layers, "num_attention_heads": m.n_heads,
           "num_key_value_heads": m.n_kv, "head_dim": m.head_dim, "rms_norm_eps": m.eps,
           "rope_theta": m.rope_base, "vocab_size": m.vocab, "tie_word_embeddings": tied,
           "max_position_embeddings": int(md.get(arch + ".context_length", 2048)),
           "torch_dtype": "float32", "hidden_act": "gelu_pytorch_tanh" if gem else "silu",
           "bos_token_id": int(md.get("tokenizer.ggml.bos_token_id", 1)),
           "eos_token_id": int(md.get("tokenizer.ggml.eos_token_id", 2))}
    if m.rope_dim != m.head_dim:
        cfg["partial_rotary_factor"] = m.rope_dim / m.head_dim
    if m.rope_factors is not None:
        cfg["rope_scaling"] = llama3_params(m)
        if cfg["rope_scaling"] is None:
            raise ref64.ModelError("%s: rope_freqs.weight is no llama3 schedule (factor 8, 16 or "
                                   "32, low 1, high 4, original context a power of two)"
                                   % gguf_path)
    if m.freq_scale != 1.0:
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": 1.0 / m.freq_scale}
    if gem:
        cfg.update(query_pre_attn_scalar=int(round(m.attn_scale ** -2)),
                   attn_logit_softcapping=m.attn_softcap, final_logit_softcapping=m.final_softcap,
                   sliding_window=max(m.windows), hidden_activation="gelu_pytorch_tanh")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), out)
    for name in TOKENIZER_FILES:
        if os.path.exists(os.path.join(tok_dir, name)):
            shutil.copy(os.path.join(tok_dir, name), os.path.join(out_dir, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("out_dir")
    ap.add_argument("--tokenizer-from", required=True)
    a = ap.parse_args()
    build(a.gguf, a.out_dir, a.tokenizer_from)
    return 0


if __name__ == "__main__":
    sys.exit(main())
