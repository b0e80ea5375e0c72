#!/usr/bin/env python3
"""Writes the GGUF fixture of llama.cpp's falcon-h1 architecture, made by llama.cpp's own
converter (convert_hf_to_gguf.py, conversion/falcon_h1.py: FalconH1Model, a Mamba2Model) from a
tiny transformers checkpoint. The checkpoint (SOURCES) is make_fixtures.py's falcon_h1 fixture
(falcon_h1_config(head_dim=32)) unchanged, made here with a seed of its own (1414;
make_fixtures.new_model):

  gguf_falcon_h1  FalconH1ForCausalLM: 3 layers, each a Mamba2 mixer (mamba_d_ssm 96 channels in
                  6 heads of 16, 2 groups, state 16, a 4-tap conv with bias, no in_proj or
                  out_proj bias, no gated RMSNorm: y * silu(z)) beside GQA attention (4 heads over
                  2, head_dim 32, not hidden / heads = 16; RoPE theta 1e5), their outputs summed,
                  then a SwiGLU of 96; an untied head; every muP multiplier apart from 1
                  (embedding 1.5, lm_head 0.6, key 0.8, attention_in 1.2, attention_out 0.9,
                  ssm_in 1.1, ssm_out 0.7, ssm_multipliers [0.9, 1.1, 1.2, 0.8, 1.3],
                  mlp_multipliers [1.1, 0.9]); --outtype f32.

Why falcon_h1's config and not falcon_h1_norm's (llama.cpp 0c1e57098: conversion/falcon_h1.py,
src/models/falcon-h1.cpp, the Mamba2 layer of src/models/mamba-base.cpp). Every feature of
falcon_h1 is one llama.cpp runs (head_dim 32 included: the converter writes it as key_length and
value_length, and the loader sizes Q/K/V and the 1/sqrt(32) score scale by them). Of what
falcon_h1_norm adds, tried with this fixture's shape and seed when this script was written:
  - mamba_rms_norm with mamba_norm_before_gate false: runs (the converter writes the norm as
    blk.N.ssm_norm.weight [48, 2], one row per group; the graph gates y * silu(z) first, then
    takes the grouped RMSNorm): 1.7e-06, 1.1e-06, 4.4e-06 off transformers. Left out here to keep
    falcon_h1's ungated mixer;
  - mamba_rms_norm with mamba_norm_before_gate true (transformers' default): llama.cpp always
    gates before the norm, so 1.03, 0.47, 1.9 off;
  - mamba_proj_bias (an in_proj bias): the converter fails (IndexError: it scales in_proj's
    z/x/B/C/dt rows as tensor[a:b, :], which a 1-D bias lacks); the loader has no ssm_in bias;
  - projectors_bias (an out_proj bias): the converter writes blk.N.ssm_out.bias, which the loader
    does not take ("wrong number of tensors; expected 54, got 51");
  - tie_word_embeddings: the converter folds embedding_multiplier into token_embd and writes no
    output.weight, so llama.cpp's head (token_embd duplicated) is scaled by 1.5 rather than by
    lm_head_multiplier 0.6: 47.8, 28.1, 60 off.

config.json needs nothing added: transformers 5 saves every key the converter reads (head_dim,
mamba_d_ssm, mamba_d_head as 16, "auto" resolved by FalconH1Config, mamba_n_groups,
mamba_d_state, mamba_d_conv, mamba_expand, rms_norm_eps, rope_parameters.rope_theta,
intermediate_size, num_key_value_heads, max_position_embeddings and the multipliers).

What the converter does to the weights (checked tensor by tensor against the checkpoint: equal
to the bit, ssm_a within 1 ulp). It folds every muP multiplier into a weight and writes none as
metadata:
  token_embd.weight = embed_tokens * embedding_multiplier; output.weight = lm_head *
  lm_head_multiplier; attn_q = q_proj * attention_in_multiplier; attn_k = k_proj *
  key_multiplier * attention_in_multiplier; attn_v = v_proj * attention_in_multiplier;
  attn_output = o_proj * attention_out_multiplier; ssm_in = in_proj * ssm_in_multiplier, its rows
  then scaled segment-wise by ssm_multipliers (z rows 0-95 by [0], x rows 96-191 by [1], B rows
  192-223 by [2], C rows 224-255 by [3], dt rows 256-261 by [4]: transformers' mup_vector);
  ssm_out = out_proj * ssm_out_multiplier; ffn_gate = gate_proj * mlp_multipliers[0]; ffn_down =
  down_proj * mlp_multipliers[1]; ffn_up as it is.
The mixer's other tensors: ssm_a = -exp(A_log) and ssm_d = D, both [6] reshaped to [6, 1] (ggml
ne [1, 6]); ssm_dt.bias = dt_bias [6]; ssm_conv1d.weight = conv1d.weight [160, 1, 4] squeezed to
[160, 4] (ne [4, 160]); ssm_conv1d.bias [160]. No ssm_norm (mamba_rms_norm false). The norms
are copied: input_layernorm -> blk.N.attn_norm.weight, pre_ff_layernorm -> blk.N.ffn_norm (no
.weight suffix: gguf-py maps "pre_ff_layernorm.weight" whole to FFN_PRE_NORM, named
blk.N.ffn_norm, which is the name the loader asks for), final_layernorm -> output_norm.weight.
Metadata: falcon-h1.{context_length 256, embedding_length 64, feed_forward_length 96,
block_count 3, vocab_size 256, attention.head_count 4, attention.head_count_kv 2,
attention.key_length 32, attention.value_length 32, attention.layer_norm_rms_epsilon 1e-5,
rope.freq_base 1e5, ssm.conv_kernel 4, ssm.inner_size 96, ssm.state_size 16,
ssm.time_step_rank 6 (the head count), ssm.group_count 2}; no rope.dimension_count (llama.cpp
then rotates all 32 dimensions, NEOX style, as transformers does).

llama.cpp's graph (falcon-h1.cpp): per layer one RMSNorm (attn_norm) feeds both the attention
and the Mamba2 mixer; their outputs are added, plus the residual; then ffn_norm, the SwiGLU and
the residual; output_norm and output at the end.

The converter is make_gguf_qwen35_fixtures.py's: the one in PyPI's llama-cpp-python 0.3.36
source distribution (its vendored llama.cpp, ggml-org/llama.cpp@0c1e57098), in
.brigade/llamacpp-src, run with its own gguf-py (make_gguf_lfm2_fixtures.convert: no --no-mtp,
which FalconH1Model refuses). The checkpoint gets that script's toy byte-level vocabulary of
vocab_size (256) tokens (write_toy_tokenizer); the converter does not know its hash, so the
pre-tokenizer is named: falcon-h1 (Falcon-H1's tokenizers' name, which llama.cpp's vocab loader
runs as its llama3 pre-tokenizer). The converter takes eos (255, <|endoftext|>) from the
tokenizer and bos 1 and pad 0 from config.json.

expected.json: transformers' logits, greedy tokens and decode logits (make_fixtures.run_cases).

Then `--llamacpp` runs the file in llama.cpp itself (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv; F32 KV cache; make_gguf_qwen35_fixtures.llamacpp_pass) on the fixture's
prompts and writes llamacpp.json: per prompt how far llama.cpp's logits are from expected.json,
which must stay within 1e-3. Measured (prompts of 7, 1 and 40 tokens; logits up to 2.6 in size):
  gguf_falcon_h1  1.3e-06, 7.2e-07, 2.6e-06

Run: python3 scripts/make_gguf_falcon_h1_fixtures.py, then
python3 scripts/make_gguf_falcon_h1_fixtures.py --llamacpp (make_fixtures.py's virtual
environment; gguf-py's own dependencies installed on first use). CI never runs it: the fixture
is committed.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402

# The checkpoint converted: make_fixtures.py's falcon_h1 fixture as it is (every feature of it is
# one llama.cpp's falcon-h1 runs; module docstring), with a seed of its own.
SOURCES = {
    "falcon_h1": ("falcon_h1", {}, 1414),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_falcon_h1": ("falcon_h1", "f32", "falcon-h1"),
}


def main():
    lfm2.run(SOURCES, FIXTURES, __file__)  # its converter call leaves out --no-mtp: FalconH1Model has no MTP export


if __name__ == "__main__":
    main()
