// Internal to models/: the config.json fields of the Llama decoder's newer relatives, read into
// ModelConfig by parse_hf_config (models/model_config.cpp). Each runs on the Llama decoder
// (models/llama.h):
//   olmo2 (Olmo2ForCausalLM, AllenAI OLMo 2): norms after the attention and the MLP rather than
//     before (post_norms), q/k norms over the whole projections (qk_norm_whole);
//   olmo3 (Olmo3ForCausalLM, OLMo 3): OLMo 2's layer with sliding-window layers (layer_types), its
//     rope scaling on the full-attention layers only;
//   exaone4 (Exaone4ForCausalLM, LG EXAONE 4.0): post_norms, per-head q/k norms, sliding-window
//     layers whose full-attention layers have no RoPE;
//   glm4 (Glm4ForCausalLM, GLM-4-0414 dense): Gemma's four norms under GLM's names, q/k/v biases,
//     gate|up as one tensor, RoPE of adjacent pairs over half of each head;
//   seed_oss (SeedOssForCausalLM, ByteDance Seed-OSS): biases on q/k/v (attention_bias), on o
//     (attention_out_bias) and on the MLP (mlp_bias);
//   ernie4_5 (Ernie4_5ForCausalLM, Baidu ERNIE 4.5 dense): use_bias on every projection, RoPE of
//     adjacent pairs;
//   hunyuan_v1_dense (HunYuanDenseV1ForCausalLM, Tencent Hunyuan dense): q/k norms after RoPE,
//     NTK-alpha RoPE (the base stretched by alpha);
//   olmoe (OlmoeForCausalLM, AllenAI OLMoE): Llama's pre-norm layers with OLMo 2's whole-projection
//     q/k norms, every MLP sparse (its experts read by read_moe, models/model_config.cpp);
//   apertus (ApertusForCausalLM, Swiss AI Apertus): per-head q/k norms, an ungated MLP whose
//     activation is xIELU with learned per-layer parameters (MlpActivation::xielu), llama3 RoPE;
//   ernie4_5_moe (Ernie4_5_MoeForCausalLM, ERNIE-4.5-21B-A3B / 300B-A47B): ERNIE 4.5's attention,
//     sparse layers from moe_layer_start_index every moe_layer_interval-th to moe_layer_end_index
//     of softmax-routed experts chosen with the e_score_correction_bias, renormalised, beside
//     moe_num_shared_experts shared ones (read_moe, models/model_config.cpp);
//   llama4_text (Llama4ForCausalLM, and Llama4ForConditionalGeneration's language model: Llama 4
//     Scout / Maverick): RoPE of adjacent pairs with weightless q/k norms after it and chunked
//     attention on three of every four layers, the others without RoPE, full attention and a
//     query temperature growing with the position; sparse layers of sigmoid-scored top-1 experts
//     whose score scales the expert's input, beside a shared expert (read_llama4);
//   minimax_m2 (MiniMaxM2ForCausalLM, MiniMax-M2 / M2.1): OLMo 2's whole-projection q/k norms
//     before a partial RoPE, every layer sparse with sigmoid routing chosen with the
//     e_score_correction_bias and renormalised, Mixtral's names (read_minimax_m2);
//   dots1 (Dots1ForCausalLM, rednote-hilab dots.llm1): Qwen3's attention with Dots1Config's
//     sliding layers (read_dots1_attention); DeepSeek-V3's experts and routing beside shared
//     experts from first_k_dense_replace on (read_dots1, models/deepseek_config.h);
//   ministral3 (Ministral3ForCausalLM, and Mistral3ForConditionalGeneration's language model when
//     its text_config is one: Ministral 3, Devstral Small 2): Mistral's layer with YaRN and a query
//     temperature on every layer after RoPE (read_llama4_scaling_beta);
//   cohere2_moe (Cohere2MoeForCausalLM, Command A Plus): Cohere 2's layer over experts, shared
//     experts summed or averaged, a dense prefix (read_cohere2_moe);
//   ministral (MinistralForCausalLM, transformers' Ministral type: Ministral-8B-Instruct-2410):
//     Mistral's layer without biases, its window on the layers layer_types calls sliding
//     (read_ministral);
//   phimoe (PhimoeForCausalLM, Microsoft Phi-3.5-MoE): Mixtral's layer under biased LayerNorms, a
//     biased lm_head, longrope scaled by short_/long_mscale, sparsemixer routing (read_phimoe,
//     models/phimoe_config.h);
//   afmoe (AfmoeForCausalLM, Arcee Trinity) and arcee (ArceeForCausalLM, Arcee AFM-4.5B):
//     models/arcee_config.h;
//   gemma (Gemma 1), starcoder2 (StarCoder2), phi (Phi-1 / 1.5 / 2) and stablelm (StableLM):
//     models/classic_decoders_config.h;
//   flint (FlintForCausalLM, RecursiveSI Flint): Qwen3-MoE's attention with a sink per head on
//     every layer and windows on layer_types' sliding layers, the full ones without RoPE; sigmoid
//     routing, renormalised, beside an ungated shared expert, mlp_only_layers dense (read_flint,
//     read_flint_moe in models/model_config.cpp);
//   bitnet (BitNetForCausalLM, BitNet b1.58): Llama's layer with sub-norms before o_proj and
//     down_proj and a gated relu2 MLP; ternary linears with int8 inputs under quant_method
//     bitnet (models/quant_config.h) (read_bitnet);
//   mellum (MellumForCausalLM, JetBrains Mellum 2): Qwen3-MoE's layer with windows on layer_types'
//     sliding layers, a RoPE base per layer type and dense layers by mlp_layer_types (read_mellum,
//     read_mellum_moe in models/model_config.cpp);
//   mimo_v2_flash (MiMo-V2-Flash), exaone_moe (K-EXAONE) and kolibri1 (Aleph Alpha Kolibri-1):
//     models/mimo_exaone_config.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"

