#!/usr/bin/env python3
"""Writes the GGUF fixtures of twenty-two llama.cpp architectures that are Llama-style decoders with
their own norms, biases, activations or RoPE, made by llama.cpp's own converter
(convert_hf_to_gguf.py: conversion/olmo.py's OlmoModel, Olmo2Model, OlmoeModel and SeedOssModel,
dbrx.py's DbrxModel, exaone.py's
Exaone4Model, glm.py's Glm4Model, ernie.py's Ernie4_5Model, hunyuan.py's HunYuanModel and
HunYuanMoEModel, minimax.py's MiniMaxM2Model, command_r.py's CommandR2Model and Cohere2Model,
dots1.py's Dots1Model (a Qwen2MoeModel), all
TextModel subclasses, none of them LlamaModel's; llama.py's ApertusModel and Llama4Model,
LlamaModels with undo_permute False; and mistral3.py's Ministral3Model, a LlamaModel that permutes
q/k; internlm.py's InternLM2Model, a TextModel that takes wqkv apart per KV group and permutes
q/k as LlamaModel does; chatglm.py's ChatGLMModel, a TextModel that renames only; and minicpm.py's
MiniCPMModel, a TextModel that permutes q/k and writes muP's scales as metadata) from tiny
transformers checkpoints. The checkpoints (SOURCES)
are make_fixtures.py's olmo, dbrx, olmo2, olmo3, exaone4, glm4, seed_oss, ernie4_5, hunyuan_v1_dense, olmoe,
ernie4_5_moe, apertus, llama4_text, minimax_m2, cohere, cohere2, hunyuan_v1_moe, dots1 and
ministral3_text, internlm2, chatglm, glm and minicpm fixtures, made here with seeds of their own
(make_fixtures.new_model, 3505..3527),
changed where llama.cpp cannot
run them (below):

  gguf_olmo           OlmoForCausalLM (2 layers, hidden 64, GQA 4 heads over 2 of 16, theta 1e4,
                      SwiGLU 128, LayerNorms without weights (eps 1e-5), clip_qkv 1.0, tied) as
                      make_fixtures.py's olmo, unchanged; --outtype f32
  gguf_dbrx           DbrxForCausalLM (2 layers, hidden 64, GQA 4 heads over 2 of 16, theta 5e5,
                      LayerNorms without bias, fused Wqkv clamped to 1.0, 8 SwiGLU experts of 32,
                      top 2 renormalised, untied) as make_fixtures.py's dbrx, unchanged; the
                      converter transposes w2 back to [E, hidden, F]; --outtype f32
  gguf_olmo2          Olmo2ForCausalLM (2 layers, hidden 64, GQA 4 heads over 2 of 16, theta 1e4,
                      SwiGLU 128, norms after attention and MLP only, RMSNorm q/k over the whole
                      projections, untied) without attention biases; --outtype f32
  gguf_olmo3          Olmo3ForCausalLM (OLMo 2's layer, 4 layers: sliding window 8 on layers 0-2,
                      layer 3 full with YaRN factor 4 over 64 positions) with rope_theta 5e5 for
                      both layer types; --outtype f32
  gguf_exaone4        Exaone4ForCausalLM (4 layers, norms after attention and MLP, per-head q/k
                      RMSNorm, llama3 RoPE scaling factor 8 / low 1 / high 4 over 64, untied) with
                      head_dim 16 (the fixture's 32) and no sliding window (every layer full
                      attention with RoPE: EXAONE-4.0-1.2B's layout); --outtype f32
  gguf_glm4           Glm4ForCausalLM as make_fixtures.py's glm4, unchanged (2 layers, four norms per
                      layer, q/k/v biases, gate|up fused, RoPE of adjacent pairs over the first
                      half (8) of each 16-dim head, untied); --outtype f32
  gguf_seed_oss       SeedOssForCausalLM (2 layers, GQA 4 over 2 heads of 32, so q is 128 wide over
                      hidden 64; q/k/v biases, untied) without o_proj and MLP biases; --outtype f32
  gguf_ernie4_5       Ernie4_5ForCausalLM (2 layers, heads of 16, RoPE of adjacent pairs, tied)
                      without biases; --outtype f32
  gguf_hunyuan_dense  HunYuanDenseV1ForCausalLM (2 layers, heads of 16, per-head q/k RMSNorm after
                      RoPE, NTK-alpha RoPE alpha 1000 over theta 1e4, untied) without biases and
                      with max_position_embeddings 32768; --outtype f32
  gguf_ernie4_5_moe   Ernie4_5_MoeForCausalLM (3 layers: layer 0 a dense SwiGLU of 128, then 8 experts
                      of 32, top 2 on softmax + selection bias, renormalised, two shared experts;
                      RoPE of adjacent pairs, tied) with two shared experts (the fixture's one);
                      --outtype f32
  gguf_olmoe          OlmoeForCausalLM (2 layers, pre-norm, q/k RMSNorm over the whole projections,
                      every MLP 8 experts of 32, top 2, not renormalised) with 4 KV heads (the
                      fixture's 2); --outtype f32
  gguf_apertus        ApertusForCausalLM as make_fixtures.py's apertus, unchanged (2 layers, GQA 4
                      over 2 heads of 16, q/k/v/o biases, per-head q/k RMSNorm before RoPE, ungated
                      MLP up 128 -> xIELU -> down with alpha_p / alpha_n learned per layer, llama3
                      RoPE scaling factor 8 / low 1 / high 4 over 64, untied); --outtype f32
  gguf_llama4         Llama4ForCausalLM (4 layers, hidden 64, GQA 4 over 2 heads of 16, RoPE of
                      adjacent pairs with llama3 scaling factor 8 / low 1 / high 4 over 64 on theta
                      5e5; layers 0-2 chunked attention with weightless q/k RMSNorm after RoPE,
                      layer 3 without RoPE, full attention, its queries temperature-scaled; layers
                      1 and 3 sparse: 4 experts of 48, top 2 by the router's logits, whose sigmoid
                      scales each chosen expert's input, beside a shared expert of 48; layers 0 and
                      2 a dense SwiGLU of 96; untied) with q/k norms (the fixture's none), no
                      attention biases (the fixture's q/k/v/o), no RoPE on every 4th layer (the
                      fixture's every 2nd), chunks of 8192 (the fixture's 8), the temperature's
                      floor_scale 8192 (the fixture's 4) and every 2nd layer sparse (the fixture's
                      every layer); --outtype f32
  gguf_minimax_m2     MiniMaxM2ForCausalLM as make_fixtures.py's minimax_m2 (2 layers, hidden 64,
                      GQA 4 over 2 heads of 32, so q is 128 wide; RMSNorm q/k over the whole
                      projections before NEOX RoPE over the first 16 of each head, theta 5e6;
                      every layer 8 experts of 32, top 2 by sigmoid + e_score_correction_bias,
                      renormalised; untied) with the Hub config's rotary_dim 16 and scoring_func
                      sigmoid added (the fixture has neither: transformers 5 writes
                      partial_rotary_factor 0.5 and always routes by sigmoid); --outtype f32
  gguf_command_r      CohereForCausalLM as make_fixtures.py's cohere (Command R+'s layer: LayerNorms
                      without bias, the attention and the MLP side by side on input_layernorm's
                      output, per-head q/k LayerNorms each with its own weights, RoPE of adjacent
                      pairs, tied, logits x 0.25) with 64 layers (the fixture's 2), hidden 16, 2
                      heads of 8 over 1 (the fixture's 64, 4 over 2), SwiGLU 32 (128) and no
                      attention biases (the fixture's q/k/v/o); --outtype f32
  gguf_cohere2        Cohere2ForCausalLM as make_fixtures.py's cohere2 (command-r's layer without
                      q/k norms; 4 layers: windows of 8 with RoPE on layers 0-2, layer 3 full
                      attention without RoPE; theta 5e4, logits x 0.125, tied) with the Hub
                      configs' rotary_pct 1.0 added (Cohere2Config has no such field);
                      --outtype f32
  gguf_hunyuan_moe    HunYuanMoEV1ForCausalLM (2 layers, per-head q/k RMSNorm after RoPE, NTK-alpha
                      RoPE alpha 1000 over theta 1e4; every layer 8 experts of 32, the top 2 of
                      their softmax renormalised, beside a shared SwiGLU of 32) with hidden 128 and
                      one head of 128 over one KV head (the fixture's 64, 4 of 16 over 2),
                      max_position_embeddings 32768, untied, and config.json given
                      the A13B config's per-layer lists moe_intermediate_size [32, 32] and
                      num_shared_expert [1, 1], use_mixed_mlp_moe, use_qk_norm and use_cla false
                      (HunYuanMoEV1Config writes none of them); --outtype f32
  gguf_dots1          Dots1ForCausalLM (3 layers, per-head q/k RMSNorm before RoPE; layer 0 a dense
                      SwiGLU of 96, then 8 experts of 16 in 2 groups, the best group by its two
                      best, top 2 on sigmoid + e_score_correction_bias, renormalised, times 2.5,
                      beside 2 shared experts; untied) with 4 KV heads (the fixture's 2) and no
                      sliding window (the fixture's 8 on layer 2); --outtype f32
  gguf_ministral3     Ministral3ForCausalLM (2 layers, GQA 4 over 2 heads of 16, YaRN factor 4 over
                      16 positions on theta 1e6 with mscale / mscale_all_dim 1, the query
                      temperature 1 + 0.3 log(1 + floor(pos / 16)) on every layer after RoPE;
                      untied) without the fixture's sliding window of 16; --outtype f32
  gguf_internlm2      InternLM2ForCausalLM as make_fixtures.py's internlm2, unchanged (2 layers,
                      hidden 64, 8 heads over 2 KV groups, theta 1e6, dynamic NTK factor 2 (which
                      the converter writes nothing for: exact below max_position_embeddings), no
                      biases, untied): the LlamaForCausalLM rewritten in InternLM2's layout
                      (make_fixtures.write_internlm), so the converter's split of wqkv is checked
                      against transformers; --outtype f32
  gguf_chatglm        ChatGLMModel (glm-4-9b-chat's layout) as make_fixtures.py's chatglm, unchanged
                      (2 layers, hidden 64, 4 heads of 16 over 2 KV groups, q/k/v biases, RoPE of
                      adjacent pairs over half of each head, rope_ratio 500, untied): the
                      GlmForCausalLM rewritten in ChatGLM's layout (make_fixtures.write_chatglm),
                      so the file holds one attn_qkv with its bias, as GLM-4-9B's GGUFs do;
                      --outtype f32
  gguf_glm_edge       GlmForCausalLM (GLM-Edge's and glm-4-9b-chat-hf's layout) as make_fixtures.py's
                      glm, unchanged (theta 1e4, which is what the converter writes: it reads
                      rope_ratio only), so the file holds attn_q / attn_k / attn_v; --outtype f32
  gguf_minicpm        MiniCPMForCausalLM as make_fixtures.py's minicpm, unchanged (2 layers, scale_emb
                      12, scale_depth 1.4, dim_model_base 16, tied): the GraniteForCausalLM under
                      MiniCPM's config.json (make_fixtures.minicpm_config); the converter writes
                      embedding_scale, residual_scale and logit_scale; --outtype f32

What llama.cpp runs, and why these sources (llama.cpp 0c1e57098: the converter classes above,
src/models/olmo2.cpp, exaone4.cpp, glm4.cpp, seed-oss.cpp, ernie4-5.cpp, hunyuan-vl.cpp (which
hunyuan-dense.cpp reuses: loader and graph), hunyuan-moe.cpp, dots1.cpp, apertus.cpp, llama4.cpp, minimax-m2.cpp,
command-r.cpp, cohere2.cpp, internlm2.cpp (llama's layer over attn_q / attn_k / attn_v, no biases:
the converter does not split a wqkv bias), ggml's ggml_xielu (ggml.c) and its CPU kernel (ggml-cpu/unary-ops.cpp
op_xielu), llama-model.cpp's shared hparams, load_swa_pattern and llama_model_rope_type,
llama-context.cpp's YaRN parameters, llama-graph.cpp's build_moe_ffn and temperature input).
Each loader refuses a file with a tensor it does not create ("done_getting_tensors: wrong number of
tensors"), so a bias llama.cpp has no slot for cannot be in the file.
  - ernie4_5_moe: moe_num_shared_experts 2 (the fixture's 1). conversion/ernie.py's
    Ernie4_5MoeModel writes expert_shared_feed_forward_length as intermediate_size //
    num_key_value_heads (here 128 // 2 = 64; ERNIE-4.5-21B-A3B's 12288 // 4 = 3072, its two shared
    experts of 1536) and llama_model_ernie4_5_moe sizes ffn_{gate,up,down}_shexp by it, so the
    shared width must equal that quotient: 2 x 32. It also writes expert_count 8,
    expert_used_count 2, expert_feed_forward_length 32, leading_dense_block_count 1
    (moe_layer_start_index), interleave_moe_layer_step 1, expert_shared_count 2; stacks the
    experts as qwen3moe's (ffn_*_exps), the router as ffn_gate_inp, the selection bias
    moe_statics.e_score_correction_bias as exp_probs_b.bias (ne [8, 1]); NORM RoPE, not permuted.
    The graph: softmax routing whose top 2 are chosen on probs + exp_probs_b and renormalised
    (norm_w true), plus the shared experts; block 0 a dense SwiGLU. The vocabulary is ernie4_5's
    SentencePiece one (write_spm_tokenizer). Measured 1.4e-05, 9.6e-06, 1.8e-05.
  - olmoe: num_key_value_heads 4 (the fixture's 2). llama_model_olmoe creates attn_k_norm n_embd
    wide, i.e. it assumes as many KV heads as query heads (OLMoE-1B-7B's 16 and 16), so a GQA
    file's [32] k norm is refused. The converter (conversion/olmo.py OlmoeModel) stacks each
    layer's experts into ffn_gate_exps / ffn_up_exps (ne [64, 32, 8]) and ffn_down_exps
    (ne [32, 64, 8]), writes the router as ffn_gate_inp (ne [64, 8]), olmoe.expert_count 8,
    expert_used_count 2 and feed_forward_length 32 (the experts' width; no
    expert_feed_forward_length), and permutes nothing (NEOX). The graph: attn_norm, q/k RMSNorm
    over the whole projections before RoPE, attention, ffn_norm, softmax routing over the top 2
    with norm_w false (not renormalised, as OlmoeConfig's norm_topk_prob false), SiLU experts.
  - olmo2: attention_bias false (the fixture's true). llama_model_olmo2 creates no
    attn_output.bias (q/k/v biases would load, as create_tensor_qkv takes them when present, but
    transformers' one switch also gives o_proj a bias): "wrong number of tensors; expected 33,
    got 31" (tried). OLMo 2's checkpoints have no biases. Graph: no input norm; q = wq x, k = wk x,
    v = wv x; q = RMSNorm(q) over all 64 (attn_q_norm [64]), k = RMSNorm(k) over all 32
    (attn_k_norm [32]), both before RoPE; RoPE NEOX (halves) over the whole head, theta
    rope.freq_base; softmax scale 1/sqrt(16); h = x + RMSNorm(o)(attn_output . attn) with
    post_attention_norm; out = h + RMSNorm(ffn_down(silu(ffn_gate h) * ffn_up h)) with
    post_ffw_norm; output_norm, then output.weight (required: olmo2's loader has no tied
    fallback). No sliding-window key: swa_type NONE.
  - olmo3: the same arch string, olmo2 (Olmo2Model converts both). rope_theta 5e5 (Olmo-3's):
    make_fixtures.py's olmo3 has 1e4 on the full-attention layer and Olmo3Config's default 5e5
    on the sliding ones (base_config's rope_theta only reaches full_attention); the converter
    writes rope.freq_base 1e4 and rope.freq_base_swa 5e5, the loader reads freq_base_swa into
    rope_freq_base_train_swa, but olmo2.cpp's graph rotates every layer with the context's
    freq_base (rope.freq_base), never llama_model::get_rope_freq_base(il): 0.57, 1.1e-06, 1.0 off
    transformers on the three prompts (tried). With one theta both agree. The sliding layers
    come from the file: attention.sliding_window 8 (> 0 turns on LLAMA_SWA_TYPE_STANDARD: key j
    visible to query i when i - j < 8, as transformers' window) and
    attention.sliding_window_pattern, a bool array [true, true, true, false] the converter builds
    from layer_types (without that array llama.cpp would fall back to every 4th layer full,
    load_swa_pattern(ml, 4)). RoPE per layer is hard-coded in olmo2.cpp: sliding layers plain
    RoPE (freq_scale 1, ext_factor 0, attn_factor 1: no YaRN, as transformers' sliding_attention
    rope_type default), full layers YaRN from rope.scaling.type yarn, rope.scaling.factor 4
    (freq_scale 0.25), rope.scaling.original_context_length 64, beta_fast 32 / beta_slow 1
    (llama.cpp's defaults: no keys written), ext_factor 1, and cos/sin scaled by
    1 + 0.1 ln 4 (transformers' attention_factor). Switching YaRN off in llama.cpp
    (rope_scaling_type none) puts it 0.14, 1.1e-06, 0.51 off (tried), so it is exercised.
  - exaone4: head_dim 16 and no sliding window. llama_model_exaone4 sizes attn_output
    [n_embd, n_embd], i.e. heads * head_dim must equal hidden (the fixture's 4 x 32 = 128 over
    64: "check_tensor_dims: tensor 'blk.0.attn_output.weight' has wrong shape; expected 64, 64,
    got 128, 64"; tried); EXAONE-4.0's checkpoints have heads * head_dim = hidden. Sliding windows
    are hard-coded to the 32B: the loader sets swa_type STANDARD (pattern from
    attention.sliding_window_pattern, else every 4th layer full) only when block_count is 64;
    for any other depth every layer is full attention with RoPE, whatever sliding_window and
    pattern say (the fixture's LLLG windows of 8 with NoPE on layer 3: 0.54, 1.2e-06, 3.9 off;
    tried). So sliding_window null with layer_types all full_attention, which transformers runs
    as every layer full and rotated (Exaone4Attention rotates when sliding_window is None), as
    llama.cpp runs every EXAONE 4 file that is not 64 layers deep. In a 64-layer file llama.cpp
    rotates only the sliding layers (use_rope = is_swa(il) || swa_type NONE) and its window is
    attention.sliding_window (4096 if absent). Graph: as olmo2's but q/k RMSNorm per head
    (attn_q_norm, attn_k_norm [16]), before RoPE; RoPE NEOX over the whole head, each
    frequency divided by rope_freqs.weight (the llama3 factors, computed by the converter:
    [1, 1.294, 7.667, 8, 8, 8, 8, 8]; the same tensor for every layer); output.weight optional
    (else token_embd). The llama3 scaling writes no rope.scaling.* keys.
  - glm4: nothing changed. Graph: attn_norm (input_layernorm), q/k/v with biases, RoPE NORM
    (adjacent pairs: llama_model_rope_type GLM4 without M-RoPE sections) over rope.dimension_count
    8 dims (the first 8 of each 16-dim head; dims 8-15 pass through; theta_i = 1e4^(-2i/8)), as
    Glm4's interleaved partial rotary does; no q/k permutation (Glm4Model permutes only for
    M-RoPE); o without bias; RMSNorm with post_attention_norm (post_self_attn_layernorm) before
    the residual add; ffn_norm (post_attention_layernorm) before the MLP; ffn_up is the fused
    gate|up [128 gate rows, then 128 up rows], run as swiglu: silu(first half) * second half;
    post_ffw_norm (post_mlp_layernorm) on the MLP output before the add.
  - seed_oss: attention_out_bias and mlp_bias false (the fixture's true). llama_model_seed_oss
    creates neither attn_output.bias (its graph passes wo_b, never loaded) nor MLP biases:
    "wrong number of tensors; expected 35, got 27" with both, "expected 29, got 27" with the o
    bias alone (tried). Seed-OSS-36B has attention_bias true, the other two false. Graph: Llama's
    (attn_norm, q/k/v with biases, RoPE NEOX over the whole head of key_length 32, softmax scale
    1/sqrt(32) (attention.scale absent), o without bias, residual; then post_attention_norm
    (HF post_attention_layernorm: the pre-MLP norm, despite the name) and a SwiGLU, residual).
  - ernie4_5: use_bias false (the fixture's true). llama_model_ernie4_5 has no MLP biases
    ("wrong number of tensors; expected 34, got 28"; tried); it would take an attn_output.bias
    (TENSOR_NOT_REQUIRED) but its graph never adds it; transformers' use_bias is one switch for
    q/k/v/o and the MLP. ERNIE-4.5-0.3B has use_bias false. Graph: Llama's, RoPE NORM (adjacent
    pairs: ERNIE's rotate_half interleaves) over the whole head, no q/k permutation; tied head
    (no output.weight: token_embd).
  - hunyuan_dense: attention_bias false and max_position_embeddings 32768. hunyuan-vl's loader
    creates no attn_output.bias (transformers' attention_bias also biases o_proj): "wrong number
    of tensors; expected 33, got 31" (tried); Hunyuan-7B has attention_bias false. HunYuanModel
    asserts rope_theta 1e4 and max_position_embeddings 32768 or 262144 for rope_type dynamic
    ("HunYuan dynamic RoPE scaling assumptions changed"; tried with 256); transformers' ntk_alpha
    RoPE does not depend on max_position_embeddings. The converter folds alpha into the base:
    rope.freq_base = 1e4 * 1000^(16/14) = 26826958 (f32), rope.scaling.type none,
    rope.scaling.factor 1, rope.scaling.original_context_length 262144 and context_length 262144
    (both hard-coded by the converter); it writes no rope.scaling.alpha (the loader would fold
    that key into freq_base again at load: base * alpha^(d/(d-2))). Graph: attn_norm, q/k/v (no
    biases here), RoPE NEOX over the whole head, then per-head RMSNorm of k (attn_k_norm [16])
    and q (attn_q_norm [16]) after RoPE, o, residual; ffn_norm, SwiGLU, residual.
  - apertus: nothing changed. llama_model_apertus takes q/k/v biases (create_tensor_qkv, when
    present) and attn_output.bias (TENSOR_NOT_REQUIRED), per-head attn_q_norm / attn_k_norm
    [head_dim] (their optional .bias absent here), rope_freqs (optional) and requires
    output.weight. xIELU is not in any tensor: ApertusModel.modify_tensors turns each layer's
    mlp.act_fn.alpha_p, alpha_n (parameters of shape [1]), beta and eps (buffers, 0.5 and -1e-6)
    into four per-layer F32 arrays xielu.alpha_p / alpha_n / beta / eps (no arch prefix; length
    block_count), written raw: alpha_p and alpha_n are the parameters before softplus, alpha_n
    without beta. The loader reads them with get_key_or_arr (an array of n_layer, or one scalar
    for every layer); ggml_xielu(up, alpha_n, alpha_p, beta, eps) then folds them as transformers'
    XIELUActivation does: a_p = softplus(alpha_p), a_n = beta + softplus(alpha_n) (softplus(x) =
    x when x > 20, else log(1 + e^x)), and xielu(x) = a_p x^2 + beta x for x > 0, else
    (expm1(min(x, eps)) - x) a_n + beta x. Graph: attn_norm (attention_layernorm), q/k/v with
    biases, per-head RMSNorm of q and k (eps rms_norm_eps) before RoPE, RoPE NEOX over the whole
    head (rope.dimension_count 16 = head_dim; no q/k permutation: undo_permute False), each
    frequency divided by rope_freqs.weight (the llama3 factors [1, 1.294, 7.667, 8, 8, 8, 8, 8],
    one tensor for every layer), softmax scale 1/sqrt(16), o with bias, residual; ffn_norm
    (feedforward_layernorm), ffn_down(xielu(ffn_up x)), residual; output_norm, output. The
    llama3 scaling writes no rope.scaling.* keys ("rope scaling type = NONE"). Both are
    exercised: transformers with ApertusConfig's default RoPE (llama3 over 8192 positions) is
    0.13, 4.8e-07, 0.65 off expected.json, and with the raw alpha_p = alpha_n = 0 in every
    layer 0.13, 0.057, 0.15 off.
  - llama4: use_qk_norm true, attention_bias false, no_rope_layer_interval 4,
    attention_chunk_size 8192, floor_scale 8192 and interleave_moe_layer_step 2 (make_fixtures.py's
    llama4_text: false, true, 2, 8, 4, 1). Llama4Model writes interleave_moe_layer_step,
    expert_feed_forward_length (intermediate_size) and feed_forward_length
    (intermediate_size_mlp), and no key for the rest, which llama_model_llama4's loader fixes
    (src/models/llama4.cpp): without attention.sliding_window (the converter writes it, 0, only
    when every layer_types entry is full_attention) chunks of 8192 on the layers
    attention.sliding_window_pattern marks, absent every 4th full (load_swa_pattern(ml, 4));
    no RoPE where (il + 1) % 4 == 0 (n_no_rope_layer_step 4); those layers' queries times
    log(floor((pos + 1) / 8192) + 1) * 0.1 + 1 (transformers' temperature with floor_scale 8192,
    attn_scale 0.1); use_kq_norm unless the file has 128 experts (LLM_TYPE_17B_128E: Maverick,
    whose config has use_qk_norm false). With the fixture's values instead, each tried alone:
    chunks of 8: llama.cpp 2.0e-06, 1.2e-06, 5.0 off transformers (the 40-token prompt crosses
    chunks); floor_scale 4: 0.034, 1.2e-06, 0.23; NoPE every 2nd layer: 0.71, 1.2e-06, 1.4;
    use_qk_norm false: 0.54, 1.2e-06, 0.91. attention_bias also biases o_proj, which
    llama_model_llama4 does not create: "wrong number of tensors; expected 64, got 60" (tried; its
    q/k/v biases would load). A file with attention.sliding_window 0 aborts at the first batch
    ("GGML_ASSERT(f_attn_temp_scale != 0.0f) failed": the loader sets the temperature only for
    chunked files; tried by adding the key to this file). llama.cpp also runs every layer sparse;
    interleave_moe_layer_step 2 (Maverick's) puts dense layers beside the sparse ones. Graph:
    attn_norm, q/k/v; layers 0-2 RoPE NORM (adjacent pairs, as transformers' complex rotation; no
    q/k permutation) over the whole head, each frequency divided by rope_freqs.weight (the llama3
    factors [1, 2.442, 8, 8, 8, 8, 8, 8]), then per-head RMSNorm of q and k without weights (eps
    rms_norm_eps); layer 3 unrotated, q times the temperature (1 within these prompts);
    attention (softmax scale 1/sqrt(16)), o, residual; ffn_norm, then layers 0 and 2
    ffn_down(silu(ffn_gate x) * ffn_up x), layers 1 and 3 the top 2 of ffn_gate_inp's logits,
    each chosen expert's input times sigmoid(its logit) (build_moe_ffn's weight_before_ffn),
    SiLU experts summed, plus ffn_down_shexp(silu(ffn_gate_shexp x) * ffn_up_shexp x); residual;
    output_norm, output.
  - minimax_m2: rotary_dim 16 and scoring_func sigmoid, the fields of the Hub's config.json
    (MiniMaxAI/MiniMax-M2: rotary_dim 64 of head_dim 128, scoring_func sigmoid) that
    MiniMaxM2Config does not declare; transformers keeps them as attributes and runs the same
    model (rotary_dim / head_dim is the fixture's partial_rotary_factor 0.5; MiniMaxM2TopKRouter
    always routes by sigmoid). MiniMaxM2Model reads find_hparam(["rotary_dim"]) for
    rope.dimension_count, with no fallback ("KeyError: could not find any of: ['rotary_dim']";
    tried without it), and TextModel writes expert_gating_func only from scoring_func (or its
    synonyms); llama_model_minimax_m2 reads that key optionally, and without it build_moe_ffn has
    gating NONE and aborts at the first batch ("llama-graph.cpp:2072: fatal error"; tried without
    scoring_func). The converter writes expert_count 8, expert_used_count 2, feed_forward_length
    and expert_feed_forward_length 32 (both intermediate_size; the loader sizes the experts by
    feed_forward_length, n_ff), expert_gating_func 2 (sigmoid), key_length / value_length 32 and
    rope.dimension_count 16; stacks each layer's block_sparse_moe.experts.E.w1 / w3 / w2 into
    ffn_gate_exps / ffn_up_exps (ne [64, 32, 8]) and ffn_down_exps (ne [32, 64, 8]), the router
    block_sparse_moe.gate as ffn_gate_inp (ne [64, 8]), block_sparse_moe.e_score_correction_bias
    as exp_probs_b.bias (ne [8]); nothing permuted (NEOX). Graph: attn_norm, q/k/v, RMSNorm of q
    over all 128 (attn_q_norm [128]) and of k over all 64 (attn_k_norm [64]), then RoPE NEOX over
    rope.dimension_count 16 of each 32-dim head (pairs i, i + 8; dims 16-31 pass through), softmax
    scale 1/sqrt(32), o, residual; ffn_norm, sigmoid of ffn_gate_inp's logits, the top 2 chosen
    on sigmoid + exp_probs_b, their sigmoids renormalised (norm_w true, hard-coded; no
    expert_weights_norm or expert_weights_scale read), SiLU experts; residual; output_norm,
    output (required). Both are exercised: transformers with the selection bias zeroed is 1.8,
    5.0e-07, 2.4 off expected.json, with the whole head rotated 1.1, 5.0e-07, 1.8.
  - command_r: 64 layers, hidden 16 (2 heads of 8 over 1), intermediate_size 32 and
    attention_bias false (make_fixtures.py's cohere: 2 layers, hidden 64, 4 heads over 2, 128,
    true). llama_model_command_r creates attn_q_norm / attn_k_norm only when n_layer >= 64, and
    then requires them (Command R+'s depth; use_qk_norm is read nowhere): the fixture as it is,
    "done_getting_tensors: wrong number of tensors; expected 30, got 24"; without its biases,
    "expected 22, got 18" (both tried: its 2 layers' q/k norms). Hence 64 layers, narrow (at
    hidden 64 the file would be ~10 MB). It creates no attn_output.bias (create_tensor_qkv would
    take q/k/v biases; transformers' attention_bias also biases o_proj): 64 layers with the
    biases, "expected 898, got 834" (tried). Command R and R+ have none. CommandR2Model writes
    logit_scale, attention.layer_norm_epsilon (layer_norm_eps), rope.scaling.type none and
    context_length (model_max_length, else max_position_embeddings); no key_length (CohereConfig
    has no head_dim) and no rope.dimension_count. Graph: h = LayerNorm(x) with attn_norm
    (ggml_norm: mean-centred, times the weight, no bias, eps attention.layer_norm_epsilon); q, k,
    v = wq h, wk h, wv h; LayerNorm of each q head (attn_q_norm, ne [8, 2]: each head's own 8
    weights) and k head (ne [8, 1]), then RoPE NORM (adjacent pairs, as transformers' Cohere
    repeat_interleaves its frequencies; no q/k permutation) over the whole head, theta
    rope.freq_base; attention (softmax scale 1/sqrt(8)), o; the SwiGLU of the same h; out = x +
    attention + MLP; output_norm (a LayerNorm), token_embd as the head (TENSOR_DUPLICATED: the
    loader never looks for output.weight), the logits times logit_scale (f_logit_scale defaults
    to 0, which the graph skips: an absent key is no scale). Both are exercised: transformers
    with the same weights but no q/k norms is 2.3, 0, 4.1 off expected.json, with the logits
    unscaled 11, 9.7, 13.
  - cohere2: rotary_pct 1.0 added (a field of the Hub's configs, which transformers keeps as an
    attribute, rotating whole heads whatever it says). Cohere2Model writes rope.dimension_count
    int(rotary_pct * head_dim) and has no fallback ("KeyError: 'rotary_pct'" without it; tried);
    it also writes logit_scale, attention.sliding_window 8, vocab_size, key_length / value_length
    16 (Cohere2Config sets head_dim), attention.layer_norm_epsilon, rope.scaling.type none, and no
    sliding_window_pattern, so llama_model_cohere2 takes every 4th layer full
    (load_swa_pattern(ml, 4)): Cohere2Config's default layer_types, the fixture's (a config with
    other layer_types converts to a file llama.cpp runs otherwise). It drops bias tensors
    (raising on nonzero ones). The loader requires logit_scale, attention.sliding_window and
    attention.layer_norm_epsilon; it reads rope.freq_base_swa (not written) but the graph never
    uses it. Graph: command_r's without q/k norms; on the sliding layers (is_swa(il)) RoPE NORM
    over the whole head and key j visible to query i when i - j < 8 (LLAMA_SWA_TYPE_STANDARD, as
    transformers' window); layer 3 full attention, unrotated. Both are exercised: transformers
    without the window is 0, 0, 2.7 off expected.json (the 40-token prompt crosses it), with RoPE
    on layer 3 0.27, 0, 0.43.
  - hunyuan_moe: hidden 128 and one head of 128 over one KV head, max_position_embeddings 32768,
    and the A13B config's fields HunYuanMoEV1Config does not write. HunYuanMoEModel (conversion/
    hunyuan.py) folds the alpha as HunYuanModel does but over dim = hidden_size //
    num_attention_heads, and asserts alpha 1000, rope_theta 1e4, dim 128 and
    max_position_embeddings 32768 or 262144 ("HunYuan dynamic RoPE scaling assumptions changed"),
    so the heads must be 128 wide, and hidden / heads must be that too (transformers rotates
    head_dim, the converter hidden / heads); one head keeps the file small. It reads
    moe_intermediate_size, moe_topk and num_shared_expert as per-layer lists (indexing [0], each
    asserted uniform; KeyError without them), as Hunyuan-A13B's config.json has them
    (HUNYUAN_MOE_HUB_FIELDS; moe_topk is the fixture's list already); use_mixed_mlp_moe,
    use_qk_norm and use_cla are A13B's values, read by neither the converter nor transformers.
    Its set_vocab reads only a tiktoken vocabulary (CONVERT_HUNYUAN_MOE). It writes
    rope.freq_base 1e4 * 1000^(128/126) = 11158840 (f32), rope.scaling.type none, factor 1,
    original_context_length and context_length 262144, expert_count 8, expert_used_count 2,
    expert_feed_forward_length 32, expert_shared_feed_forward_length 32 (intermediate_size),
    expert_shared_count 1, key_length / value_length 128; no rope.scaling.alpha (llama.cpp's
    hunyuan-moe loader, unlike hunyuan-dense's, would not apply one), no expert_gating_func or
    expert_weights_* keys. llama_model_hunyuan_moe sizes the experts by feed_forward_length (it
    reads expert_feed_forward_length but does not use it: A13B's equal intermediate_size, 3072)
    and the shared MLP by expert_shared_feed_forward_length (absent: feed_forward_length),
    requires attn_q_norm / attn_k_norm and every ffn_*_shexp, and creates no attn_output.bias.
    Graph: attn_norm, q/k/v, RoPE NEOX over the whole head, per-head RMSNorm of k and q after
    RoPE, o, residual; ffn_norm, then the shared SwiGLU (ffn_*_shexp) plus build_moe_ffn: softmax
    over the 8 router logits, the top 2 renormalised (norm_w hard-coded true, as
    HunYuanMoEV1Gate), SiLU-gated experts; residual. The routing's renormalisation, the shared MLP
    and the stretched base are each exercised
    (GgufLlamaVariants.HunyuanMoeRoutingSharedMlpAndAlphaChangeTheResult).
  - dots1: num_key_value_heads 4 and sliding_window None (make_fixtures.py's dots1: 2, 8 from
    layer 2 on). llama_model_dots1 sizes attn_k / attn_v by n_head, not n_head_kv (dots.llm1 is
    MHA: 32 over 32): the GQA fixture is refused, "check_tensor_dims: tensor 'blk.0.attn_k.weight'
    has wrong shape; expected 64, 64, got 64, 32" (tried). Neither Dots1Model nor the dots1 graph
    has a window (the released configs slide no layer). Dots1Model (a Qwen2MoeModel) writes
    expert_count 8 (n_routed_experts), expert_used_count 2, expert_group_count 2,
    expert_group_used_count 1, expert_gating_func 2 (from scoring_func, which the fixture's config
    carries as the Hub's do; llama_model_dots1 reads it optionally and build_moe_ffn aborts
    without it), expert_feed_forward_length 16, leading_dense_block_count 1, expert_shared_count
    2, expert_weights_scale 2.5, expert_weights_norm true; stacks the experts as qwen2moe's, the
    router as ffn_gate_inp, e_score_correction_bias as exp_probs_b.bias (ne [8]), the shared
    experts (2 x 16 wide) as ffn_*_shexp; NEOX, not permuted. Graph: attn_norm, q/k/v, per-head
    RMSNorm of q and k before RoPE NEOX over the whole head, o, residual; ffn_norm, then block 0
    a dense SwiGLU of 96, blocks 1-2 build_moe_ffn: sigmoid of the router logits, + exp_probs_b
    for the choice, the best group of 2 by the sum of its two best (llama.cpp's loader reads the
    groups for every architecture), the top 2 in it, their sigmoids renormalised, times 2.5, SiLU
    experts, plus the shared SwiGLU; residual. The groups, selection bias, renormalisation and
    shared experts are each exercised (GgufDots1.GroupsSelectionBiasAndSharedExpertsChangeTheResult).
  - ministral3: sliding_window None (make_fixtures.py's ministral3_text: 16): llama_model_mistral3
    reads no window. conversion/mistral3.py's Ministral3Model (a LlamaModel: q/k rows permuted)
    writes rope.scaling.type yarn, factor 4, original_context_length 16, yarn_beta_fast 32 /
    beta_slow 1, rope.scaling.yarn_log_multiplier 1 (the config's mscale_all_dim) and
    attention.temperature_scale 0.3 (llama_4_scaling_beta). llama-context.cpp then takes mscale 1
    and the cos/sin factor mscale(4, 1) / mscale(4, 1) = 1, as transformers does from the config's
    mscale and mscale_all_dim; the mistral3 graph multiplies each query after RoPE by
    log(floor(pos / 16) + 1) * 0.3 + 1 (n_attn_temp_floor_scale = n_ctx_orig_yarn, offset 0).
    The temperature, its offset and the factor are each exercised
    (GgufMistral3.TemperatureAndYarnFactorChangeTheResult).
vocab_size 256: no converter pads. ernie4_5, command_r and cohere2 are tied (no output.weight;
ernie4_5's loader falls back to token_embd.weight, command-r's and cohere2's always take it);
olmo2 and apertus require output.weight, the others take it when present.

What the converter does to the weights (checked tensor by tensor against each checkpoint: equal to
the bit, no tensor permuted or transposed beyond GGUF's dimension order but llama4's experts;
every checkpoint tensor written once (hunyuan_moe's experts stacked, E outermost); apertus's xIELU
parameters as metadata). None of these classes permutes q/k: olmo2, olmo3, exaone4, seed_oss,
hunyuan-dense, hunyuan-moe, apertus and minimax-m2 are LLAMA_ROPE_TYPE_NEOX (rotate-half,
transformers' own layout), glm4, ernie4_5, llama4, command-r and cohere2 LLAMA_ROPE_TYPE_NORM
(their transformers classes rotate adjacent pairs already). Names (N the layer; ne in GGUF order,
[in, out]):
  model.embed_tokens -> token_embd.weight [64, 256]; model.norm -> output_norm.weight [64];
  lm_head -> output.weight [64, 256] (all but ernie4_5, command_r and cohere2);
  self_attn.q_proj / k_proj / v_proj / o_proj -> blk.N.attn_q.weight [64, 64] ([64, 128] seed_oss),
  attn_k.weight [64, 32] ([64, 64] seed_oss), attn_v.weight likewise, attn_output.weight [64, 64]
  ([128, 64] seed_oss); their biases (glm4, seed_oss, apertus) -> blk.N.attn_q.bias [64] ([128]),
  attn_k.bias [32] ([64]), attn_v.bias likewise, attn_output.bias [64] (apertus);
  mlp.gate_proj / up_proj / down_proj -> blk.N.ffn_gate.weight [64, 128], ffn_up.weight
  [64, 128], ffn_down.weight [128, 64]; glm4's mlp.gate_up_proj -> blk.N.ffn_up.weight [64, 256]
  as it is (no ffn_gate);
  olmo2 / olmo3 / exaone4: self_attn.q_norm -> blk.N.attn_q_norm.weight ([64] olmo, [16] exaone4),
  k_norm -> attn_k_norm.weight ([32] olmo, [16] exaone4), post_attention_layernorm ->
  blk.N.post_attention_norm.weight [64], post_feedforward_layernorm -> blk.N.post_ffw_norm.weight
  [64]; no attn_norm / ffn_norm; exaone4 adds rope_freqs.weight [8] (no layer);
  glm4: input_layernorm -> blk.N.attn_norm, post_self_attn_layernorm -> post_attention_norm,
  post_attention_layernorm -> ffn_norm, post_mlp_layernorm -> post_ffw_norm (all [64]);
  seed_oss: input_layernorm -> attn_norm, post_attention_layernorm -> post_attention_norm (the
  pre-MLP norm);
  ernie4_5 and hunyuan_dense: input_layernorm -> attn_norm, post_attention_layernorm -> ffn_norm;
  hunyuan's self_attn.query_layernorm -> attn_q_norm.weight [16], key_layernorm -> attn_k_norm.weight
  [16];
  apertus: attention_layernorm -> blk.N.attn_norm.weight [64], feedforward_layernorm ->
  ffn_norm.weight [64], self_attn.q_norm -> attn_q_norm.weight [16], k_norm -> attn_k_norm.weight
  [16], mlp.up_proj -> ffn_up.weight [64, 128], mlp.down_proj -> ffn_down.weight [128, 64] (no
  ffn_gate); mlp.act_fn.* -> the xielu.* keys; rope_freqs.weight [8] (no layer);
  llama4: input_layernorm -> attn_norm, post_attention_layernorm -> ffn_norm;
  feed_forward.gate_proj / up_proj / down_proj (layers 0, 2) -> blk.N.ffn_gate.weight [64, 96],
  ffn_up.weight [64, 96], ffn_down.weight [96, 64]; feed_forward.router -> ffn_gate_inp.weight
  [64, 4]; feed_forward.experts.gate_up_proj [4, 64, 96] (transformers' [E, hidden, gate | up])
  split and transposed -> ffn_gate_exps.weight and ffn_up_exps.weight (ne [64, 48, 4]),
  experts.down_proj [4, 48, 64] transposed -> ffn_down_exps.weight (ne [48, 64, 4]);
  feed_forward.shared_expert.gate_proj / up_proj / down_proj -> ffn_gate_shexp.weight,
  ffn_up_shexp.weight [64, 48], ffn_down_shexp.weight [48, 64]; rope_freqs.weight [8] (no
  layer);
  minimax_m2: input_layernorm -> attn_norm, post_attention_layernorm -> ffn_norm;
  self_attn.q_norm -> attn_q_norm.weight [128], k_norm -> attn_k_norm.weight [64];
  block_sparse_moe.gate -> ffn_gate_inp.weight [64, 8], e_score_correction_bias ->
  exp_probs_b.bias [8], experts.E.w1 / w3 / w2 stacked -> ffn_gate_exps.weight,
  ffn_up_exps.weight (ne [64, 32, 8]), ffn_down_exps.weight (ne [32, 64, 8]);
  command_r and cohere2: input_layernorm -> blk.N.attn_norm.weight, each layer's only norm (no
  ffn_norm); command_r's ([16, 16] q and o, [16, 8] k and v, ffn [16, 32] and [32, 16])
  self_attn.q_norm [2, 8] -> attn_q_norm.weight (ne [8, 2]), k_norm [1, 8] -> attn_k_norm.weight
  (ne [8, 1]); no output.weight;
  hunyuan_moe (hidden 128: token_embd and output [128, 256], q/k/v/o [128, 128]): hunyuan_dense's
  names (attn_q_norm / attn_k_norm [128]); mlp.gate.wg -> ffn_gate_inp.weight [128, 8];
  mlp.experts.E.gate_proj / up_proj / down_proj stacked -> ffn_gate_exps.weight, ffn_up_exps.weight
  (ne [128, 32, 8]), ffn_down_exps.weight (ne [32, 128, 8]); mlp.shared_mlp.gate_proj / up_proj /
  down_proj -> ffn_gate_shexp.weight, ffn_up_shexp.weight [128, 32], ffn_down_shexp.weight
  [32, 128];
  dots1: input_layernorm -> attn_norm, post_attention_layernorm -> ffn_norm, self_attn.q_norm /
  k_norm -> attn_q_norm / attn_k_norm.weight [16]; q/k/v/o [64, 64]; layer 0's mlp.gate_proj /
  up_proj / down_proj -> ffn_gate / ffn_up [64, 96], ffn_down [96, 64]; mlp.gate ->
  ffn_gate_inp.weight [64, 8], mlp.gate.e_score_correction_bias -> exp_probs_b.bias [8],
  mlp.experts.E.* stacked -> ffn_gate_exps / ffn_up_exps (ne [64, 16, 8]), ffn_down_exps (ne
  [16, 64, 8]); mlp.shared_experts.* -> ffn_gate_shexp / ffn_up_shexp [64, 32], ffn_down_shexp
  [32, 64]. All F32.
Metadata (besides general.* and the tokenizer's), every key under the arch prefix:
  olmo2.{block_count 2, context_length 256, embedding_length 64, feed_forward_length 128,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 1e4,
  attention.layer_norm_rms_epsilon 1e-5}: no key_length / value_length (no head_dim in the config:
  heads are 64 / 4), no rope.dimension_count (the whole head).
  olmo3 (arch olmo2): the same with block_count 4, rope.freq_base 5e5, rope.freq_base_swa 5e5,
  rope.scaling.type yarn, rope.scaling.factor 4, rope.scaling.original_context_length 64,
  attention.sliding_window 8, attention.sliding_window_pattern [true, true, true, false].
  exaone4.{block_count 4, context_length 256, embedding_length 64, feed_forward_length 128,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 1e4,
  attention.layer_norm_rms_epsilon 1e-5, attention.key_length 16, attention.value_length 16,
  vocab_size 256}: no sliding-window keys, no rope.scaling keys (llama3 is the rope_freqs tensor).
  glm4.{block_count 2, context_length 256, embedding_length 64, feed_forward_length 128,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 1e4,
  attention.layer_norm_rms_epsilon 1e-5, attention.key_length 16, attention.value_length 16,
  rope.dimension_count 8}.
  seed_oss.{the same keys as glm4's without rope.dimension_count, key_length and value_length 32}.
  ernie4_5.{as glm4's without rope.dimension_count}.
  hunyuan-dense.{block_count 2, context_length 262144, embedding_length 64, feed_forward_length
  128, attention.head_count 4, attention.head_count_kv 2, rope.freq_base 26826958,
  attention.layer_norm_rms_epsilon 1e-5, attention.key_length 16, attention.value_length 16,
  rope.scaling.type none, rope.scaling.factor 1, rope.scaling.original_context_length 262144}.
  apertus.{block_count 2, context_length 256, embedding_length 64, feed_forward_length 128,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 1e4,
  attention.layer_norm_rms_epsilon 1e-5, vocab_size 256, rope.dimension_count 16}: no
  key_length / value_length (heads are 64 / 4), no rope.scaling keys; and outside the prefix
  xielu.alpha_p [-0.013085273, -0.010242863], xielu.alpha_n [0.28394666, -0.066484697] (raw:
  a_p 0.68663, 0.68804 and a_n 1.34517, 1.16046 after the fold), xielu.beta [0.5, 0.5],
  xielu.eps [-1e-06, -1e-06] (f32 arrays).
  llama4.{block_count 4, context_length 256, embedding_length 64, feed_forward_length 96,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 5e5,
  attention.layer_norm_rms_epsilon 1e-5, expert_count 4, expert_used_count 2,
  attention.key_length 16, attention.value_length 16, vocab_size 256, rope.dimension_count 16,
  interleave_moe_layer_step 2, expert_feed_forward_length 48}: no sliding-window, chunk, NoPE,
  temperature or q/k-norm keys, no rope.scaling keys (llama3 is the rope_freqs tensor).
  minimax-m2.{block_count 2, context_length 256, embedding_length 64, feed_forward_length 32,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 5e6,
  attention.layer_norm_rms_epsilon 1e-5, expert_count 8, expert_used_count 2,
  expert_gating_func 2, attention.key_length 32, attention.value_length 32,
  expert_feed_forward_length 32, rope.dimension_count 16}: no rope.scaling keys (the converter
  warns "Unknown RoPE type: default" and writes none), no expert_weights_* or group keys.
  command-r.{block_count 64, context_length 256, embedding_length 16, feed_forward_length 32,
  attention.head_count 2, attention.head_count_kv 1, rope.freq_base 1e4,
  attention.layer_norm_epsilon 1e-5, logit_scale 0.25, rope.scaling.type none}: no key_length /
  value_length, no rope.dimension_count.
  cohere2.{block_count 4, context_length 256, embedding_length 64, feed_forward_length 128,
  attention.head_count 4, attention.head_count_kv 2, rope.freq_base 5e4,
  attention.layer_norm_epsilon 1e-5, attention.key_length 16, attention.value_length 16,
  logit_scale 0.125, attention.sliding_window 8, vocab_size 256, rope.dimension_count 16,
  rope.scaling.type none}: no sliding_window_pattern, no rope.freq_base_swa.
  hunyuan-moe.{block_count 2, context_length 262144, embedding_length 128, feed_forward_length 32,
  attention.head_count 1, attention.head_count_kv 1, rope.freq_base 11158840,
  attention.layer_norm_rms_epsilon 1e-5, expert_count 8, attention.key_length 128,
  attention.value_length 128, expert_shared_feed_forward_length 32, expert_feed_forward_length 32,
  expert_used_count 2, expert_shared_count 1, rope.scaling.type none, rope.scaling.factor 1,
  rope.scaling.original_context_length 262144}.
  dots1.{block_count 3, context_length 256, embedding_length 64, feed_forward_length 96,
  attention.head_count 4, attention.head_count_kv 4, rope.freq_base 1e4,
  attention.layer_norm_rms_epsilon 1e-5, expert_count 8, expert_used_count 2, expert_group_count 2,
  expert_group_used_count 1, expert_gating_func 2, expert_feed_forward_length 16,
  leading_dense_block_count 1, expert_shared_count 2, expert_weights_scale 2.5,
  expert_weights_norm true}: no key_length (heads are 64 / 4), no sliding-window keys.

The converter is make_gguf_qwen35_fixtures.py's: the one in PyPI's llama-cpp-python 0.3.36 source
distribution (its vendored llama.cpp, ggml-org/llama.cpp@0c1e57098), in .brigade/llamacpp-src,
run with its own gguf-py (make_gguf_lfm2_fixtures.convert: no --no-mtp). Vocabularies: the
checkpoints get make_gguf_qwen35_fixtures.write_toy_tokenizer's byte-level vocabulary of 256
tokens, written as tokenizer.ggml.model gpt2 with pre-tokenizer gpt-2 (the regex the toy
vocabulary's ByteLevel pre-tokenizer applies; the converter does not know the toy's hash, and the
prompts are token ids, so the name changes no logit), eos 255 (<|endoftext|>), bos 1 and pad 0
from config.json; except:
  - glm4: write_glm4_tokenizer's, the same with <|user|> at 254 and ab at 253 (Glm4Model.set_vocab
    looks both up among the added tokens); pre glm4; eos 255, eot 254, unk 255, bos 1, pad 0;
  - ernie4_5: Ernie4_5Model.set_vocab reads only a SentencePiece tokenizer.model
    (FileNotFoundError otherwise): write_spm_tokenizer's BPE model with byte fallback, written as
    tokenizer.ggml.model llama, pre default, 256 tokens (<unk> 0, <s> 1, </s> 2, <0x00>..<0xFC>;
    the converter drops the pieces past vocab_size), scores, token types; bos 1, eos 2, pad 0;
  - hunyuan_dense: eos 3 (HunYuanModel writes config.json's eod_token_id as eos), bos 1, pad 0;
  - command_r and cohere2: pre command-r (Command R's vocabulary's name, which llama.cpp splits
    with refact's regexes), bos 5 (make_fixtures.cohere_config's, CohereConfig's default), eos 255,
    pad 0;
  - hunyuan_moe: written by TextModel._set_vocab_gpt2 in place of HunYuanMoEModel.set_vocab
    (CONVERT_HUNYUAN_MOE): eos 255, bos 1, sep 4, pad 0 (A13B's files carry the pre-tokenizer
    hunyuan, llama.cpp's QWEN2 regex);
  - dots1: pre qwen2 (llama.cpp's converter and llama-vocab.cpp name no pre-tokenizer of dots.llm1's
    own; a Qwen2-sized vocabulary), eos 255, bos 1, pad 0;
  - ministral3: pre tekken (Mistral's real vocabularies' name; llama.cpp then adds BOS and takes
    whole-word tokens before merges), eos 255, bos 1, pad 0;
  - internlm2: InternLM2Model.set_vocab reads only a SentencePiece tokenizer.model (through its
    protobuf): write_spm_tokenizer's, as ernie4_5's; pre default; bos 1, eos 2, pad 0;
  - chatglm and glm_edge: glm4's (ChatGLMModel.set_vocab looks up <|endoftext|> and <|user|> too),
    pre chatglm-bpe (GLM-4-9B's); eos and unk 255, eot 254. ChatGLMModel.set_gguf_parameters writes
    context_length from seq_length, else hidden_size (64 for glm_edge: the prompts stay within it),
    and rope.dimension_count from hidden_size / heads (the fixtures' kv_channels are that);
  - minicpm: MiniCPMModel.set_vocab reads a SentencePiece tokenizer.model: write_spm_tokenizer's; pre
    default; bos 1, eos 2.

expected.json: transformers' logits, greedy tokens and decode logits (make_fixtures.run_cases).
Logits stay under 6.1 but for ernie4_5's (up to 62: the tied head over N(0, 1) embeddings, whose
greedy tokens repeat one token).

Then `--llamacpp [NAME...]` runs each file in llama.cpp itself (llama-cpp-python 0.3.36 in
.brigade/llamacpp-venv; F32 KV cache; make_gguf_qwen35_fixtures.llamacpp_pass) on the fixture's
prompts and writes llamacpp.json: per prompt how far llama.cpp's logits are from expected.json,
which must stay within 1e-3. Measured (prompts of 7, 1 and 40 tokens):
  gguf_olmo2          2.2e-06, 1.2e-06, 2.6e-06
  gguf_olmo3          2.4e-06, 1.1e-06, 4.1e-06
  gguf_exaone4        2.4e-06, 1.2e-06, 3.4e-06
  gguf_glm4           1.7e-06, 1.5e-06, 2.6e-06
  gguf_seed_oss       2.1e-06, 8.3e-07, 2.5e-06
  gguf_ernie4_5       1.2e-05, 9.0e-06, 1.9e-05 (logits up to 47, 47, 62)
  gguf_hunyuan_dense  1.6e-06, 9.3e-07, 2.0e-06
  gguf_olmoe          1.3e-06, 8.1e-07, 1.7e-06
  gguf_ernie4_5_moe   1.4e-05, 9.6e-06, 1.8e-05
  gguf_apertus        1.5e-06, 1.1e-06, 1.9e-06
  gguf_llama4         2.0e-06, 1.2e-06, 2.8e-06
  gguf_minimax_m2     1.4e-06, 1.1e-06, 1.7e-06
  gguf_command_r      6.0e-06, 2.4e-06, 8.3e-06
  gguf_cohere2        1.6e-06, 1.1e-06, 2.6e-06
  gguf_hunyuan_moe    2.0e-06, 1.1e-06, 2.5e-06
  gguf_dots1          2.2e-06, 1.2e-06, 2.7e-06
  gguf_ministral3     1.4e-06, 8.0e-07, 1.9e-06

Run: python3 scripts/make_gguf_llama_variants_fixtures.py [NAME...], then
python3 scripts/make_gguf_llama_variants_fixtures.py --llamacpp [NAME...] (make_fixtures.py's
virtual environment; gguf-py's own dependencies installed on first use). CI never runs it: the
fixtures are committed.
"""
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_fixtures as mf  # noqa: E402
import make_gguf_lfm2_fixtures as lfm2  # noqa: E402

