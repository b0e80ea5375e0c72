#include "models/bert_config.h"

#include <array>
#include <string_view>
#include <utility>

#include "models/config_json.h"

namespace brigade {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 4> kFamilies = {"Bert", "Roberta", "XLMRoberta", "DistilBert"};
constexpr std::array<std::string_view, 4> kHeads = {"Model", "ForMaskedLM", "ForPreTraining",
                                                    "ForSequenceClassification"};

// The family ("Bert", "Roberta", "XLMRoberta") and head of an architecture name; empty when not one.
std::pair<std::string, std::string> split_architecture(const std::string& name) {
  for (std::string_view f : kFamilies)
    for (std::string_view h : kHeads)
      if (name == std::string(f) + std::string(h)) return {std::string(f), std::string(h)};
  return {};
}

}  // namespace

Status read_encoder_fields(const json& j, ModelConfig& c) {
  bool decoder = false, cross = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "is_decoder", decoder));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "add_cross_attention", cross));
  if (decoder || cross)
    return unsupported("config.json: " + std::string(decoder ? "is_decoder" : "add_cross_attention") +
                       " is set: brigade runs " + c.arch + " as an encoder only");
  BRIGADE_RETURN_IF_ERROR(read_dtype(j, c.dtype));
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null())
    return unsupported("config.json: quantization_config is not supported for " + c.arch + " encoders");
  return Status::ok();
}

bool is_nomic_bert(const json& j) {
  return config_names_class(j, {"NomicBertModel"}, {"nomic_bert"});
}

bool is_bert_family(const json& j) {
  if (is_nomic_bert(j)) return true;
  const std::string arch = config_architecture(j);
  if (!arch.empty()) return !split_architecture(arch).first.empty();
  const std::string t = config_model_type(j);
  return t == "bert" || t == "roberta" || t == "xlm-roberta" || t == "distilbert";
}

