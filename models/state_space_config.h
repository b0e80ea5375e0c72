// Internal to models/: the config.json of the state-space models and hybrids (models/state_space.h)
// read into ModelConfig (ModelConfig::ssm, ssm_layers, mlp_layers): Mamba1 (MambaConfig,
// FalconMambaConfig), Mamba2 (Mamba2Config), Granite 4.0-H (GraniteMoeHybridConfig),
// Nemotron-H (NemotronHConfig), Jamba, Qwen3-Next / Qwen3.5 and LFM2 (Lfm2Config, Lfm2MoeConfig).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"

namespace brigade {

// architectures[0] Mamba2ForCausalLM, or model_type mamba2 without architectures.
bool is_mamba2(const nlohmann::json& j);

// arch "mamba2": hidden_size, num_hidden_layers, vocab_size, num_heads, head_dim, n_groups,
// state_size, conv_kernel, expand (expand * hidden_size must be num_heads * head_dim),
// use_conv_bias, use_bias, layer_norm_epsilon, time_step_limit (a pair; Python's Infinity as
// json.dumps writes it or as transformers 5's {"__float__": "Infinity"}), tie_word_embeddings,
// bos/eos_token_id, torch_dtype; max_position_embeddings when present, else 1 << 20 (a state
// has no positional limit). Refused by name: hidden_act other than silu, quantization_config,
// heads not a multiple of n_groups.
Expected<ModelConfig> read_mamba2_config(const nlohmann::json& j);

// architectures[0] MambaForCausalLM or FalconMambaForCausalLM, or model_type mamba / falcon_mamba.
bool is_mamba1(const nlohmann::json& j);

// arch "mamba" or "falcon_mamba" (Mamba1 mixers: state-spaces/mamba-*-hf, Falcon-Mamba-7B):
// hidden_size, num_hidden_layers, vocab_size, state_size, expand, conv_kernel, use_conv_bias,
// use_bias, time_step_rank ("auto": ceil(hidden / 16)), layer_norm_epsilon, tie_word_embeddings
// (true by default), mixer_rms_eps (falcon_mamba's norms of dt, B and C); the layout as d_inner
// heads of one channel in one group (SsmConfig::dt_rank > 0). Refused by name: hidden_act other
// than silu, quantization_config.
Expected<ModelConfig> read_mamba1_config(const nlohmann::json& j);

// architectures[0] JambaForCausalLM, or model_type jamba (AI21 Jamba 1.5/1.6/1.7 Mini and Large).
bool is_jamba(const nlohmann::json& j);

// arch "jamba": Mamba1 mixers (mamba_d_state, mamba_d_conv, mamba_expand, mamba_dt_rank "auto" or
// a number, mamba_conv_bias, mamba_proj_bias; dt, B and C RMS-normed with weights and
// rms_norm_eps) and attention layers without positions where layer % attn_layer_period ==
// attn_layer_offset (softmax scale head_dim^-0.5); after each, an RMSNorm and a SwiGLU MLP of
// intermediate_size, or in layers where layer % expert_layer_period == expert_layer_offset a MoE
// of num_experts such experts (top num_experts_per_tok of the softmax, not renormalized).
// Refused by name: hidden_act other than silu, offsets not below their periods, quantization_config.
Expected<ModelConfig> read_jamba_config(const nlohmann::json& j);

// architectures[0] GraniteMoeHybridForCausalLM, or model_type granitemoehybrid (IBM Granite 4.0-H:
// Micro, Tiny, Small).
bool is_granite_hybrid(const nlohmann::json& j);

// arch "granitemoehybrid": layer_types (mamba / linear_attention, attention / full_attention) into
// ssm_layers; the attention layers' num_attention_heads, num_key_value_heads, attention_multiplier
// (the softmax scale, attn_scale); the mixers' mamba_n_heads, mamba_d_head ("auto": expand *
// hidden / heads), mamba_n_groups, mamba_d_state, mamba_d_conv, mamba_expand, mamba_conv_bias,
// mamba_proj_bias, time_step_limit; the MLP: shared_intermediate_size (a SwiGLU every token
// runs, shared_expert_intermediate_size) and num_local_experts experts of intermediate_size
// (top num_experts_per_tok, softmax over them: norm_topk_prob); embedding_multiplier,
// residual_multiplier, logits_scaling. Refused by name: position_embedding_type rope (Granite
// 4.0-H's attention has no positions), attention_bias, hidden_act other than silu,
// quantization_config.
Expected<ModelConfig> read_granite_hybrid_config(const nlohmann::json& j);

// IBM Bamba (BambaForCausalLM: Bamba-9B v1 / v2; BambaConfig): Granite 4.0-H's Mamba2 mixers
// (mamba_* fields, BambaConfig's defaults) and GQA attention at attn_layer_indices, under Jamba's
// names (input_layernorm, mamba., self_attn., pre_ff_layernorm, final_layernorm), a dense SwiGLU
// (feed_forward.{gate,up,down}_proj) after every layer, RoPE of halves over partial_rotary_factor
// (0.5) of each head. Refuses attention_bias and mlp_bias by name.
bool is_bamba(const nlohmann::json& j);
Expected<ModelConfig> read_bamba_config(const nlohmann::json& j);

// architectures[0] NemotronHForCausalLM, or model_type nemotron_h (NVIDIA Nemotron-H 8B/47B/56B,
// Nemotron-Nano-9B/12B-v2).
bool is_nemotron_h(const nlohmann::json& j);

// arch "nemotron_h": blocks of one kind each, from hybrid_override_pattern (M mixer, * attention,
// - MLP) or layers_block_type / layer_types (mamba / linear_attention, attention /
// full_attention, mlp), into ssm_layers and mlp_layers; the attention layers' heads, kv heads and
// head_dim (softmax scale head_dim^-0.5, no positions); the MLP blocks' intermediate_size with
// relu2 (mlp_bias); the mixers' mamba_num_heads, mamba_head_dim (d_inner = their product, not
// expand * hidden), n_groups, ssm_state_size, conv_kernel, use_conv_bias, use_bias (in/out_proj),
// time_step_limit (or the mamba_-prefixed names older configs use); layer_norm_epsilon. Refused by
// name: MoE blocks (E, moe: Nemotron 3's relu2 experts), a sliding window, attention_bias,
// other activations, MTP layers, quantization_config.
Expected<ModelConfig> read_nemotron_h_config(const nlohmann::json& j);

// architectures[0] Lfm2ForCausalLM or Lfm2MoeForCausalLM, or model_type lfm2 / lfm2_moe (LiquidAI's
// LFM2-350M/700M/1.2B/2.6B, LFM2-8B-A1B).
bool is_lfm2(const nlohmann::json& j);

// arch "lfm2" or "lfm2_moe": short-conv blocks and attention from layer_types (conv,
// full_attention), else full_attn_idxs (the attention layers; absent: all of them, as
// Lfm2Config); the conv's conv_L_cache taps and conv_bias (in_proj, conv and out_proj alike)
// into SsmConfig (short_conv); the attention's heads, kv heads, head_dim (hidden / heads unless
// given), q/k head norms and RoPE over whole heads (rope_theta, 1e6 by default, or
// rope_parameters; a scaling rope_type as the Llama decoder's but longrope); norm_eps;
// intermediate_size (or the Hub's block_ff_dim) as lfm2's MLP adjusts it
// (block_auto_adjust_ff_dim: int(2 I / 3), times block_ffn_dim_multiplier, rounded up to
// block_multiple_of); tie_word_embeddings (or tie_embedding; true by default). lfm2_moe: dense
// SwiGLUs of intermediate_size in the first num_dense_layers layers, then num_experts SwiGLU
// experts of moe_intermediate_size, num_experts_per_tok per token by sigmoid scores (selection
// shifted by expert_bias with use_expert_bias), renormalised (norm_topk_prob) and scaled by
// routed_scaling_factor. Lfm2MoeConfig's and Lfm2Config's defaults. Refused by name:
// quantization_config, a layer type of another kind.
Expected<ModelConfig> read_lfm2_config(const nlohmann::json& j);

// architectures[0] FalconH1ForCausalLM, or model_type falcon_h1 (TII's Falcon-H1 0.5B ... 34B).
bool is_falcon_h1(const nlohmann::json& j);

// arch "falcon_h1": every layer a Mamba2 mixer beside GQA attention (parallel_attention; RoPE over
// whole heads from rope_theta / rope_parameters, softmax scale head_dim^-0.5), then a SwiGLU of
// intermediate_size. The mixers' mamba_n_heads, mamba_d_head ("auto": mamba_d_ssm / heads),
// mamba_d_ssm (absent: mamba_expand * hidden), mamba_n_groups, mamba_d_state, mamba_d_conv,
// mamba_conv_bias, time_step_limit; mamba_rms_norm (the gated RMSNorm, the gate first:
// mamba_norm_before_gate false) or y * silu(z); mamba_proj_bias and projectors_bias (in_proj's
// and out_proj's biases, which must agree). The muP multipliers into ModelConfig::mup,
// embedding_multiplier, and lm_head_multiplier as 1 / logits_scaling. Refused by name:
// mamba_rms_norm with mamba_norm_before_gate (the norm before the gate), attention_bias,
// mlp_bias, hidden_act other than silu, quantization_config.
Expected<ModelConfig> read_falcon_h1_config(const nlohmann::json& j);

// Qwen3-Next (Qwen3NextForCausalLM) and Qwen3.5's language models (Qwen3_5ForCausalLM,
// Qwen3_5MoeForCausalLM): arch "qwen3_next", "qwen3_5_text" or "qwen3_5_moe_text".
bool is_gated_delta(const std::string& arch);

// architectures[0] Qwen3_5ForConditionalGeneration or Qwen3_5MoeForConditionalGeneration, or
// model_type qwen3_5 / qwen3_5_moe: Qwen3.5 as the Hub ships it, a vision tower beside the
// language model (model.language_model.*, model.visual.*, and an MTP module, mtp.*).
bool is_qwen3_5_multimodal(const nlohmann::json& j);

// Such a config's language model as a Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM config: its
// text_config, with the whole model's tie_word_embeddings and dtype where the text's has none.
Expected<nlohmann::json> qwen3_5_text_config(const nlohmann::json& j);

// The whole config.json of such a checkpoint: the language model (qwen3_5_text_config) with its
// interleaved M-RoPE (rope_parameters.mrope_section, [11, 11, 10] where absent, as transformers'
// Qwen3_5TextRotaryEmbedding; interleaved whatever mrope_interleaved says, as transformers
// always rotates it) and the vision tower: Qwen3-VL's without DeepStack (vision_config; any
// deepstack_visual_indexes are ignored, as Qwen3_5VisionModel drops them). Its MTP module is
// not loaded.
Expected<ModelConfig> read_qwen3_5_multimodal(const nlohmann::json& j);

// Their Gated DeltaNet layers, read after the Qwen decoder's fields (parse_hf_config): layer_types
// (linear_attention, full_attention) or else full_attention_interval (4) into ssm_layers;
// linear_num_value_heads, linear_value_head_dim, linear_num_key_heads, linear_key_head_dim and
// linear_conv_kernel_dim into SsmLayout as H, P, G, N and conv_kernel (Backend::gated_delta);
// the attention's softmax scale head_dim^-0.5. Refused by name: hidden_act other than silu,
// attention_bias, a layer type of another kind.
Status read_gated_delta(const nlohmann::json& j, ModelConfig& c);

// Python's json.dumps writes float('inf') and float('nan') as the bare tokens Infinity,
// -Infinity and NaN, which JSON (and nlohmann) rejects: `text` with each such token outside a
// string turned into the string "Infinity", "-Infinity" or "NaN" (read back by config_float).
std::string quote_python_floats(const std::string& text);

}  // namespace brigade