# The checkpoints converted: make_fixtures.py's fixture of that name with these changes, and a seed
# of its own.
SOURCES = {
    "olmo": ("olmo", {}, 3522),
    "dbrx": ("dbrx", {}, 3523),
    # no attention biases: llama.cpp's olmo2 has no attn_output.bias (module docstring)
    "olmo2": ("olmo2", {"attention_bias": False}, 3505),
    # one RoPE base for both layer types: llama.cpp's olmo2 graph rotates the sliding layers with
    # rope.freq_base too (module docstring)
    "olmo3": ("olmo3", {"rope_theta": 500000.0}, 3506),
    # no sliding window (llama.cpp's exaone4 slides only in 64-layer files) and heads of 16 (its
    # attn_output is [hidden, hidden]) (module docstring)
    "exaone4": ("exaone4", {"sliding_window": None, "layer_types": ["full_attention"] * 4, "head_dim": 16}, 3507),
    "glm4": ("glm4", {}, 3508),
    # no o_proj / MLP biases: llama.cpp's seed_oss loads neither (module docstring)
    "seed_oss": ("seed_oss", {"attention_out_bias": False, "mlp_bias": False}, 3509),
    # no biases: llama.cpp's ernie4_5 has no MLP biases and ignores an o_proj one (module docstring)
    "ernie4_5": ("ernie4_5", {"use_bias": False}, 3510),
    # no biases (llama.cpp's hunyuan-dense has no attn_output.bias) and 32k positions (the
    # converter's assertion for NTK-alpha RoPE) (module docstring)
    "hunyuan_dense": ("hunyuan_v1_dense", {"attention_bias": False, "max_position_embeddings": 32768}, 3511),
    # as many KV heads as query heads: llama.cpp's olmoe sizes attn_k_norm n_embd wide (OLMoE's
    # own configs are MHA) (module docstring)
    "olmoe": ("olmoe", {"num_key_value_heads": 4}, 3512),
    # two shared experts: the converter writes expert_shared_feed_forward_length as
    # intermediate_size / num_key_value_heads (128 / 2 = 64 = 2 x 32), which llama.cpp sizes the
    # shared tensors by (module docstring)
    "ernie4_5_moe": ("ernie4_5_moe", {"moe_num_shared_experts": 2}, 3514),
    "apertus": ("apertus", {}, 3513),
    # what llama.cpp's llama4 runs: q/k norms (on unless 128 experts), no attention biases (no
    # attn_output.bias), NoPE every 4th layer, chunks of 8192 and the temperature's floor 8192 (all
    # hard-coded); every 2nd layer sparse, for dense layers beside the sparse ones (module docstring)
    "llama4": ("llama4_text", {"use_qk_norm": True, "attention_bias": False, "no_rope_layer_interval": 4,
                               "attention_chunk_size": 8192, "floor_scale": 8192, "interleave_moe_layer_step": 2},
               3515),
    # the Hub config's rotary_dim and scoring_func, which the converter reads (the first required,
    # the second the only source of expert_gating_func, without which llama.cpp aborts); transformers
    # runs the same model with them (module docstring)
    "minimax_m2": ("minimax_m2", {"rotary_dim": 16, "scoring_func": "sigmoid"}, 3516),
    # 64 layers, the depth at which llama.cpp's command-r loads q/k norms (Command R+'s), narrow
    # (hidden 16, 2 heads of 8 over 1) to stay as small as the others; no biases (llama.cpp's
    # command-r has no attn_output.bias) (module docstring)
    "command_r": ("cohere", {"num_hidden_layers": 64, "hidden_size": 16, "intermediate_size": 32,
                             "num_attention_heads": 2, "num_key_value_heads": 1, "attention_bias": False}, 3517),
    # the Hub configs' rotary_pct, which the converter requires (module docstring)
    "cohere2": ("cohere2", {"rotary_pct": 1.0}, 3518),
    # heads of 128 (hidden / heads), 32k positions and theta 1e4: the converter's assertions for
    # NTK-alpha RoPE (module docstring; config.json's Hub fields: HUNYUAN_MOE_HUB_FIELDS)
    "hunyuan_moe": ("hunyuan_v1_moe", {"hidden_size": 128, "num_attention_heads": 1, "num_key_value_heads": 1,
                                       "head_dim": 128, "max_position_embeddings": 32768}, 3519),
    # no sliding window (neither llama.cpp's converter nor its dots1 graph has one) and as many KV
    # heads as query heads (llama.cpp's dots1 sizes attn_k / attn_v by n_head: dots.llm1 is MHA)
    # (module docstring)
    "dots1": ("dots1", {"sliding_window": None, "num_key_value_heads": 4}, 3520),
    # no sliding window (llama.cpp's mistral3 has none) (module docstring)
    "ministral3": ("ministral3_text", {"sliding_window": None}, 3521),
    "internlm2": ("internlm2", {}, 3524),
    "chatglm": ("chatglm", {}, 3525),
    "glm_edge": ("glm", {}, 3526),
    "minicpm": ("minicpm", {}, 3527),
}
# name: (source, --outtype, pre-tokenizer name)
FIXTURES = {
    "gguf_olmo": ("olmo", "f32", "gpt-2"),
    "gguf_dbrx": ("dbrx", "f32", "gpt-2"),
    "gguf_olmo2": ("olmo2", "f32", "gpt-2"),
    "gguf_olmo3": ("olmo3", "f32", "gpt-2"),
    "gguf_exaone4": ("exaone4", "f32", "gpt-2"),
    "gguf_glm4": ("glm4", "f32", "glm4"),
    "gguf_seed_oss": ("seed_oss", "f32", "gpt-2"),
    "gguf_ernie4_5": ("ernie4_5", "f32", "default"),
    "gguf_hunyuan_dense": ("hunyuan_dense", "f32", "gpt-2"),
    "gguf_olmoe": ("olmoe", "f32", "gpt-2"),
    "gguf_ernie4_5_moe": ("ernie4_5_moe", "f32", "default"),
    "gguf_apertus": ("apertus", "f32", "gpt-2"),
    "gguf_llama4": ("llama4", "f32", "gpt-2"),
    "gguf_minimax_m2": ("minimax_m2", "f32", "gpt-2"),
    "gguf_command_r": ("command_r", "f32", "command-r"),
    "gguf_cohere2": ("cohere2", "f32", "command-r"),
    "gguf_hunyuan_moe": ("hunyuan_moe", "f32", "gpt-2"),
    "gguf_dots1": ("dots1", "f32", "qwen2"),
    "gguf_ministral3": ("ministral3", "f32", "tekken"),
    "gguf_internlm2": ("internlm2", "f32", "default"),
    "gguf_chatglm": ("chatglm", "f32", "chatglm-bpe"),
    "gguf_glm_edge": ("glm_edge", "f32", "chatglm-bpe"),
    "gguf_minicpm": ("minicpm", "f32", "default"),
}

