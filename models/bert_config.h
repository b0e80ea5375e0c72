// Internal to models/: the config.json of an encoder of the BERT family (transformers' BertConfig,
// RobertaConfig, XLMRobertaConfig), read into ModelConfig (encoder, type_vocab_size,
// position_offset) by parse_hf_config. The encoder itself: models/bert.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/model_config.h"

namespace brigade {

// Whether config.json describes an encoder brigade runs as one: architectures[0] BertModel,
// BertForMaskedLM, BertForPreTraining, BertForSequenceClassification, or the same of Roberta,
// XLMRoberta and DistilBert; without architectures, model_type bert, roberta, xlm-roberta or
// distilbert; NomicBertModel or model_type nomic_bert (is_nomic_bert).
bool is_bert_family(const nlohmann::json& j);
bool is_nomic_bert(const nlohmann::json& j);

// The encoder's ModelConfig: arch "bert" or "roberta" (XLM-RoBERTa is RoBERTa's network), the
// sizes, layer_norm_eps (in rms_eps), hidden_act gelu (exact) or gelu_new / gelu_pytorch_tanh,
// type_vocab_size (at most 2), RoBERTa's positions from padding_idx + 1 (max_position is then
// max_position_embeddings - padding_idx - 1, the longest prompt), seq_cls for
// *ForSequenceClassification. Refused, naming the field: position_embedding_type other than
// absolute, a decoder (is_decoder, add_cross_attention), another activation. DistilBERT
// (DistilBertConfig's dim, n_layers, n_heads, hidden_dim, activation gelu): arch "distilbert",
// no token types (type_vocab_size 0), eps 1e-12. NomicBertModel (nomic-embed-text-v1 / v1.5):
// arch "nomic_bert", transformers 5's NomicBertConfig names or the Hub's remote-code ones (n_embd,
// n_layer, n_head, n_inner, layer_norm_epsilon, rotary_emb_base; the context max_trained_positions,
// else n_positions), RoPE (rope_theta, default 1000), SwiGLU (silu); refused by name: biases,
// prenorm, RMSNorm, causal, parallel blocks, interleaved or partial rotary, rotary_scaling_factor
// (dynamic NTK), MoE layers.
Expected<ModelConfig> read_bert_config(const nlohmann::json& j);

// What every encoder's config.json (BERT's family, ModernBERT's) reads alike, into c (arch
// set): torch_dtype; unsupported, naming the field and c.arch, for is_decoder or
// add_cross_attention set (an encoder only) or a quantization_config.
Status read_encoder_fields(const nlohmann::json& j, ModelConfig& c);

// Where the encoder's tensors live in a checkpoint of `config`: "" (BertModel, as
// sentence-transformers saves it), "bert." / "roberta." / "distilbert." (the task models) or
// "model.". `has` says whether a tensor name exists.
template <typename Has>
std::string bert_prefix(Has has) {
  for (const char* p : {"", "bert.", "roberta.", "distilbert.", "model."})
    if (has(std::string(p) + "embeddings.word_embeddings.weight")) return p;
  return "";
}

}  // namespace brigade
