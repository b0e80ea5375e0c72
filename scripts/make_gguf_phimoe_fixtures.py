#!/usr/bin/env python3
"""Writes tests/fixtures/gguf_phimoe: llama.cpp's `phimoe` GGUF (Phi-3.5-MoE) of make_fixtures.py's
phimoe checkpoint, by llama.cpp's own converter (conversion/phi.py PhiMoeModel, a Phi3MiniModel,
registered for the Hub's class name PhiMoEForCausalLM), and llama.cpp's run of it as the reference.

The source is the phimoe fixture's weights with its config.json changed where the converter needs
it: architectures PhiMoEForCausalLM (the Hub's remote-code name, the one the converter knows) and
max_position_embeddings 512 over original_max_position_embeddings 256, so that the file's longrope
runs its long factors (rope_factors_long; llama.cpp picks them where its context, 512 here, exceeds
the original one, as brigade does where context_length does) with the converter's attention factor
sqrt(1 + ln 2 / ln 256). The toy byte-level vocabulary is make_gguf_deepseek_fixtures.py's, declared
a GPT2Tokenizer (Phi3MiniModel.set_vocab reads tokenizer.model otherwise), pre-tokenizer gpt-2.

llama.cpp's phimoe graph (phi3's, src/models/phi3.cpp) is not transformers' PhimoeForCausalLM:
RMSNorms with biases where transformers has LayerNorms, the top 2 of the router's softmax
renormalised where transformers has sparsemixer, the converter's attention factor where
transformers takes short_mscale / long_mscale, and no sliding window. brigade follows llama.cpp for
these files (models/gguf_phimoe.h), so expected.json is llama.cpp's run of model.gguf (llama-cpp-
python 0.3.36 in .brigade/llamacpp-venv, n_ctx 512, F32 KV cache): every prompt position's
logits, the greedy continuation and the logits of each cached decode step; llamacpp.json holds
how far those are from transformers' logits of the phimoe fixture (transformers_max_diff: the rules
above and the long factors).

Run: python3 scripts/make_gguf_phimoe_fixtures.py (make_fixtures.py's virtual environment), then
python3 scripts/make_gguf_phimoe_fixtures.py --llamacpp (the llama.cpp environment). CI never runs
it: the fixture is committed.
"""
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_deepseek_fixtures as dsf  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

NAME, SOURCE = "gguf_phimoe", "phimoe"
CONFIG_CHANGES = {"architectures": ["PhiMoEForCausalLM"], "max_position_embeddings": 512}
N_CTX = 512


def make():
    """The converter's file of the source checkpoint (module docstring)."""
    out_dir = mf.OUT / NAME
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / SOURCE
        d.mkdir()
        for f in ("config.json", "model.safetensors"):
            shutil.copy(mf.OUT / SOURCE / f, d / f)
        cfg = {**json.loads((d / "config.json").read_text()), **CONFIG_CHANGES}
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        dsf.write_toy_tokenizer(d, cfg["vocab_size"])
        tok_cfg = json.loads((d / "tokenizer_config.json").read_text())
        (d / "tokenizer_config.json").write_text(json.dumps({**tok_cfg, "tokenizer_class": "GPT2Tokenizer"}) + "\n")
        lfm2.convert(d, out_dir / "model.gguf", "f32", "gpt-2")
    print(f"{NAME}: model.gguf {(out_dir / 'model.gguf').stat().st_size / 1024:.0f} KiB")


def llamacpp_pass():
    """expected.json and llamacpp.json (module docstring), in the llama-cpp-python venv."""
    import llama_cpp
    import numpy as np
    out_dir = mf.OUT / NAME
    m = llama_cpp.Llama(str(out_dir / "model.gguf"), n_ctx=N_CTX, logits_all=True, verbose=False, n_threads=2,
                        type_k=0, type_v=0)
    vocab = json.loads((mf.OUT / SOURCE / "config.json").read_text())["vocab_size"]
    cases = dsf.llamacpp_cases(m, mf.prompts_for(vocab))
    mf.write_expected(out_dir, NAME, f"llama-cpp-python {llama_cpp.__version__} (llama.cpp's phimoe) on model.gguf: "
                      f"{SOURCE}'s checkpoint with {CONFIG_CHANGES} by llama.cpp's converter, --outtype f32; "
                      f"n_ctx {N_CTX}, F32 KV cache", vocab, cases)
    hf = json.loads((mf.OUT / SOURCE / "expected.json").read_text())["cases"]
    doc = {"generator": f"llama-cpp-python {llama_cpp.__version__}",
           "transformers_max_diff": [float(np.abs(np.array(c["logits"]) - np.array(h["logits"])).max())
                                     for c, h in zip(cases, hf)]}
    (out_dir / "llamacpp.json").write_text(json.dumps(doc) + "\n")
    print(f"{NAME}: llama.cpp's logits {', '.join(f'{d:.2g}' for d in doc['transformers_max_diff'])} from "
          f"transformers' ({SOURCE})")


def main():
    if sys.argv[1:2] == ["--llamacpp"]:
        mf.ensure_llamacpp_venv(__file__, sys.argv[1:])
        return llamacpp_pass()
    mf.ensure_venv(__file__)
    q35.ensure_llamacpp()
    make()


if __name__ == "__main__":
    main()
