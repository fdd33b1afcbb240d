#!/usr/bin/env python3
"""chat_mini.py OUTDIR | chat_mini.py --blob NIB OUT.blob

A small byte-level BPE tokenizer directory for the serve loop's chat tests
(tests/rt/test_serve.c), in Hugging Face's format; with --blob, also the
model `nib synth --vocab` makes of it (seed 11), compiled into OUT.blob:

  tokenizer.json          the 256 byte tokens (GPT-2's printable alphabet),
                          three merges, added tokens <s> 259 (BOS, added by
                          the post-processor), <|im_start|> 260, <|im_end|>
                          261, <|endoftext|> 262 (all special), <tool> 263 (not)
  tokenizer_config.json   bos <s>, eos <|im_end|>, and a ChatML-style chat
                          template that writes bos_token itself, puts the
                          pinned date (strftime_now) in a default system
                          message and raises an exception when user and
                          assistant do not alternate
  generation_config.json  end of generation: <|im_end|> and <|endoftext|>
"""
import json
import os
import subprocess
import sys
import tempfile

TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set sys = messages[0]['content'] %}{% set msgs = messages[1:] %}"
    "{% else %}{% set sys = 'Today is ' + strftime_now('%d %b %Y') %}{% set msgs = messages %}"
    "{% endif %}"
    "<|im_start|>system\n{{ sys }}<|im_end|>\n"
    "{% for m in msgs %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_alphabet():
    out, k = [], 0
    for b in range(256):
        printable = 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF
        out.append(chr(b if printable else 0x100 + k))
        if not printable:
            k += 1
    return out


def write_dir(out):
    os.makedirs(out, exist_ok=True)
    alpha = byte_alphabet()
    vocab = {alpha[b]: b for b in range(256)}
    vocab.update({"\u0120t": 256, "he": 257, "\u0120the": 258})
    added = [(259, "<s>", True), (260, "<|im_start|>", True), (261, "<|im_end|>", True),
             (262, "<|endoftext|>", True), (263, "<tool>", False)]
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": not s, "special": s}
                         for i, c, s in added],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_RE}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [259],
                                                      "tokens": ["<s>"]}}},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": ["\u0120 t", "h e", "\u0120t he"]},
    }
    config = {"add_bos_token": True, "bos_token": "<s>", "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "chat_template": TEMPLATE}
    gen = {"bos_token_id": 259, "eos_token_id": [261, 262]}
    for name, obj in (("tokenizer.json", tok), ("tokenizer_config.json", config),
                      ("generation_config.json", gen)):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)


def main():
    if sys.argv[1] != "--blob":
        write_dir(sys.argv[1])
        return 0
    nib, blob = sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as d:
        write_dir(d)
        gguf = os.path.join(d, "chat-mini.gguf")
        for cmd in ([nib, "synth", "--vocab", d, "--seed", "11", "-o", gguf],
                    [nib, "compile", gguf, "-o", blob]):
            r = subprocess.run(cmd, capture_output=True)
            if r.returncode:
                sys.stderr.write("%s: %s" % (" ".join(cmd), r.stderr.decode(errors="replace")))
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
