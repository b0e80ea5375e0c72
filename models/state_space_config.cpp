#include "models/state_space_config.h"

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "models/config_json.h"
#include "models/qwen_vl_config.h"
#include "models/rope_scaling.h"
#include "models/vision_config.h"

namespace brigade {
namespace {

using json = nlohmann::json;

// A float field that may be a number, one of Python's non-finite tokens as quote_python_floats
// left it, or transformers 5's {"__float__": "Infinity"}.
Expected<float> config_float(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<float>();
  std::string s;
  if (v.is_string()) s = v.get<std::string>();
  else if (v.is_object() && v.contains("__float__") && v["__float__"].is_string()) s = v["__float__"].get<std::string>();
  if (s == "Infinity" || s == "inf") return std::numeric_limits<float>::infinity();
  if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<float>::infinity();
  return corrupt("config.json: " + where + " must be a number");
}

Status positive(const char* key, int v) {
  if (v <= 0) return invalid_argument(std::string("config.json: ") + key + " must be positive (got " + std::to_string(v) + ")");
  return Status::ok();
}

// An optional integer `key` into out (which holds its default), checked positive.
Status read_positive(const json& j, const char* key, int& out) {
  BRIGADE_RETURN_IF_ERROR(read_int(j, key, out, false));
  return positive(key, out);
}

// bos_token_id, eos_token_id (an id or a list), both inside the vocabulary, torch_dtype, and no
// quantization_config.
Status read_ids_and_dtype(const json& j, ModelConfig& c) {
  c.bos_id = -1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "bos_token_id", c.bos_id, false));
  BRIGADE_RETURN_IF_ERROR(read_eos(j, c.eos_ids));
  if (c.bos_id >= c.vocab_size) return invalid_argument("config.json: bos_token_id is outside the vocabulary");
  for (int e : c.eos_ids)
    if (e < 0 || e >= c.vocab_size)
      return invalid_argument("config.json: eos_token_id " + std::to_string(e) + " is outside the vocabulary");
  BRIGADE_RETURN_IF_ERROR(read_dtype(j, c.dtype));
  if (auto q = j.find("quantization_config"); q != j.end() && !q->is_null())
    return unsupported("config.json: quantization_config is not supported for " + c.arch +
                       " (bf16, f16 or f32 checkpoints)");
  return Status::ok();
}

// What every family reads last: tie_word_embeddings, max_position_embeddings (its default when
// absent), the token ids and the dtype (read_ids_and_dtype).
Status read_common(const json& j, ModelConfig& c, int default_max_position) {
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "tie_word_embeddings", c.tie_embeddings));
  c.max_position = default_max_position;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "max_position_embeddings", c.max_position));
  return read_ids_and_dtype(j, c);
}

// The activation `key` names (absent: `only`), refused by name unless it is `only`.
Status require_activation(const json& j, const char* key, const char* only, const std::string& arch) {
  std::string act = only;
  BRIGADE_RETURN_IF_ERROR(read_string(j, key, act));
  if (act != only)
    return unsupported(std::string("config.json: ") + key + " '" + act + "' is not supported for " + arch + " (" + only +
                       " only)");
  return Status::ok();
}

// A positive epsilon `key` into out (def when absent).
Status read_eps(const json& j, const char* key, float def, float& out) {
  out = def;
  BRIGADE_RETURN_IF_ERROR(read_float(j, key, out));
  if (!(out > 0.0f) || !std::isfinite(out))
    return invalid_argument(std::string("config.json: ") + key + " must be a positive number");
  return Status::ok();
}

// A Mamba1 mixer (MambaMixer, Jamba's): d_inner = expand * hidden channels, each its own "head"
// of one channel with a [N] state; the time-step rank an integer or "auto" (ceil(hidden / 16)).
// `names` are the family's keys for {state, kernel, expand, dt_rank, conv bias, projection bias}
// (Mamba's state_size, ...; Jamba's mamba_d_state, ...).
Status read_mamba1_mixer(const json& j, ModelConfig& c, const std::array<const char*, 6>& names) {
  int state = 16, kernel = 4, expand = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, names[0], state, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, names[1], kernel, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, names[2], expand, false));
  for (auto [key, v] : {std::pair{names[0], state}, {names[1], kernel}, {names[2], expand}})
    BRIGADE_RETURN_IF_ERROR(positive(key, v));
  c.ssm.layout = SsmLayout{expand * c.hidden_size, 1, 1, state, kernel};
  c.ssm.dt_rank = (c.hidden_size + 15) / 16;  // "auto": math.ceil(hidden_size / 16)
  if (auto it = j.find(names[3]); it != j.end() && it->is_number_integer()) c.ssm.dt_rank = it->get<int>();
  else if (it != j.end() && !(it->is_string() && it->get<std::string>() == "auto") && !it->is_null())
    return corrupt(std::string("config.json: ") + names[3] + " must be an integer or \"auto\"");
  BRIGADE_RETURN_IF_ERROR(positive(names[3], c.ssm.dt_rank));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, names[4], c.ssm.conv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, names[5], c.ssm.proj_bias));
  c.ssm.gated_norm = false;  // y * silu(z), no norm
  return Status::ok();
}

// time_step_limit into c.ssm (absent: unbounded).
Status read_time_step_limit(const json& j, ModelConfig& c) {
  c.ssm.dt_min = 0.0f;
  c.ssm.dt_max = 0.0f;  // unbounded
  auto it = j.find("time_step_limit");
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array() || it->size() != 2) return corrupt("config.json: time_step_limit must be a pair [min, max]");
  BRIGADE_ASSIGN_OR_RETURN(c.ssm.dt_min, config_float((*it)[0], "time_step_limit[0]"));
  BRIGADE_ASSIGN_OR_RETURN(const float hi, config_float((*it)[1], "time_step_limit[1]"));
  c.ssm.dt_max = std::isinf(hi) ? 0.0f : hi;
  if (!std::isfinite(c.ssm.dt_min) || c.ssm.dt_min < 0.0f || (c.ssm.dt_max > 0.0f && c.ssm.dt_max < c.ssm.dt_min) ||
      hi <= 0.0f)
    return invalid_argument("config.json: time_step_limit must be 0 <= min < max");
  return Status::ok();
}

