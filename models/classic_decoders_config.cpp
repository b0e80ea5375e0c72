#include "models/classic_decoders_config.h"

#include <cmath>
#include <initializer_list>
#include <utility>
#include <vector>

#include "models/config_json.h"
#include "models/gpt_decoders_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// hidden_act (`fallback` when absent) must be one of `accepted`; refused by name otherwise.
Status require_act(const json& j, const ModelConfig& c, const char* fallback, std::initializer_list<const char*> accepted) {
  std::string act = fallback;
  BRIGADE_RETURN_IF_ERROR(read_string(j, "hidden_act", act));
  std::string list;
  for (const char* a : accepted) {
    if (act == a) return Status::ok();
    list += (list.empty() ? "" : ", ") + std::string(a);
  }
  return unsupported("config.json: hidden_act '" + act + "' is not supported for " + c.arch + "; supported: " + list);
}

// LayerNorms with biases everywhere (nn.LayerNorm's default), their epsilon under `eps_key`.
Status layer_norms_with_bias(const json& j, const char* eps_key, ModelConfig& c) {
  c.layer_norms = c.norm_bias = true;
  c.rms_eps = 1e-5f;
  return read_float(j, eps_key, c.rms_eps);
}

// GemmaModel: Gemma 2's layer without what Gemma 2 added (classic_decoders_config.h).
Status read_gemma1(const json& j, ModelConfig& c) {
  // GemmaConfig.__post_init__ turns the legacy "gelu" of the released configs into the tanh form;
  // transformers 5 reads no hidden_activation.
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "gelu_pytorch_tanh", {"gelu_pytorch_tanh", "gelu"}));
  bool bidirectional = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bidirectional_attention", bidirectional));
  if (bidirectional)
    return unsupported("config.json: use_bidirectional_attention = true (an embedding model) is not supported; "
                       "brigade runs causal decoders");
  if (!j.contains("head_dim") || j["head_dim"].is_null()) c.head_dim = 256;  // GemmaConfig's default
  if (!j.contains("max_position_embeddings")) c.max_position = 8192;
  if (!j.contains("tie_word_embeddings")) c.tie_embeddings = true;
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.norm_offset = 1.0f;
  c.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));
  c.sliding_window = 0;
  return Status::ok();
}

// Starcoder2Model: LayerNorms with biases, use_bias on every projection, the ungated MLP, one window.
Status read_starcoder2(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "gelu_pytorch_tanh", {"gelu_pytorch_tanh", "gelu_new"}));
  BRIGADE_RETURN_IF_ERROR(layer_norms_with_bias(j, "norm_epsilon", c));
  bool bias = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bias", bias));
  c.qkv_bias = c.o_bias = c.mlp_bias = bias;
  c.mlp_ungated = true;
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.sliding_window = 0;  // null: none (create_causal_mask)
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", c.sliding_window, false));
  if (c.sliding_window < 0) return invalid_argument("config.json: sliding_window must be > 0 or null");
  if (!j.contains("max_position_embeddings")) c.max_position = 4096;
  if (!j.contains("tie_word_embeddings")) c.tie_embeddings = true;
  return Status::ok();
}

// PhiModel: the parallel layer off one biased LayerNorm, biases everywhere, lm_head's too.
Status read_phi(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "gelu_new", {"gelu_new", "gelu_pytorch_tanh"}));
  BRIGADE_RETURN_IF_ERROR(layer_norms_with_bias(j, "layer_norm_eps", c));
  bool qk_layernorm = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "qk_layernorm", qk_layernorm));
  if (qk_layernorm)
    return unsupported("config.json: qk_layernorm = true is not supported for phi (one biased LayerNorm shared by "
                       "all heads); Phi-1, Phi-1.5 and Phi-2 have it false");
  c.parallel_blocks = true;
  c.qkv_bias = c.o_bias = c.mlp_bias = c.lm_head_bias = true;
  c.mlp_ungated = true;
  c.mlp_activation = MlpActivation::gelu_tanh;
  c.sliding_window = 0;
  return Status::ok();
}

// StableLmModel: biased LayerNorms, optional q/k/v biases, per-head q/k LayerNorms and the parallel
// residual; head_dim is always hidden_size / num_attention_heads.
Status read_stablelm(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "silu", {"silu"}));
  BRIGADE_RETURN_IF_ERROR(layer_norms_with_bias(j, "layer_norm_eps", c));
  if (c.n_heads <= 0 || c.hidden_size % c.n_heads != 0)
    return invalid_argument("config.json: hidden_size (" + std::to_string(c.hidden_size) +
                            ") must be divisible by num_attention_heads for stablelm");
  if (c.head_dim != c.hidden_size / c.n_heads)
    return unsupported("config.json: head_dim " + std::to_string(c.head_dim) + " is not supported for stablelm, "
                       "whose heads are hidden_size / num_attention_heads = " +
                       std::to_string(c.hidden_size / c.n_heads) + " wide");
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_qkv_bias", c.qkv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "qk_layernorm", c.qk_norm));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_parallel_residual", c.parallel_blocks));
  c.o_bias = false;
  c.sliding_window = 0;
  if (!j.contains("max_position_embeddings")) c.max_position = 4096;
  return Status::ok();
}