# Hunyuan-A13B's config.json fields that HunYuanMoEModel.set_gguf_parameters reads (per-layer lists,
# each asserted to hold one value) and HunYuanMoEV1Config does not write, with the tiny model's
# values; the flags as A13B's (transformers ignores all of them: its experts and shared MLP are
# intermediate_size wide, one shared MLP, q/k norms always).
HUNYUAN_MOE_HUB_FIELDS = {"moe_intermediate_size": [32, 32], "num_shared_expert": [1, 1], "use_mixed_mlp_moe": True,
                          "use_qk_norm": True, "use_cla": False}

# make_gguf_qwen35_fixtures.CONVERT with HunYuanMoEModel.set_vocab replaced by the byte-level
# tokenizer.json reader of the other classes (TextModel._set_vocab_gpt2): its own reads only
# Hunyuan's tiktoken vocabulary (AutoTokenizer with remote code, mergeable_ranks) and writes bos
# 127959. The prompts are token ids, so the vocabulary changes no logit.
CONVERT_HUNYUAN_MOE = """
import runpy, sys
sys.path.insert(0, sys.argv[1])
import conversion.base as base
import conversion.hunyuan as hunyuan
pre = sys.argv[2]
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
hunyuan.HunYuanMoEModel.set_vocab = base.TextModel._set_vocab_gpt2
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def write_glm4_tokenizer(model_dir, vocab_size):
    """make_gguf_qwen35_fixtures.write_toy_tokenizer's vocabulary of 256 with <|user|> (an added
    special token, 254) in place of the byte alphabet's third-last character (ab 253,
    <|endoftext|> 255): Glm4Model.set_vocab looks up <|endoftext|> and <|user|> among the added
    tokens (KeyError without them)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    assert vocab_size >= 256
    vocab = {ch: i for i, ch in enumerate(alphabet[:253])}
    vocab["ab"] = 253
    for i in range(254, vocab_size - 2):
        vocab[f"tok{i}"] = i
    vocab["<|user|>"] = vocab_size - 2
    vocab["<|endoftext|>"] = vocab_size - 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<|user|>", special=True), AddedToken("<|endoftext|>", special=True)])
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(model_dir))


