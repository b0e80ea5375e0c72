// Idefics3 and SmolVLM (Idefics3ForConditionalGeneration: Idefics3-8B-Llama3, SmolVLM-256M / 500M /
// 2B -Instruct; SmolVLMForConditionalGeneration: SmolVLM2-256M / 500M / 2.2B -Instruct, their video
// aside): a Llama language model (text_config) and the vision side (VisionKind::idefics3: a
// SigLIP-style tower over square tiles, the pixel shuffle by scale_factor and one bias-free
// projection, models/tile_vision.h). Tensors model.vision_model.*, model.connector.
// modality_projection.proj.weight, model.text_model.*, lm_head.weight.
#pragma once

#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/raw_tensor.h"
#include "models/vision_config.h"

namespace brigade {

// Whether config.json is an Idefics3ForConditionalGeneration or SmolVLMForConditionalGeneration
// (architectures, else model_type idefics3 / smolvlm).
bool is_idefics3(const nlohmann::json& j);

// Its language model's config.json: text_config over LlamaConfig's defaults with rms_norm_eps 1e-5
// (Idefics3Config's and SmolVLMConfig's sub-config default; another model_type refused by name),
// the top level's dtype and bos/eos ids where text_config has none, tied by the top level's
// tie_word_embeddings (default false, as both configs say).
Expected<nlohmann::json> idefics3_text_config(const nlohmann::json& j);

// vision_config's SigLIP-style fields over v's defaults (Idefics3's and Aya Vision's towers):
// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, image_size, patch_size,
// layer_norm_eps, hidden_act (gelu, gelu_pytorch_tanh or quick_gelu), num_channels (3); then
// check_vit_sizes, image_size not whole patches allowed. Errors name the field.
Status read_siglip_vision_config(const nlohmann::json& j, VisionConfig& v);

// The vision side with Idefics3VisionConfig's / SmolVLMVisionConfig's defaults (hidden 1152,
// intermediate 3072, 12 layers, 16 heads, image_size 224, patch_size 32, gelu_pytorch_tanh,
// layer_norm_eps 1e-6) and Idefics3Config's (scale_factor 2, image_token_id 128257): image_size is
// the tile's side, whose last image_size % patch_size pixels the patch convolution drops
// (SmolVLM2-2.2B: 384 pixels in 14-pixel patches, 27 a side). Refuses, naming the field: another
// hidden_act than gelu / gelu_pytorch_tanh / quick_gelu, num_channels other than 3, a scale_factor
// that does not divide the patches of a tile's side, an image_token_id outside the text vocabulary
// text_vocab, and check_vit_sizes' errors.
Expected<VisionConfig> read_idefics3_vision(const nlohmann::json& j, int text_vocab);

// The model directory's (model_path, or the directory of the file it names) processor_config.json,
// parsed, with its path: nullopt without one; corrupt naming it when it is not a JSON object.
struct ProcessorConfigFile {
  std::string file;
  nlohmann::json root;
};
Expected<std::optional<ProcessorConfigFile>> read_processor_config_file(const std::string& model_path);

// processor_config.json's image_seq_len (the run of <image> Idefics3Processor writes per tile) in
// the directory of model_path, against the tower's tile_tokens: invalid_argument naming both when
// they differ (the prompt would not hold the tower's features); ok without the file or the field;
// corrupt for a file that is not JSON or a field that is not an integer.
Status check_idefics3_image_seq_len(const std::string& model_path, int tile_tokens);

// The checkpoint's tensors under the names brigade reads: model.text_model.* as model.*,
// model.vision_model.* as vision_model.*, model.connector.* as connector.*; the patch convolution
// [h, 3, p, p] as the matrix [h, 3 p p].
std::map<std::string, RawTensor> idefics3_tensors(std::map<std::string, RawTensor> tensors);

}  // namespace brigade