// The mixer's shape, as both families check it: positive sizes, heads * head_dim = expand *
// hidden, heads a multiple of the groups. `p` prefixes the field names.
Status check_ssm_layout(const SsmLayout& l, int hidden, int expand, const std::string& p) {
  for (auto [key, v] : {std::pair{"num_heads", l.n_heads}, {"head_dim", l.head_dim}, {"n_groups", l.n_groups},
                        {"state_size", l.state_size}, {"conv_kernel", l.conv_kernel}, {"expand", expand}})
    BRIGADE_RETURN_IF_ERROR(positive((p + key).c_str(), v));
  if (int64_t{expand} * hidden != l.d_inner())
    return invalid_argument("config.json: " + p + "expand * hidden_size (" + std::to_string(int64_t{expand} * hidden) +
                            ") must equal " + p + "num_heads * head_dim (" + std::to_string(l.d_inner()) + ")");
  if (l.n_heads % l.n_groups != 0)
    return invalid_argument("config.json: " + p + "num_heads (" + std::to_string(l.n_heads) + ") must be a multiple of " +
                            p + "n_groups (" + std::to_string(l.n_groups) + ")");
  return Status::ok();
}

// A hybrid's sizes: hidden_size, num_hidden_layers, vocab_size, num_attention_heads and
// num_key_value_heads (default: the heads; they divide them), head_dim = hidden / heads.
Status read_hybrid_sizes(const json& j, ModelConfig& c) {
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.n_heads, true));
  c.n_kv_heads = c.n_heads;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_key_value_heads", c.n_kv_heads, false));
  for (auto [key, v] : {std::pair{"hidden_size", c.hidden_size}, {"num_hidden_layers", c.n_layers},
                        {"vocab_size", c.vocab_size}, {"num_attention_heads", c.n_heads},
                        {"num_key_value_heads", c.n_kv_heads}})
    BRIGADE_RETURN_IF_ERROR(positive(key, v));
  if (c.n_heads % c.n_kv_heads != 0 || c.hidden_size % c.n_heads != 0)
    return invalid_argument("config.json: num_attention_heads must divide hidden_size and be a multiple of "
                            "num_key_value_heads");
  c.head_dim = c.hidden_size / c.n_heads;
  return Status::ok();
}

// layer_types into c.ssm_layers, one per layer, each `recurrent` (a layer keeping a state) or
// full_attention; `listed` says whether the config has them (c.ssm_layers is left alone if not).
Status read_recurrent_layer_types(const json& j, const char* recurrent, ModelConfig& c, bool& listed) {
  auto it = j.find("layer_types");
  listed = it != j.end() && !it->is_null();
  if (!listed) return Status::ok();
  if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers))
    return corrupt("config.json: layer_types must list one type per layer (" + std::to_string(c.n_layers) + ")");
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), false);
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string t = (*it)[i].is_string() ? (*it)[i].get<std::string>() : "";
    if (t != recurrent && t != "full_attention")
      return unsupported("config.json: layer_types[" + std::to_string(i) + "] '" + t + "' is not one of " + c.arch +
                         "'s " + recurrent + ", full_attention");
    c.ssm_layers[i] = t == recurrent;
  }
  return Status::ok();
}

// RoPE over whole heads: rope_theta (top level, or in rope_parameters / rope_scaling; `theta`
// when absent) and a scaling rope_type (not longrope).
Status read_whole_head_rope(const json& j, float theta, ModelConfig& c) {
  c.rope_style = RopeStyle::neox;
  c.rope_theta = theta;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "rope_theta", c.rope_theta));
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) return corrupt(std::string("config.json: ") + key + " must be an object");
    BRIGADE_RETURN_IF_ERROR(read_float(*it, "rope_theta", c.rope_theta));
    if (!it->contains("rope_type") && !it->contains("type")) continue;
    BRIGADE_ASSIGN_OR_RETURN(c.rope_scaling, parse_rope_scaling(it->dump(), std::string("config.json: ") + key));
  }
  if (!(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta))
    return invalid_argument("config.json: rope_theta must be a positive number");
  if (c.rope_scaling.type == RopeScalingType::longrope)
    return unsupported("config.json: rope_type 'longrope' is not supported for " + c.arch +
                       " (default, linear, dynamic, llama3, yarn)");
  return Status::ok();
}

}  // namespace

bool is_mamba2(const json& j) { return config_names_class(j, {"Mamba2ForCausalLM"}, {"mamba2"}); }

bool is_mamba1(const json& j) {
  return config_names_class(j, {"MambaForCausalLM"}, {"mamba"}) || config_names_class(j, {"FalconMambaForCausalLM"}, {"falcon_mamba"});
}

bool is_jamba(const json& j) { return config_names_class(j, {"JambaForCausalLM"}, {"jamba"}); }

bool is_nemotron_h(const json& j) { return config_names_class(j, {"NemotronHForCausalLM"}, {"nemotron_h"}); }

bool is_granite_hybrid(const json& j) { return config_names_class(j, {"GraniteMoeHybridForCausalLM"}, {"granitemoehybrid"}); }

std::string quote_python_floats(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) out += text[++i];
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      continue;
    }
    bool replaced = false;
    for (const char* token : {"-Infinity", "Infinity", "NaN"}) {
      const std::string t(token);
      if (text.compare(i, t.size(), t) == 0) {
        out += '"' + t + '"';
        i += t.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += ch;
  }
  return out;
}

Expected<ModelConfig> read_mamba2_config(const json& j) {
  ModelConfig c;
  c.arch = "mamba2";
  SsmLayout& l = c.ssm.layout;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  for (auto [key, v] : {std::pair{"hidden_size", c.hidden_size}, {"num_hidden_layers", c.n_layers},
                        {"vocab_size", c.vocab_size}})
    BRIGADE_RETURN_IF_ERROR(positive(key, v));
  // Mamba2Config's defaults for the rest.
  l.n_heads = 128;
  l.head_dim = 64;
  l.n_groups = 8;
  l.state_size = 128;
  l.conv_kernel = 4;
  int expand = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_heads", l.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "head_dim", l.head_dim, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "n_groups", l.n_groups, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "state_size", l.state_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "conv_kernel", l.conv_kernel, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "expand", expand, false));
  BRIGADE_RETURN_IF_ERROR(check_ssm_layout(l, c.hidden_size, expand, ""));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_conv_bias", c.ssm.conv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bias", c.ssm.proj_bias));
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "hidden_act", "silu", c.arch));
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "layer_norm_epsilon", 1e-5f, c.rms_eps));
  BRIGADE_RETURN_IF_ERROR(read_time_step_limit(j, c));
  BRIGADE_RETURN_IF_ERROR(read_common(j, c, 1 << 20));
  c.intermediate_size = static_cast<int>(l.d_inner());  // transformers' Mamba2Mixer.intermediate_size
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  return c;
}

