#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's gptneox, gpt2 and starcoder architectures, made by
llama.cpp's own converter (convert_hf_to_gguf.py: conversion/gptneox.py's GPTNeoXModel, gpt2.py's
GPT2Model, starcoder.py's StarCoderModel) from tiny transformers checkpoints: make_fixtures.py's
gpt_neox, gpt_neox_sequential, gpt2 and gpt_bigcode fixtures' shapes (make_fixtures.gpt_model), made
here with seeds of their own, changed only where llama.cpp cannot run them:

  gguf_gptneox             GPTNeoXForCausalLM as make_fixtures.py's gpt_neox (parallel residual,
                           rotary_pct 0.5); the converter takes query_key_value's per-head layout
                           apart into attn_qkv q|k|v; --outtype f32
  gguf_gptneox_sequential  as gpt_neox_sequential with its biases (llama.cpp's gptneox requires
                           attn_qkv.bias and attn_output.bias): attention_bias True; --outtype f32
  gguf_gpt2                GPT2LMHeadModel as make_fixtures.py's gpt2, unchanged (the converter
                           transposes the Conv1D weights; 4 x n_embd MLP); --outtype f32
  gguf_starcoder           GPTBigCodeForCausalLM as make_fixtures.py's gpt_bigcode (MQA) with
                           n_inner None: StarCoderModel writes feed_forward_length 4 * n_embd and
                           head_count_kv 1 whatever config.json says (so no MHA file); --outtype f32
  gguf_falcon              FalconForCausalLM as make_fixtures.py's falcon (Falcon-7B's multi_query
                           layer on one norm; the converter reorders query_key_value); --outtype f32
  gguf_falcon40b           as falcon_new (the new decoder: 2 K/V groups, ln_attn as attn_norm_2 and
                           ln_mlp as attn_norm) with ffn_hidden_size None and theta 10000
                           (FalconModel writes 4 * hidden and no rope.freq_base: a Falcon2-11B file
                           loses its 500042); --outtype f32
  gguf_bloom               BloomForCausalLM as make_fixtures.py's bloom (ALiBi over 6 heads, the
                           embeddings' LayerNorm as token_embd_norm); --outtype f32
  gguf_mpt                 MptForCausalLM as make_fixtures.py's mpt (ALiBi over 4 heads,
                           max_alibi_bias 8); --outtype f32

llama.cpp's falcon runs only the parallel layer without biases (no file of falcon_sequential).

GPTJForCausalLM has no converter in llama.cpp (no gptj GGUF files are made or read).

Where transformers 5 and the converter disagree on config names, the converter is given the Hub's
(build_source, CONVERT_NEOX): GPT-2's config.json gets n_ctx (the Hub's has it; GPT2Config keeps
it as an extra attribute, which GPT2Model.set_gguf_parameters reads), and GPTNeoXModel reads
hparams["rotary_pct"], which transformers 5's GPTNeoXConfig moves into rope_parameters (AutoConfig's
to_dict has no rotary_pct: KeyError, tried), so it is set back from partial_rotary_factor.

Vocabularies: make_gguf_qwen35_fixtures.write_toy_tokenizer's byte-level one (pre-tokenizer gpt-2).
The prompts are token ids, so the vocabulary changes no logit.

python3 scripts/make_gguf_gpt_fixtures.py [NAME...] writes model.gguf and transformers'
expected.json, which tests/models/gguf_gpt_decoders_test.cpp compares brigade against; --llamacpp
[NAME...] (the llama-cpp-python venv) checks that llama.cpp runs each file to the same logits
(llamacpp.json), within LLAMACPP_BOUND: llama.cpp's CPU GELU rounds its input to fp16 and reads a
table (make_gguf_classic_fixtures.py), and its gptneox graph runs that tanh GELU where Pythia's
hidden_act "gelu" is the exact erf one, which brigade runs (as transformers does).
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_classic_fixtures as classic  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402
import make_gguf_qwen35_fixtures as q35  # noqa: E402

LLAMACPP_BOUND = 2e-2