namespace brigade {

// config.json's hidden_act, `want` when absent: unsupported naming it and c.arch when another.
Status require_act(const nlohmann::json& j, const ModelConfig& c, const char* want);

// The routed experts beside one ungated shared SwiGLU, as Flint and Kolibri-1 configure them, with
// the config class's defaults: num_experts (num_local_experts where a config saves it so)
// experts of moe_intermediate_size, num_experts_per_tok per token, shared_expert_intermediate_size
// the shared SwiGLU's width (> 0, else invalid_argument naming c.arch).
Status read_experts_beside_shared(const nlohmann::json& j, ModelConfig& c, int experts, int k, int inter, int shared);

// sliding_window (`fallback` where absent) of a model whose transformers class always builds its
// sliding mask from it (Flint, Kolibri-1): null or <= 0 is refused, naming c.arch.
Status read_required_window(const nlohmann::json& j, ModelConfig& c, int fallback);

// EXAONE 4's and Cohere2's full-attention layers have no positions ("global NoPE"): nope_layers
// set on every layer without a window (layer_window 0). Their safetensors and GGUF readers share it.
void nope_on_full_layers(ModelConfig& c);

// EXAONE 4's sliding layers (K-EXAONE's too): layer_types, or sliding_window_pattern as a string
// of L (local) and G (global) repeating over the layers, or an integer n (every n-th layer
// global; 4 when absent).
Status read_exaone_sliding_layers(const nlohmann::json& j, ModelConfig& c);

// A wrapper's (`wrapper`: the class name, for messages) language model config: its text_config
// over `defaults`, whose model_type must be `type` (another refused by name), the top level's
// bos/eos ids and dtype where text_config has none, the top level's tie_word_embeddings (`tie`
// when absent), and architectures [text_class]. corrupt without a text_config object.
Expected<nlohmann::json> wrapped_text_config(const nlohmann::json& j, const char* wrapper, nlohmann::json defaults,
                                             const char* type, const char* text_class, bool tie);

// Whether config.json is a Mistral3ForConditionalGeneration (model_type mistral3: Mistral Small
// 3.1 / 3.2, Magistral Small, Devstral Small; Ministral 3, Devstral Small 2), whose language model
// brigade serves text-only.
bool is_mistral3(const nlohmann::json& j);
// Its language model's config as a MistralForCausalLM config.json (text_config's model_type
// mistral, with Mistral3Config's defaults for the fields it leaves out), a Ministral3ForCausalLM
// one (model_type ministral3, Ministral3Config's defaults) or a Mistral4ForCausalLM one (model_type
// mistral4: Mistral Small 4, Mistral4Config's defaults; another type is refused by name), the
// top level's dtype and bos/eos ids where text_config has none, and the top level's
// tie_word_embeddings (Mistral3Config's default true: transformers ties lm_head to the
// embeddings by it, whatever text_config says). corrupt without a text_config object.
Expected<nlohmann::json> mistral3_text_config(const nlohmann::json& j);

// Whether config.json is a Llama4ForConditionalGeneration (model_type llama4: Llama 4 Scout and
// Maverick), whose language model brigade serves text-only.
bool is_llama4(const nlohmann::json& j);
// Its language model's config as a Llama4ForCausalLM config.json: text_config (model_type
// llama4_text; another is refused by name), the top level's dtype and bos/eos ids where
// text_config has none, and the top level's tie_word_embeddings (Llama4Config's default false).
// corrupt without a text_config object.
Expected<nlohmann::json> llama4_text_config(const nlohmann::json& j);

// The architecture's name for transformers' class or model_type, or "" when not one of these.
std::string llama_variant_arch(const std::string& class_name, const std::string& model_type);
bool is_llama_variant(const std::string& arch);

// Hunyuan's NTK-alpha RoPE (transformers' compute_ntk_alpha_rope_parameters): a rope_scaling /
// rope_parameters object of type "dynamic" with an "alpha" scales nothing but stretches the base.
// read_ntk_alpha returns that alpha (0 when `scaling` is not one); stretch_rope_base sets
// rope_theta * alpha^(d / (d - 2)), d = head_dim (rope_theta and head_dim read already).
Expected<double> read_ntk_alpha(const nlohmann::json& scaling);
Status stretch_rope_base(double alpha, ModelConfig& c);

// Ministral 3's (Ministral3ForCausalLM, and Mistral3ForConditionalGeneration's language model when
// its text_config is one) and Mistral 4's (models/deepseek_config.h) query temperature, after RoPE
// on every layer: 1 + beta * log(1 + floor(position / original_max_position_embeddings)), beta
// the rope parameters' llama_4_scaling_beta (absent or 0: none; transformers' get_llama_4_attn_scale).
// Refused by name: no rope_parameters at all (the config classes' defaults are not applied), a
// beta without original_max_position_embeddings.
Status read_llama4_scaling_beta(const nlohmann::json& j, ModelConfig& c);

// Reads what the architecture adds to the Llama decoder (c.arch set, the common fields and the
// RoPE read already): norms, biases, q/k norms, sliding and NoPE layers, RoPE style, per-layer-type
// RoPE. Refuses, naming the field, what the decoder does not run.
Status read_llama_variant(const nlohmann::json& j, ModelConfig& c);

}  // namespace brigade
