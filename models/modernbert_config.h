// Internal to models/: the config.json of a ModernBERT encoder (transformers' ModernBertConfig:
// ModernBertModel, ModernBertForMaskedLM, ModernBertForSequenceClassification), read into
// ModelConfig by parse_hf_config. The encoder itself: models/modernbert.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"

namespace brigade {

// Whether config.json describes ModernBERT: architectures[0] ModernBert* (ModernBertDecoder*
// included, so that read_modernbert_config refuses it by name), or without architectures
// model_type modernbert or modernbert-decoder.
bool is_modernbert(const nlohmann::json& j);

// The encoder's ModelConfig, arch "modernbert", on the existing fields:
//   encoder, seq_cls (ModernBertForSequenceClassification); no token types, no learned positions;
//   norm_eps in rms_eps, layer_norms (every norm a LayerNorm) and norm_bias;
//   attention_bias in qkv_bias / o_bias, mlp_bias; mlp_activation gelu (hidden_activation
//   "gelu", the exact erf GELU, gated: act(Wi's first half) * its second half);
//   sliding_layers: layer_types' sliding_attention layers, or (older configs) every layer l with
//   l % global_attn_every_n_layers != 0; sliding_window = local_attention / 2, the half window:
//   on a sliding layer token i sees token j where |i - j| <= sliding_window (transformers'
//   ModernBertConfig.sliding_window, vLLM's (w, w) window);
//   rope_theta: the global layers' RoPE base (rope_parameters.full_attention.rope_theta, or
//   global_rope_theta; 160000 by default), rope_local_theta the sliding layers' (10000).
// Refused, naming the field: another architecture of the family (ModernBertForTokenClassification,
// the ModernBertDecoder causal LM), is_decoder / add_cross_attention, a hidden_activation other
// than gelu, a rope_type other than default or a rope_scaling, local_attention < 2,
// global_attn_every_n_layers < 1, a layer type other than full_attention / sliding_attention,
// classifier_pooling other than cls / mean, classifier_activation other than gelu / tanh / relu,
// quantization_config. Ignored as irrelevant to inference: the dropouts, deterministic_flash_attn,
// reference_compile, sparse_prediction, sparse_pred_ignore_index, initializer_*.
Expected<ModelConfig> read_modernbert_config(const nlohmann::json& j);

// Where the encoder's tensors live: "" (ModernBertModel, as sentence-transformers saves it) or
// "model." (the task models). `has` says whether a tensor name exists.
template <typename Has>
std::string modernbert_prefix(Has has) {
  return has("model.embeddings.tok_embeddings.weight") ? "model." : "";
}

}  // namespace brigade