# make_fixtures.py's fixture of that name with these changes, and a seed of its own.
SOURCES = {
    "gpt_neox": ("gpt_neox", {}, 3610),
    "gpt_neox_sequential": ("gpt_neox_sequential", {"attention_bias": True}, 3611),  # llama.cpp needs the biases
    "gpt2": ("gpt2", {}, 3612),
    "gpt_bigcode": ("gpt_bigcode", {"n_inner": None}, 3613),  # the converter writes 4 * n_embd
    "falcon": ("falcon", {}, 3614),
    # FalconModel writes 4 * hidden and no RoPE base (llama.cpp's 10000, Falcon-40B's)
    "falcon_new": ("falcon_new", {"ffn_hidden_size": None, "rope_theta": 10000.0}, 3615),
    "bloom": ("bloom", {}, 3616),
    "mpt": ("mpt", {}, 3617),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_gptneox": ("gpt_neox", "f32", "gpt-2"),
    "gguf_gptneox_sequential": ("gpt_neox_sequential", "f32", "gpt-2"),
    "gguf_gpt2": ("gpt2", "f32", "gpt-2"),
    "gguf_starcoder": ("gpt_bigcode", "f32", "gpt-2"),
    "gguf_falcon": ("falcon", "f32", "gpt-2"),
    "gguf_falcon40b": ("falcon_new", "f32", "gpt-2"),
    "gguf_bloom": ("bloom", "f32", "gpt-2"),
    "gguf_mpt": ("mpt", "f32", "gpt-2"),
}

# GPTNeoXModel given the Hub's rotary_pct back (module docstring).
CONVERT_NEOX = classic.convert_with_hparam("gptneox", "GPTNeoXModel", "rotary_pct",
                                           'self.hparams["rope_parameters"]["partial_rotary_factor"]')


# FalconModel given Falcon-7B's one K/V head. ModelBase.load_hparams takes AutoConfig's to_dict(),
# and transformers 5's FalconConfig.__post_init__ fills num_kv_heads with the query head count
# whatever config.json says (tiiuae/falcon-7b's has none), which the converter then reads as the
# K/V heads of a multi_query file (a reshape error, tried). The hparams the converter would have
# read from the Hub's config.json under older transformers: num_kv_heads absent, its `or 1`.
CONVERT_FALCON = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
import conversion.falcon as conv
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
init = conv.FalconModel.__init__
def __init__(self, *args, **kwargs):
    init(self, *args, **kwargs)
    if self.hparams.get("multi_query", True) and not self.hparams.get("new_decoder_architecture", False):
        self.hparams["num_kv_heads"] = 1
conv.FalconModel.__init__ = __init__
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert(model_dir, outfile, outtype, pre):
    """make_gguf_lfm2_fixtures.convert, by CONVERT_NEOX for the GPT-NeoX checkpoints and
    CONVERT_FALCON for Falcon's."""
    snippet = CONVERT_NEOX if model_dir.name.startswith("gpt_neox") else None
    snippet = CONVERT_FALCON if model_dir.name.startswith("falcon") else snippet
    lfm2.convert(model_dir, outfile, outtype, pre, snippet=snippet)


def build_source(sources, source, tmp):
    """make_gguf_lfm2_fixtures.build_source with make_fixtures.gpt_model's weights, and config.json
    as the converter reads the Hub's: GPT-2's given n_ctx; Falcon-7B's (multi_query) without
    num_kv_heads, as tiiuae/falcon-7b's (transformers 5 writes it as the query head count:
    CONVERT_FALCON); MPT's architectures the remote code's MPTForCausalLM, the only name the
    converter registers."""
    model, d = lfm2.build_source(sources, source, tmp, new_model=mf.gpt_model)
    cfg = json.loads((d / "config.json").read_text())
    if source == "gpt2":
        cfg["n_ctx"] = cfg["n_positions"]
    if source == "falcon":
        cfg.pop("num_kv_heads")
        cfg.pop("num_key_value_heads", None)
    if source == "mpt":
        cfg["architectures"] = ["MPTForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return model, d


def main():
    if sys.argv[1:2] == ["--llamacpp"]:
        mf.ensure_llamacpp_venv(__file__, sys.argv[1:])
        return q35.llamacpp_pass(sys.argv[2:] or list(FIXTURES), bound_f32=LLAMACPP_BOUND)
    lfm2.run(SOURCES, FIXTURES, __file__, build=build_source, conv=convert)


if __name__ == "__main__":
    main()