namespace {

// DistilBertConfig: dim, n_layers, n_heads, hidden_dim; LayerNorm eps 1e-12 in the modeling code;
// no token types; learned (or stored sinusoidal) positions from 0.
Expected<ModelConfig> read_distilbert_config(const json& j, bool seq_cls) {
  ModelConfig c;
  c.arch = "distilbert";
  c.encoder = true;
  c.seq_cls = seq_cls;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "dim", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "n_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "n_heads", c.n_heads, true));
  c.n_kv_heads = c.n_heads;
  if (c.n_heads > 0 && c.hidden_size % c.n_heads != 0)
    return invalid_argument("config.json: dim (" + std::to_string(c.hidden_size) + ") must be a multiple of n_heads (" +
                            std::to_string(c.n_heads) + ")");
  if (c.n_heads > 0) c.head_dim = c.hidden_size / c.n_heads;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_dim", c.intermediate_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  c.max_position = 512;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "max_position_embeddings", c.max_position, false));
  c.rms_eps = 1e-12f;
  std::string act = "gelu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "activation", act));
  if (act != "gelu")
    return unsupported("config.json: activation '" + act + "' is not supported for distilbert; supported: gelu");
  c.mlp_activation = MlpActivation::gelu;
  c.type_vocab_size = 0;
  c.bos_id = -1;
  BRIGADE_RETURN_IF_ERROR(read_encoder_fields(j, c));
  BRIGADE_RETURN_IF_ERROR(c.validate());
  return c;
}

// NomicBertModel (nomic-embed-text-v1 / v1.5): transformers 5's NomicBertConfig names, or the
// remote-code config the Hub checkpoints carry (n_embd, n_layer, n_head, n_inner,
// layer_norm_epsilon, rotary_emb_base, max_trained_positions / n_positions), whose options beyond
// v1.5's layer are refused by name.
Expected<ModelConfig> read_nomic_bert_config(const json& j) {
  ModelConfig c;
  c.arch = "nomic_bert";
  c.encoder = true;
  const bool remote = j.contains("n_embd");
  auto first = [&](std::initializer_list<const char*> keys) -> const char* {
    for (const char* k : keys)
      if (j.contains(k) && !j.at(k).is_null()) return k;
    return nullptr;
  };
  // NomicBertConfig's defaults (nomic-embed-text-v1.5's sizes).
  c.hidden_size = 768, c.n_layers = 12, c.n_heads = 12, c.intermediate_size = 3072, c.vocab_size = 30528;
  c.max_position = 2048;
  c.rms_eps = 1e-12f;
  c.rope_theta = 1000.0f;
  for (auto [key, out] : {std::pair{first({"hidden_size", "n_embd"}), &c.hidden_size},
                          {first({"num_hidden_layers", "n_layer"}), &c.n_layers},
                          {first({"num_attention_heads", "n_head"}), &c.n_heads},
                          {first({"intermediate_size", "n_inner"}), &c.intermediate_size},
                          {first({"vocab_size"}), &c.vocab_size},
                          {first({"max_trained_positions", "max_position_embeddings", "n_positions"}), &c.max_position}})
    if (key != nullptr) BRIGADE_RETURN_IF_ERROR(read_int(j, key, *out, true));
  if (const char* eps = first({"layer_norm_eps", "layer_norm_epsilon"})) BRIGADE_RETURN_IF_ERROR(read_float(j, eps, c.rms_eps));
  if (remote) {
    BRIGADE_RETURN_IF_ERROR(read_float(j, "rotary_emb_base", c.rope_theta));
  } else if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object()) {
    BRIGADE_RETURN_IF_ERROR(read_float(*rp, "rope_theta", c.rope_theta));
    std::string type = "default";
    BRIGADE_RETURN_IF_ERROR(read_string(*rp, "rope_type", type));
    if (type != "default")
      return unsupported("config.json: rope_parameters.rope_type '" + type + "' is not supported for nomic_bert; "
                         "supported: default");
  }
  if (c.n_heads <= 0 || c.hidden_size % c.n_heads != 0)
    return invalid_argument("config.json: the hidden size (" + std::to_string(c.hidden_size) +
                            ") must be a positive multiple of the heads (" + std::to_string(c.n_heads) + ")");
  c.n_kv_heads = c.n_heads;
  c.head_dim = c.hidden_size / c.n_heads;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "head_dim", c.head_dim, false));
  if (c.head_dim * c.n_heads != c.hidden_size)
    return unsupported("config.json: head_dim " + std::to_string(c.head_dim) + " is not hidden_size / num_attention_heads");
  c.type_vocab_size = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "type_vocab_size", c.type_vocab_size, false));
  if (c.type_vocab_size < 1 || c.type_vocab_size > 2)
    return unsupported("config.json: type_vocab_size " + std::to_string(c.type_vocab_size) +
                       " is not supported; encoders here have 1 or 2 token types");
  std::string act = remote ? "swiglu" : "silu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, remote ? "activation_function" : "hidden_act", act));
  if (act != (remote ? "swiglu" : "silu"))
    return unsupported(std::string("config.json: ") + (remote ? "activation_function" : "hidden_act") + " '" + act +
                       "' is not supported for nomic_bert; supported: " + (remote ? "swiglu" : "silu"));
  c.mlp_activation = MlpActivation::silu;
  // The remote code's options beyond nomic-embed-text-v1.5's layer (false / null / 1.0 there).
  for (const char* flag : {"qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias", "prenorm", "use_rms_norm", "causal",
                           "parallel_block", "rotary_emb_interleaved"}) {
    bool on = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, flag, on));
    if (on) return unsupported(std::string("config.json: ") + flag + " = true is not supported for nomic_bert");
  }
  for (const char* key : {"rotary_scaling_factor", "moe_every_n_layers", "num_experts"})
    if (auto it = j.find(key); it != j.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0))
      return unsupported(std::string("config.json: ") + key + " " + it->dump() + " is not supported for nomic_bert" +
                         (std::string(key) == "rotary_scaling_factor" ? " (dynamic NTK RoPE)" : " (its MoE layers)"));
  if (auto it = j.find("rotary_emb_fraction"); it != j.end() && !it->is_null() && (!it->is_number() || it->get<double>() != 1.0))
    return unsupported("config.json: rotary_emb_fraction " + it->dump() + " is not supported for nomic_bert; supported: 1.0");
  c.bos_id = -1;
  BRIGADE_RETURN_IF_ERROR(read_encoder_fields(j, c));
  BRIGADE_RETURN_IF_ERROR(c.validate());
  return c;
}

}  // namespace