Expected<ModelConfig> read_mamba1_config(const json& j) {
  ModelConfig c;
  const bool falcon = config_names_class(j, {"FalconMambaForCausalLM"}, {"falcon_mamba"});
  c.arch = falcon ? "falcon_mamba" : "mamba";
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_hidden_layers", c.n_layers, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  for (auto [key, v] : {std::pair{"hidden_size", c.hidden_size}, {"num_hidden_layers", c.n_layers},
                        {"vocab_size", c.vocab_size}})
    BRIGADE_RETURN_IF_ERROR(positive(key, v));
  BRIGADE_RETURN_IF_ERROR(read_mamba1_mixer(
      j, c, {"state_size", "conv_kernel", "expand", "time_step_rank", "use_conv_bias", "use_bias"}));
  if (falcon) BRIGADE_RETURN_IF_ERROR(read_eps(j, "mixer_rms_eps", 1e-6f, c.ssm.bcdt_norm_eps));
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "hidden_act", "silu", c.arch));
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "layer_norm_epsilon", 1e-5f, c.rms_eps));
  c.tie_embeddings = true;  // MambaConfig's default
  BRIGADE_RETURN_IF_ERROR(read_common(j, c, 1 << 20));
  c.intermediate_size = static_cast<int>(c.ssm.layout.d_inner());  // MambaMixer's intermediate_size
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  return c;
}

Expected<ModelConfig> read_jamba_config(const json& j) {
  ModelConfig c;
  c.arch = "jamba";
  c.nope = true;
  BRIGADE_RETURN_IF_ERROR(read_hybrid_sizes(j, c));
  c.intermediate_size = 14336;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "intermediate_size", c.intermediate_size));
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "hidden_act", "silu", c.arch));
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "rms_norm_eps", 1e-6f, c.rms_eps));
  // Layer kinds: attention at attn_layer_offset of every attn_layer_period, mixers elsewhere;
  // experts at expert_layer_offset of every expert_layer_period (with num_experts > 1).
  int attn_period = 8, attn_offset = 4, expert_period = 2, expert_offset = 1;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "attn_layer_period", attn_period, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "attn_layer_offset", attn_offset, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "expert_layer_period", expert_period, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "expert_layer_offset", expert_offset, false));
  if (attn_period < 1 || attn_offset < 0 || attn_offset >= attn_period || expert_period < 1 || expert_offset < 0 ||
      expert_offset >= expert_period)
    return invalid_argument("config.json: attn_layer_offset and expert_layer_offset must be in [0, their period)");
  c.ssm_layers.resize(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) c.ssm_layers[static_cast<size_t>(l)] = l % attn_period != attn_offset;
  int experts = 16;
  c.n_experts_per_tok = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts", experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  if (experts > 1) {
    if (c.n_experts_per_tok < 1 || c.n_experts_per_tok > experts)
      return invalid_argument("config.json: num_experts_per_tok must be in [1, num_experts]");
    c.n_experts = experts;
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = false;  // JambaTopKRouter: the softmax's top k, left unnormalized
    for (int l = 0; l < c.n_layers; ++l)
      if (l % expert_period != expert_offset) c.mlp_only_layers.push_back(l);
  }
  // The mixers (Mamba1, their dt, B and C RMS-normed with weights).
  BRIGADE_RETURN_IF_ERROR(read_mamba1_mixer(j, c,
                                            {"mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_dt_rank",
                                             "mamba_conv_bias", "mamba_proj_bias"}));
  c.ssm.bcdt_norm_eps = c.rms_eps;
  BRIGADE_RETURN_IF_ERROR(read_common(j, c, 262144));
  return c;
}

// Granite 4.0-H's and Bamba's Mamba2 mixers (GraniteMoeHybridConfig's / BambaConfig's mamba_* fields
// and defaults: 128 heads of expand * hidden / heads ("auto"), one group, state 256, a 4-tap conv
// with bias, no projection biases), their time_step_limit; `expand` for check_ssm_layout.
static Status read_mamba2_mixers(const json& j, ModelConfig& c, int& expand) {
  SsmLayout& l = c.ssm.layout;
  l.n_heads = 128;
  l.n_groups = 1;
  l.state_size = 256;
  l.conv_kernel = 4;
  expand = 2;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mamba_n_heads", l.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mamba_n_groups", l.n_groups, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mamba_d_state", l.state_size, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mamba_d_conv", l.conv_kernel, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mamba_expand", expand, false));
  BRIGADE_RETURN_IF_ERROR(positive("mamba_n_heads", l.n_heads));
  l.head_dim = expand * c.hidden_size / l.n_heads;  // "auto"
  if (auto it = j.find("mamba_d_head"); it != j.end() && it->is_number_integer()) l.head_dim = it->get<int>();
  c.ssm.conv_bias = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mamba_conv_bias", c.ssm.conv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mamba_proj_bias", c.ssm.proj_bias));
  return read_time_step_limit(j, c);
}

