#!/usr/bin/env python3
"""Writes the GGUF fixtures of three of llama.cpp's Llama-family architectures, smollm3, granite and
granitemoe, made by llama.cpp's own converter (convert_hf_to_gguf.py: conversion/llama.py's
SmolLM3Model and conversion/granite.py's GraniteModel and GraniteMoeModel, all LlamaModel
subclasses, and GraniteHybridModel, which writes Granite 4.0's attention-only models as granite)
from tiny transformers checkpoints. The checkpoints (SOURCES) are make_fixtures.py's smollm3,
granite, granitemoe, granitemoeshared and granite4_rope fixtures, made here with seeds of their
own (make_fixtures.new_model), smollm3's with its NoPE interval changed and granite4_rope's with
its unused MoE counts set as the Hub's attention-only models set them:

  gguf_smollm3  SmolLM3ForCausalLM as make_fixtures.py's smollm3 (4 layers, GQA 4 heads over 2,
                head_dim 16, RoPE theta 5e4, a SwiGLU of 128, tied embeddings) but with
                no_rope_layer_interval 4: layers 0-2 rotate, layer 3 has no positions (NoPE);
                --outtype f32
  gguf_granite  GraniteForCausalLM as make_fixtures.py's granite, unchanged (Granite 3.x dense:
                2 layers, GQA 4 heads over 2, head_dim 16, RoPE theta 1e4, a SwiGLU of 128,
                embedding_multiplier 3, attention_multiplier 0.2 (the softmax scale, in place of
                1/sqrt(16)), residual_multiplier 0.5, logits_scaling 2, tied embeddings);
                --outtype f32
  gguf_granitemoe
                GraniteMoeForCausalLM as make_fixtures.py's granitemoe, unchanged (granite's
                layer and multipliers, 3 / 0.2 / 0.5 / 2, with every MLP 8 experts of 32, top 2
                softmaxed among themselves, tied embeddings); --outtype f32
  gguf_granitemoe_shared
                GraniteMoeSharedForCausalLM as make_fixtures.py's granitemoeshared, unchanged (the
                same experts beside an ungated shared SwiGLU of 48, multipliers 2 / 0.25 / 0.7 /
                1.5, untied); --outtype f32
  gguf_granite4 GraniteMoeHybridForCausalLM as make_fixtures.py's granite4_rope (Granite 4.0's
                attention-only models: granite-4.0-micro, 1b, 350m; 3 layers, every one
                attention, GQA 4 heads over 2, head_dim 16, position_embedding_type rope, RoPE
                theta 1e5, the shared SwiGLU of 48 as the only MLP, granite's multipliers
                3 / 0.2 / 0.5 / 2, tied embeddings) but with num_experts_per_tok 0 and
                intermediate_size 48 (= shared_intermediate_size), as the Hub's configs have them;
                --outtype f32

What llama.cpp runs, and why these sources (llama.cpp 0c1e57098: the converter classes above,
src/models/smollm3.cpp, granite.cpp and granite-moe.cpp, llama-model.cpp's shared hparams,
llama-graph.cpp's build_inp_embd and build_moe_ffn).
  - smollm3: no_rope_layer_interval 4 (an override of the fixture's 2). llama.cpp does not read
    the NoPE layers from the file: llama_model_smollm3::load_arch_hparams sets
    hparams.n_no_rope_layer_step = 4 whatever the checkpoint says, and the graph skips RoPE where
    (il + 1) % 4 == 0; the converter (SmolLM3Model, LlamaModel's converter with the arch renamed)
    writes neither no_rope_layers nor no_rope_layer_interval. transformers' SmolLM3Config makes
    no_rope_layers[i] = int((i + 1) % no_rope_layer_interval != 0), so with 4 both run
    [rope, rope, rope, NoPE] over the fixture's 4 layers (4 is also SmolLM3-3B's own interval).
    The fixture as it is (interval 2: NoPE at layers 1 and 3) converts and loads, but llama.cpp
    then rotates layer 1: 3.5, 9.4e-06, 8.2 off transformers on the three prompts (the 1-token
    prompt agrees only because RoPE at position 0 is the identity; tried). Nothing else needs
    changing: no sliding window (use_sliding_window false), no attention or MLP biases, the
    softmax scale 1/sqrt(head_dim) (the smollm3 graph's, f_attention_scale being 0), RMSNorm eps
    from layer_norm_rms_epsilon, the tied head (below).
  - granite: nothing changed. GraniteModel writes the four multipliers as metadata and llama.cpp
    applies each where transformers does: embedding_scale multiplies the token embeddings in
    build_inp_embd (the tied head still uses the unscaled table, as transformers' lm_head does),
    attention.scale is the kq scale, residual_scale multiplies the attention and MLP outputs
    before each residual add, the logits are divided by logit_scale. No rope.scaling.finetuned
    key is written, and granite's loader then defaults it to true, i.e. RoPE in every layer
    (Granite uses that key as its "no RoPE" switch; gguf_granitehybrid's file sets it false).
    config.json has no head_dim (GraniteModel would drop it with a warning: the loader sizes
    heads as hidden / heads = 16 anyway).
  - granitemoe, granitemoeshared: nothing changed. GraniteMoeModel (one class for both Hub
    classes, arch granitemoe) writes granite's keys, expert_count 8 and expert_used_count 2 (no
    expert_feed_forward_length: llama_model_granite_moe sizes the experts by feed_forward_length,
    32, the Hub's intermediate_size), and for the shared model expert_shared_feed_forward_length
    48, without which the loader creates no shared tensors. It splits each layer's
    block_sparse_moe.input_linear [8, 64, 64] into ffn_gate_exps and ffn_up_exps (ne [64, 32, 8]:
    the first 32 rows of each expert are the gate), output_linear becomes ffn_down_exps
    (ne [32, 64, 8]), the router block_sparse_moe.router.layer ffn_gate_inp (ne [64, 8]), and
    shared_mlp.input_linear [96, 64] ffn_gate_shexp / ffn_up_shexp (ne [64, 48]) with
    shared_mlp.output_linear ffn_down_shexp (ne [48, 64]). The graph is granite's with
    build_moe_ffn: softmax over the 8 logits, the top 2 renormalised (norm_w true, as
    GraniteMoeTopKRouter's softmax of the top 2), SiLU-gated experts, plus the shared SwiGLU;
    llama.cpp's loader requires logit_scale for it.
  - granite4: GraniteHybridModel writes arch granite when no layer is a mixer and
    num_experts_per_tok is 0 or absent (arch granitemoe otherwise), with GraniteMoeModel's keys and
    tensors: num_local_experts 0, so shared_mlp.input_linear [96, 64] becomes ffn_gate and ffn_up
    (ne [64, 48]: the first 48 rows the gate) and output_linear ffn_down (ne [48, 64]), q/k
    permuted as llama's. Two overrides: num_experts_per_tok 0 (the fixture's 2, which
    transformers never uses without experts, makes the converter pick granitemoe and then fail:
    "Missing <MODEL_TENSOR.FFN_GATE> for MODEL_TENSORS of GRANITE_MOE"; tried), and
    intermediate_size 48 (transformers' dense MLP is shared_intermediate_size wide and ignores
    intermediate_size without experts, but the converter writes intermediate_size as
    feed_forward_length and llama.cpp's granite sizes ffn_gate by it: with 32, "tensor
    'blk.0.ffn_gate.weight' has wrong shape; expected 64, 32, got 64, 48"; tried). granite-4.0-
    micro's config.json has them so (num_experts_per_tok 0, intermediate_size =
    shared_intermediate_size = 8192). config.json gets the Hub's layer_types, ["attention"] * 3
    (make_gguf_mamba_fixtures.hub_config: transformers 5.25 saves "full_attention", which
    GraniteHybridModel does not count as attention). The keys beyond granite's: head_count_kv
    is the per-block list [2, 2, 2] (GraniteHybridModel rewrites GraniteModel's scalar,
    "Duplicated key name"; llama.cpp reads either form), rope.scaling.finetuned true (RoPE on:
    no layer is a mixer), expert_count 0, expert_used_count 0,
    expert_shared_feed_forward_length 48 and the mixers' ssm.* keys (conv_kernel 4, state_size
    16, group_count 2, inner_size 128, time_step_rank 128), which granite's loader does not read.
vocab_size 256: LlamaModel pads nothing. Both heads are tied: transformers saves no
lm_head.weight, the converter writes no output.weight, and both loaders create `output` from
token_embd.weight (TENSOR_DUPLICATED); so are gguf_granitemoe's and gguf_granite4's
(gguf_granitemoe_shared has output.weight).

What the converter does to the weights (checked tensor by tensor against the checkpoint: equal to
the bit after the permutation below, every other tensor copied unchanged; gguf_granite4's ffn_gate /
ffn_up the two halves of shared_mlp.input_linear). These classes keep LlamaModel.undo_permute = True
(GraniteHybridModel sets it too), so LlamaModel.modify_tensors permutes the rows of q_proj with
permute(w, n_head 4, n_head 4) and of k_proj with permute(w, 4, n_head_kv 2) (n_head_kv replaces
n_head where they differ): per head of 16 rows, reshape(heads, 2, 8, 64).swapaxes(1, 2) puts old row
j * 8 + i at new row 2 * i + j, i.e. [0, 8, 1, 9, ..., 7, 15], turning transformers' rotate-half
(NEOX) layout into the adjacent pairs that llama.cpp's LLAMA_ROPE_TYPE_NORM rotates (all three
arches are NORM in llama_model_rope_type). smollm3's NoPE layer 3 is permuted too, which changes
nothing: its q and k heads get the same row order, so q . k is unchanged. v_proj, o_proj and the MLP
are not permuted. No multiplier is folded into a weight (granite's are metadata, keys below; smollm3
has none). Names: model.embed_tokens -> token_embd.weight (ne [64, 256]);
model.layers.N.input_layernorm -> blk.N.attn_norm.weight [64]; self_attn.{q,k,v,o}_proj ->
blk.N.attn_q.weight (ne [64, 64]), attn_k.weight (ne [64, 32]), attn_v.weight (ne [64, 32]),
attn_output.weight (ne [64, 64]); post_attention_layernorm -> blk.N.ffn_norm.weight [64];
mlp.{gate,up,down}_proj -> blk.N.ffn_gate.weight (ne [64, 128]), ffn_up.weight (ne [64, 128]),
ffn_down.weight (ne [128, 64]); model.norm -> output_norm.weight [64]; no output.weight; all F32.
Metadata (besides general.* and the tokenizer's):
  smollm3.{block_count 4, context_length 256, embedding_length 64, feed_forward_length 128,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 5e4,
  attention.layer_norm_rms_epsilon 1e-5, vocab_size 256, rope.dimension_count 16 (hidden /
  heads: there is no head_dim)}: no key_length / value_length, no rope scaling keys (rope_type
  "default": the converter warns "Unknown RoPE type" and writes none), no rope.scaling.finetuned,
  nothing about NoPE.
  granite.{the same keys with block_count 2 and rope.freq_base 1e4, then attention.scale 0.2,
  embedding_scale 3, residual_scale 0.5, logit_scale 2}.

The converter is make_gguf_qwen35_fixtures.py's: the one in PyPI's llama-cpp-python 0.3.36
source distribution (its vendored llama.cpp, ggml-org/llama.cpp@0c1e57098), in
.brigade/llamacpp-src, run with its own gguf-py (make_gguf_lfm2_fixtures.convert: no --no-mtp;
these classes have no MTP export). The checkpoint gets make_gguf_qwen35_fixtures.
write_toy_tokenizer's byte-level vocabulary of 256 tokens, which LlamaModel.set_vocab takes
through _set_vocab_gpt2 (no tokenizer.model; LlamaHfVocab refuses a vocabulary without
byte_fallback); the converter does not know its hash, so the pre-tokenizer is named, and the
prompts are token ids, so the name changes no logit: llama-bpe for smollm3 (SmolLM3-3B's GGUFs
say smaug-bpe, which llama.cpp splits with Llama 3's regex, as it does llama-bpe; brigade reads
both), gpt-2 for granite (Granite 3.x's GGUFs say refact, which brigade reads too, checked on
tests/fixtures/tokenizers/refact; gpt-2 is the regex the toy vocabulary's ByteLevel
pre-tokenizer applies, as for gguf_granitehybrid). The converter takes eos (255, <|endoftext|>)
from the tokenizer and bos 1 from config.json, and smollm3's and gguf_granite4's pad 0 (granite's
pad_token_id is null: no pad key).

expected.json: transformers' logits, greedy tokens and decode logits (make_fixtures.run_cases).
Both fixtures' logits are large (up to 57 and 42: the tied head over N(0, 1) embeddings) and their
greedy tokens repeat one token, as make_fixtures.py's smollm3's and granite's do.

Then `--llamacpp [NAME...]` runs each file in llama.cpp itself (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv; F32 KV cache; make_gguf_qwen35_fixtures.llamacpp_pass) on the fixture's
prompts and writes llamacpp.json: per prompt how far llama.cpp's logits are from expected.json,
which must stay within 1e-3. Measured (prompts of 7, 1 and 40 tokens):
  gguf_smollm3  1.5e-05, 9.4e-06, 1.7e-05 (logits up to 43, 23, 57)
  gguf_granite  7.9e-06, 4.1e-06, 1.0e-05 (logits up to 35, 33, 42)
  gguf_granitemoe         1.1e-05, 3.8e-06, 1.1e-05
  gguf_granitemoe_shared  8.9e-07, 5.7e-07, 1.2e-06
  gguf_granite4 6.7e-06, 5.5e-06, 1.2e-05 (logits up to 34, 26, 39)

Run: python3 scripts/make_gguf_llama_family_fixtures.py [NAME...], then
python3 scripts/make_gguf_llama_family_fixtures.py --llamacpp [NAME...] (make_fixtures.py's
virtual environment; gguf-py's own dependencies installed on first use). CI never runs it: the
fixtures are committed.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402
import make_gguf_mamba_fixtures as mamba  # noqa: E402

# The checkpoints converted: make_fixtures.py's fixture of that name with these changes, and a seed
# of its own.
SOURCES = {
    # NoPE every 4th layer (layer 3 of 4), as llama.cpp's smollm3 hard-codes (module docstring)
    "smollm3": ("smollm3", {"no_rope_layer_interval": 4}, 3303),
    "granite": ("granite", {}, 3404),
    "granitemoe": ("granitemoe", {}, 3405),
    "granitemoeshared": ("granitemoeshared", {}, 3406),
    # as granite-4.0-micro's config.json: num_experts_per_tok 0 (any other count makes the
    # converter write arch granitemoe) and intermediate_size the shared MLP's (llama.cpp sizes the
    # MLP by it); transformers uses neither without experts (module docstring)
    "granite4": ("granite4_rope", {"num_experts_per_tok": 0, "intermediate_size": 48}, 3407),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_smollm3": ("smollm3", "f32", "llama-bpe"),
    "gguf_granite": ("granite", "f32", "gpt-2"),
    "gguf_granitemoe": ("granitemoe", "f32", "gpt-2"),
    "gguf_granitemoe_shared": ("granitemoeshared", "f32", "gpt-2"),
    "gguf_granite4": ("granite4", "f32", "gpt-2"),
}


def build_source(sources, source, tmp):
    """make_gguf_lfm2_fixtures.build_source, then granite4's config.json with the Hub's layer_types
    (make_gguf_mamba_fixtures.hub_config: the converter counts only "attention" as attention)."""
    model, d = lfm2.build_source(sources, source, tmp)
    if model.config.model_type == "granitemoehybrid":
        path = d / "config.json"
        path.write_text(json.dumps(mamba.hub_config(json.loads(path.read_text())), indent=2) + "\n")
    return model, d


def main():
    # (its converter call leaves out --no-mtp: no MTP export here)
    lfm2.run(SOURCES, FIXTURES, __file__, build=build_source)


if __name__ == "__main__":
    main()
