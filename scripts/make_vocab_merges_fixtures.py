#!/usr/bin/env python3
"""Writes a slow GPT-2-family tokenizer laid out as Salesforce/codegen-350M-mono's repository has
it, and the ids transformers gives for code with it, for tests/models/tokenizer_vocab_test.cpp:

  tests/fixtures/tokenizers/codegen_slow/
    vocab.json, merges.txt     the committed byte-level BPE of tests/fixtures/tokenizers/qwen2 (700
                               tokens, 444 merges) written as the slow files (GPT2Converter reads them
                               with GPT-2's split)
    added_tokens.json          CodeGen's legacy added tokens: runs of 2 to 9 spaces and of 2 to 4
                               tabs after the vocabulary (ids 701 ...), and "<|endoftext|>" (700)
    tokenizer_config.json      as CodeGen's: tokenizer_class CodeGenTokenizer, bos / eos / unk
                               "<|endoftext|>", add_prefix_space false, no added_tokens_decoder (so
                               transformers reads added_tokens.json)
    special_tokens_map.json
    vectors.json               per text: AutoTokenizer's encode(text, add_special_tokens=False) and
                               decode(ids)

Run from anywhere: python3 scripts/make_vocab_merges_fixtures.py (it re-runs itself in
.brigade/fixtures-venv). The output is committed; CI never runs this.
"""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_fixtures import ROOT, ensure_venv  # noqa: E402

ensure_venv(__file__)

from transformers import AutoTokenizer  # noqa: E402

BASE = ROOT / "tests" / "fixtures" / "tokenizers" / "qwen2" / "tokenizer.json"
OUT = ROOT / "tests" / "fixtures" / "tokenizers" / "codegen_slow"

TEXTS = [
    "def f(x):\n    return x + 1\n",
    "def g():\n\tif x:\n\t\treturn  y\n",
    "class A:\n        pass\n\n\n",
    "a  b   c    d     e      f       g        h         i          j",
    "\t\t\t\tdeep\t\t\t\t\t",
    "if y:\n\t\t\tz = 3",
    "x = 1<|endoftext|>y = 2",
    "  leading and trailing  ",
    "# comment: 3 spaces   then tab\tend",
    "",
]


def main():
    base = json.loads(BASE.read_text())
    vocab = base["model"]["vocab"]
    merges = base["model"]["merges"]
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    (OUT / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False) + "\n")
    lines = ["#version: 0.2"] + [" ".join(m) if isinstance(m, list) else m for m in merges]
    (OUT / "merges.txt").write_text("\n".join(lines) + "\n")
    eot = "<|endoftext|>"
    added = {eot: len(vocab)}
    for n in range(9, 1, -1):  # CodeGen lists the longest run first
        added[" " * n] = len(added) + len(vocab)
    for n in range(4, 1, -1):
        added["\t" * n] = len(added) + len(vocab)
    (OUT / "added_tokens.json").write_text(json.dumps(added, indent=1) + "\n")
    special = {"bos_token": eot, "eos_token": eot, "unk_token": eot}
    (OUT / "special_tokens_map.json").write_text(json.dumps(special) + "\n")
    config = {"tokenizer_class": "CodeGenTokenizer", "add_prefix_space": False, "model_max_length": 2048,
              **{k: {"__type": "AddedToken", "content": eot, "lstrip": False, "normalized": True, "rstrip": False,
                     "single_word": False} for k in special}}
    (OUT / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")

    tok = AutoTokenizer.from_pretrained(OUT)
    vectors = []
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        vectors.append({"text": text, "ids": ids, "decoded": tok.decode(ids)})
    # The added runs are tokens of their own: some text above uses each.
    used = {i for v in vectors for i in v["ids"]}
    assert all(i in used for i in added.values()), sorted(set(added.values()) - used)
    (OUT / "vectors.json").write_text(json.dumps({"tokenizer": type(tok).__name__, "vectors": vectors},
                                                 ensure_ascii=False, indent=1) + "\n")
    print(f"{OUT}: {type(tok).__name__}, {len(vectors)} texts")


if __name__ == "__main__":
    main()