Expected<ModelConfig> read_granite_hybrid_config(const json& j) {
  ModelConfig c;
  c.arch = "granitemoehybrid";
  c.nope = true;
  BRIGADE_RETURN_IF_ERROR(read_hybrid_sizes(j, c));
  // The MLP: a shared SwiGLU every token runs, and (num_local_experts > 0) routed experts.
  c.shared_expert_intermediate_size = 1024;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "shared_intermediate_size", c.shared_expert_intermediate_size));
  c.n_experts = 8;
  c.n_experts_per_tok = 2;
  c.moe_intermediate_size = 11008;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_local_experts", c.n_experts, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_experts_per_tok", c.n_experts_per_tok, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "intermediate_size", c.moe_intermediate_size, false));
  if (c.n_experts < 0) return invalid_argument("config.json: num_local_experts must be >= 0");
  if (c.n_experts > 0) {
    BRIGADE_RETURN_IF_ERROR(positive("intermediate_size", c.moe_intermediate_size));
    if (c.n_experts_per_tok < 1 || c.n_experts_per_tok > c.n_experts)
      return invalid_argument("config.json: num_experts_per_tok must be in [1, num_local_experts]");
  }
  c.norm_topk_prob = true;  // GraniteMoeHybridTopKRouter: softmax over the k chosen logits
  c.intermediate_size = c.n_experts > 0 ? c.moe_intermediate_size : c.shared_expert_intermediate_size;
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "hidden_act", "silu", c.arch));
  bool attention_bias = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", attention_bias));
  if (attention_bias) return unsupported("config.json: attention_bias is not supported for granitemoehybrid");
  // The attention layers' positions: none (Granite 4.0-H's "nope", or absent / null, the config's
  // default), or RoPE over whole heads (Granite 4.0's attention-only models: granite-4.0-micro,
  // 1b, 350m), rope_theta in rope_parameters (transformers 5) or at the top level.
  std::string positions = "nope";
  if (auto it = j.find("position_embedding_type"); it != j.end() && !it->is_null())
    BRIGADE_RETURN_IF_ERROR(read_string(j, "position_embedding_type", positions));
  if (positions != "nope" && positions != "rope")
    return unsupported("config.json: position_embedding_type '" + positions +
                       "' is not supported for granitemoehybrid; supported: nope, rope");
  c.nope = positions == "nope";
  if (!c.nope) BRIGADE_RETURN_IF_ERROR(read_whole_head_rope(j, 10000.0f, c));
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "rms_norm_eps", 1e-6f, c.rms_eps));
  // Granite's scalings (1 = none).
  float attention_multiplier = 1.0f, embedding = 1.0f, residual = 1.0f, logits = 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "attention_multiplier", attention_multiplier));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "embedding_multiplier", embedding));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "residual_multiplier", residual));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "logits_scaling", logits));
  for (auto [key, v] : {std::pair{"attention_multiplier", attention_multiplier}, {"embedding_multiplier", embedding},
                        {"residual_multiplier", residual}, {"logits_scaling", logits}})
    if (!(v > 0.0f) || !std::isfinite(v))
      return invalid_argument(std::string("config.json: ") + key + " must be a positive number");
  c.attn_scale = attention_multiplier;
  c.embedding_multiplier = embedding;
  c.residual_multiplier = residual;
  c.logits_scaling = logits;
  // The mixers.
  int expand = 2;
  BRIGADE_RETURN_IF_ERROR(read_mamba2_mixers(j, c, expand));
  // Which layers are mixers: layer_types (the Hub's mamba / attention, transformers 5's
  // linear_attention / full_attention); absent: all mixers (GraniteMoeHybridConfig's default).
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  for (const char* key : {"layer_types", "layers_block_type"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers))
      return corrupt(std::string("config.json: ") + key + " must list one type per layer");
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string t = (*it)[i].is_string() ? (*it)[i].get<std::string>() : "";
      if (t == "mamba" || t == "linear_attention") c.ssm_layers[i] = true;
      else if (t == "attention" || t == "full_attention") c.ssm_layers[i] = false;
      else return unsupported(std::string("config.json: ") + key + "[" + std::to_string(i) + "] '" + t +
                              "' is not a layer type of granitemoehybrid (mamba, attention)");
    }
    break;
  }
  // The mixers' shape matters only where there are mixers (Granite 4.0's attention-only models
  // carry the config's mamba_* defaults, which need not fit their width).
  if (c.recurrent()) BRIGADE_RETURN_IF_ERROR(check_ssm_layout(c.ssm.layout, c.hidden_size, expand, "mamba_"));
  BRIGADE_RETURN_IF_ERROR(read_common(j, c, 2048));
  return c;
}

bool is_bamba(const json& j) { return config_names_class(j, {"BambaForCausalLM"}, {"bamba"}); }

Expected<ModelConfig> read_bamba_config(const json& j) {
  ModelConfig c;
  c.arch = "bamba";
  BRIGADE_RETURN_IF_ERROR(read_hybrid_sizes(j, c));
  c.intermediate_size = 14336;  // BambaConfig's
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "intermediate_size", c.intermediate_size));
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "hidden_act", "silu", c.arch));
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    bool v = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, key, v));
    if (v) return unsupported(std::string("config.json: ") + key + " true is not supported for bamba (no released checkpoint sets it)");
  }
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "rms_norm_eps", 1e-5f, c.rms_eps));
  // RoPE over partial_rotary_factor of each head (BambaConfig's 0.5), halves rotated.
  c.nope = false;
  BRIGADE_RETURN_IF_ERROR(read_whole_head_rope(j, 10000.0f, c));
  float partial = 0.5f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, "partial_rotary_factor", partial));
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (auto it = j.find(key); it != j.end() && it->is_object()) BRIGADE_RETURN_IF_ERROR(read_float(*it, "partial_rotary_factor", partial));
  c.rotary_dim = static_cast<int>(static_cast<float>(c.head_dim) * partial);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (!(partial > 0.0f && partial <= 1.0f) || c.rotary_dim % 2 != 0)
    return invalid_argument("config.json: partial_rotary_factor must be in (0, 1] and rotate an even number of dims");
  // The mixers: Granite 4.0-H's Mamba2 (BambaConfig's defaults are GraniteMoeHybridConfig's).
  int expand = 2;
  BRIGADE_RETURN_IF_ERROR(read_mamba2_mixers(j, c, expand));
  // Attention at attn_layer_indices (none: every layer a mixer), mixers elsewhere.
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  if (auto it = j.find("attn_layer_indices"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) return corrupt("config.json: attn_layer_indices must be a list of layer indices");
    for (const json& v : *it) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.n_layers)
        return corrupt("config.json: attn_layer_indices holds " + v.dump() + ", not a layer of the " +
                       std::to_string(c.n_layers));
      c.ssm_layers[static_cast<size_t>(v.get<int64_t>())] = false;
    }
  }
  if (c.recurrent()) BRIGADE_RETURN_IF_ERROR(check_ssm_layout(c.ssm.layout, c.hidden_size, expand, "mamba_"));
  BRIGADE_RETURN_IF_ERROR(read_common(j, c, 262144));
  return c;
}

