// PaliGemma 1 / 2 (PaliGemmaForConditionalGeneration: google/paligemma-3b-*, paligemma2-3b / 10b /
// 28b-*, their mix checkpoints): a Gemma (PaliGemma 1) or Gemma 2 (PaliGemma 2) language model
// (text_config) and the vision side (VisionKind::paligemma: a SigLIP tower's last_hidden_state and
// PaliGemmaMultiModalProjector's one linear layer, models/gemma3_vision.h). Tensors in Gemma 3's
// layouts (the Hub's language_model.model.* / vision_tower.vision_model.* /
// multi_modal_projector.*, or transformers 5's model.*), which gemma3_tensors maps.
// PaliGemmaProcessor writes a prompt as the images' runs of <image> first (or where the text puts
// its <image> markers), then <bos> after the last run, the text and "\n"; that whole prefix attends
// to all of itself, the generated tokens causally (ModelConfig::prefix_lm).
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "models/vision_config.h"

namespace brigade {

// Whether config.json is a PaliGemmaForConditionalGeneration (architectures[0], else model_type
// paligemma).
bool is_paligemma(const nlohmann::json& j);

// Its language model's config: text_config (model_type gemma, the default, or gemma2; another is
// refused by name) over GemmaConfig's / Gemma2Config's defaults, or PaliGemmaConfig's own text
// defaults without a text_config; the top level's bos / eos ids, dtype and tie_word_embeddings;
// use_bidirectional_attention (PaliGemmaConfig sets it) left out: the prefix attention is
// ModelConfig::prefix_lm's.
Expected<nlohmann::json> paligemma_text_config(const nlohmann::json& j);

// vision_config (SiglipVisionConfig's fields and defaults, or PaliGemmaConfig's tower without one)
// and the top level's image_token_index (PaliGemmaConfig's default 256000) and projection_dim,
// which must be the language model's width text_hidden. tokens_per_image is the tower's patch
// count (a pooling head, vision_use_head, is never read). Refuses, naming the field: a hidden_act
// other than gelu_pytorch_tanh, an image_size not whole patches, a projection_dim other than
// text_hidden, an image token outside the text vocabulary text_vocab.
Expected<VisionConfig> read_paligemma_vision(const nlohmann::json& j, int text_vocab, int text_hidden);

}  // namespace brigade
