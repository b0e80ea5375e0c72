// InternVL (InternVL2.5 / InternVL3 / InternVL3.5): its language model's config and its vision
// side (VisionKind::internvl: the InternViT tower, pixel shuffle and the MLP projector,
// models/internvl_vision.h), from either layout the checkpoints ship in:
//   - transformers' InternVLForConditionalGeneration (model_type internvl; the OpenGVLab/*-hf
//     checkpoints): text_config, vision_config (InternVLVisionConfig), image_token_id,
//     downsample_ratio, vision_feature_layer, projector_hidden_act; tensors model.vision_tower.*,
//     model.multi_modal_projector.*, model.language_model.*, lm_head.*;
//   - the original remote-code InternVLChatModel (model_type internvl_chat; what vLLM loads
//     besides): llm_config, vision_config (InternVisionConfig: qkv_bias, qk_normalization),
//     downsample_ratio, select_layer, ps_version, template; tensors vision_model.*, mlp1.{0,1,3},
//     language_model.model.*, language_model.lm_head.*, q|k|v fused. The same math under other
//     names (transformers' convert_internvl_weights_to_hf.py is a renaming plus the q|k|v split),
//     so both load into the same tower.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/raw_tensor.h"
#include "models/vision_config.h"

namespace brigade {

// Whether config.json is an InternVLForConditionalGeneration (architectures[0], else model_type
// internvl: config_names_class) or an InternVLChatModel (internvl_chat).
bool is_internvl(const nlohmann::json& j);
bool is_internvl_chat(const nlohmann::json& j);

// Its language model's config.json: text_config over the defaults of its model_type's class
// (Qwen2Config's when absent, as InternVLConfig; Qwen3Config's, LlamaConfig's; qwen3_moe as
// given; another type refused naming the supported ones), with the top level's dtype and bos/eos
// where text_config has none, tied as InternVLConfig decides (the top level's
// tie_word_embeddings, default true). For InternVLChatModel: llm_config as it stands (its
// architectures name the class: Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM,
// LlamaForCausalLM, InternLM2ForCausalLM: InternVL 2 / 2.5's, models/internlm_config.h).
Expected<nlohmann::json> internvl_text_config(const nlohmann::json& j);

// The vision side, with InternVLVisionConfig's / InternVLConfig's defaults (the remote layout's
// InternVisionConfig names: qkv_bias, qk_normalization, select_layer; no final norm). Refuses,
// naming the field: hidden_act other than gelu / gelu_pytorch_tanh / quick_gelu, norm_type other
// than layer_norm / rms_norm, num_channels other than 3, image_size / patch_size that are not
// square or not whole patches, use_absolute_position_embeddings false, use_mask_token,
// downsample_ratio whose inverse is not a whole number dividing the patch grid, a feature layer
// outside the hidden states, vision_feature_select_strategy other than default, ps_version v1
// (the tokens transposed: no -hf checkpoint uses it), an image_token_id outside the text
// vocabulary. The remote layout's image token is <IMG_CONTEXT>, which its config.json does not
// name (InternVLChatModel sets it from the tokenizer at run time): img_context_token_id when
// present, else the id transformers' converter gives it by language model (151667 for the
// Qwen2 / Qwen3 families' vocabularies, 92546 for Llama / InternLM2's).
Expected<VisionConfig> read_internvl_vision(const nlohmann::json& j, int text_vocab);

// Either layout's tensors under one set of names (transformers 5's, less the model. prefixes:
// vision_tower.*, multi_modal_projector.*, model.* for the language model, lm_head.weight); the
// patch convolution [h, 3, p, p] as the matrix [h, 3 p p]. The remote layout's fused
// attention.qkv stays fused (the tower loads either).
std::map<std::string, RawTensor> internvl_tensors(std::map<std::string, RawTensor> tensors);

}  // namespace brigade