bool is_gated_delta(const std::string& arch) {
  return arch == "qwen3_next" || arch == "qwen3_5_text" || arch == "qwen3_5_moe_text";
}

bool is_qwen3_5_multimodal(const json& j) {
  return config_names_class(j, {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"},
                            {"qwen3_5", "qwen3_5_moe"});
}

Expected<json> qwen3_5_text_config(const json& j) {
  const auto it = j.find("text_config");
  if (it == j.end() || !it->is_object())
    return corrupt("config.json: a Qwen3.5 checkpoint needs its language model's text_config object");
  json text = *it;
  const bool moe = config_names_class(j, {"Qwen3_5MoeForConditionalGeneration"}, {"qwen3_5_moe"}) ||
                   (config_architecture(j).empty() && config_model_type(text) == "qwen3_5_moe_text");
  text["architectures"] = json::array({moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"});
  text["model_type"] = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
  for (const char* key : {"tie_word_embeddings", "torch_dtype", "dtype"})  // the whole model's, unless the text's says
    if (!text.contains(key) && j.contains(key)) text[key] = j[key];
  return text;
}

Expected<ModelConfig> read_qwen3_5_multimodal(const json& j) {
  BRIGADE_ASSIGN_OR_RETURN(const json text, qwen3_5_text_config(j));
  BRIGADE_ASSIGN_OR_RETURN(ModelConfig c, parse_hf_config(text.dump()));
  c.multimodal_text = true;
  c.mrope_section = {11, 11, 10};
  BRIGADE_RETURN_IF_ERROR(read_mrope(text, &c.mrope_section, &c.mrope_interleaved));
  c.mrope_interleaved = true;
  BRIGADE_RETURN_IF_ERROR(check_mrope_section(c.mrope_section, c.rope_dims(), "text_config.rope_parameters"));
  json tower = j;  // Qwen3_5VisionModel runs no DeepStack taps, whatever the config lists
  if (auto v = tower.find("vision_config"); v != tower.end() && v->is_object()) (*v)["deepstack_visual_indexes"] = json::array();
  BRIGADE_ASSIGN_OR_RETURN(c.vision, read_qwen_vl_vision(tower, c.vocab_size, VisionKind::qwen3_vl));
  return c;
}

Status read_gated_delta(const json& j, ModelConfig& c) {
  c.ssm.gated_delta = true;
  c.ssm.conv_bias = false;
  c.ssm.proj_bias = false;
  // Which layers are linear attention: layer_types, else every full_attention_interval-th layer
  // is attention (4: Qwen3NextConfig's default).
  bool listed = false;
  BRIGADE_RETURN_IF_ERROR(read_recurrent_layer_types(j, "linear_attention", c, listed));
  if (!listed) {
    c.ssm_layers.assign(static_cast<size_t>(c.n_layers), false);
    int interval = 4;
    BRIGADE_RETURN_IF_ERROR(read_positive(j, "full_attention_interval", interval));
    for (int l = 0; l < c.n_layers; ++l) c.ssm_layers[static_cast<size_t>(l)] = (l + 1) % interval != 0;
  }
  // The Gated DeltaNet layers: H value heads of P channels, G key heads of N (SsmLayout's names);
  // Qwen3NextConfig's defaults.
  SsmLayout& l = c.ssm.layout;
  l = SsmLayout{.n_heads = 32, .head_dim = 128, .n_groups = 16, .state_size = 128, .conv_kernel = 4};
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "linear_num_value_heads", l.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "linear_value_head_dim", l.head_dim));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "linear_num_key_heads", l.n_groups));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "linear_key_head_dim", l.state_size));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "linear_conv_kernel_dim", l.conv_kernel));
  if (l.n_heads % l.n_groups != 0)
    return invalid_argument("config.json: linear_num_value_heads (" + std::to_string(l.n_heads) +
                            ") must be a multiple of linear_num_key_heads (" + std::to_string(l.n_groups) + ")");
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "hidden_act", "silu", c.arch));
  if (c.attention_bias) return unsupported("config.json: attention_bias is not supported for " + c.arch);
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  return Status::ok();
}

namespace {

// Nemotron 3's MoE blocks (E; NemotronHMoE): n_routed_experts relu2 experts (up_proj, down_proj) of
// moe_intermediate_size, num_experts_per_tok of them per token by a sigmoid router with a
// selection bias (e_score_correction_bias) and groups scored by their top two (DeepSeek-V3's
// noaux_tc: n_group, topk_group), renormalised by norm_topk_prob and scaled by
// routed_scaling_factor; beside them a relu2 shared expert of moe_shared_expert_intermediate_size.
// NemotronHConfig's defaults. Refused by name: moe_latent_size (the latent projections around
// the experts), mlp_bias on the experts.
Status read_nemotron_moe(const json& j, std::vector<int> dense, ModelConfig& c) {
  c.n_experts = 8;
  c.n_experts_per_tok = 2;
  c.moe_intermediate_size = 7688;
  c.shared_expert_intermediate_size = 7688;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, j.contains("n_routed_experts") ? "n_routed_experts" : "num_local_experts",
                                        c.n_experts));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "num_experts_per_tok", c.n_experts_per_tok));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "moe_intermediate_size", c.moe_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "moe_shared_expert_intermediate_size", c.shared_expert_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "n_group", c.n_group));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "topk_group", c.topk_group));
  c.norm_topk_prob = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "routed_scaling_factor", c.routed_scaling_factor));
  if (auto it = j.find("moe_latent_size"); it != j.end() && !it->is_null())
    return unsupported("config.json: nemotron_h's moe_latent_size (latent projections around the experts) is not supported");
  if (c.mlp_bias) return unsupported("config.json: nemotron_h's MoE blocks with mlp_bias are not supported");
  if (c.n_experts_per_tok > c.n_experts || c.n_experts % c.n_group != 0 || c.topk_group > c.n_group ||
      c.n_experts_per_tok > c.topk_group * (c.n_experts / c.n_group))
    return invalid_argument("config.json: num_experts_per_tok (" + std::to_string(c.n_experts_per_tok) +
                            ") must fit the experts topk_group of n_group groups leave (n_routed_experts " +
                            std::to_string(c.n_experts) + " a multiple of n_group " + std::to_string(c.n_group) +
                            ", topk_group " + std::to_string(c.topk_group) + ")");
  if (!(c.routed_scaling_factor > 0.0f) || !std::isfinite(c.routed_scaling_factor))
    return invalid_argument("config.json: routed_scaling_factor must be a positive number");
  c.moe_scoring = MoeScoring::sigmoid;
  c.moe_group_score = MoeGroupScore::top2_sum;
  c.moe_score_bias = true;
  c.relu2_experts = true;
  c.decoder_sparse_step = 1;
  c.mlp_only_layers = std::move(dense);
  return Status::ok();
}

}  // namespace

