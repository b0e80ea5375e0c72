#!/usr/bin/env python3
"""Writes GGUF fixtures of llama.cpp's `gemma4` architecture, made by llama.cpp's own converter
(convert_hf_to_gguf.py: conversion/gemma.py's Gemma4Model, --outtype f32) from the committed
safetensors fixtures of scripts/make_gemma4_fixtures.py, unchanged:

  gguf_gemma4_dense  from gemma4_dense (31B-like: attention_k_eq_v, full layers of 1 KV head of 32
                     over sliding ones of 2 of 16, proportional RoPE over a quarter of the full heads)
  gguf_gemma4_e2b    from gemma4_e2b (E2B-like: per-layer inputs of 8, the last 2 layers reusing
                     earlier layers' K/V with double-wide MLPs)
  gguf_gemma4_moe    from gemma4_moe (26B-A4B-like: the MoE block beside the dense MLP)

The checkpoint is copied with a toy tokenizer.json (Gemma4Model.set_vocab reads a byte-fallback
BPE through LlamaHfVocab): 128 tokens, <pad> 0, <eos> 1, <bos> 2, <unk> 3 (Gemma's ids), a..z, ab
with its merge (llama.cpp's gemma4 vocabulary requires merges), the rest filler pieces. The
prompts are token ids, so the vocabulary changes no logit. No expected.json is written: the tests
compare with the safetensors fixtures' (transformers') one.

Then `--llamacpp [NAME...]` runs each file in llama.cpp itself (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv, F32 KV cache) on the prompts of the source fixture's expected.json and
writes llamacpp.json: per prompt how far llama.cpp's logits (prefill, then its decode steps fed
transformers' greedy tokens) are from transformers'. Measured (prompts of 7, 1 and 40 tokens):
  gguf_gemma4_dense  1.9e-03, 1.5e-03, 4.5e-03 (decode 3.3e-03, 1.5e-03, 3.1e-03)
  gguf_gemma4_moe    1.4e-03, 1.4e-03, 2.9e-03 (decode 1.4e-03, 1.4e-03, 2.0e-03)
  gguf_gemma4_e2b    not run by default: llama.cpp aborts loading it (llama-kv-cache.cpp
                     GGML_ASSERT(map_layer_ids.find(il_reuse) != ...)): its K/V-reuse rule
                     (llama-model.cpp: a shared layer reuses the last KV layer if full, the one
                     before if sliding) assumes the last KV layer is full, as in Google's E2B / E4B;
                     this fixture's (layer 3) slides, where transformers' rule (the last earlier
                     layer of the same type) is what brigade follows.
brigade's own differences from transformers on these files are 1e-5 (tests/models/gguf_gemma4_test.cpp).

Run: python3 scripts/make_gguf_gemma4_fixtures.py [NAME...], then
python3 scripts/make_gguf_gemma4_fixtures.py --llamacpp [NAME...]. CI never runs it: the fixtures
are committed.
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

# name: source fixture (tests/fixtures/<source>, scripts/make_gemma4_fixtures.py)
FIXTURES = {"gguf_gemma4_dense": "gemma4_dense", "gguf_gemma4_e2b": "gemma4_e2b", "gguf_gemma4_moe": "gemma4_moe"}


def write_tokenizer(model_dir, vocab_size):
    """A byte-fallback BPE of vocab_size pieces with Gemma's special tokens at 0..3 and one merge
    (module docstring); decoder a Sequence, as LlamaHfVocab requires."""
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast
    specials = ["<pad>", "<eos>", "<bos>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials)}
    letters = "abcdefghijklmnopqrstuvwxyz"
    for i in range(len(specials), vocab_size):
        j = i - len(specials)
        vocab[letters[j] if j < len(letters) else "ab" if j == len(letters) else f"tok{i}"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")], unk_token="<unk>", byte_fallback=True))
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens([AddedToken(t, special=True) for t in specials])
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>",
                            unk_token="<unk>").save_pretrained(str(model_dir))


def make(name):
    source = FIXTURES[name]
    src = mf.OUT / source
    out_dir = mf.OUT / name
    out_dir.mkdir(parents=True, exist_ok=True)
    config = json.loads((src / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / source
        d.mkdir()
        for f in ("config.json", "model.safetensors"):
            shutil.copy(src / f, d / f)
        write_tokenizer(d, config["vocab_size"])
        lfm2.convert(d, out_dir / "model.gguf", "f32", "default")


def llamacpp_pass(names):
    """make_gguf_qwen35_fixtures.llamacpp_pass on the source fixture's expected.json (F32 KV
    cache): llamacpp.json's logits_max_diff per prompt, and the decode steps' (llama.cpp fed the
    greedy tokens one at a time) in decode_max_diff. Recorded, not bounded: the test compares
    brigade with transformers."""
    import llama_cpp
    import numpy as np
    for name in names:
        out_dir = mf.OUT / name
        m = llama_cpp.Llama(str(out_dir / "model.gguf"), n_ctx=64, logits_all=True, verbose=False, n_threads=2,
                            type_k=0, type_v=0)
        doc = {"generator": f"llama-cpp-python {llama_cpp.__version__}", "logits_max_diff": [], "decode_max_diff": []}
        for c in json.loads((mf.OUT / FIXTURES[name] / "expected.json").read_text())["cases"]:
            m.reset()
            m.eval(c["prompt"])
            d = float(np.abs(np.array(m.scores[:len(c["prompt"])]) - np.array(c["logits"])).max())
            worst = 0.0
            for i, step in enumerate(c["decode_logits"]):
                m.eval([c["greedy"][i]])
                worst = max(worst, float(np.abs(np.array(m.scores[m.n_tokens - 1]) - np.array(step)).max()))
            doc["logits_max_diff"].append(d)
            doc["decode_max_diff"].append(worst)
            print(f"{name}: prompt of {len(c['prompt'])}: llama.cpp's logits within {d:.2g} of transformers' "
                  f"(decode steps {worst:.2g})")
        (out_dir / "llamacpp.json").write_text(json.dumps(doc) + "\n")


def main():
    if sys.argv[1:2] == ["--llamacpp"]:
        mf.ensure_llamacpp_venv(__file__, sys.argv[1:])
        return llamacpp_pass(sys.argv[2:] or ["gguf_gemma4_dense", "gguf_gemma4_moe"])
    mf.ensure_venv(__file__)
    q35.ensure_llamacpp()
    for name in sys.argv[1:] or list(FIXTURES):
        make(name)


if __name__ == "__main__":
    main()
