// Internal to models/: the config.json fields of older dense decoders, read into ModelConfig
// by parse_hf_config (models/model_config.cpp) for the Llama decoder (models/llama.h):
//   gemma (GemmaForCausalLM, Gemma 1 / CodeGemma; GemmaConfig): Gemma 2's layer without its
//     softcaps, post-norms and windows: RMSNorms scaling by 1 + w (norm_offset), the embeddings
//     times sqrt(hidden_size), a gelu_pytorch_tanh-gated MLP (hidden_act "gelu", the legacy
//     value, means that too), head_dim as config.json says (GemmaConfig's default 256), softmax
//     scale head_dim^-0.5, q/k/v and o biases with attention_bias, tied by default;
//   starcoder2 (Starcoder2ForCausalLM, StarCoder2; Starcoder2Config): LayerNorms with biases
//     (norm_epsilon), q/k/v/o and MLP biases with use_bias (true by default), an ungated MLP
//     c_fc -> gelu_pytorch_tanh -> c_proj (mlp_ungated), sliding_window (null: none) on every
//     layer, tied by default;
//   phi (PhiForCausalLM, Phi-1 / 1.5 / 2; PhiConfig): one LayerNorm with bias (layer_norm_eps)
//     feeding the attention and the MLP side by side (parallel_blocks), q/k/v and dense (o)
//     biases, RoPE over partial_rotary_factor of each head (0.5 by default), an ungated biased
//     MLP fc1 -> gelu_new -> fc2, a final LayerNorm with bias, lm_head with a bias;
//   stablelm (StableLmForCausalLM, StableLM / StableLM 2; StableLmConfig): LayerNorms with biases
//     (layer_norm_eps), RoPE over partial_rotary_factor (0.25 by default), q/k/v biases with
//     use_qkv_bias, per-head q/k LayerNorms (each head its own weights, no bias) with
//     qk_layernorm, the attention and the MLP side by side off input_layernorm with
//     use_parallel_residual, a SiLU-gated MLP without biases;
//   jais2 (Jais2ForCausalLM, Jais 2; Jais2Config) and nemotron (NemotronForCausalLM, Nemotron-4 /
//     Minitron; NemotronConfig): Llama's layer with biased LayerNorms (Nemotron's LayerNorm1P
//     scaling by 1 + w: norm_offset), q/k/v/o biases with attention_bias and an ungated relu2 MLP
//     with mlp_bias (Jais 2's both true by default, Nemotron's false), Nemotron's RoPE over
//     partial_rotary_factor (0.5 by default);
//   exaone (ExaoneForCausalLM, EXAONE 3.0 / 3.5; transformers' LlamaForCausalLM under ExaoneConfig):
//     Llama's layer under the Hub's config and tensor names (apply_exaone3_config_names,
//     classic_decoder_tensors), rope_theta 5e5 when absent;
//   gpt_neox, gptj, gpt2, gpt_bigcode: models/gpt_decoders_config.h (read_gpt_decoder).
// Their safetensors tensors under the names the Llama decoder reads: classic_decoder_tensors.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_classic_decoder(const std::string& arch);

// EXAONE 3.x's config.json (model_type "exaone") names num_hidden_layers, rms_norm_eps and
// hidden_act num_layers, layer_norm_epsilon and activation_function (ExaoneConfig.attribute_map):
// copies each under the common name where that is absent. Any other config is left unchanged.
void apply_exaone3_config_names(nlohmann::json& j);

// Reads what the architecture adds to the Llama decoder (c.arch one of the above, the common fields
// and the RoPE read already). Refuses by name what the decoder does not run: another hidden_act,
// Phi's qk_layernorm, Gemma's bidirectional attention, a StableLM head_dim other than
// hidden_size / num_attention_heads.
Status read_classic_decoder(const nlohmann::json& j, ModelConfig& c);

// The tensors of a starcoder2 or phi checkpoint under the Llama decoder's names: mlp.c_fc / fc1
// as mlp.up_proj, mlp.c_proj / fc2 as mlp.down_proj, Phi's self_attn.dense as self_attn.o_proj and
// model.final_layernorm as model.norm; an exaone checkpoint's as transformers' conversion mapping
// renames them (transformer.h.N.attn.attention.* as model.layers.N.self_attn.*, ...); other
// architectures' tensors unchanged.
std::map<std::string, RawTensor> classic_decoder_tensors(const std::string& arch, std::map<std::string, RawTensor> tensors);

}  // namespace brigade