Expected<ModelConfig> read_nemotron_h_config(const json& j) {
  ModelConfig c;
  c.arch = "nemotron_h";
  c.nope = true;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "hidden_size", c.hidden_size, true));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "vocab_size", c.vocab_size, true));
  // The blocks: a pattern of one letter per layer, or a list of type names.
  std::vector<char> kinds;  // 'M', '*', '-', 'E'
  if (auto it = j.find("hybrid_override_pattern"); it != j.end() && it->is_string()) {
    for (char ch : it->get<std::string>()) kinds.push_back(ch);
  } else {
    for (const char* key : {"layers_block_type", "layer_types"}) {
      auto lt = j.find(key);
      if (lt == j.end() || lt->is_null()) continue;
      if (!lt->is_array()) return corrupt(std::string("config.json: ") + key + " must be a list of block types");
      for (const auto& t : *lt) {
        const std::string name = t.is_string() ? t.get<std::string>() : "";
        kinds.push_back(name == "mamba" || name == "linear_attention" ? 'M'
                        : name == "attention" || name == "full_attention" ? '*'
                        : name == "mlp" ? '-'
                        : name == "moe" ? 'E' : '?');
      }
      break;
    }
  }
  if (kinds.empty())
    return corrupt("config.json: nemotron_h needs hybrid_override_pattern or layers_block_type (its block types)");
  c.n_layers = static_cast<int>(kinds.size());
  c.ssm_layers.assign(kinds.size(), false);
  c.mlp_layers.assign(kinds.size(), false);
  std::vector<int> dense;  // the blocks that are not MoE blocks (mlp_only_layers)
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i] != 'E') dense.push_back(static_cast<int>(i));
    switch (kinds[i]) {
      case 'M': c.ssm_layers[i] = true; break;
      case '-': c.mlp_layers[i] = true; break;
      case '*': break;
      case 'E': c.mlp_layers[i] = true; break;  // an MLP block of experts (is_moe_layer)
      default:
        return unsupported("config.json: nemotron_h block " + std::to_string(i) + " is of an unknown type (M, *, -, E)");
    }
  }
  // Attention blocks.
  c.n_heads = 32;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_attention_heads", c.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_key_value_heads", c.n_kv_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "head_dim", c.head_dim, false));
  for (auto [key, v] : {std::pair{"hidden_size", c.hidden_size}, {"vocab_size", c.vocab_size},
                        {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads},
                        {"head_dim", c.head_dim}})
    BRIGADE_RETURN_IF_ERROR(positive(key, v));
  if (c.n_heads % c.n_kv_heads != 0)
    return invalid_argument("config.json: num_attention_heads must be a multiple of num_key_value_heads");
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  bool attention_bias = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "attention_bias", attention_bias));
  if (attention_bias) return unsupported("config.json: attention_bias is not supported for nemotron_h");
  int window = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "sliding_window", window, false));
  if (window > 0) return unsupported("config.json: sliding_window is not supported for nemotron_h");
  int mtp = 0;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_nextn_predict_layers", mtp, false));
  if (mtp > 0) return unsupported("config.json: nemotron_h's MTP layers (num_nextn_predict_layers) are not supported");
  // MLP blocks: up_proj, relu2, down_proj.
  c.intermediate_size = 21504;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "intermediate_size", c.intermediate_size));
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "mlp_hidden_act", "relu2", c.arch));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mlp_bias", c.mlp_bias));
  if (dense.size() < kinds.size()) BRIGADE_RETURN_IF_ERROR(read_nemotron_moe(j, std::move(dense), c));
  // The mixers (older configs prefix some names with mamba_).
  SsmLayout& l = c.ssm.layout;
  l.n_heads = 128;
  l.head_dim = 64;
  l.n_groups = 8;
  l.state_size = 128;
  l.conv_kernel = 4;
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mamba_num_heads", l.n_heads, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "mamba_head_dim", l.head_dim, false));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "ssm_state_size", l.state_size, false));
  for (const char* key : {"n_groups", "mamba_n_groups"}) BRIGADE_RETURN_IF_ERROR(read_int(j, key, l.n_groups, false));
  for (const char* key : {"conv_kernel", "mamba_d_conv"}) BRIGADE_RETURN_IF_ERROR(read_int(j, key, l.conv_kernel, false));
  for (const char* key : {"use_conv_bias", "mamba_conv_bias"}) BRIGADE_RETURN_IF_ERROR(read_bool(j, key, c.ssm.conv_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_bias", c.ssm.proj_bias));
  for (auto [key, v] : {std::pair{"mamba_num_heads", l.n_heads}, {"mamba_head_dim", l.head_dim}, {"n_groups", l.n_groups},
                        {"ssm_state_size", l.state_size}, {"conv_kernel", l.conv_kernel}})
    BRIGADE_RETURN_IF_ERROR(positive(key, v));
  if (l.n_heads % l.n_groups != 0)
    return invalid_argument("config.json: mamba_num_heads must be a multiple of n_groups");
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "mamba_hidden_act", "silu", c.arch));
  json limits = j;
  if (!j.contains("time_step_limit") && j.contains("mamba_dt_limit")) limits["time_step_limit"] = j["mamba_dt_limit"];
  BRIGADE_RETURN_IF_ERROR(read_time_step_limit(limits, c));
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "layer_norm_epsilon", 1e-5f, c.rms_eps));
  BRIGADE_RETURN_IF_ERROR(read_common(j, c, 4096));
  return c;
}

