#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's gemma, starcoder2, phi2 and stablelm architectures, made
by llama.cpp's own converter (convert_hf_to_gguf.py: conversion/gemma.py's GemmaModel,
starcoder.py's StarCoder2Model, phi.py's Phi2Model and stablelm.py's StableLMModel, TextModel
subclasses that permute nothing: NEOX RoPE) from tiny transformers checkpoints: make_fixtures.py's
gemma, starcoder2, phi, stablelm and stablelm_parallel fixtures' shapes, made here with seeds of
their own (make_fixtures.new_model), changed only where llama.cpp cannot run them:

  gguf_gemma              GemmaForCausalLM as make_fixtures.py's gemma (heads of 16 over hidden 32,
                          MQA, gelu-gated MLP, tied); the converter stores the norms as 1 + w and
                          drops lm_head (llama.cpp's gemma is always tied); its vocabulary is
                          SentencePiece's (GemmaModel.set_vocab reads only tokenizer.model:
                          make_gguf_llama_variants_fixtures.write_spm_tokenizer); --outtype f32
  gguf_starcoder2         Starcoder2ForCausalLM as make_fixtures.py's starcoder2 without its window
                          (llama.cpp's starcoder2 graph attends causally over everything and the
                          converter writes no window key): sliding_window None; --outtype f32
  gguf_phi2               PhiForCausalLM as make_fixtures.py's phi, unchanged (its MLP is 4 x hidden
                          and its heads MHA, which Phi2Model writes whatever config.json says:
                          feed_forward_length 4 * hidden, head_count_kv = head_count); --outtype f32
  gguf_stablelm           StableLmForCausalLM as make_fixtures.py's stablelm, unchanged; --outtype f32
  gguf_stablelm_parallel  as make_fixtures.py's stablelm_parallel (per-head q/k LayerNorms, which
                          the converter stacks into attn_q_norm / attn_k_norm [heads, head_dim], and
                          the parallel residual: no ffn_norm), unchanged; --outtype f32
  gguf_jais2              Jais2ForCausalLM as make_fixtures.py's jais2 (conversion/jais.py's
                          Jais2Model: biased LayerNorms, q/k/v/o biases, the ungated relu2 MLP with
                          biases), unchanged; --outtype f32
  gguf_nemotron           NemotronForCausalLM as make_fixtures.py's nemotron (conversion/nemotron.py's
                          NemotronModel: the LayerNorm1P weights stored as 1 + w, rope.dimension_count
                          int(0.5 * hidden) / heads = 4); its vocabulary SentencePiece's (set_vocab
                          reads tokenizer.model), unchanged; --outtype f32
  gguf_exaone             ExaoneForCausalLM as make_fixtures.py's exaone (the Hub's tensor and config
                          names; conversion/exaone.py's ExaoneModel: llama's layer, NEOX RoPE, the
                          llama3 scaling stored as rope_freqs), unchanged; --outtype f32

Vocabularies: make_gguf_qwen35_fixtures.write_toy_tokenizer's byte-level one (pre-tokenizer gpt-2),
but gemma's (above). The prompts are token ids, so the vocabulary changes no logit.

python3 scripts/make_gguf_classic_fixtures.py [NAME...] writes model.gguf and transformers'
expected.json (logits, greedy tokens, decode steps), which tests/models/gguf_classic_decoders_test.cpp
compares brigade against; --llamacpp [NAME...] (the llama-cpp-python venv) checks that llama.cpp
runs each file to the same logits (llamacpp.json). Measured when this script was written (max
|logit diff| of llama.cpp against transformers on the prompts of 7, 1 and 40 tokens):
  gguf_gemma              5.8e-03, 3.3e-03, 9.8e-03
  gguf_starcoder2         3.5e-03, 2.6e-03, 5.1e-03
  gguf_phi2               8.2e-04, 6.9e-04, 7.8e-04
  gguf_stablelm           1.4e-06, 1.1e-06, 1.7e-06
  gguf_stablelm_parallel  1.9e-06, 1.2e-06, 1.9e-06
The GELU models are further off because llama.cpp's CPU GELU (ggml-cpu/vec.h, GGML_GELU_FP16)
rounds its input to fp16 and reads the result from a table of fp16 values; StableLM's SiLU has no
such table, and there llama.cpp is as close to transformers as the other fixtures' runs. brigade
computes the exact tanh GELU (tests compare it with transformers: within 2.3e-5).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402
import make_gguf_llama_variants_fixtures as variants  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

# How far llama.cpp's logits may be from transformers' (module docstring: its GELU's fp16 table).
LLAMACPP_BOUND = 2e-2