Expected<ModelConfig> read_bert_config(const json& j) {
  if (is_nomic_bert(j)) return read_nomic_bert_config(j);
  ModelConfig c;
  const std::string named = config_architecture(j);
  std::string family, head;
  if (!named.empty()) {
    std::tie(family, head) = split_architecture(named);
  } else {
    std::string t;
    BRIGADE_RETURN_IF_ERROR(read_string(j, "model_type", t));
    family = t == "bert" ? "Bert" : t == "distilbert" ? "DistilBert" : "Roberta";
  }
  if (family == "DistilBert") return read_distilbert_config(j, head == "ForSequenceClassification");
  c.arch = family == "Bert" ? "bert" : "roberta";
  c.encoder = true;
  c.seq_cls = head == "ForSequenceClassification";
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.n_heads, true));
  c.n_kv_heads = c.n_heads;
  if (c.n_heads > 0) c.head_dim = c.hidden_size / c.n_heads;
  if (c.n_heads > 0 && c.hidden_size % c.n_heads != 0)
    return invalid_argument("config.json: hidden_size (" + std::to_string(c.hidden_size) +
                            ") must be a multiple of num_attention_heads (" + std::to_string(c.n_heads) + ")");
  BRIGADE_RETURN_IF_ERROR(read_int(j, "intermediate_size", c.intermediate_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  int max_positions = 512;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "max_position_embeddings", max_positions, false));
  c.type_vocab_size = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "type_vocab_size", c.type_vocab_size, false));
  if (c.type_vocab_size < 1 || c.type_vocab_size > 2)
    return unsupported("config.json: type_vocab_size " + std::to_string(c.type_vocab_size) +
                       " is not supported; encoders here have 1 or 2 token types");
  c.rms_eps = 1e-12f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "layer_norm_eps", c.rms_eps));
  std::string act = "gelu";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  if (act == "gelu") c.mlp_activation = MlpActivation::gelu;
  else if (act == "gelu_new" || act == "gelu_pytorch_tanh") c.mlp_activation = MlpActivation::gelu_tanh;
  else return unsupported("config.json: hidden_act '" + act + "' is not supported for " + c.arch +
                          "; supported: gelu, gelu_new, gelu_pytorch_tanh");
  std::string positions = "absolute";
  BRIGADE_RETURN_IF_ERROR(read_string(j, "position_embedding_type", positions));
  if (positions != "absolute")
    return unsupported("config.json: position_embedding_type '" + positions + "' is not supported; " + c.arch +
                       " runs absolute position embeddings");
  // RoBERTa numbers positions from padding_idx + 1 (create_position_ids_from_input_ids).
  int pad = c.arch == "roberta" ? 1 : 0;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "pad_token_id", pad, false));
  c.bos_id = -1;
  if (c.arch == "roberta") {
    if (pad < 0 || pad + 1 >= max_positions)
      return invalid_argument("config.json: pad_token_id " + std::to_string(pad) +
                              " leaves no positions of max_position_embeddings " + std::to_string(max_positions));
    c.position_offset = pad + 1;
  }
  c.max_position = max_positions - c.position_offset;
  BRIGADE_RETURN_IF_ERROR(read_encoder_fields(j, c));
  BRIGADE_RETURN_IF_ERROR(c.validate());
  return c;
}

}  // namespace brigade