bool is_lfm2(const json& j) {
  return config_names_class(j, {"Lfm2ForCausalLM"}, {"lfm2"}) || config_names_class(j, {"Lfm2MoeForCausalLM"}, {"lfm2_moe"});
}

namespace {

// Which LFM2 layers are short-conv blocks: layer_types, else every layer not in full_attn_idxs.
Status read_lfm2_layers(const json& j, ModelConfig& c) {
  bool listed = false;
  BRIGADE_RETURN_IF_ERROR(read_recurrent_layer_types(j, "conv", c, listed));
  if (listed) return Status::ok();
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), false);
  auto it = j.find("full_attn_idxs");
  if (it == j.end() || it->is_null()) return Status::ok();  // Lfm2Config: every layer attention
  if (!it->is_array()) return corrupt("config.json: full_attn_idxs must be a list of layer indices");
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  for (const auto& e : *it) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= c.n_layers)
      return invalid_argument("config.json: full_attn_idxs must hold layer indices in [0, " + std::to_string(c.n_layers) + ")");
    c.ssm_layers[static_cast<size_t>(e.get<int64_t>())] = false;
  }
  return Status::ok();
}


// lfm2's MLP width: Lfm2MLP's adjustment of intermediate_size.
Status adjust_lfm2_ff_dim(const json& j, ModelConfig& c) {
  bool adjust = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "block_auto_adjust_ff_dim", adjust));
  if (!adjust) return Status::ok();
  int width = static_cast<int>(2.0 * c.intermediate_size / 3.0);  // int(2 * intermediate_size / 3)
  auto mult = j.find("block_ffn_dim_multiplier");
  if (mult != j.end() && mult->is_null()) {  // None: the width stays int(2 I / 3), not rounded
    c.intermediate_size = width;
    return positive("intermediate_size (adjusted)", c.intermediate_size);
  }
  double multiplier = 1.0;
  if (mult != j.end()) {
    if (!mult->is_number()) return corrupt("config.json: block_ffn_dim_multiplier must be a number");
    multiplier = mult->get<double>();
  }
  int multiple_of = 256;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "block_multiple_of", multiple_of));
  if (!(multiplier > 0.0) || !std::isfinite(multiplier))
    return invalid_argument("config.json: block_ffn_dim_multiplier must be a positive number");
  width = static_cast<int>(multiplier * width);
  c.intermediate_size = multiple_of * ((width + multiple_of - 1) / multiple_of);
  return positive("intermediate_size (adjusted)", c.intermediate_size);
}

// lfm2_moe's experts (Lfm2MoeSparseMoeBlock).
Status read_lfm2_moe(const json& j, ModelConfig& c) {
  c.n_experts = 32;
  c.n_experts_per_tok = 4;
  c.moe_intermediate_size = 1792;
  int dense = 2;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "num_experts", c.n_experts));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "num_experts_per_tok", c.n_experts_per_tok));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "moe_intermediate_size", c.moe_intermediate_size));
  BRIGADE_RETURN_IF_ERROR(read_int(j, "num_dense_layers", dense, false));
  if (dense < 0) return invalid_argument("config.json: num_dense_layers must be >= 0");
  if (c.n_experts_per_tok > c.n_experts)
    return invalid_argument("config.json: num_experts_per_tok (" + std::to_string(c.n_experts_per_tok) +
                            ") must be at most num_experts (" + std::to_string(c.n_experts) + ")");
  c.first_k_dense_replace = dense;
  c.decoder_sparse_step = 1;
  c.moe_scoring = MoeScoring::sigmoid;
  c.moe_score_bias = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "use_expert_bias", c.moe_score_bias));
  c.norm_topk_prob = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "norm_topk_prob", c.norm_topk_prob));
  BRIGADE_RETURN_IF_ERROR(read_float(j, "routed_scaling_factor", c.routed_scaling_factor));
  if (!(c.routed_scaling_factor > 0.0f) || !std::isfinite(c.routed_scaling_factor))
    return invalid_argument("config.json: routed_scaling_factor must be a positive number");
  return Status::ok();
}

}  // namespace

Expected<ModelConfig> read_lfm2_config(const json& j) {
  ModelConfig c;
  const bool moe = config_names_class(j, {"Lfm2MoeForCausalLM"}, {"lfm2_moe"});
  c.arch = moe ? "lfm2_moe" : "lfm2";
  BRIGADE_RETURN_IF_ERROR(read_hybrid_sizes(j, c));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "head_dim", c.head_dim));
  c.qk_norm = true;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  BRIGADE_RETURN_IF_ERROR(read_whole_head_rope(j, 1000000.0f, c));
  BRIGADE_RETURN_IF_ERROR(read_lfm2_layers(j, c));
  int kernel = 3;
  bool bias = false;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "conv_L_cache", kernel));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "conv_bias", bias));
  c.ssm.layout = SsmLayout{.n_heads = c.hidden_size, .head_dim = 1, .n_groups = 1, .state_size = 0, .conv_kernel = kernel};
  c.ssm.short_conv = true;
  c.ssm.conv_bias = c.ssm.proj_bias = bias;
  c.ssm.gated_norm = false;
  c.intermediate_size = moe ? 7168 : 12288;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, j.contains("intermediate_size") ? "intermediate_size" : "block_ff_dim",
                                        c.intermediate_size));
  if (moe) BRIGADE_RETURN_IF_ERROR(read_lfm2_moe(j, c));
  else BRIGADE_RETURN_IF_ERROR(adjust_lfm2_ff_dim(j, c));
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "norm_eps", 1e-5f, c.rms_eps));
  c.tie_embeddings = true;  // tie_embedding (the Hub's older configs) wins, as Lfm2Config pops it
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "tie_word_embeddings", c.tie_embeddings));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "tie_embedding", c.tie_embeddings));
  c.max_position = 128000;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "max_position_embeddings", c.max_position));
  BRIGADE_RETURN_IF_ERROR(read_ids_and_dtype(j, c));
  return c;
}