// Jais2Model / NemotronModel: Llama's layer with biased LayerNorms (Nemotron's LayerNorm1P scaling
// by 1 + w), an ungated relu2 MLP (NemotronMLP: up_proj, relu², down_proj, biases with mlp_bias)
// and q/k/v/o biases with attention_bias (Jais 2's defaults true, Nemotron's false); Nemotron
// rotates partial_rotary_factor of each head (0.5 by default: parse_rope).
Status read_relu2_decoder(const json& j, ModelConfig& c) {
  const bool jais2 = c.arch == "jais2";
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "relu2", {"relu2"}));
  BRIGADE_RETURN_IF_ERROR(layer_norms_with_bias(j, jais2 ? "layer_norm_eps" : "norm_eps", c));
  c.attention_bias = c.mlp_bias = jais2;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", c.attention_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", c.mlp_bias));
  c.qkv_bias = c.o_bias = c.attention_bias;
  c.mlp_ungated = true;
  c.mlp_activation = MlpActivation::relu2;
  if (!jais2) c.norm_offset = 1.0f;  // NemotronLayerNorm1P: F.layer_norm(x, weight + 1, bias)
  c.sliding_window = 0;
  if (!j.contains("max_position_embeddings")) c.max_position = jais2 ? 8192 : 4096;
  return Status::ok();
}

// EXAONE 3.0 / 3.5 (transformers: LlamaForCausalLM under ExaoneConfig): Llama's layer; q/k/v/o
// biases with attention_bias, gate/up/down with mlp_bias; rope_theta 5e5 when none is given.
Status read_exaone3(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(require_act(j, c, "silu", {"silu"}));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", c.mlp_bias));
  c.qkv_bias = c.o_bias = c.attention_bias;
  const json* rope = nullptr;
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = j.find(key); it != j.end() && it->is_object() && it->contains("rope_theta")) rope = &*it;
  if (!j.contains("rope_theta") && rope == nullptr) c.rope_theta = 500000.0f;  // ExaoneConfig.default_theta
  c.sliding_window = 0;
  return Status::ok();
}

}  // namespace

void apply_exaone3_config_names(json& j) {
  if (config_model_type(j) != "exaone") return;
  static constexpr std::pair<const char*, const char*> kNames[] = {
      {"num_layers", "num_hidden_layers"}, {"layer_norm_epsilon", "rms_norm_eps"}, {"activation_function", "hidden_act"}};
  for (const auto& [hub, ours] : kNames)
    if (j.contains(hub) && !j.contains(ours)) j[ours] = j[hub];
}

bool is_classic_decoder(const std::string& arch) {
  return arch == "gemma" || arch == "starcoder2" || arch == "phi" || arch == "stablelm" || arch == "jais2" ||
         arch == "nemotron" || arch == "exaone" || is_gpt_decoder(arch);
}

Status read_classic_decoder(const json& j, ModelConfig& c) {
  if (is_gpt_decoder(c.arch)) return read_gpt_decoder(j, c);  // models/gpt_decoders_config.h
  if (c.arch == "exaone") return read_exaone3(j, c);
  if (c.arch == "jais2" || c.arch == "nemotron") return read_relu2_decoder(j, c);
  if (c.arch == "gemma") return read_gemma1(j, c);
  if (c.arch == "starcoder2") return read_starcoder2(j, c);
  if (c.arch == "phi") return read_phi(j, c);
  return read_stablelm(j, c);
}

std::map<std::string, RawTensor> classic_decoder_tensors(const std::string& arch, std::map<std::string, RawTensor> tensors) {
  using Renames = std::vector<std::pair<std::string, std::string>>;
  static const Renames kStarcoder2 = {{".mlp.c_fc.", ".mlp.up_proj."}, {".mlp.c_proj.", ".mlp.down_proj."}};
  static const Renames kPhi = {{".mlp.fc1.", ".mlp.up_proj."},
                                   {".mlp.fc2.", ".mlp.down_proj."},
                                   {".self_attn.dense.", ".self_attn.o_proj."},
                                   {"model.final_layernorm.", "model.norm."}};
  // ExaoneConfig's conversion mapping (transformers' conversion_mapping.py), in its order.
  static const Renames kExaone = {{"transformer.wte.", "model.embed_tokens."},
                                  {"transformer.h.", "model.layers."},
                                  {"transformer.ln_f.", "model.norm."},
                                  {".attn.attention.", ".self_attn."},
                                  {".self_attn.out_proj.", ".self_attn.o_proj."},
                                  {".ln_1.", ".input_layernorm."},
                                  {".ln_2.", ".post_attention_layernorm."},
                                  {".mlp.c_fc_0.", ".mlp.gate_proj."},
                                  {".mlp.c_fc_1.", ".mlp.up_proj."},
                                  {".mlp.c_proj.", ".mlp.down_proj."}};
  if (arch != "starcoder2" && arch != "phi" && arch != "exaone") return tensors;
  const Renames& renames = arch == "phi" ? kPhi : arch == "exaone" ? kExaone : kStarcoder2;
  std::map<std::string, RawTensor> out;
  for (auto& [name, t] : tensors) {
    std::string to = name;
    for (const auto& [from, with] : renames)
      if (const size_t at = to.find(from); at != std::string::npos) to.replace(at, from.size(), with);
    t.name = to;
    out.emplace(to, std::move(t));
  }
  return out;
}

}  // namespace brigade