def write_spm_tokenizer(model_dir):
    """A SentencePiece BPE model with byte fallback (tokenizer.model, which Ernie4_5Model.set_vocab
    requires): <unk> 0, <s> 1, </s> 2, the byte pieces <0x00>.. from 3, then merges learnt from a
    few filler words (ids 259 up, which the converter drops: past vocab_size 256). The HF toy
    tokenizer's files are removed (their added <|endoftext|> would replace piece 255)."""
    import sentencepiece as spm
    for f in Path(model_dir).iterdir():
        if f.name.startswith("tokenizer") or f.name == "special_tokens_map.json":
            f.unlink()
    rng = random.Random(3510)
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "away", "hello", "world"]
    lines = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(200)]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(Path(model_dir) / "tokenizer"),
                                   vocab_size=300, model_type="bpe", byte_fallback=True, hard_vocab_limit=False,
                                   minloglevel=2)
    (Path(model_dir) / "tokenizer.vocab").unlink()


def build_source(sources, source, tmp):
    """make_gguf_lfm2_fixtures.build_source, with glm4's and ernie4_5's vocabularies replaced as
    their converters require, hunyuan_moe's config.json given HUNYUAN_MOE_HUB_FIELDS, and
    internlm2's checkpoint in InternLM2's own layout with a SentencePiece tokenizer.model (which
    InternLM2Model.set_vocab requires)."""
    model, d = lfm2.build_source(sources, source, tmp)
    if source == "internlm2":  # the LlamaForCausalLM rewritten in InternLM2's layout (make_fixtures.make_internlm)
        base, overrides, _ = sources[source]
        mf.write_internlm(model, {**mf.fixtures()[base][2], **overrides}, "internlm2", d)
        write_spm_tokenizer(d)
    elif source == "minicpm":  # the GraniteForCausalLM under MiniCPM's config.json (make_fixtures.make_minicpm)
        base, overrides, _ = sources[source]
        path = d / "config.json"
        path.write_text(json.dumps(mf.minicpm_config({**mf.fixtures()[base][2], **overrides}), indent=2) + "\n")
        write_spm_tokenizer(d)
    elif source == "chatglm":  # the GlmForCausalLM rewritten in ChatGLM's layout (make_fixtures.make_chatglm)
        base, overrides, _ = sources[source]
        mf.write_chatglm(model, {**mf.fixtures()[base][2], **overrides}, d)
        write_glm4_tokenizer(d, model.config.vocab_size)
    elif source in ("glm4", "glm_edge"):
        write_glm4_tokenizer(d, model.config.vocab_size)
    elif source in ("ernie4_5", "ernie4_5_moe"):
        write_spm_tokenizer(d)
    elif source == "hunyuan_moe":
        path = d / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **HUNYUAN_MOE_HUB_FIELDS}, indent=2) + "\n")
    return model, d


def convert(model_dir, outfile, outtype, pre):
    """make_gguf_lfm2_fixtures.convert, by CONVERT_HUNYUAN_MOE for hunyuan_moe's checkpoint."""
    snippet = CONVERT_HUNYUAN_MOE if model_dir.name == "hunyuan_moe" else None
    lfm2.convert(model_dir, outfile, outtype, pre, snippet=snippet)


def main():
    lfm2.run(SOURCES, FIXTURES, __file__, build=build_source, conv=convert)


if __name__ == "__main__":
    main()
