#!/usr/bin/env python3
"""Writes the GGUF fixtures of llama.cpp's Mamba architectures (Mamba-2: mamba2, granitehybrid,
nemotron_h, nemotron_h_moe; Mamba-1: mamba, jamba), made by llama.cpp's own converter
(convert_hf_to_gguf.py: conversion/mamba.py's Mamba2Model and MambaModel,
conversion/granite.py's GraniteHybridModel, conversion/nemotron.py's NemotronHModel,
conversion/jamba.py's JambaModel) from tiny transformers checkpoints. The checkpoints (SOURCES)
are make_fixtures.py's mamba2, granite_hybrid, nemotron_h, nemotron_h_moe, mamba1, falcon_mamba
and jamba fixtures, made here with seeds of their own (make_fixtures.new_model), both Nemotron-H's
with 4 mixer heads rather than 6 and Falcon-Mamba's with its biases and mixer eps changed:

  gguf_mamba2         Mamba2ForCausalLM as make_fixtures.py's mamba2: 2 layers, each an RMSNorm
                      and a Mamba-2 mixer (8 heads of 16 = d_inner 128 = expand 2 * hidden 64,
                      2 groups, state 16, a 4-tap conv with bias, no in_proj / out_proj bias, the
                      gated grouped RMSNorm); an untied head; chunk_size 16; --outtype f32
  gguf_granitehybrid  GraniteMoeHybridForCausalLM as make_fixtures.py's granite_hybrid: layers
                      mamba, attention, mamba (the mixer as gguf_mamba2's; GQA 4 heads over 2,
                      head_dim 16, no positions), each followed by a shared SwiGLU of 48 plus 4
                      experts of 32 (top 2, softmax over the chosen two); embedding_multiplier 3,
                      attention_multiplier 0.2, residual_multiplier 0.5, logits_scaling 2; untied;
                      --outtype f32
  gguf_nemotron_h     NemotronHForCausalLM as make_fixtures.py's nemotron_h (blocks M-*-M: mixer,
                      relu2 MLP of 96, GQA attention 4 heads over 2 with head_dim 16 and no
                      positions, MLP, mixer; 2 groups, state 16, a 4-tap conv with bias; untied)
                      but with mamba_num_heads 4: d_inner 4 * 16 = 64, still not expand * hidden
                      = 128; --outtype f32
  gguf_nemotron_h_moe NemotronHForCausalLM as make_fixtures.py's nemotron_h_moe (Nemotron 3's
                      blocks ME*E: mixer, MoE, attention as gguf_nemotron_h's, MoE; each MoE 8
                      relu2 experts of 32 in 2 groups, a token's experts from the 1 group whose two
                      best biased scores sum highest, 2 per token by a sigmoid router with a
                      selection bias (e_score_correction_bias), renormalised and scaled by 2.5,
                      plus a relu2 shared expert of 48; untied) but with mamba_num_heads 4, as
                      gguf_nemotron_h; --outtype f32
  gguf_mamba1         MambaForCausalLM as make_fixtures.py's mamba1: 2 layers, each an RMSNorm
                      and a Mamba-1 mixer (d_inner 128 = 2 * hidden 64, a 16-wide state per
                      channel, time_step_rank 4, a 4-tap conv with bias, no in_proj / out_proj
                      bias); tied embeddings; --outtype f32
  gguf_falcon_mamba   FalconMambaForCausalLM as make_fixtures.py's falcon_mamba (the Mamba-1 mixer
                      with weightless RMSNorms of dt, B and C; a 3-tap conv, time_step_rank 8;
                      untied) but with use_bias false, use_conv_bias true and mixer_rms_eps 1e-5
                      (= layer_norm_epsilon); --outtype f32
  gguf_jamba          JambaForCausalLM as make_fixtures.py's jamba, unchanged: 4 layers, mixer,
                      mixer, attention (GQA 4 heads over 2, head_dim 16, no positions), mixer (the
                      Mamba-1 mixer with weighted RMSNorms of dt, B and C; d_inner 128, dt_rank 4,
                      a 4-tap conv with bias); after each a SwiGLU of 96 at even layers, 4 SwiGLU
                      experts of 96 at odd ones (softmax over all 4, top 2, unnormalised);
                      rms_norm_eps 1e-6; untied; --outtype f32, with a Llama-style toy vocabulary
                      (write_toy_llama_tokenizer).

What llama.cpp needs, and why these sources (llama.cpp 0c1e57098: the converter classes above,
src/models/mamba2.cpp, granite-hybrid.cpp, nemotron-h.cpp (nemotron_h and nemotron_h_moe),
mamba.cpp, jamba.cpp, the Mamba-2 and Mamba-1 layers of mamba-base.cpp and llama-graph.cpp's
build_moe_ffn). Every feature the Mamba-2 fixtures keep is one llama.cpp runs: the gated norm as
transformers 5 computes it (y * silu(z) first, then an RMSNorm over each of the n_groups slices of
d_inner: build_mamba2_layer reshapes y to [d_inner / n_groups, n_groups] and norms each),
n_groups 2 (ggml_ssm_scan takes B and C per group), head_dim 16, the conv bias (mamba2's loader
requires ssm_conv1d.bias; granitehybrid's and nemotron_h's take it if present), untied heads (every
loader takes output.weight, else token_embd.weight), time_step_limit left at (0, inf), so
transformers clamps nothing and llama.cpp, which never clamps dt, agrees. vocab_size 256 is a
multiple of the converter's vocabulary padding (Mamba2Model.set_vocab: 16; GraniteHybridModel
and NemotronHModel: 8; MambaModel.set_vocab: 8; JambaModel pads nothing), so no padding token is
added. The changes:
  - nemotron_h: mamba_num_heads 4 (an override). The converter asserts d_inner % d_head == 0 with
    d_head = find_hparam(["d_head"]) (config keys d_head / mamba_d_head, which Nemotron-H's
    configs lack) defaulting to 64: with 6 heads, "AssertionError: SSM inner size 96 not a
    multiple of head dim 64" (tried). 4 heads of 16 give 64, which passes and still differs from
    expand * hidden; llama.cpp's nemotron_h reads d_inner from ssm.inner_size and the head count
    from ssm.time_step_rank.
  - nemotron_h config.json, rewritten after save_pretrained (hub_config) to the Hub's dense
    Nemotron-H form: transformers 5.25 saves layers_block_type ["linear_attention", "mlp",
    "full_attention", "mlp", "linear_attention"] and NemotronHConfig's MoE / MTP defaults
    (num_experts_per_tok 2, n_routed_experts 8, n_group, topk_group, ... : NEMOTRON_H_MOE_KEYS)
    even for this dense model. NemotronHModel takes any num_experts_per_tok as MoE (arch
    nemotron_h_moe, expert_count 8) and, from a layers_block_type list, counts only "moe" as an
    MLP block, so it writes feed_forward_length [0, 0, 0, 0, 0] and llama.cpp then takes the MLP
    blocks for mixers ("check_tensor_dims: tensor 'blk.1.ssm_in.weight' not found"; tried, also
    with the pattern rewritten but the MoE keys kept). So config.json gets
    hybrid_override_pattern "M-*-M" and num_hidden_layers 5 in place of layers_block_type, and
    loses those MoE / MTP keys. nemotron_h_moe's config.json gets hybrid_override_pattern "ME*E"
    (the Hub's spelling: "E" a MoE block) in place of ["linear_attention", "moe",
    "full_attention", "moe"] and keeps every MoE key; with num_experts_per_tok present the
    converter writes arch nemotron_h_moe. And the converter reads config.json as written
    (CONVERT), not through AutoConfig as its ModelBase.load_hparams does, since transformers
    5.25's NemotronHConfig.to_dict() puts the same MoE defaults and layers_block_type list back
    (tried: the same nemotron_h_moe file and error). Mamba2Model, GraniteHybridModel and
    MambaModel read config.json themselves, so the raw read changes nothing for those; JambaModel
    reads it through this raw read too.
  - granitehybrid config.json: transformers 5.25 saves layer_types as ["linear_attention",
    "full_attention", "linear_attention"]; the converter counts a layer as attention only where
    its type is "attention" (GraniteHybridModel.get_attn_layers), so it wrote head_count_kv
    [0, 0, 0] and llama.cpp took layer 1 for a mixer ("tensor 'blk.1.ssm_in.weight' not found";
    tried). hub_config writes the Hub's names, ["mamba", "attention", "mamba"].
  - the MoE is kept (granite_hybrid, not granite_hybrid_dense): llama.cpp's granitehybrid graph
    routes by a softmax over all 4 router logits, takes the top 2 and renormalises their weights
    (build_moe_ffn, norm_w true, no expert_weights_scale), which equals transformers' softmax over
    the two chosen logits; the shared MLP's output is added to the experts'.
  - nemotron_h_moe: mamba_num_heads 4 for the same d_head assertion as nemotron_h (tried with 6:
    the same AssertionError). Everything of the MoE is kept, as llama.cpp's nemotron_h_moe graph
    (nemotron-h.cpp build_ffn_layer, build_moe_ffn) runs it: sigmoid gating (hard-coded there;
    no expert_gating_func key is written or read), the selection bias added for the choice only
    (exp_probs_b), the group choice (TextModel.set_gguf_parameters writes n_group as
    expert_group_count 2 and topk_group as expert_group_used_count 1; build_moe_ffn then sums each
    group's top two biased scores and keeps the best group, as NemotronHTopkRouter does), the two
    chosen sigmoid weights renormalised (expert_weights_norm true, from norm_topk_prob) and scaled
    by 2.5 (expert_weights_scale, from routed_scaling_factor), relu2 experts without gate, the
    relu2 shared expert on the block's input added to the experts' sum. The groups change these
    logits by up to 4.0 (transformers with topk_group 2 against 1, same weights), the selection
    bias by up to 5.0 (zeroed against kept), so both are exercised.
  - falcon_mamba: llama.cpp's mamba loader requires blk.N.ssm_conv1d.bias (use_conv_bias false:
    "check_tensor_dims: tensor 'blk.0.ssm_conv1d.bias' not found"; tried) and has no in_proj /
    out_proj bias tensors (use_bias true: "done_getting_tensors: wrong number of tensors; expected
    27, got 23"; tried), so use_conv_bias true and use_bias false, as falcon-mamba-7b's config
    has them. build_mamba_layer norms dt, B and C (ssm.dt_b_c_rms true, written because
    model_type is falcon_mamba) without weights and with the one RMS eps the file holds,
    attention.layer_norm_rms_epsilon (layer_norm_epsilon, 1e-5), where transformers uses
    mixer_rms_eps: mixer_rms_eps 1e-5 makes the two agree (left at 1e-6: llama.cpp 2.9e-4,
    2.9e-4, 3.6e-4 off; tried).
  - mamba1 and jamba need nothing changed: both have expand 2 (MambaModel asserts d_inner ==
    2 * hidden, and both loaders require it), a conv bias and no projection biases; mamba1's tied
    head is taken from token_embd (lm_head is not saved, so no output.weight is written), and
    jamba's MoE is llama.cpp's jamba graph's (softmax over all experts, top 2, norm_w false; no
    expert_weights_scale is read, so none is applied), as JambaSparseMoeBlock routes.
  - jamba's vocabulary: JambaModel.set_vocab, without a tokenizer.model, reads tokenizer.json
    through gguf-py's LlamaHfVocab, which takes only a BPE model with byte_fallback and a
    Sequence decoder ("FileNotFoundError: Cannot find Llama BPE tokenizer" with the byte-level
    toy vocabulary; tried). write_toy_llama_tokenizer writes such a vocabulary of 256 tokens
    (Jamba's specials, then byte tokens), which the converter writes as tokenizer.ggml.model
    llama, pre default, with scores (-1000 each) and token types (control, byte).

What the converter does to the weights (checked tensor by tensor against each checkpoint: equal to
the bit, the first three's ssm_a within 1 ulp, the other four's to the bit too; every checkpoint
tensor is written once):
  mixer (mamba2: backbone.layers.N.mixer.*, granite: model.layers.N.mamba.*, nemotron_h:
  backbone.layers.N.mixer.*): in_proj -> blk.N.ssm_in.weight [d_in_proj, hidden] as it is (rows z
  d_inner | x d_inner | B groups*16 | C groups*16 | dt heads: 328 or 196); A_log ->
  blk.N.ssm_a = -exp(A_log) reshaped [heads] -> [heads, 1] (ggml ne [1, heads]; no .weight
  suffix); D -> blk.N.ssm_d, D reshaped [heads, 1] (ne [1, heads]); dt_bias ->
  blk.N.ssm_dt.bias [heads]; conv1d.weight [conv_dim, 1, 4] squeezed -> blk.N.ssm_conv1d.weight
  [conv_dim, 4] (ne [4, conv_dim]; conv_dim = d_inner + 2 * groups * 16: 192, 192, 128);
  conv1d.bias -> blk.N.ssm_conv1d.bias [conv_dim]; norm.weight [d_inner] reshaped to
  blk.N.ssm_norm.weight [groups, d_inner / groups] (ne [64, 2], [64, 2], [32, 2]: one row per
  group, the same memory as the flat vector); out_proj -> blk.N.ssm_out.weight.
  norms: mamba2 / nemotron_h backbone.layers.N.norm -> blk.N.attn_norm.weight (before every
  block, whatever its kind); granite input_layernorm -> blk.N.attn_norm.weight,
  post_attention_layernorm -> blk.N.ffn_norm.weight; the final norm (backbone.norm_f /
  model.norm) -> output_norm.weight; embeddings (backbone.embeddings / model.embed_tokens) ->
  token_embd.weight; lm_head -> output.weight.
  attention (granite self_attn.*, nemotron_h mixer.*): q_proj, k_proj, v_proj, o_proj ->
  blk.N.attn_q / attn_k / attn_v / attn_output.weight, but with q_proj's and k_proj's rows
  permuted within each head (GraniteHybridModel sets undo_permute, so LlamaModel.permute runs:
  row 2j of a head is the checkpoint's row j, row 2j + 1 its row j + 8). q and k move alike and
  these layers rotate nothing, so the scores are unchanged.
  granite FFNs: block_sparse_moe.input_linear [4, 64, 64] split along dim 1 ->
  blk.N.ffn_gate_exps.weight (first 32 rows of each expert) and ffn_up_exps.weight (last 32),
  each [4, 32, 64] (ne [64, 32, 4]); block_sparse_moe.output_linear -> ffn_down_exps.weight
  [4, 64, 32] (ne [32, 64, 4]); block_sparse_moe.router.layer -> ffn_gate_inp.weight [4, 64];
  shared_mlp.input_linear [96, 64] split -> ffn_gate_shexp.weight (rows 0-47) and
  ffn_up_shexp.weight (rows 48-95), ne [64, 48]; shared_mlp.output_linear ->
  ffn_down_shexp.weight (ne [48, 64]).
  nemotron_h MLP blocks: mixer.up_proj -> blk.N.ffn_up.weight (ne [64, 96]), mixer.down_proj ->
  blk.N.ffn_down.weight (ne [96, 64]); no gate (relu2: down(relu(up x)^2)).
  Granite's multipliers are not folded into any weight (token_embd and output are the
  checkpoint's to the bit): they are metadata, granitehybrid.embedding_scale 3.0 (the embeddings
  times it), attention.scale 0.2 (the softmax scale in place of 1/sqrt(head_dim)),
  residual_scale 0.5 (each block's output times it before the residual add) and logit_scale 2.0
  (the logits divided by it).
  nemotron_h_moe: the mixer, norms, embeddings, head and attention as nemotron_h's (q_proj and
  k_proj permuted within each head alike; ssm_a / ssm_d ne [1, 4], ssm_norm.weight ne [32, 2]);
  MoE blocks (backbone.layers.N.mixer.*): gate.weight -> blk.N.ffn_gate_inp.weight (ne [64, 8]);
  gate.e_score_correction_bias (renamed ...e_score_correction.bias by ModelBase) ->
  blk.N.exp_probs_b.bias [8]; experts.E.up_proj.weight [32, 64] stacked over E ->
  blk.N.ffn_up_exps.weight [8, 32, 64] (ne [64, 32, 8]); experts.E.down_proj.weight [64, 32]
  stacked -> blk.N.ffn_down_exps.weight (ne [32, 64, 8]); shared_experts.up_proj ->
  blk.N.ffn_up_shexp.weight (ne [64, 48]), shared_experts.down_proj -> blk.N.ffn_down_shexp.weight
  (ne [48, 64]).
  Mamba-1 mixers (mamba1 / falcon_mamba: backbone.layers.N.mixer.*, jamba: model.layers.N.mamba.*):
  in_proj -> blk.N.ssm_in.weight (ne [64, 256]: rows x | z); conv1d.weight [128, 1, K] squeezed
  -> blk.N.ssm_conv1d.weight (ne [K, 128]); conv1d.bias -> blk.N.ssm_conv1d.bias [128]; x_proj
  -> blk.N.ssm_x.weight (ne [128, dt_rank + 32]: rows dt | B | C); dt_proj.weight ->
  blk.N.ssm_dt.weight (ne [dt_rank, 128]); dt_proj.bias -> blk.N.ssm_dt.bias [128]; A_log
  [128, 16] -> blk.N.ssm_a = -exp(A_log), same shape (ne [16, 128]; no .weight suffix); D ->
  blk.N.ssm_d [128] (not reshaped); out_proj -> blk.N.ssm_out.weight (ne [128, 64]). jamba's
  dt_layernorm, b_layernorm, c_layernorm -> blk.N.ssm_dt_norm.weight [4], ssm_b_norm.weight [16],
  ssm_c_norm.weight [16]; falcon_mamba's norms have no weights (a non-persistent buffer, not
  saved), so the file has none and the flag ssm.dt_b_c_rms says to norm.
  mamba1 / falcon_mamba: backbone.layers.N.norm -> blk.N.attn_norm.weight, backbone.norm_f ->
  output_norm.weight, backbone.embeddings -> token_embd.weight, falcon_mamba's lm_head ->
  output.weight (mamba1: none, tied).
  jamba: input_layernorm -> blk.N.attn_norm.weight, pre_ff_layernorm -> blk.N.ffn_norm.weight,
  model.final_layernorm -> output_norm.weight, model.embed_tokens -> token_embd.weight, lm_head
  -> output.weight; self_attn.{q,k,v,o}_proj -> blk.N.attn_q / attn_k / attn_v /
  attn_output.weight, not permuted; feed_forward.{gate,up,down}_proj -> blk.N.ffn_gate / ffn_up
  / ffn_down.weight (ne [64, 96], [64, 96], [96, 64]); feed_forward.router -> ffn_gate_inp.weight
  (ne [64, 4]); feed_forward.experts.E.{gate,up,down}_proj stacked over E ->
  ffn_gate_exps / ffn_up_exps.weight (ne [64, 96, 4]) and ffn_down_exps.weight (ne [96, 64, 4]).
Metadata (besides general.* and the tokenizer's):
  mamba2.{context_length 1048576, embedding_length 64, feed_forward_length 0,
  attention.head_count 0, block_count 2, ssm.conv_kernel 4, ssm.inner_size 128, ssm.state_size 16,
  ssm.time_step_rank 8 (the head count), ssm.group_count 2, attention.layer_norm_rms_epsilon 1e-5}.
  granitehybrid.{block_count 3, context_length 1048576, embedding_length 64,
  feed_forward_length 32 (an expert's), attention.head_count 4, attention.head_count_kv [0, 2, 0]
  (0 marks a mixer layer: the loader's is_recr), rope.freq_base 1e4, rope.dimension_count 16,
  rope.scaling.finetuned false (Granite's switch for "no RoPE"), attention.layer_norm_rms_epsilon
  1e-5, expert_count 4, expert_used_count 2, expert_shared_feed_forward_length 48, vocab_size 256,
  attention.scale, embedding_scale, residual_scale, logit_scale, ssm.conv_kernel 4,
  ssm.state_size 16, ssm.group_count 2, ssm.inner_size 128, ssm.time_step_rank 8}.
  nemotron_h.{block_count 5, context_length 1048576, embedding_length 64, feed_forward_length
  [0, 96, 0, 96, 0], attention.head_count 4, attention.head_count_kv [0, 0, 2, 0, 0] (a block is a
  mixer where both are 0, attention where only feed_forward_length is 0, an MLP where it is not),
  attention.key_length 16, attention.value_length 16, attention.layer_norm_epsilon 1e-5 (no rms
  key: the loader uses this one for the RMSNorms), vocab_size 256, rope.dimension_count 16,
  rope.scaling.finetuned false (nemotron_h's graph has no RoPE at all), ssm.conv_kernel 4,
  ssm.state_size 16, ssm.group_count 2, ssm.inner_size 64, ssm.time_step_rank 4}.
  nemotron_h_moe.{block_count 4, context_length 1048576, embedding_length 64,
  feed_forward_length [0, 32, 0, 32] (an expert's width at the MoE blocks), attention.head_count
  4, attention.head_count_kv [0, 0, 2, 0] (kinds as nemotron_h's; a non-zero
  feed_forward_length with expert_count > 0 is a MoE block), attention.layer_norm_epsilon 1e-5,
  expert_count 8, expert_used_count 2, expert_group_count 2, expert_group_used_count 1,
  vocab_size 256, rope.dimension_count 16, ssm.conv_kernel 4, ssm.state_size 16,
  ssm.group_count 2, ssm.inner_size 64, ssm.time_step_rank 4, rope.scaling.finetuned false,
  attention.key_length 16, attention.value_length 16, expert_feed_forward_length 32,
  expert_shared_feed_forward_length 48, expert_shared_count 1, expert_weights_norm true,
  expert_weights_scale 2.5}.
  mamba (gguf_mamba1 / gguf_falcon_mamba).{context_length 1048576, embedding_length 64,
  feed_forward_length 0, attention.head_count 0, block_count 2, ssm.conv_kernel 4 / 3,
  ssm.inner_size 128, ssm.state_size 16, ssm.time_step_rank 4 / 8,
  attention.layer_norm_rms_epsilon 1e-5, ssm.dt_b_c_rms false / true}: every block a mixer.
  jamba.{block_count 4, context_length 256, embedding_length 64, feed_forward_length 96 (the
  dense SwiGLU's and each expert's), attention.head_count 4, attention.head_count_kv [0, 0, 2, 0]
  (0 marks a mixer layer), ssm.conv_kernel 4, ssm.inner_size 128, ssm.state_size 16,
  ssm.time_step_rank 4, attention.layer_norm_rms_epsilon 1e-6, expert_count 4,
  expert_used_count 2}; a layer is MoE where blk.N.ffn_gate_inp.weight exists (no key says so).

The converter is make_gguf_qwen35_fixtures.py's: the one in PyPI's llama-cpp-python 0.3.36
source distribution (its vendored llama.cpp, ggml-org/llama.cpp@0c1e57098), in
.brigade/llamacpp-src, run with its own gguf-py, without --no-mtp (as make_gguf_lfm2_fixtures.
convert: the converter refuses the flag for Mamba2Model, GraniteHybridModel, MambaModel and
JambaModel, which have no MTP export, and these checkpoints have no MTP module: nemotron_h_moe's
num_nextn_predict_layers is 0, so NemotronHModel appends no MTP block), with config.json read as
written (CONVERT).
It is reached through make_gguf_lfm2_fixtures.run, whose make() builds and converts through that
module's build_source and convert: main() points those at this script's
build_source (lfm2's, then hub_config) and convert. Each checkpoint gets
make_gguf_qwen35_fixtures.write_toy_tokenizer's byte-level vocabulary of 256 tokens (jamba's then
replaced by write_toy_llama_tokenizer's); the converter does not know its hash, so the
pre-tokenizer is named: gpt-2 (llama.cpp's GPT-2 pre-tokenizer regex, which is the one the toy
vocabulary's ByteLevel pre-tokenizer applies; the prompts are token ids, so it changes no logit;
jamba's converter writes pre "default" itself). The converter takes eos (255, <|endoftext|>) from
the tokenizer and bos 1 and pad 0 from config.json (jamba: bos 1, eos 2, unk 3, pad 0, its toy
vocabulary's specials).

expected.json: transformers' logits, greedy tokens and decode logits (make_fixtures.run_cases;
transformers' PyTorch mixer path: for Mamba-2 the chunked scan over 16-token chunks in the
prefill, for Mamba-1 the reference selective scan, and the one-token update in the decode
steps). gguf_mamba1's logits are large (up to 80: the tied head over N(0, 1) embeddings) and its
greedy tokens mostly repeat the prompt's last token (as make_fixtures.py's mamba1's do).

Then `--llamacpp [NAME...]` runs each file in llama.cpp itself (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv; F32 KV cache; make_gguf_qwen35_fixtures.llamacpp_pass) on the fixture's
prompts and writes llamacpp.json: per prompt how far llama.cpp's logits are from expected.json,
which must stay within 1e-3. Measured (prompts of 7, 1 and 40 tokens; the first three's logits
up to 4.4, 2.1 and 4.1 in size):
  gguf_mamba2         3.1e-06, 1.9e-06, 6.8e-06
  gguf_granitehybrid  1.0e-06, 5.2e-07, 1.0e-06
  gguf_nemotron_h     4.4e-06, 1.1e-06, 6.2e-06
  gguf_nemotron_h_moe 2.7e-05, 4.4e-06, 2.9e-05 (logits up to 3.7, 2.9, 4.3)
  gguf_mamba1         1.7e-05, 6.0e-06, 2.3e-05 (logits up to 62, 59, 80)
  gguf_falcon_mamba   1.2e-05, 8.3e-07, 7.4e-06 (logits up to 3.5, 2.8, 3.9)
  gguf_jamba          8.0e-06, 1.4e-06, 1.2e-05 (logits up to 3.3, 2.8, 5.4)

Run: python3 scripts/make_gguf_mamba_fixtures.py [NAME...], then
python3 scripts/make_gguf_mamba_fixtures.py --llamacpp [NAME...] (make_fixtures.py's virtual
environment; gguf-py's own dependencies installed on first use). CI never runs it: the fixtures
are committed.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402

# The checkpoints converted: make_fixtures.py's fixture of that name with these changes, and a seed
# of its own.
SOURCES = {
    "mamba2": ("mamba2", {}, 2202),
    "granitehybrid": ("granite_hybrid", {}, 2404),
    # 4 mixer heads of 16 (d_inner 64, still not expand * hidden = 128): the converter asserts
    # d_inner % 64 == 0 (module docstring)
    "nemotron_h": ("nemotron_h", {"mamba_num_heads": 4}, 2606),
    # as nemotron_h: 4 mixer heads of 16 (d_inner 64), for the same assertion
    "nemotron_h_moe": ("nemotron_h_moe", {"mamba_num_heads": 4}, 2808),
    "mamba1": ("mamba1", {}, 2111),
    # a conv bias and no in_proj / out_proj biases (llama.cpp's mamba loader requires the one and
    # has no place for the others), the dt / B / C norms' eps the block norms' (llama.cpp has one)
    "falcon_mamba": ("falcon_mamba", {"use_bias": False, "use_conv_bias": True, "mixer_rms_eps": 1e-5}, 2113),
    "jamba": ("jamba", {}, 2415),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_mamba2": ("mamba2", "f32", "gpt-2"),
    "gguf_granitehybrid": ("granitehybrid", "f32", "gpt-2"),
    "gguf_nemotron_h": ("nemotron_h", "f32", "gpt-2"),
    "gguf_nemotron_h_moe": ("nemotron_h_moe", "f32", "gpt-2"),
    "gguf_mamba1": ("mamba1", "f32", "gpt-2"),
    "gguf_falcon_mamba": ("falcon_mamba", "f32", "gpt-2"),
    "gguf_jamba": ("jamba", "f32", "default"),
}

# Nemotron-H's MoE / MTP keys, which transformers 5's NemotronHConfig saves with their defaults even
# for a dense model, and which the Hub's dense Nemotron-H configs lack (module docstring).
NEMOTRON_H_MOE_KEYS = ("n_routed_experts", "num_experts_per_tok", "n_shared_experts", "moe_intermediate_size",
                       "moe_shared_expert_intermediate_size", "moe_latent_size", "moe_shared_expert_overlap",
                       "routed_scaling_factor", "n_group", "topk_group", "norm_topk_prob", "num_nextn_predict_layers",
                       "mtp_layers_block_type", "output_router_logits")


def hub_config(cfg):
    """config.json as transformers 5 saves it, rewritten to the Hub's spelling where the converter
    reads only that (module docstring)."""
    if cfg["model_type"] == "granitemoehybrid":
        names = {"linear_attention": "mamba", "full_attention": "attention"}
        cfg["layer_types"] = [names.get(t, t) for t in cfg["layer_types"]]
    elif cfg["model_type"] == "nemotron_h":
        kinds = {"linear_attention": "M", "full_attention": "*", "mlp": "-", "moe": "E"}
        types = cfg.pop("layers_block_type")
        cfg["hybrid_override_pattern"] = "".join(kinds[t] for t in types)
        cfg["num_hidden_layers"] = len(cfg["hybrid_override_pattern"])
        if "moe" not in types:  # dense: the Hub's dense configs have no MoE keys
            for k in NEMOTRON_H_MOE_KEYS:
                cfg.pop(k, None)
    return cfg


def write_toy_llama_tokenizer(model_dir, vocab_size):
    """A Llama-style BPE vocabulary with byte fallback (what the converter's LlamaHfVocab, which
    JambaModel.set_vocab uses without a tokenizer.model, accepts): Jamba's four special tokens
    (<|pad|> 0, <|startoftext|> 1, <|endoftext|> 2, <|unk|> 3), then byte tokens <0x00> ... up to
    vocab_size (to <0xFB> for 256: bytes 0xF5 and up never occur in UTF-8), no merges, the
    SentencePiece-style normalizer and decoder."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast
    specials = ["<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|unk|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    for i in range(len(specials), vocab_size):
        vocab[f"<0x{i - len(specials):02X}>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<|unk|>", byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    for f in Path(model_dir).iterdir():
        if f.name.startswith("tokenizer") or f.name == "special_tokens_map.json":
            f.unlink()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=specials[0], bos_token=specials[1], eos_token=specials[2],
                            unk_token=specials[3]).save_pretrained(str(model_dir))


def build_source(sources, source, tmp):
    """make_gguf_lfm2_fixtures.build_source (jamba's vocabulary then replaced by
    write_toy_llama_tokenizer's), then config.json in the Hub's spelling (hub_config)."""
    model, d = lfm2.build_source(sources, source, tmp)
    if model.config.model_type == "jamba":
        write_toy_llama_tokenizer(d, model.config.vocab_size)
    path = d / "config.json"
    path.write_text(json.dumps(hub_config(json.loads(path.read_text())), indent=2) + "\n")
    return model, d


# make_gguf_qwen35_fixtures.CONVERT with the converter's hparams read from config.json as written
# (as Mamba2Model and GraniteHybridModel read them themselves), not through AutoConfig, which
# transformers 5 fills with NemotronHConfig's MoE defaults.
CONVERT = """
import json, runpy, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import conversion.base as base
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
base.ModelBase.load_hparams = staticmethod(lambda dir_model, is_mistral_format:
                                           json.loads((Path(dir_model) / "config.json").read_text()))
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert(model_dir, outfile, outtype, pre):
    """make_gguf_lfm2_fixtures.convert (no --no-mtp) with CONVERT."""
    lfm2.convert(model_dir, outfile, outtype, pre, snippet=CONVERT)


def main():
    lfm2.run(SOURCES, FIXTURES, __file__, build=build_source, conv=convert)


if __name__ == "__main__":
    main()
