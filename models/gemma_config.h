// Internal to models/: the Gemma 2 / Gemma 3 (text) fields of config.json, read into ModelConfig by
// parse_hf_config (models/model_config.cpp). Both run on the Llama decoder (models/llama.h).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"
#include "models/raw_tensor.h"

namespace brigade {

bool is_gemma(const std::string& arch);

// Reads a gemma2 / gemma3_text config's fields (c.arch set, the common fields and rope scaling
// read already) as transformers' Gemma2Config / Gemma3TextConfig defaults and modeling code use
// them: norms scale by 1 + w and sandwich both blocks, the embeddings are scaled by
// sqrt(hidden_size), the MLP gate is gelu_pytorch_tanh, the softmax scale is
// query_pre_attn_scalar^-0.5, attn/final_logit_softcapping (null = none), layer_types (or the
// default rule: gemma2 even layers sliding, gemma3 all but every sliding_window_pattern-th) and
// gemma3's rope_local_base_freq for the sliding layers. Refuses, naming the field, what the
// decoder does not run (another hidden_activation, bidirectional attention, a layer type other
// than sliding_attention / full_attention, scaling of the local RoPE).
Status read_gemma(const nlohmann::json& j, ModelConfig& c);

// layer_types (sliding_attention / full_attention, one per layer) into c.sliding_layers, or when
// absent the rule transformers derives them by: every layer but each sliding_window_pattern-th
// (default_pattern when that field is absent too) slides: Gemma2Config and GptOssConfig 2 (even
// layers slide), Gemma3TextConfig 6. Needs c.n_layers.
Status read_layer_types(const nlohmann::json& j, ModelConfig& c, int default_pattern);
// sliding_window into c.sliding_window: `fallback` when absent, 0 (none) when null; invalid_argument
// for a negative one.
Status read_window_or_null(const nlohmann::json& j, ModelConfig& c, int fallback);

// transformers 5's rope_parameters by layer type ({"full_attention": {...}, "sliding_attention":
// {...}}, Gemma 3's and OLMo 3's): the full layers' rope_theta and scaling into c.rope_theta and
// c.rope_scaling, the sliding layers' theta into c.rope_local_theta (their scaling refused, naming
// it). Nothing when rope_parameters is not so.
Status read_rope_by_layer_type(const nlohmann::json& j, ModelConfig& c);

// Whether config.json is a Gemma3ForConditionalGeneration (model_type gemma3: text and vision).
bool is_gemma3_multimodal(const nlohmann::json& j);
// Its language model's config as a Gemma3ForCausalLM config.json: text_config with
// Gemma3TextConfig's defaults for the fields the Hub's configs leave out (heads, head_dim, vocab,
// context, ...) and the top level's dtype and bos/eos ids where text_config has none. Refused,
// naming Gemma3ForCausalLM, without a text_config object.
Expected<nlohmann::json> gemma3_text_config(const nlohmann::json& j);
// The tensors of a Gemma3ForConditionalGeneration checkpoint under the names the loaders read:
// the language model's as Gemma3ForCausalLM's (language_model.model.* (the Hub's and
// save_pretrained's) or model.language_model.* (transformers 5 in memory) become model.*,
// language_model.lm_head.weight lm_head.weight); the SigLIP tower's as vision_tower.* (from
// vision_tower.vision_model.*, the Hub's, or vision_tower.*), the projector's as
// multi_modal_projector.*, the patch embedding as a matrix [hidden, 3 p p] and the projection
// as one stacked matrix [1, vision hidden, text hidden] (models/gemma3_vision.cpp). Mistral 3
// (Mistral3ForConditionalGeneration) names its tensors the same way; its Pixtral patch
// convolution (vision_tower.patch_conv.weight) becomes a matrix [hidden, 3 p p] too.
// LLaVA-NeXT's image_newline (model.image_newline in transformers 5's form) keeps its name.
std::map<std::string, RawTensor> gemma3_tensors(std::map<std::string, RawTensor> tensors);

}  // namespace brigade