# make_fixtures.py's fixture of that name with these changes, and a seed of its own.
SOURCES = {
    "gemma": ("gemma", {}, 3560),
    # no window: llama.cpp's starcoder2 has none (module docstring)
    "starcoder2": ("starcoder2", {"sliding_window": None}, 3561),
    "phi": ("phi", {}, 3562),
    "stablelm": ("stablelm", {}, 3563),
    "stablelm_parallel": ("stablelm_parallel", {}, 3564),
    "jais2": ("jais2", {}, 3565),
    "nemotron": ("nemotron", {}, 3566),
    "exaone": ("exaone", {}, 3567),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_gemma": ("gemma", "f32", "default"),
    "gguf_starcoder2": ("starcoder2", "f32", "gpt-2"),
    "gguf_phi2": ("phi", "f32", "gpt-2"),
    "gguf_stablelm": ("stablelm", "f32", "gpt-2"),
    "gguf_stablelm_parallel": ("stablelm_parallel", "f32", "gpt-2"),
    "gguf_jais2": ("jais2", "f32", "gpt-2"),
    "gguf_nemotron": ("nemotron", "f32", "default"),
    "gguf_exaone": ("exaone", "f32", "gpt-2"),
}


# make_gguf_qwen35_fixtures.CONVERT with StableLMModel.modify_tensors mended: in llama.cpp
# 0c1e57098 it is a generator (its last line is a `yield from`) whose per-head q/k norm branches end
# in `return self._stack_qk_norm(...)`, which in a generator discards the stacked tensor unrun, so
# prepare_tensors raises "Unprocessed norms" for every checkpoint with qk_layernorm (tried). The
# mended method is the same code with `yield from` there; nothing else changes.
CONVERT_STABLELM = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
import conversion.stablelm as stablelm
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
def modify_tensors(self, data_torch, name, bid):
    for which, attr, n in (("q_layernorm", "_q_norms", self.hparams["num_attention_heads"]),
                           ("k_layernorm", "_k_norms", self.hparams["num_key_value_heads"])):
        if name.find(which + ".norms") != -1:
            if getattr(self, attr) is None:
                setattr(self, attr, [{} for _ in range(self.block_count)])
            norms = getattr(self, attr)[bid]
            norms[name] = data_torch
            if len(norms) >= n:
                yield from self._stack_qk_norm(bid, n, norms, which)
            return
    yield from base.TextModel.modify_tensors(self, data_torch, name, bid)
stablelm.StableLMModel.modify_tensors = modify_tensors
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert_with_hparam(module, cls, key, value):
    """make_gguf_qwen35_fixtures.CONVERT with conversion/`module`.py's `cls` given hparams[`key`]
    (where absent) = `value` (a Python expression over self) before its set_gguf_parameters runs;
    nothing else changes."""
    return f"""
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
import conversion.{module} as conv
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
set_params = conv.{cls}.set_gguf_parameters
def set_gguf_parameters(self):
    self.hparams.setdefault("{key}", {value})
    set_params(self)
conv.{cls}.set_gguf_parameters = set_gguf_parameters
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


# make_gguf_qwen35_fixtures.CONVERT with conversion/exaone.py's ExaoneModel given the Hub's
# activation_function back. llama.cpp 0c1e57098 cannot convert an EXAONE 3.x checkpoint as it
# stands with transformers 5 installed (tried): ModelBase.load_hparams takes AutoConfig's to_dict(),
# where ExaoneConfig's attribute_map has renamed activation_function to hidden_act, so
# set_gguf_parameters' hparams["activation_function"] raises KeyError; read from config.json
# instead (AutoConfig failing), TextModel writes layer_norm_epsilon as attention.layer_norm_epsilon,
# which llama.cpp's exaone loader does not read (it needs layer_norm_rms_epsilon: the file does not
# load). Here the AutoConfig path runs with activation_function copied from hidden_act; nothing
# else changes.
CONVERT_EXAONE = convert_with_hparam("exaone", "ExaoneModel", "activation_function", 'self.hparams["hidden_act"]')


def convert(model_dir, outfile, outtype, pre):
    """make_gguf_lfm2_fixtures.convert, by CONVERT_STABLELM for stablelm_parallel's checkpoint and
    CONVERT_EXAONE for exaone's."""
    snippet = {"stablelm_parallel": CONVERT_STABLELM, "exaone": CONVERT_EXAONE}.get(model_dir.name)
    lfm2.convert(model_dir, outfile, outtype, pre, snippet=snippet)


def build_source(sources, source, tmp):
    """make_gguf_lfm2_fixtures.build_source, with gemma's and nemotron's vocabularies SentencePiece's."""
    model, d = lfm2.build_source(sources, source, tmp)
    if source in ("gemma", "nemotron"):
        variants.write_spm_tokenizer(d)
    if source == "exaone":  # conversion/exaone.py reads the Hub's config names
        mf.exaone_hub_config(d, model)
    return model, d


def main():
    if sys.argv[1:2] == ["--llamacpp"]:  # llama.cpp's GELU rounds through an fp16 table (module docstring)
        mf.ensure_llamacpp_venv(__file__, sys.argv[1:])
        return q35.llamacpp_pass(sys.argv[2:] or list(FIXTURES), bound_f32=LLAMACPP_BOUND)
    lfm2.run(SOURCES, FIXTURES, __file__, build=build_source, conv=convert)


if __name__ == "__main__":
    main()