bool is_falcon_h1(const json& j) { return config_names_class(j, {"FalconH1ForCausalLM"}, {"falcon_h1"}); }

namespace {

// A positive, finite multiplier `key` into out (1 when absent).
Status read_multiplier(const json& j, const char* key, float& out) {
  out = 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_float(j, key, out));
  if (!(out > 0.0f) || !std::isfinite(out))
    return invalid_argument(std::string("config.json: ") + key + " must be a positive number");
  return Status::ok();
}

// A list of `n` positive multipliers `key` into out (all 1 when absent or null).
Status read_multipliers(const json& j, const char* key, float* out, size_t n) {
  std::fill(out, out + n, 1.0f);
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_array() || it->size() != n)
    return corrupt(std::string("config.json: ") + key + " must list " + std::to_string(n) + " multipliers");
  for (size_t i = 0; i < n; ++i) {
    if (!(*it)[i].is_number() || !((*it)[i].get<double>() > 0.0) || !std::isfinite((*it)[i].get<double>()))
      return invalid_argument(std::string("config.json: ") + key + " must hold positive numbers");
    out[i] = (*it)[i].get<float>();
  }
  return Status::ok();
}

}  // namespace

Expected<ModelConfig> read_falcon_h1_config(const json& j) {
  ModelConfig c;
  c.arch = "falcon_h1";
  BRIGADE_RETURN_IF_ERROR(read_hybrid_sizes(j, c));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "head_dim", c.head_dim));
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.intermediate_size = 14336;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "intermediate_size", c.intermediate_size));
  BRIGADE_RETURN_IF_ERROR(require_activation(j, "hidden_act", "silu", c.arch));
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    bool on = false;
    BRIGADE_RETURN_IF_ERROR(read_bool(j, key, on));
    if (on) return unsupported(std::string("config.json: ") + key + " is not supported for falcon_h1");
  }
  BRIGADE_RETURN_IF_ERROR(read_whole_head_rope(j, 10000.0f, c));  // transformers' LlamaRotaryEmbedding
  // The mixers, one in every layer.
  c.parallel_attention = true;
  c.ssm_layers.assign(static_cast<size_t>(c.n_layers), true);
  SsmLayout& l = c.ssm.layout;
  l = SsmLayout{.n_heads = 128, .head_dim = 0, .n_groups = 1, .state_size = 256, .conv_kernel = 4};
  int expand = 2, d_ssm = 0;
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "mamba_n_heads", l.n_heads));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "mamba_n_groups", l.n_groups));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "mamba_d_state", l.state_size));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "mamba_d_conv", l.conv_kernel));
  BRIGADE_RETURN_IF_ERROR(read_positive(j, "mamba_expand", expand));
  d_ssm = expand * c.hidden_size;
  if (auto it = j.find("mamba_d_ssm"); it != j.end() && !it->is_null()) BRIGADE_RETURN_IF_ERROR(read_positive(j, "mamba_d_ssm", d_ssm));
  l.head_dim = d_ssm / l.n_heads;  // "auto"
  if (auto it = j.find("mamba_d_head"); it != j.end() && it->is_number_integer()) l.head_dim = it->get<int>();
  else if (it != j.end() && !(it->is_string() && it->get<std::string>() == "auto") && !it->is_null())
    return corrupt("config.json: mamba_d_head must be an integer or \"auto\"");
  if (l.head_dim <= 0 || l.d_inner() != d_ssm || l.n_heads % l.n_groups != 0)
    return invalid_argument("config.json: mamba_n_heads (" + std::to_string(l.n_heads) + ") * mamba_d_head (" +
                            std::to_string(l.head_dim) + ") must equal mamba_d_ssm (" + std::to_string(d_ssm) +
                            ") and be a multiple of mamba_n_groups (" + std::to_string(l.n_groups) + ")");
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mamba_conv_bias", c.ssm.conv_bias));
  bool in_bias = false, out_bias = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mamba_proj_bias", in_bias));
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "projectors_bias", out_bias));
  if (in_bias != out_bias)
    return unsupported("config.json: falcon_h1 with mamba_proj_bias (in_proj's bias) unlike projectors_bias "
                       "(out_proj's) is not supported");
  c.ssm.proj_bias = in_bias;
  c.ssm.gated_norm = false;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mamba_rms_norm", c.ssm.gated_norm));
  bool norm_before_gate = true;
  BRIGADE_RETURN_IF_ERROR(read_bool(j, "mamba_norm_before_gate", norm_before_gate));
  if (c.ssm.gated_norm && norm_before_gate)
    return unsupported("config.json: falcon_h1's mamba_rms_norm with mamba_norm_before_gate (the norm before the "
                       "gate) is not supported; the gated norm runs the gate first (mamba_norm_before_gate false)");
  BRIGADE_RETURN_IF_ERROR(read_time_step_limit(j, c));
  // muP.
  ModelConfig::MupMultipliers& m = c.mup;
  for (auto [key, out] : {std::pair{"ssm_in_multiplier", &m.ssm_in}, {"ssm_out_multiplier", &m.ssm_out},
                          {"attention_in_multiplier", &m.attn_in}, {"attention_out_multiplier", &m.attn_out},
                          {"key_multiplier", &m.key}, {"embedding_multiplier", &c.embedding_multiplier}})
    BRIGADE_RETURN_IF_ERROR(read_multiplier(j, key, *out));
  BRIGADE_RETURN_IF_ERROR(read_multipliers(j, "ssm_multipliers", m.ssm_rows.data(), m.ssm_rows.size()));
  float mlp[2];
  BRIGADE_RETURN_IF_ERROR(read_multipliers(j, "mlp_multipliers", mlp, 2));
  m.mlp_gate = mlp[0];
  m.mlp_down = mlp[1];
  float head = 1.0f;
  BRIGADE_RETURN_IF_ERROR(read_multiplier(j, "lm_head_multiplier", head));
  c.logits_scaling = 1.0f / head;
  BRIGADE_RETURN_IF_ERROR(read_eps(j, "rms_norm_eps", 1e-5f, c.rms_eps));
  BRIGADE_RETURN_IF_ERROR(read_common(j, c, 8192));
  return c;
}

}  // namespace brigade
