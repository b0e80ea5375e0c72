#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's Arcee architectures (afmoe, arcee), made by llama.cpp's
own converter (convert_hf_to_gguf.py: conversion/afmoe.py's AfmoeModel and llama.py's ArceeModel,
both LlamaModel subclasses; AfmoeModel's tensors bypass LlamaModel's q/k permutation, ArceeModel's
do not) from tiny transformers checkpoints: make_fixtures.py's afmoe and arcee fixtures' shapes,
made here with seeds of their own (make_fixtures.new_model), unchanged:

  gguf_afmoe      AfmoeForCausalLM as make_fixtures.py's afmoe: 4 layers, per-head q/k norms, the
                  output gate (attn_gate), windows of 8 with RoPE on layers 0-2 and layer 3 full
                  without RoPE (llama.cpp's afmoe hard-codes that period of 4: load_swa_pattern(4)
                  and n_no_rope_layer_step 4, which is why the source has 4 layers), Gemma's four
                  norms, the embeddings times sqrt(hidden) (llama.cpp always scales them; the
                  source has mup_enabled, as the Hub's Trinity configs), hidden 32 in heads of
                  8, layer 0 a dense SwiGLU of 64 (leading_dense_block_count 1), then 8 experts
                  of 16, top 2 of sigmoid + exp_probs_b renormalised (route_norm,
                  expert_weights_norm) times 2.5
                  (route_scale, expert_weights_scale), beside 2 shared experts; --outtype f32
  gguf_arcee      ArceeForCausalLM as make_fixtures.py's arcee: Llama's layer (q/k permuted for
                  llama.cpp's interleaved RoPE) with the relu2 MLP (ffn_up, relu^2, ffn_down) and
                  YaRN (factor 4 over 64 positions); --outtype f32

python3 scripts/make_gguf_arcee_fixtures.py [NAME...] writes model.gguf and transformers'
expected.json (logits, greedy tokens, decode steps), which tests/models/gguf_afmoe_test.cpp
compares brigade against; --llamacpp [NAME...] (the llama-cpp-python venv) checks that llama.cpp
runs each file to the same logits. Measured when this script was written (max |logit diff| of
llama.cpp against transformers on the prompts of 7, 1 and 40 tokens):
  gguf_afmoe          1.4e-06, 1.3e-06, 1.7e-06
  gguf_arcee          1.6e-06, 9.7e-07, 2.1e-06
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402

# make_fixtures.py's fixture of that name with these changes, and a seed of its own.
SOURCES = {
    "afmoe": ("afmoe", {}, 3550),
    "arcee": ("arcee", {}, 3551),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_afmoe": ("afmoe", "f32", "gpt-2"),
    "gguf_arcee": ("arcee", "f32", "gpt-2"),
}


def main():
    lfm2.run(SOURCES, FIXTURES, __file__)


if __name__ == "__main__":
    main()
